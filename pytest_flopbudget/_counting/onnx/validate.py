"""Refuse ONNX graphs that no runtime would run, before counting them.

A count of a model onnxruntime refuses to load is a number about nothing, so such a graph is refused with one line
naming the file and the node. Two layers:

* `onnx.checker.check_model(..., full_check=False)` on a weight-free copy of the proto (`_checker_copy`: the
  checker would otherwise look for external data files), for what ONNX itself calls invalid (an attribute of the
  wrong type, a required attribute or input missing, ...). Its complaints about what this counter handles on
  purpose are not refusals (`TOLERATED`): nodes out of topological order (reordered, see
  `graph.topological_order`), operators or domains it has no schema for or deprecates (counted, or skipped with
  the reason), an IR version older or newer than the installed onnx knows, a type it does not know;
* our own structural rules for what the checker lets through and onnxruntime refuses: a value name produced by two
  nodes (or by a node and a graph input or initializer), a graph output listed twice, and a convolution whose
  `group` is not a positive divisor of its input and output channels (checked where the shapes are known, in the
  Conv formulas: `check_conv_groups`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pytest_flopbudget._counting.onnx.graph import subgraphs
from pytest_flopbudget._counting.onnx.names import text
from pytest_flopbudget._counting.onnx.shapes import light_model
from pytest_flopbudget._errors import CountingError

#: Checker messages about what the counter handles by design (see the module docstring): not refusals.
TOLERATED = re.compile(
    r"must be topologically sorted|No Op registered for|No opset import for domain|is deprecated in domain_version|"
    r"is higher than the checker's|cannot have opset_import specified|Unrecognized type value case"
)


def check_structure(onnx: Any, proto: Any, label: str) -> None:
    """Raise `CountingError` (one line: the file, the node, what is wrong) for a graph onnxruntime refuses."""
    _check_graph(proto.graph, label)  # first: its messages name the node
    _run_checker(onnx, proto, label)


class InvalidNode(Exception):
    """Raised by a formula for a node no runtime would run; the walker refuses the model with the node's name."""


def check_conv_groups(groups: Any, c_in: int, c_out: int) -> None:
    """`group` must be a positive divisor of both channel counts (X's C, and W's M or C); otherwise onnxruntime
    refuses the node, and a formula would count a convolution that cannot exist."""
    if not isinstance(groups, int) or groups < 1 or c_in % groups or c_out % groups:
        raise InvalidNode(
            f"group = {groups} must be a positive divisor of the input channels ({c_in}) and the output channels "
            f"({c_out})"
        )


def refuse_node(label: str, node: Any, index: int | None, reason: str) -> CountingError:
    """The one-line error for a node `InvalidNode` was raised for."""
    return CountingError(
        f"{label}: node {_show(node.name, node.op_type, index)}: {reason}; onnxruntime refuses this graph: fix the "
        f"exporter or the edit that wrote it"
    )


def _run_checker(onnx: Any, proto: Any, label: str) -> None:
    try:
        onnx.checker.check_model(_checker_copy(proto), full_check=False)
    except onnx.checker.ValidationError as exc:
        message = " ".join(str(exc).split())
        if TOLERATED.search(message):
            return
        raise CountingError(
            f"{label}: not a valid ONNX model (onnx.checker: {message[:300]}); fix the exporter or the edit that "
            f"wrote it"
        ) from None
    except (ValueError, RuntimeError, OSError):  # a proto the checker cannot serialize (over 2 GB): rules below
        return


def _checker_copy(proto: Any) -> Any:
    """What the checker reads: the model without its weights (large and external initializers become typed graph
    inputs, as for shape inference, so no `.onnx.data` file is ever opened), without the optional `value_info`
    hints, and with a type on every graph input and output (an exporter may leave an output's type to inference,
    which the checker does not run; a placeholder type is never compared with anything at this level)."""
    light = light_model(proto, {})
    light.ir_version = proto.ir_version
    del light.graph.value_info[:]
    for value in [*light.graph.input, *light.graph.output]:
        if not value.HasField("type"):
            value.type.tensor_type.elem_type = 1  # FLOAT
        if value.type.HasField("tensor_type") and not value.type.tensor_type.HasField("shape"):
            value.type.tensor_type.shape.SetInParent()
    return light


def _check_graph(graph: Any, label: str) -> None:
    """SSA: every value of `graph` is defined once, by an input, an initializer or one node's output; graph
    outputs are listed once. Subgraphs (If/Loop/Scan bodies) are checked the same way, each in its own scope."""
    defined: dict[str, str] = {}
    for value in graph.input:
        defined.setdefault(value.name, "a graph input")
    for tensor in graph.initializer:
        defined.setdefault(tensor.name, "an initializer")  # an initializer may share a graph input's name
    for tensor in graph.sparse_initializer:
        defined.setdefault(tensor.values.name, "an initializer")
    for index, node in enumerate(graph.node):
        for name in node.output:
            if not name:
                continue
            earlier = defined.get(name)
            if earlier is not None:
                raise CountingError(
                    f"{label}: node {_show(node.name, node.op_type, index)} writes {text(name)!r}, already written "
                    f"by {earlier}; every value of an ONNX graph is defined once (onnxruntime refuses this graph): "
                    f"fix the exporter or the edit that wrote it"
                )
            defined[name] = f"node {_show(node.name, node.op_type, index)}"
        if len(node.attribute):
            for sub in subgraphs(node):
                _check_graph(sub, label)
    _check_outputs([value.name for value in graph.output], label)


def _check_outputs(names: Sequence[str], label: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise CountingError(
                f"{label}: the graph output {text(name)!r} is listed twice; each output of an ONNX graph is listed "
                f"once (onnxruntime refuses this graph): fix the exporter or the edit that wrote it"
            )
        seen.add(name)


def _show(name: Any, op: str, index: int | None = None) -> str:
    shown = text(name)
    if shown:
        return f"{shown!r} ({text(op)})"
    return f"#{index} ({text(op)})" if index is not None else f"({text(op)})"
