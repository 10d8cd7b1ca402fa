"""The minute, end to end (issue 27, goal 2): N jobs due on one minute boundary, from the boundary to each start.

    python bench/minute.py [--jobs 10000] [--methods bare,sqlite,postgresql,cron] [--db URL] [--slots 32]
                           [--pg-slots 16] [--rounds 1] [--lead 25]

Every job's command is the shell line ``echo jN $(date +%s.%N) >> FILE``, so start times come from the jobs'
own side: the instant ``date`` ran, minus the minute boundary B. Each method runs on its own boundary, one after
another; its daemons start ``--lead`` seconds (at least) before B, and the script waits until they are ready
(lease held, every job seen, every worker registered) so that start-up is not counted. Methods:

- bare:       ``xargs -P SLOTS -d '\\n' -n 1 sh -c < LINES`` started at B: the same commands with nothing but
              a spawn loop in front of them (the anchor, 1.00x);
- sqlite:     one ``schedctl serve --role all --slots SLOTS`` on a temporary SQLite file;
- postgresql: one ``serve --role scheduler`` and two ``serve --role worker --slots PG_SLOTS`` on a private
              database created in the server of ``--db`` and dropped at the end (its NOTIFY channel is private);
- cron:       Debian's cron (``cron -f -L 0``: no syslog) in a private mount namespace.

Jobs are ``M H * * *`` (the minute of day of B, UTC), ``catch_up = "skip"``: one tick each, cron's resolution.

The cron anchor needs root, util-linux ``unshare`` and ``apt-get``. The script runs ``apt-get download cron``
into ``--cron-cache`` (default /tmp/schedctl-bench-cron; kept for the next run), ``dpkg -x``'s it there, and
runs ``unshare -m --propagation private`` with tmpfs mounted over /etc/cron.d, /var/spool (holding an empty
cron/crontabs) and /run (cron's pid file), then writes the jobs to the namespace's /etc/cron.d/minute and execs
``cron -f``. The host's crontabs and /etc/cron.d are never read or written: the mounts exist only inside the
namespace and vanish with it. Without root or unshare the cron row is skipped with the reason.

Figures, per method (seconds after B):

- p50 / p99 / last: of the N start instants read from the file (``first`` too);
- dup / miss: jobs whose line appears more than once / never within ``--timeout``; every job must start once;
- CPU: user + system CPU seconds from B - 1 s until the last start + 3 s: ``daemon`` of the daemon processes
  themselves (xargs, the serve processes, cron), ``all`` with their descendants (the jobs, the workers'
  watchdogs, cron's per-job children); ``db`` the PostgreSQL backends serving the private database
  (pg_stat_activity's pids at B; ones that connect later are not counted);
- RSS: the sum of the daemon processes' peak RSS (VmHWM; for bare, the largest process of xargs' tree);
- ratio: last (and p99) over bare's in the same round.

Goals (issue 27, goal 2, 2 cores): last start <= 1.3x bare on SQLite, <= 1.5x on PostgreSQL; schedctl never
slower than cron on p50, p99 or last. Exit status 1 when any method started a job twice or never; 2 when
every job started once but a goal was missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import launch  # noqa: E402  (one launcher for the suite and the benchmarks)

DEFAULT_PG = os.environ.get("SCHEDCTL_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
BIN = Path(sys.executable).parent / "schedctl"
SCHEDCTL = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "schedctl"]
CLK_TCK = os.sysconf("SC_CLK_TCK")
GOAL = {"sqlite": 1.3, "postgresql": 1.5}
SETTLE = 3.0  # after the last start: a duplicate would show up by then, and the last outcomes are recorded


# -- the jobs ------------------------------------------------------------------------------------------------
def command(i: int, out: Path) -> str:
    return f"echo j{i} $(date +%s.%N) >> {out}"


def write_toml(path: Path, count: int, boundary: float, out: Path) -> None:
    at = datetime.fromtimestamp(boundary, UTC)
    path.write_text(
        "".join(
            f'[jobs.j{i}]\nschedule = "{at.minute} {at.hour} * * *"\ntimezone = "UTC"\ncatch_up = "skip"\n'
            f'command = "{command(i, out)}"\n\n'
            for i in range(count)
        )
    )


def cron_lines(count: int, boundary: float, out: Path) -> str:
    at = datetime.fromtimestamp(boundary, UTC)
    # `%` ends a cron command (the rest is stdin) unless escaped.
    return "".join(
        f"{at.minute} {at.hour} * * * root {command(i, out).replace('%', chr(92) + '%')}\n"
        for i in range(count)
    )


# -- processes -----------------------------------------------------------------------------------------------


def stat_fields(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return kids
    for task in tasks:
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
    return kids


def tree(pids: list[int]) -> list[int]:
    seen, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.append(pid)
            todo += children(pid)
    return seen


@dataclass
class Cpu:
    user: float = 0.0
    system: float = 0.0

    @property
    def total(self) -> float:
        return self.user + self.system

    def __sub__(self, other: Cpu) -> Cpu:
        return Cpu(self.user - other.user, self.system - other.system)


def cpu_of(pids: list[int], descendants: bool) -> Cpu:
    """Own CPU of ``pids``; ``descendants``: also every live descendant's, and what reaped ones left in their
    parents' cutime/cstime (a job, reaped by its worker, is counted there once it ends)."""
    out = Cpu()
    for pid in tree(pids) if descendants else pids:
        f = stat_fields(pid)
        if f is None:
            continue
        out.user += int(f[11]) / CLK_TCK
        out.system += int(f[12]) / CLK_TCK
        if descendants:
            out.user += int(f[13]) / CLK_TCK
            out.system += int(f[14]) / CLK_TCK
    return out


def hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def sleep_until(t: float) -> None:
    while (left := t - time.time()) > 0:
        time.sleep(min(left, 0.5) if left > 0.6 else left)


def next_boundary(lead: float) -> float:
    return (int(time.time() + lead) // 60 + 1) * 60.0


# -- the file ------------------------------------------------------------------------------------------------
class Ledger:
    """Counts lines as they are appended (one read of the new bytes a poll), then parses them once at the end."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.lines = path, 0, 0

    def poll(self) -> int:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return 0
        complete = data.rfind(b"\n") + 1
        self.offset += complete
        self.lines += data.count(b"\n", 0, complete)
        return self.lines

    def wait(self, count: int, deadline: float) -> bool:
        while self.poll() < count:
            if time.time() > deadline:
                return False
            time.sleep(0.2)
        return True

    def starts(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                job, at = line.split()
                out.setdefault(job, []).append(float(at))
        return out


@dataclass
class Result:
    method: str
    what: str
    starts: list[float] = field(default_factory=list)  # seconds after the boundary, the first of each job
    dup: int = 0
    miss: int = 0
    cpu_daemon: Cpu = field(default_factory=Cpu)
    cpu_all: Cpu = field(default_factory=Cpu)
    cpu_db: Cpu | None = None
    rss_mb: float = 0.0
    ready_s: float = float("nan")  # start of the daemons -> ready
    lead_s: float = float("nan")  # ready -> the boundary
    load: float = 0.0
    skipped: str | None = None

    def pct(self, q: float) -> float:
        if not self.starts:
            return float("nan")
        ordered = sorted(self.starts)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def collect(result: Result, ledger: Ledger, count: int, boundary: float, timeout: float) -> float:
    """Wait for every start (bounded), then the settle; fill starts, dup, miss. Returns the end of the window."""
    ledger.wait(count, boundary + timeout)
    end = time.time() + SETTLE
    sleep_until(end)
    starts = ledger.starts()
    result.starts = [min(v) - boundary for v in starts.values()]
    result.dup = sum(len(v) - 1 for v in starts.values())
    result.miss = sum(1 for i in range(count) if f"j{i}" not in starts)
    return end


# -- methods -------------------------------------------------------------------------------------------------
def run_bare(args: argparse.Namespace, tmp: Path) -> Result:
    result = Result("bare", f"xargs -P {args.slots} sh -c")
    out = tmp / "bare.out"
    lines = tmp / "bare.lines"
    lines.write_text("".join(command(i, out) + "\n" for i in range(args.jobs)))
    boundary = next_boundary(3.0)
    result.load = os.getloadavg()[0]
    with open(lines, "rb") as stdin:
        sleep_until(boundary)
        proc = subprocess.Popen(
            ["xargs", "-P", str(args.slots), "-d", "\\n", "-n", "1", "sh", "-c"], stdin=stdin, cwd=tmp
        )
    try:
        ledger = Ledger(out)
        collect(result, ledger, args.jobs, boundary, args.timeout)
        # wait4 gives the CPU of xargs and of all it reaped (the shells, which reaped their `date`); not
        # Popen.wait, which would reap it without the rusage.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                result.cpu_all = Cpu(usage.ru_utime, usage.ru_stime)
                result.rss_mb = usage.ru_maxrss / 1024
                break
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    result.cpu_daemon = Cpu(float("nan"), float("nan"))
    return result


class PgDatabase:
    """A private database (CREATE/DROP DATABASE ... WITH (FORCE)) in the server of ``url``."""

    def __init__(self, url: str) -> None:
        from sqlalchemy import create_engine, make_url, text

        from schedctl.store import parse_url

        self.name = f"minute_{uuid.uuid4().hex[:8]}"
        self.text = text
        self.admin = create_engine(parse_url(url), isolation_level="AUTOCOMMIT")
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{self.name}"'))
        self.url = make_url(url).set(database=self.name).render_as_string(hide_password=False)

    def backend_pids(self) -> list[int]:
        with self.admin.connect() as conn:
            rows = conn.execute(
                self.text("SELECT pid FROM pg_stat_activity WHERE datname = :d"), {"d": self.name}
            )
            return [int(r[0]) for r in rows]

    def drop(self) -> None:
        with self.admin.connect() as conn:
            conn.execute(self.text(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))
        self.admin.dispose()


def ready(url: str, count: int, workers: int) -> bool:
    """The leader holds the lease and has recorded every job's first sight; every worker has registered."""
    from sqlalchemy import create_engine, func, select
    from sqlalchemy.exc import SQLAlchemyError

    from schedctl.store import parse_url
    from schedctl.store.schema import job_state, scheduler_lease
    from schedctl.store.schema import workers as workers_table

    engine = create_engine(parse_url(url))
    try:
        with engine.connect() as conn:
            leases = conn.execute(select(func.count()).select_from(scheduler_lease)).scalar_one()
            seen = conn.execute(select(func.count()).select_from(job_state)).scalar_one()
            live = conn.execute(
                select(func.count())
                .select_from(workers_table)
                .where(workers_table.c.stopped_at.is_(None), workers_table.c.role != "scheduler")
            ).scalar_one()
        return leases >= 1 and seen >= count and live >= workers
    except SQLAlchemyError:  # not migrated yet, or SQLite busy: not ready
        return False
    finally:
        engine.dispose()


def run_schedctl(args: argparse.Namespace, tmp: Path, method: str) -> Result:
    out = tmp / f"{method}.out"
    jobs = tmp / f"{method}.toml"
    log = tmp / f"{method}.log"
    boundary = next_boundary(args.lead)
    write_toml(jobs, args.jobs, boundary, out)
    db: PgDatabase | None = None
    procs: list[subprocess.Popen[bytes]] = []
    quiet = ["--log-level", "warning"]  # info logs a line per run; cron logs none either (-L 0)
    try:
        if method == "sqlite":
            result = Result(method, f"serve --role all --slots {args.slots}, SQLite")
            url = f"sqlite:///{tmp / 'minute.db'}"
            started = time.time()
            procs.append(
                launch.serve(
                    "--role",
                    "all",
                    "--db",
                    url,
                    "--jobs",
                    str(jobs),
                    "--migrate",
                    "--slots",
                    str(args.slots),
                    *quiet,
                    log=log,
                    append=True,
                    program=SCHEDCTL,
                    cwd=tmp,
                )  # fmt: skip
            )
            workers = 1
        else:
            result = Result(
                method, f"serve: 1 scheduler + 2 workers --slots {args.pg_slots} each, PostgreSQL"
            )
            db = PgDatabase(args.db)
            url = db.url
            from schedctl.store import open_store
            from schedctl.store.migrate import upgrade

            store = open_store(url)
            upgrade(store)
            store.dispose()
            started = time.time()
            procs.append(
                launch.serve(
                    "--role",
                    "scheduler",
                    "--db",
                    url,
                    "--jobs",
                    str(jobs),
                    *quiet,
                    log=log,
                    append=True,
                    program=SCHEDCTL,
                    cwd=tmp,
                )  # fmt: skip
            )
            for i in range(2):
                procs.append(
                    launch.serve(
                        "--role",
                        "worker",
                        "--db",
                        url,
                        "--slots",
                        str(args.pg_slots),
                        "--identity",
                        f"minute-worker-{i}",
                        *quiet,
                        log=log,
                        append=True,
                        program=SCHEDCTL,
                        cwd=tmp,
                    )  # fmt: skip
                )
            workers = 2
        while not ready(url, args.jobs, workers):
            if any(p.poll() is not None for p in procs):
                raise SystemExit(f"{method}: a serve process exited early:\n{log.read_text()[-3000:]}")
            if time.time() > boundary - 2:
                print(f"  {method}: WARNING not ready 2 s before the boundary; measured anyway", flush=True)
                break
            time.sleep(0.5)
        result.ready_s = time.time() - started
        result.lead_s = boundary - time.time()
        result.load = os.getloadavg()[0]
        pids = [p.pid for p in procs]
        sleep_until(boundary - 1)
        backends = db.backend_pids() if db else []
        d0, a0, b0 = cpu_of(pids, False), cpu_of(pids, True), cpu_of(backends, False)
        collect(result, Ledger(out), args.jobs, boundary, args.timeout)
        result.cpu_daemon = cpu_of(pids, False) - d0
        result.cpu_all = cpu_of(pids, True) - a0
        if db:
            result.cpu_db = cpu_of(backends, False) - b0
        result.rss_mb = sum(hwm_mb(p) for p in pids)
        dead = [p.args for p in procs if p.poll() is not None]
        if dead:
            print(f"  {method}: WARNING a serve process died during the minute: {dead}", flush=True)
    finally:
        launch.stop(procs)
        if db:
            db.drop()
    return result


def cron_binary(cache: Path) -> tuple[Path | None, str]:
    """cron from Debian's package, downloaded once into ``cache``; (None, why) when that cannot be done."""
    binary = cache / "root" / "usr" / "sbin" / "cron"
    if binary.exists():
        return binary, ""
    if os.geteuid() != 0:
        return None, "needs root (a mount namespace)"
    for tool in ("apt-get", "dpkg", "unshare"):
        if shutil.which(tool) is None:
            return None, f"no {tool}"
    cache.mkdir(parents=True, exist_ok=True)
    debs = sorted(cache.glob("cron_*.deb"))
    if not debs:
        got = subprocess.run(
            ["apt-get", "download", "cron"], cwd=cache, capture_output=True, text=True, timeout=300
        )
        debs = sorted(cache.glob("cron_*.deb"))
        if not debs:
            return None, f"apt-get download cron failed: {got.stderr.strip()[-300:]}"
    subprocess.run(["dpkg", "-x", str(debs[-1]), str(cache / "root")], check=True, timeout=120)
    return (binary, "") if binary.exists() else (None, "no usr/sbin/cron in the package")


# Runs as root inside `unshare -m`: every mount below is the namespace's own.
CRON_NS = """
set -e
mount -t tmpfs -o mode=0755 minute /etc/cron.d
mount -t tmpfs -o mode=0755 minute /var/spool
mkdir -p /var/spool/cron/crontabs
chmod 1730 /var/spool/cron/crontabs
mount -t tmpfs -o mode=0755 minute /run
cp "$1" /etc/cron.d/minute
chmod 0644 /etc/cron.d/minute
exec "$2" -f -L 0
"""


def run_cron(args: argparse.Namespace, tmp: Path) -> Result:
    result = Result("cron", "Debian cron (cron -f, private mount namespace)")
    binary, why = cron_binary(args.cron_cache)
    if binary is None:
        result.skipped = why
        return result
    version = next(iter(sorted(args.cron_cache.glob("cron_*.deb"))), Path("cron")).name
    result.what = f"Debian {version.removesuffix('.deb').replace('_', ' ')} (cron -f, private mount ns)"
    out = tmp / "cron.out"
    table = tmp / "cron.table"
    boundary = next_boundary(args.lead)
    table.write_text(cron_lines(args.jobs, boundary, out))
    log = tmp / "cron.log"
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TZ": "UTC", "LANG": "C"}
    started = time.time()
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", CRON_NS, "sh", str(table), str(binary)],
            stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=tmp,
        )  # fmt: skip
    try:
        # cron has read its tables once its pid is cron's (the shell exec'd it) and it sleeps.
        deadline = boundary - 2
        while time.time() < deadline:
            if proc.poll() is not None:
                result.skipped = f"cron exited {proc.returncode}: {log.read_text()[-500:]}"
                return result
            try:
                comm = Path(f"/proc/{proc.pid}/comm").read_text().strip()
            except OSError:
                comm = ""
            if comm == "cron":
                break
            time.sleep(0.2)
        time.sleep(1.0)
        result.ready_s = time.time() - started
        result.lead_s = boundary - time.time()
        result.load = os.getloadavg()[0]
        sleep_until(boundary - 1)
        d0, a0 = cpu_of([proc.pid], False), cpu_of([proc.pid], True)
        collect(result, Ledger(out), args.jobs, boundary, args.timeout)
        result.cpu_daemon = cpu_of([proc.pid], False) - d0
        result.cpu_all = cpu_of([proc.pid], True) - a0
        result.rss_mb = hwm_mb(proc.pid)
    finally:
        launch.stop([proc])
    return result


