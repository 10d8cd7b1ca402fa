"""Issue 24: a root worker trusts nothing a job user controls.

Each test is one attack by a job that runs as ``nobody`` under a real ``serve --role all --run-as-job-user``
(as root), against the checkpoint hand-over and the clean-up after a run. In every case the worker
survives, a later run on the same worker starts within 10 s of the attack's end, nothing outside the job
user's reach is read or removed, and the attack's run row says in one line what happened.

Before issue 24 the worker read ``$SCHEDCTL_CHECKPOINT_FILE`` as root through whatever the job left at
that path: the symlink case stored the secret and handed it to the retry, ``/dev/zero`` and ``/dev/urandom``
read until ``MemoryError``, and the FIFO blocked the worker for good. Now the path is the worker's own
descriptor (``/dev/fd/N``, schedctl/worker/checkpoint.py), so there is nothing to swap.

The hard-link case needs ``fs.protected_hardlinks = 0`` to get as far as the link on any version (with 1,
the kernel itself refuses a link to a file the user can neither read nor write); it runs either way, since
what it asserts holds either way.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from launch import serve

pytestmark = [
    pytest.mark.processes,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="--run-as-job-user needs root"),
]

SECRET = "i24-root-only-5f1e9c"
F = '"$SCHEDCTL_CHECKPOINT_FILE"'


@dataclass(frozen=True)
class Attack:
    command: str
    retries: int = 0
    # What the attack's first run row must say (a substring of its error), or None: the run's record is
    # the job's own exit, and its output tail shows the tool that failed.
    says: str | None = None


ATTACKS = {
    # The retry prints the checkpoint it was handed: the secret, if the worker read it through the link.
    "symlink-to-root-only-file": Attack(
        f'ln -sf {{secret}} {F}; echo "handed=$SCHEDCTL_CHECKPOINT"; exit 1', retries=1, says="status 1"
    ),
    "hard-link-to-root-only-file": Attack(
        f'ln -f {{secret}} {F}; echo "handed=$SCHEDCTL_CHECKPOINT"; exit 1', retries=1, says="status 1"
    ),
    "dev-zero": Attack(f"ln -sf /dev/zero {F}; exit 0"),
    "dev-urandom": Attack(f"ln -sf /dev/urandom {F}; exit 0"),
    "fifo": Attack(f"rm -f {F}; mkfifo {F}; exit 0"),
    "directory": Attack(f"rm -f {F}; mkdir {F}; exit 0"),
    "sparse-2-gib": Attack(f"truncate -s 2G {F}; exit 0", says="over the 64 KiB cap: not saved"),
    # After the main process exits, a background one keeps at it while the worker reads the final value.
    "swapped-after-exit": Attack(
        "( for i in 1 2 3 4 5 6 7 8 9 10; do rm -f {F}; ln -sf {{secret}} {F}; truncate -s 2G {F}; "
        "sleep 0.1; done ) >/dev/null 2>&1 & exit 0".replace("{F}", F)
    ),
    # What a run leaves for clean-up: links out of every folder it can name, /etc among them.
    "symlinks-left-for-clean-up": Attack(
        f'd=$(dirname {F}); ln -s /etc "$d/etc"; ln -s {{decoy}} "$d/decoy"; '
        f'ln -s /etc "$HOME/etc-i24" 2>/dev/null; cd {{playground}} && ln -s /etc etc && ln -s {{decoy}} decoy '
        "&& mkdir sub && ln -s {decoy} sub/decoy; exit 0"
    ),
}


@dataclass(frozen=True)
class Host:
    """Root-only things a job must not reach, and a folder the job may write (and leave links in)."""

    secret: Path
    decoy: Path
    playground: Path


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    # 0711: nobody may name the secret (so a link to it can be made) but neither list nor read it.
    vault = Path(tempfile.mkdtemp(prefix="i24-vault-", dir="/tmp"))
    os.chmod(vault, 0o711)
    secret = vault / "secret.json"
    secret.write_text(f'{{"token": "{SECRET}"}}')
    os.chmod(secret, 0o600)
    decoy = vault / "decoy"
    decoy.mkdir(mode=0o700)
    (decoy / "keep").write_text("root's")
    playground = Path(tempfile.mkdtemp(prefix="i24-play-", dir="/tmp"))
    os.chown(playground, nobody.pw_uid, nobody.pw_gid)
    try:
        yield Host(secret, decoy, playground)
    finally:
        shutil.rmtree(vault, ignore_errors=True)
        shutil.rmtree(playground, ignore_errors=True)


def _jobs(attack: Attack, host: Host) -> str:
    command = attack.command.format(secret=host.secret, decoy=host.decoy, playground=host.playground)
    literal = command.replace("\\", "\\\\").replace('"', '\\"')
    return f"""\
