"""The ONNX backend: everything here needs onnx (imported lazily, when a model is counted), none of it torch.

`backend.py` loads a model without its weights (`load.py`), binds input dims (`inputs.py`), infers shapes
(`shapes.py`, `consts.py`, `functions.py`) and walks the graph (`walk.py`), pricing each node with the formulas
of `ops.py` through a `NodeContext` (`node.py`); `graph.py` and `names.py` index nodes and map them to modules.
Inside this package `import onnx` is the real framework (absolute imports), never this folder.
"""
