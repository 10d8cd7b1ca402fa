"""`serve --smtp URL`: a URL it cannot use is one line and exit 2, before anything starts (and no password in it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://mail.example.com", "--smtp: the URL must start with smtp://, smtps://, smtp+starttls://"),
        ("smtp://robot:s3cret@", "--smtp: the URL names no host (write smtp://HOST:PORT)"),
        (
            "smtp://robot:s3cret@mail.example.com:99999",
            "--smtp: cannot read the URL: Port out of range 0-65535",
        ),
    ],
)
def test_a_bad_smtp_url_is_one_line(tmp_path: Path, url: str, message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "schedctl", "serve", "--role", "worker", "--db", f"sqlite:///{tmp_path}/x.db",
         "--smtp", url],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"schedctl: {message}"]
    assert "s3cret" not in done.stderr
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("name", ["", "a b", "evil\r\nBcc: x@example.com", "root@host", "<x>"])
def test_a_mail_hostname_that_is_no_host_name_is_one_line(tmp_path: Path, name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "schedctl", "serve", "--role", "worker", "--db", f"sqlite:///{tmp_path}/x.db",
         "--mail-hostname", name],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("schedctl: --mail-hostname ") and "give a host name such as" in line, line
    assert not (tmp_path / "x.db").exists()
