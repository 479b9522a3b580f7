"""Count Keras models from `examples/keras_models.py` on this process's Keras backend and print, as one JSON
object by model, each Report (`report.to_dict()`), what each layer is (class, activation, output shape: what the
cross-backend tests need to derive the figures Keras' backends compute differently), and the seconds taken.

    KERAS_BACKEND=jax python tests/keras_backends.py convnet:32 resnet50:224 convnet:32:training

Keras fixes its backend at its first import, so the cross-backend tests (`tests/e2e/test_keras_backends.py`) run
this once per backend in a child process. Each backend counts through its own engine: TensorFlow `count_tf`
(engine level), PyTorch and JAX the public `count()` (a Keras model on torch is a `torch.nn.Module`; on JAX the
JAX backend takes it). On JAX the models are built under `keras.StatelessScope(initialize_variables=False)`, so
no weight is allocated (and jax compiles no initialiser); the other backends build them as usual.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def count_here(name: str, size: int, training: bool = False) -> dict[str, Any]:
    import keras
    import numpy as np

    from examples.keras_models import MODELS, input_shape

    backend = keras.backend.backend()
    start = time.perf_counter()
    if backend == "jax":
        with keras.StatelessScope(initialize_variables=False):
            model = MODELS[name][0](size)
    else:
        model = MODELS[name][0](size)
    built = time.perf_counter()
    x = np.zeros(input_shape(name, size), np.float32)
    if backend == "tensorflow":
        from pytest_flopbudget._counting.tensorflow.engine import count_tf

        report = count_tf(model, [x], training=training)
    elif backend == "torch":
        import torch

        from pytest_flopbudget import count

        report = count(model, torch.from_numpy(x), training=training)
    else:
        from pytest_flopbudget import count

        report = count(model, x, training=training)
    done = time.perf_counter()
    return {
        "backend": backend,
        "count_params": int(model.count_params()),
        "build_s": round(built - start, 3),
        "count_s": round(done - built, 3),
        "layers": layer_info(model),
        "report": report.to_dict(),
    }


def layer_info(model: Any) -> dict[str, dict[str, Any]]:
    """Each layer's class, activation (by name), `max_value`, `num_heads` and output shape, by dotted path."""
    from pytest_flopbudget._counting.keras_layers import keras_layers

    info = {}
    for path, layer in keras_layers(model):
        activation = getattr(layer, "activation", None)
        try:
            output = [int(d) if d is not None else 1 for d in layer.output.shape]
        except (AttributeError, ValueError):  # a layer with several calls has no single output
            output = None
        info[path] = {
            "class": type(layer).__name__,
            "activation": getattr(activation, "__name__", None),
            "max_value": getattr(layer, "max_value", None),
            "heads": getattr(layer, "num_heads", None),
            "output": output,
        }
    return info


if __name__ == "__main__":
    results = {}
    for spec in sys.argv[1:]:
        name, size, *mode = spec.split(":")
        results[spec] = count_here(name, int(size), training=mode == ["training"])
    print(json.dumps(results))
