"""Cross-check: the example models exported with both torch exporters count like the PyTorch backend says.

Each model is exported once per module (to tmp_path; nothing is committed) with the TorchScript exporter
(`dynamo=False`) and the dynamo exporter (`dynamo=True`, needs onnxscript). Parameters and buffers are randomised
first, as in a trained model: the exporters treat fresh initialisations specially (the dynamo optimizer drops
all-zero biases, the TorchScript exporter merges initializers with equal values), which is not what a real model
looks like.

Why FLOPs differ slightly while MACs are identical (measured on these models, all well inside 2%):
- ResNet-50, batch norm folded into the convs by the eval-mode export: the 53 norms' 4 FLOPs per element vanish and
  each conv gains a bias add of 1 per element: exactly -3 FLOPs per norm output element (asserted below).
- Transformers: the fused `scaled_dot_product_attention` the PyTorch backend prices as one op (scale once per
  score, dense causal rule) is spelled out in the ONNX graph: the scale is applied to q and to k separately, the
  causal mask becomes an explicit Add (and, in TorchScript, an Equal/Where mask build), and small scalar Sqrt/Div
  ops compute the scale. SiLU becomes Sigmoid + Mul and RMSNorm's rsqrt becomes Sqrt + Reciprocal, one more FLOP
  per element each. The opset-23 export keeps attention and RMSNorm fused (ONNX Attention, RMSNormalization).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from pytest_flopbudget import OpCost, Report, count  # noqa: E402
from pytest_flopbudget._metrics import BYTES, PARAM_BYTES  # noqa: E402

RESNET50_MACS = 4_089_184_256
RESNET50_PARAMS = 25_557_032


@dataclass
class Case:
    model: Any
    torch_report: Report
    onnx: dict[str, Report] = field(default_factory=dict)


def randomise(model: Any, seed: int) -> Any:
    """Like a trained model: no all-zero biases, no identical norm weights, positive running variances."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            if not tensor.is_floating_point():
                continue
            values = torch.rand(tensor.shape, generator=generator) * 0.1
            tensor.copy_(values + 0.5 if name.endswith("running_var") else values - 0.05)
    return model.eval()


def export(model: Any, args: tuple[Any, ...], path: Any, dynamo: bool, **options: Any) -> str:
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), dynamo=dynamo, input_names=["input"], **options)
    return str(path)


def _resnet50(tmp: Any) -> Case:
    from examples.resnet import resnet50

    model = randomise(resnet50(), 0)
    x = torch.randn(1, 3, 224, 224)
    case = Case(model, count(model, x))
    preserve = {"training": torch.onnx.TrainingMode.PRESERVE}  # eval model, batch norm kept: not folded
    case.onnx["torchscript"] = count(export(model, (x,), tmp / "r50_ts.onnx", dynamo=False))
    case.onnx["torchscript-unfolded"] = count(export(model, (x,), tmp / "r50_bn.onnx", dynamo=False, **preserve))
    if _has_onnxscript():
        case.onnx["dynamo"] = count(export(model, (x,), tmp / "r50_dyn.onnx", dynamo=True))
    return case


def _vit(tmp: Any) -> Case:
    from examples.vit import vit_tiny

    model = randomise(vit_tiny(), 1)
    x = torch.randn(1, 3, 32, 32)
    case = Case(model, count(model, x))
    # nn.MultiheadAttention's fused fast path (no_grad) has no TorchScript ONNX symbolic: export with grad enabled.
    case.onnx["torchscript"] = count(export(model, (x,), tmp / "vit_ts.onnx", dynamo=False))
    if _has_onnxscript():
        case.onnx["dynamo"] = count(export(model, (x,), tmp / "vit_dyn.onnx", dynamo=True))
    return case


def _decoder(kind: str) -> Callable[[Any], Case]:
    def build(tmp: Any) -> Case:
        from examples.decoder import GPT, GPTConfig, Llama, LlamaConfig

        model = randomise(Llama(LlamaConfig.tiny()) if kind == "llama" else GPT(GPTConfig.tiny()), 2)
        ids = torch.zeros(1, 16, dtype=torch.long)
        case = Case(model, count(model, ids))
        case.onnx["torchscript"] = count(export(model, (ids,), tmp / f"{kind}_ts.onnx", dynamo=False))
        if _has_onnxscript():
            case.onnx["dynamo"] = count(export(model, (ids,), tmp / f"{kind}_dyn.onnx", dynamo=True))
            if kind == "llama":  # opset 23: ONNX Attention and RMSNormalization nodes
                path = tmp / f"{kind}_dyn23.onnx"
                case.onnx["dynamo-opset23"] = count(export(model, (ids,), path, dynamo=True, opset_version=23))
        return case

    return build


def _has_onnxscript() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxscript") is not None


BUILDERS = {"resnet50": _resnet50, "vit_tiny": _vit, "llama_tiny": _decoder("llama"), "gpt_tiny": _decoder("gpt")}
EXPORTS = [
    ("resnet50", "torchscript"),
    ("resnet50", "torchscript-unfolded"),
    ("resnet50", "dynamo"),
    ("vit_tiny", "torchscript"),
    ("vit_tiny", "dynamo"),
    ("llama_tiny", "torchscript"),
    ("llama_tiny", "dynamo"),
    ("llama_tiny", "dynamo-opset23"),
    ("gpt_tiny", "torchscript"),
    ("gpt_tiny", "dynamo"),
]


