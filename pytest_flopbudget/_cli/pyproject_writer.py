"""Add `[tool.flopbudget.models.NAME]` tables to a pyproject.toml without disturbing anything else in it.

`flopbudget init` edits a file the user owns and reviews, so the edit is as small as an edit can be: new tables are
appended at the end, every existing byte stays where it was (line endings included), and `--force` replaces only
the lines of the table it replaces. The result is re-read by `config.parse_settings` before anything is written:
an existing file whose layout a new table cannot join (an inline `models = {...}`, a model declared by dotted
keys) is refused with one line instead of being turned into invalid TOML. The write itself is atomic, and only
happens while the file still holds what was read before counting (`write_edit`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_flopbudget._atomic_file import (
    FileTooLargeError,
    NotRegularFileError,
    read_regular_file,
    real_target,
    write_atomic,
)
from pytest_flopbudget._cli.project import UsageError
from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.location import LocatedError, display_path
from pytest_flopbudget._config.pyproject import DEFAULT_BASELINE_DIR, Inputs, InputSpec, Settings, parse_settings
from pytest_flopbudget._config.toml_locator import locate_statements

#: A TOML bare key: the only model names `init` writes, so no table header ever needs quoting.
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
#: The largest pyproject.toml read: far above any real one, and never an endless stream read into memory.
MAX_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class NewModel:
    """One table to write: the entry's settings and the suggested ceilings, already in budget grammar."""

    name: str
    target: str
    inputs: Inputs
    ceilings: Mapping[str, str | int]  # pyproject key -> value, in the order they are written
    training: bool = False
    execution: str = "fake"
    comment: str = ""

    def table(self, newline: str = "\n") -> str:
        lines = [f"[tool.flopbudget.models.{self.name}]"]
        if self.comment:
            lines.append(f"# {self.comment}")
        lines.append(f"target = {toml_string(self.target)}")
        if self.inputs is not None:
            lines.append(f"inputs = {toml_inputs(self.inputs)}")
        if self.training:
            lines.append("training = true")
        if self.execution != "fake":
            lines.append(f"execution = {toml_string(self.execution)}")
        for key, value in self.ceilings.items():
            lines.append(f"{key} = {value if isinstance(value, int) else toml_string(value)}")
        return newline.join(lines) + newline


def toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, except that TOML also wants DEL escaped."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_inputs(inputs: Inputs) -> str:
    """`[[1, 3, 224, 224]]`, `[{ shape = [1, 16], dtype = "int64" }]`, `{ input = [1, 3] }` or `"pkg:fn"`."""
    if isinstance(inputs, str):
        return toml_string(inputs)
    if isinstance(inputs, dict):
        items = ", ".join(f"{_key(name)} = {_spec(spec)}" for name, spec in inputs.items())
        return "{ " + items + " }" if items else "{}"
    return "[" + ", ".join(_spec(spec) for spec in inputs or []) + "]"


def _spec(spec: InputSpec) -> str:
    shape = "[" + ", ".join(str(d) for d in spec.shape) + "]"
    if spec.dtype is None:  # not given: `check` infers it (token ids, a model's float dtype) as `init` did
        return shape
    return f"{{ shape = {shape}, dtype = {toml_string(spec.dtype)} }}"


def _key(name: str) -> str:
    return name if BARE_KEY.fullmatch(name) else toml_string(name)


@dataclass(frozen=True)
class Edit:
    """The file's new text, what was added or replaced (`snippet`, for --dry-run) and where each model's table
    starts (1-based lines), before it is written."""

    path: Path
    text: str
    created: bool
    snippet: str
    lines: dict[str, int]


def plan_edit(path: Path, old: str | None, models: Sequence[NewModel], settings: Settings, force: bool) -> Edit:
    """The text `path` will have with `models` added (replacing same-named tables when `force`).

    `old` is the current text (None: the file does not exist) and `settings` what it declares now.
    Raises `UsageError` naming the file when a name exists already (without `force`) or the result would not be
    read back as exactly these models.
    """
    shown = display_path(str(path))
    newline = "\r\n" if old is not None and old.count("\r\n") * 2 > old.count("\n") else "\n"
    text = old or ""
    for model in models:
        if model.name in settings.models and not force:
            raise UsageError(
                f"{shown}: [tool.flopbudget.models.{model.name}] exists already; choose another name with --name, "
                f"or pass --force to replace it"
            )
    appended: list[str] = []
    replaced: list[str] = []
    if settings.source.file is None:  # no [tool.flopbudget] in any form
        appended.append(f"[tool.flopbudget]{newline}baseline-dir = {toml_string(DEFAULT_BASELINE_DIR)}{newline}")
    for model in models:
        if model.name in settings.models:
            text = _replace_table(text, model, settings, newline, shown)
            replaced.append(model.table(newline))
        else:
            appended.append(model.table(newline))
    if appended:
        if text and not text.endswith("\n"):
            text += newline
        text += (newline if text.strip() else "") + newline.join(appended)
    snippet = newline.join(appended + replaced)
    return Edit(path, text, old is None, snippet, _verify(path, text, models, shown))


