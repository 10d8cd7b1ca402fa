"""Fixtures shared by every test.

Database tests take their servers from the environment: ``SCHEDCTL_TEST_POSTGRES_URL`` and
``SCHEDCTL_TEST_MYSQL_URL`` (SQLite always runs, on a temporary file). Each test gets a private PostgreSQL
schema or MySQL database, dropped afterwards. A URL that is set but unreachable fails the test; only an unset
one skips, and `-ra` shows the skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from databases import BACKENDS, private_url


@pytest.fixture(autouse=True)
def _fresh_health() -> Iterator[None]:
    """Loops run in-process by one test must not leave their liveness or failing writes to the next."""
    from schedctl.observability import health

    health.reset()
    yield
    health.reset()


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


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty private database on each backend."""
    yield from private_url(request.param, tmp_path)


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
