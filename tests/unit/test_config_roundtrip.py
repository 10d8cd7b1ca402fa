"""A job set written with ``dump_jobs`` loads back to the same value; every key as documented."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from types import MappingProxyType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedctl.errors import ConfigError
from schedctl.jobs.config import dump_jobs, job_from_mapping, loads_jobs
from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.timing.zones import DstGap, DstOverlap, DstPolicy

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

TRICKY = [
    "say \"hi\"; echo 'there'",
    "line one\nline two\r\n\ttabbed",
    "naïve café — 日本語 🚀",
    "back\\slash and $HOME and %percent",
    '"""triple""" and \'\'\'',
    "trailing space ",
]


def test_a_full_job_survives_the_round_trip() -> None:
    job = Job(
        id="billing.nightly_run-1",
        schedule="0 30 2 * * *",
        timezone="Europe/London",
        catch_up=CatchUp.ALL,
        max_catch_up=24,
        command=("/usr/bin/env", "sh", "-c", TRICKY[0], TRICKY[2]),
        concurrency=Concurrency.REPLACE,
        starting_deadline=90.0,
        timeout=2 * 3600 + 30 * 60,
        retries=3,
        retry_backoff=0.5,
        grace_period=0.0,
        env=MappingProxyType({"MESSAGE": TRICKY[1], "PATH": "/usr/bin:/bin"}),
        pass_env=("DB_PASSWORD", "AWS_SECRET"),
        stdin=TRICKY[4],
        workdir="/srv/billing",
        user="www-data",
        source="/etc/crontab:12",
        labels=MappingProxyType({"team": "billing", "region": "eu-west-1"}),
        description=TRICKY[3],
        paused=True,
        tags=("money", TRICKY[5]),
        jitter=0.001,
        dst=DstPolicy(gap=DstGap.SKIP, overlap=DstOverlap.BOTH),
        on_failure="notify 'billing failed'",
        on_success=("true",),
    )
    other = Job(id="a", schedule="@hourly", timezone="UTC", catch_up=CatchUp.SKIP, command=TRICKY[1])
    jobs = {"a": other, job.id: job}
    text = dump_jobs(jobs)
    assert loads_jobs(text, "dumped.toml", now=NOW) == jobs
    assert dump_jobs(loads_jobs(text, "dumped.toml", now=NOW)) == text


def test_defaults_are_left_out_and_durations_are_spelled() -> None:
    job = Job(
        id="x",
        schedule="*/5 * * * *",
        timezone="UTC",
        catch_up=CatchUp.LATEST,
        command="date",
        timeout=5400.0,
    )
    assert tomllib.loads(dump_jobs([job])) == {
        "jobs": {
            "x": {
                "schedule": "*/5 * * * *",
                "timezone": "UTC",
                "catch_up": "latest",
                "command": "date",
                "timeout": "1h30m",
            }
        }
    }


def test_dst_cron_and_empty_policy_mean_the_cron_rule() -> None:
    base = '[jobs.x]\nschedule = "0 2 * * *"\ntimezone = "Europe/London"\ncatch_up = "skip"\ncommand = "x"\n'
    assert loads_jobs(base + 'dst = "cron"\n', "f", now=NOW)["x"].dst is None
    assert loads_jobs(base + "dst = {}\n", "f", now=NOW)["x"].dst is None
    assert loads_jobs(base + 'dst = { overlap = "last" }\n', "f", now=NOW)["x"].dst == DstPolicy(
        overlap=DstOverlap.LAST
    )


def test_job_from_mapping_checks_like_the_file_loader() -> None:
    table = {"schedule": "0 0 30 2 *", "timezone": "UTC", "catch_up": "skip", "command": "x", "retries": -1}
    try:
        job_from_mapping("imported", table, "/etc/crontab", lambda path: 7, now=NOW)
    except ConfigError as exc:
        assert [str(d) for d in exc.diagnostics] == [
            "/etc/crontab:7: jobs.imported.retries: must be from 0 to 1000, got -1",
            "/etc/crontab:7: jobs.imported.schedule: never fires: day 30 does not occur in Feb",
        ]
    else:
        raise AssertionError("no ConfigError")
    table.update(schedule="0 0 29 2 *", retries=2)
    job = job_from_mapping("imported", table, "/etc/crontab", lambda path: 7, now=NOW)
    assert (job.schedule, job.retries) == ("0 0 29 2 *", 2)


# Strings a job may hold: anything but NUL and lone surrogates (neither can be in a UTF-8 TOML file).
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)
nonblank = text.filter(lambda s: s.strip() != "")
LOWER, UPPER, DIGITS = "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789"


def word(first: str, rest: str, size: int) -> st.SearchStrategy[str]:
    return st.builds(lambda a, b: a + b, st.sampled_from(first), st.text(rest, max_size=size))


env_name = word(UPPER + LOWER + "_", UPPER + LOWER + DIGITS + "_", 10)
label_key = word(LOWER + DIGITS, LOWER + DIGITS + "._/-", 10)
label_value = st.text(UPPER + LOWER + DIGITS + "._:/@+-", max_size=12)
job_id = word(LOWER + DIGITS, LOWER + DIGITS + "._-", 20)
command = (
    nonblank
    | st.tuples(nonblank).map(tuple)
    | st.lists(text, min_size=1, max_size=4).map(lambda xs: (xs[0] if xs[0].strip() else "x", *xs[1:]))
)
duration = st.one_of(
    st.integers(0, 10**6).map(float),
    st.integers(0, 10**6).map(lambda ms: ms / 1000),
    st.floats(0, 10**6, allow_nan=False, allow_infinity=False),
)
positive = duration.filter(lambda d: d > 0)


@st.composite
def jobs(draw: st.DrawFn) -> Job:
    catch_up = draw(st.sampled_from(list(CatchUp)))
    dst = draw(
        st.none()
        | st.builds(DstPolicy, st.sampled_from(list(DstGap)), st.none() | st.sampled_from(list(DstOverlap)))
    )
    names = draw(st.lists(env_name, unique=True, max_size=4))
    split = draw(st.integers(0, len(names)))
    return Job(
        id=draw(job_id),
        schedule=draw(
            st.sampled_from(["* * * * *", "30 2 * * *", "@daily", "*/15 9-17 * * 1-5", "0 0 0 1 1 *"])
        ),
        timezone=draw(st.sampled_from(["UTC", "Europe/London", "America/New_York", "Australia/Lord_Howe"])),
        catch_up=catch_up,
        max_catch_up=draw(st.integers(1, 1_000_000)) if catch_up is CatchUp.ALL else None,
        command=draw(command),
        concurrency=draw(st.sampled_from(list(Concurrency))),
        starting_deadline=draw(st.none() | positive),
        timeout=draw(st.none() | positive),
        retries=draw(st.integers(0, 1000)),
        retry_backoff=draw(duration),
        grace_period=draw(duration),
        env=MappingProxyType({n: draw(text) for n in names[:split]}),
        pass_env=tuple(names[split:]),
        stdin=draw(st.none() | text),
        workdir=draw(st.none() | nonblank),
        source=draw(st.none() | text),
        labels=MappingProxyType(draw(st.dictionaries(label_key, label_value, max_size=3))),
        description=draw(st.none() | text),
        paused=draw(st.booleans()),
        tags=tuple(draw(st.lists(nonblank, unique=True, max_size=3))),
        jitter=draw(st.none() | duration),
        dst=dst if dst != DstPolicy() else None,
        on_failure=draw(st.none() | command),
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(jobs(), max_size=3, unique_by=lambda j: j.id))
def test_any_valid_job_set_round_trips(job_list: list[Job]) -> None:
    expected = {j.id: j for j in job_list}
    assert loads_jobs(dump_jobs(job_list), "dumped.toml", now=NOW) == expected
