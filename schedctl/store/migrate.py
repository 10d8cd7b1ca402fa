"""Schema creation and upgrades: Alembic migrations shipped inside the package.

Users never see an ``alembic.ini``: the configuration is built here, pointing at the ``migrations`` folder
next to this file (package data, so a non-editable install carries it). Alembic keeps its revision in
``schedctl_alembic_version`` rather than the usual ``alembic_version``, so schedctl can share a database or
schema with an application that has Alembic migrations of its own. The URL is used as given: with
``?options=-csearch_path=NAME`` on PostgreSQL every table, the version table too, lands in that schema.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schedctl.errors import SchemaMismatch
from schedctl.store import Store, describe_target

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import Connection

log = logging.getLogger("schedctl.migrate")

VERSION_TABLE = "schedctl_alembic_version"
UPGRADE_HINT = "run `schedctl db upgrade`"


@dataclass(frozen=True)
class SchemaStatus:
    """Where the database's schema is, against what this schedctl needs.

    ``current`` is None for a database schedctl never upgraded. ``known`` is False when ``current`` is a
    revision this schedctl does not ship, i.e. a newer schedctl upgraded the database.
    """

    current: str | None
    head: str
    ok: bool
    known: bool = True

    @property
    def newer(self) -> bool:
        return self.current is not None and not self.known


@dataclass(frozen=True)
class UpgradeResult:
    before: str | None
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def migrations_dir() -> Path:
    """The migrations folder inside the installed package (a real directory: Alembic imports files from it)."""
    return Path(str(resources.files("schedctl.store") / "migrations"))


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    # Config values go through ConfigParser interpolation: a '%' in the install path must be doubled.
    cfg.set_main_option("script_location", str(migrations_dir()).replace("%", "%%"))
    # env.py takes the connection from here instead of a URL, so the URL never passes through ConfigParser
    # (a password with '%' in it) and upgrade runs inside schedctl's own transaction discipline.
    cfg.attributes["connection"] = connection
    return cfg


def script_directory() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    head = script_directory().get_current_head()
    if head is None:  # pragma: no cover - the package always ships at least one revision
        raise SchemaMismatch("this schedctl ships no migrations")
    return head


def check(store: Store) -> SchemaStatus:
    """Read the database's revision (no writes) and compare it with this schedctl's head."""
    script = script_directory()
    head = script.get_current_head() or ""
    with store.read() as conn:
        current = _current_revision(conn)
    known = current is None or _is_known(script, current)
    return SchemaStatus(current=current, head=head, ok=current == head, known=known)


def require_current(store: Store) -> SchemaStatus:
    """Raise SchemaMismatch, saying what to run, unless the schema is exactly the one this schedctl needs."""
    status = check(store)
    if status.ok:
        return status
    raise SchemaMismatch(mismatch_message(status, describe_target(store.url)))


def mismatch_message(status: SchemaStatus, target: str) -> str:
    if status.current is None:
        return f"{target} has no schedctl schema, this schedctl needs revision {status.head}: {UPGRADE_HINT}"
    if status.newer:
        from schedctl import __version__

        return (
            f"database schema on {target} is at revision {status.current}, which schedctl {__version__} does "
            f"not know: it was upgraded by a newer schedctl; run that version (or newer) instead"
        )
    return (
        f"database schema on {target} is at revision {status.current}, this schedctl needs "
        f"{status.head}: {UPGRADE_HINT}"
    )


def upgrade(store: Store, revision: str = "head") -> UpgradeResult:
    """Bring the schema to this schedctl's head (or ``revision``). Safe to repeat; refuses a database a newer
    schedctl upgraded."""
    from alembic import command
    from alembic.util import CommandError

    from schedctl.store.dialect import migration_lock

    script = script_directory()
    # Two `serve --migrate` starting together: the second waits, then finds the schema current.
    with store.connect() as conn, migration_lock(conn), conn.begin():
        before = _current_revision(conn)
        if before is not None and not _is_known(script, before):
            status = SchemaStatus(before, script.get_current_head() or "", ok=False, known=False)
            raise SchemaMismatch(mismatch_message(status, describe_target(store.url)))
        try:
            command.upgrade(alembic_config(conn), revision)
        except CommandError as exc:
            raise SchemaMismatch(f"cannot upgrade {describe_target(store.url)}: {exc}") from None
        after = _current_revision(conn) or ""
    if before != after:
        log.info(
            "schema upgraded from %s to %s",
            before or "none",
            after,
            extra={"event": "schema_upgraded", "from_revision": before, "to_revision": after},
        )
    return UpgradeResult(before=before, after=after)


def _current_revision(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    heads = context.get_current_heads()
    # schedctl's history is linear; several heads would mean someone edited the version table by hand.
    if len(heads) > 1:
        raise SchemaMismatch(f"the database records several schema revisions ({', '.join(heads)})")
    return heads[0] if heads else None


def _is_known(script: ScriptDirectory, revision: str) -> bool:
    from alembic.util import CommandError

    try:
        return script.get_revision(revision) is not None
    except CommandError:
        return False


def make_revision(store: Store, message: str) -> Any:
    """For schedctl developers: write a new revision autogenerated from the model against ``store``.

    ``python -c "from schedctl.store import open_store; from schedctl.store.migrate import make_revision;
    make_revision(open_store('sqlite:///dev.db'), 'add a column')"`` after ``upgrade`` on that database.
    """
    from alembic import command

    # Sequential ids ("0002") read better than hashes in "schema is at 0001, this schedctl needs 0002".
    rev_id = f"{int(head_revision()) + 1:04d}"
    with store.begin() as conn:
        return command.revision(alembic_config(conn), message=message, autogenerate=True, rev_id=rev_id)


def compare_type(
    context: Any, inspected_column: Any, metadata_column: Any, inspected_type: Any, metadata_type: Any
) -> bool | None:
    """Alembic's type comparison, made exact for UTCDateTime: the kind, the time zone flag and the precision.

    Alembic compares a TypeDecorator by the name of the type it renders to, which would not notice a
    ``timestamp`` without time zone or a ``DATETIME`` that lost its microseconds. Other types (None) get
    Alembic's own comparison.
    """
    from sqlalchemy import DateTime

    from schedctl.store.types import UTCDateTime

    if not isinstance(metadata_type, UTCDateTime):
        return None
    wanted = metadata_type.load_dialect_impl(context.dialect)
    if not isinstance(inspected_type, DateTime):
        return True
    if bool(getattr(inspected_type, "timezone", False)) != bool(getattr(wanted, "timezone", False)):
        return True
    dialect = context.dialect.name
    return _precision(inspected_type, dialect) != _precision(wanted, dialect)


def _precision(type_: Any, dialect: str) -> int | None:
    """Fractional-second digits kept. PostgreSQL says `precision` (none given: microseconds), MySQL says `fsp`
    (none given: whole seconds); SQLite stores text, whatever the type says."""
    if dialect == "postgresql":
        value = getattr(type_, "precision", None)
        return 6 if value is None else int(value)
    if dialect in ("mysql", "mariadb"):
        return int(getattr(type_, "fsp", None) or 0)
    return None
