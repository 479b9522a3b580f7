"""`--input` values -> the same input specs that `inputs = ...` in pyproject.toml produces.

The command line has no TOML arrays, so shapes are written as sizes separated by commas (or `x`, as the tables
print them): `--input 1,3,224,224`, `--input 1x16:int64`, `--input mask=1,16:bool`, `--input t=scalar:int64` (a
0-d tensor, as a diffusion model's timestep), or one
`--input package.module:function` that returns the example inputs. Going through `InputSpec` means the CLI builds
tensors exactly as the plugin does for pyproject models (meta zeros under fake execution), so the same model gives
the same count from either front end.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from pytest_flopbudget._cli.project import UsageError
from pytest_flopbudget._config.pyproject import (
    DIM_NAME,
    DTYPES,
    Inputs,
    InputSpec,
    elements_problem,
    is_reference,
    reserved_dim_problem,
    size_problem,
)

GRAMMAR = (
    "write sizes separated by commas such as 1,3,224,224 (or 'scalar' for a 0-d tensor), optionally NAME= before "
    "(a keyword argument or ONNX input name) and :DTYPE after (e.g. ids=1,16:int64), or one "
    "package.module:function returning the inputs"
)

#: ASCII digits only: `\d` and `str.isdigit` also take `²` or `٣`, which `int()` refuses or reads otherwise.
_SIZES = re.compile(r"[0-9]+(?:\s*[,x]\s*[0-9]+)*")
#: Sizes where some are named dims (`1,seq`, sized by `--dim seq=...`): separated by commas only.
_NAMED_SIZES = re.compile(r"(?:[0-9]+|[A-Za-z_]\w*)(?:\s*,\s*(?:[0-9]+|[A-Za-z_]\w*))*")
_NUMBER = re.compile(r"[0-9]+")


def parse_inputs(values: Sequence[str] | None, dtype: str | None = None, dims: Collection[str] = ()) -> Inputs:
    """Positional specs, named specs, a `module:function` reference, or None when no `--input` was given.

    `dtype` (from `--dtype`) applies to every shape that does not name its own; with neither, the dtype is left
    to the model (float32, or int64 token ids for an input that feeds an embedding). A size may be the name of one
    of `dims` (given by `--dim`). Raises `UsageError` quoting the offending value.
    """
    if dtype is not None:
        check_dtype(dtype, "--dtype")
    if not values:
        return None
    references = [v for v in values if "=" not in v and is_reference(v)]
    if references:
        if len(values) > 1:
            raise UsageError(
                f"--input {references[0]}: a function that returns the inputs replaces all other --input values; "
                f"give it alone"
            )
        return references[0].strip()
    positional: list[InputSpec] = []
    named: dict[str, InputSpec] = {}
    for value in values:
        name, equals, rest = value.partition("=")
        if equals:
            name = name.strip()
            if not name:
                raise UsageError(f"--input {value!r}: the name before '=' is empty; {GRAMMAR}")
            if name in named:
                raise UsageError(f"--input {value!r}: {name!r} is given twice")
            named[name] = parse_spec(rest, dtype, value, dims)
        else:
            positional.append(parse_spec(value, dtype, value, dims))
    if positional and named:
        raise UsageError(
            "--input: give either positional shapes (1,3,224,224) or named ones (x=1,3,224,224), not both; "
            "for a model that needs both, write a package.module:function that returns them"
        )
    return named or positional


def parse_spec(text: str, dtype: str | None, original: str, dims: Collection[str] = ()) -> InputSpec:
    """`1,16:int64` -> `InputSpec((1, 16), "int64")`; `scalar:int64` (or `[]:int64`) -> `InputSpec((), "int64")`;
    `1,seq` with `seq` in `dims` -> `InputSpec((1, 0), None, (None, "seq"))` (sized by `--dim` later)."""
    sizes, colon, own_dtype = text.strip().partition(":")
    stripped = sizes.strip()
    sizes = stripped.strip("[]()").strip()
    scalar = sizes.lower() == "scalar" or (not sizes and stripped in ("[]", "()"))
    named = not scalar and not _SIZES.fullmatch(sizes) and _NAMED_SIZES.fullmatch(sizes) is not None
    if not scalar and not named and not _SIZES.fullmatch(sizes):
        raise UsageError(f"--input {original!r} is not a shape: {GRAMMAR}")
    if colon:
        own_dtype = own_dtype.strip()
        check_dtype(own_dtype, f"--input {original!r}")
    if named:  # `1,seq`: the named axis is sized by --dim (0 until then)
        parts = tuple(part.strip() for part in sizes.split(","))
        unsized = [part for part in parts if not _NUMBER.fullmatch(part) and part not in dims]
        if unsized:
            raise UsageError(
                f"--input {original!r} is not a shape: {GRAMMAR}; a name such as {unsized[0]} is a dim, sized with "
                f"--dim {unsized[0]}=2048 (a point) or --dim {unsized[0]}=64..8192 (a range)"
            )
        names = tuple(None if _NUMBER.fullmatch(part) else part for part in parts)
        shape = tuple(int(part) if _NUMBER.fullmatch(part) else 0 for part in parts)
        _check_shape(shape, original)
        return InputSpec(shape, own_dtype if colon else dtype, names)
    shape = () if scalar else tuple(int(size) for size in re.split(r"\s*[,x]\s*", sizes))
    _check_shape(shape, original)
    return InputSpec(shape, own_dtype if colon else dtype)


def _check_shape(shape: tuple[int, ...], original: str) -> None:
    """The limits pyproject's `inputs` have (config/pyproject.py), with the same words."""
    problem = next(filter(None, (size_problem(size) for size in shape)), None) or elements_problem(shape)
    if problem is not None:
        raise UsageError(f"--input {original!r}: {problem}")


