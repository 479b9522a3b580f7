"""Which value a fake count needed and did not have, in one line.

`.item()`, `int(t)`, `bool(t)` and `if t == 0:` read a tensor's value (`aten._local_scalar_dense`). Fake mode knows
the values that derive from the example inputs' integer and boolean tensors, from constants and from Python numbers
(`known_inputs.InputValues`, `data_dependent.KnownValues`); any other value (one computed from the weights, such as
the durations a text-to-speech model predicts) becomes an unbacked symbol (`u0`), and the count fails only where
Python branches on it or a kernel needs it as a size. That failure names the symbol, not the read: so each read of
an unknown value is noted here (its layer, the tensor, the source line that read it), and the failure is explained
by the read that made the symbols it mentions.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Any

import torch

_SYMBOL = re.compile(r"\b[a-z]+\d+\b")  # u0 (an int), zuf0 (a float)
#: frames in torch and in this package are the machinery of the read, not the model's line
_SKIPPED_DIRS = (
    os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep,
)
#: reads noted per count; a model that reads more unknown values than this and still fails is explained by
#: the guard's expression alone
_MAX_NOTED = 256


@dataclass(frozen=True)
class UnknownRead:
    """One read of a tensor value fake mode does not know."""

    layer: str  # the module path running, "" for the root
    tensor: str  # "an int64 tensor of shape []"
    where: str  # "modeling_vits.py:1401 `indices = torch.arange(predicted_lengths.max())`", or ""


class UnknownReads:
    """Reads of unknown values by the symbol fake mode gave each, to explain the failure one of them causes."""

    def __init__(self) -> None:
        self._reads: dict[str, UnknownRead] = {}

    def note(self, tensor: Any, out: Any, layer: str) -> None:
        """`out` is what fake mode returned for `tensor.item()`: an unbacked symbol when the value is unknown."""
        node = getattr(out, "node", None)
        if node is None or len(self._reads) >= _MAX_NOTED:
            return
        shape = list(tensor.shape) if isinstance(tensor, torch.Tensor) else []
        dtype = str(tensor.dtype).replace("torch.", "") if isinstance(tensor, torch.Tensor) else "?"
        article = "an" if dtype[:1] in ("i", "u") else "a"  # an int64, a bool, a float32
        read = UnknownRead(layer, f"{article} {dtype} tensor of shape {shape}", _caller())
        for symbol in getattr(node.expr, "free_symbols", ()):  # a bool's expression is `Eq(u0, 1)`
            self._reads.setdefault(str(symbol), read)

    def explain(self, exc: BaseException) -> UnknownRead | None:
        """The read that made a symbol the failure mentions (its guard's condition, or its message)."""
        if not self._reads:
            return None
        cond = getattr(exc, "cond", None)
        for symbol in _SYMBOL.findall(str(cond) if cond is not None else str(exc)):
            read = self._reads.get(symbol)
            if read is not None:
                return read
        return None


def describe(read: UnknownRead, layer: str) -> str:
    """The sentence for the count's error: which value was needed, where, and why fake mode does not have it."""
    from pytest_flopbudget._counting.torch.known_inputs import INPUT_LIMIT

    at = f" at {read.where}" if read.where else ""
    return (
        f"{layer} needs the value of {read.tensor} (`.item()`, aten._local_scalar_dense){at}, and that value is "
        f"not known in fake mode: it does not follow from the values fake mode has (integer or boolean example "
        f"inputs of up to {INPUT_LIMIT} elements with data, constants, Python numbers) but from the weights, float "
        f"activations or an input without values"
    )


def _caller() -> str:
    """The innermost frame outside torch and this package: the model's line that read the value."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_SKIPPED_DIRS) and not filename.startswith("<"):
            line = _source_line(filename, frame.f_lineno)
            shown = f" `{line}`" if line else ""
            return f"{os.path.basename(filename)}:{frame.f_lineno}{shown}"
        frame = frame.f_back  # type: ignore[assignment]
    return ""


def _source_line(filename: str, lineno: int) -> str:
    import linecache

    line = linecache.getline(filename, lineno).strip()
    return line if len(line) <= 100 else line[:97] + "..."
