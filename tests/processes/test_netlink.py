"""The partition harness's link (`bench/netlink.py`) must recognise a statement however psycopg sends it.

psycopg prepares a statement after five runs on a connection and from then on sends only its name. A leader
fences at every dispatch, so by the time the harness arms a freeze on its fence the text has long stopped
crossing the wire; a link that learned names only while armed never froze, and the partition run failed
with "the leader sent no matching statement" (seen in CI). Real PostgreSQL, a real socket, no mock.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from netlink import Link  # noqa: E402

PROBE = (b"FROM schedctl_link_probe", b"FOR SHARE")


@pytest.fixture
def pg_link():
    url = os.environ.get("SCHEDCTL_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("SCHEDCTL_TEST_POSTGRES_URL is not set")
    import psycopg

    parts = make_url(url)
    link = Link(parts.host or "127.0.0.1", parts.port or 5432)
    conn = psycopg.connect(
        host="127.0.0.1",
        port=link.port,
        user=parts.username,
        dbname=parts.database,
        connect_timeout=5,
        autocommit=True,
    )
    conn.execute("SET statement_timeout = '20s'")
    conn.execute("CREATE TEMPORARY TABLE schedctl_link_probe (x int)")
    conn.execute("INSERT INTO schedctl_link_probe VALUES (1)")
    try:
        yield link, conn
    finally:
        link.heal()
        conn.close()
        link.close()


def _run_probe(conn) -> None:
    with conn.transaction():
        conn.execute("SELECT x FROM schedctl_link_probe WHERE x = %s FOR SHARE", (1,)).fetchall()


def test_a_freeze_armed_after_the_statement_was_prepared_still_falls_on_it(pg_link) -> None:
    link, conn = pg_link
    for _ in range(8):  # past psycopg's prepare threshold (5): the text is no longer sent after this
        _run_probe(conn)
    assert conn.prepare_threshold is not None and conn.prepare_threshold < 8
    link.freeze_after(*PROBE)
    probe = threading.Thread(target=_run_probe, args=(conn,), daemon=True)
    probe.start()
    deadline = time.monotonic() + 5  # margin: the statement reaches the link in milliseconds
    while not link.frozen and time.monotonic() < deadline:
        time.sleep(0.01)
    frozen = link.frozen
    link.heal()
    probe.join(15)
    assert frozen, "the armed freeze never fell on the prepared statement"
    assert not probe.is_alive()


def test_a_freeze_falls_on_the_statement_text_the_first_time(pg_link) -> None:
    link, conn = pg_link
    link.freeze_after(*PROBE)
    probe = threading.Thread(target=_run_probe, args=(conn,), daemon=True)
    probe.start()
    deadline = time.monotonic() + 5
    while not link.frozen and time.monotonic() < deadline:
        time.sleep(0.01)
    frozen = link.frozen
    link.heal()
    probe.join(15)
    assert frozen and not probe.is_alive()
