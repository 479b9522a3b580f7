"""The counting engines, without the choice between them (`backends/` chooses, and holds the public `count()`).

Layout: `torch/` needs torch (the PyTorch backend), `onnx/` needs onnx and never torch (the ONNX backend); the
modules here need neither: `formulas.py` (the shape math both backends share), `registry.py` (formula tables and
the `FREE` sentinel), `tally.py` (what a count accumulates, and the skip reasons), `user_formulas.py`
(`register_formula`).
"""
