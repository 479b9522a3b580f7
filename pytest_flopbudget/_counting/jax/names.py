"""Layer paths and phases from a jaxpr equation's name stack.

jax records the `jax.named_scope`s an equation was traced under (`source_info.name_stack`), and the transforms
that produced it (`jvp`, `transpose`). Flax Linen names its modules there (`Model/layers_3/attn`); the NNX helper
(`engine.count_nnx`) enters one scope per module call, marked `NNX_SCOPE + dotted path`; the Keras helper
(`keras_models.count_keras`) one per Keras layer call, marked `KERAS_SCOPE + the layer's index`. An equation inside a
call, scan, loop or branch has a name stack relative to its parent equation, so the walk joins them (`Stack`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_flopbudget._report import ROOT

#: The prefix of the named scope `count_nnx` enters around each module's call: `nnx:layers.3.attn`.
NNX_SCOPE = "nnx:"

#: The prefix of the named scope `count_keras` enters around each Keras layer's call: `keras:3`, the layer's index
#: in `keras_layers`, since Keras' own scopes hold names a user may repeat.
KERAS_SCOPE = "keras:"

#: The scope a composite priced by rule runs its own primitives under (`composites.py`): every equation under it,
#: forward or backward, is part of the composite's price, not counted on its own.
ABSORBED_SCOPE = "flopbudget:absorbed"

#: Scopes jax itself adds, which name no layer: remat's recomputation in the backward runs in the layer it
#: recomputes.
TRANSPARENT_SCOPES = frozenset({"rematted_computation", "checkpoint"})
#: The scope of remat's recomputation: forward work, run in the backward phase.
RECOMPUTED_SCOPE = "rematted_computation"

#: Turns the named scopes an equation ran under (outermost first) into its layer path.
LayerNamer = Callable[[Sequence[str]], str]


@dataclass(frozen=True)
class Stack:
    """The scopes (outermost first) and transforms an equation ran under, joined over its enclosing equations."""

    scopes: tuple[str, ...] = ()
    backward: bool = False
    #: under `ABSORBED_SCOPE`: a composite's own primitive, priced with the composite
    absorbed: bool = False
    #: under `RECOMPUTED_SCOPE`: the forward, recomputed in the backward (a composite there is priced by its
    #: forward rule)
    recomputed: bool = False

    def enter(self, name_stack: Any) -> Stack:
        """This stack extended by an equation's own (relative) name stack."""
        scopes = list(self.scopes)
        backward, absorbed, recomputed = self.backward, self.absorbed, self.recomputed
        for entry in getattr(name_stack, "stack", ()):
            kind = type(entry).__name__
            name = str(entry.name)
            if kind == "Transform":
                backward = backward or entry.name == "transpose"
            elif name == ABSORBED_SCOPE:
                absorbed = True
            elif name not in TRANSPARENT_SCOPES:
                scopes.append(name)
            recomputed = recomputed or name == RECOMPUTED_SCOPE
        return Stack(tuple(scopes), backward, absorbed, recomputed)


def plain_layer(scopes: Sequence[str]) -> str:
    """A plain function's layers: the innermost NNX module scope if any, else its named scopes joined by dots."""
    marked = [scope[len(NNX_SCOPE) :] for scope in scopes if scope.startswith(NNX_SCOPE)]
    if marked:
        return marked[-1]
    return ".".join(scopes) if scopes else ROOT


def linen_layer(root: str) -> LayerNamer:
    """Linen's scopes: the root module's name (its class name, or `name=`), then each submodule's name, as torch's
    dotted module paths without the root (`Model/layers_3/attn` -> `layers_3.attn`)."""

    def layer(scopes: Sequence[str]) -> str:
        rest = list(scopes)
        if rest and rest[0] == root:
            rest = rest[1:]
        return ".".join(rest) if rest else ROOT

    return layer


def keras_layer(paths: Mapping[int, str]) -> LayerNamer:
    """A Keras model's layers: the innermost layer marker among the scopes, by the layer's dotted path (Keras' own
    scopes, `functional/dense`, are read past)."""

    def layer(scopes: Sequence[str]) -> str:
        for scope in reversed(scopes):
            if scope.startswith(KERAS_SCOPE) and scope[len(KERAS_SCOPE) :].isdigit():
                found = paths.get(int(scope[len(KERAS_SCOPE) :]))
                if found is not None:
                    return found
        return ROOT

    return layer
