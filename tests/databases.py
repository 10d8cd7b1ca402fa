"""Which databases the tests run on, and a private empty database on each for one test.

``SCHEDCTL_TEST_POSTGRES_URL`` and ``SCHEDCTL_TEST_MYSQL_URL`` name the servers (SQLite always runs, on a
temporary file). Each call gets a private PostgreSQL schema or MySQL database, dropped afterwards. A URL that is
set but unreachable fails; only an unset one skips. ``conftest.py``'s fixtures and the tests that need a
database of their own import this as ``databases`` (``pythonpath = ["tests"]``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

BACKENDS = ("sqlite", "postgresql", "mysql")
ENV_FOR = {"postgresql": "SCHEDCTL_TEST_POSTGRES_URL", "mysql": "SCHEDCTL_TEST_MYSQL_URL"}


def private_url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'schedctl.db'}"
        return
    base = os.environ.get(ENV_FOR[backend])
    if not base:
        pytest.skip(f"{ENV_FOR[backend]} is not set")
    from sqlalchemy import create_engine, make_url, text

    from schedctl.store import parse_url

    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(parse_url(base), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:  # an unreachable server raises here: a failure, never a skip
            if backend == "postgresql":
                conn.execute(text(f'CREATE SCHEMA "{name}"'))
            else:
                conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
        url = make_url(base)
        if backend == "postgresql":
            # One installation per schema, exactly as a user would put schedctl beside other tables.
            url = url.update_query_dict({"options": f"-csearch_path={name}"})
        else:
            url = url.set(database=name)
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            if backend == "postgresql":
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
            else:
                conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()
