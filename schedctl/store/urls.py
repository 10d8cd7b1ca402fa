"""Database URLs checked before use and masked before they are shown (issue 16).

A URL is refused before anything connects when it cannot mean what the operator wants: no database named
(``postgresql://`` would use libpq's defaults and create the schema in some other database), a driver option
the driver does not have (PyMySQL raised a TypeError deep in the connection), a SQLite file whose folder
does not exist (``missing_sqlite_folder``: not an outage to retry, a typo), a password with an unencoded ``@`` (its tail would be read
as the host, and printed). Shown URLs mask the password and every credential-looking query value.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from schedctl.errors import StoreError
from schedctl.store.sqlitefile import sqlite_file, sqlite_path
from schedctl.text.secrets import MASK, SECRET_NAME, mask_query_secrets

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Engine


def masked(url: URL) -> str:
    """The URL as it may be printed: the password and credential-looking query values replaced by ***."""
    return mask_query_secrets(url.render_as_string(hide_password=True))


def scrub(text: str, url: URL) -> str:
    """``text`` with the URL's own secrets removed, wherever a driver's message repeated them."""
    secrets = [url.password] if url.password else []
    secrets += [str(v) for k, v in url.query.items() if SECRET_NAME.search(k) and isinstance(v, str)]
    for secret in sorted((s for s in secrets if s and len(str(s)) >= 2), key=len, reverse=True):
        text = text.replace(str(secret), MASK)
    return mask_query_secrets(text)


# postgresql:// and postgres://, with or without a driver: the schemes whose authority may list hosts.
_PG_SCHEME = re.compile(r"^(postgres|postgresql)(\+[A-Za-z0-9_]+)?://", re.IGNORECASE)
_HOSTNAME = re.compile(r"^[A-Za-z0-9._-]*$")


def libpq_multihost(text: str) -> str:
    """libpq's multi-host URL (``postgresql://u@h1:5432,h2:5432/db?...``) as SQLAlchemy reads one:
    ``postgresql://u@/db?host=h1,h2&port=5432,5432&...``. Any other URL comes back unchanged.

    make_url reads the whole ``h1:5432,h2:5432`` as host and port and fails on the port's int(). The
    comma form of the query (not the repeated ``host=h:p``) is what libpq's own URI parser accepts too, so
    the LISTEN connection (store.wake), which hands the rendered URL to psycopg, reaches the same hosts.
    """
    scheme = _PG_SCHEME.match(text)
    if scheme is None:
        return text
    rest = text[scheme.end() :]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, hostlist = authority.rpartition("@")
    if "," not in hostlist:
        return text
    if "@" in userinfo:  # what check_parsed says of one host, said before the hosts are moved out of reach
        raise StoreError(_UNENCODED_AT)
    pairs = [_host_port(token) for token in hostlist.split(",")]
    path, _, query = tail.partition("?")
    if re.search(r"(^|&)(host|port)=", query):
        raise StoreError(
            "invalid database URL: hosts listed both before the database and in ?host= or ?port=; "
            "give them one way"
        )
    listed = "host=" + quote(",".join(h for h, _ in pairs), safe="")
    if any(p is not None for _, p in pairs):
        listed += "&port=" + quote(",".join(p or "" for _, p in pairs), safe="")
    return f"{scheme.group(0)}{userinfo}{at}{path or '/'}?{listed}{'&' + query if query else ''}"


def _host_port(token: str) -> tuple[str, str | None]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` -> (host, port or None)."""
    port: str | None
    if token.startswith("["):
        host, close, after = token[1:].partition("]")
        if not close or (after and not after.startswith(":")):
            raise StoreError(f"invalid database URL: {token[:60]!r} is not a host")
        port = after[1:] or None
    else:
        host, colon, after = token.partition(":")
        port = after if colon else None
    if not host:
        raise StoreError("invalid database URL: an empty host in the list of hosts")
    if port is not None and not port.isdigit():
        raise StoreError(f"invalid database URL: the port of host {host[:60]!r} is not a number")
    return host, port


def normalize_hosts(url: URL) -> URL:
    """SQLAlchemy's repeated ``?host=h1:p1&host=h2:p2`` as ``?host=h1,h2&port=p1,p2``: the same hosts for
    SQLAlchemy's psycopg dialect, and a form libpq's URI parser reads too (see ``libpq_multihost``)."""
    listed = url.query.get("host")
    if url.get_backend_name() != "postgresql" or not isinstance(listed, tuple):
        return url
    if "port" in url.query:
        raise StoreError(
            "invalid database URL: ?host=HOST:PORT given more than once and ?port= too; give ports one way"
        )
    pairs = []
    for token in listed:
        host, colon, port = token.rpartition(":") if not token.startswith("[") else token.partition("]:")
        if not colon or not port.isdigit() or (":" in host and not host.startswith("[")):
            host, port = token, ""  # no port (a bare IPv6 address keeps its colons)
        pairs.append((host.strip("[]"), port))
    query = {k: v for k, v in url.query.items() if k != "host"}
    query["host"] = ",".join(h for h, _ in pairs)
    if any(p for _, p in pairs):
        query["port"] = ",".join(p for _, p in pairs)
    return url.set(query=query)


