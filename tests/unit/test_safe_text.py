"""No output line can start a workflow command or carry a raw control character (pytest_flopbudget/_safe_text.py)."""

from __future__ import annotations

import io
import json

from hypothesis import given
from hypothesis import strategies as st

from pytest_flopbudget._safe_text import SafeStream, json_safe, safe_line, safe_text, visible

HOSTILE = st.text(alphabet=st.sampled_from([":", "#", "[", " ", "\t", "\n", "\r", "\x1b", "\u202e", "\x85", "a"]))


def assert_inert(text: str) -> None:
    for line in text.split("\n"):
        assert not line.lstrip().startswith("::"), line
        assert "##[" not in line, line
        assert all(ch in "\t" or (ord(ch) >= 0x20 and not 0x7F <= ord(ch) <= 0x9F) for ch in line), line
        assert not any(ch in line for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"), line


@given(HOSTILE)
def test_any_text_becomes_inert(text: str) -> None:
    assert_inert(safe_text(text))


@given(st.text())
def test_plain_text_is_unchanged(text: str) -> None:
    clean = "".join(ch for ch in text if ch.isalnum() or ch in " .,-_()%+")
    assert safe_text(clean) == clean


def test_the_issue_s_examples() -> None:
    assert safe_line("::stop-commands::pwned") == "\\x3a:stop-commands::pwned"
    assert safe_line("   ::error::x") == "   \\x3a:error::x"
    assert safe_line("layer ##[group]x") == "layer #\\x23[group]x"
    assert safe_line("\x1b[2Jcleared") == "\\x1b[2Jcleared"
    assert visible("a\u202eb") == "a\\u202eb"
    assert safe_text("ok\n::set-output name=x::y") == "ok\n\\x3a:set-output name=x::y"


def test_the_stream_lets_only_explicit_commands_through() -> None:
    out = io.StringIO()
    stream = SafeStream(out)
    stream.write("model \n::stop-commands::t\n")
    stream.write_command("::error::escaped by the reporter\n")
    assert out.getvalue() == "model \n\\x3a:stop-commands::t\n::error::escaped by the reporter\n"


def test_json_safe_keeps_json_valid_through_the_line_filter() -> None:
    text = json_safe(json.dumps({"##[group]": "a###[b", "x": "\x1b::y"}, indent=2))
    assert safe_text(text) == text  # nothing left for the stdout filter to break up
    assert json.loads(text) == {"##[group]": "a###[b", "x": "\x1b::y"}
