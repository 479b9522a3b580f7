"""Shared fixture for the ONNX counting tests: a builder for small graphs made with `onnx.helper`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest


@pytest.fixture
def onnx_model() -> Any:
    """`onnx_model(nodes, inputs={name: dims}, inits={name: dims}, opset=17, ...)` -> ModelProto.

    Inputs are float unless given as `(elem_type, dims)`; initializers are float zeros unless given as a TensorProto.
    The outputs are the last node's outputs, with types left to shape inference.
    """
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    def build(
        nodes: Sequence[Any],
        inputs: Mapping[str, Any] = (),  # type: ignore[assignment]
        inits: Mapping[str, Any] = (),  # type: ignore[assignment]
        opset: int = 17,
        domains: Mapping[str, int] = (),  # type: ignore[assignment]
        outputs: Sequence[str] | None = None,
    ) -> Any:
        graph_inputs = []
        for name, spec in dict(inputs).items():
            typed = isinstance(spec, tuple) and len(spec) == 2 and not isinstance(spec[1], int)
            elem, dims = spec if typed else (TensorProto.FLOAT, spec)
            graph_inputs.append(helper.make_tensor_value_info(name, elem, dims))
        initializers = []
        for name, spec in dict(inits).items():
            if isinstance(spec, onnx.TensorProto):
                initializers.append(spec)
            else:
                size = math.prod(spec)
                initializers.append(helper.make_tensor(name, TensorProto.FLOAT, list(spec), b"\0" * 4 * size, raw=True))
        names = outputs if outputs is not None else [o for o in nodes[-1].output if o]
        graph = helper.make_graph(
            list(nodes),
            "test",
            graph_inputs,
            [helper.make_empty_tensor_value_info(n) for n in names],
            initializer=initializers,
        )
        opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, v) for d, v in dict(domains).items())]
        return helper.make_model(graph, opset_imports=opsets)

    return build
