"""Finding the CLI's project and picking its models by name (`cli/project.py`): one line that says what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_flopbudget._cli.project import (
    EXAMPLE_TABLE,
    UsageError,
    load_project,
    model_named,
    select_models,
    unknown_model,
)
from pytest_flopbudget._config.pyproject import find_pyproject


def models_table(*names: str) -> str:
    return "".join(
        f'[tool.flopbudget.models.{name}]\ntarget = "m:{name}"\ninputs = [[1, 8]]\nflops = "1G"\n\n' for name in names
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_nearest_pyproject_above_the_start_is_used(project: Path) -> None:
    (project / "pyproject.toml").write_text(models_table("resnet18", "resnet50"))
    (project / "src" / "pkg").mkdir(parents=True)
    settings = load_project(None, project / "src" / "pkg")
    assert settings.pyproject is not None and settings.pyproject.resolve() == (project / "pyproject.toml").resolve()
    assert list(settings.models) == ["resnet18", "resnet50"]
    # --pyproject names the file itself
    (project / "other.toml").write_text(models_table("vit"))
    assert list(load_project(str(project / "other.toml")).models) == ["vit"]


def test_a_missing_file_or_table_is_a_usage_error(project: Path) -> None:
    with pytest.raises(UsageError, match=r"^--pyproject nowhere\.toml: no such file$"):
        load_project("nowhere.toml")
    if find_pyproject(project) is None:  # no pyproject.toml in any parent of the temporary directory
        with pytest.raises(
            UsageError, match=r"no pyproject\.toml in .* or any parent directory: run flopbudget inside"
        ):
            load_project(None, project)
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n')
    with pytest.raises(UsageError) as raised:
        load_project(None, project)
    assert str(raised.value) == f"pyproject.toml has no [tool.flopbudget] table: add {EXAMPLE_TABLE}"


def test_models_are_picked_in_the_order_named_once_each(project: Path) -> None:
    (project / "pyproject.toml").write_text(models_table("a", "b", "c"))
    settings = load_project(None, project)
    assert [m.name for m in select_models(settings, [])] == ["a", "b", "c"]  # none named: all, as declared
    assert [m.name for m in select_models(settings, ["c", "a", "c"])] == ["c", "a"]


def test_a_name_with_spaces_around_it_is_the_model_of_that_name_as_count_takes_it(project: Path) -> None:
    """`check "  net"` said `no model '  net'; did you mean 'net'?` while `count "  net"` counted net: both take the
    exact name first (a TOML key may hold spaces), else the name without the spaces around it."""
    spaced = '[tool.flopbudget.models."  spaced"]\ntarget = "m:f"\ninputs = [[1, 8]]\nflops = "1G"\n'
    (project / "pyproject.toml").write_text(models_table("net") + spaced)
    settings = load_project(None, project)
    assert [m.name for m in select_models(settings, ["  net", "net "])] == ["net"]
    assert [m.name for m in select_models(settings, ["  spaced"])] == ["  spaced"]
    assert model_named(settings, " \tnet\n") is settings.models["net"]


def test_an_unknown_name_fails_before_anything_is_counted_with_a_suggestion(project: Path) -> None:
    (project / "pyproject.toml").write_text(models_table("resnet18", "resnet50", "vit"))
    settings = load_project(None, project)
    with pytest.raises(UsageError) as raised:
        select_models(settings, ["vit", "resnt50"])  # the good name first: still nothing is selected
    assert str(raised.value) == (
        "pyproject.toml: no model 'resnt50' in [tool.flopbudget.models]; did you mean 'resnet50' or 'resnet18'? "
        "(models: resnet18, resnet50, vit)"
    )
    assert unknown_model("bert", settings) == (
        "no model 'bert' in [tool.flopbudget.models] (models: resnet18, resnet50, vit)"
    )


def test_a_long_list_of_models_is_cut_at_twelve(project: Path) -> None:
    names = [f"model{i:02d}" for i in range(14)]
    (project / "pyproject.toml").write_text(models_table(*names))
    message = unknown_model("zzz", load_project(None, project))
    assert message.endswith("(models: " + ", ".join(names[:12]) + ", ... (14 in all))")


def test_a_table_without_models_says_how_to_add_one(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.flopbudget]\nbaseline-dir = "b"\n')
    with pytest.raises(UsageError) as raised:
        select_models(load_project(None, project), [])
    assert str(raised.value) == f"pyproject.toml: [tool.flopbudget] declares no models: add {EXAMPLE_TABLE}"
