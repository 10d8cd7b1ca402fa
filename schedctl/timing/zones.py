"""IANA zones as schedctl accepts them: region names spelled exactly, loaded from the tzdata package.

The host's zone database is never consulted, so a name valid on one machine is valid on every one, and every
leader computes the same fire instants whatever its OS ships.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from datetime import UTC, tzinfo
from enum import StrEnum
from importlib import resources
from zoneinfo import ZoneInfo

from schedctl.errors import ZoneError
from schedctl.text.printable import quoted

__all__ = [
    "DstGap",
    "DstOverlap",
    "DstPolicy",
    "data_version",
    "load_zone",
    "tzdata_version",
    "validate_zone",
]

_HOST = {
    "localtime": "stands for the host's zone",
    "local": "stands for the host's zone",
    "posixrules": "stands for the host's default rules",
    "factory": "is no real place",
}
_ABBREVIATIONS = {"CET", "EET", "MET", "WET", "EST", "MST", "HST", "CST6CDT", "EST5EDT", "MST7MDT", "PST8PDT"}
_UTC_ALIASES = {
    "Etc/UTC", "Etc/UCT", "UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu",
    "GMT", "Etc/GMT", "Greenwich", "Etc/Greenwich",
}  # fmt: skip
_OFFSET = re.compile(
    r"^(?:(?:Etc/)?(?:GMT|UTC|UT)\s*)?[+-]?\d{1,2}(?::?\d{2})?$|^(?:Etc/)?(?:GMT|UTC|UT)[+-]?\d*$"
)


@functools.cache
def _zone_names() -> frozenset[str]:
    # tzdata's list, not the host's: the same names are valid on every OS.
    return frozenset(resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split())


def validate_zone(name: str) -> None:
    """Raise ZoneError unless ``name`` is an IANA region name (or ``UTC``) spelled exactly."""
    why = _zone_refusal(name)
    if why is not None:
        raise ZoneError(why)


def _zone_refusal(name: str) -> str | None:
    lower = name.lower()
    if name == "UTC":
        return None
    if not name.strip():
        return "the zone is empty; name a region such as 'Europe/London', or 'UTC'"
    if name.startswith(("/", ".", "~")) or ".." in name or "\\" in name:
        tail = name.rpartition("zoneinfo/")[2]
        if "zoneinfo/" in name and tail in _zone_names():
            return f"'{name}' is a path; write '{tail}'"
        return f"'{name}' is a path, not a zone name; name the region, e.g. 'Europe/London'"
    if len(name) > 80:  # no zone name is that long; and an error line must stay one short line
        return f"unknown zone {quoted(name, 76)}"
    if lower.startswith(("posix/", "right/")):
        return f"'{name}' is a variant tree of the zone database; write '{name.split('/', 1)[1]}'"
    if lower in _HOST:
        return f"'{name}' {_HOST[lower]}; name the region, e.g. 'Europe/London'"
    if name in _UTC_ALIASES:
        return f"'{name}' means UTC; write 'UTC'"
    if _OFFSET.match(name) and name not in ("GMT", "Etc/GMT"):
        return f"'{name}' is a fixed offset, not a region; name the place, e.g. 'Europe/Berlin'"
    if name in _ABBREVIATIONS:
        return f"'{name}' is an abbreviation, not a region; name the place, e.g. 'Europe/Paris'"
    if name in _zone_names():
        return None
    return f"unknown zone '{name}'{_did_you_mean(name)}"


def _did_you_mean(name: str) -> str:
    names = _zone_names() - _ABBREVIATIONS - _UTC_ALIASES - {"Factory"}
    same_case = [n for n in names if n.lower() == name.lower()]
    close = same_case or difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


@functools.cache
def data_version() -> str:
    """The IANA release of the zone data ``load_zone`` reads (the tzdata package's, e.g. ``2026f``): what
    each lease term records, so a new leader can tell when its zone rules differ from its predecessor's."""
    import tzdata  # type: ignore[import-untyped]

    return str(tzdata.IANA_VERSION)


@functools.lru_cache(maxsize=1024)
def load_zone(name: str) -> tzinfo:
    """The zone, always from the tzdata package: every host (and every leader) uses the same rules."""
    validate_zone(name)
    if name == "UTC":
        return UTC
    path = resources.files("tzdata").joinpath("zoneinfo", *name.split("/"))
    with path.open("rb") as f:
        return ZoneInfo.from_file(f, key=name)


def tzdata_version() -> str:
    """The zone data this process computes fire times with: the tzdata package ``load_zone`` reads, never the
    host's files (``tzdata 2026f``). Two replicas on different zone data can put the same wall-clock tick at
    different instants, so each lease term and each worker records which one its process had."""
    return f"tzdata {data_version()}"[:32]


class DstGap(StrEnum):
    """A wall time that a spring-forward transition skips."""

    RUN = "run"  # fire once, at the first instant after the gap
    SKIP = "skip"  # do not fire


class DstOverlap(StrEnum):
    """A wall time that a fall-back transition repeats."""

    FIRST = "first"  # fire at its first occurrence only
    LAST = "last"  # fire at its second occurrence only
    BOTH = "both"  # fire at both


@dataclass(frozen=True)
class DstPolicy:
    """Overrides of cron's DST rule; ``None`` keeps the cron rule's choice for that entry."""

    gap: DstGap | None = None
    overlap: DstOverlap | None = None
