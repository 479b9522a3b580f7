"""`[tool.flopbudget]` in pyproject.toml -> `Settings` with one `ModelEntry` per model.

Validation is static (no torch, no imports of user code) and exhaustive: every problem in the file is collected
and reported together, each as one line that names the file, the line and the key path, and says what is
accepted. Importing targets and building inputs happens later, per model (the backends), because it needs
torch and the user's code, and one broken model must not hide the others.

This module validates the schema; what depends on the kind of target (the entry keys a backend honours, how its
inputs are given) is read from the backend that will run the entry (`target_kinds.py`), never from its name.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any, Union

from pytest_flopbudget._config.budget import (
    AT,
    CONVENTION,
    MAX_DEGREE,
    MAX_INCREASE,
    PHASES,
    WARN_INCREASE,
    Budget,
    convention_names,
    parse_budget,
    shown,
)
from pytest_flopbudget._config.curve_budget import parse_at, parse_max_degree
from pytest_flopbudget._config.location import LocatedError, Location, Origin, Problem
from pytest_flopbudget._config.sympy_names import SYMPY_NAMES
from pytest_flopbudget._config.target_kinds import (
    TargetKind,
    article,
    honouring,
    kind_of,
    model_phrase,
    target_grammar,
)
from pytest_flopbudget._config.toml_locator import KeyPath, line_of, locate_keys
from pytest_flopbudget._metrics import METRICS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

DEFAULT_BASELINE_DIR = ".flopbudget"
TABLE: KeyPath = ("tool", "flopbudget")
#: The table of the models, each `[tool.flopbudget.models.NAME]`.
MODELS_TABLE: KeyPath = (*TABLE, "models")

PROJECT_KEYS = ("baseline-dir", "collect-models", "require-baseline", "models")
#: pyproject key -> budget slot (see `budget.parse_budget`): each metric's `key`, then max-increase and warn-increase.
BUDGET_KEYS = {
    **{metric.key: str(metric) for metric in METRICS},
    MAX_INCREASE: "max_increase",
    WARN_INCREASE: "warn_increase",
}
#: The budgets on the curve (config/curve_budget.py), judged on the model's formula.
CURVE_BUDGET_KEYS = (MAX_DEGREE, AT)
MODEL_KEYS = (
    "target", "inputs", "method", "training", "execution", *BUDGET_KEYS, "dims", "curve", *CURVE_BUDGET_KEYS,
    "generate", "decode-inputs", PHASES, CONVENTION,
)  # fmt: skip
INPUT_KEYS = ("shape", "dtype")
EXECUTIONS = ("fake", "real")
#: The dtype of a generated input whose dtype is not given and that is not token ids.
DEFAULT_DTYPE = "float32"

#: dtype names accepted for generated inputs (torch's names, checked here without importing torch).
DTYPES = (
    "float32", "float", "float16", "half", "bfloat16", "float64", "double",
    "int64", "long", "int32", "int", "int16", "short", "int8", "uint8", "bool",
    "complex64", "complex128",
)  # fmt: skip

#: A named dim (`seq` in `inputs = [[1, "seq"]]`, `dims = { seq = 2048 }`): a Python identifier.
DIM_NAME = re.compile(r"[A-Za-z_]\w*")
#: The largest size of one axis, or of a dim, a count takes (2**40: a trillion, beyond any model's input); larger
#: sizes overflow the framework's size arithmetic, so they are refused where they are written, with this limit.
MAX_SIZE = 2**40
#: The most elements one input may have (2**62: the framework's storage size is a signed 64-bit count of bytes).
MAX_ELEMENTS = 2**62


#: The most new tokens a generation count takes (`generate`, `--generate`, `count(generate=)`): 2**17, the longest
#: context of current open models. Every decode step is a phase of the Report (its figures, its JSON, its table), so
#: the cost grows with N: a million tokens took 43 s and 0.8 GB, and a billion ran out of memory.
MAX_GENERATE = 2**17


def generate_problem(tokens: object) -> str | None:
    """Why `tokens` is no number of new tokens to generate, or None."""
    if type(tokens) is not int or tokens < 1:
        return "expected a number of new tokens (1 or more)"
    if tokens > MAX_GENERATE:
        return f"at most {MAX_GENERATE} new tokens (2**17; every decode step is a phase of the Report), got {tokens}"
    return None


def reserved_dim_problem(name: str) -> str | None:
    """Why `name` cannot name a dim although it is an identifier (sympy reads it as something else, so a formula
    string in it would not parse back: config/sympy_names.py), or None."""
    if name not in SYMPY_NAMES:
        return None
    return (
        f"{name!r} cannot name a dim: sympy reads it as a constant, function or keyword, so a formula in it would "
        f"not parse as written; name it otherwise, e.g. {name}_dim"
    )


def size_problem(size: int, *, minimum: int = 0) -> str | None:
    """Why `size` is no size of an axis or a dim (`minimum`: 1 for a dim), or None."""
    if size < minimum:
        return f"a size is at least {minimum}, got {size}"
    if size > MAX_SIZE:
        return f"a size is at most 2**40 ({MAX_SIZE}), got {size}"
    return None


def elements_problem(shape: Sequence[int]) -> str | None:
    """Why a tensor of `shape` cannot be made (more elements than a storage can hold), or None."""
    elements = prod(shape)
    if elements > MAX_ELEMENTS:
        return f"the shape {list(shape)} has {elements} elements, more than the 2**62 a tensor can hold"
    return None


#: A method name for `method = "decode"`: a Python identifier (checked against the model when it is loaded).
METHOD = re.compile(r"[A-Za-z_]\w*")

#: `package.module:attribute`, the one spelling of a Python object reference (targets, input functions).
REFERENCE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def is_reference(text: str) -> bool:
    return REFERENCE.fullmatch(text.strip()) is not None


INPUTS_GRAMMAR = (
    'a list of shapes such as [[1, 3, 224, 224]], tables such as {shape = [1, 16], dtype = "int64"}, '
    'a table of name = shape, or "package.module:function" returning the example inputs'
)


@dataclass(frozen=True)
class InputSpec:
    """One generated input tensor: its shape (`()` for a 0-d scalar) and torch dtype name (zeros; counting looks at
    shapes only).

    `dtype=None` means the user gave none: the input is float32, unless the model shows it wants token ids (it
    feeds an embedding, or it is a Hugging Face model's `input_ids`); see `input_roles.py`. A given dtype always
    wins.
    """

    shape: tuple[int, ...]
    dtype: str | None = None
    #: The dim named at each axis where the shape was written with names (`[1, "seq"]`: `(None, "seq")`), whose
    #: size in `shape` is the dim's value at the entry's point (`dims`); None when every size was a number.
    names: tuple[str | None, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype or DEFAULT_DTYPE}

    def at(self, values: Mapping[str, int]) -> InputSpec:
        """This input with each named axis sized by `values` (a name `values` lacks keeps its size)."""
        if self.names is None:
            return self
        shape = tuple(values.get(n, d) if n is not None else d for d, n in zip(self.shape, self.names))
        return InputSpec(shape, self.dtype, self.names)


#: Positional specs, named specs (keyword arguments, or ONNX input names), or a "module:callable" string.
Inputs = Union[list[InputSpec], dict[str, InputSpec], str, None]


def inputs_at(inputs: Inputs, values: Mapping[str, int]) -> Inputs:
    """`inputs` with every named dim sized by `values` (see `InputSpec.at`)."""
    if isinstance(inputs, list):
        return [spec.at(values) for spec in inputs]
    if isinstance(inputs, dict):
        return {name: spec.at(values) for name, spec in inputs.items()}
    return inputs


def dim_names(inputs: Inputs) -> list[str]:
    """The dims `inputs` name, in the order they are first written."""
    specs = inputs if isinstance(inputs, list) else list(inputs.values()) if isinstance(inputs, dict) else []
    names = [n for spec in specs for n in (spec.names or ()) if n is not None]
    return list(dict.fromkeys(names))


@dataclass
class ModelEntry:
    """One `[tool.flopbudget.models.NAME]` table, validated; `sources` maps each key to where it is declared."""

    name: str
    target: str
    inputs: Inputs
    budget: Budget
    source: Location
    training: bool = False
    execution: str = "fake"
    sources: dict[str, Location] = field(default_factory=dict)
    #: The model method counted (`method = "decode"`); `forward` is called through `model(...)` as usual.
    method: str = "forward"
    #: The table as written (what the count cache keys on, so a key added later is part of the key at once).
    table: dict[str, Any] = field(default_factory=dict)
    #: The point of the named dims (`dims = { seq = 2048 }`): `inputs` are sized there, and point budgets apply
    #: there. An ONNX graph's symbolic dims (`batch`, `sequence`) are bound by name too.
    dims: dict[str, int] = field(default_factory=dict)
    #: The range each dim's cost formula must hold on (`curve = { seq = [64, 8192] }`), low and high inclusive.
    curve: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: `generate = N`: count a greedy generation of N new tokens (a prefill, then N - 1 cached decode steps);
    #: 0 counts one call. `decode_inputs` (`decode-inputs = "pkg.mod:fn"`) builds a decode step's inputs for a
    #: model without Hugging Face's `generate` (docs/generation.md).
    generate: int = 0
    decode_inputs: str | None = None

    def at(self, values: Mapping[str, int]) -> ModelEntry:
        """The same entry counted at other values of its named dims (the others keep the point's)."""
        point = {**self.dims, **values}
        return dataclasses.replace(self, inputs=inputs_at(self.inputs, point), dims=point)

    def source_of(self, key: str) -> Location:
        return self.sources.get(key, self.source)


@dataclass
class Settings:
    """The project's flopbudget configuration; an absent table gives defaults and no models."""

    root: Path
    pyproject: Path | None = None
    baseline_dir: Path = field(default_factory=lambda: Path(DEFAULT_BASELINE_DIR))
    collect_models: bool = True
    #: A budgeted model without a committed baseline fails instead of warning; None = on when `CI` is set.
    require_baseline: bool | None = None
    models: dict[str, ModelEntry] = field(default_factory=dict)
    source: Location = field(default_factory=Location)


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` (a file or directory)."""
    start = start.resolve()
    for directory in (start, *start.parents) if start.is_dir() else start.parents:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_settings(pyproject: Path | None, root: Path | None = None) -> Settings:
    """Read and validate `pyproject`; None (no file) gives defaults rooted at `root`.

    Raises `LocatedError` listing every problem in the file.
    """
    if pyproject is None:
        base = (root or Path.cwd()).resolve()
        return Settings(root=base, baseline_dir=base / DEFAULT_BASELINE_DIR)
    pyproject = pyproject.resolve()
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LocatedError([Problem(_in_file(pyproject), f"cannot read the file: {exc}")]) from None
    return parse_settings(text, pyproject)


def _in_file(pyproject: Path, line: int | None = None) -> Location:
    """The pyproject file itself (a problem of the whole file, or of a line of it)."""
    return Location(str(pyproject), line, origin=Origin.PYPROJECT)


def parse_settings(text: str, pyproject: Path) -> Settings:
    """Validate the text of `pyproject` (an absolute path, used for messages and as the project root)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+)", str(exc))
        line = int(match.group(1)) if match else None
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise LocatedError([Problem(_in_file(pyproject, line), f"invalid TOML: {message}")]) from None
    except (ValueError, RecursionError) as exc:  # a huge integer, arrays nested thousands deep: the reader gives up
        detail = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise LocatedError([Problem(_in_file(pyproject), f"cannot be read as TOML: {detail}")]) from None
    try:
        return _Validator(pyproject, locate_keys(text)).settings(data)
    except RecursionError:
        raise LocatedError([Problem(_in_file(pyproject), "nested too deeply to validate")]) from None


class _Validator:
    """Collects problems while turning the parsed TOML into Settings; raises them all at the end."""

    def __init__(self, pyproject: Path, lines: dict[KeyPath, int]) -> None:
        self.pyproject = pyproject
        self.lines = lines
        self.problems: list[Problem] = []

    def source(self, path: tuple[str | int, ...]) -> Location:
        """Where `path` is written; a key of a model's table also carries its path below the table (`slot`), the
        setting a `to accept:` hint names (an int in `path` is an index in a list, `at`'s)."""
        keys = tuple(str(part) for part in path)
        slot = path[4:] if keys[:3] == MODELS_TABLE else ()
        key = ".".join(quote_key(p) for p in keys)
        return Location(str(self.pyproject), line_of(self.lines, keys), key, slot=slot, origin=Origin.PYPROJECT)

    def problem(self, path: KeyPath, message: str) -> None:
        self.problems.append(Problem(self.source(path), message))

    def settings(self, data: Mapping[str, Any]) -> Settings:
        root = self.pyproject.parent
        table = data.get("tool", {}).get("flopbudget") if isinstance(data.get("tool"), dict) else None
        settings = Settings(root=root, pyproject=self.pyproject, baseline_dir=root / DEFAULT_BASELINE_DIR)
        if table is None:
            return settings
        settings.source = self.source(TABLE)
        if not isinstance(table, dict):
            self.problem(TABLE, f"expected a table, got {_type_name(table)}")
            raise LocatedError(self.problems)
        self.unknown_keys(TABLE, table, PROJECT_KEYS)
        baseline_dir = table.get("baseline-dir", DEFAULT_BASELINE_DIR)
        if (
            isinstance(baseline_dir, str)
            and baseline_dir.strip()
            and len(baseline_dir) <= 1024
            and ("\0" not in baseline_dir)
        ):
            settings.baseline_dir = root / baseline_dir
        else:
            self.problem(
                (*TABLE, "baseline-dir"),
                f"expected a directory path string (at most 1024 characters, no NUL), got {shown(baseline_dir)}",
            )
        collect = table.get("collect-models", True)
        if isinstance(collect, bool):
            settings.collect_models = collect
        else:
            self.problem((*TABLE, "collect-models"), f"expected true or false, got {collect!r}")
        require = table.get("require-baseline")
        if require is None or isinstance(require, bool):
            settings.require_baseline = require
        else:
            self.problem((*TABLE, "require-baseline"), f"expected true or false, got {require!r}")
        models = table.get("models", {})
        if isinstance(models, dict):
            for name, entry in models.items():
                model = self.model(name, entry)
                if model is not None:
                    settings.models[name] = model
        else:
            self.problem((*TABLE, "models"), f"expected a table of models, got {_type_name(models)}")
        if self.problems:
            raise LocatedError(sorted(self.problems, key=lambda p: p.source.line or 0))  # read top to bottom
        return settings

    def unknown_keys(self, path: KeyPath, table: Mapping[str, Any], known: tuple[str, ...]) -> None:
        for key in table:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1) or difflib.get_close_matches(
                    key.replace("_", "-"), known, n=1
                )
                hint = f"did you mean {close[0]!r}? " if close else ""
                self.problem((*path, key), f"unknown key; {hint}expected one of: {', '.join(known)}")

    def model(self, name: str, entry: Any) -> ModelEntry | None:
        path = (*TABLE, "models", name)
        if not isinstance(entry, dict):
            self.problem(path, f"expected a table with target, inputs and budgets, got {_type_name(entry)}")
            return None
        before = len(self.problems)
        self.unknown_keys(path, entry, MODEL_KEYS)
        sources = {key: self.source((*path, key)) for key in entry}
        target = self.target(path, entry.get("target"))
        kind = kind_of(target, self.pyproject.parent) if target is not None else None
        files = kind is not None and kind.files  # a model file: inputs by the file's names, dims named by the file
        inputs = self.inputs((*path, "inputs"), entry.get("inputs"), kind, required=target is not None and not files)
        training = entry.get("training", False)
        if not isinstance(training, bool):
            self.problem((*path, "training"), f"expected true or false, got {training!r}")
        elif training:
            self.unhonoured(path, kind, "training", "training = true")
        execution = entry.get("execution", "fake")
        if execution not in EXECUTIONS:
            self.problem((*path, "execution"), f'expected "fake" or "real", got {execution!r}')
        elif "execution" in entry:
            self.unhonoured(path, kind, "execution", "execution")
        method = entry.get("method", "forward")
        if not isinstance(method, str) or not METHOD.fullmatch(method):
            self.problem((*path, "method"), f'expected a method name such as "decode", got {shown(method)}')
        elif "method" in entry:
            self.unhonoured(path, kind, "method", "method")
        generate, decode_inputs = self.generation(path, entry, kind, training)
        budget = self.budget(path, entry, sources)
        point = self.dims(path, entry, inputs, files)
        curve = self.curve(path, entry, point)
        budget = self.curve_budget(path, entry, budget, curve)
        if len(self.problems) > before or target is None:
            return None
        return ModelEntry(
            name=name,
            target=target,
            inputs=inputs,
            budget=budget,
            source=self.source(path),
            training=bool(training),
            execution=str(execution),
            sources=sources,
            method=str(method),
            table=dict(entry),
            dims=point,
            curve=curve,
            generate=generate,
            decode_inputs=decode_inputs,
        ).at(point)

    def unhonoured(self, path: KeyPath, kind: TargetKind | None, key: str, setting: str) -> None:
        """`setting` (`training = true`) refused where the entry's backend does not honour `key`."""
        if kind is not None and key not in kind.honours:
            self.problem(
                (*path, key), f"{setting} applies to {honouring(key)} targets only, not to {_targets_of(kind)}"
            )

    def generation(
        self, path: KeyPath, entry: Mapping[str, Any], kind: TargetKind | None, training: Any
    ) -> tuple[int, str | None]:
        """`generate = N` (new tokens, 1 or more) and `decode-inputs = "pkg.mod:fn"` (the decode-step protocol)."""
        generate = entry.get("generate", 0)
        decode_inputs = entry.get("decode-inputs")
        if "generate" in entry and generate_problem(generate) is not None:
            problem = str(generate_problem(generate))
            self.problem(
                (*path, "generate"),
                problem if type(generate) is int and generate > 0 else f"{problem}, got {shown(generate)}",
            )
            generate = 0
        elif "generate" in entry and ((kind is not None and "generate" not in kind.honours) or training is True):
            what = _targets_of(kind) if kind is not None and "generate" not in kind.honours else "training = true"
            self.problem(
                (*path, "generate"), f"generate applies to {honouring('generate')} inference targets, not to {what}"
            )
        if decode_inputs is not None and (not isinstance(decode_inputs, str) or not is_reference(decode_inputs)):
            self.problem((*path, "decode-inputs"), f'expected "package.module:function", got {shown(decode_inputs)}')
            decode_inputs = None
        elif decode_inputs is not None and "generate" not in entry:
            self.problem((*path, "decode-inputs"), "decode-inputs builds a decode step's inputs: give generate = N too")
        elif decode_inputs is not None and kind is not None and "generate" in kind.honours:
            self.unhonoured(path, kind, "decode-inputs", "decode-inputs")
        return int(generate), decode_inputs

    def phase_budgets(self, path: KeyPath, value: Any) -> dict[str, dict[Any, Any]]:
        """`phases = { decode-mean = { flops = "15G" } }`: ceilings per phase, each located to its own key."""
        from pytest_flopbudget._config.phase_budget import parse_phase_budgets

        def source_of(phase: str, key: str | None) -> Location:
            return self.source((*path, phase) if key is None else (*path, phase, str(key)))

        return parse_phase_budgets(value, self.source(path), source_of)

    def target(self, path: KeyPath, target: Any) -> str | None:
        if target is None:
            self.problem(path, f"missing key 'target': {target_grammar()}")
        elif not isinstance(target, str) or kind_of(target, self.pyproject.parent) is None:
            self.problem((*path, "target"), f"{target!r} is not a target; expected {target_grammar()}")
        else:
            return target.strip()
        return None

    def inputs(self, path: KeyPath, value: Any, kind: TargetKind | None, required: bool) -> Inputs:
        files = kind is not None and kind.files  # inputs bound by the names the model file gives them
        if value is None:
            if required:
                self.problem(path[:-1], f"missing key 'inputs': {INPUTS_GRAMMAR}")
            return None
        if isinstance(value, str):
            if is_reference(value) and not files:
                return value.strip()
            if kind is not None and files:
                self.problem(path, _named_inputs_only(kind))
            else:
                self.problem(path, f'{value!r} is not a "module:function" reference; expected {INPUTS_GRAMMAR}')
            return None
        if isinstance(value, list):
            if kind is not None and files:
                self.problem(path, _named_inputs_only(kind))
                return None
            specs = [self.input_spec((*path, str(i)), item, kind) for i, item in enumerate(value)]
            return [s for s in specs if s is not None]
        if isinstance(value, dict):
            named = {name: self.input_spec((*path, name), item, kind) for name, item in value.items()}
            return {name: spec for name, spec in named.items() if spec is not None}
        self.problem(path, f"expected {INPUTS_GRAMMAR}; got {_type_name(value)}")
        return None

    def input_spec(self, path: KeyPath, value: Any, kind: TargetKind | None) -> InputSpec | None:
        files = kind is not None and kind.files
        if isinstance(value, dict):
            self.unknown_keys(path, value, INPUT_KEYS)
            dtype = value.get("dtype")
            if kind is not None and "dtype" not in kind.honours and "dtype" in value:
                self.problem(
                    (*path, "dtype"), f"{model_phrase(kind)} declares its own input dtypes; give the shape only"
                )
            elif dtype is not None and dtype not in DTYPES:
                self.problem((*path, "dtype"), f"unknown dtype {dtype!r}; expected one of: {', '.join(DTYPES)}")
                return None
            if "shape" not in value:
                self.problem(path, "missing key 'shape' (a list of dimensions such as [1, 16])")
                return None
            shape = self.shape((*path, "shape"), value["shape"], files)
            return shape and InputSpec(shape.shape, None if dtype is None else str(dtype), shape.names)
        return self.shape(path, value, files)

    def shape(self, path: KeyPath, value: Any, files: bool = False) -> InputSpec | None:
        """A list of sizes, each a non-negative integer or the name of a dim (`[1, "seq"]`, sized 0 until the
        entry's `dims` give it its value)."""
        if isinstance(value, list) and all(
            (isinstance(d, int) and not isinstance(d, bool) and d >= 0)
            or (isinstance(d, str) and DIM_NAME.fullmatch(d))
            for d in value
        ):
            names = tuple(d if isinstance(d, str) else None for d in value)
            sizes = tuple(0 if isinstance(d, str) else d for d in value)
            problem = next(filter(None, (size_problem(d) for d in sizes)), None) or elements_problem(sizes)
            if not files:  # a model file names its own dims (an ONNX graph often N): formulas keep its names
                problem = problem or next(filter(None, (reserved_dim_problem(n) for n in names if n)), None)
            if problem is not None:
                self.problem(path, problem)
                return None
            return InputSpec(sizes, None, names if any(names) else None)
        self.problem(
            path,
            f"{value!r} is not a shape; expected a list of non-negative integers such as [1, 3, 224, 224] "
            f'([] for a 0-d scalar), or names of dims set in dims, such as [1, "seq"]',
        )
        return None

    def dims(self, path: KeyPath, entry: Mapping[str, Any], inputs: Inputs, files: bool) -> dict[str, int]:
        """`dims = { seq = 2048 }`: the point of the named dims; every dim the inputs name needs a value."""
        value = entry.get("dims", {})
        point: dict[str, int] = {}
        if not isinstance(value, dict):
            self.problem(
                (*path, "dims"), f"expected a table of dim = size such as {{ seq = 2048 }}, got {shown(value)}"
            )
            value = {}
        for name, size in value.items():
            if not DIM_NAME.fullmatch(name):
                self.problem((*path, "dims", name), "a dim's name is an identifier such as seq or height")
            elif not files and reserved_dim_problem(name) is not None:
                self.problem((*path, "dims", name), str(reserved_dim_problem(name)))
            elif not isinstance(size, int) or isinstance(size, bool) or size < 1:
                self.problem((*path, "dims", name), f"expected a positive integer size, got {shown(size)}")
            elif size_problem(size, minimum=1) is not None:
                self.problem((*path, "dims", name), str(size_problem(size, minimum=1)))
            else:
                point[name] = size
        named = dim_names(inputs)
        for name in named:
            if name not in value:
                self.problem(
                    (*path, "inputs"), f"dim {name!r} has no value; set it in dims, e.g. dims = {{ {name} = 2048 }}"
                )
        if not files:  # a model file's own symbolic dims are bound by name, checked when it is counted
            for name in value:
                if name not in named:
                    self.problem((*path, "dims", name), f"no input names the dim {name!r}; write it in inputs")
        return point

    def curve(self, path: KeyPath, entry: Mapping[str, Any], point: Mapping[str, int]) -> dict[str, tuple[int, int]]:
        """`curve = { seq = [64, 8192] }`: the range each dim's cost formula must hold on."""
        value = entry.get("curve", {})
        ranges: dict[str, tuple[int, int]] = {}
        if not isinstance(value, dict):
            self.problem(
                (*path, "curve"),
                f"expected a table of dim = [low, high] such as {{ seq = [64, 8192] }}, got {shown(value)}",
            )
            return ranges
        for name, bounds in value.items():
            where = (*path, "curve", name)
            if not (
                isinstance(bounds, list)
                and len(bounds) == 2
                and all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
                and 1 <= bounds[0] < bounds[1] <= MAX_SIZE
            ):
                self.problem(
                    where, f"expected [low, high], two sizes with 1 <= low < high <= 2**40, got {shown(bounds)}"
                )
            elif name not in point and name not in entry.get("dims", {}):
                self.problem(
                    where, f"dim {name!r} has no value; set it in dims, e.g. dims = {{ {name} = {bounds[1]} }}"
                )
            else:
                ranges[name] = (bounds[0], bounds[1])
        return ranges

    def budget(self, path: KeyPath, entry: Mapping[str, Any], sources: dict[str, Location]) -> Budget:
        values = {slot: entry[key] for key, slot in BUDGET_KEYS.items() if key in entry}
        slot_sources = {slot: sources[key] for key, slot in BUDGET_KEYS.items() if key in entry}
        try:
            budget = parse_budget(values, slot_sources, self.source(path))
            if PHASES in entry:
                budget = dataclasses.replace(budget, phases=self.phase_budgets((*path, PHASES), entry[PHASES]))
        except LocatedError as exc:
            self.problems.extend(exc.problems)
            return Budget(source=self.source(path))
        if CONVENTION in entry:
            name, accepted = entry[CONVENTION], convention_names()
            if not isinstance(name, str) or name.strip().lower() not in accepted:
                self.problem(
                    (*path, CONVENTION), f"unknown convention {shown(name)}; expected one of: {', '.join(accepted)}"
                )
            else:
                budget = dataclasses.replace(budget, convention=name.strip().lower())
        if not values and PHASES not in entry and not any(key in entry for key in CURVE_BUDGET_KEYS):
            self.problem(path, f"declares no budget; set at least one of: {', '.join(BUDGET_KEYS)}")
        return budget

    def curve_budget(
        self, path: KeyPath, entry: Mapping[str, Any], budget: Budget, curve: Mapping[str, tuple[int, int]]
    ) -> Budget:
        """`budget` with the model's `max-degree` and `at` (docs/curve-budgets.md)."""
        found: dict[str, tuple[Any, ...]] = {}
        parsers: dict[str, Callable[..., tuple[Any, ...]]] = {MAX_DEGREE: parse_max_degree, AT: parse_at}
        for key, parse in parsers.items():
            if key in entry:

                def locate(sub: tuple[str | int, ...], key: str = key) -> Location:
                    return self.source((*path, key, *sub))

                try:
                    found[key] = parse(entry[key], locate, curve)
                except LocatedError as exc:
                    self.problems.extend(exc.problems)
        if not found:
            return budget
        return dataclasses.replace(budget, degrees=found.get(MAX_DEGREE, ()), at=found.get(AT, ()))


def _targets_of(kind: TargetKind) -> str:
    """`ONNX files`, `toy targets`: what a refusal says the entry's target is."""
    return f"{kind.framework} {'files' if kind.files else 'targets'}"


def _named_inputs_only(kind: TargetKind) -> str:
    return f"{article(kind.framework)} target takes a table of input name = shape, e.g. {{input = [1, 3, 224, 224]}}"


def quote_key(part: str) -> str:
    """Key path components as TOML would need them written (`models."vit tiny".flops`)."""
    return part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else '"' + part.replace('"', '\\"') + '"'


def _type_name(value: Any) -> str:
    names = {dict: "a table", list: "an array", str: "a string", bool: "a boolean", int: "an integer"}
    return names.get(type(value), type(value).__name__)
