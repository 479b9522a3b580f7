"""Count one Keras model from `examples/keras_models.py` on this process's Keras backend and print its Report as
JSON (`report.to_dict()`), with the seconds the build and the count took.

    KERAS_BACKEND=jax python tests/keras_backends.py convnet 32 [--training]

Keras fixes its backend at its first import, so the cross-backend tests (`tests/e2e/test_keras_backends.py`) run
this once per backend in a child process. Each backend counts through its own engine: TensorFlow `count_tf`
(engine level), PyTorch and JAX the public `count()` (a Keras model on torch is a `torch.nn.Module`; on JAX the
JAX backend takes it).
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
    if backend == "jax":  # abstractly: the variables are never initialised (nothing allocated; JAX's eager
        with keras.StatelessScope(initialize_variables=False):  # initialisers would compile one kernel each)
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
        "report": report.to_dict(),
    }


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    print(json.dumps(count_here(args[0], int(args[1]), training="--training" in sys.argv)))
