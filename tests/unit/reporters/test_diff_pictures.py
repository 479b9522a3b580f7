"""`pictures:PATH` (reporters/diff_pictures.py): one HTML page, one differential icicle per model that changed, in
the job summary's order; nothing for a model that did not change; names escaped; no page when nothing changed."""

from __future__ import annotations

import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from reporter_helpers import pyproject

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._render import diff_flame
from pytest_flopbudget._render.flame import CSP
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report
from pytest_flopbudget._reporters import diff_pictures
from pytest_flopbudget._reporters.ci import ReportSpec, emit, parse_spec
from pytest_flopbudget._reporters.diff_pictures import SECTION, pictures_page
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._run import RunResult


def model(name: str, flops: str = "10k") -> str:
    """A model table; the name as a TOML basic string (JSON's escapes are TOML's)."""
    return f'[tool.flopbudget.models.{json.dumps(name)}]\ntarget = "pkg:m"\ninputs = [[1, 8]]\nflops = "{flops}"\n'


PYPROJECT = pyproject(model("grew"), model("over", flops="1k"), model("same"), model("new"), model("zeta"))


def sections(page: str) -> list[str]:
    """Each model's section, from its opening line to `</section>`."""
    return re.findall(rf"^{re.escape(SECTION)}.*?^</section>$", page, flags=re.M | re.S)


def headings(page: str) -> list[str]:
    return re.findall(r"^<h2>(.*)</h2>$", page, flags=re.M)


