"""`flopbudget explain` with a JAX or TensorFlow target (`_explain/run.py`): each goes to its own peer (`--vs xla`,
`--vs tf-profiler`), and a peer of another framework is one line naming the target's peers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from main_in_process import one_error_line, run_main


def keras_on_tf() -> None:
    pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras runs on another backend in this process")


TF_MODELS = """\
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
    (tmp_path / "tf_explain_models.py").write_text(TF_MODELS)
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
    keras_on_tf()
    found = explained(["tf_explain_models:conv_1x1", "--input", "1,1,1,1", "--vs", "tf-profiler"], project, capsys)
    # one multiply-accumulate: 2 FLOPs to us and to the profiler's Conv2D rule (2 per MAC, every tap); no bias
    assert (found["ours"], found["theirs"], found["unit"], found["items"]) == (2, 2, "flops", [])


def test_sigmoid_has_no_rule_and_a_sum_is_n_minus_1_adds(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keras_on_tf()
    found = explained(["tf_explain_models:small", "--input", "1,4,4,2", "--vs", "tf-profiler"], project, capsys)
    # conv 1x1 2->3 on 4x4: 48 outputs of 2 MACs = 192 FLOPs + 48 bias adds; sigmoid 48 (1 per element); the sum
    # over 3 channels: 48 (1 per input element) to us, 16 * (3 - 1) = 32 to the profiler
    assert (found["ours"], found["theirs"]) == (192 + 48 + 48 + 48, 192 + 48 + 32)
    assert [(i["layer"], i["op"], i["ours"], i["theirs"], i["reason"]) for i in found["items"]] == [
        ("act", "Sigmoid", 48, 0, "op not supported"),
        ("total", "Sum", 48, 32, "reduction as n - m adds"),
    ]


def test_a_torch_target_against_tf_profiler_is_one_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    (project / "torch_net.py").write_text("import torch\n\ndef net():\n    return torch.nn.Linear(2, 2)\n")
    code, _, err = run_main(["explain", "torch_net:net", "--input", "1,2", "--vs", "tf-profiler"], project, capsys)
    assert code == 2
    assert one_error_line(err) == (
        "flopbudget: error: --vs tf-profiler counts TensorFlow models; torch_net:net is a PyTorch model (its peers: "
        "--vs fvcore, --vs ptflops, --vs thop, --vs calflops, --vs torch, --vs deepspeed)"
    )


def test_explain_takes_a_jax_target_to_xla_and_refuses_a_pytorch_peer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("jax")
    (tmp_path / "jax_explain_models.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef f(x):\n    return jnp.exp(x).sum()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run_main(["explain", "jax_explain_models:f", "--input", "4,8", "--vs", "xla", "--format", "json"],
                              tmp_path, capsys)  # fmt: skip
    assert code == 0, err
    found = json.loads(out)
    # exp: 32 FLOPs to us, 32 transcendentals to XLA; the sum of 32 into 1: 32 to us, 31 to XLA
    assert (found["ours"], found["theirs"], found["by_reason"]) == (
        64,
        31,
        {"transcendental, not in flops": 32, "reduction as n - m adds": 1},
    )
    code, _, err = run_main(["explain", "jax_explain_models:f", "--input", "4,8", "--vs", "fvcore"], tmp_path, capsys)
    assert code == 2
    assert one_error_line(err) == (
        "flopbudget: error: --vs fvcore counts PyTorch models; jax_explain_models:f is a JAX model (its peer: --vs xla)"
    )
