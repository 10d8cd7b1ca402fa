"""cron's mail, sent by a real `serve --role all` to a real SMTP server on 127.0.0.1, on every backend.

The server is a small SMTP sink written on the standard library's sockets (RFC 5321's commands, one thread per
connection): it stores every message it accepts, exactly as it received it.
"""

from __future__ import annotations

import email
import email.policy
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import pytest
from launch import child_env, serve
from sqlalchemy import select

from schedctl.store import open_store
from schedctl.store.schema import job_runs

pytestmark = [pytest.mark.processes, pytest.mark.slow]


class SmtpSink:
    """Accepts every mail; ``messages`` holds (envelope sender, recipients, parsed message)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.messages: list[tuple[str, list[str], EmailMessage]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        reader = conn.makefile("rb")
        conn.sendall(b"220 sink ESMTP\r\n")
        sender, recipients = "", []
        try:
            for raw in reader:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                verb = line[:4].upper()
                if verb in ("EHLO", "HELO"):
                    conn.sendall(b"250-sink\r\n250 8BITMIME\r\n")
                elif verb == "MAIL":
                    sender, recipients = line.partition(":")[2].strip().strip("<>").split(">")[0], []
                    conn.sendall(b"250 ok\r\n")
                elif verb == "RCPT":
                    recipients.append(line.partition(":")[2].strip().strip("<>"))
                    conn.sendall(b"250 ok\r\n")
                elif verb == "DATA":
                    conn.sendall(b"354 go ahead\r\n")
                    data = b"".join(iter(lambda: reader.readline(), b".\r\n"))
                    # Undo SMTP's dot-stuffing and CRLF line ends.
                    wire = data.replace(b"\r\n..", b"\r\n.").replace(b"\r\n", b"\n")
                    message = email.message_from_bytes(wire, policy=email.policy.default)
                    self.messages.append((sender, recipients, message))  # type: ignore[arg-type]
                    conn.sendall(b"250 queued\r\n")
                elif verb == "QUIT":
                    conn.sendall(b"221 bye\r\n")
                    return
                else:
                    conn.sendall(b"250 ok\r\n")
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.server.close()


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    server = SmtpSink()
    try:
        yield server
    finally:
        server.close()


JOBS = """\
[jobs.report]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
command = "echo 'disk /var is 91% full'"
mailto = ["ops@example.com", "alice"]
mailfrom = "cron@example.com"

[jobs.quiet]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
command = "true"
mailto = "ops@example.com"

[jobs.fails]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
command = "echo 'pg_dump: connection refused' >&2; exit 3"
mailto = "dba@example.com"
mail_on = "failure"

[jobs.passes-quietly]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
command = "echo fine"
mailto = "dba@example.com"
mail_on = "failure"

