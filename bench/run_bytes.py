"""Bytes per run row: run rows carrying the whole job snapshot (before 0005) against rows naming a job version.

    python bench/run_bytes.py [--db sqlite|URL ...] [--jobs 1000] [--ticks 100] [--shape minimal,tenant]

Issue 19, goal 3: the run tables of today (``job_runs`` + ``job_versions``) take at most 40% of the bytes per
run row that the old ``job_runs`` took. Both are measured in the same run, in one private database (schema on
PostgreSQL): "before" is a table ``job_runs_before`` shaped exactly like ``job_runs`` before migration 0005
(every column and index of today's table, ``version`` replaced by the ``snapshot`` JSON it had), filled the way
the old dispatch filled it (the snapshot's JSON text in every row, one insert-ignore per tick); "after" is
``job_runs`` filled by the store's own ``runrows.insert_runs``, which writes each job's version once (the
leader's record of versions it committed, as ``dispatch.RowValues`` keeps it) and the rows naming it. Both
get ``--jobs`` rows per tick for ``--ticks`` ticks, every row queued (what a tick writes).

Bytes, indexes included: PostgreSQL ``pg_total_relation_size`` after a ``VACUUM`` of both; SQLite the pages of
each table and its indexes (``dbstat``); MariaDB ``information_schema.tables`` data_length + index_length after
``ANALYZE TABLE`` (InnoDB's page counts, an estimate). Shapes: ``minimal`` is bench/scheduler.py's job
(``command = "true"``), ``tenant`` the seed's report job (a command with arguments, four environment
variables, a timeout, retries, labels and mail settings).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scheduler import Private  # noqa: E402

GOAL = 0.40
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def jobs_of(shape: str, count: int) -> list[Any]:
    from schedctl.jobs.job import CatchUp, Concurrency, Job

    out = []
    for i in range(count):
        if shape == "minimal":
            job = Job(f"job-{i:06d}", "* * * * *", "UTC", CatchUp.SKIP, "true", concurrency=Concurrency.ALLOW)
        else:
            tenant = f"tenant-{i:06d}"
            job = Job(
                f"report-{tenant}",
                "* * * * *",
                "Europe/Berlin",
                CatchUp.SKIP,
                ("bin/report", "--tenant", tenant, "--format", "pdf", "--since", "yesterday"),
                timeout=900.0,
                retries=2,
                env={
                    "TENANT": tenant,
                    "REGION": "eu-central-1",
                    "REPORT_BUCKET": "s3://reports",
                    "TZ": "CET",
                },
                workdir="/srv/reports",
                user="reports",
                labels={"pool": "reports"},
                mailto=(f"{tenant}@example.com",),
                mailfrom="reports@example.com",
            )
        out.append(job)
    return out


def before_table() -> Any:
    """job_runs as 0001-0004 built it: today's columns and indexes, ``snapshot`` JSON in place of ``version``."""
    from sqlalchemy import JSON, Column, Index, MetaData, Table

    from schedctl.store.schema import job_runs

    columns = [c._copy() for c in job_runs.columns if c.name != "version"]
    table = Table("job_runs_before", MetaData(), *columns, Column("snapshot", JSON, nullable=True))
    for index in job_runs.indexes:
        Index(
            index.name.replace("job_runs", "job_runs_before"),
            *[table.c[c.name] for c in index.columns],
            unique=index.unique,
            **{k: v for k, v in index.kwargs.items()},
        )
    return table


def fill(store: Any, jobs: list[Any], ticks: int, table: Any) -> float:
    """Insert ``ticks`` ticks of every job, one transaction per tick; returns the seconds it took."""
    from schedctl.store import runrows
    from schedctl.store.dialect import insert_ignore_columns

    shared = [runrows.shared_values(j) for j in jobs]
    ids = [j.id for j in jobs]
    old_text = [json.dumps(j.snapshot()) for j in jobs]  # what the old dispatch wrote in every row
    written: set[str] = set()
    started = time.perf_counter()
    for k in range(ticks):
        at = [T0 + timedelta(minutes=k)] * len(jobs)
        with store.begin() as conn:
            if table is None:
                runrows.insert_runs(conn, ids, at, shared, term=1, queued_at=at[0], known_versions=written)
            else:
                n = len(jobs)
                columns = {
                    "job_id": ids,
                    "scheduled_for": at,
                    "state": ["queued"] * n,
                    "reason": [None] * n,
                    "reason_detail": [None] * n,
                    "manual": [False] * n,
                    "term": [1] * n,
                    "attempt": [0] * n,
                    "failures": [0] * n,
                    "queued_at": [at[0]] * n,
                    "not_before": [None] * n,
                    "cancel_requested": [False] * n,
                    "snapshot": old_text,
                    "labels_key": [s[1] for s in shared],
                    "concurrency": [s[2] for s in shared],
                }
                insert_ignore_columns(conn, table, columns, json_text=frozenset({"snapshot"}))
        written.update(ids)
    return time.perf_counter() - started


