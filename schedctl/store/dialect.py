"""Every difference between SQLite, PostgreSQL and MySQL/MariaDB lives here.

The database's clock judges leases and heartbeats, never a replica's: ``db_now()`` and ``db_now_plus()``
render the server's current UTC time in each dialect, with microseconds, in the same form the column stores.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from sqlalchemy import Table, literal, select
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

from schedctl.store.types import UTCDateTime


class db_now(FunctionElement[Any]):  # noqa: N801 - reads like SQL
    """The database server's current instant (UTC)."""

    type = UTCDateTime()
    inherit_cache = True
    name = "db_now"


class db_now_plus(FunctionElement[Any]):  # noqa: N801
    """The database server's current instant plus a number of seconds (negative to look back)."""

    type = UTCDateTime()
    inherit_cache = True
    name = "db_now_plus"


@compiles(db_now, "postgresql")
def _pg_now(element: Any, compiler: Any, **kw: Any) -> str:
    # clock_timestamp(), not now(): now() is frozen at transaction start, and a dispatch transaction may be long.
    return "clock_timestamp()"


@compiles(db_now, "mysql")
@compiles(db_now, "mariadb")
def _my_now(element: Any, compiler: Any, **kw: Any) -> str:
    return "UTC_TIMESTAMP(6)"


@compiles(db_now, "sqlite")
def _lite_now(element: Any, compiler: Any, **kw: Any) -> str:
    # SQLAlchemy stores "YYYY-MM-DD HH:MM:SS.ffffff"; %f gives SS.SSS, so pad to microseconds to compare as text.
    return "strftime('%Y-%m-%d %H:%M:%f000', 'now')"


@compiles(db_now_plus, "postgresql")
def _pg_now_plus(element: Any, compiler: Any, **kw: Any) -> str:
    (seconds,) = list(element.clauses)
    return f"(clock_timestamp() + make_interval(secs => {compiler.process(seconds, **kw)}))"


@compiles(db_now_plus, "mysql")
@compiles(db_now_plus, "mariadb")
def _my_now_plus(element: Any, compiler: Any, **kw: Any) -> str:
    (seconds,) = list(element.clauses)
    return (
        f"DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ROUND({compiler.process(seconds, **kw)} * 1000000) MICROSECOND)"
    )


@compiles(db_now_plus, "sqlite")
def _lite_now_plus(element: Any, compiler: Any, **kw: Any) -> str:
    (seconds,) = list(element.clauses)
    modifier = f"(printf('%+.6f', {compiler.process(seconds, **kw)}) || ' seconds')"
    # strftime's %f keeps only milliseconds; a sub-millisecond offset is below what leases need.
    return f"strftime('%Y-%m-%d %H:%M:%f000', 'now', {modifier})"


def unreachable_hint(dialect: str) -> str:
    """What to check when ``dialect``'s database cannot be reached: a SQLite file's folder, or a server."""
    return "does its folder exist?" if dialect == "sqlite" else "is the server running?"


def now_plus(seconds: float) -> db_now_plus:
    return db_now_plus(literal(float(seconds)))


