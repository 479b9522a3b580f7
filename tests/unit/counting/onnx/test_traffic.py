"""ONNX `bytes` and `param-bytes` from types alone (`counting/onnx/traffic.py`), each figure worked by hand.

A node moves every distinct input it reads once plus every output it writes once, at each tensor's own element
size; views and metadata move nothing; a gather reads its indices and only the rows it gathers. An initializer's
parameter bytes are its numel at its data type's size, once however many nodes read it. A size the graph does not
give leaves `bytes` not measured, with the reason in the report's conventions: never a low figure.
"""

from __future__ import annotations

from typing import Any

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._config.budget import parse_budget  # noqa: E402
from pytest_flopbudget._counting.onnx.traffic import CONVENTION, element_bits, moves_data, tensor_bytes  # noqa: E402
from pytest_flopbudget._judge.verdict import FindingKind, Measurement, evaluate  # noqa: E402
from pytest_flopbudget._metrics import BYTES, FLOPS, PARAM_BYTES, PEAK_MEMORY  # noqa: E402

F, F16, BF16, I8, I64 = (
    TensorProto.FLOAT,
    TensorProto.FLOAT16,
    TensorProto.BFLOAT16,
    TensorProto.INT8,
    TensorProto.INT64,
)


def weight(name: str, dims: list[int], elem: int = F) -> Any:
    """An initializer of zeros in `elem` (raw bytes are written, never read by the count)."""
    size = tensor_bytes(dims, elem)
    assert size is not None
    return helper.make_tensor(name, elem, dims, b"\0" * size, raw=True)


def node(op: str, inputs: list[str], outputs: list[str], layer: str, **attrs: Any) -> Any:
    return helper.make_node(op, inputs, outputs, name=f"/{layer}/{op}", **attrs)


def measured(report: Any) -> tuple[int, int]:
    assert report.measures(BYTES) and report.measures(PARAM_BYTES)
    return report.metric(BYTES), report.metric(PARAM_BYTES)


def test_a_matmul_reads_both_operands_and_writes_its_output(onnx_model):
    m = onnx_model([node("MatMul", ["x", "fc.weight"], ["y"], "fc")], inputs={"x": [4, 5]}, inits={"fc.weight": [5, 6]})
    report = count(m)
    # reads x 4*5*4 = 80 and W 5*6*4 = 120, writes y 4*6*4 = 96: 296 B; W holds 5*6*4 = 120 parameter bytes
    assert measured(report) == (80 + 120 + 96, 120)
    assert report.layers["fc"].get(BYTES) == 296 and report.layers["fc"].ops["MatMul"].get(BYTES) == 296
    assert report.layers["fc"].get(PARAM_BYTES) == 120
    assert report.to_dict()["totals"]["bytes"] == 296 and report.to_dict()["totals"]["param-bytes"] == 120
    assert not report.measures(PEAK_MEMORY) and "peak_memory" not in report.to_dict()  # never for ONNX
    assert report.conventions["bytes"] == CONVENTION  # its own words: the rule read from types


def test_each_tensor_counts_at_its_own_element_size():
    """fp16 x[2,8] @ fp16 W[8,4]: reads 2*8*2 = 32 + 8*4*2 = 64, writes 2*4*2 = 16: 112 B, W 64 parameter bytes.
    int8 V[8,4] dequantized by an fp32 scalar scale: reads 8*4*1 = 32 + 4, writes 8*4*4 = 128: 164 B; V holds
    32 parameter bytes (the 0-d scale is not a parameter). The fp16 product cast to bf16 reads 16 and writes 2*4*2
    = 16: 32 B. A bf16 bias b[4] added to it reads 16 + 4*2 = 8 and writes 16: 40 B, b 8 parameter bytes."""
    graph = helper.make_graph(
        [
            node("MatMul", ["x", "w16"], ["p"], "half"),
            node("DequantizeLinear", ["v8", "scale"], ["dq"], "quant"),
            node("Cast", ["p"], ["p16"], "cast", to=BF16),
            node("Add", ["p16", "b16"], ["y"], "bias"),
        ],
        "g",
        [helper.make_tensor_value_info("x", F16, [2, 8])],
        [helper.make_empty_tensor_value_info("y"), helper.make_empty_tensor_value_info("dq")],
        initializer=[
            weight("w16", [8, 4], F16),
            weight("v8", [8, 4], I8),
            helper.make_tensor("scale", F, [], [0.5]),
            weight("b16", [4], BF16),
        ],
    )
    report = count(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]))
    layers = {path: (cost.get(BYTES), cost.get(PARAM_BYTES)) for path, cost in report.layers.items()}
    assert layers == {"half": (112, 64), "quant": (164, 32), "cast": (32, 0), "bias": (40, 8)}
    assert measured(report) == (112 + 164 + 32 + 40, 64 + 32 + 8)


