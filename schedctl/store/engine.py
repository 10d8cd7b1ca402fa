"""The engine behind a ``Store``: one per URL, configured the same way for every command and loop (see the
package's docstring)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import create_engine, event, make_url
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    NoSuchModuleError,
    OperationalError,
)

from schedctl.errors import StoreConflict, StoreError, StoreUnavailable
from schedctl.store import access, urls
from schedctl.store.bounds import (
    Bounds,
    idle_ping_after,
    mysql_connect_args,
    mysql_session_sql,
    postgres_connect_args,
)
from schedctl.store.sqlitefile import sqlite_file, sqlite_path

DEFAULT_URL = "sqlite:///schedctl.db"
READ_ONLY = "schedctl_read_only"  # execution option: a SQLite transaction that starts deferred (Store.read)
SQLITE_BUSY_TIMEOUT_MS = 30_000
# A pooled connection unused for longer than this is pinged before use. One in use every second (a leader's
# dispatches and renewals, a worker's claims) is not: a ping per transaction is a round trip of its own,
# and on a loaded host every round trip waits for a time slice.
IDLE_PING_AFTER = 5.0

_DEFAULT_DRIVERS = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",  # Heroku-style DATABASE_URL
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}
# The extra of schedctl's package that brings each backend's default driver.
_DRIVER_EXTRAS = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql"}


def parse_url(url: str | URL) -> URL:
    try:
        parsed = make_url(urls.libpq_multihost(url) if isinstance(url, str) else url)
    except ArgumentError as exc:
        raise StoreError(f"invalid database URL: {exc}") from None
    except ValueError:  # make_url's int() of the port
        raise StoreError("invalid database URL: the port is not a number") from None
    if parsed.drivername in _DEFAULT_DRIVERS:
        parsed = parsed.set(drivername=_DEFAULT_DRIVERS[parsed.drivername])
    urls.check_parsed(parsed)
    return urls.normalize_hosts(parsed)


def safe_url(url: str | URL) -> str:
    """The URL as it may appear in output and logs: never the password."""
    try:
        return urls.masked(parse_url(url))
    except StoreError:
        return "<invalid database URL>"


def describe_target(url: str | URL) -> str:
    """Host (or file) and database, for one-line error messages."""
    try:
        parsed = parse_url(url)
    except StoreError:
        return "<invalid database URL>"
    if parsed.get_backend_name() == "sqlite":
        return f"sqlite file {parsed.database or ':memory:'}"
    return f"{parsed.get_backend_name()} at {','.join(urls.hosts(parsed))}/{parsed.database or ''}"


class Store:
    """An engine plus the transaction discipline every query in schedctl relies on.

    SQLite: every ``begin()`` is ``BEGIN IMMEDIATE`` so the check-then-write of a claim cannot interleave
    with another process's; ``read()`` is a deferred ``BEGIN`` (WAL gives it a snapshot), so the read-only
    commands and samplers never hold the writer lock. WAL and a busy timeout let processes share the file.
    MySQL/MariaDB: READ COMMITTED, so ``SKIP LOCKED`` claims do not take gap locks.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.url = engine.url
        self.dialect = engine.dialect.name  # "sqlite" | "postgresql" | "mysql" (MariaDB reports "mysql")
        # The database file on SQLite; None in memory and on the other backends.
        self.sqlite_file = sqlite_file(engine.url)
        self.bounds = Bounds.for_lease()  # what the sessions were told; open_store sets the real ones
        # The driver's own PEP 249 errors: the bulk inserts (``dialect.insert_ignore_columns``) run on its cursor,
        # where SQLAlchemy wraps nothing, and a full disk raised psycopg's DiskFull through the scheduler.
        dbapi = getattr(engine.dialect, "loaded_dbapi", None)
        self._driver_errors: tuple[type[Exception], ...] = (dbapi.Error,) if dbapi is not None else ()

    @contextlib.contextmanager
    def begin(self) -> Iterator[Connection]:
        """A transaction; commits on success, rolls back on error, and maps driver errors to StoreError."""
        with self._translated(), self.engine.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._translated(), self.engine.connect() as conn:
            yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only transaction that never takes SQLite's writer lock (a plain deferred ``BEGIN``), so a
        reader refreshing every second (`schedctl top`) never delays a dispatch or a claim. WAL gives it a
        consistent snapshot meanwhile. Elsewhere the same as ``connect()``.

        Ends in a rollback, never a commit: a server that ended the transaction while the caller computed
        between statements (PostgreSQL's idle-in-transaction bound, minutes of fires in `missed`) has already
        answered every query, and a commit would turn that into an error."""
        with self._translated(), self.engine.connect() as conn:
            yield conn.execution_options(**{READ_ONLY: True})

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        """Driver errors as StoreError, also those raised by the caller's statements inside the block."""
        try:
            yield
        except (OperationalError, DBAPIError) as exc:
            raise translate_error(exc, self.url) from exc
        except self._driver_errors as exc:
            raise translate_error(exc, self.url) from exc

    def dispose(self) -> None:
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"Store({safe_url(self.url)})"


def translate_error(exc: Exception, url: URL) -> StoreError:
    """A driver error as one line naming the target, never the password."""
    target = describe_target(url)
    first_line = urls.scrub(_first_line(exc), url)
    refusal = access.refusal(exc, target, first_line)
    if refusal is not None:
        return refusal
    no_folder = urls.missing_sqlite_folder(url)
    if no_folder is not None:
        return no_folder
    if isinstance(exc, DBAPIError) and exc.connection_invalidated or _is_connect_error(exc):
        return StoreUnavailable(f"cannot reach {target}: {first_line}")
    if _is_conflict(exc):
        return StoreConflict(f"transaction aborted by {target}: {first_line}")
    return StoreError(f"database error on {target}: {first_line}")


def _is_connect_error(exc: Exception) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return any(
        marker in text
        for marker in (
            "connection refused",
            "could not connect",
            "can't connect",
            "server closed the connection",
            "lost connection",
            "connection is closed",
            "terminating connection",
            "unable to open database",
            "connection timeout",
            "name or service not known",
            "the database system is",
            "gone away",
            "consuming input failed",
            "connection failed",
        )
    )


def _is_conflict(exc: Exception) -> bool:
    # MySQL 1213 "Deadlock found", 1205 lock wait timeout; PostgreSQL 40P01 deadlock, 40001 serialization,
    # 55P03 lock_timeout: all mean "try again", and a bounded lock wait must read as one, not as an outage.
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlstate", None) or (getattr(orig, "args", None) or [None])[0]
    return code in (1213, 1205, "40P01", "40001", "55P03") or "deadlock" in str(orig or exc).lower()


def _first_line(exc: Exception) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def open_store(url: str | URL = DEFAULT_URL, bounds: Bounds | None = None, **engine_kwargs: Any) -> Store:
    """An engine for ``url``. Does not connect yet, so it never fails for an unreachable server.

    ``bounds`` (default: those of the default lease) limit every operation on both ends; ``serve`` passes
    the ones derived from its lease settings. Options in the URL win over them.
    """
    parsed = parse_url(url)
    urls.check_target(parsed)
    backend = parsed.get_backend_name()
    bounds = bounds or Bounds.for_lease()
    kwargs: dict[str, Any] = {}
    if backend == "sqlite":
        kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}
    elif backend in ("mysql", "mariadb"):
        kwargs["isolation_level"] = "READ COMMITTED"
        kwargs["connect_args"] = mysql_connect_args(bounds, parsed)
    elif backend == "postgresql":
        kwargs["connect_args"] = postgres_connect_args(bounds, parsed)
    kwargs.update(engine_kwargs)
    try:
        engine = create_engine(parsed, **kwargs)
    except ImportError as exc:
        extra = _DRIVER_EXTRAS.get(backend) if parsed.drivername in _DEFAULT_DRIVERS.values() else None
        hint = (
            f"install the driver: pip install 'schedctl[{extra}]'" if extra else "its driver is not installed"
        )
        raise StoreError(f"cannot use {safe_url(parsed)}: {hint} ({exc})") from None
    except (ArgumentError, NoSuchModuleError) as exc:
        raise StoreError(f"cannot use {safe_url(parsed)}: {exc}") from None
    except (TypeError, ValueError) as exc:  # the dialect converting a query option: ?connect_timeout=abc
        raise StoreError(f"cannot use {safe_url(parsed)}: a query option has a bad value: {exc}") from None
    urls.check_connect_args(engine)
    if backend == "sqlite":
        _configure_sqlite(engine)
    else:
        if backend in ("mysql", "mariadb"):
            _configure_mysql_session(engine, bounds)  # its own do_connect, guarded the same way
        else:
            urls.guard_driver_errors(engine)
        _ping_when_idle(engine)
    store = Store(engine)
    store.bounds = bounds
    return store