def sizes(store: Any, names: list[str]) -> dict[str, int]:
    """Bytes of each table, its indexes included."""
    from sqlalchemy import text

    dialect = store.dialect
    out: dict[str, int] = {}
    if dialect == "postgresql":
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for name in names:
                conn.execute(text(f"VACUUM {name}"))
            for name in names:
                out[name] = conn.execute(text(f"SELECT pg_total_relation_size('{name}')")).scalar_one()
    elif dialect == "sqlite":
        with store.connect() as conn:
            rows = conn.execute(
                text("SELECT tbl_name, name FROM sqlite_schema WHERE type IN ('table', 'index')")
            ).all()
            pages = dict(conn.execute(text("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")).all())
        for name in names:
            out[name] = sum(pages.get(obj, 0) for tbl, obj in rows if tbl == name)
    else:
        with store.connect() as conn:
            for name in names:
                conn.execute(text(f"ANALYZE TABLE {name}")).all()
            for name in names:
                out[name] = conn.execute(
                    text(
                        "SELECT data_length + index_length FROM information_schema.tables"
                        " WHERE table_schema = DATABASE() AND table_name = :n"
                    ),
                    {"n": name},
                ).scalar_one()
    return out


def measure(url: str | None, shape: str, jobs_n: int, ticks: int, tmp: Path) -> dict[str, Any]:
    from schedctl.store import open_store
    from schedctl.store.migrate import upgrade

    private = Private(url, tmp)
    store = open_store(private.url)
    try:
        upgrade(store)
        old = before_table()
        old.metadata.create_all(store.engine)
        jobs = jobs_of(shape, jobs_n)
        t_after = fill(store, jobs, ticks, None)
        t_before = fill(store, jobs, ticks, old)
        got = sizes(store, ["job_runs", "job_versions", "job_runs_before"])
    finally:
        store.dispose()
        private.drop()
    rows = jobs_n * ticks
    before = got["job_runs_before"] / rows
    after = (got["job_runs"] + got["job_versions"]) / rows
    snapshot_bytes = sum(len(json.dumps(j.snapshot())) for j in jobs) / len(jobs)
    return {
        "backend": store.dialect,
        "shape": shape,
        "rows": rows,
        "snapshot": snapshot_bytes,
        "before": before,
        "after": after,
        "runs": got["job_runs"] / rows,
        "versions": got["job_versions"] / rows,
        "ratio": after / before,
        "fill_s": (t_before, t_after),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--db",
        action="append",
        help="sqlite or a SQLAlchemy URL, repeatable (default: sqlite, then $SCHEDCTL_TEST_POSTGRES_URL and "
        "$SCHEDCTL_TEST_MYSQL_URL when set)",
    )
    parser.add_argument("--jobs", type=int, default=1000, help="rows per tick (default 1000)")
    parser.add_argument("--ticks", type=int, default=100, help="ticks (default 100: 100,000 rows each way)")
    parser.add_argument("--shape", default="minimal,tenant", help="job shapes, comma-separated")
    args = parser.parse_args()
    urls = args.db or [
        "sqlite",
        *(
            os.environ[k]
            for k in ("SCHEDCTL_TEST_POSTGRES_URL", "SCHEDCTL_TEST_MYSQL_URL")
            if os.environ.get(k)
        ),
    ]
    missed = False
    print(f"goal 3 (issue 19): bytes per run row, job_runs + job_versions, <= {GOAL:.0%} of before 0005")
    with tempfile.TemporaryDirectory() as tmp:
        for url in urls:
            for shape in args.shape.split(","):
                r = measure(None if url == "sqlite" else url, shape, args.jobs, args.ticks, Path(tmp))
                ok = r["ratio"] <= GOAL
                missed |= not ok
                print(
                    f"  {r['backend']:<10} {r['shape']:<8} {r['rows']:>8,} rows, snapshot {r['snapshot']:.0f} B: "
                    f"before {r['before']:.1f} B/row, after {r['after']:.1f} B/row "
                    f"(runs {r['runs']:.1f} + versions {r['versions']:.1f}) = {r['ratio']:.1%} "
                    f"[goal <= {GOAL:.0%}: {'met' if ok else 'MISSED'}]; "
                    f"fill {r['fill_s'][0]:.1f} s before / {r['fill_s'][1]:.1f} s after"
                )
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
