"""Jobs -> crontab: cron's escaping, what cron cannot express, and import -> export -> import round trips."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedctl.crontab.convert import ImportOptions, convert
from schedctl.crontab.diagnostics import render
from schedctl.crontab.export import export_crontab
from schedctl.crontab.parse import SYSTEM, USER, parse_crontab
from schedctl.crontab.percent import encode_command, encode_stdin, split_percent, stdin_as_cron_writes
from schedctl.errors import SchedctlError
from schedctl.jobs.job import CatchUp, Job
from schedctl.timing.zones import DstGap, DstPolicy

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "crontabs"

# (crontab, the flags the example TOML was made with) — see examples/crontabs/README.md
EXAMPLE_CRONTABS = {
    "etc/crontab": ImportOptions("Europe/London", "skip"),
    "etc/cron.d/billing": ImportOptions(None, "all", 3),
    "etc/cron.d/ops": ImportOptions("Europe/London", "latest"),
    "user/alice.crontab": ImportOptions(None, "latest"),
}


def import_text(text: str, file: str, options: ImportOptions, fmt: str | None = None) -> list[Job]:
    tab = parse_crontab(text, file, fmt)
    assert [d for d in tab.diagnostics if d.severity == "error"] == []
    result = convert(tab.entries, options, NOW)
    assert result.missing == [] and [d for d in result.diagnostics if d.severity == "error"] == []
    return result.jobs


def without_source(jobs: list[Job]) -> list[Job]:
    return sorted((dataclasses.replace(j, source=None) for j in jobs), key=lambda j: j.id)


@pytest.mark.parametrize("name", sorted(EXAMPLE_CRONTABS))
def test_import_export_import_gives_the_same_jobs(name: str) -> None:
    options = EXAMPLE_CRONTABS[name]
    first = import_text((EXAMPLES / name).read_text(), name, options)
    exported = export_crontab(first)
    assert exported.messages == []
    again = import_text(exported.text, "exported", options)
    assert without_source(again) == without_source(first)


def job(**values: object) -> Job:
    base: dict[str, object] = {
        "id": "x",
        "schedule": "0 1 * * *",
        "timezone": "UTC",
        "catch_up": CatchUp.SKIP,
        "command": "/bin/x",
    }
    base.update(values)
    return Job(**base)  # type: ignore[arg-type]


def test_zones_env_and_jitter_become_cron_lines_where_they_change() -> None:
    jobs = [
        job(id="a", command="/bin/a", timezone="Europe/London", env={"MAILTO": ""}, source="f:1"),
        job(
            id="b", command="/bin/b", timezone="Europe/London", env={"MAILTO": ""}, jitter=600.0, source="f:2"
        ),
        job(id="c", command="/bin/c", timezone="Asia/Tokyo", env={"MAILTO": "ops@example.com"}, source="f:3"),
    ]
    text = export_crontab(jobs).text
    body = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert body == [
        'MAILTO=""',
        "CRON_TZ=Europe/London",
        "0 1 * * * /bin/a",
        "RANDOM_DELAY=10",
        "0 1 * * * /bin/b",
        "MAILTO=ops@example.com",
        "CRON_TZ=Asia/Tokyo",
        "RANDOM_DELAY=0",
        "0 1 * * * /bin/c",
    ]


def test_format_crontab_is_a_user_crontab_unless_jobs_have_users() -> None:
    assert export_crontab([job()]).text.splitlines()[-1] == "0 1 * * * /bin/x"
    assert export_crontab([job(user="root")]).text.splitlines()[-1] == "0 1 * * * root /bin/x"
    forced = export_crontab([job(user="root")], USER)
    assert forced.text.splitlines()[-1] == "0 1 * * * /bin/x"
    assert forced.messages == ["job 'x': user 'root' dropped (a user crontab runs as its owner)"]


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"schedule": "*/10 * * * * *"}, "a 6-field schedule with seconds: cron has no seconds"),
        ({"dst": DstPolicy(gap=DstGap.SKIP)}, "a dst override: cron has one fixed DST rule"),
        ({"jitter": 90.0}, "jitter of 90s: cron's RANDOM_DELAY is whole minutes, up to 1440"),
        ({"paused": True}, "paused"),
        (
            {"command": "echo a\nb"},
            "the command holds a newline, or backslashes before a % that cron cannot keep",
        ),
        (
            {"command": "printf \\%"},
            "the command holds a newline, or backslashes before a % that cron cannot keep",
        ),
        (
            {"stdin": "a\\\nb"},
            "the standard input cannot be written with cron's % rule (a backslash before a newline)",
        ),
        ({"env": {"X": "a\nb"}}, "env X holds a newline, or both kinds of quotes"),
    ],
)
def test_jobs_cron_cannot_express_become_comments_and_are_reported(
    values: dict[str, object], reason: str
) -> None:
    result = export_crontab([job(**values)])
    assert result.messages == [f"job 'x' written as a comment: {reason}"]
    assert f"# schedctl: not exported ({reason}): " in result.text
    assert parse_crontab(result.text, "out", USER).entries == []


def test_system_export_refuses_jobs_without_a_user_unless_given_one() -> None:
    jobs = [job(id="a", command="/bin/a", user="root"), job(id="b", command="/bin/b")]
    with pytest.raises(SchedctlError, match=r"^job 'b' names no user, and a system crontab needs one"):
        export_crontab(jobs)
    result = export_crontab(jobs, user="nobody")
    assert result.text.splitlines()[-1] == "0 1 * * * nobody /bin/b" and result.messages == []


def test_argv_commands_are_quoted_for_the_shell() -> None:
    result = export_crontab([job(command=("/bin/echo", "it's", "100%"))])
    line = result.text.splitlines()[-1]
    assert line == "0 1 * * * /bin/echo 'it'\"'\"'s' 100\\%"
    assert split_percent(line.split(" ", 5)[5]) == ("/bin/echo 'it'\"'\"'s' 100%", None)


def test_settings_cron_does_not_have_are_reported() -> None:
    result = export_crontab([job(timeout=60.0, retries=2)])
    assert result.messages == ["job 'x': cron has no timeout, retries; exported without"]


def test_an_env_cron_cannot_unset_is_reported() -> None:
    jobs = [
        job(id="a", command="/bin/a", env={"PATH": "/opt/bin"}, source="f:1"),
        job(id="b", command="/bin/b", source="f:2"),
    ]
    assert export_crontab(jobs).messages == [
        "job 'b' reads back with a different env (cron cannot unset a variable set above it)"
    ]


def test_mailto_is_written_as_cron_s_mailto() -> None:
    jobs = [
        job(
            id="a",
            command="/bin/a",
            mailto=("ops@example.com", "root"),
            mailfrom="cron@example.com",
            source="f:1",
        ),
        job(id="b", command="/bin/b", mailto=(), mailfrom="cron@example.com", source="f:2"),
    ]
    result = export_crontab(jobs)
    body = [line for line in result.text.splitlines() if line and not line.startswith("#")]
    assert body[:2] == ["MAILTO=ops@example.com,root", "MAILFROM=cron@example.com"]
    assert 'MAILTO=""' in body
    assert result.messages == []


# ---------------------------------------------------------------------------------------------- % encoding

_TEXT = st.text(alphabet=st.sampled_from(list("ab %\\\n\t'\"$é")), max_size=30)


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_an_encoded_command_reads_back_the_same(command: str) -> None:
    encoded = encode_command(command)
    if encoded is not None:
        assert split_percent(encoded) == (command, None)


@settings(max_examples=400, deadline=None)
@given(_TEXT.filter(bool))
def test_encoded_stdin_reads_back_as_cron_writes_it(stdin: str) -> None:
    encoded = encode_stdin(stdin)
    if encoded is not None:
        raw, exact = encoded
        assert "\n" not in raw
        assert stdin_as_cron_writes(raw) == (stdin if exact else stdin + "\n")


def test_a_system_crontab_round_trips_through_export(tmp_path: Path) -> None:
    text = (
        "SHELL=/bin/bash\nCRON_TZ=Europe/Paris\nRANDOM_DELAY=3\n# Reports.\n"
        "0 6 * * 1-5 www /srv/app/report --daily%to: team%\\%done\n@hourly root /usr/bin/true\n"
    )
    first = import_text(text, "etc/cron.d/app", ImportOptions(catch_up="skip"))
    exported = export_crontab(first)
    assert exported.messages == []
    assert without_source(
        import_text(exported.text, "back", ImportOptions(catch_up="skip"))
    ) == without_source(first)
    assert parse_crontab(exported.text, "back").format == SYSTEM
    assert [render(d) for d in parse_crontab(exported.text, "back").diagnostics] == []


_WORDS = st.text(alphabet=st.sampled_from(list("abz09 %\\'\"$;|&=-_/.é\t")), min_size=1, max_size=25)
_ENV = st.dictionaries(
    st.sampled_from(["SHELL", "PATH", "MAILTO", "HOME", "X_1"]),
    st.text(alphabet=st.sampled_from(list("ab /:@=%'\" é")), max_size=12),
    max_size=3,
)


@st.composite
def single_jobs(draw: st.DrawFn) -> Job:
    command = draw(_WORDS.map(str.strip).filter(bool))
    return job(
        id=draw(st.sampled_from(["x", "backup-db", "a.b_c"])),
        schedule=draw(
            st.sampled_from(["0 1 * * *", "*/5 * * * *", "@daily", "0 0 * * mon-fri", "30 2 1,15 * *"])
        ),
        timezone=draw(st.sampled_from(["UTC", "Europe/London", "Australia/Lord_Howe"])),
        command=command,
        stdin=draw(st.none() | _WORDS | _WORDS.map(lambda s: s + "\n")),
        env=draw(_ENV),
        mailto=draw(st.none() | st.sampled_from([(), ("ops@example.com",), ("a@example.com", "root")])),
        mailfrom=draw(st.none() | st.just("cron@example.com")),
        user=draw(st.none() | st.sampled_from(["root", "www-data"])),
        jitter=draw(st.none() | st.sampled_from([60.0, 600.0])),
        description=draw(st.none() | st.sampled_from(["Nightly.", "Two\nlines"])),
    )


@settings(max_examples=120, deadline=None)
@given(single_jobs())
def test_a_job_exported_without_complaint_imports_back_the_same(original: Job) -> None:
    exported = export_crontab([original])
    if exported.messages:
        return  # reported to the user; nothing is promised about it
    (back,) = import_text(exported.text, "back", ImportOptions(catch_up="skip"))
    expected = dataclasses.replace(original, source=None)
    if expected.stdin is not None and not expected.stdin.endswith("\n"):
        pytest.fail("a stdin cron changes must be reported")
    assert dataclasses.replace(back, source=None) == expected
