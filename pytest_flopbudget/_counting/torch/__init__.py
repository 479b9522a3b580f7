"""The PyTorch backend: everything here needs torch (imported by `count()` only for an `nn.Module`).

`backend.py` runs the model under a dispatch mode (`dispatch_mode.py`), which prices each ATen op with the
formulas of `ops.py`; `execution.py`, `model_copy.py`, `module_paths.py`, `shape_memo.py`, `data_dependent.py`,
`fake_fallbacks.py`, `model_report.py` and `failures.py` serve it. Only `ops.py` (the formula table) imports
without torch, so formulas can be registered before torch is loaded.
Inside this package `import torch` is the real framework (absolute imports), never this folder.
"""
