"""Transitional alias of `counting/onnx/load.py` for the CLI's `from ..counting.onnx_load import load_model`.

Delete once the CLI imports `pytest_flopbudget.counting.onnx.load` (its restructuring is in progress elsewhere).
"""

from __future__ import annotations

from .onnx.load import load_model

__all__ = ["load_model"]
