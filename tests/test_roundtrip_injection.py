"""Hostile text in a job survives TOML, the database and the subprocess exactly, on every backend.

One job per shape of command (argv list, shell string) holds quotes, semicolons, newlines, ``$()``,
backticks and non-ASCII in its command, env values, stdin and checkpoint. It goes through the same
functions the product uses: ``dump_jobs``/``loads_jobs``, the leader's fenced ``dispatch``, the worker's
``claim``/``save_checkpoint``/``record_many``, and ``Execution``. The job prints what it received; the test
compares byte for byte and checks that none of the embedded shell syntax ran.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from sqlalchemy import select

from schedctl.jobs.config import dump_jobs, loads_jobs
from schedctl.jobs.job import CatchUp, Concurrency, Job, RunState
from schedctl.leader import lease
from schedctl.leader.planner import Tick
from schedctl.store import claims
from schedctl.store.dispatch import Fence, StateChange, dispatch, record_changes
from schedctl.store.schema import job_runs
from schedctl.worker.executor import Execution, RunIdentity

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
TICK = datetime(2026, 12, 1, 9, 1, 0, 123456, tzinfo=UTC)

# Each would do something if anything between the file and the job's argv re-parsed it with a shell.
HOSTILE = [
    "it's \"quoted\" and 'single'",
    "a; touch {pwned}; b",
    "line one\nline two\r\nthree\ttab",
    "$(touch {pwned}) `touch {pwned}` ${{HOME}} $HOME",
    "naïve café — 日本語 🚀 \u200b zero-width",
    "back\\slash \\n not-a-newline %percent %%",
    "| cat /etc/passwd > {pwned} && echo &",
    '"""triple""" \'\'\' [jobs.x] = # comment',
    "  leading and trailing  ",
]

# Prints what it received as one JSON line: argv, the job's env names, stdin.
PROBE = (
    "import json, os, sys\n"
    "names = sorted(k for k in os.environ if k.startswith(('HOSTILE_', 'SCHEDCTL_')))\n"
    "print(json.dumps({'argv': sys.argv[1:], 'env': {k: os.environ[k] for k in names},"
    " 'stdin': sys.stdin.read()}))\n"
)


def hostile(pwned: Path) -> list[str]:
    return [h.format(pwned=pwned) for h in HOSTILE]


def argv_job(pwned: Path) -> Job:
    values = hostile(pwned)
    return Job(
        id="hostile.argv-job_1",
        schedule="* * * * *",
        timezone="UTC",
        catch_up=CatchUp.SKIP,
        command=(sys.executable, "-c", PROBE, *values),
        concurrency=Concurrency.ALLOW,
        env=MappingProxyType({f"HOSTILE_{i}": v for i, v in enumerate(values)}),
        stdin="\n".join(values),
        description=values[7],
        tags=tuple(values[:3]),
    )


def shell_job(pwned: Path) -> Job:
    """A string command is a shell line the user wrote: its own syntax runs, the values inside env do not."""
    values = hostile(pwned)
    script = f'{sys.executable} -c "$HOSTILE_PROBE" "$HOSTILE_1" "$HOSTILE_3" \'lit;eral\' "$HOSTILE_6"'
    return Job(
        id="hostile.shell",
        schedule="* * * * *",
        timezone="UTC",
        catch_up=CatchUp.SKIP,
        command=script,
        concurrency=Concurrency.ALLOW,
        env=MappingProxyType({"HOSTILE_PROBE": PROBE, **{f"HOSTILE_{i}": v for i, v in enumerate(values)}}),
        stdin=values[4],
    )


def through_toml(jobs: list[Job]) -> dict[str, Job]:
    text = dump_jobs(jobs)
    loaded = loads_jobs(text, "hostile.toml", now=NOW)
    assert loaded == {j.id: j for j in jobs}
    return loaded


def through_database(store: Any, jobs: dict[str, Job]) -> dict[str, claims.ClaimedRun]:
    """The leader dispatches the tick, a worker claims it: the snapshot the worker gets is the job's."""
    result = lease.acquire_or_renew(store, "cron", "leader-1", 30.0)
    assert result.held and result.term is not None
    fence = Fence("cron", "leader-1", result.term)
    record_changes(store, fence, [StateChange(j.id, "defined", j.schedule_key) for j in jobs.values()], NOW)
    ticks = [Tick(job_id, TICK, RunState.QUEUED) for job_id in jobs]
    assert dispatch(store, fence, ticks, jobs, NOW).inserted == len(jobs)
    with store.begin() as conn:
        claimed = claims.claim(conn, "worker-1", 10, [""], 60.0)
    assert {c.job_id for c in claimed} == set(jobs)
    for c in claimed:
        assert c.snapshot == jobs[c.job_id].snapshot()
        assert c.scheduled_for == TICK
    return {c.job_id: c for c in claimed}


