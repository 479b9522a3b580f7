"""What happens once per session, registered on the controller only (pytest_flopbudget/_plugin/controller.py)."""

from __future__ import annotations

import pytest

PYPROJECT = '[tool.flopbudget]\nbaseline-dir = "budgets"\n'


def registered(config: pytest.Config) -> list[str]:
    names = ("flopbudget-session", "flopbudget-controller", "flopbudget-worker")
    return [name for name in names if config.pluginmanager.get_plugin(name) is not None]


def test_the_controller_is_registered_off_xdist_workers_only(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(PYPROJECT)
    config = pytester.parseconfigure()
    assert registered(config) == ["flopbudget-session", "flopbudget-controller"]
    worker = pytester.parseconfig()
    worker.workerinput = {"workerid": "gw0"}  # type: ignore[attr-defined]  # what xdist gives a worker's config
    worker.workeroutput = {}  # type: ignore[attr-defined]
    worker._do_configure()
    try:
        assert registered(worker) == ["flopbudget-session", "flopbudget-worker"]
    finally:
        worker._ensure_unconfigure()
    assert registered(worker) == []


def test_stale_baselines_are_listed_in_the_summary_of_a_whole_run(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(PYPROJECT)
    (pytester.path / "budgets").mkdir()
    (pytester.path / "budgets" / "gone.json").write_text("{}", encoding="utf-8")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_inprocess()
    result.stdout.fnmatch_lines(["*- flopbudget -*", "1 stale baseline in budgets (no model of this run uses them)*"])


def test_nothing_to_say_prints_no_section(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(PYPROJECT)
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_inprocess()
    assert result.ret == 0 and " flopbudget " not in result.stdout.str()
