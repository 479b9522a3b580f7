"""Render HTML fragments in headless Chromium as a notebook shows them, for the `_repr_html_` tests.

A notebook puts each output's HTML into its page (Jupyter inserts it as markup, so an `onerror` handler in it would
run; a classic notebook even runs its `<script>`s). `render` does the same with a page of its own that forbids
nothing (no Content-Security-Policy), loads it from a file in a fresh profile, and returns the DOM after load and a
screenshot. The payloads below, put in layer and op names by the tests, each append `!` to the page's title if
they ever run as code, so "no script ran" is `title == TITLE`; `test_browser_helper_sees_a_payload_that_runs`
shows that a payload left unescaped does change it.

Chromium is a system package (`apt-get install -y chromium` on Debian and Ubuntu): without it the tests fail with
one line saying so rather than skip, so a CI machine that lacks it cannot pass them unseen.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

#: The page's own title; a payload that runs appends `!` to it.
TITLE = "untouched"
#: What a payload runs: no dots, so it can be a PyTorch module's name.
CANARY = "document['title']+='!'"
#: A layer name that is a script element, if written unescaped.
SCRIPT_NAME = f"<script>{CANARY}</script>"
#: A layer name that closes an attribute and opens an image whose load fails, if written unescaped.
ATTRIBUTE_NAME = f'"><img src=x onerror="{CANARY}">'
#: Elements that run code or load something: none may appear in a rendered fragment.
ACTIVE = {"script", "img", "iframe", "object", "embed", "link", "image", "use", "foreignobject", "audio", "video"}
#: Attributes that load something or run code (besides every `on...` handler).
LOADING = {"src", "href", "xlink:href", "srcset", "action", "formaction", "data", "poster", "background"}

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


@dataclass(frozen=True)
class Rendered:
    """The page after load: its serialized DOM, its title, the elements in it, each table's rows (by the table's
    class: `layers`, `items`) as their cells' text, and a screenshot."""

    dom: str
    title: str
    elements: list[tuple[str, dict[str, str]]]
    tables: dict[str, list[list[str]]]
    screenshot: bytes

    def count(self, tag: str, cls: str | None = None) -> int:
        """How many `tag` elements (with `cls` among their classes) the page holds."""
        return sum(1 for name, attrs in self.elements if name == tag and (cls is None or cls in _classes(attrs)))

    def non_white_pixels(self) -> int:
        """Pixels of the screenshot that are not the page's white: a page that drew nothing has none."""
        from PIL import Image

        with Image.open(io.BytesIO(self.screenshot)) as image:
            return sum(image.convert("L").histogram()[:245])


def chromium() -> str:
    """The Chromium (or Chrome) executable; fails the test in one line where there is none."""
    for name in (os.environ.get("FLOPBUDGET_CHROMIUM", ""), *_BROWSERS):
        found = shutil.which(name) if name else None
        if found:
            return found
    pytest.fail(
        "chromium not found: the notebook HTML tests render in headless Chromium; install it with "
        "`apt-get install -y chromium` (or set FLOPBUDGET_CHROMIUM to a Chrome executable)",
        pytrace=False,
    )


def render(*fragments: str, width: int = 1280, height: int = 1600) -> Rendered:
    """`fragments` one under the other in a page titled `TITLE`, as Chromium renders it."""
    browser = chromium()
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{TITLE}</title></head>\n<body>\n'
        + "\n".join(f'<div class="output">{fragment}</div>' for fragment in fragments)
        + "\n</body></html>\n"
    )
    with tempfile.TemporaryDirectory(prefix="flopbudget-chromium-") as folder:
        path = Path(folder, "page.html")
        path.write_text(page, encoding="utf-8")
        shot = Path(folder, "page.png")
        command = [
            browser,
            *_FLAGS,
            f"--user-data-dir={Path(folder, 'profile')}",
            f"--window-size={width},{height}",
            f"--screenshot={shot}",
            "--dump-dom",
            path.as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0 or not done.stdout.strip():
            pytest.fail(f"{browser} exited {done.returncode}: {done.stderr.strip()[-2000:]}", pytrace=False)
        screenshot = shot.read_bytes() if shot.exists() else b""
    parser = _Elements()
    parser.feed(done.stdout)
    return Rendered(done.stdout, parser.title, parser.elements, parser.tables, screenshot)


def assert_self_contained(html: str) -> None:
    """`html` holds no element that runs or loads anything, no event handler or loading attribute, no CSS
    `url(` or `@import`, and no address but the SVG namespace."""
    parser = _Elements()
    parser.feed(html)
    tags = {name for name, _ in parser.elements}
    assert not tags & ACTIVE, f"active elements: {sorted(tags & ACTIVE)}"
    for name, attrs in parser.elements:
        bad = [key for key in attrs if key.startswith("on") or key in LOADING]
        assert not bad, f"<{name}> has {bad}"
    assert "url(" not in html and "@import" not in html
    addresses = html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "http:" not in addresses and "https:" not in addresses and "file:" not in addresses


def _classes(attrs: dict[str, str]) -> list[str]:
    return attrs.get("class", "").split()


class _Elements(HTMLParser):
    """Every element's tag and attributes in document order, the text of the page's `<title>`, and each table's
    rows (by the table's first class) as the text of their cells."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.title = ""
        self.tables: dict[str, list[list[str]]] = {}
        self._in_title = False
        self._in_svg = 0
        self._table: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {key: value or "" for key, value in attrs}
        self.elements.append((tag, named))
        self._in_svg += tag == "svg"
        self._in_title = tag == "title" and not self._in_svg  # an SVG's <title> is its tooltip
        if tag == "table":
            self._table = self.tables.setdefault((_classes(named) or [""])[0], [])
        elif tag == "tr":
            self._table.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        self._in_svg -= tag == "svg" and self._in_svg > 0
        self._in_title = False
        if tag in ("td", "th") and self._cell is not None and self._table:
            self._table[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self._cell is not None:
            self._cell.append(data)
