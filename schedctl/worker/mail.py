"""Cron's mail: a run's output mailed to the job's ``mailto``, by the worker, after the outcome is recorded.

cron mails each job's output (stdout and stderr) to ``MAILTO``, or to the crontab's owner; ``MAILTO=""`` sends
none. For many crontabs that is the only alerting there is, so a migration keeps it: jobs carry ``mailto``,
``mailfrom`` and ``mail_on`` (``output``, cron's rule, by default), and ``serve --smtp URL`` sends the mail.

The message has cron's shape (cronie src/do_command.c, as stored at 0022401f): ``From: ADDRESS (Cron Daemon)``,
``To:``, ``Subject: Cron <USER@HOST> COMMAND`` (the host's first name label), ``Content-Type: text/plain;
charset=UTF-8``, ``Auto-Submitted: auto-generated`` (RFC 3834), then the output as the body. cron's
``X-Cron-Env`` headers are not copied: they would mail every env value, secrets included. The body is the output
the run keeps (its last ``output_tail_bytes``, 8 KiB by default); a longer output says so in a last line.

Sending never holds the worker: mails go through a bounded queue to one sending thread, each SMTP conversation
bounded by ``SMTP_TIMEOUT``. A mail that cannot be sent is logged and counted
(``schedctl_mail_failures_total``); it never fails or retries the run, whose outcome is already recorded.
"""

from __future__ import annotations

import logging
import os
import pwd
import queue
import shlex
import smtplib
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formataddr, formatdate, make_msgid
from typing import Any
from urllib.parse import unquote, urlsplit

from schedctl.errors import UsageError
from schedctl.jobs.job import MailOn, RunState
from schedctl.observability import metrics
from schedctl.worker.executor import RunIdentity

log = logging.getLogger("schedctl.mail")

SMTP_TIMEOUT = 10.0  # seconds for each SMTP connection and command
QUEUE_LIMIT = 1000  # mails waiting to be sent; beyond that one is dropped (logged and counted), never blocks
PASSWORD_ENV = "SCHEDCTL_SMTP_PASSWORD"
_SCHEMES = {"smtp": 25, "smtps": 465, "smtp+starttls": 587}
_FAILED_STATES = (RunState.FAILED, RunState.TIMED_OUT)
_MAILED_STATES = (RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT, RunState.CANCELLED)


@dataclass(frozen=True)
class SmtpServer:
    scheme: str
    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def __str__(self) -> str:  # for logs: never the password
        user = f"{self.username}@" if self.username else ""
        return f"{self.scheme}://{user}{self.host}:{self.port}"


