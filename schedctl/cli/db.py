"""``schedctl db upgrade|check|current``: the schema, through the migrations shipped in the package."""

from __future__ import annotations

import click

from schedctl.cli._options import db_option


@click.group("db")
def db() -> None:
    """Create, upgrade or check the database schema.

    Run `schedctl db upgrade` once per release, before starting the new version's replicas; a replica
    refuses to start against a schema older or newer than it understands.
    """


@db.command("upgrade")
@db_option
def upgrade(db_url: str) -> None:
    """Create the tables, or bring them to this schedctl's schema. Safe to repeat."""
    from schedctl.cli._store import explained, open_store_or_explain
    from schedctl.store import describe_target
    from schedctl.store.migrate import upgrade as run_upgrade

    store = open_store_or_explain(db_url, create=True)
    try:
        with explained(store):
            result = run_upgrade(store)
    finally:
        store.dispose()
    target = describe_target(db_url)
    if result.changed:
        click.echo(f"{target}: upgraded from {result.before or 'empty'} to {result.after}")
    else:
        click.echo(f"{target}: already at {result.after}, nothing to do")


@db.command("check")
@db_option
def check(db_url: str) -> None:
    """Exit 1, saying what to run, unless the schema is current.

    Current means exactly the revision this schedctl ships: older needs `schedctl db upgrade`; newer
    means a newer schedctl upgraded the database.
    """
    from schedctl.cli._store import open_checked_store
    from schedctl.store import describe_target
    from schedctl.store.migrate import head_revision

    open_checked_store(db_url).dispose()
    click.echo(f"{describe_target(db_url)}: schema {head_revision()} is current")


@db.command("current")
@db_option
def current(db_url: str) -> None:
    """Print the schema revision, and the one this schedctl needs."""
    from schedctl.cli._store import explained, open_store_or_explain
    from schedctl.store.migrate import check as check_schema

    store = open_store_or_explain(db_url)
    try:
        with explained(store):
            status = check_schema(store)
    finally:
        store.dispose()
    if status.ok:
        note = "current"
    elif status.newer:
        note = f"unknown here: upgraded by a newer schedctl; this one needs {status.head}"
    else:
        note = f"this schedctl needs {status.head}: run `schedctl db upgrade`"
    click.echo(f"{status.current or 'empty'} ({note})")
