"""Fixtures shared by every test.

Database tests take their servers from the environment: ``SCHEDCTL_TEST_POSTGRES_URL`` and
``SCHEDCTL_TEST_MYSQL_URL`` (SQLite always runs, on a temporary file). Each test gets a private PostgreSQL
schema or MySQL database, dropped afterwards. A URL that is set but unreachable fails the test; only an unset
one skips, and `-ra` shows the skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

BACKENDS = ("sqlite", "postgresql", "mysql")
ENV_FOR = {"postgresql": "SCHEDCTL_TEST_POSTGRES_URL", "mysql": "SCHEDCTL_TEST_MYSQL_URL"}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's shell must not leak into tests: drop schedctl's own variables and the host's zone."""
    for name in list(os.environ):
        if name.startswith("SCHEDCTL_") and not name.startswith("SCHEDCTL_TEST_"):
            monkeypatch.delenv(name)
    monkeypatch.delenv("TZ", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    # `import --dialect auto` reads the host's os-release: the suite must not depend on the machine it runs on.
    # Tests of Debian's dialect say --dialect debian (or point this at a Debian os-release).
    monkeypatch.setenv("SCHEDCTL_OS_RELEASE", str(Path(__file__).parent / "data" / "os-release-fedora"))


def _private_url(backend: str, tmp_path: Path) -> Iterator[str]:
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


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty private database on each backend."""
    yield from _private_url(request.param, tmp_path)


@pytest.fixture
def store(db_url: str) -> Iterator[object]:
    """A Store on each backend with the current schema."""
    from schedctl.store import open_store
    from schedctl.store.migrate import upgrade

    st = open_store(db_url)
    upgrade(st)
    try:
        yield st
    finally:
        st.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'schedctl.db'}"
