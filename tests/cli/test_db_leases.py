"""`schedctl db ...`, `schedctl leases`, and the one-line errors every one-shot command gives."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from schedctl.cli import main
from schedctl.cli._store import open_checked_store
from schedctl.errors import SchemaMismatch, StoreError, StoreUnavailable
from schedctl.leader import lease
from schedctl.store import open_store
from schedctl.store.migrate import VERSION_TABLE, head_revision, upgrade

HEAD = head_revision()
PASSWORD = "s3cret-pw"


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def _url(store) -> str:
    return store.url.render_as_string(hide_password=False)


def test_db_upgrade_prints_from_and_to_then_nothing_to_do(capsys, sqlite_url):
    code, out, err = run(capsys, "db", "upgrade", "--db", sqlite_url)
    assert (code, err) == (0, "")
    assert out.strip().endswith(f"schedctl.db: upgraded from empty to {HEAD}")
    code, out, _ = run(capsys, "db", "upgrade", "--db", sqlite_url)
    assert code == 0 and out.strip().endswith(f"already at {HEAD}, nothing to do")


def test_db_upgrade_reads_the_url_from_the_environment(capsys, sqlite_url, monkeypatch):
    monkeypatch.setenv("SCHEDCTL_DATABASE_URL", sqlite_url)
    assert run(capsys, "db", "upgrade")[0] == 0
    assert run(capsys, "db", "check")[0] == 0


def test_db_check_exits_1_saying_what_to_run_then_0_once_upgraded(capsys, db_url):
    open_store(db_url).dispose()
    if db_url.startswith("sqlite"):
        Path(db_url.removeprefix("sqlite:///")).touch()  # an existing, empty file
    code, out, err = run(capsys, "db", "check", "--db", db_url)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and "has no schedctl schema" in err and "run `schedctl db upgrade`" in err
    assert run(capsys, "db", "upgrade", "--db", db_url)[0] == 0
    code, out, err = run(capsys, "db", "check", "--db", db_url)
    assert (code, err) == (0, "") and f"schema {HEAD} is current" in out


def test_db_current_names_the_revision(capsys, sqlite_url):
    Path(sqlite_url.removeprefix("sqlite:///")).touch()
    code, out, _ = run(capsys, "db", "current", "--db", sqlite_url)
    assert (code, out.strip()) == (0, f"empty (this schedctl needs {HEAD}: run `schedctl db upgrade`)")
    run(capsys, "db", "upgrade", "--db", sqlite_url)
    assert run(capsys, "db", "current", "--db", sqlite_url)[1].strip() == f"{HEAD} (current)"


def test_a_schema_from_a_newer_schedctl_fails_check_and_every_one_shot_command(capsys, store):
    with store.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))
    for args in (("db", "check"), ("leases",), ("db", "upgrade")):
        code, out, err = run(capsys, *args, "--db", _url(store))
        assert (code, out) == (1, ""), args
        assert "upgraded by a newer schedctl" in err and err.count("\n") == 1, args
    assert "9999 (unknown here" in run(capsys, "db", "current", "--db", _url(store))[1]


@pytest.mark.parametrize(
    ("url", "names"),
    [
        (f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/test", "postgresql at 127.0.0.1:1/test"),
        (f"mysql://root:{PASSWORD}@127.0.0.1:1/test", "mysql at 127.0.0.1:1/test"),
    ],
)
def test_an_unreachable_server_is_one_line_naming_the_host_never_the_password(capsys, url, names):
    for args in (("leases",), ("db", "check"), ("db", "upgrade"), ("db", "current")):
        code, out, err = run(capsys, *args, "--db", url)
        assert (code, out) == (1, ""), args
        assert err.count("\n") == 1 and err.startswith(f"schedctl: cannot reach {names}"), err
        assert "is the server running?" in err and PASSWORD not in err
    with pytest.raises(StoreUnavailable):
        open_checked_store(url)


@pytest.mark.parametrize(
    "url",
    ["not a url", f"postgresql://u:{PASSWORD}@db.example:port/x", f"nosuchdb://u:{PASSWORD}@h/x"],
)
def test_a_malformed_url_is_one_line_without_the_password(capsys, url):
    code, out, err = run(capsys, "leases", "--db", url)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and PASSWORD not in err
    assert "invalid database URL" in err or "cannot use" in err
    with pytest.raises(StoreError):
        open_checked_store(url)


def test_an_unmigrated_sqlite_file_says_run_db_upgrade(capsys, sqlite_url):
    open_store(sqlite_url).dispose()
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    path.touch()
    with pytest.raises(SchemaMismatch, match=r"sqlite file .*schedctl.db has no schedctl schema.*db upgrade"):
        open_checked_store(sqlite_url)
    code, _, err = run(capsys, "leases", "--db", sqlite_url)
    assert code == 1 and "run `schedctl db upgrade`" in err


def test_a_missing_sqlite_file_is_not_created_by_a_read(capsys, tmp_path):
    path = tmp_path / "typo.db"
    code, _, err = run(capsys, "leases", "--db", f"sqlite:///{path}")
    assert code == 1 and "does not exist: run `schedctl db upgrade`" in err
    assert not path.exists()


def test_open_checked_store_returns_a_usable_store(store):
    checked = open_checked_store(_url(store))
    try:
        assert lease.current(checked, "cron") is None
    finally:
        checked.dispose()


def test_leases_before_any_scheduler_ran(capsys, store):
    code, out, _ = run(capsys, "leases", "--db", _url(store))
    assert code == 0 and out.strip() == "lease cron: never held (no scheduler has run against this database)"
    doc = json.loads(run(capsys, "leases", "--json", "--db", _url(store))[1])
    assert doc["holder_identity"] is None and doc["held"] is False and doc["terms"] == []


def test_leases_json_uses_kubernetes_lease_vocabulary(capsys, store):
    lease.acquire_or_renew(store, "cron", "host-a:1:aa", -1)
    lease.acquire_or_renew(store, "cron", "host-b:2:bb", 15, catch_up_grace=300)
    code, out, _ = run(capsys, "leases", "--json", "--db", _url(store))
    doc = json.loads(out)
    assert code == 0
    assert (doc["name"], doc["holder_identity"], doc["held"], doc["term"]) == ("cron", "host-b:2:bb", True, 2)
    assert doc["lease_transitions"] == 1 and abs(doc["lease_duration_seconds"] - 15) < 0.01
    assert 0 < doc["expires_in_seconds"] <= 15 and 0 <= doc["renewed_ago_seconds"] < 5
    for key in ("db_time", "acquire_time", "renew_time", "expire_time"):
        assert doc[key].endswith("+00:00"), key
    assert [(t["term"], t["holder_identity"], t["end_reason"]) for t in doc["terms"]] == [
        (2, "host-b:2:bb", None),
        (1, "host-a:1:aa", "expired"),
    ]
    assert set(doc["terms"][1]) == {
        "term",
        "holder_identity",
        "acquire_time",
        "renew_time",
        "expire_time",
        "end_time",
        "end_reason",
        "schedctl_version",
        "tzdata_version",
        "catch_up_grace_seconds",
    }
    # Each leader records the grace it splits late from missed ticks by; the first one recorded none.
    assert [t["catch_up_grace_seconds"] for t in doc["terms"]] == [300, None]
    line = run(capsys, "leases", "-o", "jsonl", "--db", _url(store))[1]
    assert line.count("\n") == 1 and json.loads(line)["term"] == 2


def test_leases_text_shows_a_lapsed_lease_and_the_terms(capsys, store):
    lease.acquire_or_renew(store, "cron", "host-a:1:aa", 300)
    result = lease.acquire_or_renew(store, "cron", "host-a:1:aa", -2)
    code, out, _ = run(capsys, "leases", "--db", _url(store))
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(
        f"lease cron: no leader; term {result.term} of host-a:1:aa lapsed"
    )
    # Seconds to a tenth under a minute (durations.span): lapsed 2 s ago, renewed as it was taken.
    assert re.match(r".* lapsed \d+\.\ds ago \(renewed \d+\.\ds ago, 0 transitions\)$", lines[0]), lines[0]
    assert lines[2].split() == ["TERM", "HOLDER", "ACQUIRED", "RENEWED", "ENDED", "HOW", "SCHEDCTL", "TZDATA"]
    assert lines[3].split()[:2] == ["1", "host-a:1:aa"] and lines[3].split()[4:6] == ["-", "-"]
    doc = json.loads(run(capsys, "leases", "--json", "--db", _url(store))[1])
    assert doc["held"] is False and -3 < doc["expires_in_seconds"] < 0


def test_the_command_modules_do_not_import_sqlalchemy_at_import_time():
    program = (
        "import sys, schedctl.cli.db, schedctl.cli.leases, schedctl.cli._store;"
        "print([m for m in ('sqlalchemy', 'alembic', 'rich') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_db_upgrade_creates_the_tables_on_every_backend(capsys, db_url):
    code, out, _ = run(capsys, "db", "upgrade", "--db", db_url)
    assert code == 0 and f"upgraded from empty to {HEAD}" in out
    st = open_store(db_url)
    try:
        assert upgrade(st).before == HEAD
    finally:
        st.dispose()


@pytest.mark.parametrize("scheme", ["mysql", "postgresql"])
def test_a_silent_listener_fails_with_one_line_within_15_seconds(scheme):
    """A server that accepts the connection and never speaks (a half-open link, a stuck proxy): PyMySQL's
    connect_timeout did not cover its handshake read, and `schedctl leases` waited minutes."""
    import socket
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    started = time.monotonic()
    try:
        # The command's own bound is the 5 s connect timeout (one retry at most); 15 s is the promise.
        done = subprocess.run(
            [sys.executable, "-m", "schedctl", "leases", "--db", f"{scheme}://root@127.0.0.1:{port}/x"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        listener.close()
    elapsed = time.monotonic() - started
    assert done.returncode == 1
    assert elapsed < 15, elapsed
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach" in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_serve_refuses_a_lease_too_short_to_commit_in(capsys):
    """Lease 2 s: the commit bound (1 s + 0.5) leaves a leader 0.3 s after each renewal to write in, less
    than a 1 s renewal interval, so it would lead without ever dispatching."""
    code, _, err = run(
        capsys, "serve", "--db", "sqlite:///x.db", "--lease-duration", "2s", "--renew-interval", "1s"
    )
    assert code == 2 and "--renew-interval must be shorter than 0.3s for a 2s lease" in err