def insert_ignore(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> int:
    """Insert rows, silently keeping any row whose primary key exists already. Returns how many were new.

    This is the claim: the primary key, not anything in memory, decides who got a tick.
    """
    if not rows:
        return 0
    name = conn.dialect.name
    if name == "postgresql":
        stmt: Any = pg_insert(table).on_conflict_do_nothing()
    elif name == "sqlite":
        stmt = sqlite_insert(table).on_conflict_do_nothing()
    else:
        # IGNORE also downgrades other errors to warnings, but ON DUPLICATE KEY UPDATE cannot say how many
        # rows were new (the driver's FOUND_ROWS flag counts a duplicate as one), and the rows are our own.
        stmt = mysql_insert(table).prefix_with("IGNORE")
    returning = conn.dialect.insert_returning and name != "mysql"
    if returning:
        stmt = stmt.returning(*table.primary_key.columns)
    inserted = 0
    # One multi-row statement per chunk: few round trips, and a count every driver reports correctly.
    chunk = 500 if name != "sqlite" else max(1, 30000 // max(1, len(rows[0])))
    for start in range(0, len(rows), chunk):
        result = conn.execute(stmt.values(rows[start : start + chunk]))
        inserted += len(result.all()) if returning else max(0, result.rowcount or 0)
    return inserted


def insert_ignore_many(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> int:
    """``insert_ignore_columns`` for rows given as dicts (every row with the same keys)."""
    if not rows:
        return 0
    return insert_ignore_columns(conn, table, {key: [row[key] for row in rows] for key in rows[0]})


def _lite_instant(value: Any) -> str:
    return str(value.replace(tzinfo=None).isoformat(" ", "microseconds"))


def _lite_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool | int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def in_list(conn: Connection, column: Any, values: list[Any]) -> Any:
    """``column IN (values)``; on PostgreSQL ``= ANY(array)``: one parameter instead of 1,000 placeholders
    that SQLAlchemy renders and psycopg re-parses on every execution."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy import any_
        from sqlalchemy.dialects.postgresql import ARRAY

        return column == any_(literal(list(values), ARRAY(column.type)))
    if conn.dialect.name == "sqlite":
        import json

        from sqlalchemy import func, literal_column

        # SQLite's json_each: one text parameter, the same idea as PostgreSQL's array.
        return column.in_(
            select(literal_column("value")).select_from(func.json_each(json.dumps(list(values))))
        )
    return column.in_(list(values))


IN_CHUNK = 1000  # ids per IN list: well inside every backend's bound-parameter limit
ARRAY_CHUNK = 20000  # ids per array or JSON parameter: fewer statements, each still a modest parameter


def id_chunks(conn: Connection, ids: Sequence[Any]) -> Iterator[list[Any]]:
    """``ids`` in pieces that one ``in_list`` carries: one array or JSON parameter on PostgreSQL and SQLite,
    so large pieces; placeholders on MySQL, so pieces well inside its parameter limit."""
    size = ARRAY_CHUNK if conn.dialect.name in ("postgresql", "sqlite") else IN_CHUNK
    for start in range(0, len(ids), size):
        yield list(ids[start : start + size])


def supports_skip_locked(conn: Connection) -> bool:
    """Whether claims lock with ``FOR UPDATE SKIP LOCKED``; SQLite serialises writers instead."""
    return conn.dialect.name in ("postgresql", "mysql", "mariadb")


def select_db_now(conn: Connection) -> Any:
    return conn.execute(select(db_now())).scalar_one()


# Any constant shared by every schedctl: "sched" in ASCII.
_MIGRATION_LOCK_KEY = 0x7363686564


MIGRATION_LOCK_TIMEOUT = 300  # seconds a second upgrader waits for the first (MySQL's GET_LOCK needs one)


@contextlib.contextmanager
def migration_lock(conn: Connection) -> Iterator[None]:
    """Serialise concurrent schema upgrades for as long as the block runs, commits included.

    A session-level lock taken outside the upgrade's transaction, so it also covers MySQL, whose DDL
    commits implicitly: there a lock held until commit would end at the first CREATE TABLE. PostgreSQL:
    an advisory lock. MySQL/MariaDB: a named lock (GET_LOCK). SQLite: the upgrade's BEGIN IMMEDIATE is
    the lock. The second upgrader waits, then finds the schema current.
    """
    name = conn.dialect.name
    if name == "sqlite":
        yield
        return
    # An upgrade is not a loop's statement: it may wait for the first upgrader and rebuild an index over a
    # big table, so the session's lock and statement bounds (store/bounds.py) are lifted for it; the
    # connection is dropped afterwards rather than handed back to the pool without them.
    if name == "postgresql":
        conn.exec_driver_sql(f"SET lock_timeout = '{MIGRATION_LOCK_TIMEOUT}s'")
        conn.exec_driver_sql("SET statement_timeout = 0")
        conn.exec_driver_sql("SET idle_in_transaction_session_timeout = 0")
        conn.exec_driver_sql(f"SELECT pg_advisory_lock({_MIGRATION_LOCK_KEY})")
        release = f"SELECT pg_advisory_unlock({_MIGRATION_LOCK_KEY})"
    else:
        mariadb = "mariadb" in conn.connection.driver_connection.get_server_info().lower()  # type: ignore[union-attr]
        lifted = (
            "max_statement_time = 0, idle_transaction_timeout = 0" if mariadb else "max_execution_time = 0"
        )
        conn.exec_driver_sql(f"SET SESSION innodb_lock_wait_timeout = {MIGRATION_LOCK_TIMEOUT}, {lifted}")
        got = conn.exec_driver_sql(
            f"SELECT GET_LOCK('schedctl_migration', {MIGRATION_LOCK_TIMEOUT})"
        ).scalar()
        if got != 1:
            conn.rollback()
            from schedctl.errors import StoreError

            raise StoreError(f"another schema upgrade held the migration lock for {MIGRATION_LOCK_TIMEOUT} s")
        release = "SELECT RELEASE_LOCK('schedctl_migration')"
    conn.commit()  # end the autobegun transaction; the lock belongs to the session
    try:
        yield
    finally:
        try:
            conn.exec_driver_sql(release)
            conn.commit()
        except Exception:
            pass
        # A session we cannot talk to must not go back to the pool still holding the lock, nor one
        # without its bounds.
        conn.invalidate()


def insert_ignore_columns(
    conn: Connection,
    table: Table,
    columns: dict[str, list[Any]],
    json_text: frozenset[str] = frozenset(),
    refresh: tuple[str, ...] = (),
) -> int:
    """``insert_ignore_many`` for rows given as one list per column (all the same length).

    A dispatch batch is built column by column, so no row dict is made per tick; a column whose values are
    all equal is sent once. JSON columns named in ``json_text`` hold serialised text already (a job's
    snapshot is serialised once per definition, not once per tick). Returns how many rows were new.
    ``refresh``: columns that a row whose primary key exists already takes from the new row (an upsert);
    the count then includes such rows (MySQL counts them twice).
    """
    count = len(next(iter(columns.values()), []))
    if not count:
        return 0
    batch = _ColumnRows(table, columns, json_text, refresh)
    name = conn.dialect.name
    if name == "postgresql":
        return _pg_insert_columns(conn, batch)
    if name == "sqlite":
        return _sqlite_insert_columns(conn, batch)
    return _mysql_insert_columns(conn, batch)


class _ColumnRows(NamedTuple):
    """One ``insert_ignore_columns`` call, as each database's writer takes it."""

    table: Table
    columns: dict[str, list[Any]]
    json_text: frozenset[str]
    refresh: tuple[str, ...]


def _on_conflict(table: Table, refresh: tuple[str, ...], excluded: str) -> str:
    """PostgreSQL's and SQLite's conflict clause: ignore, or take the ``refresh`` columns from the new row."""
    if not refresh:
        return "ON CONFLICT DO NOTHING"
    key = ", ".join(f'"{c.name}"' for c in table.primary_key.columns)
    sets = ", ".join(f'"{n}" = {excluded}."{n}"' for n in refresh)
    return f"ON CONFLICT ({key}) DO UPDATE SET {sets}"


def _same(values: list[Any]) -> bool:
    return values.count(values[0]) == len(values)


def _as_json(values: list[Any]) -> list[Any]:
    import json

    return [None if v is None else json.dumps(v) for v in values]


def _pg_insert_columns(conn: Connection, batch: _ColumnRows) -> int:
    table, columns, json_text, refresh = batch
    from sqlalchemy import JSON

    arrays, selected, aliases, params = [], [], [], {}
    for i, (name, values) in enumerate(columns.items()):
        column = table.c[name]
        typ = column.type.compile(dialect=conn.dialect)
        if isinstance(column.type, JSON) and name not in json_text:
            values = _as_json(values)
        if _same(values):
            params[f"c{i}"] = values[0]
            selected.append(f"CAST(%(c{i})s AS {typ})")
        else:
            params[f"c{i}"] = values
            arrays.append(f"CAST(%(c{i})b AS {typ}[])")
            aliases.append(f"c{i}")
            selected.append(f"u.c{i}")
    column_list = ", ".join(f'"{n}"' for n in columns)
    source = f"FROM unnest({', '.join(arrays)}) AS u({', '.join(aliases)})" if arrays else ""
    sql = f'INSERT INTO "{table.name}" ({column_list}) SELECT {", ".join(selected)} {source} ' + _on_conflict(
        table, refresh, "EXCLUDED"
    )
    raw = conn.connection.driver_connection
    with raw.cursor() as cursor:  # type: ignore[union-attr]
        cursor.execute(sql, params)
        return max(0, cursor.rowcount or 0)


def _storage_column(
    table: Table, name: str, values: list[Any], json_text: frozenset[str], sqlite: bool
) -> list[Any]:
    """Values as SQLAlchemy would bind them on SQLite or MySQL: naive UTC instants, JSON as text."""
    from datetime import UTC

    from sqlalchemy import JSON

    column = table.c[name]
    if isinstance(column.type, JSON) and name not in json_text:
        return _as_json(values)
    if isinstance(column.type, UTCDateTime):
        if _same(values):  # the tick or queued_at of a whole batch: convert once
            first = values[0]
            one = None if first is None else first.astimezone(UTC)
            stored = one if one is None else (_lite_instant(one) if sqlite else one.replace(tzinfo=None))
            return [stored] * len(values)
        if sqlite:
            return [None if v is None else _lite_instant(v.astimezone(UTC)) for v in values]
        return [None if v is None else v.astimezone(UTC).replace(tzinfo=None) for v in values]
    return values


def _sqlite_insert_columns(conn: Connection, batch: _ColumnRows) -> int:
    table, columns, json_text, refresh = batch
    marks, varying = [], []
    for name, values in columns.items():
        stored = _storage_column(table, name, values, json_text, sqlite=True)
        if _same(stored):
            marks.append(_lite_literal(stored[0]))
        else:
            marks.append("?")
            varying.append(stored)
    names = ", ".join(f'"{n}"' for n in columns)
    sql = f'INSERT INTO "{table.name}" ({names}) VALUES ({", ".join(marks)}) ' + _on_conflict(
        table, refresh, "excluded"
    )
    count = len(next(iter(columns.values())))
    rows = list(zip(*varying, strict=True)) if varying else [()] * count
    return _executemany(conn, sql, rows)


def _mysql_insert_columns(conn: Connection, batch: _ColumnRows) -> int:
    table, columns, json_text, refresh = batch
    stored = [_storage_column(table, n, v, json_text, sqlite=False) for n, v in columns.items()]
    names = ", ".join(f"`{n}`" for n in columns)
    marks = ", ".join(["%s"] * len(columns))
    if refresh:
        sets = ", ".join(f"`{n}` = VALUES(`{n}`)" for n in refresh)
        sql = f"INSERT INTO `{table.name}` ({names}) VALUES ({marks}) ON DUPLICATE KEY UPDATE {sets}"
    else:
        sql = f"INSERT IGNORE INTO `{table.name}` ({names}) VALUES ({marks})"
    # PyMySQL sends executemany as multi-row statements and sums their counts; an ignored duplicate counts zero.
    return _executemany(conn, sql, list(zip(*stored, strict=True)))


def _executemany(conn: Connection, sql: str, rows: list[tuple[Any, ...]]) -> int:
    """``sql`` once per row on the driver's own cursor (no SQLAlchemy per row); how many rows it changed."""
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.executemany(sql, rows)
        return max(0, cursor.rowcount or 0)
    finally:
        cursor.close()
