"""Real `schedctl serve --role worker` processes, real jobs, real signals, on every backend.

Settings a loaded 2-core machine meets: heartbeat 0.5 s, stale after 3 s, poll 0.2 s. Jobs append
``tag job scheduled_for attempt pid`` lines to a ledger file, which is what "ran once" is checked against.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from schedctl.errors import StoreUnavailable
from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.store import claims, open_store
from schedctl.store.migrate import upgrade
from schedctl.store.runs import cancel as cancel_run
from schedctl.store.schema import job_runs, job_state
from schedctl.timing.clock import SystemClock
from schedctl.worker.loop import Worker
from schedctl.worker.settings import WorkerSettings

pytestmark = pytest.mark.processes

FAST = [
    "--poll-interval",
    "0.2",
    "--heartbeat-interval",
    "0.5",
    "--stale-after",
    "3",
    "--successful-history",
    "1000",
]
STEP_JOB = """
i=$(printf '%s' "${SCHEDCTL_CHECKPOINT:-0}" | tr -cd 0-9); i=${i:-0}
trap 'echo "term $SCHEDCTL_JOB_ID $SCHEDCTL_SCHEDULED_FOR $SCHEDCTL_ATTEMPT $$ $i" >> LEDGER; exit 143' TERM
while [ "$i" -lt STEPS ]; do
  i=$((i+1))
  echo "step $SCHEDCTL_JOB_ID $SCHEDCTL_SCHEDULED_FOR $SCHEDCTL_ATTEMPT $$ $i" >> LEDGER
  printf '%s' "$i" > "$SCHEDCTL_CHECKPOINT_FILE"
  sleep 0.2 & wait $!