def parse_smtp_url(url: str, password: str | None = None) -> SmtpServer:
    """``smtp://host:port``, ``smtps://…`` (TLS from the start), ``smtp+starttls://…``; ``user[:password]@``
    optional. ``password`` (from $SCHEDCTL_SMTP_PASSWORD) wins over one in the URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"--smtp: cannot read the URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise UsageError(f"--smtp: the URL must start with {', '.join(s + '://' for s in _SCHEMES)}")
    if not parts.hostname:
        raise UsageError("--smtp: the URL names no host (write smtp://HOST:PORT)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UsageError("--smtp: the URL takes only a host, a port and user[:password]@")
    username = unquote(parts.username) if parts.username else None
    secret = password if password else (unquote(parts.password) if parts.password else None)
    return SmtpServer(scheme, parts.hostname, port or _SCHEMES[scheme], username, secret)


def wants_mail(mail_on: str, state: str, output: str) -> bool:
    if state not in _MAILED_STATES:
        return False
    if mail_on == MailOn.NEVER:
        return False
    if mail_on == MailOn.ALWAYS:
        return True
    if mail_on == MailOn.FAILURE:
        return state in _FAILED_STATES
    return bool(output)  # cron: mail when the job printed anything


def compose(
    snapshot: Mapping[str, Any],
    run: RunIdentity,
    state: str,
    exit_status: int | None,
    output: str,
    *,
    hostname: str,
    tail_limit: int,
) -> EmailMessage:
    command = snapshot.get("command")
    text = shlex.join(command) if isinstance(command, list) else str(command or "")
    user = snapshot.get("user") or _worker_user()
    sender = snapshot.get("mailfrom") or f"schedctl@{hostname}"
    message = EmailMessage()
    message["From"] = formataddr(("Cron Daemon", sender))
    message["To"] = ", ".join(snapshot.get("mailto") or [])
    message["Subject"] = _header_text(f"Cron <{user}@{hostname.split('.')[0]}> {text}")
    message["Date"] = formatdate(localtime=False)
    message["Message-ID"] = make_msgid(domain=hostname)
    message["Auto-Submitted"] = "auto-generated"
    message["X-Schedctl-Job"] = run.job_id
    message["X-Schedctl-Run"] = f"{run.scheduled_for.isoformat()} attempt {run.attempt}"
    message["X-Schedctl-State"] = state
    if exit_status is not None:
        message["X-Schedctl-Exit-Status"] = str(exit_status)
    body = output
    if len(output.encode("utf-8")) >= max(0, tail_limit - 4):
        body += f"\n[schedctl: output cut: only its last {tail_limit} bytes are kept]\n"
    if not body:
        status = "" if exit_status is None else f" (exit status {exit_status})"
        body = f"[schedctl: the run {state.replace('_', ' ')}{status} with no output]\n"
    message.set_content(body, charset="utf-8")
    return message


def host_name() -> str:
    """The name mail gives this host, as cron does: ``gethostname()``. Not ``getfqdn()``: that asks the
    resolver, which can block for its whole timeout, and on hosts whose name maps to 127.0.0.1 in /etc/hosts
    (containers, many VMs) it answers ``localhost``. ``serve --mail-hostname`` names another."""
    return socket.gethostname() or "localhost"


def _header_text(text: str, limit: int = 900) -> str:
    flat = "".join(ch if ch.isprintable() else " " for ch in text)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _worker_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def send(server: SmtpServer, message: EmailMessage, sender: str, recipients: list[str]) -> None:
    """One SMTP conversation, every step bounded by SMTP_TIMEOUT."""
    context = ssl.create_default_context()
    client: smtplib.SMTP
    if server.scheme == "smtps":
        client = smtplib.SMTP_SSL(server.host, server.port, timeout=SMTP_TIMEOUT, context=context)
    else:
        client = smtplib.SMTP(server.host, server.port, timeout=SMTP_TIMEOUT)
    with client:
        if server.scheme == "smtp+starttls":
            client.starttls(context=context)
        if server.username:
            client.login(server.username, server.password or "")
        client.send_message(message, from_addr=sender, to_addrs=recipients)


class Mailer:
    """Decides which finished runs are mailed and sends them from one background thread."""

    def __init__(self, server: SmtpServer | None, tail_limit: int, hostname: str | None = None) -> None:
        self.server = server
        self.tail_limit = tail_limit
        self.hostname = hostname or host_name()
        self._queue: queue.Queue[tuple[EmailMessage, str, list[str], dict[str, Any]] | None] = queue.Queue(
            QUEUE_LIMIT
        )
        self._thread: threading.Thread | None = None
        self._unsent_noted: set[str] = set()

    def after_run(
        self,
        snapshot: Mapping[str, Any],
        run: RunIdentity,
        state: str,
        exit_status: int | None,
        output: str | None,
    ) -> None:
        """Called once the run's outcome is recorded. Never raises: mail is a notification."""
        try:
            self._after_run(snapshot, run, state, exit_status, output or "")
        except Exception as exc:  # noqa: BLE001 - a mail problem must never reach the worker loop
            metrics.MAIL_FAILURES.inc()
            log.warning("mail not sent: %s", exc, extra={"event": "mail_failed", **run.log_extra})

    def _after_run(
        self, snapshot: Mapping[str, Any], run: RunIdentity, state: str, exit_status: int | None, output: str
    ) -> None:
        recipients = list(snapshot.get("mailto") or [])
        mail_on = str(snapshot.get("mail_on") or MailOn.OUTPUT)
        if not recipients or not wants_mail(mail_on, state, output):
            return
        if self.server is None:
            if run.job_id not in self._unsent_noted:
                self._unsent_noted.add(run.job_id)
                log.warning(
                    "job %s mails its output to %s, but this worker has no --smtp: not sent (said once per job)",
                    run.job_id,
                    ", ".join(recipients),
                    extra={"event": "mail_not_configured", **run.log_extra},
                )
            return
        message = compose(
            snapshot, run, state, exit_status, output, hostname=self.hostname, tail_limit=self.tail_limit
        )
        sender = snapshot.get("mailfrom") or f"schedctl@{self.hostname}"
        try:
            self._queue.put_nowait((message, sender, recipients, run.log_extra))
        except queue.Full:
            metrics.MAIL_FAILURES.inc()
            log.warning(
                "mail not sent: %d mails already waiting for %s",
                QUEUE_LIMIT,
                self.server,
                extra={"event": "mail_failed", **run.log_extra},
            )
            return
        self._start()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._send_all, name="schedctl-mail", daemon=True)
            self._thread.start()

    def _send_all(self) -> None:
        assert self.server is not None
        while True:
            item = self._queue.get()
            if item is None:
                return
            message, sender, recipients, extra = item
            try:
                send(self.server, message, sender, recipients)
            except (OSError, smtplib.SMTPException, ValueError) as exc:
                metrics.MAIL_FAILURES.inc()
                log.warning(
                    "mail to %s not sent via %s: %s",
                    ", ".join(recipients),
                    self.server,
                    str(exc)[:300],
                    extra={"event": "mail_failed", **extra},
                )
                continue
            metrics.MAILS_SENT.inc()
            log.info("mailed the output to %s", ", ".join(recipients), extra={"event": "mail_sent", **extra})

    def close(self, wait: float) -> None:
        """Let queued mails go for up to ``wait`` seconds; the thread is a daemon, so exit never hangs on it."""
        if self._thread is None:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                self._queue.put(None, timeout=max(0.01, deadline - time.monotonic()))
                break
            except queue.Full:
                continue
        self._thread.join(max(0.0, deadline - time.monotonic()))
