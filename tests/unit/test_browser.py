"""The Chromium helper of the notebook tests (`tests/browser.py`): without a browser it fails in one line that says
how to install one, never skips; its static check finds what would run or load."""

from __future__ import annotations

import pytest

from tests import browser


def test_no_chromium_fails_in_one_line_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOPBUDGET_CHROMIUM", raising=False)
    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception) as failed:
        browser.chromium()
    message = str(failed.value)
    assert "\n" not in message and "apt-get install -y chromium" in message


@pytest.mark.parametrize(
    "html",
    [
        "<div><script>x</script></div>",
        '<div><img src="x"></div>',
        '<div onclick="x">a</div>',
        '<svg xmlns="http://www.w3.org/2000/svg"><a href="https://example.com">a</a></svg>',
        "<style>div{background:url(x.png)}</style>",
    ],
)
def test_the_static_check_finds_what_runs_or_loads(html: str) -> None:
    with pytest.raises(AssertionError):
        browser.assert_self_contained(html)
