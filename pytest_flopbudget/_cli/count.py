"""`flopbudget count TARGET`: the per-layer table (or the JSON Report) of one model.

TARGET is whatever a user has at hand: `package.module:factory`, a path to an `.onnx` file, or the name of a
`[tool.flopbudget.models]` entry. Each becomes a `ModelEntry` and is counted by `backends.count_entry`, the same
function the pytest plugin uses for pyproject models, so inference models are counted in eval mode under no_grad
and generated inputs are built the same way by both front ends.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, TextIO

from pytest_flopbudget._backends import Backend, backend_for, backend_for_target, count_entry
from pytest_flopbudget._cli.count_formats import FORMATS, PICTURES, Counted
from pytest_flopbudget._cli.inputs import parse_dims, parse_inputs
from pytest_flopbudget._cli.progress import Progress
from pytest_flopbudget._cli.project import UsageError, load_project, model_named, unknown_model
from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.location import Location, display_path
from pytest_flopbudget._config.pyproject import (
    Inputs,
    InputSpec,
    ModelEntry,
    dim_names,
    find_pyproject,
)
from pytest_flopbudget._config.target_kinds import article, honouring, model_phrase, refusing
from pytest_flopbudget._errors import CountingError, FlopBudgetError, MissingInputSizes
from pytest_flopbudget._metrics import Metric
from pytest_flopbudget._render.roofline_report import choose, roofline_for
from pytest_flopbudget._safe_text import safe_text


@dataclasses.dataclass(frozen=True)
class CountRequest:
    """What `flopbudget count` was asked: the target and how to count and show it."""

    target: str
    input: list[str] | None = None
    dtype: str | None = None
    training: bool = False
    execution: str | None = None
    method: str | None = None
    depth: int | None = 2
    format: str = "table"
    pyproject: str | None = None
    #: What the boxes of an svg or html picture show (flops by default); refused with another format.
    metric: Metric | None = None
    #: Write the output to this file (atomically) instead of stdout.
    output: str | None = None
    #: `NAME[:DTYPE]`: add the roofline estimate on that hardware profile to the table or JSON (render/roofline.py).
    hardware: str | None = None
    #: `--dim seq=2048` (a point) or `--dim seq=64..8192` (a range: the count gives each metric's formula).
    dims: list[str] | None = None
    #: `--generate N`: count a greedy generation of N new tokens, phase by phase.
    generate: int | None = None
    #: `--decode-inputs pkg.mod:fn`: a decode step's inputs for a model without Hugging Face's generate.
    decode_inputs: str | None = None
    #: `--convention NAME` (repeatable): the count under each stack's convention too (`_conventions/`).
    conventions: list[str] | None = None


def run_count(request: CountRequest, out: TextIO, err: TextIO) -> int:
    """Print the table, the JSON Report or the picture of `request.target`, or write it to `request.output`;
    errors are raised for `cli.main` to print."""
    if request.metric is not None and request.format not in PICTURES:
        raise UsageError(f"--metric sets what a picture shows; give it with --format svg or html, not {request.format}")
    if request.hardware is not None and request.format in PICTURES:
        raise UsageError("--hardware adds a roofline estimate to the table and the JSON, not to a picture")
    hardware = choose(request.hardware) if request.hardware is not None else None  # a typo costs no count
    profiles = convention_profiles(request.conventions)
    if profiles and request.format in PICTURES:
        raise UsageError("--convention adds the figures under a convention to the table and the JSON, not a picture")
    entry, root = resolve_target(request)
    with Progress(1, getattr(err, "raw", err)) as progress:
        progress.start(entry.name)
        try:
            if entry.curve:
                from pytest_flopbudget._curve.engine import count_curve

                report, formula = count_curve(entry, root)
            else:
                report, formula = count_entry(entry, root), None
        except CountingError as exc:
            raise CountingError(command_line_hint(exc)) from None
        progress.advance()
    if request.metric is not None and not report.measures(request.metric):
        raise UsageError(
            f"--metric {request.metric}: the {report.backend} backend does not measure {request.metric.label} for "
            f"this model, so there is nothing to draw"
        )
    roofline = roofline_for(report, *hardware) if hardware is not None else None
    explanations = tuple(profile.apply(report) for profile in profiles)
    counted = Counted(
        report, entry, formula, roofline, depth=request.depth, metric=request.metric, conventions=explanations
    )
    text = FORMATS[request.format].render(counted)
    if request.output is None:
        out.write(text)
    else:
        write_output(request.output, text)
    return 0


def convention_profiles(names: list[str] | None) -> list[Any]:
    """The profiles of `--convention NAME ...`, each once, in the order given; an unknown one is one line."""
    from pytest_flopbudget._conventions.registry import profile_named

    try:
        profiles = [profile_named(name) for name in dict.fromkeys(names or ())]
    except FlopBudgetError as exc:
        raise UsageError(f"--convention: {exc}") from None
    return profiles


def write_output(path: str, text: str) -> None:
    """`--output PATH`: the whole text or nothing (a temp file beside it, then a rename); one line on failure."""
    from pytest_flopbudget._atomic_file import write_atomic

    try:
        write_atomic(Path(path), safe_text(text))
    except OSError as exc:
        raise UsageError(f"--output {path}: cannot write it: {exc.strerror or exc}") from None


def resolve_target(request: CountRequest) -> tuple[ModelEntry, Path]:
    """The entry to count and the directory its target is resolved against.

    `module:callable` and `.onnx` paths are taken relative to the current directory, as `python -m` would;
    pyproject names use the project's directory, as the plugin does.
    """
    points, ranges = parse_dims(request.dims)
    entry, root = _resolve(request, (*points, *ranges))
    return with_generation(with_dims(entry, points, ranges, backend_for(entry).files), request), root


def with_generation(entry: ModelEntry, request: CountRequest) -> ModelEntry:
    """`--generate N` and `--decode-inputs` over the entry's own `generate` and `decode-inputs`."""
    if request.decode_inputs is not None and not (request.generate or entry.generate):
        raise UsageError("--decode-inputs builds a decode step's inputs: give --generate N too")
    if not (request.generate or request.decode_inputs):
        return entry
    if "generate" not in backend_for(entry).honours or request.training or entry.training:
        raise UsageError(
            f"--generate counts {article(honouring('generate'))} model's inference ({refusing('generate')}, not "
            f"--training)"
        )
    if entry.curve:
        raise UsageError("--generate counts one point; give --dim NAME=SIZE, not a range")
    return dataclasses.replace(
        entry,
        generate=request.generate or entry.generate,
        decode_inputs=request.decode_inputs or entry.decode_inputs,
        sources={**entry.sources, "decode-inputs": Location(key="--decode-inputs")}
        if request.decode_inputs
        else entry.sources,
    )


