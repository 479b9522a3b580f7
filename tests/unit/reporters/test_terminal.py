"""Terminal text: the per-layer diff under a failure, the no-baseline view and the end-of-run summary."""

from __future__ import annotations

import io

import pytest

from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._config.location import Location, Origin
from pytest_flopbudget._front_ends import CLI as CLI_FRONT_END
from pytest_flopbudget._front_ends import EITHER, PYTEST
from pytest_flopbudget._judge.reason import reason
from pytest_flopbudget._judge.verdict import Measurement, evaluate
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report, SkippedOp
from pytest_flopbudget._reporters.ci import TERMINAL, emit
from pytest_flopbudget._reporters.terminal import accept_hint, details, diff_table, summary_lines
from pytest_flopbudget._run import RunResult, Unchecked

HINT = "`pytest --flopbudget-update`"
CLI = "`flopbudget check --update`"


def make_report(layers: dict[str, int], inputs: list | None = None) -> Report:
    return Report(
        layers={path: LayerCost(flops=f, macs=f // 2, params=1) for path, f in layers.items()},
        forward=PhaseTotals(flops=sum(layers.values()), macs=sum(f // 2 for f in layers.values())),
        inputs=inputs if inputs is not None else [{"shape": [1, 8], "dtype": "float32"}],
    )


def verdict_for(now: Report, baseline: Report | None = None, name: str = "net", nodeid: str | None = None, **budget):
    measurement = Measurement(name, now, parse_budget(budget, {}, Location(key=name)), Location(key=name), nodeid)
    return evaluate(measurement, baseline, baseline_file=f".flopbudget/{name}.json")


def test_diff_details_collapse_to_the_top_rows_then_totals() -> None:
    baseline = make_report({f"layer{i}": 1000 for i in range(20)} | {"old": 5})
    now = make_report({f"layer{i}": 1000 + 100 * i for i in range(20)} | {"new": 7})
    text = details(verdict_for(now, baseline, flops=1000), front_end=PYTEST, top=15)
    lines = text.splitlines()
    assert lines[0] == "FLOPs per layer, against .flopbudget/net.json:"
    assert lines[1].split() == ["layer", "baseline", "now", "delta"]
    assert lines[2].split() == ["layer19", "1.00k", "2.90k", "+1.90k", "(+190.0%)"]
    assert len([line for line in lines if line.startswith("  layer")]) == 1 + 15
    assert "  ... 6 more changed layers (+1.00k)" in lines  # layer1..layer4 (+1000), new (+7), old (-5)
    assert lines[-2].split() == ["total", "20.0k", "39.0k", "+19.0k", "(+95.0%)"]
    # 39,007 FLOPs (39,000 + the new layer's 7) rounded *up* to 3 significant digits: the ceiling that would pass
    assert lines[-1] == f'to accept: set flops = "39.1k"; then run {HINT} and commit both'


def test_diff_marks_added_and_removed_layers() -> None:
    baseline = make_report({"a": 10, "gone": 30})
    now = make_report({"a": 10, "fresh": 50})
    rows = diff_table(verdict_for(now, baseline, flops=1).diff("flops"))
    assert any(r.split() == ["fresh", "-", "50", "+50", "(added)"] for r in rows)
    assert any(r.split() == ["gone", "30", "-", "-30", "(removed)"] for r in rows)


def test_root_layer_is_labelled() -> None:
    rows = diff_table(verdict_for(make_report({"": 9}), make_report({"": 3}), flops=1).diff("flops"))
    assert rows[1].split()[0] == "(model)"


def test_without_baseline_shows_top_layers_and_how_to_create_one() -> None:
    now = make_report({f"l{i}": 10 * (i + 1) for i in range(20)})
    text = details(verdict_for(now, flops=1), front_end=PYTEST)
    lines = text.splitlines()
    assert lines[0] == "top layers by FLOPs:"
    assert lines[2].split() == ["l19", "200", "9.5%"]
    assert "  ... 5 more layers" in lines
    assert lines[-3].split() == ["total", "2.10k", "100.0%"]
    assert lines[-2] == f"no baseline for net yet (.flopbudget/net.json); run {HINT} to create it"
    assert lines[-1] == f'to accept: set flops = "2.1k"; then run {HINT} and commit both'  # 2,100 FLOPs, rounded up


def test_unchanged_model_over_a_tightened_budget_shows_top_layers() -> None:
    report = make_report({"a": 10, "b": 30})
    text = details(verdict_for(report, make_report({"a": 10, "b": 30}), flops=1), front_end=PYTEST)
    lines = text.splitlines()
    assert lines[0] == "no layer changed since .flopbudget/net.json; top layers by FLOPs:"
    assert lines[2].split() == ["b", "30", "75.0%"]


def test_params_failure_shows_the_params_table() -> None:
    text = details(verdict_for(make_report({"a": 1, "b": 2}), params=1), front_end=PYTEST)
    assert text.startswith("top layers by params:")


def test_skipped_failure_lists_the_ops() -> None:
    now = make_report({"a": 1})
    now.skipped_ops = {"aten.weird": SkippedOp(3, ["a", "b"])}
    now.layers["a"].skipped["aten.weird"] = 3
    text = details(verdict_for(now, skipped=0), front_end=PYTEST)
    assert "skipped ops (counted as zero):" in text
    assert "  aten.weird x3 in a, b (no formula)" in text


def test_baseline_counted_with_other_inputs_is_noted() -> None:
    baseline = make_report({"a": 1}, inputs=[{"shape": [1, 4], "dtype": "float32"}])
    text = details(verdict_for(make_report({"a": 2}), baseline, flops=1), front_end=PYTEST)
    assert "note: the baseline was counted with inputs [1x4 float32], now [1x8 float32]" in text


def test_summary_lists_figures_usage_and_delta() -> None:
    verdicts = [
        verdict_for(make_report({"a": 900}), make_report({"a": 800}), name="b_model", flops=1000),
        verdict_for(make_report({"a": 1200}), name="a_model", flops="1k"),
        verdict_for(make_report({"a": 5}), name="c_model"),
    ]
    lines = summary_lines(verdicts, updated=["b_model"])
    header = ["model", "status", "FLOPs", "MACs", "params", "skipped", "budget", "use", "vs", "baseline"]
    assert lines[0].split() == header
    assert lines[1].split() == ["a_model", "FAIL", "1.20k", "600", "1", "0", "120.0%", "flops", "no", "baseline"]
    # the vs-baseline column lists every metric that changed
    b_row = ["b_model", "updated", "900", "450", "1", "0", "90.0%", "flops", "+12.5%", "flops,", "+12.5%", "macs"]
    assert lines[2].split() == b_row
    assert lines[3].split() == ["c_model", "no", "budget", "5", "2", "1", "0", "-", "no", "baseline"]
    assert lines[-1] == "3 models counted, 1 over budget"


def test_summary_disambiguates_models_counted_twice() -> None:
    verdicts = [
        verdict_for(make_report({"a": 1}), name="m", nodeid="pyproject.toml::m", flops=1),
        verdict_for(make_report({"a": 1}), name="m", nodeid="test_a.py::test_m", flops=1),
    ]
    lines = summary_lines(verdicts)
    assert lines[1].startswith("m (pyproject.toml::m)")
    assert lines[2].startswith("m (test_a.py::test_m)")


# -- to accept: the line to edit, the value that passes, the command that records the baseline ---------------------


def pyproject_verdict(tmp_path, body: str, now: Report, baseline: Report | None = None, nodeid: str | None = None):
    from pytest_flopbudget._config.pyproject import load_settings

    (tmp_path / "pyproject.toml").write_text(
        f'[tool.flopbudget.models.net]\ntarget = "m:net"\ninputs = [[1, 8]]\n{body}'
    )
    entry = load_settings(tmp_path / "pyproject.toml").models["net"]
    measurement = Measurement("net", now, entry.budget, entry.source, nodeid or "pyproject.toml::net")
    return evaluate(measurement, baseline, baseline_file=".flopbudget/net.json")


def test_a_ceiling_names_its_pyproject_line_and_the_update_of_that_model(tmp_path) -> None:
    # 2 layers of 600 FLOPs (300 MACs each): 1,200 FLOPs over 1k, rounded up to 3 digits is 1.2k
    verdict = pyproject_verdict(tmp_path, 'flops = "1k"\n', make_report({"a": 600, "b": 600}))
    hint = accept_hint(verdict, front_end=CLI_FRONT_END, start=str(tmp_path))
    assert hint == (
        'to accept: set flops = "1.2k" at pyproject.toml:4 (tool.flopbudget.models.net); '
        "then run `flopbudget check --update net` and commit both"
    )
    # pytest prints the same words for a pyproject model: the failure text is the same in both front ends
    assert accept_hint(verdict, front_end=PYTEST, start=str(tmp_path)) == hint


def test_a_mac_budget_in_the_flops_slot_keeps_its_unit(tmp_path) -> None:
    # MACs are half the FLOPs: 1,200 / 2 = 600 MACs over "500 MACs" written in the flops slot
    verdict = pyproject_verdict(tmp_path, 'flops = "500 MACs"\n', make_report({"a": 600, "b": 600}))
    assert accept_hint(verdict, front_end=CLI_FRONT_END, start=str(tmp_path)).startswith(
        'to accept: set flops = "600 MACs" at pyproject.toml:4'
    )


def test_skipped_ops_are_written_as_the_exact_number(tmp_path) -> None:
    now = make_report({"a": 1})
    now.skipped_ops = {"aten.weird": SkippedOp(1234, ["a"])}
    now.layers["a"].skipped["aten.weird"] = 1234
    verdict = pyproject_verdict(tmp_path, "max-skipped-ops = 0\n", now)
    assert accept_hint(verdict, front_end=CLI_FRONT_END, start=str(tmp_path)).startswith(
        "to accept: set max-skipped-ops = 1234 at pyproject.toml:4"
    )


def test_growth_is_accepted_by_the_update_alone_without_a_base_ref(tmp_path) -> None:
    verdict = pyproject_verdict(tmp_path, 'max-increase = "5%"\n', make_report({"a": 1306}), make_report({"a": 1000}))
    assert accept_hint(verdict, front_end=CLI_FRONT_END) == (
        "to accept: run `flopbudget check --update net` and commit the new baseline"
    )


def test_under_a_base_ref_the_least_max_increase_that_passes_is_given(tmp_path) -> None:
    # FLOPs 1000 -> 1306: exactly +30.6%; MACs 500 -> 653: +30.6%; params 1 -> 1
    verdict = pyproject_verdict(tmp_path, 'max-increase = "5%"\n', make_report({"a": 1306}), make_report({"a": 1000}))
    assert accept_hint(verdict, front_end=CLI_FRONT_END, base_ref="origin/main", start=str(tmp_path)).startswith(
        'to accept: set max-increase = "30.6%" at pyproject.toml:4 (tool.flopbudget.models.net); then run'
    )
    # 3 -> 4 FLOPs (MACs 1 -> 2: +100%): the larger growth, rounded up to 0.1%, so that both pass
    verdict = pyproject_verdict(tmp_path, 'max-increase = "5%"\n', make_report({"a": 4}), make_report({"a": 3}))
    assert 'set max-increase = "100%"' in accept_hint(verdict, front_end=CLI_FRONT_END, base_ref="origin/main")
    # 3 -> 4 with MACs 1 -> 1 would need 33.4% (1/3 = 33.33...% rounded up)
    from pytest_flopbudget._judge.verdict import ERROR, Finding, FindingKind
    from pytest_flopbudget._reporters.terminal import _increase_edit

    finding = Finding(ERROR, FindingKind.INCREASE, "", "flops", actual=4, baseline=3)
    assert _increase_edit(verdict, [finding], str(tmp_path)).startswith('set max-increase = "33.4%"')


def test_a_marker_budget_names_the_marker_and_the_test(tmp_path) -> None:
    origin = Location(str(tmp_path / "test_net.py"), 12, "test_net")
    sources = {"macs": Location(origin.file, 12, "test_net: flop_budget(macs=...)", ("macs",), marker=True)}
    budget = parse_budget({"macs": "100"}, sources, origin)
    measurement = Measurement("net", make_report({"a": 400}), budget, origin, "test_net.py::test_net[a b]")
    verdict = evaluate(measurement, None)
    # 400 FLOPs are 200 MACs
    assert accept_hint(verdict, front_end=PYTEST, start=str(tmp_path)) == (
        'to accept: set macs="200" in the flop_budget marker at test_net.py:12; '
        "then run `pytest --flopbudget-update 'test_net.py::test_net[a b]'` and commit both"
    )


def test_the_update_command_follows_the_origin_not_the_file_name(tmp_path) -> None:
    # a pyproject model's nodeid names its file, whatever it is called: the origin says it is a pyproject model
    pyproject_model = pyproject_verdict(tmp_path, 'flops = "1k"\n', make_report({"a": 1200}), nodeid="cfg/x.toml::net")
    assert accept_hint(pyproject_model, front_end=CLI_FRONT_END).endswith(
        "run `flopbudget check --update net` and commit both"
    )
    # a test's model is recorded by its test, even in a file the old check took for a pyproject
    origin = Location(str(tmp_path / "pyproject.toml"), 3, "test_net", origin=Origin.TEST)
    measurement = Measurement("net", make_report({"a": 1200}), parse_budget({"flops": 1}, {}, origin), origin,
                              "pyproject.toml::test_net")  # fmt: skip
    hint = accept_hint(evaluate(measurement, None), front_end=CLI_FRONT_END)
    assert hint.endswith("then run `pytest --flopbudget-update pyproject.toml::test_net` and commit both")


def test_the_front_end_is_read_from_its_field_never_from_its_words() -> None:
    verdict = verdict_for(make_report({"a": 1200}), flops=1)  # counted outside any test or table: no node id
    assert accept_hint(verdict, front_end=PYTEST).endswith("run `pytest --flopbudget-update` and commit both")
    for front_end in (CLI_FRONT_END, EITHER):
        assert accept_hint(verdict, front_end=front_end).endswith("run `flopbudget check --update net` and commit both")
    # the words a front end prints are formatted, not compared: no renderer tells the front ends apart by them
    import inspect

    from pytest_flopbudget._reporters import markdown, terminal

    for module in (terminal, markdown):
        source = inspect.getsource(module)
        assert "update_hint ==" not in source and "_UPDATE_HINT" not in source and "nodeid.partition" not in source


def test_a_degree_edit_reads_the_findings_fields_never_its_message(tmp_path) -> None:
    from pytest_flopbudget._judge.verdict import ERROR, Finding, FindingKind
    from pytest_flopbudget._reporters.terminal import finding_edit

    where = Location(str(tmp_path / "pyproject.toml"), 7, "tool.flopbudget.models.gpt.max-degree.seq",
                     ("max-degree", "seq"), origin=Origin.PYPROJECT)  # fmt: skip
    # the message says nothing of the dim: the edit comes from the slot, else from the finding's dim
    finding = Finding(ERROR, FindingKind.DEGREE, "", "flops", actual=2, limit=1, source=where, dim="seq")
    assert (
        finding_edit(finding, str(tmp_path))
        == "set seq = 2 at pyproject.toml:7 (tool.flopbudget.models.gpt.max-degree)"
    )
    slotless = Finding(ERROR, FindingKind.DEGREE, "", "flops", actual=2, limit=1, source=Location(key="gpt"), dim="seq")
    assert finding_edit(slotless) == "set seq = 2"  # never `set flops = 2`


def test_errors_are_worded_from_where_they_came_from_not_from_their_text() -> None:
    from pytest_flopbudget._reporters.terminal import error_lines, run_summary

    # a baseline message that happens to start like an output's error line is still a baseline error
    result = RunResult(update_errors=["flopbudget: x not written"], output_errors=["cannot write the json report j"])
    assert run_summary(result) == [
        "error: flopbudget: x not written",
        "flopbudget: error: cannot write the json report j",
    ]
    assert error_lines(result) == ["flopbudget: x not written", "cannot write the json report j"]
    assert RunResult(output_errors=["cannot write"]).exit_code == 2


# -- the terminal text as an Output ---------------------------------------------------------------------------------


def terminal_text(result: RunResult) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    emitted = emit(result, [TERMINAL], env={}, stream=out, errors=err)
    assert emitted.ok
    return out.getvalue(), err.getvalue()


def test_the_cli_terminal_text_has_every_failure_and_its_errors_on_the_error_stream() -> None:
    over = verdict_for(make_report({"a": 30}), make_report({"a": 10}), flops=20)
    broken = Unchecked("broken", "cannot import 'x'")
    out, err = terminal_text(RunResult([over], [broken], front_end=CLI_FRONT_END))
    assert out.startswith(reason(over) + "\n") and "then run `flopbudget check --update net`" in out
    assert "1 model not checked: broken" in out
    assert err == "flopbudget: error: cannot import 'x'\n"


def test_pytest_terminal_text_is_the_summary_alone() -> None:
    over = verdict_for(make_report({"a": 30}), make_report({"a": 10}), flops=20)
    lost = Unchecked("xdist worker gw1", "xdist worker gw1 sent no results")
    out, err = terminal_text(RunResult([over], [lost], front_end=PYTEST))
    assert out.splitlines()[0] == "error: xdist worker gw1 sent no results"  # no test shows it: said first
    assert reason(over) not in out and err == ""  # the failure was shown with its test
    assert terminal_text(RunResult(front_end=PYTEST)) == ("", "")  # nothing to say: nothing at all


def test_a_terminal_that_cannot_be_written_is_the_front_ends_to_handle() -> None:
    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError("the reader has gone")

    over = verdict_for(make_report({"a": 30}), make_report({"a": 10}), flops=20)
    with pytest.raises(BrokenPipeError):
        emit(RunResult([over], front_end=CLI_FRONT_END), [TERMINAL], env={}, stream=Gone(), errors=io.StringIO())


def test_a_count_that_moved_with_torch_says_so() -> None:
    baseline, now = make_report({"a": 1}), make_report({"a": 2})
    baseline.versions, now.versions = {"torch": "2.13.0"}, {"torch": "2.14.0"}
    text = details(verdict_for(now, baseline, flops=1), front_end=PYTEST)
    assert "note: counted with torch 2.13.0 at the base, 2.14.0 now" in text.splitlines()


def test_versions_say_nothing_when_the_count_did_not_move_or_the_baseline_has_none() -> None:
    baseline, now = make_report({"a": 2}), make_report({"a": 2})
    baseline.versions, now.versions = {"torch": "2.13.0"}, {"torch": "2.14.0"}
    assert "counted with" not in details(verdict_for(now, baseline, flops=1), front_end=PYTEST)  # tighter budget
    old, grown = make_report({"a": 1}), make_report({"a": 2})
    grown.versions = {"torch": "2.14.0"}
    assert "counted with" not in details(verdict_for(grown, old, flops=1), front_end=PYTEST)  # an old baseline


def test_details_show_the_phases_base_vs_now_for_a_generation_only() -> None:
    from pytest_flopbudget._metrics import FLOPS
    from pytest_flopbudget._report import Phase

    def generation(decode: int) -> Report:
        report = make_report({"l": 1000 + 3 * decode})
        report.phases = [Phase("prefill", {FLOPS: 1000})] + [Phase(f"decode {k}", {FLOPS: decode}) for k in (1, 2, 3)]
        return report

    text = details(verdict_for(generation(130), generation(100), flops=1000), front_end=PYTEST)
    assert "FLOPs per phase, against .flopbudget/net.json:" in text
    assert "  decode mean per token       100    130  +30 (+30.0%)" in text.splitlines()
    plain = details(verdict_for(make_report({"l": 1390}), make_report({"l": 1300}), flops=1000), front_end=PYTEST)
    assert "per phase" not in plain  # a count without phases reads as it always did


def test_diff_groups_repeated_blocks_that_changed_alike() -> None:
    baseline = make_report({f"layers.{i}.mlp.up": 100 for i in range(32)} | {"head": 10, "embed": 5})
    now = make_report({f"layers.{i}.mlp.up": 150 for i in range(32)} | {"head": 20, "embed": 5})
    text = details(verdict_for(now, baseline, flops=1), front_end=PYTEST)
    rows = [line.split() for line in text.splitlines()]
    assert ["layers.{0..31}.mlp.up", "x32", "3.20k", "4.80k", "+1.60k", "(+50.0%)"] in rows
    assert ["head", "10", "20", "+10", "(+100.0%)"] in rows
    assert not any(row[0] == "layers.0.mlp.up" for row in rows if row)
