"""pyproject models join a plain `pytest` run even when `testpaths` points elsewhere (as in most projects)."""

from __future__ import annotations

import pytest
from e2e_helpers import forget_outer_xdist

pytest.importorskip("torch")


@pytest.mark.parametrize("extra", [[], pytest.param(["-n", "2"], marks=pytest.mark.slow)], ids=["serial", "xdist"])
def test_models_are_collected_with_testpaths(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, extra: list[str]
) -> None:
    forget_outer_xdist(monkeypatch)
    pytester.makepyprojecttoml(
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n\n'
        '[tool.flopbudget.models.small]\ntarget = "models:small"\ninputs = [[1, 8]]\nmacs = 16\n'
    )
    pytester.makepyfile(models="from torch import nn\n\ndef small():\n    return nn.Linear(8, 2)\n")
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", *extra)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*PASSED pyproject.toml::small*"])
    # naming other paths runs exactly those
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "tests/test_x.py").assert_outcomes(passed=1)
