"""`schedctl top` fits an 80x24 terminal with its key hints on the last line (issue 30), on a busy cluster:
hundreds of jobs, a dozen workers with long names and labels, more running runs, failures and missed ticks
than fit, version skew, and a leader with a long identity. The frame is read from a real database and drawn
by rich at that size, as the live view draws it."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import factories
import pytest
from rich.console import Console

from schedctl.cli.top import KEYS, render
from schedctl.inspect.top import read_frame, share_rows
from schedctl.jobs.job import CatchUp, Job
from schedctl.leader.lease import acquire_or_renew
from schedctl.store import claims, open_store
from schedctl.store import workers as registry
from schedctl.store.migrate import upgrade


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory):
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('top') / 'top.db'}")
    upgrade(store)
    now = datetime.now(UTC).replace(microsecond=0)
    factories.seed_settled_jobs(
        store,
        600,
        now,
        job_id=lambda i: f"nightly-warehouse-export-for-a-long-customer-name-{i:04d}",
        schedule_key=lambda i: f"{i % 60} {i % 24} * * *|{('UTC', 'America/Argentina/Buenos_Aires')[i % 2]}|",
    )
    with store.begin() as conn:
        for i in range(12):
            registry.register(
                conn,
                registry.Registration(
                    f"worker-{i}.batch-pool.eu-west-1.internal.example.com:{1000 + i}:ab12cd",
                    "worker" if i < 10 else "scheduler",
                    "h",
                    1,
                    "0.1.0" if i % 3 else "0.2.0.dev1",
                    "2025b",
                    {"pool": "batch", "zone": f"eu-west-1{'abc'[i % 3]}", "gpu": "no"},
                    8,
                    1.0,
                    60.0,
                ),
            )
        jobs = [
            Job(id=f"report-{i:03d}-with-a-long-name", schedule="* * * * *", timezone="UTC",
                catch_up=CatchUp.SKIP, command="x")
            for i in range(30)
        ]  # fmt: skip
        for j in jobs:
            claims.queue_runs(conn, j, [now - timedelta(seconds=30)])
        claims.claim(conn, "worker-1.batch-pool.eu-west-1.internal.example.com:1001:ab12cd", 20, [""], 60.0)
    assert acquire_or_renew(store, "cron", "scheduler-" + "x" * 120, 300.0).held
    try:
        yield read_frame(store, "cron")
    finally:
        store.dispose()


def _draw(frame, width: int, height: int) -> list[str]:
    out = io.StringIO()
    screen = Console(file=out, width=width, height=height, force_terminal=False, color_system=None)
    screen.print(render(frame, "sqlite file /var/lib/schedctl/" + "d" * 60 + ".db", (width, height), 1.0))
    return out.getvalue().rstrip("\n").split("\n")


@pytest.mark.parametrize(("width", "height"), [(80, 24), (100, 30), (80, 15)])
def test_the_live_view_fits_the_terminal_with_the_keys_on_its_last_line(
    busy, width: int, height: int
) -> None:
    assert busy.running_total == 20 and len(busy.failures) >= 10 and len(busy.missed) >= 10  # more than fits
    lines = _draw(busy, width, height)
    assert len(lines) == height, "\n".join(lines)
    assert max(len(line) for line in lines) <= width, "\n".join(line for line in lines if len(line) > width)
    assert lines[-1].startswith(KEYS) and "q quit" in lines[-1]
    text = "\n".join(lines)
    # What does not fit is counted, not dropped silently.
    assert "running: 20 (" in text and "not shown)" in text
    assert "version skew" in text


def test_at_80x24_every_section_keeps_its_heading_and_the_urgent_lists_their_rows(busy) -> None:
    lines = _draw(busy, 80, 24)
    for heading in ("schedctl top", "leader: ", "workers: ", "running: ", "queue: ", "next fires:",
                    "last failures:", "last missed ticks:"):  # fmt: skip
        assert any(line.startswith(heading) for line in lines), (heading, "\n".join(lines))
    assert any(line.startswith("report-") for line in lines)  # a running run
    assert any(line.startswith("JOB ") for line in lines)


def test_rows_are_shared_one_at_a_time_a_first_row_costing_its_header_too() -> None:
    assert share_rows(5, [3, 0, 9]) == [2, 0, 1]
    assert share_rows(0, [3]) == [0] and share_rows(100, [3, 4]) == [3, 4]
