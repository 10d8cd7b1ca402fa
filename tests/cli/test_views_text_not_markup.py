"""Issue 24: data a job user controls is printed as text, never read as rich markup, and error lines cut it.

A job user can write a run's output, its error, and (through any writer to the database) job ids, worker
labels and the lease holder. Each view is run twice, in a pipe and on a terminal (rich's own code path), on
rows holding markup and a terminal escape: the brackets come out literally, the escape escaped.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import factories
import pytest

from schedctl.cli import main
from schedctl.jobs.job import CatchUp, Job
from schedctl.store import open_store
from schedctl.store import workers as registry
from schedctl.store.migrate import upgrade

MARKUP = "[/red][bold]x[/bold][link=http://evil]y[/link]"
TITLE = "\x1b]0;t\x07"  # sets the terminal's title when printed raw
EVIL = MARKUP + TITLE
SHOWN = MARKUP + "\\x1b]0;t\\x07"  # how every view must print EVIL
JOB_ID = f"j{EVIL}"
WORKER = f"w{EVIL}"

JOBS = """\
[jobs.plain]
schedule = "0 1 * * *"
timezone = "UTC"
catch_up = "skip"
command = "echo [/red] [bold]x[/bold] [link=http://evil]y[/link] \\u001b]0;t\\u0007"
"""


class Stream(io.StringIO):
    """stdout or stderr, a terminal or a pipe as rich and click see it."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def schedctl(monkeypatch: pytest.MonkeyPatch, *args: str, tty: bool) -> tuple[int, str, str]:
    """``schedctl ARGS`` through main(), so exit codes and error lines are the real ones; an exception that
    escapes main() (rich's MarkupError) fails the test with its traceback."""
    out, err = Stream(tty), Stream(tty)
    with monkeypatch.context() as m:
        m.setattr(sys, "stdout", out)
        m.setattr(sys, "stderr", err)
        m.setenv("COLUMNS", "400")  # the terminal's width: no cell is folded across lines
        m.setenv("TERM", "xterm-256color")
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def seeded(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A database whose job id, worker, labels, lease holder, run output, errors and skip detail hold EVIL;
    the working directory has no job file, so `status` and `missed` read the jobs from the database."""
    monkeypatch.chdir(tmp_path)
    now = datetime.now(UTC).replace(microsecond=0)
    tick = now.replace(minute=now.minute // 10 * 10, second=0) - timedelta(minutes=30)
    job = Job(JOB_ID, "*/10 * * * *", "UTC", CatchUp.SKIP, "true")
    store = open_store(db_url)
    upgrade(store)
    try:
        with store.begin() as conn:
            factories.add_state(conn, job, now - timedelta(hours=1), tick)
            factories.add_term(
                conn, 1, f"h{EVIL}", now - timedelta(minutes=5), now + timedelta(hours=1), current=True
            )
            failed = {"reason": "exit", "reason_detail": EVIL, "error": EVIL, "output_tail": f"out {EVIL}\n"}
            factories.add_runs(conn, job, [tick - timedelta(minutes=20)], "failed", worker=WORKER, **failed)
            factories.add_runs(conn, job, [tick - timedelta(minutes=10)], "skipped", reason_detail=EVIL)
            factories.add_runs(conn, job, [tick], "running", worker=WORKER)
            me = registry.Registration(
                WORKER, "worker", "h", 1, "0.1.0", "2025b", {"team": EVIL}, 4, 1.0, 60.0
            )
            registry.register(conn, me)
        yield db_url
    finally:
        store.dispose()


def assert_text(code: int, out: str, err: str) -> None:
    assert code == 0, err
    assert "Traceback" not in out + err
    assert SHOWN in out, out  # every bracket kept: nothing was read as markup or coloured inside
    # Neither the title escape nor a hyperlink (OSC 8, what [link=...] becomes) reached the terminal.
    assert "\x1b]" not in out + err and "\x07" not in out + err


VIEWS = {
    "top": ("top", "--once"),
    "workers": ("workers", "-o", "wide"),
    "runs": ("runs", "-o", "wide"),
    "status": ("status",),
    "status JOB": ("status", JOB_ID),
    "leases": ("leases",),
    "missed": ("missed", "--since", "2h"),
    "missed JOB": ("missed", JOB_ID, "--since", "2h"),
}


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "terminal"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_a_view_prints_markup_and_escapes_in_data_as_text(
    view: str, tty: bool, seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_text(*schedctl(monkeypatch, *VIEWS[view], "--db", seeded, tty=tty))


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "terminal"])
def test_top_shows_each_field_a_job_user_controls_as_text(
    tty: bool, seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = schedctl(monkeypatch, "top", "--once", "--db", seeded, tty=tty)
    assert_text(code, out, err)
    for field in (f"j{SHOWN}", f"w{SHOWN}", f"team={SHOWN}", f"h{SHOWN}"):  # job, worker, label, leader
        assert field in out, field


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "terminal"])
def test_jobs_prints_a_command_with_markup_as_text(
    tty: bool, seeded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "jobs.toml").write_text(JOBS)
    code, out, err = schedctl(
        monkeypatch, "jobs", "-o", "wide", "--jobs", "jobs.toml", "--db", seeded, tty=tty
    )
    assert code == 0, err
    assert "Traceback" not in out + err and "\x1b]" not in out + err and "\x07" not in out + err
    # Spaced, so that the terminal's COMMAND column (wrapped at 40) breaks between the pieces, not inside.
    for piece in ("echo [/red]", "[bold]x[/bold]", "[link=http://evil]y[/link]", "\\x1b]0;t\\x07"):
        assert piece in out, piece


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "terminal"])
def test_logs_escapes_the_output_on_a_terminal_and_its_header_always(
    tty: bool, seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The latest run that started is the running one; the failed one holds the output.
    code, out, err = schedctl(monkeypatch, "runs", JOB_ID, "--json", "--db", seeded, tty=False)
    failed = next(r for r in json.loads(out) if r["state"] == "failed")
    code, out, err = schedctl(monkeypatch, "logs", JOB_ID, failed["scheduled_for"], "--db", seeded, tty=tty)
    assert code == 0, err
    assert "Traceback" not in out + err
    assert err.startswith(f"# j{SHOWN} ") and "\x1b]" not in err
    if tty:  # a job user's escape never reaches the reader's terminal (issue 24)
        assert out == f"out {SHOWN}\n" and "\x1b" not in out
    else:  # a pipe gets the output as the job wrote it (docs/security.md)
        assert out == f"out {EVIL}\n"
    code, raw, err = schedctl(
        monkeypatch, "logs", "--raw", JOB_ID, failed["scheduled_for"], "--db", seeded, tty=tty
    )
    assert code == 0 and raw == f"out {EVIL}\n"


@pytest.mark.parametrize(
    "args",
    [
        ("logs", JOB_ID),  # no run of that job: the id is echoed
        ("logs", "plain", f"2026-01-01T00:00:00{EVIL}"),  # click's own message for a bad argument
        ("runs", "--state", EVIL),
        ("jobs", EVIL),  # click's "unexpected extra argument (...)"
    ],
    ids=["logs-job", "logs-instant", "runs-state", "extra-argument"],
)
def test_a_one_line_error_shows_markup_and_escapes_as_text(
    args: tuple[str, ...], sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schedctl.toml").write_text(JOBS)
    upgrade(store := open_store(sqlite_url))
    store.dispose()
    code, out, err = schedctl(monkeypatch, *args, "--db", sqlite_url, tty=True)
    assert code in (1, 2), err
    assert "Traceback" not in err and "\x1b]" not in err and "\x07" not in err
    assert MARKUP in err and "\\x1b]0;t\\x07" in err


HUGE = "a" * 10_000


@pytest.mark.parametrize(
    "args",
    [
        ("run", HUGE),
        ("logs", HUGE),
        ("logs", HUGE, "2026-01-01T00:00:00Z"),
        ("cancel", HUGE, "2026-01-01T00:00:00Z"),
        ("status", HUGE),
        ("missed", HUGE),
        ("pause", HUGE),
        ("next", HUGE),
        ("jobs", HUGE),
    ],
    ids=lambda a: "-".join(x[:10] for x in a),
)
def test_an_echoed_value_is_cut_in_the_one_line_error(
    args: tuple[str, ...], sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schedctl.toml").write_text(JOBS)
    upgrade(store := open_store(sqlite_url))
    store.dispose()
    extra = () if args[0] in ("next", "jobs") else ("--db", sqlite_url)
    code, out, err = schedctl(monkeypatch, *args, *extra, tty=False)
    assert code in (1, 2), err[:300]
    lines = [line for line in err.splitlines() if line.startswith(("schedctl:", "Error:"))]
    assert len(lines) == 1, err[:600]
    # click's own message is cut whole (its length is the message's); ours cut the value and name its length.
    cut = "characters)" if args[0] == "jobs" else "...' (10000 characters)"
    assert len(lines[0]) < 300 and cut in lines[0], lines[0][:300]
    assert all(len(line) < 300 for line in err.splitlines())
