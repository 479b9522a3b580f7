"""The TensorFlow counting engine: a walk over a traced concrete function's graph (and its function library) with
one formula table built on the shared conventions (`formulas.py`).

Private and engine-level: `count_tf` (`engine.py`) returns a `Report`; the front ends reach it once the backend
seam registers it. tensorflow and keras are imported only when a count runs.
"""
