"""One convention table, every framework, for memory: the same MLP (Linear 4->8, ReLU, Linear 8->2 on a [2, 4]
input) in PyTorch, Flax NNX and Keras on TensorFlow. Parameter bytes are equal layer by layer; peak memory in
inference is equal; bytes are equal op for op where the ops are the same, and where they are not the difference is
the one the decomposition makes, pinned here:

- PyTorch's `nn.Linear` is one `addmm` (the bias added as the product is written); JAX writes `dot_general` then
  `add`, TensorFlow `MatMul` then `BiasAdd`: the product is written and read back once more, 2 x its bytes.
- A training step peaks in all three at fc1's gradients, with the same tensors alive: the parameters and input
  (264), the loss (4), fc2's weight and bias gradients (64 + 8), the relu's input gradient (64) and fc1's weight and
  bias gradients (128 + 32): 564 bytes, JAX's figure. PyTorch also keeps the loss's one-element seed (`ones_like`,
  4 bytes: 568), TensorFlow its graph's constants (the sum's axes, the seed, the shapes it is tiled with: 28 bytes,
  592). On the way there the ops differ (JAX saves a boolean mask for the relu's backward, TensorFlow writes the
  seed out with a `Tile` where PyTorch and JAX broadcast it as a view) but not at the peak.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)

import jax.numpy as jnp  # noqa: E402

import pytest_flopbudget  # noqa: E402
from pytest_flopbudget._counting.jax.engine import count_nnx  # noqa: E402
from pytest_flopbudget._counting.tensorflow.engine import count_tf  # noqa: E402
from pytest_flopbudget._metrics import BYTES, PARAM_BYTES  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402


class TorchMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(8, 2)

    def forward(self, x: Any) -> Any:
        return self.fc2(self.act(self.fc1(x)))


class Relu(nnx.Module):
    def __call__(self, x: Any) -> Any:
        return nnx.relu(x)


class NnxMLP(nnx.Module):
    def __init__(self, rngs: Any) -> None:
        self.fc1 = nnx.Linear(4, 8, rngs=rngs)
        self.act = Relu()
        self.fc2 = nnx.Linear(8, 2, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        return self.fc2(self.act(self.fc1(x)))


def keras_mlp() -> Any:
    return keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8, name="fc1"),
            keras.layers.ReLU(name="act"),
            keras.layers.Dense(2, name="fc2"),
        ]
    )


def counts(training: bool = False) -> tuple[Report, Report, Report]:
    return (
        pytest_flopbudget.count(TorchMLP(), torch.zeros(2, 4), training=training),
        count_nnx(lambda: NnxMLP(nnx.Rngs(0)), jax.ShapeDtypeStruct((2, 4), jnp.float32), training=training),
        count_tf(keras_mlp(), [tf.TensorSpec((2, 4), tf.float32)], training=training),
    )


def test_parameter_bytes_are_equal_layer_by_layer() -> None:
    torch_report, jax_report, tf_report = counts()
    # fc1 (4*8 + 8)*4 = 160, fc2 (8*2 + 2)*4 = 72
    for report in (torch_report, jax_report, tf_report):
        assert {path: layer.get(PARAM_BYTES) for path, layer in report.layers.items() if layer.get(PARAM_BYTES)} == {
            "fc1": 160,
            "fc2": 72,
        }


def test_inference_peaks_are_equal() -> None:
    # 232 parameters + 32 input + fc1's product and its successor (64 each): 392, reached first in fc1 in JAX and
    # TensorFlow (the bias add), in the relu in PyTorch (whose fc1 is one addmm)
    torch_report, jax_report, tf_report = counts()
    assert torch_report.peak_memory == jax_report.peak_memory == tf_report.peak_memory == 392
    assert (torch_report.peak_layer, jax_report.peak_layer, tf_report.peak_layer) == ("act", "fc1", "fc1")


def test_bytes_agree_op_for_op_and_differ_by_the_written_product_where_the_ops_do() -> None:
    torch_report, jax_report, tf_report = counts()
    # the relu: reads 2*8*4 = 64, writes 64 in all three
    assert torch_report.layers["act"].get(BYTES) == jax_report.layers["act"].get(BYTES) == 128
    assert tf_report.layers["act"].get(BYTES) == 128
    for layer, product in (("fc1", 2 * 8 * 4), ("fc2", 2 * 2 * 4)):
        # JAX's dot_general + add and TensorFlow's MatMul + BiasAdd move the same bytes
        assert jax_report.layers[layer].get(BYTES) == tf_report.layers[layer].get(BYTES)
        # PyTorch's addmm does not write the product and read it back: fc1 384 - 2*64 = 256, fc2 184 - 2*16 = 152
        assert torch_report.layers[layer].get(BYTES) == jax_report.layers[layer].get(BYTES) - 2 * product
    assert (torch_report.bytes, jax_report.bytes, tf_report.bytes) == (536, 696, 696)


def test_training_peaks_differ_by_each_backwards_decomposition() -> None:
    torch_report, jax_report, tf_report = counts(training=True)
    # JAX's and TensorFlow's derived op by op in their engines' tests (test_jax_memory.py, test_tf_memory.py);
    # PyTorch's from its tracker: the module docstring itemises the 4 and 28 bytes by which they differ
    assert (torch_report.peak_memory, jax_report.peak_memory, tf_report.peak_memory) == (568, 564, 592)
    assert jax_report.peak_layer == tf_report.peak_layer == "fc1"
