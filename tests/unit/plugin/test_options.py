"""Command-line options over `[tool.flopbudget]` settings (pytest_flopbudget/_plugin/options.py)."""

from __future__ import annotations

import pytest

from pytest_flopbudget._config.pyproject import load_settings
from pytest_flopbudget._plugin.options import explicit_args, find_pyproject, read_options

PYPROJECT = """\
[tool.flopbudget]
baseline-dir = "budgets"
collect-models = false
require-baseline = true
"""


def test_settings_apply_where_no_option_is_given(pytester: pytest.Pytester) -> None:
    pyproject = pytester.makepyprojecttoml(PYPROJECT)
    config = pytester.parseconfig()
    assert find_pyproject(config) == pyproject.resolve()
    options = read_options(config, load_settings(pyproject, pytester.path))
    assert not options.update and not options.collect_models and options.require_baseline
    assert options.baseline_dir == (pytester.path / "budgets").resolve()
    assert options.base_ref is None and options.reports == []


def test_options_override_settings(pytester: pytest.Pytester) -> None:
    pyproject = pytester.makepyprojecttoml(PYPROJECT + "\n[tool.pytest.ini_options]\nflopbudget_report = ['none']\n")
    config = pytester.parseconfig(
        "--flopbudget-update", "--flopbudget-models", "--flopbudget-baseline-dir=other", "--flopbudget-base-ref=main"
    )
    options = read_options(config, load_settings(pyproject, pytester.path))
    assert options.update and options.collect_models and options.base_ref == "main"
    assert options.baseline_dir == config.invocation_params.dir / "other"
    assert options.reports == ["none"]


def test_report_specs_on_the_command_line_add_to_the_ini_ones(pytester: pytest.Pytester) -> None:
    ini = "\n[tool.pytest.ini_options]\nflopbudget_report = ['json:mine.json', 'none']\n"
    pyproject = pytester.makepyprojecttoml(PYPROJECT + ini)
    config = pytester.parseconfig("--flopbudget-report=comment:body.md")
    options = read_options(config, load_settings(pyproject, pytester.path))
    assert options.reports == ["json:mine.json", "none", "comment:body.md"]


def test_explicit_args_are_paths_on_the_command_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    assert explicit_args(pytester.parseconfig("test_a.py"))
