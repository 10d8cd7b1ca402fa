"""Instants as schedctl prints and reads them: UTC clock text, RFC 3339, and what an operator types for a
time (an ISO timestamp or a duration ago)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from schedctl.durations import parse_duration
from schedctl.printable import quoted


def clock_text(at: datetime, ref: datetime) -> str:
    """``13:02:11`` when on the same UTC day as ``ref``, else ``2026-03-01 13:02:11`` (always UTC)."""
    at = at.astimezone(UTC)
    if at.date() == ref.astimezone(UTC).date():
        return at.strftime("%H:%M:%S")
    return at.strftime("%Y-%m-%d %H:%M:%S")


def rfc3339(at: datetime) -> str:
    """RFC 3339 with the offset written out (``+00:00``), as every ``--json`` in schedctl."""
    return at.astimezone(UTC).isoformat()


def instant_text(at: datetime) -> str:
    """An instant as human output writes it: RFC 3339 in UTC with ``Z`` (``2026-03-01T02:30:00Z``, a
    microsecond key keeps its fraction): what ``SCHEDCTL_SCHEDULED_FOR`` holds and what `cancel`, `logs`
    and ``--since`` read back."""
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


_AGO = re.compile(r"^\s*(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+\s*(?:ago)?\s*$")


def parse_instant(text: str, now: datetime) -> datetime:
    """An instant as an operator types it: RFC 3339 / ISO 8601 (no offset means UTC) or a duration ago
    (``6h``, ``-2h``, ``2d``, ``90m ago``), or ``now``. Raises ValueError with a message fit for a usage error."""
    value = text.strip()
    if value.lower() == "now":  # what people type for "until now"
        return now
    if value.startswith("-") and _AGO.match(value[1:].lstrip()):  # -2h: GNU date's and journalctl's spelling
        value = value[1:].lstrip()
    if _AGO.match(value):
        return now - timedelta(seconds=parse_duration(value.removesuffix("ago").strip()))
    try:
        return parse_timestamp(value)
    except ValueError:
        raise ValueError(
            f"invalid time {quoted(text)} (write it as 2026-03-01T13:00:00Z, 2026-03-01 13:00 (UTC), 6h or -6h for 6 hours ago, or now)"
        ) from None


def parse_timestamp(text: str) -> datetime:
    """RFC 3339 / ISO 8601 (``Z``, an offset, or none: no offset means UTC, never the host's zone), in UTC.
    Every time option of every command reads through here. Raises ValueError."""
    value = text.strip()
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
