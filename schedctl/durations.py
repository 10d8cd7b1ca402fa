"""Durations as people write them (``"500ms"``, ``"90s"``, ``"2h30m"``, ``"1d"`` or plain seconds) and as every
view shows them (``span``, ``ago``: `jobs`, `workers`, `leases` and `top` say "4m12s ago" alike)."""

from __future__ import annotations

import math
import re

from schedctl.printable import quoted

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


def span(seconds: float, *, tenths: bool = False) -> str:
    """A duration for a glance, its two largest units like systemctl's LEFT column: ``"45s"``, ``"4m12s"``,
    ``"17h"``, ``"1d3h"``; a negative one is ``"0s"``. ``tenths``: under a minute, to a tenth of a second
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
    """``span`` of how long ago: ``"4m12s ago"``."""
    return f"{span(seconds, tenths=tenths)} ago"
