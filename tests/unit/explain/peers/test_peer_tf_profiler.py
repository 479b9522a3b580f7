"""TensorFlow's profiler as a peer (`_explain/peers/tf_profiler.py`), through `flopbudget explain --vs tf-profiler`:
the frozen graph of the model's call, profiled with `float_operation()`, node by node in our layers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))
from main_in_process import one_error_line, run_main  # noqa: E402

MODELS = """\
import keras
import numpy as np


def conv_1x1():
    x = keras.Input((1, 1, 1), name="x")
    return keras.Model(x, keras.layers.Conv2D(1, 1, use_bias=False, name="conv")(x), name="one")


def small():
    x = keras.Input((4, 4, 2), name="x")
    y = keras.layers.Conv2D(3, 1, name="conv")(x)
    y = keras.layers.Activation("sigmoid", name="act")(y)
    return keras.Model(x, keras.layers.Lambda(lambda t: keras.ops.sum(t, axis=-1), name="total")(y), name="small")
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "tf_explain_models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def explained(argv: list[str], project: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run_main(["explain", *argv, "--format", "json"], project, capsys)
    assert code == 0, err
    found: dict[str, Any] = json.loads(out)
    assert sum(item["difference"] for item in found["items"]) == found["difference"]
    return found


def test_the_1x1_conv_is_2_flops_to_both(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = explained(["tf_explain_models:conv_1x1", "--input", "1,1,1,1", "--vs", "tf-profiler"], project, capsys)
    # one multiply-accumulate: 2 FLOPs to us and to the profiler's Conv2D rule (2 per MAC, every tap); no bias
    assert (found["ours"], found["theirs"], found["unit"], found["items"]) == (2, 2, "flops", [])


def test_sigmoid_has_no_rule_and_a_sum_is_n_minus_1_adds(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = explained(["tf_explain_models:small", "--input", "1,4,4,2", "--vs", "tf-profiler"], project, capsys)
    # conv 1x1 2->3 on 4x4: 48 outputs of 2 MACs = 192 FLOPs + 48 bias adds; sigmoid 48 (1 per element); the sum
    # over 3 channels: 48 (1 per input element) to us, 16 * (3 - 1) = 32 to the profiler
    assert (found["ours"], found["theirs"]) == (192 + 48 + 48 + 48, 192 + 48 + 32)
    assert [(i["layer"], i["op"], i["ours"], i["theirs"], i["reason"]) for i in found["items"]] == [
        ("act", "Sigmoid", 48, 0, "op not supported"),
        ("total", "Sum", 48, 32, "reduction as n - m adds"),
    ]


def test_a_keras_convnet_against_the_profiler_run_as_users_run_it() -> None:
    import numpy as np

    from examples.keras_models import convnet
    from pytest_flopbudget._explain.peers.tf_profiler import TfProfiler, profile

    model = convnet(32)
    found = _explain(TfProfiler(), model, np.zeros((1, 32, 32, 3), np.float32))
    # the profiler as users run it: the frozen graph of the model's call, no markers of ours
    function = tf.function(lambda x: model(x, training=False))
    concrete = function.get_concrete_function(tf.TensorSpec((1, 32, 32, 3), tf.float32))
    _, users, _ = profile(concrete)  # frozen (convert_variables_to_constants_v2) and profiled
    assert (found.ours, found.theirs) == (5_966_474, 5_866_314) and users == 5_866_314
    assert found.by_reason() == {
        # two BatchNormalization layers (32x32x16 = 16,384 elements): 4 per element by the shared rule (65,536),
        # the ops Keras writes 2N + 5C = 32,848 (x * inv + shift; the per-channel +eps, rsqrt, *gamma, mean*inv, -)
        "layer priced by rule": 2 * (65_536 - 32_848),
        # ReLU after the stem (16,384), after the residual (16,384) and the pointwise conv's (8*8*32 = 2,048)
        "op not supported": 34_816,
        "per-element cost": -32,  # two rsqrt over 16 channels: 1 per element to us, 2 to the profiler
    }
    assert found.residual == 0


def test_with_the_batch_unknown_the_profiler_drops_nearly_everything() -> None:
    import numpy as np

    from examples.keras_models import convnet
    from pytest_flopbudget._explain.peers.tf_profiler import TfProfiler

    found = _explain(TfProfiler(open_batch=True), convnet(32), np.zeros((1, 32, 32, 3), np.float32))
    # only the batch norms' per-channel folding has every dim: 2 * (16 + 16 + 16 + 16 + 32 for rsqrt) = 192
    assert (found.ours, found.theirs) == (5_966_474, 192)
    assert found.by_reason()["dropped: unknown dim"] == 5_866_314 - 192
    assert found.residual == 0


def test_a_torch_target_against_tf_profiler_is_one_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    (project / "torch_net.py").write_text("import torch\n\ndef net():\n    return torch.nn.Linear(2, 2)\n")
    code, _, err = run_main(["explain", "torch_net:net", "--input", "1,2", "--vs", "tf-profiler"], project, capsys)
    assert code == 2
    assert one_error_line(err) == (
        "flopbudget: error: --vs tf-profiler counts TensorFlow models; torch_net:net is a PyTorch model (its peers: "
        "--vs fvcore, --vs ptflops, --vs thop, --vs calflops, --vs torch, --vs deepspeed)"
    )


def _explain(peer: Any, model: Any, x: Any) -> Any:
    import types

    from pytest_flopbudget._backends import backends
    from pytest_flopbudget._backends.protocol import Loaded

    backend = next(b for b in backends() if b.name == "tensorflow")
    return peer.explain(backend, Loaded(types.SimpleNamespace(training=False), model, (x,), {}))  # type: ignore[arg-type]