def write_edit(edit: Edit, original: bytes | None) -> None:
    """Write the planned text atomically, unless the file changed since it was read as `original` (None: it did
    not exist): the file is then left as it is and `UsageError` says so. The check and the replace hold a lock
    (`_locked`), so of two `init`s that read the same text, the second finds the first one's edit and refuses,
    instead of both succeeding with one table lost. The file keeps its mode and owner (`write_atomic`); a
    symlinked pyproject.toml stays a symlink, its target is replaced."""
    shown = display_path(str(edit.path))
    target = real_target(edit.path)
    with _locked(target, shown):
        current = read_pyproject_bytes(edit.path, shown)
        if current != original:
            raise UsageError(
                f"{shown}: the file changed while flopbudget init was counting (an editor, or another init); "
                f"nothing was written: run the command again"
            )
        try:
            write_atomic(target, edit.text)
        except OSError as exc:
            raise UsageError(f"{shown}: cannot write the file: {exc.strerror or exc}") from None


def read_pyproject_bytes(path: Path, shown: str) -> bytes | None:
    """The file's bytes, None when there is none; `UsageError` for what is not a regular file (a FIFO would block
    a plain read forever, a device never ends) or cannot be read."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):  # also a dangling symlink: init creates its target
        return None
    except OSError as exc:
        raise UsageError(f"{shown}: cannot read the file: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{shown}: a directory; give the path of a pyproject.toml file")
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{shown}: not a regular file (a FIFO, a device or a socket); give a pyproject.toml file")
    try:
        return read_regular_file(path, MAX_BYTES)
    except NotRegularFileError:  # swapped between the two looks
        raise UsageError(f"{shown}: not a regular file; give a pyproject.toml file") from None
    except FileTooLargeError:
        raise UsageError(f"{shown}: larger than {MAX_BYTES // 2**20} MiB; that is not a pyproject.toml") from None
    except OSError as exc:
        raise UsageError(f"{shown}: cannot read the file: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _locked(target: Path, shown: str) -> Iterator[None]:
    """An exclusive lock for the compare-and-replace: `flock` on the file's directory, whose inode (unlike the
    file's, which the rename replaces) is the same for every writer, and which leaves no lock file behind. Without
    `fcntl` (Windows), or where the directory cannot be locked, the comparison alone guards the file."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    try:
        fd = os.open(target.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise UsageError(f"{shown}: cannot open its directory: {exc.strerror or exc}") from None
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _replace_table(text: str, model: NewModel, settings: Settings, newline: str, shown: str) -> str:
    """`text` with the lines of the existing table of `model.name` replaced by the new table.

    The table runs from its header to the last line of its last statement before the next header: comments and
    blank lines in front of the next table belong to that table and are kept. Statements are found by a TOML
    scanner (`toml_locator.locate_statements`) that follows strings of every kind, escapes, quoted keys, arrays
    and inline tables over several lines, so a `[` inside a value is never taken for a header; when it cannot
    follow the file, the table is not replaced.
    """
    entry = settings.models[model.name]
    path = ("tool", "flopbudget", "models", model.name)
    statements = locate_statements(text)
    if statements is None:
        raise UsageError(
            f"{shown}: cannot tell where [tool.flopbudget.models.{model.name}] ends; edit it by hand, or choose "
            f"another name with --name"
        )
    index = next(
        (i for i, s in enumerate(statements) if s.header == path and not s.array and s.first_line == entry.source.line),
        None,
    )
    if index is None:
        raise UsageError(
            f"{shown}: [tool.flopbudget.models.{model.name}] is not declared by its own [table] header (dotted "
            f"keys or an inline table); edit it by hand, or choose another name with --name"
        )
    first = statements[index].first_line
    last = statements[index].last_line
    for statement in statements[index + 1 :]:
        if statement.header is not None:
            break
        last = statement.last_line
    lines = _split_lines(text)
    return "".join(lines[: first - 1]) + model.table(newline) + "".join(lines[last:])


def _split_lines(text: str) -> list[str]:
    """The lines of `text`, each with its newline: split at LF only, as TOML counts lines (`str.splitlines` also
    splits at U+2028, NEL and other characters a TOML string may hold)."""
    return _LINE.findall(text)


_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def _verify(path: Path, text: str, models: Sequence[NewModel], shown: str) -> dict[str, int]:
    """Read the new text back as the plugin will: every new model must come out exactly as written."""
    try:
        settings = parse_settings(text, path.resolve())
    except LocatedError as exc:
        detail = str(exc).splitlines()[0] if str(exc) else "it does not validate"
        raise UsageError(
            f"{shown}: adding the tables would leave a file that does not read back ({detail}); "
            f"add them by hand (flopbudget init --dry-run prints them)"
        ) from None
    lines: dict[str, int] = {}
    for model in models:
        entry = settings.models.get(model.name)
        expected = parse_settings(model.table(), path.resolve()).models[model.name]
        if entry is None or (entry.target, entry.inputs, entry.training, entry.execution) != (
            expected.target, expected.inputs, expected.training, expected.execution,
        ) or _limits(entry.budget) != _limits(expected.budget):  # fmt: skip
            raise UsageError(
                f"{shown}: [tool.flopbudget.models.{model.name}] would not read back as written (the file declares "
                f"parts of it elsewhere); edit it by hand (flopbudget init --dry-run prints the table)"
            )
        lines[model.name] = entry.source.line or 0
    return lines


def _limits(budget: Budget) -> dict[str, int]:
    return {metric: limit.value for metric, limit in budget.limits.items()}
