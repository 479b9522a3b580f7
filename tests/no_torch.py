"""Child-process preamble shared by the tests that prove a path works without torch installed.

Importable from any test module because `tests/conftest.py` puts this directory on `sys.path` (prepend mode).
"""

import textwrap

#: Python source: make `import torch` (and any `torch.*`) raise ImportError, and prove that it does.
BLOCK_TORCH = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError(f"torch is blocked in this test ({name})")
            return None

    sys.meta_path.insert(0, NoTorch())
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("the blocker did not block torch")
    """
)
