"""One convention table, every framework: the same MLP and conv net written in PyTorch and in Keras (TensorFlow
backend) count the same FLOPs, MACs and parameters, per layer and in total (the torch side through the public
`count`)."""

from __future__ import annotations

from typing import Any

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)

import numpy as np  # noqa: E402

import pytest_flopbudget  # noqa: E402
from pytest_flopbudget._counting.tensorflow.engine import count_tf  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402


class TorchMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x: Any) -> Any:
        return self.fc2(torch.relu(self.fc1(x)))


def keras_mlp() -> Any:
    x = keras.Input((16,))
    y = keras.layers.Dense(32, name="fc1")(x)
    y = keras.layers.ReLU(name="relu")(y)
    return keras.Model(x, keras.layers.Dense(10, name="fc2")(y))


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


def keras_conv_net() -> Any:
    x = keras.Input((8, 8, 3))
    y = keras.layers.Conv2D(8, 3, padding="same", name="conv1")(x)
    y = keras.layers.ReLU()(y)
    y = keras.layers.Conv2D(16, 3, strides=2, padding="same", name="conv2")(y)
    y = keras.layers.ReLU()(y)
    y = keras.layers.MaxPooling2D(2)(y)
    y = keras.layers.Flatten()(y)
    return keras.Model(x, keras.layers.Dense(10, name="fc")(y))


def figures(report: Report, paths: list[str]) -> dict[str, tuple[int, int, int]]:
    return {path: (report.layers[path].flops, report.layers[path].macs, report.layers[path].params) for path in paths}


def totals(report: Report) -> tuple[int, int, int]:
    return report.flops, report.macs, report.params


def test_the_mlp_counts_the_same() -> None:
    torch_report = pytest_flopbudget.count(TorchMLP(), torch.randn(4, 16))
    tf_report = count_tf(keras_mlp(), [np.zeros((4, 16), np.float32)])
    # fc1: 2*4*32*16 + 4*32 = 4224; relu 128; fc2: 2*4*10*32 + 40 = 2600; params 16*32+32 = 544, 32*10+10 = 330
    assert figures(tf_report, ["fc1", "fc2"]) == figures(torch_report, ["fc1", "fc2"])
    assert totals(tf_report) == totals(torch_report) == (4224 + 128 + 2600, 2048 + 1280, 544 + 330)
    assert tf_report.layers["relu"].flops == torch_report.layers[""].flops == 128


def test_the_conv_net_counts_the_same() -> None:
    torch_report = pytest_flopbudget.count(TorchConvNet(), torch.randn(1, 3, 8, 8))
    tf_report = count_tf(keras_conv_net(), [np.zeros((1, 8, 8, 3), np.float32)])
    # conv1: out 8*8*8 = 512 elements * 3*9 taps = 13824 MACs, 2*13824 + 512 (bias) = 28160 FLOPs
    # conv2: out 4*4*16 = 256 elements * 8*9 = 18432 MACs, 36864 + 256 = 37120 FLOPs
    # relus 512 + 256, max pool 2x2 to 2*2*16 = 64 outputs * 4 = 256; fc: 2*64*10 + 10 = 1290
    paths = ["conv1", "conv2", "fc"]
    assert figures(tf_report, paths) == figures(torch_report, paths)
    assert tf_report.layers["conv1"].flops == 28160
    assert tf_report.layers["conv2"].flops == 37120
    assert totals(tf_report) == totals(torch_report)
    assert tf_report.skipped_ops == torch_report.skipped_ops == {}


def test_training_steps_agree_on_the_matmul_work() -> None:
    torch_report = pytest_flopbudget.count(TorchMLP(), torch.randn(4, 16), training=True)
    tf_report = count_tf(keras_mlp(), [np.zeros((4, 16), np.float32)], training=True)
    assert tf_report.forward.macs == torch_report.forward.macs
    assert tf_report.backward.macs == torch_report.backward.macs


def test_conv_net_training_steps_agree() -> None:
    # the first convolution's input gradient is built by TensorFlow's gradient function but never runs (the input
    # is not differentiated): pruned as TensorFlow prunes it, so both backward passes hold the same ops' work
    torch_report = pytest_flopbudget.count(TorchConvNet(), torch.randn(1, 3, 8, 8), training=True)
    tf_report = count_tf(keras_conv_net(), [np.zeros((1, 8, 8, 3), np.float32)], training=True)
    assert (tf_report.forward.flops, tf_report.forward.macs) == (torch_report.forward.flops, torch_report.forward.macs)
    assert (tf_report.backward.flops, tf_report.backward.macs) == (
        torch_report.backward.flops,
        torch_report.backward.macs,
    )
    assert tf_report.skipped_ops == {}


class TorchResidual(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 8)

    def forward(self, x: Any) -> Any:
        y = self.fc1(x)
        return y + self.fc2(y)


def keras_residual() -> Any:
    x = keras.Input((8,))
    y = keras.layers.Dense(8, name="fc1")(x)
    return keras.Model(x, keras.layers.Add(name="add")([y, keras.layers.Dense(8, name="fc2")(y)]))


def test_a_gradient_summed_over_two_uses_is_backward_in_the_layer_it_arrived_in() -> None:
    # fc1's output y feeds fc2 and the residual add: its gradient is the sum of two [4, 8] gradients, 32 adds.
    # TensorFlow builds that AddN outside every scope (not under the tape's); it is the backward of fc2, whose
    # input gradient arrives last, as torch's autograd engine accumulates it there
    torch_report = pytest_flopbudget.count(TorchResidual(), torch.randn(4, 8), training=True)
    tf_report = count_tf(keras_residual(), [np.zeros((4, 8), np.float32)], training=True)
    assert tf_report.layers["fc2"].ops["AddN"].flops == torch_report.layers["fc2"].ops["aten.add"].flops == 32
    assert "AddN" not in tf_report.layers.get("", tf_report.layers["fc1"]).ops
    # forward: 2 * (2*4*8*8 + 32) + 32 (the add) + 32 (the loss's sum) = 1152; backward: fc2's weight and input
    # gradients 2 * 512, fc1's weight gradient 512, the bias gradients 2 * 32, the AddN 32 = 1632
    assert (tf_report.forward.flops, tf_report.backward.flops) == (1152, 1632)
    assert (torch_report.forward.flops, torch_report.backward.flops) == (1152, 1632)
