"""The versions of the model libraries (transformers, diffusers) a PyTorch count used, for `Report.versions`.

"Used" means the model is built from their classes: some module in the model's tree is (or subclasses) a class
defined in the library. What else the process imported does not count: a pytest session that imported
transformers for one test would otherwise stamp its version on every other model's baseline, and those would
differ between a run of one test and a run of the suite.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

#: The model libraries whose version is recorded when a model is built from their classes.
MODEL_LIBRARIES = ("transformers", "diffusers")


def model_library_versions(model: torch.nn.Module) -> dict[str, str]:
    """`{"transformers": "4.57.1"}` for each model library one of `model`'s modules comes from (empty for none)."""
    loaded = [name for name in MODEL_LIBRARIES if name in sys.modules]  # never imported: never used
    if not loaded:
        return {}
    used: set[str] = set()
    for module in model.modules():
        for cls in type(module).__mro__:
            library = cls.__module__.partition(".")[0]
            if library in loaded:
                used.add(library)
    versions = {}
    for library in sorted(used):
        version = getattr(sys.modules[library], "__version__", None)
        if isinstance(version, str):
            versions[library] = version
    return versions
