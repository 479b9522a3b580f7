"""`flopbudget diff`: the per-layer change of every metric since the baseline, without judging.

The models go through the same `Run` as `flopbudget check`; the text is the `diff` output (reporters/layer_diff.py),
and `--format svg|html` draws one model's base vs now instead (render/diff_flame.py).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TextIO

from pytest_flopbudget._cli.check import count_into
from pytest_flopbudget._cli.count import write_output
from pytest_flopbudget._cli.count_formats import PICTURES
from pytest_flopbudget._cli.project import UsageError, load_project, select_models
from pytest_flopbudget._config.pyproject import ModelEntry, Settings
from pytest_flopbudget._front_ends import CLI
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._metrics import FLOPS, Metric
from pytest_flopbudget._render.formatting import metric_title
from pytest_flopbudget._reporters import ci, layer_diff
from pytest_flopbudget._run import EXIT_ERROR, EXIT_OK, Run


def run_diff(
    *,
    pyproject: str | None,
    names: Sequence[str],
    out: TextIO,
    err: TextIO,
    format: str = "text",
    metric: Metric | None = None,
    output: str | None = None,
) -> int:
    if metric is not None and format not in PICTURES:
        raise UsageError(f"--metric sets what a picture shows; give it with --format svg or html, not {format}")
    settings = load_project(pyproject)
    entries = select_models(settings, names)
    if format not in PICTURES:
        if output is None:
            return diff_models(entries, settings, out, err)
        buffer = io.StringIO()
        code = diff_models(entries, settings, buffer, err)
        write_output(output, buffer.getvalue())
        return code
    if len(entries) != 1:
        raise UsageError(f"--format {format} draws one model: name it (flopbudget diff NAME --format {format})")
    text = diff_picture(entries[0], settings, format, metric or FLOPS, err)
    if text is None:
        return EXIT_ERROR
    if output is None:
        out.write(text)
    else:
        write_output(output, text)
    return EXIT_OK


def diff_picture(entry: ModelEntry, settings: Settings, format: str, metric: Metric, err: TextIO) -> str | None:
    """The differential icicle of one model in `format` (svg or html); None, with the reason on `err`, when the
    model could not be counted or has no readable baseline (the text output's `error:` line)."""
    from pytest_flopbudget._render import diff_flame

    run = Run(BaselineStore(settings.baseline_dir), front_end=CLI)
    count_into(run, [entry], settings, err)
    result = run.finish()
    if layer_diff.has_errors(result):
        err.write("\n".join(layer_diff.diff_blocks(result)) + "\n")
        return None
    verdict = result.verdicts[0]
    assert verdict.baseline is not None
    if not (verdict.report.measures(metric) and verdict.baseline.measures(metric)):
        raise UsageError(
            f"--metric {metric}: {entry.name} has no {metric_title(metric)} in both counts, so nothing to draw"
        )
    draw = diff_flame.render_html if format == "html" else diff_flame.render_svg
    return draw(verdict.baseline, verdict.report, metric=metric, title=f"{entry.name}: base vs now", name=entry.name)


def diff_models(entries: Sequence[ModelEntry], settings: Settings, out: TextIO, err: TextIO | None = None) -> int:
    """Print the per-layer change of every metric against the baseline; no budget is looked at."""
    run = Run(BaselineStore(settings.baseline_dir), front_end=CLI)
    count_into(run, entries, settings, err)
    result = run.finish()
    # the models in the order asked for (the run sorts them by name for the reports)
    position = {entry.name: index for index, entry in enumerate(entries)}
    result.verdicts.sort(key=lambda verdict: position[verdict.name])
    result.unchecked.sort(key=lambda unchecked: position[unchecked.name])
    ci.emit(result, [ci.LAYER_DIFF], stream=out, errors=err)
    return EXIT_ERROR if layer_diff.has_errors(result) else EXIT_OK