def test_sub_byte_and_unsized_element_types():
    assert tensor_bytes([3, 5], TensorProto.INT4) == 8  # 15 * 4 bits = 60 bits, packed: 8 whole bytes
    assert tensor_bytes([2, 2], TensorProto.FLOAT8E4M3FN) == 4 and tensor_bytes([], F) == 4  # a 0-d tensor: one
    assert element_bits(TensorProto.STRING) is None and element_bits(TensorProto.UNDEFINED) is None


def test_a_tied_initializer_is_one_parameter_but_each_node_reads_it(onnx_model):
    nodes = [node("MatMul", ["x", "w"], ["h"], "a"), node("MatMul", ["h", "w"], ["y"], "b")]
    report = count(onnx_model(nodes, inputs={"x": [2, 4]}, inits={"w": [4, 4]}))
    # w: 4*4*4 = 64 parameter bytes, once; each MatMul reads [2,4] 32 + w 64 and writes [2,4] 32 = 128 B
    assert measured(report) == (2 * 128, 64)


def test_an_input_read_twice_by_one_node_is_read_once(onnx_model):
    report = count(onnx_model([node("Mul", ["x", "x"], ["y"], "sq")], inputs={"x": [3, 4]}))
    assert measured(report) == (48 + 48, 0)  # reads x 3*4*4 = 48 once, writes 48


def test_views_and_metadata_move_nothing(onnx_model):
    shape = helper.make_tensor("shape", I64, [2], [6, 4])
    nodes = [
        node("Reshape", ["x", "shape"], ["r"], "view"),
        node("Transpose", ["r"], ["t"], "view"),  # a view in the PyTorch engine: free here too (documented)
        node("Unsqueeze", ["t", "axes"], ["u"], "view"),
        node("Identity", ["u"], ["y"], "view"),
    ]
    axes = helper.make_tensor("axes", I64, [1], [0])
    report = count(onnx_model(nodes, inputs={"x": [2, 3, 4]}, inits={"shape": shape, "axes": axes}))
    assert measured(report) == (0, 0) and not report.layers
    assert not any(moves_data("", op) for op in ("Reshape", "Flatten", "Squeeze", "Shape", "Size", "Constant"))


def test_a_gather_reads_only_the_rows_it_gathers(onnx_model):
    nodes = [node("Gather", ["emb.weight", "ids"], ["y"], "emb", axis=0)]
    report = count(onnx_model(nodes, inputs={"ids": (I64, [2, 3])}, inits={"emb.weight": [1000, 16]}))
    # reads ids 2*3*8 = 48 and 6 rows of 16 floats 6*16*4 = 384 (not the 64,000 B table), writes 384: 816 B
    assert measured(report) == (48 + 384 + 384, 1000 * 16 * 4)
    assert report.flops == 0 and report.layers["emb"].ops["Gather"].calls == 1  # recorded: no FLOPs, its bytes


def test_a_free_op_that_writes_a_new_tensor_moves_its_bytes(onnx_model):
    report = count(onnx_model([node("Concat", ["a", "b"], ["y"], "cat", axis=0)], inputs={"a": [2, 3], "b": [4, 3]}))
    assert measured(report) == (24 + 48 + 72, 0)  # reads 2*3*4 + 4*3*4, writes 6*3*4
    assert report.flops == 0 and report.skipped == {}


def test_a_loop_body_moves_its_bytes_once_per_iteration(onnx_model):
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["v_in", "w"], ["v_out"], name="/step/MatMul"),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "step",
        [
            helper.make_tensor_value_info("it", I64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_empty_tensor_value_info("v_in"),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_empty_tensor_value_info("v_out")],
    )
    loop = helper.make_node("Loop", ["M", "", "x"], ["y"], name="/rnn/Loop", body=body)
    trip = helper.make_tensor("M", I64, [], [5])
    report = count(onnx_model([loop], inputs={"x": [2, 4]}, inits={"w": [4, 4], "M": trip}))
    # each iteration: reads v [2,4] 32 and the outer w 64, writes [2,4] 32 = 128 B; 5 iterations
    assert measured(report) == (5 * 128, 64)