def hosts(url: URL) -> list[str]:
    """Every server a PostgreSQL/MySQL URL names, as ``host`` or ``host:port``, in the order tried."""
    listed = url.query.get("host")
    if url.get_backend_name() == "postgresql" and isinstance(listed, str) and listed:
        ports = str(url.query.get("port") or "").split(",")
        names = listed.split(",")
        ports = ports if len(ports) == len(names) else ports[:1] * len(names)
        return [_shown(h, p) for h, p in zip(names, ports, strict=True)]
    return [_shown(url.host or "localhost", str(url.port or ""))]


def _shown(host: str, port: str) -> str:
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port else host


def check_parsed(url: URL) -> None:
    """What make_url accepts but cannot be right. Never echoes the user or password."""
    if url.host and "@" in url.host:
        raise StoreError(_UNENCODED_AT)


_UNENCODED_AT = (
    "invalid database URL: an '@' in the user name or password must be written %40 "
    "(percent-encoded); as given, part of the password would be read as the host"
)


def check_target(url: URL) -> None:
    """Refuse a server URL that names no database: libpq and PyMySQL would pick one of their own."""
    if url.get_backend_name() != "sqlite" and not url.database:
        raise StoreError(
            f"{masked(url)} names no database: add it after the host, e.g. "
            f"{url.get_backend_name()}://user@host/schedctl"
        )


def missing_sqlite_folder(url: URL) -> StoreError | None:
    """SQLite's "unable to open database file" when the file's folder does not exist: a typo, not an outage."""
    path = sqlite_path(url)
    if path is None or path.parent.is_dir():
        return None
    return StoreError(
        f"sqlite file {sqlite_file(url)}: the folder {path.parent} does not exist (create it, or fix the path)"
    )


def check_connect_args(engine: Engine) -> None:
    """Options in the URL's query that the driver would reject with a traceback at the first connect."""
    if engine.dialect.name != "mysql" or engine.dialect.driver != "pymysql":
        return
    try:
        import pymysql  # type: ignore[import-untyped]
        import pymysql.charset  # type: ignore[import-untyped]
    except ImportError:  # the driver's absence is reported where the engine is made
        return
    try:
        _args, kwargs = engine.dialect.create_connect_args(engine.url)
    except (TypeError, ValueError) as exc:  # SQLAlchemy's own conversion: ?connect_timeout=abc
        raise StoreError(
            f"{masked(engine.url)}: a query option has a bad value: {scrub(str(exc), engine.url)}"
        ) from None
    accepted = set(inspect.signature(pymysql.connections.Connection.__init__).parameters) - {"self"}
    unknown = sorted(set(kwargs) - accepted - {"client_flag"})
    if unknown:
        raise StoreError(
            f"{masked(engine.url)}: PyMySQL has no option {', '.join(repr(k) for k in unknown)} "
            "(remove it from the URL's query)"
        )
    charset: Any = kwargs.get("charset")
    if charset and pymysql.charset.charset_by_name(str(charset)) is None:
        raise StoreError(f"{masked(engine.url)}: unknown MySQL charset {str(charset)[:40]!r}")


def guard_driver_errors(engine: Engine) -> None:
    """What a driver raises outside its own error classes while connecting (PyMySQL: a ValueError for a bad
    ``?local_infile=``, FileNotFoundError for a missing ``?ssl_ca=``) becomes one line instead of a traceback.
    A missing or unreadable file is permanent (StoreError); another OS error may pass (StoreUnavailable).
    For a backend that has its own ``do_connect`` listener, that listener calls ``connect_guarded`` instead:
    the first listener to return a connection is the only one SQLAlchemy runs."""
    from sqlalchemy import event

    @event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        return connect_guarded(engine, dialect, lambda: dialect.connect(*cargs, **cparams))


def connect_guarded(engine: Engine, dialect: Any, connect: Callable[[], Any]) -> Any:
    """``connect()``, with the driver's stray exceptions turned into one-line StoreErrors (see above)."""
    from schedctl.errors import StoreUnavailable

    try:
        return connect()
    except dialect.loaded_dbapi.Error:
        raise
    except (FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        where = exc.filename or "a file named in the URL's query"
        raise StoreError(f"cannot connect with {masked(engine.url)}: {exc.strerror}: {where}") from None
    except OSError as exc:
        raise StoreUnavailable(f"cannot reach {masked(engine.url)}: {scrub(str(exc), engine.url)}") from None
    except (TypeError, ValueError, AttributeError, LookupError) as exc:
        raise StoreError(
            f"{masked(engine.url)}: the driver refused an option: {scrub(str(exc), engine.url)}"
        ) from None
