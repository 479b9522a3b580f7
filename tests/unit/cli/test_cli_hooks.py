"""The published hook's definition: which files trigger it, and that the repository's own config runs the same.

The e2e tests run pre-commit for real on a few commits; these cases pin the `files` pattern on many paths at
once, because a pattern that is too narrow silently skips the check and one too wide slows every commit.
"""

from __future__ import annotations

import re
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


@pytest.mark.parametrize(
    "path",
    [
        "models.py",
        "src/pkg/nets/resnet.py",
        "pyproject.toml",
        "sub/project/pyproject.toml",
        "exports/model.onnx",
        "exports/MODEL.ONNX",
        ".flopbudget/resnet50.json",
        "sub/.flopbudget/vit.json",
    ],
)
def test_runs_for_model_code_config_onnx_and_baselines(path):
    assert re.search(published_hook()["files"], path)


@pytest.mark.parametrize(
    "path",
    [
        "README.md",
        "docs/cli.md",
        "notes.txt",
        "pyproject.toml.orig",
        "mypyproject.toml",
        "exports/model.onnx.data",
        "data/weights.safetensors",
        "setup.cfg",
        "script.pyc",
    ],
)
def test_skips_everything_else(path):
    assert not re.search(published_hook()["files"], path)


def test_repository_config_runs_ruff_and_the_same_check():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = {hook["id"]: (repo["repo"], hook) for repo in config["repos"] for hook in repo["hooks"]}
    assert set(hooks) == {"ruff", "flopbudget"}
    repo, flopbudget = hooks["flopbudget"]
    assert repo == "local" and flopbudget["language"] == "system"
    assert flopbudget["entry"].endswith("flopbudget check")
    published = published_hook()
    for key in ("files", "pass_filenames", "require_serial"):
        assert flopbudget[key] == published[key], key
    assert hooks["ruff"][1]["entry"].startswith(".venv/bin/ruff check")
