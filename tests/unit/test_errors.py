"""The errors that carry fields for a front end to phrase."""

from __future__ import annotations

import pytest

from pytest_flopbudget._cli.count import command_line_hint
from pytest_flopbudget._errors import CountingError, MissingInputSizes


def missing() -> MissingInputSizes:
    return MissingInputSizes(
        "m.onnx", "'x' [batch, 3]; 'y' [unknown rank]", [("x", ["<batch>", "3"]), ("y", ["<sizes>"])], "m.onnx"
    )


def test_the_message_advises_the_python_call_and_the_fields_the_command_line() -> None:
    error = missing()
    assert str(error) == (
        "m.onnx: the sizes of some input dimensions are not known; graph inputs: 'x' [batch, 3]; 'y' [unknown rank]; "
        "give them as count('m.onnx', inputs={'x': [<batch>, 3], 'y': [<sizes>]}) with each <...> replaced by a size"
    )
    assert error.command_line_hint == "--input x=<batch>,3 --input y=<sizes>"


def test_the_command_line_phrasing_survives_a_wrapper_that_names_the_model() -> None:
    """Backends and the curve engine raise their own CountingError from it, the model's location in front."""
    with pytest.raises(CountingError) as info:
        try:
            raise missing()
        except CountingError as exc:
            raise CountingError(f"pyproject.toml:3: tool.flopbudget.models.m: {exc}") from None
    assert command_line_hint(info.value) == (
        "pyproject.toml:3: tool.flopbudget.models.m: m.onnx: the sizes of some input dimensions are not known; graph "
        "inputs: 'x' [batch, 3]; 'y' [unknown rank]; give them as --input x=<batch>,3 --input y=<sizes> with each "
        "<...> replaced by a size"
    )
    assert command_line_hint(CountingError("count('m', inputs={'x': [1]}) elsewhere")) == (
        "count('m', inputs={'x': [1]}) elsewhere"
    )
