"""How a result shows itself in a notebook (`_repr_html_`) without its module importing the code that draws it.

Jupyter asks the object (`Report`, `Formula`, an explanation) for `_repr_html_()`; the HTML is drawn by modules
above the data type (`render/notebook.py` over `report.py`, `curve/notebook.py` over `curve/formula.py`), which
import it, so the data type cannot import them back without a cycle. Each data type asks `html_of(self)`, and the
package root, which every import of the package runs first, plugs in each type's renderer with `use_html`. Without
one (the root not imported) `html_of` is None, and Jupyter shows the repr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: The renderer of each type that has one.
_RENDERERS: dict[type, Callable[[Any], str]] = {}


def use_html(kind: type[T], renderer: Callable[[T], str]) -> None:
    """Make `html_of(value)` of a `kind` (or a subclass) return `renderer(value)`."""
    _RENDERERS[kind] = renderer


def html_of(value: object) -> str | None:
    """`value`'s HTML from the renderer plugged in for its type (or the nearest base that has one), else None."""
    for kind in type(value).__mro__:
        renderer = _RENDERERS.get(kind)
        if renderer is not None:
            return renderer(value)
    return None
