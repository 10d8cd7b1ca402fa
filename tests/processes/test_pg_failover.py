"""Issue 26: a PostgreSQL primary failover, once, with the harness of bench/pg_failover.py.

A private primary and a streaming standby (``pg_basebackup -R``); two schedulers and two workers on the
multi-host URL with ``target_session_attrs=read-write``; the primary stopped hard (``-m immediate``) and the
standby promoted. The cluster must carry on by itself on the promoted server, and every tick must be
accounted for: ran once, ran twice (a commit lost with the old primary: asynchronous replication allows it),
or named by `schedctl missed`. A tick that is none of these is lost, and fails the test.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from pg_failover import one_try  # noqa: E402

pytestmark = [pytest.mark.processes, pytest.mark.slow]


def _server_binaries() -> bool:
    return shutil.which("pg_basebackup") is not None or bool(
        list(Path("/usr/lib/postgresql").glob("*/bin/pg_basebackup"))
    )


@pytest.mark.skipif(
    not _server_binaries(), reason="needs PostgreSQL's server binaries (initdb, pg_basebackup)"
)
def test_a_promoted_standby_takes_over_and_every_tick_is_accounted_for() -> None:
    # Not tmp_path: pytest's folders are 0700 to root, and the servers run as `postgres`.
    root = Path(tempfile.mkdtemp(prefix="schedctl-failover-test-"))
    said: list[str] = []
    try:
        result = one_try(root, jobs_count=4, before=8.0, after=12.0, sync=False, say=said.append)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert result.lost == [], (result.counts, said)
    assert result.failover_seconds is not None, said  # runs started again on the promoted server
    # A lease of 3 s renewed every second: a new leader within a few lease durations, even on a busy machine.
    assert result.failover_seconds < 20, (result.failover_seconds, said)
    assert result.counts["ran once"] >= 4 * 10, (result.counts, said)  # most of 18 s of 4 per-second jobs
