"""`.ci/run` is the README's test command: CI runs exactly what a newcomer is told to run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"^python3 -m venv \.venv && .*$", readme, flags=re.M)
    assert len(commands) == 2  # the main job on the bundled examples, and the test suite
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[1] in script
    assert commands[1].endswith("python -m pytest -n 2")


def test_the_set_up_commands_pin_every_framework_the_tests_need() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in re.findall(r"^python3 -m venv \.venv && .*$", readme, flags=re.M):
        for pin in ("torch==", "jax==", "flax==", "tensorflow-cpu=="):
            assert pin in command, (pin, command)