[jobs.attack]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
user = "nobody"
workdir = "/"
retries = {attack.retries}
retry_backoff = "0s"
command = "{literal}"

[jobs.after]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
user = "nobody"
workdir = "/"
command = "true"
"""


def _rows(db: Path, job_id: str) -> list[sqlite3.Row]:
    try:
        with sqlite3.connect(db, timeout=10) as conn:
            conn.row_factory = sqlite3.Row
            return conn.execute(
                "SELECT * FROM job_runs WHERE job_id = ? ORDER BY scheduled_for", (job_id,)
            ).fetchall()
    except sqlite3.OperationalError:
        return []


def _everything_stored(db: Path) -> str:
    with sqlite3.connect(db, timeout=10) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(repr(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"'))


def _instant(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text).timestamp()


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_attack_through_the_checkpoint_or_the_clean_up_fails(
    name: str, host: Host, tmp_path: Path
) -> None:
    attack = ATTACKS[name]
    (tmp_path / "jobs.toml").write_text(_jobs(attack, host))
    db = tmp_path / "schedctl.db"
    log = tmp_path / "serve.log"
    proc = serve(
        "--migrate", "--db", f"sqlite:///{db}", "--jobs", "jobs.toml", "--run-as-job-user",
        "--poll-interval", "200ms",
        log=log, cwd=tmp_path,
    )  # fmt: skip
    try:
        ended = None
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"the worker died:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, (
                f"no attack ended and no later run started:\n{log.read_text()[-3000:]}"
            )
            done = [r for r in _rows(db, "attack") if r["finished_at"] is not None and r["state"] != "queued"]
            if done and ended is None:
                ended = done[0]
            if ended is not None:
                later = [
                    r
                    for r in _rows(db, "after")
                    if r["started_at"] is not None and r["started_at"] > ended["finished_at"]
                ]
                if later:
                    break
            time.sleep(0.1)
        gap = _instant(later[0]["started_at"]) - _instant(ended["finished_at"])
        print(f"{name}: next run started {gap:.3f} s after the attack's run ended")
        assert gap <= 10.0
        if attack.retries:  # let the retry run: it is what would print the secret
            while not [r for r in _rows(db, "attack") if r["state"] == "failed"]:
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.1)
        time.sleep(1.5)  # a background process of the swap attack outlives its run by a second
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.wait(timeout=30)
    assert out == 0, log.read_text()[-3000:]
    first = [r for r in _rows(db, "attack") if r["state"] != "queued"][0]
    error = first["error"] or ""
    assert "\n" not in error
    if attack.says is not None:
        assert attack.says in error, dict(first)
    # Nothing outside the job user's reach was read...
    stored = _everything_stored(db)
    assert SECRET not in stored and SECRET not in log.read_text()
    listed = subprocess.run(
        [sys.executable, "-m", "schedctl", "logs", "attack", "--db", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert SECRET not in listed.stdout + listed.stderr
    # ...or removed.
    assert (host.decoy / "keep").read_text() == "root's"
    assert Path("/etc/passwd").is_file() and Path("/etc").is_dir() and not Path("/etc").is_symlink()
    assert host.secret.read_text() == f'{{"token": "{SECRET}"}}'
    assert "Traceback" not in log.read_text()