DIM_GRAMMAR = "write NAME=SIZE for a point (seq=2048) or NAME=LOW..HIGH for a range (seq=64..8192)"


def parse_dims(values: Sequence[str] | None) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
    """`--dim seq=2048` (a point) and `--dim seq=64..8192` (a range the formula must hold on) -> points, ranges."""
    points: dict[str, int] = {}
    ranges: dict[str, tuple[int, int]] = {}
    for value in values or ():
        name, equals, rest = value.partition("=")
        name = name.strip()
        if not equals or not DIM_NAME.fullmatch(name):
            raise UsageError(f"--dim {value!r}: {DIM_GRAMMAR}")
        if reserved_dim_problem(name) is not None:
            raise UsageError(f"--dim {value!r}: {reserved_dim_problem(name)}")
        if name in points or name in ranges:
            raise UsageError(f"--dim {value!r}: {name!r} is given twice")
        low, dots, high = rest.strip().partition("..")
        if not _NUMBER.fullmatch(low.strip()) or (dots and not _NUMBER.fullmatch(high.strip())):
            raise UsageError(f"--dim {value!r}: {DIM_GRAMMAR}")
        problem = size_problem(int(low), minimum=0 if dots else 1) or (size_problem(int(high)) if dots else None)
        if problem is not None:  # the limits of pyproject's `dims` and `curve`, in the same words
            raise UsageError(f"--dim {value!r}: {problem}")
        if not dots:
            points[name] = int(low)
        elif not 1 <= int(low) < int(high):
            raise UsageError(f"--dim {value!r}: a range needs 1 <= LOW < HIGH")
        else:
            ranges[name] = (int(low), int(high))
    return points, ranges


def check_dtype(dtype: str, where: str) -> None:
    if dtype not in DTYPES:
        raise UsageError(f"{where}: unknown dtype {dtype!r}; expected one of: {', '.join(DTYPES)}")


def describe_inputs(inputs: Sequence[object]) -> str:
    """A Report's `inputs` as `1x3x224x224 float32, ids=1x16 int64` for table titles."""
    parts = []
    for item in inputs:
        if isinstance(item, dict) and "shape" in item:
            text = "x".join(str(d) for d in item["shape"]) or "scalar"
            dtype = item.get("dtype")
            text = f"{text} {dtype}" if dtype else text
            name = item.get("name")
            parts.append(f"{name}={text}" if name else text)
        else:
            parts.append(str(item))
    return ", ".join(parts) or "no inputs"
