"""Schema creation and upgrades (placeholder until the Alembic migrations land: creates the model directly)."""

from __future__ import annotations

from schedctl.store import Store
from schedctl.store.schema import metadata


def upgrade(store: Store) -> None:
    metadata.create_all(store.engine)
