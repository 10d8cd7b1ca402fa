"""Log output at the edge: text for a terminal, or one JSON object per line for a log shipper.

The library logs with stdlib ``logging`` under ``schedctl.<module>`` with ``extra={"event": ..., "job_id": ...,
"scheduled_for": ..., "attempt": ...}``; this module only decides how those records are written (to stderr:
stdout is for data). A filter on the handler masks the password of any ``scheme://user:password@`` URL, in the
message, its arguments, extra fields and tracebacks, so a database URL cannot leak through a log line.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, date, datetime
from typing import IO, Any

from schedctl.text.secrets import mask_query_secrets

FORMATS = ("text", "json")
LEVELS = ("debug", "info", "warning", "error", "critical")

# scheme://user:password@  ->  scheme://user:***@   (the user stays: it helps to know who connected)
_URL_SECRET = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]*:)(?P<secret>[^\s/]+)(?=@)")
MASK = "***"

# LogRecord attributes that are not ``extra`` fields.
_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
# Fields about a run, written first and in this order so lines line up in text and read well in JSON.
RUN_FIELDS = ("job_id", "scheduled_for", "attempt")

_HANDLER_MARK = "_schedctl_handler"


def mask_secrets(text: str) -> str:
    """``postgresql://app:s3cret@db/x`` -> ``postgresql://app:***@db/x``."""
    return mask_query_secrets(_URL_SECRET.sub(lambda m: m.group("head") + MASK, text))


def _mask_value(value: Any) -> Any:
    return mask_secrets(value) if isinstance(value, str) else value


class SecretFilter(logging.Filter):
    """Masks URL passwords in a record before any formatter sees it. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must still be logged, as written
            message = str(record.msg)
        record.msg = mask_secrets(message)
        record.args = None
        for key in _extra_keys(record):
            setattr(record, key, _mask_value(getattr(record, key)))
        return True


def _extra_keys(record: logging.LogRecord) -> list[str]:
    return [key for key in vars(record) if key not in _RESERVED and not key.startswith("_")]


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    extras = {key: getattr(record, key) for key in _extra_keys(record)}
    ordered = {key: extras.pop(key) for key in RUN_FIELDS if key in extras}
    ordered.update(sorted(extras.items()))
    return ordered


def _plain(value: Any) -> Any:
    """A value as JSON can carry it: datetimes in RFC 3339, anything else unknown as its str()."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _timestamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class JsonFormatter(logging.Formatter):
    """One object per line: ts, level, logger, event, message, run fields, other extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        extras = _extras(record)
        event = extras.pop("event", None)
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": event,
            "message": record.getMessage(),
        }
        for key, value in extras.items():
            entry.setdefault(key, _plain(value))
        if record.exc_info:
            entry["exception"] = mask_secrets(self.formatException(record.exc_info))
        if record.stack_info:
            entry["stack"] = mask_secrets(self.formatStack(record.stack_info))
        return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """``2026-12-01T09:00:00.123+00:00 INFO schedctl.worker: run finished  job_id=backup ... event=run_finished``."""

    def format(self, record: logging.LogRecord) -> str:
        extras = _extras(record)
        event = extras.pop("event", None)
        if event is not None:
            extras["event"] = event
        fields = " ".join(f"{key}={_text_value(value)}" for key, value in extras.items())
        line = f"{_timestamp(record)} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if fields:
            line = f"{line}  {fields}"
        if record.exc_info:
            line = f"{line}\n{mask_secrets(self.formatException(record.exc_info))}"
        if record.stack_info:
            line = f"{line}\n{mask_secrets(self.formatStack(record.stack_info))}"
        return line


def _text_value(value: Any) -> str:
    if isinstance(value, float):
        value = round(value, 6)  # 0.0133747569998377 reads as 0.013375 on a terminal; JSON keeps it all
    plain = _plain(value)
    text = plain if isinstance(plain, str) else json.dumps(plain)
    return json.dumps(text) if (not text or any(c.isspace() for c in text) or '"' in text) else text


def parse_level(level: str | int) -> int:
    if isinstance(level, int):
        return level
    value = logging.getLevelName(level.strip().upper())
    if not isinstance(value, int):
        raise ValueError(f"unknown log level {level!r} (expected one of {', '.join(LEVELS)})")
    return value


def configure(fmt: str = "text", level: str | int = "info", stream: IO[str] | None = None) -> logging.Handler:
    """Install schedctl's one handler on the root logger (replacing any earlier one); returns it.

    ``level`` applies to schedctl's loggers; other libraries (SQLAlchemy, Alembic) are held at WARNING or
    above so ``--log-level info`` does not fill the log with their chatter.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r} (expected text or json)")
    numeric = parse_level(level)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(SecretFilter())
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))
    logging.getLogger("schedctl").setLevel(numeric)
    return handler
