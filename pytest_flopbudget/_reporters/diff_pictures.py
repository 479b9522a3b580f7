"""`pictures:PATH`: one HTML page with the differential icicle (render/diff_flame.py) of every model that changed.

The job summary and the pull-request comment show *which layers* grew as tables; the picture shows it in place,
inside the model's structure. GitHub renders no SVG in a job summary or a comment and strips `data:` URIs, so the
pictures travel as a file the action uploads as an artifact and links from both: one self-contained page (no
script, nothing loaded: `flame.html_page`'s content security policy), one section per model, so one link serves a
pull request that changed many models.

Which models, against what, in what order: those the summary gives a per-layer diff because their count changed
(`layer_diff.changed_metrics` against the verdict's baseline, the base ref's under `--base-ref`), in the order the
summary lists them (`markdown.summary_order`). A model's picture is of the first metric that changed and that an
icicle can draw (FLOPs when they changed; a skipped-op count has no layers to draw). A model whose formula changed
(`curve_lines.changed_curves`) also gets its curve base vs now (`curve.picture.render_change_svg`), its section
then holding the icicle, where the count at the point changed, and the curve. When no model changed there is
nothing to draw: no file is written and a regular file left at PATH by an earlier run is removed, so that the
file's presence alone says there are pictures (the action uploads it only then).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_flopbudget._atomic_file import write_atomic
from pytest_flopbudget._curve import picture
from pytest_flopbudget._judge.formula_diff import term_changes
from pytest_flopbudget._judge.verdict import Verdict
from pytest_flopbudget._metrics import METRICS, Metric
from pytest_flopbudget._render import diff_flame
from pytest_flopbudget._render.flame import html_page, xml_text
from pytest_flopbudget._render.formatting import metric_title, plural
from pytest_flopbudget._reporters.curve_lines import changed_curves
from pytest_flopbudget._reporters.layer_diff import changed_metrics
from pytest_flopbudget._reporters.markdown import summary_order
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._run import RunResult

#: Each model's section starts a line with this: the action counts the pictures with `grep -c`.
SECTION = '<section class="model"'
#: How many changed terms (by group of layers) a curve's notes name.
SHOWN_TERMS = 6


def pictured(verdicts: Sequence[Verdict]) -> list[tuple[Verdict, Metric | None, Metric | None]]:
    """The models that get a section, in the summary's order, each with the metric its icicle draws and the
    metric its curve draws (None where it gets no icicle, or no curve)."""
    chosen = []
    for verdict in summary_order(verdicts):
        metric, curve = picture_metric(verdict), curve_metric(verdict)
        if metric is not None or curve is not None:
            chosen.append((verdict, metric, curve))
    return chosen


def curve_metric(verdict: Verdict) -> Metric | None:
    """The metric whose formula the section draws base vs now: the icicle's where its formula changed, else the
    first whose formula changed (`curve_lines.changed_curves`); None when the model has no formula, no
    baseline formula, or the same one."""
    changed = changed_curves(verdict)
    if not changed:
        return None
    metric = picture_metric(verdict)
    return metric if metric in changed else changed[0]


def picture_metric(verdict: Verdict) -> Metric | None:
    """The first metric whose per-layer figures changed since the baseline and that both counts measure; None when
    the model has no baseline or nothing an icicle can draw changed."""
    baseline = verdict.baseline
    if baseline is None:
        return None
    for metric in changed_metrics(verdict):
        if metric in METRICS.counted and verdict.report.measures(metric) and baseline.measures(metric):
            return metric
    return None


def pictures_page(result: RunResult) -> str | None:
    """The page, or None when no model changed."""
    chosen = pictured(result.verdicts)
    if not chosen:
        return None
    names = [verdict.name for verdict in result.verdicts]
    duplicated = {name for name in names if names.count(name) > 1}
    against = f"the baselines at {result.base_ref}" if result.base_ref else "the committed baselines"
    title = f"differential pictures of {plural(len(chosen), 'changed model')}"
    lines = [
        f"<h1>flopbudget: {xml_text(title)}</h1>",
        f"<p>Each box is a layer now, as wide as its cost; its colour is its change against {xml_text(against)} "
        "(reds grew, blues shrank). Hover a box for base → now.</p>",
        *(
            [
                "<p>A model whose cost formula changed also has its curve, base (dashed) vs now, log-log, and each "
                "term that changed as a line of its own: a new term of a higher degree is the steeper line, however "
                "small it is at the budgeted point.</p>"
            ]
            if any(curve is not None for _, _, curve in chosen)
            else []
        ),
        "<ul>",
    ]
    headings = [_heading(verdict, metric or curve, verdict.name in duplicated) for verdict, metric, curve in chosen]
    lines.extend(f'<li><a href="#model-{index}">{heading}</a></li>' for index, heading in enumerate(headings, 1))
    lines.append("</ul>")
    for index, ((verdict, metric, curve), heading) in enumerate(zip(chosen, headings), 1):
        lines.extend([f'{SECTION} id="model-{index}">', f"<h2>{heading}</h2>"])
        if metric is not None:
            assert verdict.baseline is not None
            svg = diff_flame.render_svg(
                verdict.baseline, verdict.report, metric=metric, title=f"{verdict.name}: base vs now", name=verdict.name
            )
            lines.append(svg.rstrip("\n"))
        if curve is not None:
            lines.append(_curve_svg(verdict, curve).rstrip("\n"))
        lines.append("</section>")
    return html_page("\n".join(lines), title)


def _curve_svg(verdict: Verdict, metric: Metric) -> str:
    """The model's formula base vs now (`curve.picture.render_change_svg`), the changed terms named with the
    layers that carry them (`judge.formula_diff`, as the check's warning names them)."""
    formula, base = verdict.measurement.formula, verdict.baseline_formula
    assert formula is not None and base is not None
    changes = term_changes(base, formula, metric)
    notes = [f"{change} (degree {change.degree})" for change in changes[:SHOWN_TERMS]]
    if len(changes) > SHOWN_TERMS:
        notes.append(f"and {plural(len(changes) - SHOWN_TERMS, 'more change')} by layer")
    title = f"{verdict.name}: cost curve"
    return picture.render_change_svg(base, formula, metric=metric, title=title, notes=notes)


class PicturesOutput:
    """`pictures:PATH`: the differential pictures page, written to PATH when some model changed."""

    workspace_variables: tuple[str, ...] = ()

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        assert path is not None
        target = Path(path)
        page = pictures_page(findings.result)
        if page is not None:
            write_atomic(target, page)
        elif target.is_symlink() or target.is_file():
            target.unlink()  # an earlier run's pictures: stale now (a device or FIFO at PATH is left alone)


def _heading(verdict: Verdict, metric: Metric | None, show_nodeid: bool) -> str:
    """`name (FLOPs)`, escaped; with the test's node id where two tests count a model of the same name."""
    text = f"{verdict.name} ({metric_title(metric)})"
    if show_nodeid and verdict.measurement.nodeid:
        text += f" · {verdict.measurement.nodeid}"
    return xml_text(text)
