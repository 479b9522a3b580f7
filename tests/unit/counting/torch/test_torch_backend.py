"""The PyTorch engine end to end: reference figures, phases, attribution, fake vs real, model left untouched."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from examples.decoder import GPT, GPTConfig, Llama, LlamaConfig, gpt_inputs, llama_inputs  # noqa: E402
from examples.resnet import resnet18, resnet50  # noqa: E402
from examples.vit import vit_b_16, vit_tiny, vit_tiny_inputs  # noqa: E402
from pytest_flopbudget import Report, count  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]


def op_total(report: Report, *ops: str, field: str = "flops") -> int:
    return sum(getattr(cost.ops[op], field) for cost in report.layers.values() for op in ops if op in cost.ops)


# --- the seed cases ------------------------------------------------------------------------------------------


def test_seed_1x1_conv_is_two_flops_one_mac() -> None:
    # 1x1x1x1 input, one 1x1 filter, no bias: one multiply-accumulate = 2 FLOPs (TensorFlow profiler's figure)
    report = count(nn.Conv2d(1, 1, 1, bias=False), torch.randn(1, 1, 1, 1))
    assert (report.flops, report.macs, report.params, report.skipped) == (2, 1, 1, {})


def test_seed_dense_with_bias_is_7425_flops() -> None:
    # 2*25*16*9 = 7200 for the matmul, + 25*9 = 225 bias adds = 7425; MACs 25*16*9 = 3600; params 16*9 + 9 = 153
    report = count(nn.Linear(16, 9), torch.randn(25, 16))
    assert (report.flops, report.macs, report.params) == (7425, 3600, 153)


# --- reference models ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def resnet50_report() -> Report:
    return count(resnet50().eval(), torch.randn(1, 3, 224, 224))


def test_resnet50_matches_published_figures(resnet50_report: Report) -> None:
    assert resnet50_report.params == 25_557_032
    assert resnet50_report.macs == 4_089_184_256
    assert resnet50_report.skipped == {}
    # conv + fc FLOPs are 2*MACs = 8,178,368,512, plus the fc bias: 1000 adds
    assert op_total(resnet50_report, "aten.convolution", "aten.addmm") == 8_178_368_512 + 1000


def test_resnet50_counts_the_residual_adds_module_hooks_miss(resnet50_report: Report) -> None:
    # 16 bottlenecks; stage outputs 56*56*256, 28*28*512, 14*14*1024, 7*7*2048 = 802816, 401408, 200704, 100352:
    # 3*802816 + 4*401408 + 6*200704 + 3*100352 = 5,519,360
    assert op_total(resnet50_report, "aten.add") == 5_519_360


def test_resnet50_layers_are_module_paths_and_add_up(resnet50_report: Report) -> None:
    layers = resnet50_report.layers
    # conv2 of the last bottleneck: 7*7 outputs * 512 channels * 512*3*3 = 115,605,504 MACs
    assert layers["layer4.2.conv2"].macs == 115_605_504
    assert layers["layer4.2.conv2"].params == 512 * 512 * 9
    assert layers["fc"].params == 2048 * 1000 + 1000
    assert sum(c.flops for c in layers.values()) == resnet50_report.flops
    assert sum(c.macs for c in layers.values()) == resnet50_report.macs
    assert sum(c.params for c in layers.values()) == resnet50_report.params
    # the residual add runs in the bottleneck's own forward
    assert "aten.add" in layers["layer1.0"].ops


def test_resnet18_forward_and_training_step() -> None:
    model = resnet18()
    x = torch.randn(1, 3, 224, 224)
    forward = count(model.eval(), x)
    assert (forward.params, forward.macs) == (11_689_512, 1_814_073_344)

    step = count(model, x, training=True)
    # PyTorch's FlopCounterMode reports 10,648,412,160 conv/linear FLOPs for a normal training step
    assert 2 * step.macs == 10_648_412_160
    assert step.forward.macs == 1_814_073_344
    assert step.backward.macs == step.macs - step.forward.macs
    assert step.skipped == {}


def test_resnet18_training_step_with_input_gradient() -> None:
    # with an input that requires grad, the first conv also computes its input gradient: 10,884,440,064
    x = torch.randn(1, 3, 224, 224, requires_grad=True)
    assert 2 * count(resnet18(), x, training=True).macs == 10_884_440_064


def test_backward_ops_are_attributed_to_their_forward_layer() -> None:
    step = count(resnet18(), torch.randn(1, 3, 224, 224), training=True)
    conv = step.layers["layer1.0.conv1"].ops
    # forward 64*56*56*64*9 = 115,605,504 MACs; backward: input gradient and weight gradient, each the same
    assert conv["aten.convolution"].macs == 115_605_504
    assert conv["aten.convolution_backward"].macs == 2 * 115_605_504
    # the stem conv has no input gradient (the input does not require grad): only the weight gradient
    stem = step.layers["conv1"].ops
    assert stem["aten.convolution_backward"].macs == stem["aten.convolution"].macs
    assert "aten.native_batch_norm_backward" in step.layers["bn1"].ops
    assert sum(c.flops for c in step.layers.values()) == step.flops


def test_vit_attention_counts_the_same_in_fused_inference_and_unfused_paths() -> None:
    with torch.device("meta"):
        model = vit_b_16().eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        fused = count(model, x)
    unfused = count(model, x)
    assert "aten._native_multi_head_attention" in fused.layers["encoder.layers.0.self_attention"].ops
    assert "aten._native_multi_head_attention" not in unfused.layers["encoder.layers.0.self_attention"].ops
    assert fused.macs == unfused.macs == 17_563_828_224  # torchvision's model card: 17.56 "GFLOPS" (GMACs)
    assert fused.flops == unfused.flops
    assert fused.skipped == unfused.skipped == {}
    assert fused.params == 86_567_656


def test_sdpa_reference_case() -> None:
    class Attention(nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return nn.functional.scaled_dot_product_attention(q, k, v)

    q = torch.randn(4, 8, 128, 64)
    report = count(Attention(), q, q, q)
    # QK^T and AV: 2 * (2*B*H*S*S*D) = 2 * 2*4*8*128*128*64 = 134,217,728 (PyTorch's test_flop_counter figure)
    assert 2 * report.macs == 134_217_728
    assert report.skipped == {}


def test_causal_attention_counts_the_dense_product() -> None:
    # documented rule: a causal mask does not reduce the count, so causal and full attention agree
    q = torch.randn(1, 2, 16, 8)
    f = nn.functional.scaled_dot_product_attention

    class Attention(nn.Module):
        def __init__(self, causal: bool) -> None:
            super().__init__()
            self.causal = causal

        def forward(self, q: torch.Tensor) -> torch.Tensor:
            return f(q, q, q, is_causal=self.causal)

    causal, full = count(Attention(True), q), count(Attention(False), q)
    assert causal.flops == full.flops and causal.macs == full.macs == 2 * 2 * 16 * 16 * 8


def test_llama_7b_on_meta_device_matches_the_analytic_count() -> None:
    config = LlamaConfig.llama_7b()
    with torch.device("meta"):
        model = Llama(config)
    report = count(model, *llama_inputs(config, seq=2048))
    tokens = 2048
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    # every linear weight once per token, plus QK^T and AV per layer: 2 * S*S*d (dense causal rule)
    analytic = linear * tokens + config.n_layers * 2 * tokens * tokens * config.d_model
    assert report.macs == analytic
    assert report.params == 6_738_415_616
    assert report.skipped == {}


def test_tied_weights_count_once() -> None:
    config = GPTConfig.tiny()
    model = GPT(config)
    assert model.lm_head.weight is model.wte.weight
    report = count(model, *gpt_inputs(config))
    assert report.params == sum(p.numel() for p in model.parameters())
    assert report.params < sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))


# --- fake execution: meta models, real models, untouched models ----------------------------------------------


def test_meta_model_and_real_model_count_the_same() -> None:
    x = torch.randn(2, 3, 32, 32)
    real = count(vit_tiny().eval(), x)
    with torch.device("meta"):
        meta_model = vit_tiny().eval()
    assert count(meta_model, x).to_dict() == real.to_dict()
    assert count(meta_model, x.to("meta")).flops == real.flops


def _untouched_state(model: nn.Module) -> dict[str, object]:
    return {
        "mode": [m.training for m in model.modules()],
        "params": {k: (id(v), v.detach().clone()) for k, v in model.named_parameters()},
        "buffers": {k: v.clone() for k, v in model.named_buffers()},
        "grads": [p.grad for p in model.parameters()],
        "hooks": [(len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks)) for m in model.modules()],
    }


def _assert_same(before: dict[str, object], after: dict[str, object]) -> None:
    assert before["mode"] == after["mode"]
    assert before["hooks"] == after["hooks"]
    assert before["grads"] == after["grads"]
    assert before["params"].keys() == after["params"].keys()  # type: ignore[attr-defined]
    for key, (ident, value) in before["params"].items():  # type: ignore[attr-defined]
        assert after["params"][key][0] == ident  # type: ignore[index]
        assert torch.equal(after["params"][key][1], value)  # type: ignore[index]
    assert before["buffers"].keys() == after["buffers"].keys()  # type: ignore[attr-defined]
    for key, value in before["buffers"].items():  # type: ignore[attr-defined]
        assert torch.equal(after["buffers"][key], value)  # type: ignore[index]


@pytest.mark.parametrize("execution", ["fake", "real"])
@pytest.mark.parametrize("training", [False, True])
def test_model_is_left_exactly_as_it_was(execution: str, training: bool) -> None:
    model = resnet18(num_classes=10)
    model.layer1.eval()  # a mixed mode must survive too
    before = _untouched_state(model)
    count(model, torch.randn(2, 3, 32, 32), training=training, execution=execution)
    _assert_same(before, _untouched_state(model))


@pytest.mark.parametrize(
    "build",
    [
        lambda: (resnet18(num_classes=10).eval(), (torch.randn(1, 3, 64, 64),)),
        lambda: (vit_tiny().eval(), vit_tiny_inputs()),
        lambda: (Llama(LlamaConfig.tiny()), llama_inputs(LlamaConfig.tiny())),
        lambda: (GPT(GPTConfig.tiny()), gpt_inputs(GPTConfig.tiny())),
    ],
    ids=["resnet18", "vit", "llama", "gpt"],
)
@pytest.mark.parametrize("training", [False, True])
def test_fake_and_real_execution_give_identical_reports(build, training: bool) -> None:
    model, inputs = build()
    fake = count(model, *inputs, training=training).to_dict()
    real = count(model, *inputs, training=training, execution="real").to_dict()
    assert fake.pop("versions")["execution"] == "fake"
    assert real.pop("versions")["execution"] == "real"
    # peak memory may differ by the small values fake mode had to know and keeps alive (a GPT's position ids:
    # arange(16) in int64 = 128 bytes): never lower than the real run's, and within a few hundred bytes of it
    fake_peak, real_peak = fake.pop("peak_memory"), real.pop("peak_memory")
    assert fake_peak["layer"] == real_peak["layer"]
    assert 0 <= fake_peak["bytes"] - real_peak["bytes"] <= 256
    assert fake == real


def test_forward_kwargs_reach_the_model() -> None:
    class Scaled(nn.Module):
        def forward(self, x: torch.Tensor, *, double: bool = False) -> torch.Tensor:
            return x * 2 if double else x

    assert count(Scaled(), torch.randn(3, 4), double=True).flops == 12  # 1 multiply per element
    assert count(Scaled(), torch.randn(3, 4)).flops == 0


def test_report_round_trips_through_json() -> None:
    report = count(resnet18(num_classes=10), torch.randn(2, 3, 32, 32), training=True)
    data = json.loads(json.dumps(report.to_dict()))
    again = Report.from_dict(data)
    assert again == report
    assert again.to_dict() == report.to_dict()


# --- skipped ops ---------------------------------------------------------------------------------------------


def test_op_without_formula_is_reported_with_calls_and_layers() -> None:
    class Solver(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            values = torch.linalg.inv(self.proj(x)[:, :3])
            return torch.linalg.inv(values)

    model = nn.Sequential(Solver())
    report = count(model, torch.randn(3, 4))
    assert report.skipped == {"aten.linalg_inv_ex": 2}
    assert report.skipped_ops["aten.linalg_inv_ex"].layers == ["0"]
    assert report.layers["0"].skipped == {"aten.linalg_inv_ex": 2}
    assert report.macs == 3 * 4 * 4  # the linear is still counted


# --- bad input -----------------------------------------------------------------------------------------------


def test_non_module_model_is_a_clear_error() -> None:
    with pytest.raises(CountingError, match=r"needs a torch.nn.Module.*got function"):
        count(lambda x: x, torch.randn(2))
    with pytest.raises(CountingError, match="got int"):
        count(3)


def test_shape_error_is_one_line_with_nothing_on_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(CountingError, match=r"in the model \(Linear\): RuntimeError: .*\[2, 5\] X \[3, 4\]"):
        count(nn.Linear(3, 4), torch.randn(2, 5))
    assert capfd.readouterr().err == ""


def test_wrong_input_shape_names_the_layer() -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Sequential(nn.Flatten(), nn.Linear(10, 2)))
    with pytest.raises(CountingError) as info:
        count(model, torch.randn(1, 3, 8, 8))
    message = str(info.value)
    assert "layer '2.1' (Linear)" in message
    assert "\n" not in message


def test_model_that_raises_is_reported_with_its_message() -> None:
    class Broken(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise ValueError("expects a dict of images")

    expected = r"model raised in layer .0. \(Broken\): ValueError: expects a dict of images"
    with pytest.raises(CountingError, match=expected):
        count(nn.Sequential(Broken()), torch.randn(1))


def test_fake_mode_failure_suggests_real_execution() -> None:
    class DataDependent(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            steps = int(x.sum())  # a Python int from tensor data: fake tensors have no data
            return x.repeat(steps, 1)

    x = torch.ones(2, 3)
    with pytest.raises(CountingError, match=r"fake mode cannot run this model.*execution='real'"):
        count(DataDependent(), x)
    assert count(DataDependent(), x, execution="real").skipped == {}


def test_bad_execution_and_loss_arguments() -> None:
    with pytest.raises(CountingError, match="execution='gpu' is not supported"):
        count(nn.Linear(2, 2), torch.randn(1, 2), execution="gpu")
    with pytest.raises(CountingError, match="loss_fn must return a scalar"):
        count(nn.Linear(2, 2), torch.randn(3, 2), training=True, loss_fn=lambda out: out)


class _WithLoss(nn.Module):
    """Returns what a Hugging Face model given `labels` returns: an object with the loss beside the logits."""

    def __init__(self, as_mapping: bool) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 16)
        self.as_mapping = as_mapping

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> object:
        logits = self.linear(x)
        loss = nn.functional.cross_entropy(logits, labels)
        if self.as_mapping:
            return {"loss": loss, "logits": logits}
        return types.SimpleNamespace(loss=loss, logits=logits)


@pytest.mark.parametrize("as_mapping", [False, True], ids=["attribute", "mapping"])
def test_a_training_step_backpropagates_the_models_own_loss(as_mapping: bool) -> None:
    """The loss a training loop backpropagates is the one the model computed from its labels, not the sum of that
    loss and the logits: the step counts the loss's backward only, and frees the logits before it."""
    model, x, labels = _WithLoss(as_mapping), torch.randn(4, 8), torch.tensor([0, 3, 5, 15])

    def own_loss(output: object) -> torch.Tensor:
        loss = output["loss"] if isinstance(output, dict) else output.loss  # type: ignore[attr-defined]
        assert isinstance(loss, torch.Tensor)
        return loss

    step = count(model, x, labels, training=True)
    given = count(model, x, labels, training=True, loss_fn=own_loss)
    assert (step.flops, step.macs, step.peak_memory) == (given.flops, given.macs, given.peak_memory)