def test_an_unknown_shape_leaves_bytes_not_measured_with_the_reason(onnx_model):
    """NonZero's output length depends on the data: its bytes are unknown, so the model's bytes are not measured,
    while its FLOPs and its parameter bytes still are."""
    nodes = [node("MatMul", ["x", "w"], ["h"], "fc"), node("NonZero", ["h"], ["nz"], "mask")]
    report = count(onnx_model(nodes, inputs={"x": [2, 4]}, inits={"w": [4, 4]}))
    assert not report.measures(BYTES) and report.measures(PARAM_BYTES) and report.metric(PARAM_BYTES) == 64
    assert report.flops == 2 * 2 * 4 * 4 and report.skipped == {}
    assert report.metric(BYTES) == 0 and all(not cost.get(BYTES) for cost in report.layers.values())
    assert report.conventions["bytes"] == (
        "not measured: the shape of 'nz' of NonZero node '/mask/NonZero' is unknown after shape inference"
    )
    data = report.to_dict()
    assert "bytes" not in data["totals"] and "param-bytes" in data["totals"]
    verdict = evaluate(Measurement("m", report, parse_budget({"bytes": "1GiB"}, {})))
    assert [f.kind for f in verdict.findings] == [FindingKind.NOT_MEASURED]  # a budget on it fails, never passes


def test_bytes_beyond_what_a_report_holds_are_not_measured(onnx_model):
    """ConstantOfShape costs no FLOPs, so the FLOPs bound does not refuse it; its 4 * 10^36 bytes are not a figure."""
    shape = helper.make_tensor("shape", I64, [2], [10**18, 10**18])
    report = count(onnx_model([node("ConstantOfShape", ["shape"], ["y"], "fill")], inits={"shape": shape}))
    assert not report.measures(BYTES) and report.metric(FLOPS) == 0
    assert report.conventions["bytes"] == "not measured: its total is beyond what a report can hold (10^30 bytes)"


# --- agreement with the PyTorch engine on exported models ------------------------------------------------------


def exported(model: Any, args: tuple[Any, ...], path: Any, dynamo: bool) -> Any:
    """`model` exported to a real .onnx file at `path` and counted from it."""
    import contextlib
    import io
    import warnings

    torch = pytest.importorskip("torch")
    if dynamo:
        pytest.importorskip("onnxscript")
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), dynamo=dynamo, input_names=["input"])
    return count(str(path))


@pytest.mark.parametrize("dynamo", [False, True])
def test_an_exported_mlp_moves_the_bytes_the_pytorch_count_moves(tmp_path, dynamo):
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4, bias=False)).eval()
    x = torch.randn(3, 8)
    onnx_report, torch_report = exported(model, (x,), tmp_path / "mlp.onnx", dynamo), count(model, x)
    # 0: Gemm/addmm reads x 3*8*4 = 96, W 16*8*4 = 512, b 16*4 = 64, writes 3*16*4 = 192: 864 B
    # 1: ReLU reads 192, writes 192: 384 B;  2: bias-free MatMul/mm reads 192 + 4*16*4 = 256, writes 3*4*4 = 48: 496 B
    expected = {"0": (864, 576), "1": (384, 0), "2": (496, 256)}  # parameter bytes: (16*8 + 16)*4, 4*16*4
    for report in (onnx_report, torch_report):
        assert {path: (c.get(BYTES), c.get(PARAM_BYTES)) for path, c in report.layers.items()} == expected
        assert measured(report) == (1744, 832)


def test_an_exported_embedding_differs_only_by_the_gather_rule(tmp_path):
    torch = pytest.importorskip("torch")

    class Embed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(100, 8)
            self.fc = torch.nn.Linear(8, 4, bias=False)

        def forward(self, ids: Any) -> Any:
            return self.fc(self.emb(ids))

    model, ids = Embed().eval(), torch.zeros(2, 3, dtype=torch.int64)
    onnx_report, torch_report = exported(model, (ids,), tmp_path / "embed.onnx", False), count(model, ids)
    # parameters: the table 100*8*4 = 3,200 B and fc 4*8*4 = 128 B, in both counts
    assert onnx_report.metric(PARAM_BYTES) == torch_report.metric(PARAM_BYTES) == 3200 + 128
    # fc: reads [2,3,8] 192 and W 128, writes [2,3,4] 96: 416 B in both
    assert onnx_report.layers["fc"].get(BYTES) == torch_report.layers["fc"].get(BYTES) == 416
    # the Gather reads ids 2*3*8 = 48 and the 6 rows it gathers 6*8*4 = 192, writes 192: 432 B; whatever the
    # PyTorch engine charges its embedding lookup, everything else agrees
    gather = onnx_report.layers["emb"].ops["Gather"].get(BYTES)
    assert gather == 48 + 192 + 192
    assert onnx_report.metric(BYTES) - gather == torch_report.metric(BYTES) - torch_report.layers["emb"].get(BYTES)


