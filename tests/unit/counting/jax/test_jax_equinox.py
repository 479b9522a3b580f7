"""Equinox models (`_counting/jax/equinox_models.py`): Equinox's own `eqx.nn.MLP`, built abstractly with
`eqx.filter_eval_shape` (no weight allocated), counts what the same MLP written in PyTorch counts, layer by layer,
with Equinox's attribute paths as the layer names and its floating-point arrays as the parameters."""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
torch = pytest.importorskip("torch")

import jax.numpy as jnp  # noqa: E402

import pytest_flopbudget  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402


class TorchMLP(torch.nn.Module):
    """`eqx.nn.MLP(16, 10, width_size=32, depth=2)` in PyTorch: three linear layers, ReLU after the first two."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(16, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 10)])

    def forward(self, x: Any) -> Any:
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


def equinox_mlp() -> Any:
    return eqx.filter_eval_shape(
        eqx.nn.MLP, 16, 10, width_size=32, depth=2, activation=jax.nn.relu, key=jax.random.PRNGKey(0)
    )


def figures(report: Report) -> dict[str, tuple[int, int, int]]:
    return {path: (layer.flops, layer.macs, layer.params) for path, layer in report.layers.items()}


def test_equinox_mlp_counts_what_the_same_torch_mlp_counts_layer_by_layer() -> None:
    ours = pytest_flopbudget.count(equinox_mlp(), jax.ShapeDtypeStruct((16,), jnp.float32))
    theirs = pytest_flopbudget.count(TorchMLP(), torch.zeros(16))
    assert ours.backend == "jax" and ours.model == "MLP"
    assert figures(ours) == figures(theirs)
    # layers.0: 2*16*32 = 1024 + bias 32, params 16*32 + 32 = 544; layers.1: 2*32*32 = 2048 + 32, params 1056;
    # layers.2: 2*32*10 = 640 + 10, params 330; two ReLUs on 32 elements each in the MLP's own call: 64
    assert figures(ours) == {
        "layers.0": (1056, 512, 544),
        "layers.1": (2080, 1024, 1056),
        "layers.2": (650, 320, 330),
        "": (64, 0, 0),
    }
    assert ours.params == 544 + 1056 + 330 and ours.skipped_ops == {}


def test_an_abstract_equinox_model_counts_as_the_real_one() -> None:
    real = eqx.nn.MLP(16, 10, width_size=32, depth=2, activation=jax.nn.relu, key=jax.random.PRNGKey(0))
    spec = jax.ShapeDtypeStruct((16,), jnp.float32)
    assert figures(pytest_flopbudget.count(real, spec)) == figures(pytest_flopbudget.count(equinox_mlp(), spec))


def test_a_training_count_differentiates_the_parameters() -> None:
    ours = pytest_flopbudget.count(equinox_mlp(), jax.ShapeDtypeStruct((16,), jnp.float32), training=True)
    theirs = pytest_flopbudget.count(TorchMLP(), torch.zeros(16), training=True)
    # the same MACs in every layer: the forward, each weight's gradient, and the input gradients of layers 1 and 2
    # (not of the model's input): 512 + 512, 1024 * 3, 320 * 3
    assert {path: layer.macs for path, layer in ours.layers.items() if layer.macs} == {
        "layers.0": 1024,
        "layers.1": 3072,
        "layers.2": 960,
    }
    assert {p: layer.macs for p, layer in ours.layers.items()} == {p: layer.macs for p, layer in theirs.layers.items()}
    # on an unbatched input a bias's gradient is the output's gradient itself: JAX runs nothing for it, PyTorch
    # sums over no dim (1 per element): 32 + 32 + 10 FLOPs more in torch
    assert theirs.flops - ours.flops == 32 + 32 + 10


def test_a_pyproject_target_returning_an_equinox_model_counts_on_the_jax_backend(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_flopbudget._backends import count_entry
    from pytest_flopbudget._backends.dispatch import load_entry
    from pytest_flopbudget._config.pyproject import load_settings

    (tmp_path / "eqx_target.py").write_text(
        "import equinox as eqx\nimport jax\n\n\ndef linear():\n"
        "    return eqx.filter_eval_shape(eqx.nn.Linear, 6, 5, use_bias=False, key=jax.random.PRNGKey(0))\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flopbudget.models.m]\ntarget = "eqx_target:linear"\ninputs = [[6]]\nflops = "1k"\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = load_settings(tmp_path / "pyproject.toml").models["m"]
    backend, _ = load_entry(entry, tmp_path)
    report = count_entry(entry, tmp_path)
    # 2*N*K = 2*5*6 = 60 FLOPs, 30 MACs, 30 params (no bias), in the root layer: the model is the Linear itself
    assert (backend.name, report.flops, report.macs, report.params) == ("jax", 60, 30, 30)