def test_llama_7b_counts_in_a_small_process() -> None:
    # a 7B model built on the meta device: no weights are allocated, so the whole count stays under 1 GB
    script = (
        "import json, torch\n"
        "from examples.decoder import Llama, LlamaConfig, llama_inputs\n"
        "from pytest_flopbudget import count\n"
        "cfg = LlamaConfig.llama_7b()\n"
        "with torch.device('meta'):\n"
        "    model = Llama(cfg)\n"
        "r = count(model, *llama_inputs(cfg, seq=2048))\n"
        "peak = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print(json.dumps({'params': r.params, 'peak_kb': int(peak)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["params"] == 6_738_415_616
    assert result["peak_kb"] < 1024 * 1024


def densenet121_macs() -> int:
    """Conv and linear MACs of DenseNet-121 at 224x224, from the architecture: stem 7x7/2 conv to 64 channels at
    112x112; each dense layer a 1x1 conv (c -> 128) and a 3x3 conv (128 -> 32) at the block's resolution; each
    transition a 1x1 conv halving the channels before a 2x2 pool; the 1024 -> 1000 classifier."""
    macs = 64 * 112 * 112 * 3 * 7 * 7
    channels, side = 64, 56
    for index, layers in enumerate((6, 12, 24, 16)):
        for i in range(layers):
            c = channels + 32 * i
            macs += side * side * (128 * c + 32 * 128 * 9)
        channels += 32 * layers
        if index < 3:
            macs += side * side * (channels // 2) * channels
            channels //= 2
            side //= 2
    return macs + channels * 1000


def test_densenet121_matches_published_figures() -> None:
    from examples.densenet import densenet121

    report = count(densenet121().eval(), torch.randn(1, 3, 224, 224))
    # torchvision's model card: 7,978,856 parameters, 2.83 "GFLOPS" (GMACs)
    assert report.params == 7_978_856
    assert report.macs == densenet121_macs() == 2_834_161_664
    assert report.skipped == {}
    # the 3x3 conv of the last dense layer: 7*7 outputs * 32 channels * 128*3*3
    assert report.layers["features.denseblock4.denselayer16.conv2"].macs == 49 * 32 * 128 * 9
