"""Shared test configuration: `pytester` drives the end-to-end plugin tests in tests/e2e."""

import pytest

pytest_plugins = ["pytester"]

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
    monkeypatch.setattr("pytest_flopbudget.cache.counter.can_fork", lambda: False)
