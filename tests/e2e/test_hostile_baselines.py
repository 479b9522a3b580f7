"""A hostile baseline (a FIFO, a symlink to /dev/zero, a 5,000-digit count, arrays nested 5,000 deep, a float where a
count belongs) fails its own model with one line and exit 2; the other model is still judged and its baseline
written by `flopbudget check --update`, and nothing hangs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from e2e_helpers import MODELS, ProjectTemplate, flopbudget

pytest.importorskip("torch")

PYPROJECT = """\
[tool.flopbudget.models.small]
target = "models:small"
inputs = [[1, 8]]
macs = "1k"

[tool.flopbudget.models.wide]
target = "models:wide"
inputs = [[1, 8]]
macs = "1k"
"""

#: Values json.dumps never writes, put in place of a valid one.
RAW = {
    "5000 digits": (("totals", "params"), "9" * 5000),
    "5000 deep": (("versions", "torch"), "[" * 5000 + "]" * 5000),
    "1e400": (("totals", "flops"), "1e400"),
}
KINDS = ["fifo", "dev-zero", "5000 digits", "5000 deep", "1e400", "no totals"]


def make_hostile(path: Path, kind: str, good: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind in RAW:
        field, token = RAW[kind]
        data = json.loads(good)
        data[field[0]][field[1]] = "X"
        path.write_text(json.dumps(data).replace('"X"', token))
    elif kind == "no totals":
        data = json.loads(good)
        del data["totals"]
        path.write_text(json.dumps(data))


def build_project(root: Path) -> None:
    (root / "models.py").write_text(MODELS)
    (root / "pyproject.toml").write_text(PYPROJECT)
    assert flopbudget(root, "check", "--update").returncode == 0


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> ProjectTemplate:
    return ProjectTemplate(tmp_path_factory.mktemp("hostile-template"), build_project)


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="POSIX special files")
@pytest.mark.parametrize("kind", KINDS)
def test_one_hostile_baseline_fails_only_its_own_model(template: ProjectTemplate, tmp_path: Path, kind: str) -> None:
    template.copy_to(tmp_path)  # models.py, pyproject.toml and the baselines `check --update` wrote
    directory = tmp_path / ".flopbudget"
    good = (directory / "small.json").read_text()
    (directory / "small.json").unlink()
    (directory / "wide.json").unlink()
    make_hostile(directory / "small.json", kind, good)

    done = flopbudget(tmp_path, "check", "--update")  # times out (a failure) instead of hanging on a FIFO
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "INTERNALERROR" not in done.stdout + done.stderr
    assert json.loads((directory / "wide.json").read_text())["totals"]["macs"] == 512  # the good model is written
    lines = [line for line in (done.stdout + done.stderr).splitlines() if ".flopbudget/small.json" in line]
    assert lines, done.stdout + done.stderr
    assert not (directory / "small.json").is_file() or (directory / "small.json").read_text() != good

    checked = flopbudget(tmp_path, "check")
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "Traceback" not in checked.stdout + checked.stderr
    assert "wide" in checked.stdout
