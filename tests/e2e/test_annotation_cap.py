"""GitHub's 10-annotations-per-level cap end to end: `flopbudget check --report github` with 15 failing models
annotates the ten worst overruns and says, in the log and the job summary, how many were left out."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import MODELS, flopbudget

pytest.importorskip("torch")


def test_fifteen_failing_models(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    # `models:small` is 16 MACs: m01 (1 MAC budget, +1500%) is the worst overrun, m15 (+6.7%) the mildest
    entries = (
        f'[tool.flopbudget.models.m{i:02d}]\ntarget = "models:small"\ninputs = [[1, 8]]\nmacs = {i}\n\n'
        for i in range(1, 16)
    )
    (tmp_path / "pyproject.toml").write_text("".join(entries))
    summary = tmp_path / "summary.md"
    result = flopbudget(
        tmp_path, "check", "--report", "github", GITHUB_WORKSPACE=str(tmp_path), GITHUB_STEP_SUMMARY=str(summary)
    )
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    errors = [line.split("title=flopbudget%3A ")[1].split(" ")[0] for line in lines if line.startswith("::error ")]
    assert errors == [f"m{i:02d}" for i in range(1, 11)]
    assert lines[-1] == "flopbudget: 5 more errors not annotated: see the job summary"
    assert "_5 more errors not annotated: GitHub shows at most 10 annotations" in summary.read_text()
