"""schedctl.worker.mail without a network: the SMTP URL, when a run is mailed, the message's shape, and failures that
are logged and counted (the sending itself is tested against a real SMTP server in tests/processes/test_mail_smtp.py)."""

from __future__ import annotations

import logging
import socket
import time
from datetime import UTC, datetime

import pytest

from schedctl.errors import UsageError
from schedctl.observability import metrics
from schedctl.worker.executor import RunIdentity
from schedctl.worker.mail import Mailer, compose, parse_smtp_url, wants_mail

RUN = RunIdentity("report", datetime(2026, 12, 1, 3, 0, tzinfo=UTC), 1)
SNAPSHOT = {"command": "echo hi", "mailto": ["ops@example.com"], "mail_on": "output", "user": "alice"}


def test_smtp_urls() -> None:
    server = parse_smtp_url("smtp+starttls://robot:pw%40x@mail.example.com")
    assert (server.scheme, server.host, server.port, server.username, server.password) == (
        "smtp+starttls", "mail.example.com", 587, "robot", "pw@x",
    )  # fmt: skip
    assert str(server) == "smtp+starttls://robot@mail.example.com:587"  # never the password
    assert parse_smtp_url("smtps://mail.example.com", password="from-env").password == "from-env"
    assert parse_smtp_url("smtp://127.0.0.1:2525").port == 2525
    for bad, part in [
        ("http://mail.example.com", "must start with"),
        ("smtp://", "names no host"),
        ("smtp://mail.example.com:99999", "cannot read the URL"),
        ("smtp://mail.example.com/inbox", "only a host"),
    ]:
        with pytest.raises(UsageError, match=part):
            parse_smtp_url(bad)


@pytest.mark.parametrize(
    ("mail_on", "state", "output", "mailed"),
    [
        ("output", "succeeded", "hi\n", True),  # cron: any output is mailed, whatever the outcome
        ("output", "failed", "", False),  # cron: no output, no mail
        ("failure", "failed", "", True),
        ("failure", "timed_out", "", True),
        ("failure", "succeeded", "hi\n", False),
        ("always", "succeeded", "", True),
        ("never", "failed", "boom\n", False),
        ("always", "queued", "", False),  # a retry is not an outcome
    ],
)
def test_when_a_run_is_mailed(mail_on: str, state: str, output: str, mailed: bool) -> None:
    assert wants_mail(mail_on, state, output) is mailed


def test_a_long_output_says_it_was_cut() -> None:
    message = compose(SNAPSHOT, RUN, "succeeded", 0, "x" * 8192, hostname="web1.example.com", tail_limit=8192)
    assert message["Subject"] == "Cron <alice@web1> echo hi"
    assert message.get_content().endswith("\n[schedctl: output cut: only its last 8192 bytes are kept]\n")
    quiet = compose(SNAPSHOT, RUN, "failed", 3, "", hostname="h", tail_limit=8192)
    assert quiet.get_content() == "[schedctl: the run failed (exit status 3) with no output]\n"


def test_a_command_with_newlines_cannot_break_the_headers() -> None:
    message = compose(
        {**SNAPSHOT, "command": "x\nBcc: all@example.com"},
        RUN,
        "succeeded",
        0,
        "o",
        hostname="h",
        tail_limit=8192,
    )
    assert message["Bcc"] is None
    assert "\n" not in message["Subject"]


def test_without_smtp_the_unsent_mail_is_logged_once_per_job(caplog: pytest.LogCaptureFixture) -> None:
    mailer = Mailer(None, 8192, hostname="h")
    with caplog.at_level(logging.WARNING, logger="schedctl.mail"):
        for _ in range(3):
            mailer.after_run(SNAPSHOT, RUN, "succeeded", 0, "hi\n")
        mailer.after_run({**SNAPSHOT}, RunIdentity("other", RUN.scheduled_for, 1), "succeeded", 0, "hi\n")
    events = [r.message for r in caplog.records if getattr(r, "event", "") == "mail_not_configured"]
    assert len(events) == 2 and "job report mails its output to ops@example.com" in events[0]


def test_a_refused_connection_is_logged_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    before = metrics.MAIL_FAILURES._value.get()
    mailer = Mailer(parse_smtp_url(f"smtp://127.0.0.1:{port}"), 8192, hostname="h")
    with caplog.at_level(logging.WARNING, logger="schedctl.mail"):
        mailer.after_run(SNAPSHOT, RUN, "succeeded", 0, "hi\n")
        deadline = time.monotonic() + 15  # one refused connection: milliseconds; 15 s for a loaded machine
        while metrics.MAIL_FAILURES._value.get() == before and time.monotonic() < deadline:
            time.sleep(0.02)
        mailer.close(wait=5)
    assert metrics.MAIL_FAILURES._value.get() == before + 1
    assert any(getattr(r, "event", "") == "mail_failed" for r in caplog.records)


def test_the_mail_names_this_host_by_gethostname_as_cron_does() -> None:
    # Not getfqdn(): on a host whose name maps to 127.0.0.1 (this machine, most containers) it says localhost,
    # and it may wait on DNS. A name given to the worker (`serve --mail-hostname`) wins.
    assert Mailer(None, 8192).hostname == socket.gethostname()
    assert Mailer(None, 8192, hostname="db1.example.org").hostname == "db1.example.org"
