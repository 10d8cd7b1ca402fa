"""Opening the database for one-shot commands (runs, missed, status, leases, ...).

Every failure becomes one line naming the target (host or file, never the password) and what to do, and
exits 1 through ``main()``: an unreachable server, a malformed URL, a missing SQLite file, an unmigrated or
newer schema. Imported only inside command functions: it pulls in SQLAlchemy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from schedctl.cli._options import DEFAULT_DB
from schedctl.errors import StoreError, StoreUnavailable

if TYPE_CHECKING:
    from schedctl.store import Store

URL_HINT = "check --db or SCHEDCTL_DATABASE_URL"


def open_store_or_explain(db_url: str, create: bool = False) -> Store:
    """A Store for ``db_url`` that has not connected yet. A SQLite file must exist unless ``create``."""
    from pathlib import Path

    from schedctl.store import describe_target, open_store, parse_url
    from schedctl.store.sqlitefile import sqlite_path

    try:
        parsed = parse_url(db_url)
    except StoreError as exc:
        raise StoreError(
            f"{exc} ({URL_HINT}; e.g. sqlite:///schedctl.db or postgresql://user@host/db)"
        ) from None
    path = sqlite_path(parsed)
    if path is not None and not create:
        if not path.exists():
            # Connecting would create an empty file as a side effect of a read-only command.
            if db_url == DEFAULT_DB:
                raise StoreError(
                    f"no database given, and the default {describe_target(parsed)} does not exist in "
                    f"{Path.cwd()}: point at yours with --db URL or `export SCHEDCTL_DATABASE_URL=URL` "
                    "(e.g. postgresql://user@host/db), or create this one with `schedctl db upgrade`"
                )
            raise StoreError(
                f"{describe_target(parsed)} does not exist: run `schedctl db upgrade` to create it, or {URL_HINT}"
            )
    return open_store(parsed)


def say_database(store: Store) -> None:
    """One short line on stderr naming the database a listing read (host and database, never the password),
    so a default `./schedctl.db` is never mistaken for the production database."""
    import click

    from schedctl.store import describe_target

    click.echo(f"database: {describe_target(store.url)}", err=True)


def open_checked_store(db_url: str) -> Store:
    """A Store whose schema is exactly the one this schedctl needs, or a one-line StoreError saying why not."""
    from schedctl.store.migrate import require_current

    store = open_store_or_explain(db_url)
    try:
        with explained(store):
            require_current(store)
    except BaseException:
        store.dispose()
        raise
    return store


def open_store_if_present(db_url: str) -> Store | None:
    """`open_checked_store`, or None when the URL names a SQLite file that is not there (or memory), decided
    without SQLAlchemy: `jobs` lists definitions before any database exists and must not create one."""
    from schedctl.store.sqlitefile import is_sqlite, sqlite_path

    if not db_url:
        return None
    if is_sqlite(db_url):
        path = sqlite_path(db_url)
        if path is None or not path.is_file():
            return None
    return open_checked_store(db_url)


@contextlib.contextmanager
def explained(store: Store) -> Iterator[None]:
    """Store errors raised inside become one line; an unreachable database also says what to check."""
    try:
        yield
    except StoreUnavailable as exc:
        from schedctl.store.dialect import unreachable_hint

        hint = unreachable_hint(store.dialect)
        raise StoreUnavailable(_one_line(f"{exc} ({hint} {URL_HINT})")) from None
    except StoreError as exc:
        raise type(exc)(_one_line(str(exc))) from None


def _one_line(text: str) -> str:
    return " ".join(text.split())
