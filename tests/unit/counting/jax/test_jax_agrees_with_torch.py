"""One convention table, every framework: the same MLP and conv net written in PyTorch and in Flax NNX count the
same FLOPs, MACs and parameters, layer by layer and in total (the torch side through the public `count`)."""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")
torch = pytest.importorskip("torch")

import jax.numpy as jnp  # noqa: E402

import pytest_flopbudget  # noqa: E402
from pytest_flopbudget._counting.jax.engine import count_nnx  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402


class TorchMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x: Any) -> Any:
        return self.fc2(torch.relu(self.fc1(x)))


class NnxMLP(nnx.Module):
    def __init__(self, rngs: Any) -> None:
        self.fc1 = nnx.Linear(16, 32, rngs=rngs)
        self.fc2 = nnx.Linear(32, 10, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        return self.fc2(jax.nn.relu(self.fc1(x)))


class TorchConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(16 * 2 * 2, 10)

    def forward(self, x: Any) -> Any:
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = torch.nn.functional.max_pool2d(x, 2)
        return self.fc(x.flatten(1))


class NnxConvNet(nnx.Module):
    def __init__(self, rngs: Any) -> None:
        self.conv1 = nnx.Conv(3, 8, (3, 3), padding="SAME", rngs=rngs)
        self.conv2 = nnx.Conv(8, 16, (3, 3), strides=2, padding=((1, 1), (1, 1)), rngs=rngs)
        self.fc = nnx.Linear(16 * 2 * 2, 10, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        x = jax.nn.relu(self.conv1(x))
        x = jax.nn.relu(self.conv2(x))
        x = nnx.max_pool(x, (2, 2), strides=(2, 2))
        return self.fc(x.reshape(x.shape[0], -1))


def figures(report: Report) -> dict[str, tuple[int, int, int]]:
    return {path: (layer.flops, layer.macs, layer.params) for path, layer in report.layers.items()}


def test_the_mlp_counts_the_same() -> None:
    torch_report = pytest_flopbudget.count(TorchMLP(), torch.randn(4, 16))
    jax_report = count_nnx(lambda: NnxMLP(nnx.Rngs(0)), jax.ShapeDtypeStruct((4, 16), jnp.float32))
    # fc1: 2*4*32*16 + 4*32 = 4224; relu 128; fc2: 2*4*10*32 + 40 = 2600; params 16*32+32 = 544, 32*10+10 = 330
    assert figures(jax_report) == figures(torch_report)
    assert (jax_report.flops, jax_report.macs, jax_report.params) == (4224 + 128 + 2600, 2048 + 1280, 544 + 330)
    assert (torch_report.flops, torch_report.macs, torch_report.params) == (
        jax_report.flops,
        jax_report.macs,
        jax_report.params,
    )


def test_the_conv_net_counts_the_same() -> None:
    torch_report = pytest_flopbudget.count(TorchConvNet(), torch.randn(1, 3, 8, 8))
    jax_report = count_nnx(lambda: NnxConvNet(nnx.Rngs(0)), jax.ShapeDtypeStruct((1, 8, 8, 3), jnp.float32))
    # conv1: out 8*8*8 = 512 elements * 3*9 taps = 13824 MACs, 2*13824 + 512 (bias) = 28160 FLOPs
    # conv2: out 4*4*16 = 256 elements * 8*9 = 18432 MACs, 36864 + 256 = 37120 FLOPs
    # relus 512 + 256, max pool 2x2 to 2*2*16 = 64 outputs * 4 = 256; fc: 2*64*10 + 10 = 1290
    assert figures(jax_report) == figures(torch_report)
    assert jax_report.layers["conv1"].flops == 28160
    assert jax_report.layers["conv2"].flops == 37120
    assert jax_report.layers[""].flops == 512 + 256 + 256
    assert (jax_report.flops, jax_report.macs, jax_report.params) == (
        torch_report.flops,
        torch_report.macs,
        torch_report.params,
    )
    assert jax_report.skipped_ops == torch_report.skipped_ops == {}


def test_training_steps_agree_on_the_matmul_work() -> None:
    # the backward of a dense layer: the weight gradient and the input gradient (fc2) are matmuls like torch's
    torch_report = pytest_flopbudget.count(TorchMLP(), torch.randn(4, 16), training=True)
    jax_report = count_nnx(lambda: NnxMLP(nnx.Rngs(0)), jax.ShapeDtypeStruct((4, 16), jnp.float32), training=True)
    assert jax_report.backward.macs == torch_report.backward.macs
    assert jax_report.forward.macs == torch_report.forward.macs
