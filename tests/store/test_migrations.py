"""The embedded Alembic migrations build exactly the model, on every backend, and say what to run when not."""

from __future__ import annotations

import subprocess
import sys
import threading
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, Table, inspect, text

from schedctl.errors import SchemaMismatch
from schedctl.store import migrate, open_store
from schedctl.store.schema import metadata
from schedctl.store.types import UTCDateTime

REPO = Path(__file__).resolve().parents[2]


def _differences(conn, target=metadata):
    context = MigrationContext.configure(
        conn, opts={"compare_type": migrate.compare_type, "version_table": migrate.VERSION_TABLE}
    )
    return compare_metadata(context, target)


@pytest.fixture
def empty(db_url):
    st = open_store(db_url)
    yield st
    st.dispose()


def test_upgrading_an_empty_database_gives_exactly_the_model(empty):
    result = migrate.upgrade(empty)
    assert (result.before, result.after) == (None, migrate.head_revision())
    with empty.connect() as conn:
        assert _differences(conn) == []
        tables = set(inspect(conn).get_table_names())
    assert tables == set(metadata.tables) | {migrate.VERSION_TABLE}


def test_the_comparison_notices_a_timestamp_that_lost_its_zone_or_microseconds(empty):
    """Guards the comparator: UTCDateTime against a plain DATETIME / timestamp without zone is a difference."""
    if empty.dialect == "sqlite":
        pytest.skip("SQLite stores every datetime as text; there is no zone or precision to lose")
    with empty.begin() as conn:
        conn.execute(text("CREATE TABLE probe (id INTEGER PRIMARY KEY, at TIMESTAMP NULL)"))
    model = MetaData()
    Table("probe", model, Column("id", Integer, primary_key=True), Column("at", UTCDateTime))
    with empty.connect() as conn:
        diffs = _differences(conn, model)
    assert [d[0][0] for d in diffs] == ["modify_type"], diffs


def test_upgrade_is_idempotent(empty):
    first = migrate.upgrade(empty)
    second = migrate.upgrade(empty)
    assert first.changed and not second.changed
    assert second.before == second.after == migrate.head_revision()
    with empty.connect() as conn:
        assert conn.execute(text(f"SELECT count(*) FROM {migrate.VERSION_TABLE}")).scalar_one() == 1


