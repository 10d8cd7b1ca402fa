"""The fast reader of regular job files gives exactly tomllib's document, or None (then tomllib decides)."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedctl.errors import ConfigError
from schedctl.jobs import config
from schedctl.jobs.config import load_jobs, loads_jobs
from schedctl.jobs.tomlfast import jobs_document

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same_as_tomllib(text: str) -> None:
    fast = jobs_document(text)
    try:
        expected: dict[str, Any] | None = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        expected = None
    if fast is not None:
        assert expected is not None, f"accepted what tomllib refuses: {text!r}"
        assert fast == expected
        # Same types too: True == 1 would hide a boolean read as an integer.
        assert repr(fast) == repr(expected)


# Pieces of the subset and of what lies just outside it, in any order.
FRAGMENTS = [
    "[jobs.a]\n", "[jobs.b]\n", "[jobs.a.env]\n", "[jobs.b.env]\n", "  [jobs.a]  # c\n", "[jobs.a.b.c]\n",
    "[[jobs.a]]\n", "[jobs]\n", '[jobs."q"]\n', "[ jobs.a ]\n", 'schedule = "* * * * *"\n', "A = 'lit'\n",
    'command = ["a", "b",]\n', "command = [\n    \"a\",\n    \"b\",\n]\n", "x = []\n", "x = [ ]\n",
    'x = ["a" "b"]\n', "x = [,]\n", 'x = ["a", 1]\n', "n = 0\n", "n = -12\n", "n = 007\n", "n = +1\n",
    "n = 1_000\n", "n = 1.5\n", "n = 1979-05-27\n", "n = 123456789012345678901234\n", "f = true\n",
    "f = falsey\n", 'e = "a\\"b\\\\c\\n\\t"\n', 'e = "\\u00e9"\n', 'e = "\\x"\n', 'e = "tab\there"\n',
    'e = "a\x01"\n', 'e = ""\n', 'e = "é ü"\n', "e = \"a\"  # note\n", "# comment\n", "#\x7f\n", "\n",
    "   \n", "\r\n", "k = {A = \"b\"}\n", "a.b = 1\n", 'dup = "1"\n', 'dup = "2"\n', 'env = "x"\n', "=\n",
    '"quoted" = 1\n', "k=1\n", "k\t=\t\"v\"\n", 'k = "v"', 'k = """x"""\n',
]  # fmt: skip


def test_every_pair_of_fragments_in_a_job_reads_as_tomllib_reads_it() -> None:
    for first in FRAGMENTS:
        for second in FRAGMENTS:
            _same_as_tomllib("[jobs.a]\n" + first + second)


@FUZZ
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join))
def test_fragments_read_as_tomllib_reads_them(text: str) -> None:
    _same_as_tomllib(text)


@FUZZ
@given(st.text(alphabet='[]jobs.a=" \n\\#,-01tefn{}', max_size=60))
def test_near_toml_reads_as_tomllib_reads_it(text: str) -> None:
    _same_as_tomllib(text)


safe_text = st.text(max_size=15).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))


@settings(FUZZ, max_examples=150)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z0-9][a-z0-9_-]{0,8}", fullmatch=True),
        st.dictionaries(
            st.sampled_from(["schedule", "command", "retries", "paused", "tags", "env", "x-y"]),
            st.one_of(
                safe_text,
                st.integers(-(2**70), 2**70),
                st.booleans(),
                st.lists(safe_text, max_size=3),
                st.dictionaries(st.from_regex(r"[A-Z_]{1,4}", fullmatch=True), safe_text, max_size=2),
            ),
            max_size=5,
        ),
        min_size=1,
        max_size=3,
    )
)
def test_what_tomli_w_writes_reads_as_tomllib_reads_it(jobs: dict[str, dict[str, Any]]) -> None:
    _same_as_tomllib(tomli_w.dumps({"jobs": jobs}))


def _tenant(i: int) -> str:
    return (
        f'[jobs.tenant-{i:07d}]\nschedule = "{i % 60} * * * * *"\ntimezone = "UTC"\n'
        f'catch_up = "skip"\nconcurrency = "allow"\ncommand = ["report", "--tenant", "{i}"]\nretries = 2\n'
        f'paused = false\n\n[jobs.tenant-{i:07d}.env]\nTENANT = "{i}"\n\n'
    )


def test_a_generated_file_is_read_by_the_fast_reader() -> None:
    text = "".join(_tenant(i) for i in range(50))
    document = jobs_document(text)
    assert document is not None
    assert document == tomllib.loads(text)
    assert document["jobs"]["tenant-0000007"]["env"] == {"TENANT": "7"}


def test_the_fast_reader_loads_the_same_jobs_as_tomllib(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "".join(_tenant(i) for i in range(200))
    fast = loads_jobs(text, "t.toml", now=NOW)
    monkeypatch.setattr(config, "jobs_document", lambda text: None)
    assert loads_jobs(text, "t.toml", now=NOW) == fast
    assert len(fast) == 200


def test_a_bad_value_in_a_large_regular_file_names_its_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_PIECE_CHARS", 2000)  # many pieces: the error is in a later one
    lines = "".join(_tenant(i) for i in range(100)).splitlines(keepends=True)
    where = next(n for n, line in enumerate(lines) if line.startswith("retries") and n > 500)
    lines[where] = "retries = -1\n"
    with pytest.raises(ConfigError) as caught:
        loads_jobs("".join(lines), "t.toml", now=NOW)
    job = next(line for line in reversed(lines[:where]) if line.startswith("[jobs.tenant-"))[6:-2]
    assert str(caught.value) == f"t.toml:{where + 1}: jobs.{job}.retries: must be from 0 to 1000, got -1"


def test_a_duplicate_id_across_folder_files_names_both_lines(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(_tenant(1) + _tenant(2))
    (tmp_path / "b.toml").write_text(_tenant(3) + _tenant(2))
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path, now=NOW)
    assert str(caught.value) == (
        f"{tmp_path / 'b.toml'}:13: jobs.tenant-0000002: duplicate job id (also defined at {tmp_path / 'a.toml'}:13)"
    )