def execute(run: claims.ClaimedRun, tmp_path: Path) -> Execution:
    ident = RunIdentity(run.job_id, run.scheduled_for, run.attempt)
    assert run.snapshot is not None
    execution = Execution(ident, run.snapshot, run.checkpoint, tmp_path)
    deadline = time.monotonic() + 20
    while not execution.done():
        assert time.monotonic() < deadline, "the job did not finish"
        execution.enforce()
        time.sleep(0.01)
    assert execution.start_error is None and execution.returncode == 0, execution.tail.text()
    return execution


def received(execution: Execution) -> dict[str, Any]:
    lines = execution.tail.text().splitlines()
    assert len(lines) == 1, lines
    return dict(json.loads(lines[0]))


def test_hostile_values_reach_the_job_exactly_and_nothing_embedded_runs(store: Any, tmp_path: Path) -> None:
    pwned = tmp_path / "pwned"
    values = hostile(pwned)
    jobs = through_toml([argv_job(pwned), shell_job(pwned)])
    runs = through_database(store, jobs)

    got = received(execute(runs["hostile.argv-job_1"], tmp_path))
    assert got["argv"] == values
    assert got["stdin"] == "\n".join(values)
    assert {k: v for k, v in got["env"].items() if k.startswith("HOSTILE_")} == {
        f"HOSTILE_{i}": v for i, v in enumerate(values)
    }
    assert got["env"]["SCHEDCTL_JOB_ID"] == "hostile.argv-job_1"
    assert got["env"]["SCHEDCTL_SCHEDULED_FOR"] == "2026-12-01T09:01:00.123456Z"

    got = received(execute(runs["hostile.shell"], tmp_path))
    # The user's own quoting decides: "$X" is one word whatever X holds, 'lit;eral' stays literal.
    assert got["argv"] == [values[1], values[3], "lit;eral", values[6]]
    assert got["stdin"] == values[4]
    assert not pwned.exists(), "a value inside the job was executed by a shell"


def test_hostile_output_and_checkpoints_survive_the_database(store: Any, tmp_path: Path) -> None:
    """Output tail, error and checkpoint JSON written by the worker read back exactly; a hand-back carries
    the checkpoint to the next attempt's SCHEDCTL_CHECKPOINT unchanged."""
    pwned = tmp_path / "pwned"
    values = hostile(pwned)
    jobs = through_toml([argv_job(pwned)])
    run = through_database(store, jobs)["hostile.argv-job_1"]
    checkpoint = {"values": values, "nested": {values[4]: [values[2], None, 1.5, True]}}
    with store.begin() as conn:
        assert claims.save_checkpoint(conn, run.job_id, run.scheduled_for, run.attempt, checkpoint)
        handed = claims.Outcome(
            run.job_id, run.scheduled_for, run.attempt, "queued", checkpoint=checkpoint, save_checkpoint=True
        )
        assert claims.record_many(conn, [handed]) == [True]
    with store.begin() as conn:
        (again,) = claims.claim(conn, "worker-2", 10, [""], 60.0)
    assert again.attempt == run.attempt + 1 and again.checkpoint == checkpoint
    execution = execute(again, tmp_path)
    got = received(execution)
    assert json.loads(got["env"]["SCHEDCTL_CHECKPOINT"]) == checkpoint

    tail = execution.tail.text() + "\n".join(values)
    error = values[2] + values[4]
    finished = claims.Outcome(
        again.job_id,
        again.scheduled_for,
        again.attempt,
        "failed",
        exit_status=1,
        output_tail=tail,
        error=error,
    )
    with store.begin() as conn:
        assert claims.record_many(conn, [finished]) == [True]
    with store.connect() as conn:
        row = conn.execute(select(job_runs).where(job_runs.c.job_id == run.job_id)).mappings().one()
    assert (row["state"], row["output_tail"], row["error"]) == ("failed", tail, error)
    assert row["checkpoint"] == checkpoint


@pytest.mark.parametrize(
    "job_id",
    ["a;b", "a b", "a'b", 'a"b', "a\nb", "café", "A", "-x", "a$(id)", "a/b", ""],
)
def test_a_job_id_outside_the_allowed_alphabet_is_one_clear_error(job_id: str) -> None:
    from schedctl.errors import ConfigError

    key = json.dumps(job_id, ensure_ascii=False)  # a TOML basic string is a JSON string here
    text = f'[jobs.{key}]\nschedule = "* * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "true"\n'
    with pytest.raises(ConfigError) as caught:
        loads_jobs(text, "ids.toml", now=NOW)
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.file == "ids.toml" and diagnostic.line == 1
    assert "\n" not in str(diagnostic)


def test_a_long_run_of_allowed_punctuation_in_an_id_round_trips(store: Any, tmp_path: Path) -> None:
    job = Job(
        id="a.-_" * 60 + "z",
        schedule="* * * * *",
        timezone="UTC",
        catch_up=CatchUp.SKIP,
        command=(sys.executable, "-c", PROBE),
        concurrency=Concurrency.ALLOW,
    )
    jobs = through_toml([job])
    run = through_database(store, jobs)[job.id]
    assert received(execute(run, tmp_path))["env"]["SCHEDCTL_JOB_ID"] == job.id
