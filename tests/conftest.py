"""Shared test configuration: `pytester` drives the end-to-end plugin tests in tests/e2e."""

pytest_plugins = ["pytester"]