def _configure_mysql_session(engine: Engine, bounds: Bounds) -> None:
    """The server-side bounds, once per new connection; then the URL's ``init_command`` again, so it wins."""
    theirs = engine.url.query.get("init_command")

    @event.listens_for(engine, "do_connect")
    def _do_connect(dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        # PyMySQL bounds its connect() with connect_timeout but reads the handshake under read_timeout,
        # so a listener that accepts and says nothing held `schedctl leases` for minutes. The handshake
        # gets the connect bound; replies after it get read_timeout again (PyMySQL re-applies
        # _read_timeout to the socket before each read).
        read = cparams.get("read_timeout")
        connect = cparams.get("connect_timeout") or bounds.connect
        cparams = {**cparams, "read_timeout": min(read, connect) if read else connect}
        connection = urls.connect_guarded(
            engine, dialect, lambda: dialect.loaded_dbapi.connect(*cargs, **cparams)
        )
        if hasattr(connection, "_read_timeout"):
            connection._read_timeout = read
        return connection

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        mariadb = "mariadb" in dbapi_connection.get_server_info().lower()
        with dbapi_connection.cursor() as cursor:
            cursor.execute(mysql_session_sql(bounds, mariadb))
            if theirs:
                cursor.execute(theirs if isinstance(theirs, str) else theirs[-1])
        record.info["schedctl_ping_after"] = idle_ping_after(bounds, "mysql", mariadb, IDLE_PING_AFTER)


def _ping_when_idle(engine: Engine) -> None:
    """``pool_pre_ping``, but only for connections idle past ``IDLE_PING_AFTER``.

    A dead connection fails the ping, the pool replaces it and the caller never sees it. One that dies
    while in steady use fails its next statement instead, as it would have with a ping a moment earlier.
    """

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_connection: Any, record: Any) -> None:
        record.info["schedctl_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.pop("schedctl_idle_since", None)
        if since is None or time.monotonic() - since < record.info.get(
            "schedctl_ping_after", IDLE_PING_AFTER
        ):
            return
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError(str(exc)) from exc
        if not alive:
            raise DisconnectionError("the ping found the connection closed")


def _set_wal(cursor: Any) -> None:
    """``PRAGMA journal_mode = WAL``, waiting out a writer as busy_timeout would.

    Until a new file's first write commits, it is not in WAL mode yet, and switching it needs the file to
    ourselves: SQLite then answers "database is locked" at once, without its busy handler. Two processes
    opening a brand-new database together (two `serve --migrate`) meet exactly that.
    """
    import sqlite3

    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def _create_private_file(path: str) -> None:
    """Create a new database file 0600 before SQLite does (0644): it holds env values and output tails.
    SQLite gives the -wal and -shm files the database file's mode. An existing file keeps its mode."""
    import os

    # It exists (and keeps its mode), or SQLite will say in its own words why it cannot be made.
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "do_connect")
    def _before_connect(_dialect: Any, _record: Any, _cargs: Any, _cparams: Any) -> None:
        path = sqlite_path(engine.url)
        if path is not None:
            _create_private_file(str(path))

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite so "begin" below decides how transactions start.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if sqlite_file(engine.url) is not None:
            _set_wal(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        read_only = conn.get_execution_options().get(READ_ONLY, False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")
