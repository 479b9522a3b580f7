"""`flopbudget explain`: why another counter's figure differs from ours, op by op and layer by layer.

`items.py` is the result (an `Explanation` of `Item`s that sum exactly to the difference), `match.py` pairs our
count with a peer's and names each difference's reason, `peers/` holds one adapter per counter behind one
protocol, and `run.py` loads a target, counts it and runs the peer. Nothing here imports a framework or a peer's
package until a peer runs.
"""