[jobs.no-mail]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
command = "echo printed"
mailto = ""
"""


def _serve(
    db_url: str, tmp_path: Path, smtp: str, *extra: str, **env: str
) -> tuple[subprocess.Popen[bytes], Path]:
    (tmp_path / "jobs.toml").write_text(JOBS)
    log = tmp_path / "serve.log"
    proc = serve(
        "--role", "all", "--migrate", "--db", db_url, "--jobs", str(tmp_path / "jobs.toml"),
        "--poll-interval", "200ms", "--log-format", "json", *extra,
        log=log, stdout=subprocess.DEVNULL, cwd=tmp_path, env=child_env(SCHEDCTL_SMTP_URL=smtp, **env),
    )  # fmt: skip
    return proc, log


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def _by_job(sink: SmtpSink) -> dict[str, list[tuple[str, list[str], EmailMessage]]]:
    out: dict[str, list[tuple[str, list[str], EmailMessage]]] = {}
    for item in list(sink.messages):
        out.setdefault(str(item[2]["X-Schedctl-Job"]), []).append(item)
    return out


def test_run_output_is_mailed_as_cron_mails_it(db_url: str, tmp_path: Path, sink: SmtpSink) -> None:
    proc, log = _serve(db_url, tmp_path, f"smtp://127.0.0.1:{sink.port}")
    try:
        # Margin: every job fires each second; 60 s covers a loaded machine's start-up (~2 s on a quiet one).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            mailed = _by_job(sink)
            if len(mailed.get("report", [])) >= 2 and len(mailed.get("fails", [])) >= 2:
                break
            time.sleep(0.2)
    finally:
        _stop(proc)
    mailed = _by_job(sink)
    assert len(mailed.get("report", [])) >= 2 and len(mailed.get("fails", [])) >= 2, log.read_text()[-3000:]
    # cron's rule: mail only when there is output; mail_on = "failure" only for failures; "" never.
    assert set(mailed) == {"report", "fails"}

    sender, recipients, message = mailed["report"][0]
    # cron's host name: gethostname(), never the resolver's answer (which is `localhost` on hosts whose name
    # maps to 127.0.0.1, as in containers and on this machine: the issue 30 report).
    host = socket.gethostname()
    assert (sender, recipients) == ("cron@example.com", ["ops@example.com", "alice"])
    assert message["From"] == "Cron Daemon <cron@example.com>"
    assert message["To"] == "ops@example.com, alice"
    assert message["Subject"] == f"Cron <{_me()}@{host.split('.')[0]}> echo 'disk /var is 91% full'"
    assert message["Auto-Submitted"] == "auto-generated"
    assert message.get_content_type() == "text/plain"
    assert message.get_content() == "disk /var is 91% full\n"

    sender, recipients, message = mailed["fails"][0]
    assert (sender, recipients) == (f"schedctl@{host}", ["dba@example.com"])
    assert message["X-Schedctl-State"] == "failed" and message["X-Schedctl-Exit-Status"] == "3"
    assert "pg_dump: connection refused" in message.get_content()

    store = open_store(db_url)
    try:
        with store.begin() as conn:
            rows = conn.execute(select(job_runs.c.job_id, job_runs.c.state, job_runs.c.attempt)).all()
    finally:
        store.dispose()
    assert {(j, s) for j, s, _ in rows if j == "report"} == {("report", "succeeded")}


@pytest.mark.parametrize("how", ["flag", "env"])
def test_the_mail_hostname_setting_names_the_host_in_the_mail(
    db_url: str, tmp_path: Path, sink: SmtpSink, how: str
) -> None:
    name = "db1.example.org"
    extra, env = (("--mail-hostname", name), {}) if how == "flag" else ((), {"SCHEDCTL_MAIL_HOSTNAME": name})
    proc, log = _serve(db_url, tmp_path, f"smtp://127.0.0.1:{sink.port}", *extra, **env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and not _by_job(sink).get("fails"):
            time.sleep(0.2)
    finally:
        _stop(proc)
    mailed = _by_job(sink)
    assert mailed.get("fails") and mailed.get("report"), log.read_text()[-3000:]
    sender, _, message = mailed["fails"][0]
    assert sender == f"schedctl@{name}" and message["From"] == f"Cron Daemon <schedctl@{name}>"
    assert message["Subject"] == f"Cron <{_me()}@db1> echo 'pg_dump: connection refused' >&2; exit 3"
    assert str(message["Message-ID"]).endswith("@db1.example.org>")
    assert mailed["report"][0][2]["Subject"].startswith(f"Cron <{_me()}@db1> ")


def test_a_mail_that_cannot_be_sent_never_fails_the_run(db_url: str, tmp_path: Path) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: every connection is refused
    proc, log = _serve(db_url, tmp_path, f"smtp://mailer:s3cret@127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if log.read_text().count('"event":"mail_failed"') >= 2:
                break
            time.sleep(0.2)
    finally:
        _stop(proc)
    text = log.read_text()
    assert text.count('"event":"mail_failed"') >= 2, text[-3000:]
    assert "s3cret" not in text
    store = open_store(db_url)
    try:
        with store.begin() as conn:
            rows = conn.execute(select(job_runs.c.job_id, job_runs.c.state, job_runs.c.attempt)).all()
    finally:
        store.dispose()
    report = [(s, a) for j, s, a in rows if j == "report"]
    assert report and all(s in ("succeeded", "running", "queued") and a == 1 for s, a in report), report
    assert ("succeeded", 1) in report


def _me() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name
