"""Times and durations as people write them and as every view shows them.

Durations: ``"500ms"``, ``"90s"``, ``"2h30m"``, ``"1d"`` or plain seconds are read by ``parse_duration``;
``format_duration`` writes the exact spelling that reads back to the same value (job files, `export`), and
``short_duration``/``ago`` the two-unit glance that `jobs`, `workers`, `leases` and `top` show ("4m12s ago").
Instants: UTC clock text, RFC 3339, and what an operator types for a time (an ISO timestamp or a duration ago).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

from schedctl.text.printable import quoted

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(value: object) -> float:
    """Seconds in ``value``; raises ValueError with a message fit for a ``FILE:LINE:`` line."""
    if isinstance(value, bool):  # a TOML boolean is an int to Python, never a duration
        raise ValueError(f'expected a duration such as "90s" or a number of seconds, got {value!r}')
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        else:
            pos, seconds = 0, 0.0
            for match in _PART.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _UNITS[match.group(2)]
                pos = match.end()
            if pos != len(text) or not text:
                raise ValueError(
                    f'invalid duration {quoted(value)} (write it as "500ms", "90s", "2h30m" or seconds)'
                )
    else:
        raise ValueError(f'expected a duration such as "90s" or a number of seconds, got {value!r}')
    if math.isnan(seconds) or math.isinf(seconds) or seconds < 0:
        raise ValueError(f"invalid duration {quoted(str(value))}: must be a finite number of seconds >= 0")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest spelling ``parse_duration`` reads back to the same value."""
    if seconds != int(seconds):
        ms = round(seconds * 1000)
        if abs(ms / 1000 - seconds) < 1e-9:
            return f"{ms}ms"
        return repr(seconds)
    whole = int(seconds)
    if whole == 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, whole = divmod(whole, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out)


def short_duration(seconds: float, *, tenths: bool = False) -> str:
    """A duration for a glance, not for reading back (that is ``format_duration``): its two largest units,
    like systemctl's LEFT column: ``"45s"``, ``"4m12s"``, ``"17h"``, ``"1d3h"``; a negative one is ``"0s"``. ``tenths``: under a minute, to a tenth of a second
    (``"2.4s"``), for the lease, which renews every few seconds."""
    seconds = max(0.0, seconds)
    if tenths and round(seconds, 1) < 60:
        return f"{seconds:.1f}s"
    left = round(seconds)
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, left = divmod(left, size)
        if parts or count:
            parts.append(f"{count}{unit}" if count else "")
        if len(parts) == 2:
            break
    return "".join(parts) or "0s"


def ago(seconds: float, *, tenths: bool = False) -> str:
    """``short_duration`` of how long ago: ``"4m12s ago"``."""
    return f"{short_duration(seconds, tenths=tenths)} ago"


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