def _resolve(request: CountRequest, dims: tuple[str, ...]) -> tuple[ModelEntry, Path]:
    target: str = request.target.strip()
    inputs = parse_inputs(request.input, request.dtype, dims)
    backend = backend_for_target(target)
    if backend is not None and backend.files:
        _model_file_only(request, backend)
        inputs = _model_file_inputs(backend, target, inputs, Path.cwd())
        return _entry(target, target, inputs, training=False, execution="fake"), Path.cwd()
    if backend is not None:
        _model_file_only(request, backend)
        entry = _entry(target, target, inputs, request.training, request.execution or "fake", request.method)
        return entry, Path.cwd()
    return _pyproject_entry(request.target, inputs, request)


def with_dims(entry: ModelEntry, points: dict[str, int], ranges: dict[str, tuple[int, int]], files: bool) -> ModelEntry:
    """`entry` with the `--dim` points and ranges over its own (pyproject) ones, its inputs sized at the point: a
    range's point is the entry's own, else the range's high end. A named dim without a value is an error; so is a
    `--dim` no input names, but for a model file, whose graph names its own symbolic dims."""
    named = dim_names(entry.inputs)
    for name in (*points, *ranges):
        if not files and name not in named:
            raise UsageError(f"--dim {name}: no --input names the dim {name!r}; write it in a shape, e.g. 1,{name}")
    point = {**entry.dims, **{name: high for name, (_, high) in ranges.items() if name not in entry.dims}, **points}
    for name in named:
        if name not in point:
            raise UsageError(
                f"--input: dim {name!r} has no value; give --dim {name}=2048 (a point) or --dim {name}=64..8192 "
                f"(a range: the count gives each metric's formula)"
            )
    curve = {**entry.curve, **ranges}
    if not files:  # --input replaced the pyproject's shapes: the dims they no longer name are gone with them
        point = {name: size for name, size in point.items() if name in named}
        curve = {name: bounds for name, bounds in curve.items() if name in named}
    return dataclasses.replace(entry, curve=curve, dims={}).at(point)


