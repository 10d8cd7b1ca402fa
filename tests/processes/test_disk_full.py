"""Issue 26, disk full: `serve --role all` on SQLite in a small tmpfs, and on a private PostgreSQL whose data
folder is one, that fills up and empties again.

While the space is gone: one log line per kind of failure, then backoff (no hot loop, no traceback), and
``/readyz`` not ready. When it returns: recovery without a restart, and every tick of a ``catch_up = "all"``
job run once, none skipped, none twice.

The tmpfs is mounted in a private mount namespace (``unshare -m``) and filled from outside through
``/proc/PID/root``, so the host's file systems are never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from launch import SCHEDCTL, serve

pytestmark = [
    pytest.mark.processes,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None,
        reason="mounting a tmpfs in a namespace needs root",
    ),
]

JOBS_ON_POSTGRES = 20
FULL_FOR = 8.0  # seconds the disk stays full: several of the scheduler's and the worker's retries


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def _until(check: Callable[[], bool], what: str, log: Path, timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{log.read_text()[-4000:]}"
        time.sleep(0.2)


def _ticks(ledger: Path) -> list[datetime]:
    if not ledger.exists():
        return []
    return [datetime.fromisoformat(line.replace("Z", "+00:00")) for line in ledger.read_text().split()]


def _job_ticks(ledger: Path) -> list[tuple[str, datetime]]:
    if not ledger.exists():
        return []
    out = []
    for line in ledger.read_text().splitlines():
        job, tick = line.split()
        out.append((job, datetime.fromisoformat(tick.replace("Z", "+00:00"))))
    return out


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_sqlite_on_a_full_disk_backs_off_is_unready_and_recovers_every_tick(tmp_path: Path) -> None:
    disk, ledger, log = tmp_path / "disk", tmp_path / "ledger", tmp_path / "serve.log"
    disk.mkdir()
    (tmp_path / "jobs.toml").write_text(
        f"""\
