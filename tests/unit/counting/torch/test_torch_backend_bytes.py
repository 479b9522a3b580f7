"""The PyTorch engine's memory metrics: `bytes` moved by every op (counted ones, and those free of FLOPs that copy,
gather or fill), `param-bytes` of the own parameters and `buffer-bytes` of the own buffers."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from examples.decoder import GPT, GPTConfig, Llama, LlamaConfig, gpt_inputs, llama_inputs  # noqa: E402
from pytest_flopbudget import Report, count  # noqa: E402
from pytest_flopbudget._metrics import BUFFER_BYTES, BYTES, FLOPS, PARAM_BYTES, PARAMS  # noqa: E402
from pytest_flopbudget._report import OpCost  # noqa: E402


def test_a_bias_free_bf16_linear_moves_its_input_weight_and_output_once() -> None:
    # x[T=4, K=5] and W[N=6, K=5] read, y[T=4, N=6] written, 2 bytes each in bf16:
    # (4*5 + 6*5 + 4*6) * 2 = (20 + 30 + 24) * 2 = 148 bytes (the transpose of W is a view: it moves nothing)
    model = nn.Linear(5, 6, bias=False).to(torch.bfloat16)
    report = count(model, torch.randn(4, 5, dtype=torch.bfloat16))
    assert report.metric(BYTES) == 148
    assert report.layers[""].ops["aten.mm"].get(BYTES) == 148
    assert report.metric(PARAM_BYTES) == 6 * 5 * 2 and report.measures(BYTES) and report.measures(PARAM_BYTES)


def test_per_layer_bytes_add_up_to_the_forward_and_backward_totals() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    report = count(model, torch.randn(2, 8), training=True)
    layers = report.layer_metric(BYTES)
    assert report.forward.get(BYTES) > 0 and report.backward.get(BYTES) > 0
    assert sum(layers.values()) == report.metric(BYTES) == report.forward.get(BYTES) + report.backward.get(BYTES)
    assert sum(op.get(BYTES) for op in report.ops.values()) == report.metric(BYTES)
    # fp32 parameters: 4 bytes each, on the layer that owns them
    assert report.layer_metric(PARAM_BYTES) == {path: 4 * n for path, n in report.layer_metric(PARAMS).items()}


def test_a_view_only_model_moves_nothing() -> None:
    class Views(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.view(4, 6).reshape(2, 12)[0].transpose(0, -1)

    report = count(Views(), torch.randn(2, 12))
    assert report.metric(BYTES) == 0 and report.metric(FLOPS) == 0 and report.measures(BYTES)
    assert report.ops == {} and report.layers == {}


def test_a_reshape_that_must_copy_moves_its_tensor_once_each_way() -> None:
    class TransposeThenReshape(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.view(4, 6).transpose(0, 1).reshape(2, 12)[0]

    # the transposed [6, 4] view is not contiguous: reshape copies it (24 fp32 read, 24 written), then views
    report = count(TransposeThenReshape(), torch.randn(2, 12))
    assert report.metric(BYTES) == 24 * 4 + 24 * 4 == 192 and report.metric(FLOPS) == 0


def test_an_in_place_op_reads_its_inputs_and_writes_its_output_once() -> None:
    class InPlace(nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            z = x * y  # reads x and y, writes z: 3 * 10 floats
            return z.add_(y)  # reads z and y, writes z once: 3 * 10 floats

    report = count(InPlace(), torch.randn(10), torch.randn(10))
    assert report.ops["aten.add"].get(BYTES) == 3 * 10 * 4  # in-place ops are recorded under their op's name
    assert report.metric(BYTES) == 2 * 3 * 10 * 4


def test_an_op_reading_one_tensor_twice_reads_it_once() -> None:
    class Square(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * x

    assert count(Square(), torch.randn(8, dtype=torch.float16)).metric(BYTES) == (8 + 8) * 2


def test_the_bytes_memo_tells_a_square_from_a_product_of_the_same_shapes() -> None:
    """The shape memo answers `a * b` from `a * a` (same shapes and dtypes); the bytes must not be replayed."""

    class SquareThenProduct(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return (a * a) + (a * b)

    a, b = torch.randn(4, 5), torch.randn(4, 5)  # 20 fp32 elements = 80 bytes each
    # a*a: read a, write 80 = 160; a*b: read a and b, write 80 = 240; (+): read two 80s, write 80 = 240
    assert count(SquareThenProduct(), a, b).metric(BYTES) == 160 + 240 + 240


def test_the_in_place_memo_tells_apart_aliasing_scalars_and_shapes() -> None:
    """In-place ops of matching shapes skip shape propagation (the shape memo's shortcut) and have their cost and
    bytes memoised: `z.add_(z)` reads one tensor where `z.add_(y)` reads two, `mul_(3.0)` and `mul_(y)` differ,
    and another shape is another entry."""

    class InPlaceMix(nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            z = x.clone()  # reads and writes 10 floats: 80 bytes
            z.add_(y)  # reads z and y, writes z: 120
            z.add_(z)  # reads z once, writes it: 80
            z.add_(y, alpha=2.0)  # 120 (a scalar argument of its own: another memo entry)
            z.mul_(3.0)  # reads z, writes z: 80
            z.mul_(y)  # 120
            w.relu_()  # 6 floats read and written: 48
            w.relu_()  # 48
            return z

    report = count(InPlaceMix(), torch.randn(10), torch.randn(10), torch.randn(6))
    assert report.ops["aten.add"].calls == 3
    assert report.ops["aten.add"].get(BYTES) == 120 + 80 + 120
    assert report.ops["aten.mul"].get(BYTES) == 80 + 120
    assert report.ops["aten.relu"].get(BYTES) == 48 + 48
    assert report.metric(BYTES) == 80 + 320 + 200 + 96
    assert report.ops["aten.add"].flops == 3 * 10
    assert report.ops["aten.relu"].flops == 12


def test_llama_7b_in_bf16_on_meta_has_two_bytes_per_parameter() -> None:
    config = LlamaConfig.llama_7b()
    with torch.device("meta"):
        model = Llama(config).to(torch.bfloat16)
    report = count(model, *llama_inputs(config, seq=8))
    assert report.params == 6_738_415_616
    assert report.metric(PARAM_BYTES) == 2 * 6_738_415_616 == 13_476_831_232
    # every weight but the embedding table (a lookup of 8 rows, free) is read at least once
    embedding = 2 * model.embed_tokens.weight.numel()
    assert report.metric(BYTES) > report.metric(PARAM_BYTES) - embedding


def test_fp32_model_has_four_bytes_per_parameter_and_tied_weights_count_once() -> None:
    config = GPTConfig.tiny()
    model = GPT(config)
    assert model.lm_head.weight is model.wte.weight
    report = count(model, *gpt_inputs(config))
    assert report.metric(PARAM_BYTES) == 4 * report.params == 4 * sum(p.numel() for p in model.parameters())


def test_buffers_are_not_parameter_bytes() -> None:
    model = nn.BatchNorm1d(8).eval()  # 16 parameters, and running statistics (buffers) not counted
    assert count(model, torch.randn(2, 8)).metric(PARAM_BYTES) == 16 * 4


def test_the_json_carries_both_and_reads_back() -> None:
    report = count(nn.Linear(5, 6, bias=False).to(torch.bfloat16), torch.randn(4, 5, dtype=torch.bfloat16))
    data = json.loads(json.dumps(report.to_dict()))
    assert data["totals"]["bytes"] == 148 and data["totals"]["param-bytes"] == 60
    assert data["layers"][""]["ops"]["aten.mm"]["metrics"]["bytes"] == 148
    assert "bytes" in data["conventions"] and "param-bytes" in data["conventions"]
    assert Report.from_dict(data) == report


# --- ops free of FLOPs that still move memory (counting/torch/traffic.py) ----------------------------------------


class Call(nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def moved(fn: Callable[..., Any], *inputs: Any) -> dict[str, int]:
    """op -> bytes, in fake mode; real execution moves the same bytes op by op, and FLOP-free ops cost no FLOPs."""
    report = count(Call(fn), *inputs)
    real = count(Call(fn), *inputs, execution="real")
    by_op = {op: cost.get(BYTES) for op, cost in report.ops.items()}
    assert by_op == {op: cost.get(BYTES) for op, cost in real.ops.items()}
    assert report.metric(BYTES) == sum(by_op.values()) == sum(report.layer_metric(BYTES).values())
    return by_op


def test_an_embedding_lookup_reads_its_ids_and_the_rows_it_looks_up_not_the_table() -> None:
    # 10 int64 ids (80 B) and 10 rows of 16 fp32 (640 B) read, the [10, 16] output written (640 B)
    report = count(nn.Embedding(1000, 16), torch.randint(0, 1000, (10,)))
    assert report.metric(BYTES) == 10 * 8 + 10 * 16 * 4 + 10 * 16 * 4 == 1360
    # listed per op with no FLOPs, on the layer that ran it
    assert report.ops["aten.embedding"] == OpCost(1, {BYTES: 1360})
    assert (report.flops, report.macs, report.layer_metric(BYTES)) == (0, 0, {"": 1360})


def test_cat_reads_its_inputs_and_writes_their_concatenation() -> None:
    # two [2, 3] fp32 read (2 * 24 B), the [4, 3] result written (48 B)
    assert moved(lambda a, b: torch.cat([a, b]), torch.randn(2, 3), torch.randn(2, 3)) == {"aten.cat": 96}


def test_gathers_read_their_indices_and_what_they_gather() -> None:
    x = torch.randn(2, 3, 4)  # 24 fp32
    # index_select of 2 of 3 rows along dim 1: the int64 index (16 B), 2*2*4 = 16 elements read (64 B) and written
    assert moved(lambda t: t.index_select(1, torch.tensor([0, 2])), x) == {"aten.index_select": 16 + 64 + 64}
    # gather of a [2, 3, 2] int64 index (96 B): 12 elements read (48 B) and written (48 B)
    index = torch.zeros(2, 3, 2, dtype=torch.long)
    assert moved(lambda t, i: torch.gather(t, 2, i), x, index) == {"aten.gather": 96 + 48 + 48}
    # advanced indexing t[:, i] with a [2] int64 index: [2, 2, 4] gathered
    assert moved(lambda t, i: t[:, i], x, torch.tensor([0, 2])) == {"aten.index": 16 + 64 + 64}


def test_copy_reads_its_source_and_writes_its_destination_without_reading_it() -> None:
    # copy_ of a [5] fp32 source broadcast into a [4, 5] destination: 20 B read, 80 B written; empty moves nothing
    assert moved(lambda src: torch.empty(4, 5).copy_(src), torch.randn(5)) == {"aten.copy": 20 + 80}


def test_copies_and_dtype_conversions_read_and_write_each_at_its_own_element_size() -> None:
    x = torch.randn(4, 5)  # 80 B
    assert moved(lambda t: t.clone(), x) == {"aten.clone": 80 + 80}
    assert moved(lambda t: t.to(torch.float16), x) == {"aten._to_copy": 80 + 40}
    # a non-contiguous view made contiguous is a copy; a contiguous one is itself and moves nothing
    assert moved(lambda t: t.t().contiguous(), x) == {"aten.clone": 80 + 80}
    assert moved(lambda t: t.contiguous(), x) == {}


def test_padding_reads_its_input_and_writes_the_padded_output() -> None:
    # [2, 3] fp32 (24 B) padded to [2, 5] (40 B)
    assert moved(lambda t: F.pad(t, (1, 1)), torch.randn(2, 3)) == {"aten.constant_pad_nd": 24 + 40}


def test_fills_and_factories_write_without_reading() -> None:
    x = torch.randn(4, 5)  # 80 B
    assert moved(lambda: torch.zeros(4, 5)) == {"aten.zeros": 80}
    assert moved(lambda t: torch.zeros_like(t) + 0, x)["aten.zeros_like"] == 80  # x is not read
    assert moved(lambda t: t.clone().fill_(1.0), x) == {"aten.clone": 160, "aten.fill": 80}
    assert moved(lambda t: torch.empty_like(t), x) == {}  # an allocation writes nothing


def test_views_and_metadata_ops_move_nothing() -> None:
    views: list[Callable[[Any], Any]] = [
        lambda t: t.view(6, 4),
        lambda t: t.transpose(0, 2),
        lambda t: t.permute(2, 0, 1),
        lambda t: t.t() if t.dim() == 2 else t.flatten(1).t(),
        lambda t: t.unsqueeze(0).expand(5, 2, 3, 4),
        lambda t: t[:, 1:, ::2],
        lambda t: t.select(1, 0),
        lambda t: t.as_strided((2, 2), (1, 2)),
        lambda t: t.detach(),
        lambda t: torch.ops.aten.alias(t),
        lambda t: t.split(1, 1)[0],
        lambda t: t.reshape(6, 4).unflatten(0, (2, 3)),
    ]
    for fn in views:
        report = count(Call(fn), torch.randn(2, 3, 4))
        assert (report.ops, report.metric(BYTES)) == ({}, 0)


def test_a_backward_does_not_write_the_gradients_its_output_mask_turns_off() -> None:
    # BatchNorm2d(3) training on x[2, 3, 5, 5] fp32 (150 elements, 600 B) that needs no gradient. The backward
    # reads grad_output and x (600 B each) and the five [3] statistics and weights (60 B); it writes the weight's
    # and bias's gradients (12 B each) and no input gradient (fake mode builds one, the real kernel does not).
    report = count(nn.BatchNorm2d(3), torch.randn(2, 3, 5, 5), training=True)
    assert report.ops["aten.native_batch_norm_backward"].get(BYTES) == 600 + 600 + 60 + 24
    real = count(nn.BatchNorm2d(3), torch.randn(2, 3, 5, 5), training=True, execution="real")
    assert real.ops["aten.native_batch_norm_backward"].get(BYTES) == 600 + 600 + 60 + 24


def test_flops_macs_and_skipped_ops_do_not_change_with_the_bytes_of_free_ops() -> None:
    config = GPTConfig.tiny()
    report = count(GPT(config), *gpt_inputs(config))
    free = {op: cost for op, cost in report.ops.items() if cost.flops == 0 and cost.macs == 0}
    assert "aten.embedding" in free and all(cost.values.keys() == {BYTES} for cost in free.values())
    # the figures of the revision before free ops moved bytes (8e77c66), and its ops
    assert (report.flops, report.macs, report.skipped) == (3_623_936, 1_769_472, {})
    assert sorted(set(report.ops) - set(free)) == [
        "aten._scaled_dot_product_flash_attention_for_cpu",
        "aten.add",
        "aten.addmm",
        "aten.gelu",
        "aten.mm",
        "aten.native_layer_norm",
    ]


# --- data-dependent sizes -----------------------------------------------------------------------------------------


class NonzeroThenMatmul(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(2, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(x).float() @ self.w


def test_a_data_dependent_size_moves_its_upper_bound_and_is_listed_as_estimated() -> None:
    # x[5, 2] fp32 has at most 10 nonzeros: nonzero reads x (40 B) and writes [10, 2] int64 (160 B); the float
    # conversion reads 160 B and writes 80 B; the matmul [10, 2] @ [2, 4] reads 80 + 32 B and writes 160 B
    report = count(NonzeroThenMatmul(), torch.randn(5, 2))
    assert report.measures(BYTES) and report.estimated == {"aten.nonzero": 1}
    assert {op: cost.get(BYTES) for op, cost in report.ops.items()} == {
        "aten.nonzero": 40 + 160,
        "aten._to_copy": 160 + 80,
        "aten.mm": 80 + 32 + 160,
    }


def test_a_size_fake_mode_cannot_bound_leaves_bytes_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an upper bound the nonzero's size stays an unbacked symbol: its bytes have no figure, and a part
    of the traffic is no figure either, so the report measures no `bytes` (a budget on it cannot be checked)."""
    from pytest_flopbudget._counting.torch.data_dependent import UpperBounds

    monkeypatch.setattr(UpperBounds, "concretize", lambda self, key, args, out: (out, False))
    report = count(NonzeroThenMatmul(), torch.randn(5, 2))
    assert not report.measures(BYTES) and report.measures(PARAM_BYTES)
    assert report.skipped == {"aten.mm": 1}  # its FLOPs formula cannot read the size either
    assert report.ops == {} and report.metric(BYTES) == 0
    data = report.to_dict()
    assert "bytes" not in data["totals"] and Report.from_dict(json.loads(json.dumps(data))) == report


def test_bytes_of_an_unbacked_size_raise_rather_than_count_nothing() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from pytest_flopbudget._counting.torch.traffic import Unsized, bytes_moved, free_op_traffic, tensor_bytes

    shapes = ShapeEnv()
    with FakeTensorMode(shape_env=shapes):
        rows = torch.empty(shapes.create_unbacked_symint(), 4)
        known = torch.empty(3, 4)
        assert tensor_bytes([known, known]) == 48
        with pytest.raises(Unsized):
            tensor_bytes([rows])
        with pytest.raises(Unsized):
            bytes_moved(torch.ops.aten.cat.default, ([rows, known],), {}, torch.cat([rows, known]))
        embedding = free_op_traffic(torch.ops.aten.embedding.default, "aten.embedding")
        assert embedding is not None
        ids = torch.empty(shapes.create_unbacked_symint(), dtype=torch.long)
        with pytest.raises(Unsized):
            embedding(torch.ops.aten.embedding.default, (known, ids), {}, torch.empty(ids.shape[0], 4))


# --- buffer-bytes ---------------------------------------------------------------------------------------------------


def test_batch_norm_buffers_are_their_running_statistics_and_step_count() -> None:
    # running_mean and running_var: 8 fp32 each (32 B each); num_batches_tracked: one int64 (8 B)
    report = count(nn.BatchNorm2d(8).eval(), torch.randn(1, 8, 2, 2))
    assert report.metric(BUFFER_BYTES) == 8 * 4 + 8 * 4 + 8 == 72
    assert report.metric(PARAM_BYTES) == 2 * 8 * 4 and report.measures(BUFFER_BYTES)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["totals"]["buffer-bytes"] == 72 and data["layers"][""]["metrics"]["buffer-bytes"] == 72
    assert "buffer-bytes" in data["conventions"] and Report.from_dict(data) == report


def test_buffers_count_on_their_layer_once_non_persistent_ones_included() -> None:
    class Rotary(nn.Module):
        def __init__(self, table: torch.Tensor) -> None:
            super().__init__()
            self.register_buffer("inv_freq", table, persistent=False)  # not in the state_dict, but held in memory

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.inv_freq

    table = torch.ones(16, dtype=torch.bfloat16)  # 32 B, shared by both layers: counted once, on the first
    model = nn.Sequential(Rotary(table), Rotary(table), nn.BatchNorm1d(16, dtype=torch.bfloat16))
    report = count(model.eval(), torch.randn(2, 16, dtype=torch.bfloat16))
    # the batch norm: 16 bf16 running means and variances (32 B each) and its int64 step count (8 B)
    assert report.layer_metric(BUFFER_BYTES) == {"0": 32, "1": 0, "2": 32 + 32 + 8}
    assert report.metric(BUFFER_BYTES) == 32 + 72


def test_a_model_without_buffers_measures_zero_buffer_bytes() -> None:
    report = count(nn.Linear(5, 6), torch.randn(4, 5))
    assert report.measures(BUFFER_BYTES) and report.metric(BUFFER_BYTES) == 0


@pytest.mark.parametrize(
    ("op", "rule"),
    [
        ("detach_.default", None),  # in-place views and metadata: nothing moves
        ("transpose_.default", None),
        ("as_strided_.default", None),
        ("set_.source_Tensor", None),
        ("resize_.default", None),
        ("_unsafe_view.default", None),  # a view whose schema does not say so
        ("empty.memory_format", None),
        ("split_with_sizes.default", None),
        ("copy_.default", "_overwritten"),
        ("fill_.Scalar", "_overwritten"),
        ("zeros_like.default", "_overwritten"),
        ("embedding.default", "_gathered"),
        ("index.Tensor", "_gathered"),
        ("cat.default", "bytes_moved"),
        ("masked_fill_.Scalar", "bytes_moved"),  # the positions written depend on data: the whole tensor counts
    ],
)
def test_each_free_op_has_the_rule_its_schema_and_kind_give(op: str, rule: str | None) -> None:
    from pytest_flopbudget._counting.torch.ops import op_key
    from pytest_flopbudget._counting.torch.traffic import free_op_traffic

    packet, overload = op.split(".")
    func = getattr(getattr(torch.ops.aten, packet), overload)
    found = free_op_traffic(func, op_key(func))
    assert (found.__name__ if found is not None else None) == rule