# -- report --------------------------------------------------------------------------------------------------
def fmt(value: float, spec: str = "6.2f") -> str:
    return "–".rjust(len(format(0.0, spec))) if value != value else format(value, spec)


def report(results: list[Result]) -> tuple[bool, bool]:
    """Print one round's table; (every job started once, every goal met)."""
    by = {r.method: r for r in results}
    bare = by.get("bare")
    cron = by.get("cron")
    once, met = True, True
    print(
        f"  {'method':<11} {'p50':>6} {'p99':>6} {'last':>6} {'first':>6} {'dup':>4} {'miss':>5} "
        f"{'CPU daemon u+s':>15} {'CPU all u+s':>16} {'db':>5} {'RSS MB':>7} {'last/bare':>9} "
        f"{'p99/bare':>8} {'load':>5} {'ready':>6}"
    )
    for r in results:
        if r.skipped:
            print(f"  {r.method:<11} skipped: {r.skipped}")
            continue
        once &= r.dup == 0 and r.miss == 0
        last, p99 = r.pct(1.0), r.pct(0.99)
        ratio = last / bare.pct(1.0) if bare and bare.starts else float("nan")
        ratio99 = p99 / bare.pct(0.99) if bare and bare.starts else float("nan")
        daemon = f"{fmt(r.cpu_daemon.user, '.2f')}+{fmt(r.cpu_daemon.system, '.2f')}"
        everything = f"{r.cpu_all.user:.2f}+{r.cpu_all.system:.2f}"
        db = fmt(r.cpu_db.total, "5.2f") if r.cpu_db else fmt(float("nan"), "5.2f")
        print(
            f"  {r.method:<11} {fmt(r.pct(0.5))} {fmt(p99)} {fmt(last)} {fmt(r.pct(0.0))} {r.dup:>4} "
            f"{r.miss:>5} {daemon:>15} {everything:>16} {db} {r.rss_mb:>7.1f} {ratio:>8.2f}x "
            f"{ratio99:>7.2f}x {r.load:>5.2f} {fmt(r.ready_s, '6.1f')}"
        )
    for r in results:
        if r.skipped or r.method not in GOAL:
            continue
        verdicts = []
        if bare and bare.starts:
            ratio = r.pct(1.0) / bare.pct(1.0)
            ok = ratio <= GOAL[r.method]
            met &= ok
            verdicts.append(
                f"last {ratio:.2f}x bare (goal <= {GOAL[r.method]}x): {'met' if ok else 'MISSED'}"
            )
        if cron and cron.starts and not cron.skipped:
            slower = [
                name for name, q in (("p50", 0.5), ("p99", 0.99), ("last", 1.0)) if r.pct(q) > cron.pct(q)
            ]
            met &= not slower
            verdicts.append(
                "never slower than cron: " + ("met" if not slower else f"MISSED on {', '.join(slower)}")
            )
        if r.dup or r.miss:
            verdicts.append(f"{r.dup} duplicates, {r.miss} misses: FAILED")
        print(f"  {r.method}: " + "; ".join(verdicts))
    for r in results:
        if not r.skipped and (r.dup or r.miss):
            print(f"  {r.method}: {r.dup} duplicate starts, {r.miss} jobs never started")
    return once, met


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10000, help="jobs due on the boundary (default 10000)")
    parser.add_argument(
        "--methods", default="bare,sqlite,postgresql,cron", help="comma-separated, run in this order"
    )
    parser.add_argument("--db", default=DEFAULT_PG, help="PostgreSQL server (a private database is made)")
    parser.add_argument("--slots", type=int, default=32, help="xargs -P and the SQLite serve's --slots")
    parser.add_argument("--pg-slots", type=int, default=16, help="--slots of each of the two PG workers")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the whole comparison")
    parser.add_argument("--lead", type=float, default=25.0, help="daemons start at least this long before B")
    parser.add_argument("--timeout", type=float, default=180.0, help="a job not started by B + this: a miss")
    parser.add_argument("--cron-cache", type=Path, default=Path("/tmp/schedctl-bench-cron"))
    args = parser.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = set(methods) - {"bare", "sqlite", "postgresql", "cron"}
    if unknown:
        parser.error(f"unknown methods: {', '.join(sorted(unknown))}")
    print(
        f"the minute: {args.jobs} jobs on one boundary, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}"
    )
    print(
        "seconds after the boundary; CPU in seconds (user+system) from B-1 s to the last start + 3 s;"
        " ready = start -> ready (s)"
    )
    all_once, all_met = True, True
    for n in range(1, args.rounds + 1):
        print(f"\nround {n}, {datetime.now(UTC):%H:%M:%S} UTC, load {os.getloadavg()}", flush=True)
        results = []
        with tempfile.TemporaryDirectory(prefix="schedctl-minute-") as name:
            tmp = Path(name)
            for method in methods:
                if method == "bare":
                    r = run_bare(args, tmp)
                elif method == "cron":
                    r = run_cron(args, tmp)
                else:
                    r = run_schedctl(args, tmp, method)
                results.append(r)
                print(
                    f"  {method} done at {datetime.now(UTC):%H:%M:%S}: last {fmt(r.pct(1.0), '.2f')} s"
                    + (f" (skipped: {r.skipped})" if r.skipped else ""),
                    flush=True,
                )
        for r in results:
            if not r.skipped:
                print(f"  {r.method}: {r.what}")
        once, met = report(results)
        all_once &= once
        all_met &= met
    print(f"\nload average at the end: {os.getloadavg()}")
    return 1 if not all_once else 0 if all_met else 2


if __name__ == "__main__":
    sys.exit(main())
