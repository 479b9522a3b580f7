"""Layer paths from graph op names.

An op's name is its name scopes joined by `/` (`seq_1/fc_1/MatMul`). Keras 3 on TensorFlow opens a layer's name
scope twice per call, and TensorFlow makes every repeated scope unique (`fc` -> `fc_1`), so a Keras scope cannot
be read back as a layer name. While tracing a Keras model the engine enters one more scope around each layer's
call, a marker holding the layer's index (`LAYER_SCOPE` + index, made unique as `..._1` on a second call); the
innermost marker of an op's name is its layer, named as `model.summary()` names it, dotted from the root.
An op inside a function body (a loop or branch) is named relative to that body: the walk joins it to the scopes
of the op that called the body (`Scopes`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from pytest_flopbudget._report import ROOT

#: The prefix of the marker scope entered around each Keras layer's call: `flopbudget.layer.3`.
LAYER_SCOPE = "flopbudget.layer."
_MARKER = re.compile(re.escape(LAYER_SCOPE) + r"(\d+)(?:_\d+)?$")

#: Turns the name scopes an op ran under (outermost first) into its layer path.
LayerNamer = Callable[[Sequence[str]], str]


def scopes_of(op_name: str) -> tuple[str, ...]:
    """The name scopes of an op (its name without the last component)."""
    return tuple(op_name.split("/")[:-1])


def joined(outer: Sequence[str], inner: Sequence[str]) -> tuple[str, ...]:
    """An op's scopes inside a body called under `outer`: a body names its ops from the scope it was built in,
    which may repeat the caller's scopes; those are not repeated."""
    outer, inner = tuple(outer), tuple(inner)
    if outer and inner[: len(outer)] == outer:
        return inner
    return outer + inner


def plain_layer(scopes: Sequence[str]) -> str:
    """A plain `tf.function`'s layers: its name scopes joined by dots."""
    return ".".join(scopes) if scopes else ROOT


def marked_layer(paths: Mapping[int, str]) -> LayerNamer:
    """A Keras model's layers: the innermost layer marker among the scopes, by the layer's dotted path."""

    def layer(scopes: Sequence[str]) -> str:
        for scope in reversed(scopes):
            found = _MARKER.match(scope)
            if found is not None and int(found.group(1)) in paths:
                return paths[int(found.group(1))]
        return ROOT

    return layer
