"""The one entry point both front ends call for CI output: parse `--report` specs, then `emit` them.

The pytest plugin (`--flopbudget-report=SPEC`) and the CLI (`flopbudget check --report SPEC`) hand over the same
`RunResult` and get the same GitHub annotations, job summary, GitLab Code Quality file and JSON results: each
output is one module implementing `Output` (reporters/output.py), looked up by kind in `OUTPUTS`. Specs are
checked before any model is counted, so a typo fails in a second
rather than after a long run. Writing is best-effort per output: one unwritable path is reported in
`EmitResult.failures` and does not stop the others.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_flopbudget._errors import ConfigError
from pytest_flopbudget._reporters import (
    bencher,
    benchmark,
    diff_pictures,
    github,
    gitlab,
    json_report,
    layer_diff,
    markdown,
    openmetrics,
    pr_comment,
    terminal,
)
from pytest_flopbudget._reporters.annotations import collect
from pytest_flopbudget._reporters.output import Findings, Output, OutputContext, SupportsWrite
from pytest_flopbudget._run import RunResult

#: Every output by kind: one module each, all written through the `Output` interface. A front end asks for the
#: terminal text (`TERMINAL`) and `flopbudget diff` for its per-layer diff (`LAYER_DIFF`); users pick the others.
OUTPUTS: dict[str, Output] = {
    "github": github.GitHubOutput(),
    "gitlab": gitlab.GitLabOutput(),
    "json": json_report.JsonOutput(),
    "markdown": markdown.MarkdownOutput(),
    "metrics": openmetrics.MetricsOutput(),
    "benchmark": benchmark.BenchmarkOutput(),
    "bencher": bencher.BencherOutput(),
    "terminal": terminal.TerminalOutput(),
    "diff": layer_diff.LayerDiffOutput(),
    "comment": pr_comment.CommentOutput(),
    "pictures": diff_pictures.PicturesOutput(),
}

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
    raise ReportSpecError(f"unknown report {text!r}; expected {GRAMMAR}")


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
        output = OUTPUTS[spec.kind]
        context = OutputContext(_root(output.workspace_variables, workspace, env), env, out, err)
        try:
            output.write(findings, spec.path, context)
        except OSError as exc:
            if spec in (TERMINAL, LAYER_DIFF):
                raise  # the front end's own streams: its handling applies (a reader gone, a full device)
            why = exc.strerror or str(exc) or type(exc).__name__
            emitted.failures.append(f"cannot write the {spec.kind} report {spec}: {why}")
    return emitted


def workspace_root(output: Output, env: Mapping[str, str] | None = None) -> str:
    """The directory `output`'s paths are relative to, as `emit` picks it (the CI checkout, else the cwd)."""
    return _root(output.workspace_variables, None, os.environ if env is None else env)


# -- helpers ---------------------------------------------------------------------------------------------------------


def _root(names: Sequence[str], workspace: str | os.PathLike[str] | None, env: Mapping[str, str]) -> str:
    """The directory report paths are relative to: explicit, else the CI system's checkout, else the cwd."""
    if workspace is not None:
        return os.fspath(workspace)
    for name in names:
        if env.get(name):
            return env[name]
    return os.getcwd()
