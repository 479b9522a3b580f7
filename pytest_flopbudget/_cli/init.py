"""`flopbudget init TARGET...`: count models and add their `[tool.flopbudget.models.NAME]` tables to pyproject.toml.

The step from "I have a model" to "my pull requests are gated": a user should not have to learn the table's keys
or guess ceilings. Each target (a `package.module:factory`, an `.onnx` file, a SavedModel directory, or a folder
whose `.onnx` files and SavedModel directories are all taken) is counted exactly as `flopbudget check` will count
it (same entry, same project root), and its table gets ceilings just above the count: FLOPs and params plus
`HEADROOM` percent, rounded up to three significant digits (`formatting.ceiling_above`), and `max-skipped-ops` =
the op calls skipped now, so the first check passes and any growth past the headroom, or a new op that cannot be
counted, fails it.

Everything is decided before anything is written: names are checked before counting, every model is counted
before the file is touched, and the new text must read back through `config.parse_settings` as exactly these
tables (`pyproject_writer`). A failure is one line and leaves the file as it was.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from decimal import ROUND_CEILING, Decimal, InvalidOperation, localcontext
from pathlib import Path
from typing import TextIO

from pytest_flopbudget._backends import backend_for_target, count_entry
from pytest_flopbudget._backends.registry import general_first
from pytest_flopbudget._cli.count import CountRequest, command_line_hint, resolve_target
from pytest_flopbudget._cli.progress import Progress
from pytest_flopbudget._cli.project import UsageError
from pytest_flopbudget._cli.pyproject_writer import BARE_KEY, NewModel, plan_edit, read_pyproject_bytes, write_edit
from pytest_flopbudget._config.location import display_path
from pytest_flopbudget._config.pyproject import (
    ModelEntry,
    Settings,
    find_pyproject,
    is_reference,
    parse_settings,
)
from pytest_flopbudget._config.target_kinds import joined
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._front_ends import CLI_UPDATE_HINT
from pytest_flopbudget._metrics import FLOPS, INT_OPS, PARAMS
from pytest_flopbudget._render.formatting import ceiling_above, format_value, plural
from pytest_flopbudget._report import MAX_COUNT, Report

#: Default headroom of a suggested ceiling over the count, in percent: room for a small intended change without
#: a budget edit, small enough that an accidental doubling of a layer fails.
HEADROOM = Decimal(2)
MAX_HEADROOM = Decimal(1000)

#: Factory names that say nothing about the model: `pkg.resnet:build` is named after its module, `resnet`.
GENERIC_FACTORIES = frozenset(
    {"build", "build_model", "create", "create_model", "factory", "get", "get_model", "load", "main", "make",
     "make_model", "model", "net", "network", "new"}
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class InitRequest:
    """What `flopbudget init` was asked: the targets, how to count them, and how to write their tables."""

    targets: Sequence[str]
    input: list[str] | None = None
    dtype: str | None = None
    training: bool = False
    execution: str | None = None
    name: str | None = None
    headroom: str | None = None
    force: bool = False
    dry_run: bool = False
    pyproject: str | None = None


@dataclasses.dataclass(frozen=True)
class _Planned:
    """One model to add: its name, the entry to count, and the target as the table will spell it."""

    name: str
    entry: ModelEntry
    written_target: str


def run_init(request: InitRequest, out: TextIO, err: TextIO) -> int:
    """Count every target and add its table (or print it with `dry_run`); errors are raised for `cli.main`."""
    headroom = parse_headroom(request.headroom)
    path, original, old = _read_pyproject(request.pyproject)
    settings = parse_settings(old, path) if old is not None else Settings(root=path.parent)
    planned = plan_models(request, settings.root)
    for item in planned:  # a taken name fails before anything is counted
        if item.name in settings.models and not request.force:
            raise UsageError(
                f"{display_path(str(path))}: [tool.flopbudget.models.{item.name}] exists already; choose another "
                f"name with --name, or pass --force to replace it"
            )
    reports = _count(planned, settings.root, err)
    models = [_new_model(item, report, headroom) for item, report in zip(planned, reports)]
    edit = plan_edit(path, old, models, settings, request.force)
    shown = display_path(str(path))
    if request.dry_run:
        out.write(f"would {'create' if edit.created else 'change'} {shown} with:\n\n{edit.snippet}\n")
        out.write("(dry run: nothing was written)\n")
        return 0
    write_edit(edit, original)
    baseline_dir = display_path(str(parse_settings(edit.text, path).baseline_dir))
    for model, report in zip(models, reports):
        where = f"{shown}:{edit.lines[model.name]}"
        out.write(f"{where}: added [tool.flopbudget.models.{model.name}]: {_summary(model, report)}\n")
    out.write(
        f"next: run {CLI_UPDATE_HINT} to record the baselines in {baseline_dir}/, then commit {shown} and "
        f"{baseline_dir}/\n"
    )
    return 0


def parse_headroom(text: str | None) -> Decimal:
    """`--headroom 5` or `5%` -> Decimal(5); 0 means the count rounded up and nothing more."""
    if text is None:
        return HEADROOM
    try:
        value = Decimal(text.strip().removesuffix("%").strip())
    except InvalidOperation:
        value = Decimal(-1)
    if not value.is_finite() or not Decimal(0) <= value <= MAX_HEADROOM:
        raise UsageError(f"--headroom {text!r}: give a percentage from 0 to {MAX_HEADROOM}, such as 2 or 2%")
    return value


def suggest_ceiling(value: int, headroom: Decimal) -> str:
    """The budget string for a count: `value` plus `headroom` percent, rounded up to 3 significant digits, and
    at most `MAX_COUNT` (10^30), the largest value a budget may hold: a count near it gets the bound itself,
    which `check` still reads (a count is never above the bound, so the ceiling is never below the count)."""
    with localcontext() as exact:
        exact.prec = 100  # the default 28 digits would round a 30-digit count, possibly down
        padded = (Decimal(value) * (1 + headroom / 100)).to_integral_value(rounding=ROUND_CEILING)
    return ceiling_above(min(int(padded), MAX_COUNT))


def plan_models(request: InitRequest, root: Path) -> list[_Planned]:
    """Every model the targets name, with unique valid names, in the order given (files of a folder sorted)."""
    if not request.targets:
        raise UsageError(
            "give a target: package.module:factory, path/to/model.onnx, a SavedModel directory or a folder of models"
        )
    planned: list[_Planned] = []
    for target in request.targets:
        target = target.strip()
        folder = Path(target)
        backend = backend_for_target(target)
        if backend is not None and backend.directory_marker and folder.is_dir():  # a model that is a directory
            planned.append(_model_file(request, folder, root, _valid_name(folder.resolve().name)))
        elif not is_reference(target) and folder.is_dir():
            planned += _folder(request, folder, root)
        elif backend is not None and backend.files:
            if not Path(target).is_file():
                raise UsageError(f"{target}: no such {backend.framework} file")
            planned.append(_model_file(request, Path(target), root, _valid_name(Path(target).stem)))
        elif backend is not None:
            if not request.input:
                raise UsageError(
                    f"{target}: give the model's example inputs with --input, e.g. --input 1,3,224,224 (see "
                    f"`flopbudget init --help`)"
                )
            entry, _ = resolve_target(_count_request(request, target))
            name = _factory_name(target)
            planned.append(_Planned(name, dataclasses.replace(entry, name=name), target))
        else:
            raise UsageError(
                f"{target!r} is not a target: give package.module:factory, path/to/model.onnx, a SavedModel "
                f"directory or a folder of models"
            )
    if request.name is not None:
        if len(planned) != 1:
            raise UsageError(f"--name names one model, but the targets give {len(planned)}; leave --name out")
        if not BARE_KEY.fullmatch(request.name):
            raise UsageError(f"--name {request.name!r}: use letters, digits, '_' and '-' only")
        planned = [dataclasses.replace(planned[0], name=request.name)]
    names = [item.name for item in planned]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise UsageError(
            f"two targets would both be named {repeated[0]!r}; run flopbudget init once per target with --name"
        )
    return planned


def _folder(request: InitRequest, folder: Path, root: Path) -> list[_Planned]:
    """Every model below `folder` (hidden directories skipped): each model file (a file backend's target:
    `.onnx`) and each model directory (one holding a backend's `directory_marker`: a SavedModel), named by stem,
    or by path where stems clash. Nothing inside a model directory is looked at."""
    found = _models_below(folder)
    if not found:
        raise UsageError(f"{folder.as_posix()}: no {_kinds_text()} in this folder or below")
    stems = [path.stem if path.is_file() else path.name for path in found]
    planned = []
    for path, stem in zip(found, stems):
        relative = path.relative_to(folder)
        relative = relative.with_suffix("") if path.is_file() else relative
        name = stem if stems.count(stem) == 1 else "_".join(relative.parts)
        planned.append(_model_file(request, path, root, _valid_name(name)))
    return planned


def _models_below(directory: Path) -> list[Path]:
    """The model files and model directories below `directory`, sorted, not looking inside a model directory."""
    found: list[Path] = []
    try:
        entries = sorted(directory.iterdir())
    except OSError:  # an unreadable folder holds nothing that can be counted
        return found
    for path in entries:
        if path.name.startswith("."):
            continue
        if path.is_dir():
            found += [path] if _is_model_directory(path) else _models_below(path)
        elif _is_model_file(path):
            found.append(path)
    return sorted(found)


def _kinds_text() -> str:
    """`.onnx file or directory holding saved_model.pb`: what a folder of models may hold."""
    backends = general_first()
    suffixes = [suffix for backend in backends if backend.files for suffix in backend.suffixes]
    markers = [f"directory holding {backend.directory_marker}" for backend in backends if backend.directory_marker]
    return joined(([f"{joined(suffixes)} file"] if suffixes else []) + markers) or "model"


def _is_model_directory(path: Path) -> bool:
    backend = backend_for_target(str(path))
    return backend is not None and bool(backend.directory_marker) and path.is_dir()


def _is_model_file(path: Path) -> bool:
    backend = backend_for_target(str(path))
    return backend is not None and backend.files and path.is_file()


def _model_file(request: InitRequest, path: Path, root: Path, name: str) -> _Planned:
    entry, _ = resolve_target(_count_request(request, str(path)))
    absolute = path.resolve()
    try:
        written = Path(os.path.relpath(absolute, root.resolve())).as_posix()
    except ValueError:  # another drive (Windows): only an absolute path reaches it
        written = absolute.as_posix()
    return _Planned(name, dataclasses.replace(entry, name=name, target=str(absolute)), written)


def _count_request(request: InitRequest, target: str) -> CountRequest:
    return CountRequest(
        target=target, input=request.input, dtype=request.dtype, training=request.training,
        execution=request.execution,
    )  # fmt: skip


def _factory_name(reference: str) -> str:
    """`pkg.models:resnet18` -> `resnet18`; `pkg.resnet:build` -> `resnet` (a generic factory takes its module's)."""
    module, _, attribute = reference.partition(":")
    name = attribute.split(".")[-1]
    if name.lower() in GENERIC_FACTORIES:
        name = module.split(".")[-1]
    return _valid_name(name)


def _valid_name(text: str) -> str:
    """A bare TOML key: runs of other characters become `_`."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_") or "model"


def _read_pyproject(given: str | None) -> tuple[Path, bytes | None, str | None]:
    """The pyproject.toml to edit (`--pyproject`, else the nearest, else a new one here), its bytes and its text
    (None: there is no file yet).

    The path is the file's real one (symbolic links resolved, as `check` resolves them), so ONNX targets are
    written relative to the directory `check` reads them from. Read as bytes and decoded, so CRLF line endings
    survive the edit untouched; the bytes are kept to make sure nobody changed the file before it is replaced.
    """
    found = Path(given) if given is not None else find_pyproject(Path.cwd())
    path = (found or Path.cwd() / "pyproject.toml").absolute()
    shown = display_path(str(path))
    if path.is_dir():
        raise UsageError(f"--pyproject {given}: a directory; give the path of a pyproject.toml file")
    try:
        path = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise UsageError(f"{shown}: cannot follow the path: {getattr(exc, 'strerror', None) or exc}") from None
    data = read_pyproject_bytes(path, shown)
    if data is None:
        if not path.parent.is_dir():
            raise UsageError(f"--pyproject {given}: the directory {path.parent} does not exist")
        return path, None, None
    try:
        return path, data, data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{shown}: not UTF-8 text, as TOML requires") from None


def _count(planned: Sequence[_Planned], root: Path, err: TextIO) -> list[Report]:
    reports = []
    with Progress(len(planned), getattr(err, "raw", err)) as progress:
        for item in planned:
            progress.start(item.name)
            try:
                reports.append(count_entry(item.entry, root))
            except CountingError as exc:
                raise CountingError(command_line_hint(exc)) from None
            progress.advance()
    return reports


def _new_model(item: _Planned, report: Report, headroom: Decimal) -> NewModel:
    ceilings: dict[str, str | int] = {"flops": suggest_ceiling(report.flops, headroom)}
    if report.int_ops:  # a quantized model's integer work gets its ceiling, or it would go unbudgeted
        ceilings[INT_OPS.key] = suggest_ceiling(report.int_ops, headroom)
    ceilings.update({"params": suggest_ceiling(report.params, headroom), "max-skipped-ops": report.skipped_calls})
    entry = item.entry
    return NewModel(
        name=item.name,
        target=item.written_target,
        inputs=entry.inputs,
        ceilings=ceilings,
        training=entry.training,
        execution=entry.execution,
        comment=f"flopbudget init: ceilings = count + {headroom.normalize():f}%, rounded up to 3 significant digits",
    )


def _summary(model: NewModel, report: Report) -> str:
    """`flops = "1.23M" (count 1.20 MFLOPs), params = "4.57k" (count 4.48k params), max-skipped-ops = 0`."""
    parts = []
    for metric in (FLOPS, INT_OPS, PARAMS):
        if metric.key not in model.ceilings:
            continue
        count = format_value(report.metric(metric), metric)
        parts.append(f'{metric.key} = "{model.ceilings[metric.key]}" (count {count})')
    skipped = report.skipped_calls
    note = f" ({plural(skipped, 'op call')} not counted: `flopbudget count` lists them)" if skipped else ""
    parts.append(f"max-skipped-ops = {skipped}{note}")
    return ", ".join(parts)
