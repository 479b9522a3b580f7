"""Shapes strict ONNX inference leaves open, filled so that the compute after them counts (issue 9).

- The TorchScript exporter writes `x.expand(b, s)` as `Expand(x, Where(Equal(shape, -1), ones, shape))`, with
  `ones = ConstantOfShape(Shape(shape))`. ONNX data propagation stops at `Equal`/`Where`, so `Expand` gets unknown
  dims; at batch 1 the broadcast of 1 against an unknown dim stays unknown, and every matmul after the
  embeddings of an exported BERT was skipped (0 MACs). The constant folder now follows the pattern.
- MeanVarianceNormalization at opset >= 13 without `axes`: strict inference fails on its function body, which
  reads `@axes`; the schema defaults are spelled out and inference retried.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from typing import Any

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.onnx.consts import ConstFolder  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def exact(report: Any) -> tuple[int, int]:
    assert report.skipped == {}, report.skipped_ops
    return report.flops, report.macs


def i64(name: str, values: list[int], dims: list[int] | None = None) -> Any:
    return helper.make_tensor(name, I64, [len(values)] if dims is None else dims, values)


def expand_pattern_model(with_where: bool = True) -> Any:
    """`token_type_ids[:, :s].expand(b, s)`, then embeddings and a projection, as TorchScript exports BERT's.

    ids [batch, seq] -> word embedding [b, s, 8] + token-type embedding of the expanded buffer [b, s, 8]
    -> MatMul [8, 4].
    """
    nodes = [
        helper.make_node("Shape", ["ids"], ["shape_ids"]),
        helper.make_node("Gather", ["shape_ids", "zero"], ["b"], axis=0),
        helper.make_node("Gather", ["shape_ids", "one"], ["s"], axis=0),
        helper.make_node("Unsqueeze", ["b", "axis0"], ["b1"]),
        helper.make_node("Unsqueeze", ["s", "axis0"], ["s1"]),
        helper.make_node("Slice", ["buffer", "axis0", "s1", "one1"], ["tt"]),  # buffer[:, :s] -> [1, s]
        helper.make_node("Concat", ["b1", "s1"], ["target"], axis=0),  # [b, s]
    ]
    if with_where:  # the exporter's guard against -1 in expand's sizes
        nodes += [
            helper.make_node("Shape", ["target"], ["target_len"]),
            helper.make_node("ConstantOfShape", ["target_len"], ["ones"], value=i64("v", [1])),
            helper.make_node("Mul", ["ones", "minus_one"], ["neg"]),
            helper.make_node("Equal", ["target", "neg"], ["is_neg"]),
            helper.make_node("Where", ["is_neg", "ones", "target"], ["sizes"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["target"], ["sizes"]))
    nodes += [
        helper.make_node("Expand", ["tt", "sizes"], ["tt_b"]),
        helper.make_node("Gather", ["word", "ids"], ["e_word"]),
        helper.make_node("Gather", ["tok", "tt_b"], ["e_tok"]),
        helper.make_node("Add", ["e_word", "e_tok"], ["h"], name="/embeddings/Add"),
        helper.make_node("MatMul", ["h", "w"], ["y"], name="/encoder/query/MatMul"),
    ]
    inits = [
        helper.make_tensor("buffer", I64, [1, 16], [0] * 16),
        helper.make_tensor("zero", I64, [], [0]),
        helper.make_tensor("one", I64, [], [1]),
        i64("axis0", [0]),
        i64("one1", [1]),
        helper.make_tensor("minus_one", I64, [], [-1]),
        helper.make_tensor("word", F, [100, 8], b"\0" * 3200, raw=True),
        helper.make_tensor("tok", F, [2, 8], b"\0" * 64, raw=True),
        helper.make_tensor("w", F, [8, 4], b"\0" * 128, raw=True),
    ]
    graph = helper.make_graph(
        nodes,
        "bert_embeddings",
        [helper.make_tensor_value_info("ids", I64, ["batch", "seq"])],
        [helper.make_empty_tensor_value_info("y")],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("batch", [1, 2, 3])
def test_expand_through_where_equal_pattern_counts_at_every_batch(batch):
    report = count(expand_pattern_model(), inputs={"ids": [batch, 5]})
    # h [b,5,8]: the embedding Add is 40*b FLOPs; the MatMul b*5 rows x 8 -> 4: 160*b MACs, 320*b FLOPs;
    # the exporter's Mul and Equal on the 2-element size vector: 2 + 2 (shape arithmetic is counted as elementwise)
    assert exact(report) == (batch * (40 + 320) + 4, batch * 160)
    assert report.layers["encoder.query"].macs == batch * 160


def test_expand_pattern_without_where_is_the_reference():
    # the same graph with the sizes passed straight to Expand: Add 40 + MatMul 2*160, no shape arithmetic
    assert exact(count(expand_pattern_model(with_where=False), inputs={"ids": [1, 5]})) == (360, 160)


def test_folder_evaluates_the_where_equal_chain():
    model = expand_pattern_model()
    inferred = onnx.shape_inference.infer_shapes(model)
    dims = {"ids": (1, 5), "target": (2,)}  # what shape inference gives, with ids bound to [1, 5]
    folder = ConstFolder(inferred.graph, lambda name: dims.get(name))
    assert folder.ints("target") == [1, 5]
    assert folder.ints("ones") == [1, 1]  # ConstantOfShape with an int64 fill
    assert folder.ints("is_neg") == [0, 0]
    assert folder.ints("sizes") == [1, 5]  # Where picks `target` where it is not -1


def test_folder_leaves_float_constant_of_shape_alone():
    node = helper.make_node("ConstantOfShape", ["shape"], ["zeros"])  # default fill: float 0.0, not shape data
    graph = helper.make_graph(
        [node], "g", [], [helper.make_empty_tensor_value_info("zeros")], initializer=[i64("shape", [2, 3])]
    )
    assert ConstFolder(graph, lambda name: None).ints("zeros") is None


# --- a model exported by torch.onnx (TorchScript exporter), dynamic batch and sequence -------------------------


def export_tiny_bert(tmp_path: Any) -> tuple[str, int]:
    """A BERT-like encoder layer whose embeddings use HF BERT's buffers: position_ids[:, :s] and
    token_type_ids[:, :s].expand(b, s). Returns the path and the hidden size."""
    torch = pytest.importorskip("torch")
    from torch import nn

    hidden, heads = 16, 2

    class TinyBert(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.word = nn.Embedding(50, hidden)
            self.position = nn.Embedding(32, hidden)
            self.token_type = nn.Embedding(2, hidden)
            self.register_buffer("position_ids", torch.arange(32).expand((1, -1)), persistent=False)
            self.register_buffer("token_type_ids", torch.zeros(1, 32, dtype=torch.long), persistent=False)
            self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
            self.out = nn.Linear(hidden, hidden)

        def forward(self, input_ids: Any) -> Any:
            b, s = input_ids.shape
            token_types = self.token_type_ids[:, :s].expand(b, s)
            h = self.word(input_ids) + self.position(self.position_ids[:, :s]) + self.token_type(token_types)

            def split(x: Any) -> Any:
                return x.view(b, s, heads, -1).transpose(1, 2)

            q, k, v = split(self.query(h)), split(self.key(h)), split(self.value(h))
            a = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
            return self.out(a.transpose(1, 2).reshape(b, s, hidden))

    path = str(tmp_path / "tiny_bert.onnx")
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            TinyBert().eval(),
            (torch.zeros(2, 8, dtype=torch.long),),
            path,
            dynamo=False,
            opset_version=17,
            input_names=["input_ids"],
            dynamic_axes={"input_ids": {0: "batch", 1: "seq"}},
        )
    return path, hidden


@pytest.mark.parametrize(("batch", "seq"), [(1, 8), (1, 12), (2, 8)])
def test_torchscript_bert_embeddings_count_at_batch_one(tmp_path, batch, seq):
    path, hidden = export_tiny_bert(tmp_path)
    model = onnx.load(path)
    assert {"Where", "Equal", "ConstantOfShape", "Expand"} <= {n.op_type for n in model.graph.node}
    report = count(path, inputs={"input_ids": [batch, seq]})
    assert report.skipped == {}, report.skipped_ops
    rows = batch * seq
    # 4 linears: 4 * rows*16*16; attention over 2 heads of 8: QK^T and AV each batch*2*seq*seq*8
    macs = 4 * rows * hidden * hidden + 2 * batch * 2 * seq * seq * 8
    assert report.macs == macs  # batch 1, seq 8: 16384 + 2048 = 18432 (was 0: every matmul skipped)


# --- MeanVarianceNormalization through its function body -------------------------------------------------------


@pytest.mark.parametrize("opset", [9, 13, 18, 21])
def test_mean_variance_normalization_without_axes_at_every_opset(onnx_model, opset):
    m = onnx_model(
        [helper.make_node("MeanVarianceNormalization", ["x"], ["y"])], inputs={"x": [2, 3, 4, 5]}, opset=opset
    )
    # default axes [0, 2, 3]; 2*3*4*5 = 120 elements * (stats 4 + apply 2) = 720
    assert exact(count(m)) == (720, 0)


def test_mean_variance_normalization_in_a_loop_body(onnx_model):
    body = helper.make_graph(
        [
            helper.make_node("MeanVarianceNormalization", ["x"], ["out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("out", F, None),
        ],
    )
    loop = helper.make_node("Loop", ["trip", ""], ["stacked"], body=body)
    m = onnx_model([loop], inputs={"x": [1, 2, 3, 4]}, inits={"trip": i64("trip", [3], [])}, opset=18)
    # 3 iterations * 24 elements * 6
    assert exact(count(m)) == (3 * 24 * 6, 0)


def test_a_real_shape_error_still_fails_after_the_repairs(onnx_model):
    from pytest_flopbudget._errors import CountingError

    nodes = [helper.make_node("MeanVarianceNormalization", ["x"], ["n"]), helper.make_node("MatMul", ["n", "w"], ["y"])]
    m = onnx_model(nodes, inputs={"x": [2, 3, 4, 5]}, inits={"w": [7, 2]}, opset=18)
    with pytest.raises(CountingError, match=r"shape inference failed.*MatMul"):
        count(m)  # [.., 5] @ [7, 2]: the MVN repair is applied and the MatMul error is still reported


# --- reduction axes computed in the graph ----------------------------------------------------------------------


def test_reduce_axes_from_range_over_the_rank(onnx_model):
    """RMSNormalization's function body, as onnx expands it: the axes are Range(axis, Size(Shape(X)), 1)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Size", ["shape"], ["rank"]),
        helper.make_node("Range", ["axis", "rank", "one"], ["axes"]),
        helper.make_node("Mul", ["x", "x"], ["sq"]),
        helper.make_node("ReduceMean", ["sq", "axes"], ["ms"]),
        helper.make_node("Add", ["ms", "eps"], ["mse"]),
        helper.make_node("Sqrt", ["mse"], ["rms"]),
        helper.make_node("Div", ["x", "rms"], ["normed"]),
        helper.make_node("Mul", ["normed", "w"], ["y"]),
    ]
    inits = {
        "axis": helper.make_tensor("axis", I64, [], [1]),
        "one": helper.make_tensor("one", I64, [], [1]),
        "eps": helper.make_tensor("eps", F, [], [1e-5]),
        "w": [4],
    }
    m = onnx_model(nodes, inputs={"x": [3, 4]}, inits=inits, opset=18)
    # x [3,4] = 12: square 12, mean over axis 1 reads 12, + eps and sqrt on the [3,1] statistics 3 + 3,
    # divide 12, weight 12 = 54 (without folding Range, the [3,1] shape is unknown and 4 ops were skipped)
    assert exact(count(m)) == (54, 0)