[jobs.tick]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "all"
max_catch_up = 1000
command = "echo $SCHEDCTL_SCHEDULED_FOR >> {ledger}"
"""
    )
    port = _free_port()
    # unshare execs sh, which execs schedctl: one pid, so the test's signals reach it.
    script = 'mount -t tmpfs -o size=4m tmpfs "$0" && exec "$@"'
    proc = serve(
        "--migrate", "--db", f"sqlite:///{disk}/schedctl.db", "--jobs", "jobs.toml", "--log-format", "json",
        "--metrics-port", str(port),
        log=log, stdout=subprocess.DEVNULL, cwd=tmp_path,
        program=("unshare", "-m", "sh", "-c", script, str(disk), *SCHEDCTL),
    )  # fmt: skip
    inside = Path(f"/proc/{proc.pid}/root") / str(disk).lstrip("/")
    try:
        _until(lambda: len(_ticks(ledger)) >= 3, "the first runs", log)
        assert _ready(port)[0] == 200
        cpu_before = _cpu_seconds(proc.pid)
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={inside / 'fill'}", "bs=64k"],
            capture_output=True,
            timeout=30,
            check=False,
        )
        filled = time.monotonic()
        assert os.statvfs(inside).f_bavail == 0
        unready: list[str] = []

        def not_ready() -> bool:
            status, body = _ready(port)
            if status == 503:
                unready.append(body.strip())
            return bool(unready)

        _until(not_ready, "/readyz to say the writes fail", log, timeout=FULL_FOR + 10)
        assert unready[0].startswith("database writes failing: "), unready
        assert "database or disk is full" in unready[0], unready
        time.sleep(max(0.0, FULL_FOR - (time.monotonic() - filled)))
        spent = _cpu_seconds(proc.pid) - cpu_before
        full_for = time.monotonic() - filled
        (inside / "fill").unlink()
        freed = datetime.now().astimezone()
        # Backoff, not a hot loop: a process retrying flat out would burn the whole window.
        assert spent < 0.3 * full_for, f"{spent:.2f} s of CPU in {full_for:.1f} s full"
        _until(lambda: _ready(port)[0] == 200, "/readyz to recover", log)
        recovered = freed + timedelta(seconds=4)
        _until(
            lambda: bool(_ticks(ledger)) and max(_ticks(ledger)) >= recovered,
            "ticks after the disk came back",
            log,
        )
        # The database is only in the worker's namespace: ask schedctl there (SQLite would resolve the
        # /proc/PID/root link back to the host's folder).
        skipped = subprocess.run(
            ["nsenter", "-t", str(proc.pid), "-m", *SCHEDCTL, "runs", "--db", f"sqlite:///{disk}/schedctl.db",
             "--state", "skipped", "--limit", "1000", "--json"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        assert json.loads(skipped.stdout) == [], skipped.stdout
        assert proc.poll() is None, "recovered without a restart"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    ticks = _ticks(ledger)
    assert len(ticks) == len(set(ticks)), "a tick ran twice"
    first, last = min(ticks), max(ticks)
    expected = int((last - first).total_seconds()) + 1
    missing = sorted({first + timedelta(seconds=i) for i in range(expected)} - set(ticks))
    assert missing == [], f"ticks that never ran: {missing}"
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    kinds = [e["event"] for e in events if e.get("level") in ("warning", "error")]
    for kind in set(kinds):  # one line per kind of failure for the whole outage, not one per retry
        assert kinds.count(kind) == 1, kinds
    assert "Traceback" not in log.read_text()


def _pg_bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    return candidates[-1] if candidates else None


class _PostgresOnTmpfs:
    """A throwaway PostgreSQL, run as `postgres`, whose data folder is a tmpfs that only its own mount
    namespace sees: a holder process keeps the namespace; the servers are started into it with nsenter."""

    def __init__(self, root: Path, size: str) -> None:
        import pwd

        bindir = _pg_bindir()
        assert bindir is not None
        self.bindir, self.root = bindir, root
        self.data, self.sock, self.log = root / "pgdata", root / "sock", root / "postgres.log"
        self.port = _free_port()
        user = pwd.getpwnam("postgres")
        for path in (self.data, self.sock):
            path.mkdir()
            os.chown(path, user.pw_uid, user.pw_gid)
        os.chown(root, user.pw_uid, user.pw_gid)
        mount = (
            f'mount -t tmpfs -o size={size},mode=0700,uid={user.pw_uid},gid={user.pw_gid} tmpfs "{self.data}"'
        )
        self.holder = subprocess.Popen(
            [
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                f"{mount} && echo mounted && exec sleep 3600",
            ],
            stdout=subprocess.PIPE,
        )
        assert self.holder.stdout is not None and self.holder.stdout.readline().strip() == b"mounted"
        self.inside = Path(f"/proc/{self.holder.pid}/root") / str(self.data).lstrip("/")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.start()

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess[bytes]:
        argv = ["nsenter", "-t", str(self.holder.pid), "-m", "setpriv", "--reuid=postgres", "--regid=postgres",
                "--init-groups", str(self.bindir / tool), *args]  # fmt: skip
        return subprocess.run(argv, capture_output=True, timeout=120, check=False)

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off"
        done = self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", opts, "start"
        )
        assert done.returncode == 0, done.stderr.decode() + self.log.read_text()[-2000:]

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status").returncode == 0

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def close(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        self.holder.kill()
        self.holder.wait(timeout=30)
        if self.holder.stdout is not None:
            self.holder.stdout.close()


@pytest.mark.skipif(_pg_bindir() is None, reason="needs PostgreSQL's server binaries (initdb, pg_ctl)")
def test_postgresql_on_a_full_disk_backs_off_is_unready_and_recovers_every_tick() -> None:
    """The same outage with the database's data folder full. PostgreSQL refuses to extend a table, or stops
    when it cannot write its WAL; the operator frees space (and starts it again if it stopped): schedctl
    carries on without a restart and runs every tick of the outage once."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="schedctl-pgfull-"))  # not tmp_path: 0700, and postgres must enter
    root.chmod(0o755)
    ledger, log = root / "ledger", root / "serve.log"
    pg = _PostgresOnTmpfs(root, "96m")
    proc = None
    try:
        # Twenty per-second jobs: enough rows that a new page of job_runs is due every second or two, which is
        # when PostgreSQL meets the full disk (a few rows fit in the pages it has).
        (root / "jobs.toml").write_text(
            "".join(
                f'[jobs.t{i:02d}]\nschedule = "* * * * * *"\ntimezone = "UTC"\ncatch_up = "all"\n'
                f'max_catch_up = 1000\ncommand = "echo t{i:02d} $SCHEDCTL_SCHEDULED_FOR >> {ledger}"\n\n'
                for i in range(JOBS_ON_POSTGRES)
            )
        )
        port = _free_port()
        proc = serve(
            "--migrate", "--db", pg.url, "--jobs", "jobs.toml", "--log-format", "json", "--metrics-port", str(port),
            log=log, stdout=subprocess.DEVNULL, cwd=root,
        )  # fmt: skip
        _until(lambda: len(_job_ticks(ledger)) >= 3 * JOBS_ON_POSTGRES, "the first runs", log)
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={pg.inside / 'fill'}", "bs=1M"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert os.statvfs(pg.inside).f_bavail == 0
        _until(lambda: _ready(port)[0] == 503, "/readyz to say the database is not usable", log, timeout=30)
        time.sleep(FULL_FOR)
        (pg.inside / "fill").unlink()
        freed = datetime.now().astimezone()
        stopped = not pg.running()
        if stopped:  # it could not write its WAL and shut down: what systemd or the operator does next
            pg.start()
        _until(
            lambda: _ready(port)[0] == 200,
            f"/readyz to recover (server restarted: {stopped})",
            log,
            timeout=60,
        )
        recovered = freed + timedelta(seconds=4)
        _until(
            lambda: max(t for _, t in _job_ticks(ledger)) >= recovered,
            "ticks after the disk came back",
            log,
            timeout=60,
        )
        assert proc.poll() is None, "recovered without a restart of schedctl"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        pg.close()
    runs, said = _job_ticks(ledger), log.read_text()
    shutil.rmtree(root, ignore_errors=True)
    assert len(runs) == len(set(runs)), "a tick ran twice"
    first, last = min(t for _, t in runs), max(t for _, t in runs)
    span = int((last - first).total_seconds()) + 1
    expected = {
        (f"t{i:02d}", first + timedelta(seconds=s)) for i in range(JOBS_ON_POSTGRES) for s in range(span)
    }
    # The last second may be mid-dispatch at the stop: judge the ticks up to the one before it.
    missing = sorted(k for k in expected - set(runs) if k[1] < last)
    assert missing == [], f"ticks that never ran: {missing[:20]} ({len(missing)})"
    assert "Traceback" not in said
    # The lease row's in-place UPDATE goes through while inserts fail: that must not read as recovered each
    # time (it did: "reachable again", "became leader", "unavailable", "lost the lease" every half second).
    events = [json.loads(line) for line in said.splitlines() if line.startswith("{")]
    kinds = [e["event"] for e in events if e.get("level") in ("warning", "error")]
    for kind in set(kinds):
        assert kinds.count(kind) == 1, kinds
    assert [e["event"] for e in events].count("db_available") == 1
