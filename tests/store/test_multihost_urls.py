"""Issue 26: PostgreSQL URLs naming several hosts, in libpq's form and in SQLAlchemy's.

libpq's ``postgresql://u@h1:5432,h2:5432/db`` used to be refused ("the port is not a number"), and
SQLAlchemy's ``?host=h1:p&host=h2:p`` connected but was described as "postgresql at localhost/db". Both now
reach the same hosts in the same order, for the engine and for the LISTEN connection, and every description
names every host. The real connection test names the local server twice, the first time on port 1, where
nothing listens: connecting proves the second host was tried.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from databases import private_url
from launch import child_env
from sqlalchemy import make_url, text

from schedctl.errors import StoreError
from schedctl.store import describe_target, open_store, parse_url, safe_url, wake
from schedctl.store.migrate import upgrade

LIBPQ = "postgresql://u:secret@db1.example:5432,db2.example:5433/app?target_session_attrs=read-write"
REPEATED = (
    "postgresql://u:secret@/app?host=db1.example:5432&host=db2.example:5433&target_session_attrs=read-write"
)


@pytest.mark.parametrize("url", [LIBPQ, REPEATED], ids=["libpq", "repeated"])
def test_both_multi_host_forms_parse_to_the_same_hosts_and_ports(url: str) -> None:
    parsed = parse_url(url)
    assert parsed.drivername == "postgresql+psycopg"
    assert (parsed.host, parsed.port, parsed.database, parsed.password) == (None, None, "app", "secret")
    assert dict(parsed.query) == {
        "host": "db1.example,db2.example",
        "port": "5432,5433",
        "target_session_attrs": "read-write",
    }
    # What SQLAlchemy's psycopg dialect hands the driver: libpq's comma lists, in the given order.
    _, kwargs = parsed.get_dialect()().create_connect_args(parsed)
    assert (kwargs["host"], kwargs["port"]) == ("db1.example,db2.example", "5432,5433")
    assert kwargs["target_session_attrs"] == "read-write"


@pytest.mark.parametrize("url", [LIBPQ, REPEATED], ids=["libpq", "repeated"])
def test_the_description_names_every_host_and_the_shown_url_no_password(url: str) -> None:
    assert describe_target(url) == "postgresql at db1.example:5432,db2.example:5433/app"
    assert "secret" not in safe_url(url) and "***" in safe_url(url)


@pytest.mark.parametrize(
    ("url", "described"),
    [
        ("postgres://u@h1,h2/db", "postgresql at h1,h2/db"),  # no ports: libpq's default for each
        ("postgresql://u@h1:5432,h2/db", "postgresql at h1:5432,h2/db"),
        ("postgresql+psycopg://u@[::1]:5432,[fe80::1]:5433/db", "postgresql at [::1]:5432,[fe80::1]:5433/db"),
        ("postgresql://u@/db?host=h1,h2&port=5432,5433", "postgresql at h1:5432,h2:5433/db"),
        ("postgresql://u@/db?host=h1,h2&port=5432", "postgresql at h1:5432,h2:5432/db"),  # one port for all
        ("postgresql://u@h1:5432/db", "postgresql at h1:5432/db"),
        ("postgresql://u@/db?host=/run/postgresql", "postgresql at /run/postgresql/db"),
        ("mysql://root@127.0.0.1:3306/test", "mysql at 127.0.0.1:3306/test"),
    ],
)
def test_descriptions_of_other_host_forms(url: str, described: str) -> None:
    assert describe_target(url) == described


def test_a_libpq_url_keeps_its_other_query_options_and_an_encoded_password() -> None:
    parsed = parse_url("postgresql://u:p%40ss@h1,h2/db?sslmode=require&connect_timeout=3")
    assert parsed.password == "p@ss"
    assert dict(parsed.query) == {"host": "h1,h2", "sslmode": "require", "connect_timeout": "3"}


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://u@h1:54x2,h2:5432/db", "the port of host 'h1' is not a number"),
        ("postgresql://u@h1:5432,,h2/db", "an empty host in the list of hosts"),
        ("postgresql://u@h1,h2/db?host=h3", "give them one way"),
        ("postgresql://u@/db?host=h1:1&host=h2:2&port=3", "give ports one way"),
        ("postgresql://u:p@ss@h1,h2/db", "must be written %40"),
        ("postgresql://u@h1:x/db", "the port is not a number"),  # one host: as before
    ],
)
def test_a_bad_multi_host_url_is_refused_in_one_line(url: str, message: str) -> None:
    with pytest.raises(StoreError, match=re.escape(message)) as caught:
        parse_url(url)
    assert "\n" not in str(caught.value) and "ss@" not in str(caught.value)


def test_urls_of_one_host_are_left_as_they_were() -> None:
    for url in ("postgresql://u@h1:5432/db", "mysql://u@h,1/db", "sqlite:///a,b.db"):
        parsed = parse_url(url)
        assert "host" not in parsed.query
    assert parse_url("mysql://u@h,1/db").host == "h,1"  # not PostgreSQL: not a list of hosts


# -- the real server, named twice ---------------------------------------------------------------------------


@pytest.fixture
def multihost(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """libpq's form naming 127.0.0.1:1 (nothing listens) first, then the test server, in a private schema;
    and the test server's port."""
    for private in private_url("postgresql", tmp_path):
        url = make_url(private)
        options = quote(str(url.query["options"]), safe="")
        port = url.port or 5432
        yield (
            f"postgresql://{url.username}@127.0.0.1:1,{url.host}:{port}/{url.database}"
            f"?target_session_attrs=read-write&options={options}",
            port,
        )


def test_a_libpq_multi_host_url_connects_to_the_second_host_when_the_first_refuses(
    multihost: tuple[str, int], tmp_path: Path
) -> None:
    multihost_url, server_port = multihost
    store = open_store(multihost_url)
    try:
        upgrade(store)
        with store.connect() as conn:
            port, read_only = conn.execute(
                text("SELECT inet_server_port(), current_setting('transaction_read_only')")
            ).one()
        assert (port, read_only) == (server_port, "off")
        # The LISTEN connection is psycopg's own, from the rendered URL: it must reach the same server.
        listener = wake.PgListener(store.url, lambda fd, data: None, lambda fd: None, lambda: 0.0)
        listener.refresh(0.0)
        assert listener._conn is not None, "LISTEN did not connect through the host list"
        listener.close()
    finally:
        store.dispose()
    # The command line says which hosts it uses, every one of them, in one line.
    result = subprocess.run(
        [sys.executable, "-m", "schedctl", "db", "upgrade", "--db", multihost_url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=child_env(),
    )
    assert result.returncode == 0, result.stderr
    assert "postgresql at 127.0.0.1:1,127.0.0.1:" in result.stdout + result.stderr