@pytest.fixture(scope="module")
def cases(tmp_path_factory: Any) -> Callable[[str], Case]:
    """Builds (exports and counts) each model the first time a test asks for it."""
    built: dict[str, Case] = {}

    def get(name: str) -> Case:
        if name not in built:
            built[name] = BUILDERS[name](tmp_path_factory.mktemp(name))
        return built[name]

    return get


def onnx_report(cases: Callable[[str], Case], name: str, exporter: str) -> tuple[Report, Report]:
    case = cases(name)
    if exporter not in case.onnx:
        pytest.skip(f"{exporter} export needs onnxscript")
    return case.onnx[exporter], case.torch_report


def per_op(report: Report) -> dict[str, OpCost]:
    totals: dict[str, OpCost] = {}
    for layer in report.layers.values():
        for op, cost in layer.ops.items():
            totals.setdefault(op, OpCost()).add_cost(cost)
    return totals


def matched_fraction(onnx: Report, torch_report: Report) -> float:
    """Share of the ONNX MACs charged to a module path that has exactly those MACs in the PyTorch count."""
    torch_macs = {path: layer.macs for path, layer in torch_report.layers.items()}
    matched = sum(layer.macs for path, layer in onnx.layers.items() if torch_macs.get(path) == layer.macs)
    return matched / onnx.macs


@pytest.mark.parametrize(("name", "exporter"), EXPORTS)
def test_macs_identical_and_flops_within_two_percent(cases, name, exporter):
    report, reference = onnx_report(cases, name, exporter)
    assert report.skipped == {}, report.skipped_ops
    assert report.macs == reference.macs  # the issue asks for 0.5%; every export here is exact
    assert abs(report.flops - reference.flops) <= 0.02 * reference.flops, (report.flops, reference.flops)


@pytest.mark.parametrize(("name", "exporter"), EXPORTS)
def test_module_paths_recovered_for_the_macs(cases, name, exporter):
    report, reference = onnx_report(cases, name, exporter)
    assert matched_fraction(report, reference) >= 0.9
    if name == "resnet50":  # a plain CNN: every conv and the fc land on exactly the torch module path
        assert matched_fraction(report, reference) == 1.0


@pytest.mark.parametrize("exporter", ["torchscript", "torchscript-unfolded", "dynamo"])
def test_resnet50_macs_are_the_published_figure(cases, exporter):
    report, reference = onnx_report(cases, "resnet50", exporter)
    assert report.macs == reference.macs == RESNET50_MACS


def test_resnet50_unfolded_export_has_the_torch_params_and_flops(cases):
    """Batch norm kept as BatchNormalization: its running mean and variance are buffers, not parameters."""
    report, reference = onnx_report(cases, "resnet50", "torchscript-unfolded")
    assert report.params == reference.params == RESNET50_PARAMS
    assert report.flops == reference.flops


@pytest.mark.parametrize(("name", "exporter"), EXPORTS)
def test_every_export_measures_its_bytes_and_parameter_bytes(cases, name, exporter):
    """A real export leaves no tensor of unknown size; every weight here is fp32: 4 bytes per parameter."""
    report, _ = onnx_report(cases, name, exporter)
    assert report.measures(BYTES), report.conventions["bytes"]
    assert report.metric(BYTES) > 0
    assert report.metric(PARAM_BYTES) == 4 * report.params


def test_resnet50_unfolded_export_moves_the_torch_bytes_but_the_max_pool_indices(cases):
    """Conv, BatchNormalization, Relu, AveragePool, Add and Gemm read and write what their ATen ops do (an in-place
    relu_ reads and writes its tensor once each, as Relu reads x and writes y), and Flatten is a view in both. The
    one difference: aten.max_pool2d_with_indices also writes its int64 indices, 64*56*56*8 = 1,605,632 B, which
    ONNX MaxPool (one output) does not."""
    report, reference = onnx_report(cases, "resnet50", "torchscript-unfolded")
    assert report.metric(PARAM_BYTES) == reference.metric(PARAM_BYTES) == 4 * RESNET50_PARAMS
    indices = 64 * 56 * 56 * 8
    assert reference.layers["maxpool"].get(BYTES) - report.layers["maxpool"].get(BYTES) == indices
    assert reference.metric(BYTES) - report.metric(BYTES) == indices
    assert report.metric(BYTES) == 425_995_840


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_resnet50_folded_export_counts_the_folded_graph(cases, exporter):
    """An eval-mode export folds each batch norm into the conv before it: the norm's scale and shift (2C params)
    become the conv's bias (C), and the norm's 4 FLOPs per element become the bias add's 1."""
    report, reference = onnx_report(cases, "resnet50", exporter)
    norms = [m for m in cases("resnet50").model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    folded_channels = sum(m.num_features for m in norms)
    assert folded_channels == 26_560
    assert report.params == RESNET50_PARAMS - folded_channels == 25_530_472
    norm_flops = per_op(reference)["aten.native_batch_norm"].flops
    norm_elements = norm_flops // 4
    assert report.flops == reference.flops - norm_flops + norm_elements
    assert "BatchNormalization" not in {op for layer in report.layers.values() for op in layer.ops}


def test_opset23_export_counts_attention_and_rms_norm_as_fused_ops(cases):
    report, reference = onnx_report(cases, "llama_tiny", "dynamo-opset23")
    ops, torch_ops = per_op(report), per_op(reference)
    sdpa = torch_ops["aten._scaled_dot_product_flash_attention_for_cpu"]
    assert (ops["Attention"].calls, ops["Attention"].macs, ops["Attention"].flops) == (2, sdpa.macs, sdpa.flops)
    assert ops["RMSNormalization"].calls == 5  # 2 blocks x 2 norms + the final norm
