"""TensorFlow's profiler as a peer (`_explain/peers/tf_profiler.py`): the frozen graph of the model's call, profiled
with `float_operation()`, node by node in our layers (`tests/unit/cli/test_explain_frameworks.py` runs it through
`flopbudget explain --vs tf-profiler`)."""

from __future__ import annotations

from typing import Any

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)


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


def _explain(peer: Any, model: Any, x: Any) -> Any:
    import types

    from pytest_flopbudget._backends import backends
    from pytest_flopbudget._backends.protocol import Loaded

    backend = next(b for b in backends() if b.name == "tensorflow")
    return peer.explain(backend, Loaded(types.SimpleNamespace(training=False), model, (x,), {}))  # type: ignore[arg-type]


def test_a_tf_function_by_hand() -> None:
    import numpy as np

    from pytest_flopbudget._explain.peers.tf_profiler import TfProfiler

    weight = tf.Variable(tf.ones((16, 9)))

    @tf.function
    def f(x: Any) -> Any:
        with tf.name_scope("dense"):
            y = tf.nn.relu(tf.matmul(x, weight) + 1.0)
        return tf.reduce_sum(tf.math.rsqrt(y + 1.0), axis=1)

    found = _explain(TfProfiler(), f, np.zeros((25, 16), np.float32))
    # MatMul 2*25*16*9 = 7200; the two adds, relu, rsqrt and the sum's inputs 225 each (1 per element) to us
    assert found.ours == 7200 + 5 * 225
    # the profiler: no rule for Relu, Rsqrt 2 per element, the sum of 9 into each of 25 outputs 25 * 8 = 200
    assert found.theirs == 7200 + 225 + 0 + 225 + 2 * 225 + 200
    assert [(i.layer, i.op, i.ours, i.theirs, i.reason) for i in found.items] == [
        ("dense", "Relu", 225, 0, "op not supported"),
        ("", "Rsqrt", 225, 450, "per-element cost"),
        ("", "Sum", 225, 200, "reduction as n - m adds"),
    ]