def _entry(
    name: str, target: str, inputs: Inputs, training: bool, execution: str, method: str | None = None
) -> ModelEntry:
    origin = Location(key=name)
    return ModelEntry(
        name=name,
        target=target,
        inputs=inputs,
        budget=Budget(),
        source=origin,
        training=training,
        execution=execution,
        sources={"target": origin, "inputs": Location(key="--input"), "method": Location(key="--method")},
        method=method or "forward",
    )


def _pyproject_entry(name: str, inputs: Inputs, request: CountRequest) -> tuple[ModelEntry, Path]:
    if request.pyproject is None and find_pyproject(Path.cwd()) is None:
        raise UsageError(
            f"{name!r} is not a package.module:factory reference or an .onnx path, and there is no pyproject.toml "
            f"here to look it up as a model name"
        )
    settings = load_project(request.pyproject)
    entry = model_named(settings, name)
    if entry is None:
        shown = display_path(str(settings.pyproject))
        raise UsageError(f"{shown}: {unknown_model(name, settings)}; or give a package.module:factory or an .onnx path")
    changes: dict[str, Any] = {}
    backend = backend_for(entry)
    if inputs is not None:
        if backend.files:
            inputs = _model_file_inputs(backend, str(settings.root / entry.target), inputs, settings.root)
        changes["inputs"] = inputs
    _model_file_only(request, backend)
    if not backend.files:
        if request.training:
            changes["training"] = True
        if request.execution:
            changes["execution"] = request.execution
        if request.method:
            changes["method"] = request.method
            changes["sources"] = {**entry.sources, "method": Location(key="--method")}
    return dataclasses.replace(entry, **changes), settings.root


def _model_file_only(request: CountRequest, backend: Backend) -> None:
    """Options the model's backend does not honour (`Backend.honours`: an ONNX graph fixes its mode and dtypes):
    refused rather than ignored, so nobody trusts a wrong figure."""
    given_flags = (
        ("training", request.training),
        ("dtype", request.dtype),
        ("execution", request.execution),
        ("method", request.method),
    )
    for option, given in given_flags:
        if given and option not in backend.honours:
            raise UsageError(
                f"--{option} applies to {honouring(option)} models only; {model_phrase(backend)} fixes its own mode "
                f"and dtypes"
            )


def _model_file_inputs(backend: Backend, path: str, inputs: Inputs, root: Path) -> Inputs:
    """A model file's (an ONNX graph's, a SavedModel's) inputs are bound by input name; positional shapes are
    matched to the `backend.input_names` of the file in order."""
    graph = model_phrase(backend)
    if inputs is None or isinstance(inputs, dict):
        if isinstance(inputs, dict) and any(spec.dtype not in (None, "float32") for spec in inputs.values()):
            raise UsageError(f"--input NAME=DIMS:DTYPE: {graph} declares its own input dtypes; give shapes only")
        return inputs
    if isinstance(inputs, str):
        raise UsageError(f"--input {inputs}: {graph} takes shapes (--input NAME=1,3,224,224), not a function")
    if any(spec.dtype not in (None, "float32") for spec in inputs):
        raise UsageError(f"--input DIMS:DTYPE: {graph} declares its own input dtypes; give shapes only")
    names = backend.input_names(path if os.path.isabs(path) else str(root / path))
    if len(inputs) > len(names):
        raise UsageError(
            f"{len(inputs)} --input shapes for {len(names)} graph input(s) ({', '.join(names) or 'none'}); "
            f"name them: --input NAME=1,3,224,224"
        )
    return {name: InputSpec(spec.shape, None, spec.names) for name, spec in zip(names, inputs)}


def command_line_hint(error: CountingError) -> str:
    """`error`'s message in the command line's words: the ONNX backend phrases a missing input size for Python
    (`count('m.onnx', inputs={'x': [<batch>, 3]})`); on the command line the same advice is `--input x=<batch>,3`."""
    message = str(error)
    missing = MissingInputSizes.behind(error)
    if missing is None or not missing.missing:
        return message
    return message.replace(missing.python_hint, missing.command_line_hint, 1)
