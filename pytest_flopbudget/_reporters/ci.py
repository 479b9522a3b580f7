"""The one entry point both front ends call for CI output: parse `--report` specs, then `emit` them.

The pytest plugin (`--flopbudget-report=SPEC`) and the CLI (`flopbudget check --report SPEC`) hand over the same
`RunResult` and get the same GitHub annotations, job summary, GitLab Code Quality file and JSON results: each
output is one module implementing `Output` (reporters/output.py), looked up by kind in `BUILT_IN` and imported
only when a run names it, or a third party's, installed under the `pytest_flopbudget.outputs` entry points. Specs
are checked (and a third party's output loaded) before any model is counted, so a typo fails in a second rather
than after a long run. Writing is best-effort per output: one unwritable path is reported in
`EmitResult.failures` and does not stop the others.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from pytest_flopbudget._errors import ConfigError
from pytest_flopbudget._reporters.annotations import collect
from pytest_flopbudget._reporters.output import Findings, Output, OutputContext, SupportsWrite
from pytest_flopbudget._run import RunResult

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

#: Every built-in output by kind: the module and the class implementing `Output`, imported only when a run asks
#: for that kind (a check that writes no report never imports the HTTP poster or the picture code). A front end
#: asks for the terminal text (`TERMINAL`) and `flopbudget diff` for its per-layer diff (`LAYER_DIFF`); users pick
#: the others. A third party's outputs come from the `ENTRY_POINT_GROUP` entry points (`third_party`).
BUILT_IN: dict[str, str] = {
    "github": "github:GitHubOutput",
    "gitlab": "gitlab:GitLabOutput",
    "json": "json_report:JsonOutput",
    "markdown": "markdown:MarkdownOutput",
    "metrics": "openmetrics:MetricsOutput",
    "benchmark": "benchmark:BenchmarkOutput",
    "bencher": "bencher:BencherOutput",
    "terminal": "terminal:TerminalOutput",
    "diff": "layer_diff:LayerDiffOutput",
    "comment": "pr_comment:CommentOutput",
    "pictures": "diff_pictures:PicturesOutput",
}

#: The entry-point group a package outside this one registers its `--report KIND:PATH` outputs in: the entry
#: point's name is the KIND, its value an object implementing `pytest_flopbudget.outputs.Output` (or a class
#: whose instances do, made with no arguments). A built-in kind of the same name wins.
ENTRY_POINT_GROUP = "pytest_flopbudget.outputs"

#: Spec kinds that take a path (`gitlab:PATH`) and those that must not.
PATH_KINDS = ("gitlab", "json", "markdown", "metrics", "benchmark", "bencher", "comment", "pictures")
PLAIN_KINDS = ("github", "auto", "none")
GRAMMAR = (
    "github, gitlab:PATH, json:PATH, markdown:PATH, metrics:PATH, benchmark:PATH, bencher:PATH, comment:PATH, "
    "pictures:PATH, auto or none"
)
SPEC_HELP = (
    "CI output, repeatable: github (annotations and job summary), gitlab:PATH (Code Quality JSON), "
    "json:PATH (full results), markdown:PATH (the summary as a file), metrics:PATH (GitLab metrics report, "
    "OpenMetrics), benchmark:PATH (github-action-benchmark customSmallerIsBetter JSON), bencher:PATH (Bencher "
    "Metric Format JSON), comment:PATH (the pull-request comment's body, for the action to post), pictures:PATH "
    "(one HTML page with the differential icicle of every model that changed; none written when none did), none "
    "(no github output on GitHub Actions, where it is on by default)"
)


__all__ = [
    "SPEC_HELP", "EmitResult", "ReportSpec", "ReportSpecError", "emit", "parse_spec", "resolve_specs",
]  # fmt: skip


class ReportSpecError(ConfigError):
    """A `--report` / `--flopbudget-report` value that is not a known spec."""


@dataclass(frozen=True)
class ReportSpec:
    """One requested output: `kind` is a key of `OUTPUTS` (github, gitlab, json, ...); `path` is set for the file
    kinds."""

    kind: str
    path: str | None = None

    def __str__(self) -> str:
        return f"{self.kind}:{self.path}" if self.path is not None else self.kind


#: The outputs a front end asks for itself (no `--report` spec names them).
TERMINAL = ReportSpec("terminal")
LAYER_DIFF = ReportSpec("diff")


@dataclass
class EmitResult:
    """What `emit` could not do: why each output that failed could not be written. (What each output wrote is
    not listed: the paths are the user's own `--report` arguments, and no front end ever printed such notes.)"""

    #: `cannot write the json report json:r.json: Permission denied`, one per output that failed.
    failures: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        """One `flopbudget: error:` line per output that failed, as a front end prints it."""
        return [f"flopbudget: error: {failure}" for failure in self.failures]

    @property
    def ok(self) -> bool:
        return not self.failures


def parse_spec(text: str) -> ReportSpec:
    """`github`, `auto`, `none`, or a file kind with its path (`gitlab:PATH`, `json:PATH`, ..., `PATH_KINDS`);
    anything else raises one line."""
    raw = text.strip()
    kind, colon, path = raw.partition(":")
    kind = kind.strip().lower()
    if kind in PLAIN_KINDS:
        if colon:
            raise ReportSpecError(f"report {text!r}: {kind} takes no path; expected {GRAMMAR}")
        return ReportSpec(kind)
    if kind in PATH_KINDS:
        if not path.strip():
            raise ReportSpecError(f"report {text!r}: {kind} needs a file, as in {kind}:PATH; expected {GRAMMAR}")
        return ReportSpec(kind, path.strip())
    if kind in third_party():
        if not path.strip():
            raise ReportSpecError(f"report {text!r}: {kind} needs a file, as in {kind}:PATH; expected {grammar()}")
        output(kind)  # a broken entry point is a usage error now, before anything is counted
        return ReportSpec(kind, path.strip())
    raise ReportSpecError(f"unknown report {text!r}; expected {grammar()}")


def grammar() -> str:
    """`GRAMMAR` with the installed third-party kinds (`csv:PATH`) before `auto or none`."""
    extra = [f"{kind}:PATH" for kind in sorted(third_party())]
    if not extra:
        return GRAMMAR
    return GRAMMAR.replace(", auto or none", ", " + ", ".join(extra) + ", auto or none")


def output(kind: str) -> Output:
    """The output of `kind`: a built-in one (its module imported now, once) or an installed third party's (its
    entry point loaded now, once). Raises `ReportSpecError` (one line naming the entry point) when a third
    party's cannot be loaded or is not an output, and KeyError for a kind nobody registered."""
    found = _loaded.get(kind)
    if found is not None:
        return found
    if kind in BUILT_IN:
        module, _, name = BUILT_IN[kind].partition(":")
        found = getattr(importlib.import_module(f"{__package__}.{module}"), name)()
    else:
        found = _load_entry_point(kind, third_party()[kind])
    _loaded[kind] = found
    return found


def third_party() -> Mapping[str, EntryPoint]:
    """The installed `ENTRY_POINT_GROUP` entry points by kind (lower case; none named like a built-in kind), read
    from the installed distributions' metadata once per process, and only when a spec is not a built-in kind."""
    global _entry_points
    if _entry_points is None:
        from importlib.metadata import entry_points

        found: Any = entry_points()
        group = found.select(group=ENTRY_POINT_GROUP) if hasattr(found, "select") else found.get(ENTRY_POINT_GROUP, ())
        _entry_points = {}
        for entry_point in group:
            kind = entry_point.name.strip().lower()
            if kind not in BUILT_IN and kind not in PLAIN_KINDS:  # ours win: `terminal`, `auto` stay ours
                _entry_points.setdefault(kind, entry_point)
    return _entry_points


_loaded: dict[str, Output] = {}
_entry_points: dict[str, EntryPoint] | None = None


def _load_entry_point(kind: str, entry_point: EntryPoint) -> Output:
    where = f"the {kind} output ({entry_point.name} = {entry_point.value} in the {ENTRY_POINT_GROUP} entry points)"
    try:
        loaded = entry_point.load()
        found = loaded() if isinstance(loaded, type) else loaded
    except Exception as exc:
        raise ReportSpecError(f"{where} cannot be loaded: {_why(exc)}") from None
    if not callable(getattr(found, "write", None)):
        raise ReportSpecError(f"{where} is not an output: it has no write(findings, path, context) method")
    return cast(Output, found)


def _why(exc: BaseException) -> str:
    from pytest_flopbudget._safe_text import one_line

    return one_line(f"{type(exc).__name__}: {exc}")


def resolve_specs(values: Iterable[str], env: Mapping[str, str] | None = None) -> list[ReportSpec]:
    """The outputs to produce for `values`, duplicates removed, order kept.

    `auto` is always implied: it becomes `github` when `GITHUB_ACTIONS=true` (so `--report json:PATH` on GitHub
    still annotates the pull request) and nothing elsewhere. `none` turns `auto` off; other specs given with it
    still apply. Raises `ReportSpecError` for a bad value.
    """
    env = os.environ if env is None else env
    specs = [ReportSpec("auto"), *(parse_spec(value) for value in values)]
    disabled = any(spec.kind == "none" for spec in specs)
    resolved: list[ReportSpec] = []
    for spec in specs:
        if spec.kind == "auto":
            if disabled or env.get("GITHUB_ACTIONS") != "true":
                continue
            spec = ReportSpec("github")
        if spec.kind != "none" and spec not in resolved:
            resolved.append(spec)
    return resolved


def emit(
    result: RunResult,
    specs: Sequence[ReportSpec],
    *,
    workspace: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stream: SupportsWrite | None = None,
    errors: SupportsWrite | None = None,
) -> EmitResult:
    """Produce every output in `specs` for one run's result: its verdicts, its `--base-ref` budget changes and
    the models that could not be counted (errors in every output, not silently missing rows).

    `terminal` prints the run's text to `stream` (default: stdout) and its error lines to `errors` (default:
    stderr). `github` prints workflow commands to `stream` and appends the job summary to
    `$GITHUB_STEP_SUMMARY` when that is set; the file kinds write their PATH (relative to the current
    directory). Paths inside reports are relative to `workspace`, by default `GITHUB_WORKSPACE` (GitHub),
    `CI_PROJECT_DIR` (GitLab), or the current directory. With nothing to report at all, `github` stays silent
    (a step without models should not get an empty summary) while the files are still written, so a GitLab
    widget learns that earlier issues are gone.
    """
    env = os.environ if env is None else env
    out = sys.stdout if stream is None else stream
    err = sys.stderr if errors is None else errors
    emitted = EmitResult()
    findings = Findings(result, collect(result.verdicts, result.changes, result.unchecked))
    for spec in specs:
        writer = output(spec.kind)
        context = OutputContext(_root(_workspace_variables(writer), workspace, env), env, out, err)
        try:
            if spec.path is not None and spec.kind not in BUILT_IN:  # ours create their parents as they write
                os.makedirs(os.path.dirname(spec.path) or ".", exist_ok=True)
            writer.write(findings, spec.path, context)
        except OSError as exc:
            if spec in (TERMINAL, LAYER_DIFF):
                raise  # the front end's own streams: its handling applies (a reader gone, a full device)
            why = exc.strerror or str(exc) or type(exc).__name__
            emitted.failures.append(f"cannot write the {spec.kind} report {spec}: {why}")
        except Exception as exc:
            if spec.kind in BUILT_IN:
                raise  # our own bug: its traceback
            # a third party's bug costs its own file, not the other outputs or the verdict
            emitted.failures.append(f"the {spec.kind} report {spec} failed: {_why(exc)}")
    return emitted


def workspace_root(output: Output, env: Mapping[str, str] | None = None) -> str:
    """The directory `output`'s paths are relative to, as `emit` picks it (the CI checkout, else the cwd)."""
    return _root(_workspace_variables(output), None, os.environ if env is None else env)


def _workspace_variables(writer: Output) -> Sequence[str]:
    """A third party's output may leave `workspace_variables` out: its paths are then relative to the cwd."""
    return tuple(getattr(writer, "workspace_variables", ()))


# -- helpers ---------------------------------------------------------------------------------------------------------


def _root(names: Sequence[str], workspace: str | os.PathLike[str] | None, env: Mapping[str, str]) -> str:
    """The directory report paths are relative to: explicit, else the CI system's checkout, else the cwd."""
    if workspace is not None:
        return os.fspath(workspace)
    for name in names:
        if env.get(name):
            return env[name]
    return os.getcwd()
