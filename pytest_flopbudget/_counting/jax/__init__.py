"""The JAX counting engine: a jaxpr walk over one formula table built on the shared conventions (`formulas.py`).

Private: `count_jax`, `count_nnx` and `count_linen` (`engine.py`) return a `Report`; the front ends reach them
through the `jax` backend (`_backends/jax_models.py`). jax and flax are imported only when a count runs.
"""
