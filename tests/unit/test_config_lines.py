"""The key-line scanner: tomllib gives no positions, so FILE:LINE errors rest on this."""

from __future__ import annotations

import tomllib
from typing import Any

import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from schedctl.jobs.tomlpos import key_lines


def test_headers_dotted_keys_inline_tables_and_arrays() -> None:
    text = (
        "# comment [jobs.fake]\n"  # 1
        '[ jobs . "a.b" ]  # spaced header\n'  # 2
        'command = """\n'  # 3
        "not = a key\n"  # 4
        '"""\n'  # 5
        "tags = [\n"  # 6
        '  "x", # one\n'  # 7
        "  'y',\n"  # 8
        "]\n"  # 9
        "[jobs]\n"  # 10
        'c.env.PATH = "/bin"\n'  # 11
        'd = { schedule = "@daily", dst = { gap = "run" } }\n'  # 12
        "[[other]]\n"  # 13
        "k = 1\n"  # 14
        "[[other]]\n"  # 15
        "k = 2\n"  # 16
    )
    tomllib.loads(text)
    found = key_lines(text)
    assert found.line_of(("jobs", "a.b")) == 2
    assert found.line_of(("jobs", "a.b", "command")) == 3
    assert found.line_of(("jobs", "a.b", "not")) == 2  # inside a string: falls back to the table
    assert found.line_of(("jobs", "a.b", "tags", 1)) == 8
    assert found.line_of(("jobs", "c", "env", "PATH")) == 11
    assert found.line_of(("jobs", "d", "dst", "gap")) == 12
    assert found.line_of(("other", 1, "k")) == 16
    assert found.line_of(("nowhere",)) is None


def test_crlf_line_ends() -> None:
    text = '[jobs.a]\r\nschedule = "x"\r\n\r\nretries = 1\r\n'
    tomllib.loads(text)
    assert key_lines(text).line_of(("jobs", "a", "retries")) == 4


def test_duplicates_are_recorded_at_their_second_line() -> None:
    assert key_lines("a = 1\nb = 2\na = 3\n").duplicates == [(("a",), 3)]


def test_text_tomllib_refuses_never_raises() -> None:
    for text in [
        "'",
        '"abc',
        "[a",
        "a = [1,",
        "a = '''x",
        "= 1",
        "a.",
        '"""',
        "a = [x }]",
        "a = { b = 1 ] }",
    ]:
        key_lines(text)


keys = st.sampled_from(["a", "b-c", "x y", "d.e", "ü", '"q"', "", "1"])
strings = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
leaf = st.one_of(strings, st.integers(), st.booleans(), st.lists(strings, max_size=3))
tables = st.recursive(
    st.dictionaries(keys, leaf, max_size=4),
    lambda inner: st.dictionaries(keys, inner | leaf, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(tables, st.booleans())
def test_every_key_tomli_w_writes_is_found_on_its_own_line(document: dict[str, Any], multiline: bool) -> None:
    text = tomli_w.dumps(document, multiline_strings=multiline)
    found = key_lines(text)
    lines = text.split("\n")  # not splitlines(): TOML ends lines at \n only, never at U+0085 or U+2028

    def walk(table: dict[str, Any], path: tuple[str, ...]) -> None:
        for key, value in table.items():
            line = found.lines.get((*path, key))
            assert line is not None, (path, key, text)
            written = lines[line - 1]
            if isinstance(value, dict) and value and written.startswith("["):
                assert written.startswith("[") and written.endswith("]")
            else:
                bare = tomli_w.dumps({key: 0}).split(" = ")[0]
                assert written.split(" = ")[0].endswith(bare) or written.startswith("["), (key, written)
            if isinstance(value, dict):
                walk(value, (*path, key))

    walk(document, ())


FRAGMENTS = [
    "[",
    "]",
    "[[",
    "{",
    "}",
    "=",
    ".",
    ",",
    "\n",
    "\r\n",
    " ",
    "#",
    '"',
    "'",
    '"""',
    "'''",
    "\\",
    "a",
    "1",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join))
def test_the_scanner_ends_on_any_text(text: str) -> None:
    """It also runs on text tomllib refused (to find a duplicated key), so it must end there too."""
    found = key_lines(text)
    assert all(1 <= line <= text.count("\n") + 1 for line in found.lines.values())
