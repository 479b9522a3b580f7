"""The PyTorch engine's memory metrics: `bytes` moved by every counted op, `param-bytes` of the own parameters."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from examples.decoder import GPT, GPTConfig, Llama, LlamaConfig, gpt_inputs, llama_inputs  # noqa: E402
from pytest_flopbudget import Report, count  # noqa: E402
from pytest_flopbudget.metrics import BYTES, FLOPS, PARAM_BYTES, PARAMS  # noqa: E402


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
            return x.view(4, 6).transpose(0, 1).reshape(2, 12)[0]

    report = count(Views(), torch.randn(2, 12))
    assert report.metric(BYTES) == 0 and report.metric(FLOPS) == 0 and report.measures(BYTES)


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
