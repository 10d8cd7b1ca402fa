"""Alembic's entry point for schedctl's embedded migrations.

Only ever run through ``schedctl.store.migrate``, which passes an open connection (inside a transaction)
in ``config.attributes["connection"]``; there is no URL and no ``alembic.ini``.
"""

from __future__ import annotations

from alembic import context

from schedctl.store.migrate import VERSION_TABLE, compare_type
from schedctl.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("schedctl migrations run through `schedctl db upgrade`, not the alembic command")

context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table=VERSION_TABLE,
    # SQLite cannot ALTER most things: batch mode copies the table, so later revisions work there too.
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=compare_type,
)

with context.begin_transaction():
    context.run_migrations()
