"""The file a SQLite URL names: the one reading of it, for the store, the CLI, ``serve`` and ``jobs``.

Without SQLAlchemy, so ``schedctl jobs`` can tell "no database yet" before importing it: a string URL is
split as SQLAlchemy's ``make_url`` would; a parsed ``URL`` is read from its fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

if TYPE_CHECKING:
    from sqlalchemy.engine import URL


def _backend_and_database(url: str | URL) -> tuple[str, str | None]:
    if not isinstance(url, str):
        return url.get_backend_name(), url.database
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "", None
    rest = rest.split("?", 1)[0]
    # sqlite:// (nothing after the authority) is an in-memory database, as make_url reads it
    return scheme.split("+")[0].lower(), unquote(rest[1:]) if rest.startswith("/") else None


def is_sqlite(url: str | URL) -> bool:
    return _backend_and_database(url)[0] == "sqlite"


def sqlite_file(url: str | URL) -> str | None:
    """The database file as written in the URL (a ``file:`` URI included); None for an in-memory database
    and for every other backend."""
    backend, database = _backend_and_database(url)
    if backend != "sqlite" or database in (None, "", ":memory:"):
        return None
    return database


def sqlite_path(url: str | URL) -> Path | None:
    """The file on disk, for the checks that look at it (does it exist, is its folder there); None also for a
    ``file:`` URI, which only SQLite resolves."""
    file = sqlite_file(url)
    if file is None or file.startswith("file:"):
        return None
    return Path(file)
