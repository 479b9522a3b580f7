"""The shipped GitHub workflow, checked offline by the real tools: check-jsonschema and zizmor.

`check-jsonschema --builtin-schema vendor.github-workflows` validates the file against the published workflow
schema (bundled with the tool, no network). `zizmor --offline` audits it for security problems: unpinned
actions, credentials persisted by checkout, template injection, excessive permissions. A deliberately broken
copy must produce findings, so a tool that silently audits nothing cannot make this test pass.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "flopbudget.yml"
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def tool(name: str) -> str:
    """The tool installed next to this Python (the venv), else on PATH; skip when the dev extra is missing."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def zizmor_findings(path: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [tool("zizmor"), "--offline", "--min-severity", "medium", "--format", "json", "--no-progress", str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.stdout.strip(), f"zizmor printed nothing (exit {done.returncode}): {done.stderr}"
    return json.loads(done.stdout)


def test_schema_is_valid() -> None:
    done = subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok -- validation done" in done.stdout


def test_zizmor_finds_nothing_of_medium_severity_or_above() -> None:
    findings = zizmor_findings(WORKFLOW)
    assert findings == [], json.dumps(findings, indent=2)


def test_zizmor_does_flag_a_broken_copy(tmp_path: Path) -> None:
    broken = WORKFLOW.read_text(encoding="utf-8")
    broken = re.sub(r"actions/checkout@[0-9a-f]{40}", "actions/checkout@v4", broken)
    broken = broken.replace('--base-ref "origin/${BASE_REF}"', '--base-ref "origin/${{ github.head_ref }}"')
    path = tmp_path / ".github" / "workflows" / "broken.yml"
    path.parent.mkdir(parents=True)
    path.write_text(broken, encoding="utf-8")
    rules = {finding["ident"] for finding in zizmor_findings(path)}
    assert {"unpinned-uses", "template-injection"} <= rules


def test_workflow_follows_the_documented_practice() -> None:
    """What the issue asks for, read from the file: pins, permissions, checkout settings, the two commands."""
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert data["permissions"] == {"contents": "read"}
    steps = [step for job in data["jobs"].values() for step in job["steps"]]
    uses = [step["uses"] for step in steps if "uses" in step]
    assert uses and all(SHA_PIN.match(ref) for ref in uses), uses
    for line in WORKFLOW.read_text(encoding="utf-8").splitlines():
        if "uses:" in line:
            assert re.search(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), f"pin without a version comment: {line}"
    checkout = next(step for step in steps if step.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"] == {"fetch-depth": 0, "persist-credentials": False}
    assert any(step.get("uses", "").startswith("actions/setup-python@") for step in steps)
    runs = [step["run"] for step in steps if "run" in step]
    assert not any("${{" in run for run in runs), "expressions belong in env:, not in run: (template injection)"
    assert any("pytest" in run for run in runs)
    base_ref = next(step for step in steps if "--base-ref" in step.get("run", ""))
    assert base_ref["env"] == {"BASE_REF": "${{ github.base_ref }}"}
    assert 'flopbudget check --base-ref "origin/${BASE_REF}"' in base_ref["run"]
    assert "pull_request" in base_ref["if"]