def test_the_failure_of_a_bytes_budget_says_why_bytes_are_not_measured(onnx_model):
    nodes = [node("NonZero", ["x"], ["nz"], "mask")]
    report = count(onnx_model(nodes, inputs={"x": [2, 4]}))
    verdict = evaluate(Measurement("m", report, parse_budget({"bytes": "1GiB"}, {})))
    assert [f.message for f in verdict.findings] == [
        "bytes moved: not measured for this model (onnx): the shape of 'nz' of NonZero node '/mask/NonZero' is "
        "unknown after shape inference, so its bytes budget cannot be checked"
    ]


def test_an_identity_in_inference_moves_nothing(onnx_model):
    """Dropout in inference (its mask not written), Clip without bounds: the identity, which the PyTorch engine never
    sees; they are recorded at zero, as their FLOPs are."""
    nodes = [node("Dropout", ["x"], ["d", "mask"], "drop"), node("Clip", ["d"], ["y"], "clip")]
    report = count(onnx_model(nodes, inputs={"x": [2, 3]}, opset=13))
    assert measured(report) == (0, 0)
    assert report.layers["drop"].ops["Dropout"].calls == 1 and report.skipped == {}


def test_a_split_into_a_sequence_moves_its_tensor_and_a_concat_of_one_is_not_sized(onnx_model):
    """A sequence's bytes are not in the graph, but SplitToSequence's are its tensor's: reads x 4*3*4 = 48 and the
    split sizes 2*8 = 16, writes 48 into the sequence. ConcatFromSequence's output length is unknown after shape
    inference here, so a graph with it leaves bytes not measured."""
    split = helper.make_tensor("s", I64, [2], [2, 2])
    splitting = node("SplitToSequence", ["x", "s"], ["q"], "split")
    report = count(onnx_model([splitting], inputs={"x": [4, 3]}, inits={"s": split}))
    assert measured(report) == (48 + 16 + 48, 0)
    concat = node("ConcatFromSequence", ["q"], ["y"], "cat", axis=0)
    report = count(onnx_model([splitting, concat], inputs={"x": [4, 3]}, inits={"s": split}))
    assert not report.measures(BYTES)
    assert report.conventions["bytes"].startswith("not measured: the shape of 'y' of ConcatFromSequence node")


def test_a_function_op_moves_what_its_body_moves(onnx_model):
    """SwiGLU has no formula: its body, Swish(a) then Mul(., b), is counted and charged to it, bytes too. Swish reads
    a 2*3*4*4 = 96 and writes 96; Mul reads that and b (96 + 96) and writes 96: 480 B."""
    try:
        onnx.defs.get_schema("SwiGLU", 28, "")
    except Exception:
        pytest.skip(f"onnx {onnx.__version__} has no SwiGLU")
    m = onnx_model([node("SwiGLU", ["a", "b"], ["y"], "mlp")], inputs={"a": [2, 3, 4], "b": [2, 3, 4]}, opset=28)
    report = count(m)
    assert measured(report) == (192 + 288, 0) and report.ops["SwiGLU"].get(BYTES) == 480


def test_shape_arithmetic_moves_nothing(onnx_model):
    """Shape -> Gather -> Mod -> Unsqueeze -> Concat builds a Reshape target: integers fixed before the graph runs,
    which a runtime folds and a PyTorch model computes in Python. Only the Relu on the data moves bytes: reads and
    writes 2*12*4 = 96 each."""
    consts = {
        "zero": helper.make_tensor("zero", I64, [], [1]),
        "three": helper.make_tensor("three", I64, [], [5]),
        "axes": helper.make_tensor("axes", I64, [1], [0]),
        "minus": helper.make_tensor("minus", I64, [1], [-1]),
    }
    nodes = [
        node("Shape", ["x"], ["s"], "shape"),
        node("Gather", ["s", "zero"], ["d"], "shape", axis=0),
        node("Mod", ["d", "three"], ["m"], "shape"),  # 12 mod 5 = 2
        node("Unsqueeze", ["m", "axes"], ["u"], "shape"),
        node("Concat", ["u", "minus"], ["target"], "shape", axis=0),
        node("Reshape", ["x", "target"], ["r"], "shape"),
        node("Relu", ["r"], ["y"], "act"),
    ]
    report = count(onnx_model(nodes, inputs={"x": [2, 12]}, inits=consts))
    assert measured(report) == (96 + 96, 0)
    assert report.layers["shape"].get(BYTES) == 0 and "Concat" not in report.layers["shape"].ops