done
echo "done $SCHEDCTL_JOB_ID $SCHEDCTL_SCHEDULED_FOR $SCHEDCTL_ATTEMPT $$ $i" >> LEDGER
"""


class Env:
    def __init__(self, url: str, tmp: Path) -> None:
        self.url = url
        self.tmp = tmp
        self.ledger = tmp / "ledger"
        self.ledger.touch()
        self.store = open_store(url)
        upgrade(self.store)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.now = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)

    def job(self, job_id: str, command: str, **kw: Any) -> Job:
        kw.setdefault("concurrency", Concurrency.ALLOW)
        kw.setdefault("grace_period", 2.0)
        command = command.replace("LEDGER", str(self.ledger))
        return Job(
            id=job_id, schedule="* * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command=command, **kw
        )

    def queue(self, job: Job, count: int = 1) -> list[datetime]:
        instants = [self.now + timedelta(seconds=i) for i in range(count)]
        self.now += timedelta(seconds=count)
        with self.store.begin() as conn:
            claims.queue_runs(conn, job, instants)
        return instants

    def worker(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "ab")
        argv = [
            sys.executable,
            "-m",
            "schedctl",
            "serve",
            "--role",
            "worker",
            "--db",
            self.url,
            "--identity",
            name,
            "--log-format",
            "json",
            *FAST,
            *args,
        ]
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        log.close()
        self.procs.append(proc)
        return proc

    def events(self, name: str) -> list[dict[str, Any]]:
        lines = (self.tmp / f"{name}.log").read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def rows(self, job_id: str | None = None) -> list[Any]:
        with self.store.begin() as conn:
            q = select(job_runs).order_by(job_runs.c.scheduled_for)
            if job_id is not None:
                q = q.where(job_runs.c.job_id == job_id)
            return list(conn.execute(q).mappings())

    def ledger_lines(self, tag: str | None = None) -> list[list[str]]:
        lines = [line.split() for line in self.ledger.read_text().splitlines()]
        return [parts for parts in lines if tag is None or parts[0] == tag]

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.store.dispose()


@pytest.fixture
def env(db_url: str, tmp_path: Path) -> Iterator[Env]:
    e = Env(db_url, tmp_path)
    try:
        yield e
    finally:
        e.close()


def wait_for(what: str, predicate: Callable[[], Any], timeout: float = 12.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout)


def all_in(env: Env, states: set[str], count: int) -> bool:
    rows = env.rows()
    return len(rows) == count and all(r["state"] in states for r in rows)


def _started(env: Env, name: str) -> bool:
    return any(e["event"] == "worker_started" for e in env.events(name))


def test_two_workers_run_each_queued_run_once(env):
    job = env.job(
        "ledger", 'echo "ran $SCHEDCTL_JOB_ID $SCHEDCTL_SCHEDULED_FOR $SCHEDCTL_ATTEMPT $$" >> LEDGER'
    )
    instants = env.queue(job, 40)
    a, b = env.worker("wA", "--slots", "4"), env.worker("wB", "--slots", "4")
    wait_for("every run to succeed", lambda: all_in(env, {"succeeded"}, 40))
    # One worker may drain all 40 before the other has finished starting; a SIGTERM before its handlers
    # are installed would end it with -15 (Python's default), which is not what this test is about.
    wait_for("both workers to start", lambda: all(_started(env, name) for name in ("wA", "wB")), 30)
    assert stop(a) == 0 and stop(b) == 0
    ran = sorted(line[2] for line in env.ledger_lines("ran"))
    assert ran == sorted(t.isoformat().replace("+00:00", "Z") for t in instants)
    assert {line[3] for line in env.ledger_lines("ran")} == {"1"}
    assert {r["worker"] for r in env.rows()} <= {"wA", "wB"}


def test_sigkill_mid_run_is_taken_over_after_the_stale_window_from_the_checkpoint(env):
    env.queue(env.job("steps", STEP_JOB.replace("STEPS", "12")))
    a = env.worker("wA")
    wait_for("a saved checkpoint", lambda: (env.rows()[0]["checkpoint"] or 0) >= 3)
    pid = int(env.ledger_lines("step")[-1][4])
    a.kill()
    os.killpg(pid, signal.SIGKILL)  # the machine died: the job with it
    a.wait()
    saved = env.rows()[0]["checkpoint"]
    killed_at = time.monotonic()
    b = env.worker("wB")
    wait_for("the takeover to finish", lambda: env.rows()[0]["state"] == "succeeded", timeout=15)
    assert time.monotonic() - killed_at >= 2.0  # it waited out (most of) the stale window
    steps = [line for line in env.ledger_lines("step") if line[3] == "2"]
    assert int(steps[0][5]) == saved + 1  # resumed from the last checkpoint, not from the start
    row = env.rows()[0]
    assert (row["attempt"], row["worker"], row["failures"], row["checkpoint"]) == (2, "wB", 0, 12)
    assert any(e["event"] == "run_taken_over" and e["previous_worker"] == "wA" for e in env.events("wB"))
    assert stop(b) == 0


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for whoever inherited it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_a_sigkilled_workers_jobs_die_with_it_grandchildren_too(env):
    """No orphan keeps running beside the copy a takeover will start: the worker's watchdog kills the
    job's process group when the worker dies without stopping it, and removes the worker's private folder
    (where its jobs' checkpoint files live)."""
    pids = env.tmp / "pids"
    # The checkpoint's descriptor points into the worker's folder (an unnamed file there, issue 24).
    command = (
        f'sleep 300 & echo $$ $! "$(dirname "$(readlink "$SCHEDCTL_CHECKPOINT_FILE")")" > {pids}.tmp; '
        f"mv {pids}.tmp {pids}; wait"
    )
    env.queue(env.job("long", command))
    a = env.worker("wA")
    wait_for("the job and its child", lambda: pids.exists() and pids.read_text().strip())
    first, second, checkpoint = pids.read_text().split()
    job_pids, folder = [int(first), int(second)], Path(checkpoint)
    assert folder.name.startswith("schedctl-worker-"), folder
    assert all(_alive(p) for p in job_pids) and folder.is_dir()
    a.kill()
    a.wait()
    wait_for("the job's processes to die with the worker", lambda: not any(_alive(p) for p in job_pids), 5)
    wait_for("the worker's folder to go", lambda: not folder.exists(), 5)


def test_sigterm_mid_run_hands_the_run_back_and_another_worker_resumes_at_once(env):
    env.queue(env.job("steps", STEP_JOB.replace("STEPS", "10")))
    a = env.worker("wA")
    wait_for("progress", lambda: (env.rows()[0]["checkpoint"] or 0) >= 2)
    assert stop(a) == 0
    stopped_at = time.monotonic()
    (term,) = env.ledger_lines("term")  # the job itself got SIGTERM
    row = env.rows()[0]
    assert (row["state"], row["worker"], row["heartbeat_at"], row["exclusive"]) == (
        "queued",
        None,
        None,
        None,
    )
    assert row["checkpoint"] == int(term[5]) and row["failures"] == 0
    b = env.worker("wB")
    wait_for("the resumed run", lambda: [ln for ln in env.ledger_lines("step") if ln[3] == "2"])
    # Handed back, not abandoned: wB claimed a queued run, with no take-over of a stale one. That is the
    # proof; a wall-clock bound from the SIGTERM would mostly measure wB's interpreter start-up, which on a
    # loaded 2-core machine alone can exceed the 3 s stale window.
    assert not any(e["event"] == "run_taken_over" for e in env.events("wB"))
    assert time.monotonic() - stopped_at < 30.0  # and it did not wait for anything slow to expire
    wait_for("success", lambda: env.rows()[0]["state"] == "succeeded")
    resumed = [int(ln[5]) for ln in env.ledger_lines("step") if ln[3] == "2"]
    assert resumed[0] == row["checkpoint"] + 1
    assert any(e["event"] == "run_handed_back" for e in env.events("wA"))
    assert stop(b) == 0


def test_a_stopped_worker_loses_its_run_and_its_late_writes_are_rejected(env):
    env.queue(env.job("steps", STEP_JOB.replace("STEPS", "25")))
    a = env.worker("wA")
    wait_for("progress", lambda: (env.rows()[0]["checkpoint"] or 0) >= 1)
    a.send_signal(signal.SIGSTOP)
    b = env.worker("wB")
    wait_for("the takeover", lambda: env.rows()[0]["attempt"] == 2, timeout=15)
    a_pid = int(env.ledger_lines("step")[0][4])
    a.send_signal(signal.SIGCONT)
    wait_for("wA to stop its copy", lambda: any(e["event"] == "run_lost" for e in env.events("wA")))
    wait_for("wA's copy to end", lambda: [ln for ln in env.ledger_lines("term") if ln[4] == str(a_pid)], 6)
    row = env.rows()[0]
    assert (row["state"], row["worker"], row["attempt"]) == ("running", "wB", 2)
    assert stop(a) == 0
    wait_for("wB to finish", lambda: env.rows()[0]["state"] == "succeeded", timeout=15)
    row = env.rows()[0]
    assert (row["worker"], row["attempt"], row["checkpoint"]) == ("wB", 2, 25)
    assert not any(e["event"] == "run_finished" for e in env.events("wA"))
    assert stop(b) == 0


def test_timeout_retries_with_backoff_and_cancel(env):
    env.queue(env.job("slow", "trap '' TERM; sleep 10", timeout=0.5, grace_period=0.5))
    env.queue(env.job("flaky", 'date +"try %s.%N" >> LEDGER; exit 3', retries=2, retry_backoff=0.4))
    (doomed,) = env.queue(env.job("doomed", "trap 'echo cancelled >> LEDGER; exit 0' TERM; sleep 10 & wait"))
    a = env.worker("wA")
    wait_for("doomed to run", lambda: env.rows("doomed")[0]["state"] == "running")
    assert cancel_run(env.store, "doomed", doomed) == "cancel_requested"
    wait_for("all to end", lambda: all_in(env, {"timed_out", "failed", "cancelled"}, 3))
    assert stop(a) == 0
    assert env.ledger_lines("cancelled") == [["cancelled"]]  # SIGTERM, and it exited inside its grace
    assert env.rows("doomed")[0]["state"] == "cancelled"
    slow, flaky = env.rows("slow")[0], env.rows("flaky")[0]
    assert (slow["state"], slow["exit_status"]) == ("timed_out", 128 + 9)
    assert 0.9 <= (slow["finished_at"] - slow["started_at"]).total_seconds() < 5
    assert (flaky["state"], flaky["attempt"], flaky["failures"], flaky["exit_status"]) == ("failed", 3, 3, 3)
    tries = [float(line[1]) for line in env.ledger_lines("try")]
    gaps = [later - earlier for earlier, later in zip(tries, tries[1:], strict=False)]
    assert len(tries) == 3 and gaps[0] >= 0.4 and gaps[1] >= 0.8


def test_history_is_pruned_and_history_start_moves(env):
    ok, bad = env.job("ok", "true"), env.job("bad", "exit 1")
    ok_ticks, bad_ticks = env.queue(ok, 5), env.queue(bad, 3)
    with env.store.begin() as conn:
        for job_id in ("ok", "bad"):
            conn.execute(
                job_state.insert().values(
                    job_id=job_id, schedule_key="k", defined_at=env.now, updated_at=env.now
                )
            )
    a = env.worker("wA", "--successful-history", "2", "--failed-history", "1")
    wait_for("all to end", lambda: all_in(env, {"succeeded", "failed"}, 8))
    assert stop(a) == 0  # prunes once more on the way out
    assert [r["scheduled_for"] for r in env.rows("ok")] == ok_ticks[-2:]
    assert [r["scheduled_for"] for r in env.rows("bad")] == bad_ticks[-1:]
    with env.store.begin() as conn:
        starts = dict(conn.execute(select(job_state.c.job_id, job_state.c.history_start)).all())
    assert starts == {
        "ok": ok_ticks[2] + timedelta(microseconds=1),
        "bad": bad_ticks[1] + timedelta(microseconds=1),
    }


def test_forbid_runs_one_at_a_time_in_scheduled_order_across_workers(env):
    job = env.job(
        "one",
        'echo "start $SCHEDCTL_SCHEDULED_FOR" >> LEDGER; sleep 0.1; '
        'echo "end $SCHEDCTL_SCHEDULED_FOR" >> LEDGER',
        concurrency=Concurrency.FORBID,
    )
    instants = env.queue(job, 6)
    a, b = env.worker("wA"), env.worker("wB")
    wait_for("all six", lambda: all_in(env, {"succeeded"}, 6))
    assert stop(a) == 0 and stop(b) == 0
    expected = []
    for t in instants:
        iso = t.isoformat().replace("+00:00", "Z")
        expected += [["start", iso], ["end", iso]]
    assert env.ledger_lines() == expected


def test_labels_and_the_environment_contract(env):
    command = "env > LEDGER.$SCHEDCTL_JOB_ID; cat >> LEDGER.$SCHEDCTL_JOB_ID"
    env.queue(
        env.job(
            "here",
            command,
            labels={"host": "a"},
            pass_env=("PASS_ME",),
            stdin="fed\n",
            env={"FROM_JOB": "x y"},
        )
    )
    env.queue(env.job("anywhere", command))
    secret = {"SCHEDCTL_DATABASE_URL": "postgresql://u:secret@db/prod", "PASS_ME": "passed", "LEAK": "1"}
    plain = env.worker("wPlain", env=secret)
    wait_for("the unlabeled run", lambda: env.rows("anywhere")[0]["state"] == "succeeded")
    time.sleep(0.5)
    assert env.rows("here")[0]["state"] == "queued"  # wPlain lacks host=a
    labeled = env.worker("wA", "--label", "host=a", "--label", "rack=7", env=secret)
    wait_for("the labeled run", lambda: env.rows("here")[0]["state"] == "succeeded")
    assert env.rows("here")[0]["worker"] == "wA"
    assert stop(plain) == 0 and stop(labeled) == 0
    text = (env.tmp / "ledger.here").read_text()
    *lines, last = text.splitlines()
    job_env = dict(line.split("=", 1) for line in lines if "=" in line)
    assert last == "fed"
    assert "SCHEDCTL_DATABASE_URL" not in job_env and "LEAK" not in job_env
    assert job_env["PASS_ME"] == "passed" and job_env["FROM_JOB"] == "x y"
    assert job_env["SCHEDCTL_JOB_ID"] == "here" and job_env["SCHEDCTL_ATTEMPT"] == "1"
    assert job_env["SCHEDCTL_SCHEDULED_FOR"].endswith("Z") and job_env["PATH"] == "/usr/bin:/bin"


class FlakyStore:
    """The real store, with an outage switch: while ``down`` is set every transaction fails as unreachable."""

    def __init__(self, real: Any) -> None:
        self.real, self.dialect, self.url, self.sqlite_file = real, real.dialect, real.url, real.sqlite_file
        self.down = threading.Event()

    @contextlib.contextmanager
    def begin(self) -> Iterator[Any]:
        if self.down.is_set():
            raise StoreUnavailable("injected outage")
        with self.real.begin() as conn:
            yield conn


def test_a_database_outage_keeps_the_job_running_and_the_rule_applies_when_it_returns(env):
    """w1 loses the database mid-run; its job keeps going. w2 (which can still reach it) takes the run over
    after the stale window; when the database comes back, w1 finds the run gone and stops its copy."""
    env.queue(env.job("steps", STEP_JOB.replace("STEPS", "20")))
    flaky = FlakyStore(env.store)
    settings = dict(poll_interval=0.1, heartbeat_interval=0.3, stale_after=2.0, successful_history=100)
    w1 = Worker(flaky, WorkerSettings(identity="w1", **settings), SystemClock())
    stop1, kill1 = threading.Event(), threading.Event()
    t1 = threading.Thread(target=w1.run, args=(stop1, kill1))
    t1.start()
    try:
        wait_for("w1 to run it", lambda: env.ledger_lines("step"))
        flaky.down.set()
        w2 = Worker(env.store, WorkerSettings(identity="w2", **settings), SystemClock())
        stop2, kill2 = threading.Event(), threading.Event()
        t2 = threading.Thread(target=w2.run, args=(stop2, kill2))
        t2.start()
        wait_for("the takeover", lambda: env.rows()[0]["worker"] == "w2", timeout=15)
        assert int([ln for ln in env.ledger_lines("step") if ln[3] == "1"][-1][5]) >= 3  # w1's copy ran on
        assert not env.ledger_lines("term")
        flaky.down.clear()
        wait_for("w1 to stop its copy", lambda: [ln for ln in env.ledger_lines("term") if ln[3] == "1"])
        wait_for("w2 to finish", lambda: env.rows()[0]["state"] == "succeeded", timeout=15)
        row = env.rows()[0]
        assert (row["worker"], row["attempt"], row["checkpoint"]) == ("w2", 2, 20)
    finally:
        stop1.set()
        flaky.down.clear()
        t1.join(15)
        if "stop2" in locals():
            stop2.set()
            t2.join(15)
