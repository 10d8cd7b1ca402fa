"""Whatever the bytes in a job file, loading gives jobs or a ConfigError of one-line diagnostics: never a crash."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedctl.errors import ConfigError
from schedctl.jobs.config import loads_jobs
from schedctl.jobs.configkeys import KNOWN

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _load_or_diagnose(data: str | bytes) -> None:
    try:
        loads_jobs(data, "fuzz.toml", now=NOW)
    except ConfigError as exc:
        assert exc.diagnostics
        for diagnostic in exc.diagnostics:
            rendered = str(diagnostic)
            assert rendered.startswith("fuzz.toml")
            assert len(rendered.splitlines()) == 1, rendered


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes(data: bytes) -> None:
    _load_or_diagnose(data)


@FUZZ
@given(st.text(max_size=300))
def test_arbitrary_text(text: str) -> None:
    _load_or_diagnose(text)


# TOML-ish text: fragments that exercise headers, quoting, multi-line strings and arrays in any order.
FRAGMENTS = [
    "[jobs.a]\n", '[jobs."a.b"]\n', "[[jobs.a]]\n", "[jobs]\n", "a = {", "}", "[", "]", ",", "\n", " ", "#", '"',
    "'", '"""', "'''", "=", ".", "jobs.a.", 'schedule = "* * * * *"\n', 'timezone = "UTC"\n',
    'catch_up = "skip"\n', 'command = "x"\n', "\\", "\\u0000", "1", "true", "1979-05-27T07:32:00Z", "env.",
]  # fmt: skip


@FUZZ
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join))
def test_toml_like_text(text: str) -> None:
    _load_or_diagnose(text)


toml_scalar = st.one_of(
    st.text(max_size=20).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s)),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True),
    st.booleans(),
    st.datetimes(timezones=st.just(UTC)),
    st.sampled_from(["skip", "latest", "all", "forbid", "90s", "* * * * *", "UTC", "Europe/London", "cron"]),
)
toml_value = st.recursive(
    toml_scalar,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["gap", "overlap", "A", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(FUZZ, max_examples=60)  # drawing nested values is the slow part; 60 cover every checker
@given(
    st.dictionaries(
        st.sampled_from(["a", "B", "a.b", "x y", ""]),
        st.dictionaries(st.sampled_from(list(KNOWN) + ["nope"]), toml_value, max_size=12),
        max_size=3,
    )
)
def test_valid_toml_with_any_values(jobs: dict[str, dict[str, Any]]) -> None:
    _load_or_diagnose(tomli_w.dumps({"jobs": jobs}))


def test_every_value_error_names_a_line() -> None:
    text = tomli_w.dumps({"jobs": {"a": {k: [] for k in KNOWN}, "b": {"x": 1}}})
    try:
        loads_jobs(text, "f.toml", now=NOW)
    except ConfigError as exc:
        lines = text.splitlines()
        for d in exc.diagnostics:
            key = d.message.split(":")[0].split(".")[2]
            assert d.line is not None
            assert lines[d.line - 1].startswith(f"{key} = ") or lines[d.line - 1] == "[jobs.b]", str(d)
        assert len(exc.diagnostics) > 20
    else:
        raise AssertionError("no ConfigError")
