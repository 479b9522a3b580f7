"""Cost as a formula of the input's named dims (`seq`, `height`): exact polynomials per metric, per layer and in
total, fitted from point counts and checked at points they were not built from (docs/curves.md).

`formula.py` is the result (`Formula`, `Holds`, with a JSON round trip), `polynomial.py` the exact polynomial it
holds, `fit.py` the interpolation and its checks, `engine.py` the counts through a model's backend.
"""