def test_concurrent_upgrades_both_succeed(db_url):
    """Two `serve --migrate` starting together: one creates the schema, the other finds it current.

    On SQLite the race is run on several brand-new files: switching a new file to WAL is where it used to
    fail ("database is locked", which SQLite answers there without waiting), about one race in three.
    """
    head = migrate.head_revision()
    urls = [db_url]
    if db_url.startswith("sqlite"):
        urls += [db_url.replace(".db", f"-{n}.db") for n in range(1, 8)]
    for url in urls:
        stores = [open_store(url) for _ in range(2)]
        barrier = threading.Barrier(2)
        results: list[object] = []

        def run(st, results=results, barrier=barrier):
            barrier.wait()
            try:
                results.append(migrate.upgrade(st))
            except Exception as exc:  # the assertion below shows it
                results.append(exc)

        threads = [threading.Thread(target=run, args=(st,)) for st in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        for st in stores:
            st.dispose()
        assert not [r for r in results if isinstance(r, Exception)], (url, results)
        assert sorted(((r.before or ""), r.after) for r in results) == [("", head), (head, head)], results


def _runs_before_0005():
    """job_runs as revisions 0001 to 0004 built it: the snapshot in the row, no version."""
    from sqlalchemy import JSON

    from schedctl.store.schema import job_runs

    columns = [c._copy() for c in job_runs.columns if c.name != "version"]
    return Table("job_runs", MetaData(), *columns, Column("snapshot", JSON, nullable=True))


def _old_row(job_id, minute, state, exclusive=None, snapshot=None):
    from datetime import UTC, datetime

    at = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    return {
        "job_id": job_id,
        "scheduled_for": at.replace(minute=minute),
        "state": state,
        "manual": False,
        "attempt": 1,
        "failures": 0,
        "queued_at": at,
        "cancel_requested": False,
        "labels_key": "",
        "concurrency": "forbid",
        "exclusive": exclusive,
        "snapshot": {"command": "echo 'a;b'"} if snapshot is None else snapshot,
    }


def test_upgrading_from_the_first_revision_keeps_every_run_and_gives_the_model(empty):
    """0002 rebuilds job_runs' indexes (and, on SQLite, the table): rows and the forbid rule survive it."""
    from factories import snapshot_of
    from sqlalchemy import insert, select

    from schedctl.errors import StoreError
    from schedctl.store.schema import job_runs

    migrate.upgrade(empty, "0001")
    rows = [
        _old_row("a", 0, "succeeded"),
        _old_row("a", 1, "running", 1),
        _old_row("b", 0, "queued"),
        _old_row("b", 1, "queued"),
    ]
    with empty.begin() as conn:
        conn.execute(insert(_runs_before_0005()), rows)
    result = migrate.upgrade(empty)
    assert (result.before, result.after) == ("0001", migrate.head_revision())
    with empty.connect() as conn:
        assert _differences(conn) == []
        kept = conn.execute(
            select(
                job_runs.c.job_id, job_runs.c.scheduled_for, job_runs.c.state, job_runs.c.exclusive
            ).order_by(job_runs.c.job_id, job_runs.c.scheduled_for)
        ).all()
        kept = [(*k, snapshot_of(conn, k[0], k[1])) for k in kept]
    assert kept == [
        (r["job_id"], r["scheduled_for"], r["state"], r["exclusive"], r["snapshot"]) for r in rows
    ]

    def row(job_id, minute, state, exclusive=None):
        new = _old_row(job_id, minute, state, exclusive)
        del new["snapshot"]
        return new

    with (
        pytest.raises(StoreError, match="(?i)unique|duplicate"),
        empty.begin() as conn,
    ):  # still one executing forbid run per job
        conn.execute(insert(job_runs), [row("a", 2, "running", 1)])
    with empty.begin() as conn:  # and any number that are not executing
        conn.execute(insert(job_runs), [row("a", 3, "queued"), row("a", 4, "queued")])


def test_upgrading_to_0005_moves_every_snapshot_into_job_versions_once(empty):
    """Each distinct snapshot of a job becomes one version; every row names the one it carried."""
    from factories import snapshot_of
    from sqlalchemy import insert, null, select

    from schedctl.store import runrows
    from schedctl.store.dialect import select_db_now
    from schedctl.store.schema import job_runs, job_versions

    migrate.upgrade(empty, "0004")
    old, edited = {"command": "old", "env": {"A": "1"}}, {"command": "new", "env": {"A": "1"}}
    rows = [_old_row("a", m, "succeeded", snapshot=old) for m in range(5)]
    rows += [_old_row("a", m, "queued", snapshot=edited) for m in range(5, 8)]
    rows += [_old_row("b", m, "queued", snapshot=old) for m in range(3)]
    with empty.begin() as conn:
        conn.execute(insert(_runs_before_0005()), rows)
        # JSON null and SQL NULL: a row with no snapshot names no version.
        conn.execute(insert(_runs_before_0005()), [_old_row("c", 0, "skipped") | {"snapshot": None}])
        conn.execute(insert(_runs_before_0005()), [_old_row("c", 1, "skipped") | {"snapshot": null()}])
    assert migrate.upgrade(empty).after == migrate.head_revision()
    with empty.connect() as conn:
        assert _differences(conn) == []
        versions = conn.execute(select(job_versions.c.job_id, job_versions.c.version)).all()
        moved = [snapshot_of(conn, r["job_id"], r["scheduled_for"]) for r in rows]
        c_versions = conn.execute(select(job_runs.c.version).where(job_runs.c.job_id == "c")).scalars().all()
        written = set(conn.execute(select(job_versions.c.written_at)).scalars())
        now = select_db_now(conn)
    assert moved == [r["snapshot"] for r in rows]
    # The upgrade's now, by the database's clock: pruning leaves the moved versions alone for a hold.
    assert len(written) == 1 and timedelta(0) <= now - written.pop() < timedelta(minutes=5)
    expected = {
        (j, runrows.version_of(runrows.canonical_snapshot(s)))
        for j, s in (("a", old), ("a", edited), ("b", old))
    }
    assert sorted(versions) == sorted(expected)  # once each: five rows of `old` in `a` share one version
    assert c_versions == [None, None]


def test_check_is_not_ok_on_an_empty_database_and_says_what_to_run(empty):
    status = migrate.check(empty)
    assert status.current is None and not status.ok and status.head == migrate.head_revision()
    with pytest.raises(SchemaMismatch, match=r"no schedctl schema.*run `schedctl db upgrade`"):
        migrate.require_current(empty)


def test_check_is_ok_after_upgrade(empty):
    migrate.upgrade(empty)
    status = migrate.check(empty)
    assert status.ok and status.current == status.head and status.known
    assert migrate.require_current(empty) == status


def test_a_database_upgraded_by_a_newer_schedctl_is_refused(empty):
    migrate.upgrade(empty)
    with empty.begin() as conn:
        conn.execute(text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '9999'"))
    status = migrate.check(empty)
    assert (status.current, status.ok, status.newer) == ("9999", False, True)
    with pytest.raises(SchemaMismatch, match=r"at revision 9999.*upgraded by a newer schedctl"):
        migrate.require_current(empty)
    with pytest.raises(SchemaMismatch, match="newer schedctl"):
        migrate.upgrade(empty)


def test_an_older_schema_names_both_revisions(empty):
    migrate.upgrade(empty)
    status = migrate.SchemaStatus(current="0000", head="0001", ok=False, known=True)
    message = migrate.mismatch_message(status, "sqlite file x.db")
    assert message == (
        "database schema on sqlite file x.db is at revision 0000, this schedctl needs 0001: "
        "run `schedctl db upgrade`"
    )


def test_everything_lands_in_the_search_path_schema_version_table_too(db_url):
    if not db_url.startswith("postgresql"):
        pytest.skip("search_path is PostgreSQL's")
    names = [*metadata.tables, migrate.VERSION_TABLE]
    query = text(
        "SELECT table_schema, table_name FROM information_schema.tables"
        " WHERE table_name = ANY(:names) AND table_schema IN (current_schema(), 'public')"
    )
    st = open_store(db_url)
    try:
        with st.connect() as conn:
            schema = conn.execute(text("SELECT current_schema()")).scalar_one()
            before = set(conn.execute(query, {"names": names}).all())
        migrate.upgrade(st)
        with st.connect() as conn:
            after = set(conn.execute(query, {"names": names}).all())
    finally:
        st.dispose()
    assert schema != "public" and not any(s == schema for s, _ in before)
    # Only the private schema gained tables; whatever `public` holds (another install's) is untouched.
    assert after - before == {(schema, name) for name in names}


def test_the_migrations_resolve_as_package_files():
    folder = migrate.migrations_dir()
    assert (folder / "env.py").is_file() and (folder / "script.py.mako").is_file()
    assert [p.name for p in sorted((folder / "versions").glob("*.py"))][0] == "0001_initial.py"


@pytest.mark.slow
def test_a_non_editable_install_runs_the_migrations(tmp_path):
    """Build the wheel as `pip install .` would, unpack it, and upgrade a database from that copy alone."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(tmp_path / "dist")],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("schedctl-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        zf.extractall(site)
    assert "schedctl/store/migrations/env.py" in names
    assert "schedctl/store/migrations/versions/0001_initial.py" in names
    db = tmp_path / "installed.db"
    program = (
        "import sys; sys.path.insert(0, sys.argv[1]); import schedctl;"
        "assert schedctl.__file__.startswith(sys.argv[1]), schedctl.__file__;"
        "from schedctl.store import open_store; from schedctl.store.migrate import upgrade, check;"
        "s = open_store(sys.argv[2]); print(upgrade(s).after, check(s).ok)"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, str(site), f"sqlite:///{db}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == [migrate.head_revision(), "True"]
