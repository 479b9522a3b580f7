"""Add `[tool.flopbudget.models.NAME]` tables to a pyproject.toml without disturbing anything else in it.

`flopbudget init` edits a file the user owns and reviews, so the edit is as small as an edit can be: new tables are
appended at the end, every existing byte stays where it was (line endings included), and `--force` replaces only
the lines of the table it replaces. The result is re-read by `config.parse_settings` before anything is written:
an existing file whose layout a new table cannot join (an inline `models = {...}`, a model declared by dotted
keys) is refused with one line instead of being turned into invalid TOML. The write itself is atomic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..baseline import write_atomic
from ..budget import Budget
from ..config import DEFAULT_BASELINE_DIR, Inputs, InputSpec, Settings, parse_settings
from ..source import LocatedError, display_path
from .project import UsageError

#: A TOML bare key: the only model names `init` writes, so no table header ever needs quoting.
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_HEADER = re.compile(r"\s*\[(?!\[)")


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


def write_edit(edit: Edit) -> None:
    """Write the planned text atomically: the file is the old one or the new one, never half of each (a symlinked
    pyproject.toml stays a symlink: its target is replaced)."""
    write_atomic(edit.path.resolve(), edit.text)


def _replace_table(text: str, model: NewModel, settings: Settings, newline: str, shown: str) -> str:
    """`text` with the lines of the existing table of `model.name` replaced by the new table.

    The table runs from its header to its last non-blank, non-comment line before the next header: comments and
    blank lines in front of the next table belong to that table and are kept.
    """
    entry = settings.models[model.name]
    lines = text.splitlines(keepends=True)
    start = (entry.source.line or 0) - 1
    if not (0 <= start < len(lines)) or not _HEADER.match(lines[start]):
        raise UsageError(
            f"{shown}: [tool.flopbudget.models.{model.name}] is not declared by its own [table] header (dotted "
            f"keys or an inline table); edit it by hand, or choose another name with --name"
        )
    end = start + 1
    last = start + 1
    depth = 0  # open brackets of a multi-line array: `    [1, 8],` inside one is a value, not a header
    while end < len(lines) and not (depth == 0 and _is_header(lines[end])):
        stripped = lines[end].strip()
        if stripped and not stripped.startswith("#"):
            last = end + 1
        depth = max(depth + _bracket_balance(lines[end]), 0)
        end += 1
    return "".join(lines[:start]) + model.table(newline) + "".join(lines[last:])


_TABLE_HEADER = re.compile(r"""\s*\[\[?\s*[A-Za-z0-9_\-."' ]+\s*\]\]?\s*(#.*)?""")


def _is_header(line: str) -> bool:
    """`[table]` or `[[array.of.tables]]` (both end the table being replaced), not a value line."""
    return _TABLE_HEADER.fullmatch(line.rstrip("\r\n")) is not None


def _bracket_balance(line: str) -> int:
    """`[` minus `]` outside strings and comments, to follow multi-line arrays."""
    balance, quote = 0, ""
    for char in line:
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            break
        elif char == "[":
            balance += 1
        elif char == "]":
            balance -= 1
    return balance


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
