"""One reading of the file a SQLite URL names, the same from the URL's text (``jobs``, before SQLAlchemy is
loaded) as from SQLAlchemy's parsed URL (the store, the CLI's opener, ``serve``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import make_url

from schedctl.store.sqlitefile import is_sqlite, sqlite_file, sqlite_path

CASES = [
    ("sqlite://", True, None, None),
    ("sqlite:///:memory:", True, None, None),
    ("sqlite:///schedctl.db", True, "schedctl.db", Path("schedctl.db")),
    ("sqlite:////var/lib/p%20q.db?timeout=3", True, "/var/lib/p q.db", Path("/var/lib/p q.db")),
    ("sqlite+pysqlite:///x.db", True, "x.db", Path("x.db")),
    ("sqlite:///file:x.db?mode=ro&uri=true", True, "file:x.db", None),  # only SQLite resolves a URI
    ("postgresql://u@h/db", False, None, None),
    ("mysql+pymysql://root@127.0.0.1:3306/test", False, None, None),
]


@pytest.mark.parametrize(("url", "sqlite", "file", "path"), CASES, ids=[c[0] for c in CASES])
def test_text_and_parsed_url_read_alike(url: str, sqlite: bool, file: str | None, path: Path | None) -> None:
    for given in (url, make_url(url)):
        assert (is_sqlite(given), sqlite_file(given), sqlite_path(given)) == (sqlite, file, path), given
