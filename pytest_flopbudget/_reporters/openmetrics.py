"""GitLab's metrics report (`metrics:PATH`, `artifacts: reports: metrics:`): OpenMetrics text, one series per model
and metric, which the merge request widget compares with the target branch's.

One gauge family per metric (`flopbudget_flops`, `flopbudget_peak_memory_bytes` with `# UNIT bytes`), one sample
per model, labelled `model="NAME"`, and the `# EOF` line OpenMetrics ends with.

GitLab does not read OpenMetrics with an OpenMetrics parser: it drops everything from the first `#` of a line,
splits what is left as a shell would, and keys each value by the whole `name{labels}` text. So a model name
reaches a label value made one inert line (`safe_text.one_line`), with `#` written `\\x23`, and then escaped as
OpenMetrics escapes label values (`\\\\`, `\\"`): a name with a quote, a newline or a `#` can neither end the
sample early nor hide it from GitLab.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from pytest_flopbudget._atomic_file import write_atomic
from pytest_flopbudget._judge.verdict import Verdict
from pytest_flopbudget._metrics import METRICS, Metric
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._reporters.trend import Figure, figures, named, unit
from pytest_flopbudget._safe_text import one_line

PREFIX = "flopbudget_"
#: What OpenMetrics allows in a metric name beyond its first character.
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_]")


def family(metric: Metric) -> str:
    """`flopbudget_flops`, `flopbudget_param_bytes`, `flopbudget_peak_memory_bytes`: a name OpenMetrics accepts,
    ending in its unit where it has one (OpenMetrics requires it)."""
    name = PREFIX + _NOT_IN_NAME.sub("_", metric)
    suffix = _unit(metric)
    return name if not suffix or name.endswith(f"_{suffix}") else f"{name}_{suffix}"


def label_text(name: str) -> str:
    """A model name as the label value means it: one inert line, no `#` (GitLab would cut the line there)."""
    return one_line(name).replace("#", "\\x23")


def metrics_text(verdicts: Sequence[Verdict]) -> str:
    """The whole report: the families in metric order, each with the models that measure it, then `# EOF`."""
    models = [(name, figures(verdict)) for name, verdict in named(verdicts, label_text)]
    lines = []
    for metric in METRICS:
        samples = [(name, figure) for name, found in models for figure in found if figure.metric == metric]
        if samples:
            lines += _family_lines(metric, samples)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def write_metrics(verdicts: Sequence[Verdict], path: str | os.PathLike[str]) -> None:
    """Write the report to `path` atomically (parents created); `# EOF` alone when no model was counted."""
    write_atomic(Path(path), metrics_text(verdicts))


# -- helpers ---------------------------------------------------------------------------------------------------------


def _unit(metric: Metric) -> str:
    """The OpenMetrics unit: `bytes` for the memory metrics; the counts (FLOPs, params, ...) have none."""
    word = unit(metric)
    return word if word == "bytes" else ""


def _family_lines(metric: Metric, samples: list[tuple[str, Figure]]) -> list[str]:
    name = family(metric)
    lines = [f"# TYPE {name} gauge"]
    if _unit(metric):
        lines.append(f"# UNIT {name} {_unit(metric)}")
    lines.append(f"# HELP {name} {metric.label} per model, counted by pytest-flopbudget")
    for model, figure in samples:
        lines.append(f'{name}{{model="{_escaped(model)}"}} {figure.value}')
    return lines


def _escaped(value: str) -> str:
    """OpenMetrics label-value escaping (the value holds no newline: `one_line` wrote it `\\x0a`)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


class MetricsOutput:
    """`metrics:PATH`: GitLab's metrics report (OpenMetrics), one series per model and metric."""

    workspace_variables = ("CI_PROJECT_DIR",)

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        assert path is not None
        write_metrics(findings.result.verdicts, path)
