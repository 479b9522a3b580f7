"""`--base-ref`: budgets raised or removed since a git ref, against a real temporary git repository."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pytest_flopbudget._config.pyproject import load_settings
from pytest_flopbudget._judge.base_ref import BaseRefError, BudgetChange, budget_changes, compare_budgets, read_at_ref

IMAGE = "[[1, 3, 224, 224]]"


def model(name: str, inputs: str = "[[1, 8]]", **budgets: str | int) -> str:
    """A `[tool.flopbudget.models.NAME]` table with target `pkg:NAME`; `max_increase=` is written `max-increase`."""
    lines = [f"[tool.flopbudget.models.{name}]", f'target = "pkg:{name}"', f"inputs = {inputs}"]
    lines += [f"{key.replace('_', '-')} = {json.dumps(value)}" for key, value in budgets.items()]
    return "\n".join(lines) + "\n"


def pyproject(*models: str) -> str:
    """A demo project's pyproject.toml: [project], [tool.flopbudget] (line 4), then the models a blank line apart.

    The tests point at lines: resnet's table is line 6 and its first budget line 9; vit's budgets start at line 16.
    """
    return "\n".join(['[project]\nname = "demo"\n\n[tool.flopbudget]\n', *models])


BEFORE = pyproject(
    model("resnet", IMAGE, flops="8.3G", params="25.6M", macs="4G", max_increase="2%"),
    model("vit", IMAGE, flops="4 GMACs", max_skipped_ops=0),
    model("gone", flops=100, params=10),
)
AFTER = pyproject(
    model("resnet", IMAGE, flops="9G", macs="3.9G", max_increase="5%"),
    model("vit", IMAGE, flops="4.5 GMACs", max_skipped_ops=3),
    model("new", flops=1),
)


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose `main` has BEFORE; the working tree then holds AFTER (uncommitted, as in a PR check)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "pyproject.toml").write_text(BEFORE, encoding="utf-8")
    git(root, "add", "pyproject.toml")
    git(root, "commit", "-q", "-m", "budgets")
    (root / "pyproject.toml").write_text(AFTER, encoding="utf-8")
    return root


def test_raised_and_removed_budgets_are_reported_at_the_current_lines(repo: Path) -> None:
    changes = budget_changes(load_settings(repo / "pyproject.toml"), "main")
    assert [str(c) for c in changes] == [
        f"{_p(repo)}:9: tool.flopbudget.models.resnet.flops: warning: "
        "resnet: flops budget raised from 8.3G to 9G (+8.4%) since main",
        f"{_p(repo)}:6: tool.flopbudget.models.resnet: warning: resnet: params budget 25.6M removed since main",
        f"{_p(repo)}:11: tool.flopbudget.models.resnet.max-increase: warning: "
        "resnet: max-increase raised from 2% to 5% since main",
        f"{_p(repo)}:16: tool.flopbudget.models.vit.flops: warning: "
        "vit: flops budget raised from 4 GMACs to 4.5 GMACs (+12.5%) since main",
        f"{_p(repo)}:17: tool.flopbudget.models.vit.max-skipped-ops: warning: "
        "vit: max-skipped-ops budget raised from 0 to 3 since main",
        f"{_p(repo)}:4: tool.flopbudget: warning: "
        "gone: model and its budgets removed since main (it had flops 100, params 10)",
    ]
    # lowered (macs 4G -> 3.9G) and new budgets (the model `new`) are fine and not reported
    assert {(c.model, c.setting) for c in changes}.isdisjoint({("resnet", "macs"), ("new", "flops")})
    first = changes[0]
    assert (first.kind, first.before, first.after, first.ref, first.source.line) == ("raised", "8.3G", "9G", "main", 9)


def test_unchanged_budgets_give_nothing(repo: Path) -> None:
    git(repo, "commit", "-q", "-am", "raise")
    assert budget_changes(load_settings(repo / "pyproject.toml"), "HEAD") == []
    assert len(budget_changes(load_settings(repo / "pyproject.toml"), "HEAD~1")) == 6


def test_a_commit_sha_and_a_remote_style_ref_work(repo: Path, tmp_path: Path) -> None:
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert len(budget_changes(load_settings(repo / "pyproject.toml"), sha)) == 6
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, capture_output=True)
    (clone / "pyproject.toml").write_text(AFTER, encoding="utf-8")
    assert len(budget_changes(load_settings(clone / "pyproject.toml"), "origin/main")) == 6


def test_pyproject_in_a_subdirectory(tmp_path: Path) -> None:
    root = tmp_path / "mono"
    (root / "pkg").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "pkg" / "pyproject.toml").write_text(BEFORE, encoding="utf-8")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "x")
    (root / "pkg" / "pyproject.toml").write_text(AFTER, encoding="utf-8")
    assert read_at_ref(root / "pkg" / "pyproject.toml", "main") == BEFORE
    assert len(budget_changes(load_settings(root / "pkg" / "pyproject.toml"), "main")) == 6


def test_no_pyproject_at_the_ref_means_every_budget_is_new(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README").write_text("x", encoding="utf-8")
    git(root, "add", "README")
    git(root, "commit", "-q", "-m", "first")
    (root / "pyproject.toml").write_text(AFTER, encoding="utf-8")
    assert read_at_ref(root / "pyproject.toml", "main") is None
    assert budget_changes(load_settings(root / "pyproject.toml"), "main") == []


def test_invalid_budgets_at_the_ref_are_reported_not_trusted(repo: Path) -> None:
    (repo / "pyproject.toml").write_text(BEFORE.replace('flops = "8.3G"', 'flops = "8.3m"'), encoding="utf-8")
    git(repo, "commit", "-q", "-am", "broken")
    (repo / "pyproject.toml").write_text(AFTER, encoding="utf-8")
    (change,) = budget_changes(load_settings(repo / "pyproject.toml"), "main")
    assert change.kind == "unreadable"
    assert change.message.startswith(
        f"budgets at main cannot be compared, check them by hand: {_p(repo)}:9: tool.flopbudget.models.resnet.flops: "
        "'8.3m' is not a budget: lowercase 'm' would mean milli"
    )


def test_unknown_ref_is_a_clear_error(repo: Path) -> None:
    with pytest.raises(BaseRefError) as info:
        budget_changes(load_settings(repo / "pyproject.toml"), "origin/nope")
    assert str(info.value) == (
        "--base-ref origin/nope: git does not know this ref; fetch it first (in GitHub Actions: actions/checkout "
        "with fetch-depth: 0; elsewhere: git fetch origin <branch>)"
    )


def test_not_a_git_repository_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "plain"
    project.mkdir()
    (project / "pyproject.toml").write_text(AFTER, encoding="utf-8")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # never find a repository above the temp dir
    with pytest.raises(BaseRefError) as info:
        budget_changes(load_settings(project / "pyproject.toml"), "main")
    assert str(info.value) == f"--base-ref main: {project.resolve()} is not inside a git repository"


def test_option_like_ref_is_refused(repo: Path) -> None:
    with pytest.raises(BaseRefError, match=r"^--base-ref '--output=x': expected a branch, tag or commit"):
        budget_changes(load_settings(repo / "pyproject.toml"), "--output=x")


def test_compare_budgets_without_git(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "pyproject.toml").write_text(BEFORE, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(AFTER, encoding="utf-8")
    changes = compare_budgets(
        load_settings(tmp_path / "a" / "pyproject.toml"), load_settings(tmp_path / "pyproject.toml"), "v1"
    )
    assert [(c.model, c.setting, c.kind) for c in changes] == [
        ("resnet", "flops", "raised"),
        ("resnet", "params", "removed"),
        ("resnet", "max-increase", "raised"),
        ("vit", "flops", "raised"),
        ("vit", "max-skipped-ops", "raised"),
        ("gone", "", "removed"),
    ]
    assert all(isinstance(c, BudgetChange) for c in changes)


def _p(repo: Path) -> str:
    """How `Location.where()` prints the pyproject path (relative to the cwd when inside it, else absolute)."""
    return str((repo / "pyproject.toml").resolve())


def test_a_base_baseline_that_cannot_be_read_is_left_to_the_verdict() -> None:
    # over the size cap at the base ref: baseline_changes must not raise (Run.finish would crash); judge reports it
    from pytest_flopbudget._errors import BaselineError
    from pytest_flopbudget._judge.base_ref import baseline_changes
    from pytest_flopbudget._judge.verdict import Measurement
    from pytest_flopbudget._report import Report

    class Unreadable:
        class revision:
            ref = "main"

        def text(self, name: str) -> str:
            raise BaselineError("main:.flopbudget/m.json: too large")

        def display(self, name: str) -> str:
            return "main:.flopbudget/m.json"

    assert baseline_changes([Measurement("m", Report())], Unreadable(), Unreadable(), None) == []  # type: ignore[arg-type]


CURVE_MODEL = """\
[tool.flopbudget.models.gpt]
target = "m:gpt"
inputs = [[1, "seq"]]
dims = { seq = 128 }
curve = { seq = [16, 512] }
"""


def test_budgets_on_the_curve_raised_or_removed_are_flagged(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "pyproject.toml").write_text(
        CURVE_MODEL + 'max-degree = { seq = 1 }\nat = [{ seq = 512, flops = "1G", macs = "1G" }]\n'
    )
    (tmp_path / "pyproject.toml").write_text(
        CURVE_MODEL + 'max-degree = { seq = 2 }\nat = [{ seq = 512, flops = "2G" }]\n'
    )
    changes = compare_budgets(
        load_settings(tmp_path / "a" / "pyproject.toml"), load_settings(tmp_path / "pyproject.toml"), "v1"
    )
    assert [c.message for c in changes] == [
        "gpt: max-degree.seq budget raised from 1 to 2 since v1",  # one number caps three metrics: one change
        "gpt: at seq=512 flops budget raised from 1G to 2G (+100.0%) since v1",
        "gpt: at seq=512 macs budget 1G removed since v1",
    ]
    assert changes[0].source.line == 6


def test_the_setting_a_change_names_is_read_from_its_slot_never_its_key(tmp_path: Path) -> None:
    import dataclasses

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "pyproject.toml").write_text(
        CURVE_MODEL + 'max-degree = { flops = { seq = 1 } }\nflops = "4 GMACs"\n'
    )
    (tmp_path / "pyproject.toml").write_text(CURVE_MODEL + 'max-degree = { flops = { seq = 2 } }\nflops = "5 GMACs"\n')
    base, now = load_settings(tmp_path / "a" / "pyproject.toml"), load_settings(tmp_path / "pyproject.toml")
    entry = now.models["gpt"]
    # the keys say nothing of the setting: the location's slot does
    budget = dataclasses.replace(
        entry.budget,
        limits={
            m: dataclasses.replace(lim, source=dataclasses.replace(lim.source, key="k"))
            for m, lim in entry.budget.limits.items()
        },
        degrees=tuple(
            dataclasses.replace(d, source=dataclasses.replace(d.source, key="k")) for d in entry.budget.degrees
        ),
    )
    now.models["gpt"] = dataclasses.replace(entry, budget=budget)
    assert [c.setting for c in compare_budgets(base, now, "v1")] == ["flops", "max-degree.flops.seq"]


PHASE_MODEL = """\
[tool.flopbudget.models.chat]
target = "m:llama"
inputs = [{ shape = [1, 64], dtype = "int64" }]
generate = 6
"""


def test_phase_budgets_raised_or_removed_are_flagged(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "pyproject.toml").write_text(
        PHASE_MODEL + 'phases = { prefill = { flops = "30T" }, decode-mean = { flops = "15G", macs = "8G" } }\n'
    )
    (tmp_path / "pyproject.toml").write_text(
        PHASE_MODEL + 'phases = { prefill = { flops = "29T" }, decode-mean = { flops = "20G" } }\n'
    )
    changes = compare_budgets(
        load_settings(tmp_path / "a" / "pyproject.toml"), load_settings(tmp_path / "pyproject.toml"), "v1"
    )
    assert [c.message for c in changes] == [
        "chat: phases.decode-mean.flops budget raised from 15G to 20G (+33.3%) since v1",  # a lowered prefill is fine
        "chat: phases.decode-mean.macs budget 8G removed since v1",
    ]
    assert changes[0].source.line == 5
    (tmp_path / "pyproject.toml").write_text("[tool.flopbudget]\n")
    (removed,) = compare_budgets(
        load_settings(tmp_path / "a" / "pyproject.toml"), load_settings(tmp_path / "pyproject.toml"), "v1"
    )
    assert removed.message == (
        "chat: model and its budgets removed since v1 (it had phases.prefill.flops 30T, "
        "phases.decode-mean.flops 15G, phases.decode-mean.macs 8G)"
    )
