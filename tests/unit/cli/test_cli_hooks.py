"""The published hook's definition: it runs on every commit, and the repository's own config runs the same.

The e2e tests run pre-commit for real on commits that touch code, data files and nothing the models read; these
cases pin the definition itself, because any filename filter silently skips a commit that changes a data file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[3]


def published_hook() -> dict:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["flopbudget"]
    return hooks[0]


def test_published_hook_definition():
    hook = published_hook()
    assert hook["entry"] == "flopbudget check"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is False, "the check covers every model, whatever changed"
    assert hook["require_serial"] is True, "one process: models are counted once, not once per file batch"


def test_runs_on_every_commit():
    """A model can read any file (a JSON config, a tokenizer table), so no filename filter can tell which commits
    matter: the hook runs on every commit and the count cache keeps that cheap."""
    hook = published_hook()
    assert hook.get("always_run") is True
    for key in ("files", "exclude", "types", "types_or"):
        assert key not in hook, f"a {key} filter would skip commits that change only a data file"


def test_repository_config_runs_ruff_and_the_same_check():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = {hook["id"]: (repo["repo"], hook) for repo in config["repos"] for hook in repo["hooks"]}
    assert set(hooks) == {"ruff", "flopbudget"}
    repo, flopbudget = hooks["flopbudget"]
    assert repo == "local" and flopbudget["language"] == "system"
    assert flopbudget["entry"].endswith("flopbudget check")
    published = published_hook()
    for key in ("always_run", "pass_filenames", "require_serial"):
        assert flopbudget[key] == published[key], key
    assert "files" not in flopbudget
    assert hooks["ruff"][1]["entry"].startswith(".venv/bin/ruff check")
