"""Issue 16 items 6, 7, 14, 17, 19: database URLs refused or masked before use; refusals are not outages."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from databases import ENV_FOR
from launch import child_env
from sqlalchemy import create_engine, make_url, text

from schedctl.errors import StoreError
from schedctl.observability.http import ReadinessCheck
from schedctl.observability.logging import mask_secrets
from schedctl.store import open_store, parse_url, safe_url
from schedctl.store.migrate import upgrade

JOBS = '[jobs.a]\nschedule = "0 1 * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "true"\n'


def schedctl(*args: str, cwd: Path, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = child_env()
    # A retry loop (the bug) shows as TimeoutExpired: the test fails instead of hanging.
    return subprocess.run(
        [sys.executable, "-m", "schedctl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


# -------------------------------------------------------------------------------- item 6: name a database


@pytest.mark.parametrize("url", ["postgresql://", "postgresql://127.0.0.1:5432", "mysql://root@127.0.0.1/"])
def test_a_url_that_names_no_database_is_refused_before_connecting(url: str, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="names no database: add it after the host"):
        open_store(url)
    result = schedctl("db", "upgrade", "--db", url, cwd=tmp_path)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "names no database" in result.stderr


# ------------------------------------------------------------------------------- item 7: MySQL URL options


@pytest.mark.parametrize(
    ("query", "message"),
    [("foo=bar", "PyMySQL has no option 'foo'"), ("charset=bogus", "unknown MySQL charset 'bogus'")],
)
def test_a_bad_mysql_option_is_one_line_not_a_traceback(query: str, message: str, tmp_path: Path) -> None:
    url = f"mysql://root@127.0.0.1:3306/test?{query}"
    for args in (
        ["db", "upgrade"],
        ["runs"],
        ["serve", "--jobs", str(tmp_path / "j.toml"), "--log-format", "json"],
    ):
        (tmp_path / "j.toml").write_text(JOBS)
        result = schedctl(*args, "--db", url, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        assert [line for line in result.stderr.splitlines() if "schedctl:" in line] == [
            f"schedctl: mysql+pymysql://root@127.0.0.1:3306/test?{query}: {message}"
            + (" (remove it from the URL's query)" if "foo" in query else "")
        ]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("connect_timeout=abc", "a query option has a bad value: invalid literal for int()"),
        ("local_infile=maybe", "a query option has a bad value: String is not true/false"),
        ("ssl_ca=/no/such/ca.pem", "No such file or directory: a file named in the URL's query"),
    ],
)
def test_a_bad_mysql_option_value_is_one_line_too(query: str, message: str, tmp_path: Path) -> None:
    result = schedctl("runs", "--db", f"mysql://root@127.0.0.1:3306/test?{query}", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert message in line


# ---------------------------------------------------------------------------------- item 14: masked URLs


def test_credentials_in_the_query_are_masked() -> None:
    url = "postgresql://app@db.example/x?password=hunter2&sslpassword=pw2&application_name=me"
    shown = safe_url(url)
    assert "hunter2" not in shown and "pw2" not in shown
    assert "password=***" in shown and "application_name=me" in shown
    assert mask_secrets(f"cannot use {url}") == (
        "cannot use postgresql://app@db.example/x?password=***&sslpassword=***&application_name=me"
    )


def test_an_unencoded_at_in_the_password_is_refused_without_echoing_it(tmp_path: Path) -> None:
    url = "postgresql://app:pa@ss-tail@127.0.0.1:5432/test"
    with pytest.raises(StoreError) as raised:
        parse_url(url)
    assert "ss-tail" not in str(raised.value) and "%40" in str(raised.value)
    assert safe_url(url) == "<invalid database URL>"
    result = schedctl("runs", "--db", url, cwd=tmp_path)
    assert result.returncode == 1 and "ss-tail" not in result.stderr and "pa@" not in result.stderr


def test_a_query_password_never_reaches_the_error_line(tmp_path: Path) -> None:
    result = schedctl("runs", "--db", "postgresql://app@127.0.0.1:1/x?password=hunter2&x=1", cwd=tmp_path)
    assert result.returncode == 1
    assert "hunter2" not in result.stderr


# --------------------------------------------------------------------- item 19: SQLite folder, empty file


def test_a_missing_sqlite_folder_is_permanent_one_line_exit_1(tmp_path: Path) -> None:
    (tmp_path / "j.toml").write_text(JOBS)
    db = tmp_path / "no-such-folder" / "x.db"
    for args in (["serve", "--jobs", "j.toml", "--migrate"], ["db", "upgrade"]):
        result = schedctl(*args, "--db", f"sqlite:///{db}", cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        assert f"schedctl: sqlite file {db}: the folder {db.parent} does not exist" in result.stderr
        assert "retrying" not in result.stderr


def test_serve_refusing_a_new_sqlite_file_leaves_no_file(tmp_path: Path) -> None:
    (tmp_path / "j.toml").write_text(JOBS)
    result = schedctl("serve", "--jobs", "j.toml", "--db", "sqlite:///new.db", cwd=tmp_path)
    assert result.returncode == 1
    assert "sqlite file new.db does not exist: run `schedctl db upgrade`" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.toml"]


# ------------------------------------------------------------------- item 17: permission and credentials


def _admin(backend: str) -> object:
    return create_engine(parse_url(os.environ[ENV_FOR[backend]]), isolation_level="AUTOCOMMIT")


@pytest.fixture
def read_only_url(db_url: str) -> Iterator[str]:
    """The migrated database of ``db_url``, as a user that may only read it."""
    st = open_store(db_url)
    upgrade(st)
    st.dispose()
    url = make_url(db_url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        yield f"sqlite:///file:{url.database}?mode=ro&uri=true"
        return
    role, password = f"i16ro_{uuid.uuid4().hex[:10]}", "ro-pw"
    admin = _admin(backend)
    with admin.connect() as conn:  # type: ignore[attr-defined]
        if backend == "postgresql":
            schema = url.query["options"].split("=", 1)[1]
            conn.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'"))
            conn.execute(text(f'GRANT USAGE ON SCHEMA "{schema}" TO {role}'))
            conn.execute(text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {role}'))
        else:
            conn.execute(text(f"CREATE USER '{role}'@'%' IDENTIFIED BY '{password}'"))
            conn.execute(text(f"GRANT SELECT ON `{url.database}`.* TO '{role}'@'%'"))
    try:
        yield url.set(username=role, password=password).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:  # type: ignore[attr-defined]
            if backend == "postgresql":
                conn.execute(text(f"DROP OWNED BY {role}"))
                conn.execute(text(f"DROP ROLE {role}"))
            else:
                conn.execute(text(f"DROP USER '{role}'@'%'"))
        admin.dispose()  # type: ignore[attr-defined]


def test_serve_with_a_read_only_user_stops_at_once_with_one_line(read_only_url: str, tmp_path: Path) -> None:
    (tmp_path / "j.toml").write_text(JOBS)
    result = schedctl("serve", "--jobs", "j.toml", "--db", read_only_url, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("schedctl: ") and "refused a statement" in last, result.stderr
    assert "unavailable" not in result.stderr and "ro-pw" not in result.stderr


def test_readyz_is_not_ready_while_writes_are_refused(read_only_url: str) -> None:
    st = open_store(read_only_url)
    try:
        readiness = ReadinessCheck(st)()
    finally:
        st.dispose()
    assert not readiness.ok
    assert "refused a statement" in readiness.detail


@pytest.mark.parametrize("backend", ["postgresql", "mysql"])
def test_a_wrong_password_does_not_ask_whether_the_server_runs(backend: str, tmp_path: Path) -> None:
    base = os.environ.get(ENV_FOR[backend])
    if not base:
        pytest.skip(f"{ENV_FOR[backend]} is not set")
    wrong = (
        make_url(base).set(username="i16_nobody", password="wrong-pw").render_as_string(hide_password=False)
    )
    result = schedctl("runs", "--db", wrong, cwd=tmp_path)
    assert result.returncode == 1
    assert "refused the login" in result.stderr, result.stderr
    assert "is the server running" not in result.stderr and "wrong-pw" not in result.stderr
