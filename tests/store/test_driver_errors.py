"""An error the driver raises on its own cursor (the bulk inserts run there, outside SQLAlchemy) is a
StoreError like any other: a full disk on PostgreSQL once raised psycopg's DiskFull through the scheduler's
thread and killed it (tests/processes/test_disk_full.py)."""

from __future__ import annotations

from typing import Any

import pytest

from schedctl.errors import StoreError


def test_a_driver_error_on_the_raw_cursor_is_a_store_error_naming_the_target(store: Any) -> None:
    with pytest.raises(StoreError) as caught, store.begin() as conn:
        cursor = conn.connection.driver_connection.cursor()
        cursor.execute("SELECT * FROM no_such_table_here")
    text = str(caught.value)
    assert text.startswith("database error on ") and "no_such_table_here" in text, text
    # The transaction was rolled back and the pool is usable: the next one works.
    with store.begin() as conn:
        assert conn.exec_driver_sql("SELECT 1").scalar_one() == 1
