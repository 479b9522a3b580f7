"""The JAX counting engine: a jaxpr walk over one formula table built on the shared conventions (`formulas.py`).

Private and engine-level: `count_jax`, `count_nnx` and `count_linen` (`engine.py`) return a `Report`; the front
ends reach it once the backend seam registers it. jax and flax are imported only when a count runs.
"""
