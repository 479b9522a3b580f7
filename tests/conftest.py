"""Shared test configuration: `pytester` drives the end-to-end plugin tests in tests/e2e."""

import sys
import types
from collections.abc import Iterator

import pytest

pytest_plugins = ["pytester"]

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover - the dev extra installs it
    pass
else:
    # Hypothesis fails an example that takes over 200 ms (its default deadline) and a strategy it finds slow to
    # generate: wall-clock limits that a busy machine breaks. A test asserts the work done instead (tests/growth.py).
    settings.register_profile("flopbudget", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("flopbudget")

#: CI variables that switch on CI output (GitHub annotations, the job summary file) in the plugin and the CLI.
CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE", "GITLAB_CI", "CI_PROJECT_DIR")


@pytest.fixture(autouse=True)
def _no_ci_output_from_inner_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytest sessions and CLI subprocesses must not see this suite's own CI environment.

    Otherwise, when this suite runs on GitHub Actions, the deliberately failing models of the end-to-end tests
    would append to the real job summary. The outer session is unaffected: the variables are restored after
    each test, before it reports.
    """
    for name in CI_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # The count cache would make a check after an edit depend on earlier checks of the same temporary project, and
    # it forks: `main()` called in this process must not fork a pytest worker. Its own tests switch it back on.
    monkeypatch.setenv("FLOPBUDGET_NO_CACHE", "1")
    # and `check` counts each model in a forked child even without the cache: not from this process.
    monkeypatch.setattr("pytest_flopbudget._cache.counter.can_fork", lambda: False)


@pytest.fixture(autouse=True)
def _torch_stays_imported_after_inner_runs(request: pytest.FixtureRequest) -> Iterator[None]:
    """Put back the torch modules that an in-process `pytester` run imported and `pytester` then dropped.

    `pytester` restores `sys.modules` after each in-process run and at its teardown, so the modules the inner run
    imported are forgotten. Plain Python modules can be imported again, but some of torch's register native state
    that outlives them: an inner count that imports `torch._dynamo` also imports `torch._inductor.test_operators`,
    which defines the `_inductor_test` op library. The next import of `torch._dynamo` in this process (a later
    test's count: `nn.init.kaiming_normal_` decomposes through it) ran that module again, and torch refused to
    define the library twice. Every torch module stays bound on its parent package, so it is found there and put
    back. This fixture is autouse, so it is set up before `pytester` and torn down after it has restored.
    """
    yield
    torch = sys.modules.get("torch")
    if "pytester" not in request.fixturenames or torch is None:
        return
    pending = [module for name, module in sys.modules.items() if name.startswith("torch.") and module is not None]
    pending.append(torch)
    while pending:
        module = pending.pop()
        for attribute, value in list(vars(module).items()):
            name = f"{module.__name__}.{attribute}"
            bound = type(value) is types.ModuleType and value.__name__ == name and name not in sys.modules
            if bound and getattr(value, "__spec__", None) is not None:  # a file's module, not a native submodule
                sys.modules[name] = value
                pending.append(value)
