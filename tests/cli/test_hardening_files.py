"""Issue 16: the files schedctl reads and writes for an operator, as root, on a host others use.

Only regular files are read or written: a device node or FIFO at ``-o PATH`` is refused (``--force`` or not),
a symbolic link is refused, not followed; a FIFO given as a job file or crontab is one line, never a hang;
replacing a file keeps its owner, group and mode; a closed stdin is one line.
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from schedctl.cli import main
from schedctl.jobs.config import load_jobs

CRONTAB = "0 1 * * * /usr/local/bin/nightly\n"
WITH_ENV = "TOKEN=s3cret\n0 2 * * * /usr/local/bin/report\n"
IMPORT = ("--timezone", "UTC", "--catch-up", "skip")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mknod, chown)")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.stdin = sys.__stdin__
    out, err = capsys.readouterr()
    return code, out, err


def schedctl(*args: str, timeout: float = 20, **kwargs: object) -> subprocess.CompletedProcess[str]:
    # A hang (the bug) shows as TimeoutExpired: the test fails instead of blocking the suite.
    return subprocess.run(
        [sys.executable, "-m", "schedctl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,  # type: ignore[call-overload]
    )


@pytest.fixture
def crontab(tmp_path: Path) -> Path:
    path = tmp_path / "mine.cron"
    path.write_text(CRONTAB)
    return path


@pytest.fixture
def jobs_file(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(
        '[jobs.a]\nschedule = "0 1 * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "true"\n'
    )
    return path


# ------------------------------------------------------------------------------------------ item 1: -o PATH


@root_only
@pytest.mark.parametrize("force", [False, True])
def test_import_never_replaces_a_device_node(capsys, crontab: Path, tmp_path: Path, force: bool) -> None:
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a second /dev/null
    code, _, err = run(capsys, "import", str(crontab), *IMPORT, "-o", str(device), *(["--force"] * force))
    assert code == 1
    assert err.strip().splitlines() == [
        f"schedctl: -o {device}: a character device: nothing written; schedctl writes only regular files"
    ]
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.cron", "null"]  # no temporary file left


def test_export_never_replaces_a_fifo(capsys, jobs_file: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, _, err = run(capsys, "export", str(jobs_file), "-o", str(fifo), "--force")
    assert code == 1 and "a FIFO (named pipe): nothing written" in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_symlink_at_the_output_is_refused_not_followed(
    capsys, crontab: Path, jobs_file: Path, tmp_path: Path
) -> None:
    """Following it as root writes wherever the link's owner pointed it: refused, the target untouched."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("precious\n")
    link = tmp_path / "out.toml"
    link.symlink_to(elsewhere)
    for command in (["import", str(crontab), *IMPORT], ["export", str(jobs_file)]):
        code, _, err = run(capsys, *command, "-o", str(link), "--force")
        assert code == 1
        assert f"-o {link}: a symbolic link (to {elsewhere}): nothing written" in err
        assert link.is_symlink() and elsewhere.read_text() == "precious\n"


def test_a_dangling_symlink_is_refused_too(capsys, crontab: Path, tmp_path: Path) -> None:
    link = tmp_path / "jobs.toml"
    link.symlink_to(tmp_path / "not-yet")
    code, _, err = run(capsys, "import", str(crontab), *IMPORT, "-o", str(link))
    assert code == 1 and "a symbolic link" in err
    assert not (tmp_path / "not-yet").exists()


# ------------------------------------------------------------------------------ item 8: owner, group, mode


@root_only
@pytest.mark.parametrize("how", ["--force", "--merge"])
def test_replacing_keeps_owner_group_and_mode(capsys, tmp_path: Path, how: str) -> None:
    target = tmp_path / "jobs.toml"
    target.write_text("")
    os.chown(target, 4321, 4322)
    os.chmod(target, 0o640)
    cron = tmp_path / "env.cron"
    cron.write_text(WITH_ENV)  # env values: a private file, yet the group the service reads with stays
    code, _, err = run(capsys, "import", str(cron), *IMPORT, "-o", str(target), how)
    assert code == 0, err
    info = target.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o640)
    assert "report" in load_jobs(target)


def test_env_values_drop_the_others_bits_of_a_kept_mode(capsys, tmp_path: Path) -> None:
    target = tmp_path / "jobs.toml"
    target.write_text("")
    os.chmod(target, 0o664)
    cron = tmp_path / "env.cron"
    cron.write_text(WITH_ENV)
    code, _, err = run(capsys, "import", str(cron), *IMPORT, "-o", str(target), "--force")
    assert code == 0, err
    assert stat.S_IMODE(target.stat().st_mode) == 0o660


# ----------------------------------------------------------------------------- item 9: FIFOs as input files


def test_a_fifo_as_job_file_is_one_line_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "jobs.toml"
    os.mkfifo(fifo)
    for args in (["validate", "--jobs", str(fifo)], ["jobs", "--jobs", str(fifo)]):
        result = schedctl(*args, cwd=tmp_path)
        assert result.returncode == 78, result.stderr
        assert result.stderr.strip().splitlines() == [
            f"{fifo}: a FIFO (named pipe), not a regular file: not read"
        ]


def test_serve_refuses_a_fifo_as_job_file(tmp_path: Path) -> None:
    fifo = tmp_path / "jobs.toml"
    os.mkfifo(fifo)
    result = schedctl("serve", "--jobs", str(fifo), "--db", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path)
    assert result.returncode == 78, result.stderr
    assert "a FIFO (named pipe), not a regular file" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_fifo_as_crontab_is_one_line_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "crontab"
    os.mkfifo(fifo)
    result = schedctl("import", str(fifo), *IMPORT, cwd=tmp_path)
    assert result.returncode == 1
    assert f"{fifo}: error: a FIFO (named pipe), not a regular file: not read" in result.stderr


def test_stdin_stays_allowed_for_import(tmp_path: Path) -> None:
    result = schedctl("import", "-", *IMPORT, input=CRONTAB, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "[jobs.nightly]" in result.stdout


# ----------------------------------------------------------------------------------- item 11: closed stdin


def test_import_with_stdin_closed_is_one_line(tmp_path: Path, crontab: Path) -> None:
    closed = 'exec 0<&-; exec "$@"'
    result = subprocess.run(
        ["sh", "-c", closed, "sh", sys.executable, "-m", "schedctl", "import", "-", *IMPORT],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == ["schedctl: -: standard input is closed: nothing to import"]
    # A file import needs no stdin at all.
    result = subprocess.run(
        ["sh", "-c", closed, "sh", sys.executable, "-m", "schedctl", "import", str(crontab), *IMPORT],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode == 0, result.stderr