class Tags(HTMLParser):
    """Every start tag, to prove the page loads and runs nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def test_one_section_per_changed_model_in_the_summarys_order(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    grew = project.verdict("grew", make_report({"stem": 300, "head": 900}), make_report({"stem": 300, "head": 500}))
    over = project.verdict("over", make_report({"a": 1500}), make_report({"a": 800}))  # fails: first, as in the summary
    same = project.verdict("same", make_report({"a": 5}), make_report({"a": 5}))
    new = project.verdict("new", make_report({"a": 5}))  # no baseline: nothing to compare with
    zeta = project.verdict("zeta", make_report({"a": 4}), make_report({"a": 5}))  # shrank: a change too
    page = pictures_page(RunResult(verdicts=[zeta, same, new, grew, over]))
    assert page is not None
    assert headings(page) == ["over (FLOPs)", "grew (FLOPs)", "zeta (FLOPs)"]
    assert "<h1>flopbudget: differential pictures of 3 changed models</h1>" in page
    assert "against the committed baselines" in page
    found = sections(page)
    assert len(found) == 3 == page.count(SECTION)  # what the action's `grep -c` counts
    # each section is the model's own differential icicle, as `flopbudget diff NAME --format svg` draws it
    for index, verdict in enumerate([over, grew, zeta], 1):
        assert verdict.baseline is not None
        svg = diff_flame.render_svg(
            verdict.baseline, verdict.report, title=f"{verdict.name}: base vs now", name=verdict.name
        )
        assert found[index - 1] == "\n".join(
            [f'{SECTION} id="model-{index}">', f"<h2>{verdict.name} (FLOPs)</h2>", svg.rstrip("\n"), "</section>"]
        )
        assert f'<li><a href="#model-{index}">{verdict.name} (FLOPs)</a></li>' in page
    assert "FLOPs: base 800 FLOPs → now 1.50 kFLOPs (+87.5%)" in found[0]
    assert "FLOPs: base 800 FLOPs → now 1.20 kFLOPs (+50.0%)" in found[1]
    for absent in ("same", "new"):
        assert f"{absent}: base vs now" not in page


def test_the_page_is_self_contained(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    grew = project.verdict("grew", make_report({"a": 9}), make_report({"a": 5}))
    page = pictures_page(RunResult(verdicts=[grew]))
    assert page is not None and page.startswith("<!DOCTYPE html>\n") and page.endswith("</html>\n")
    parser = Tags()
    parser.feed(page)
    tags = [tag for tag, _ in parser.tags]
    assert "script" not in tags and "img" not in tags and "link" not in tags and "iframe" not in tags
    assert any(tag == "meta" and attrs.get("content") == CSP for tag, attrs in parser.tags)
    assert not any(attrs.get("src") for _, attrs in parser.tags)
    assert all(attrs["href"].startswith("#model-") for tag, attrs in parser.tags if tag == "a" and "href" in attrs)


def test_against_the_base_ref_when_compared_with_one(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    grew = project.verdict("grew", make_report({"a": 9}), make_report({"a": 5}))
    page = pictures_page(RunResult(verdicts=[grew], base_ref="origin/<main>"))
    assert page is not None and "against the baselines at origin/&lt;main&gt; (reds grew" in page


def test_no_page_when_no_model_changed(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    same = project.verdict("same", make_report({"a": 5}), make_report({"a": 5}))
    new = project.verdict("new", make_report({"a": 5}))
    assert pictures_page(RunResult(verdicts=[same, new])) is None
    assert pictures_page(RunResult()) is None


def test_a_model_whose_flops_held_is_drawn_by_the_metric_that_moved(make_project) -> None:
    project = make_project(PYPROJECT)

    def report(params: int) -> Report:
        layers = {"a": LayerCost(flops=10, macs=5, params=params)}
        return Report(layers=layers, forward=PhaseTotals(flops=10, macs=5))

    verdict = project.verdict("grew", report(7), report(3))
    page = pictures_page(RunResult(verdicts=[verdict]))
    assert page is not None and headings(page) == ["grew (params)"]


def test_a_model_whose_only_change_has_no_layers_to_draw_gets_no_section(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    verdict = project.verdict("grew", make_report({"a": 5}, {"aten.kthvalue": 2}), make_report({"a": 5}))
    assert pictures_page(RunResult(verdicts=[verdict])) is None


@pytest.mark.parametrize(
    "name",
    [
        '</h2></section><script>alert(1)</script>\n<section class="model" id="x">',
        "a&b <img src=x onerror=alert(1)>",
        "\x1b[2Jclear\u202eevil",
    ],
)
def test_hostile_names_are_escaped(make_project, make_report, name: str) -> None:
    project = make_project(pyproject(model(name)))
    verdict = project.verdict(name, make_report({"a": 9}), make_report({"a": 5}))
    page = pictures_page(RunResult(verdicts=[verdict]))
    assert page is not None
    assert page.count(SECTION) == 1 and len(sections(page)) == 1
    parser = Tags()
    parser.feed(page)
    assert [tag for tag, _ in parser.tags if tag in ("script", "img")] == []
    assert "\x1b" not in page and "\u202e" not in page
    (heading,) = headings(page)
    assert "<" not in heading and ">" not in heading.replace("&gt;", "").replace("&lt;", "")


def test_duplicated_names_show_their_tests(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    first = project.marker_verdict("tests/test_a.py", 3, "test_a", make_report({"a": 9}), make_report({"a": 5}))
    second = project.marker_verdict("tests/test_b.py", 3, "test_a", make_report({"a": 8}), make_report({"a": 5}))
    page = pictures_page(RunResult(verdicts=[first, second]))
    assert page is not None
    assert headings(page) == [
        "tests.test_a (FLOPs) · tests/test_a.py::test_a",
        "tests.test_a (FLOPs) · tests/test_b.py::test_a",
    ]


def test_emit_writes_the_page_and_removes_a_stale_one(make_project, make_report, tmp_path: Path) -> None:
    project = make_project(PYPROJECT)
    grew = project.verdict("grew", make_report({"a": 9}), make_report({"a": 5}))
    same = project.verdict("same", make_report({"a": 5}), make_report({"a": 5}))
    target = tmp_path / "out" / "flopbudget-diff.html"
    target.parent.mkdir()
    spec = parse_spec(f"pictures:{target}")
    assert spec == ReportSpec("pictures", str(target))
    assert emit(RunResult(verdicts=[grew, same]), [spec], env={}).ok
    assert target.read_text(encoding="utf-8") == pictures_page(RunResult(verdicts=[grew, same]))
    # the next run changed nothing: the earlier run's pictures are gone, nothing new is written
    assert emit(RunResult(verdicts=[same]), [spec], env={}).ok
    assert not target.exists()
    assert emit(RunResult(verdicts=[same]), [spec], env={}).ok and not target.exists()


def test_nothing_but_a_regular_file_or_link_is_removed(make_project, make_report, tmp_path: Path) -> None:
    project = make_project(PYPROJECT)
    same = project.verdict("same", make_report({"a": 5}), make_report({"a": 5}))
    findings = Findings(RunResult(verdicts=[same]))
    context = OutputContext(str(tmp_path), {}, io.StringIO(), io.StringIO())
    folder = tmp_path / "folder"
    folder.mkdir()
    diff_pictures.PicturesOutput().write(findings, str(folder), context)
    assert folder.is_dir()
    kept = tmp_path / "kept.html"
    kept.write_text("the link's target", encoding="utf-8")
    link = tmp_path / "link.html"
    link.symlink_to(kept)
    diff_pictures.PicturesOutput().write(findings, str(link), context)
    assert not link.is_symlink() and kept.read_text(encoding="utf-8") == "the link's target"


def curve_verdict(now_flops: int, now_terms: str, base_flops: int = 45_703_168):  # type: ignore[no-untyped-def]
    """`grew` counted with a curve over seq: the baseline linear (357056*seq), now with `now_terms`."""
    from pytest_flopbudget._config.location import Location
    from pytest_flopbudget._curve.formula import Formula, Holds
    from pytest_flopbudget._curve.polynomial import parse
    from pytest_flopbudget._judge.verdict import Measurement, evaluate
    from pytest_flopbudget._metrics import FLOPS

    def formula(attn: str) -> Formula:
        layers = {f"h.{i}.attn": {FLOPS: parse(attn, ("seq",))} for i in range(2)}
        total = parse(attn, ("seq",)) + parse(attn, ("seq",))
        return Formula(("seq",), {FLOPS: total}, layers, Holds({"seq": 1}, {"seq": (16, 512)}), {"seq": 128})

    def report(flops: int) -> Report:
        half = {f"h.{i}.attn": LayerCost(flops=flops // 2) for i in range(2)}
        return Report(layers=half, forward=PhaseTotals(flops=flops, macs=0))

    measurement = Measurement("grew", report(now_flops), Budget(), Location(key="grew"), formula=formula(now_terms))
    return evaluate(measurement, report(base_flops), baseline_formula=formula("178528*seq"))


def test_a_new_quadratic_term_is_drawn_as_its_own_steeper_line_with_its_degree() -> None:
    # 2 * 1.5*seq**2 at seq=128 is 49,152 FLOPs: +0.1% at the point, where the icicle is all but grey
    verdict = curve_verdict(45_703_168 + 49_152, "3*seq**2/2 + 178528*seq")
    page = pictures_page(RunResult(verdicts=[verdict]))
    assert page is not None
    (section,) = sections(page)
    assert headings(page) == ["grew (FLOPs)"]
    # the icicle of the point counts, then the curve base vs now
    assert section.index("grew: base vs now") < section.index("grew: cost curve: FLOPs against seq, base vs now")
    assert "degree in seq: base 1 → now 2" in section
    assert "+3*seq**2 (new, degree 2)" in section  # its line on the picture
    assert "seq**2 term of h.{0..1}.attn new (degree 2)" in section  # the layers that carry it, as the check names them
    assert "base (dashed) vs now, log-log" in page


def test_a_model_whose_point_count_held_but_whose_formula_changed_gets_its_curve_alone() -> None:
    verdict = curve_verdict(45_703_168, "seq**2/2 + 178464*seq")  # +8192 - 64*128 per layer: 0 at seq=128
    page = pictures_page(RunResult(verdicts=[verdict]))
    assert page is not None
    (section,) = sections(page)
    assert "grew: base vs now" not in section  # no icicle: nothing changed at the point
    assert "degree in seq: base 1 → now 2" in section and headings(page) == ["grew (FLOPs)"]
