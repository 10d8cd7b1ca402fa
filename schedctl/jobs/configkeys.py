"""The keys of a ``[jobs.<id>]`` table: what each accepts, and the message when it does not.

Each checker takes the TOML value and returns what the Job field holds, or raises Invalid with a message that
fits after ``FILE:LINE: jobs.<id>.<key>:``. Messages are one line whatever the value holds: values are shown
escaped and shortened.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime, time, timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from schedctl.errors import SchedctlError
from schedctl.jobs.job import CatchUp, Concurrency, MailOn, labels_key
from schedctl.text.printable import cut
from schedctl.timing.timetext import parse_duration
from schedctl.timing.zones import DstGap, DstOverlap, DstPolicy

ID_PATTERN = "[a-z0-9][a-z0-9._-]*"
MAX_ID_LENGTH = 255  # job_runs.job_id is String(255)
MAX_SCHEDULE_LENGTH = 256
MAX_CATCH_UP = 1_000_000
MAX_RETRIES = 1000
MAX_DURATION = 3650 * 86400.0  # ten years: a longer duration is a typo, and datetimes overflow far beyond
MAX_LABELS_KEY = 512  # job_runs.labels_key is String(512)
HORIZON = timedelta(days=3653)  # a schedule must fire within ten years from now

_ID = re.compile(ID_PATTERN + r"\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LABEL_KEY = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._/-]{0,62})\Z")
_LABEL_VALUE = re.compile(r"[A-Za-z0-9._:/@+-]{0,63}\Z")  # never "," or "=": labels_key joins with them
_USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*\$?\Z")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")

# report(path, message, blame=None): a problem at ``path`` (inside the job); ``blame`` is the key whose line
# the error names when that is not the path's own line (a missing max_catch_up blames catch_up).
Report = Callable[..., None]


class Invalid(Exception):
    """A value that does not fit; ``at`` is the path below the key, ``line`` set only for whole-file errors."""

    def __init__(self, message: str, at: tuple[str | int, ...] = (), line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.at = at
        self.line = line


# ---------------------------------------------------------------------------------------------- messages


def show(value: Any, limit: int = 60) -> str:
    """A value for a one-line message: strings quoted and escaped, other values by their TOML kind."""
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        for ch in "\x85\u2028\u2029\x7f":  # line breaks and DEL json leaves alone
            text = text.replace(ch, f"\\u{ord(ch):04x}")
        return cut(text[1:-1], limit - 2, quote='"', length=len(value))
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        text = repr(value)
        return f"the number {text if len(text) <= 20 else text[:17] + '...'}"
    if isinstance(value, datetime | date | time):
        return (
            "a date-time"
            if isinstance(value, datetime)
            else "a date"
            if isinstance(value, date)
            else "a time"
        )
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def one_line(text: str, limit: int = 200) -> str:
    """Free text (an exception's message) squeezed onto one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def render_path(parts: Iterable[str | int]) -> str:
    """``jobs.backup.env.PATH``; parts that are not bare keys are quoted as TOML would."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, int):
            out[-1:] = [f"{out[-1] if out else ''}[{part}]"]
        elif _BARE_KEY.match(part):
            out.append(cut(part))  # a 10,000-character id must not make a 10,000-character error line
        else:
            out.append(show(part, limit=80))
    return ".".join(out)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A suggestion among known names (keys, enum values), which are plain ASCII and safe to show bare."""
    options = list(choices)
    lowered = {c.lower(): c for c in options}
    if word.lower() in lowered:
        return f" (did you mean '{lowered[word.lower()]}'?)"
    close = difflib.get_close_matches(word.lower(), options, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


# ---------------------------------------------------------------------------------------------- checkers


def _text(value: Any, *, nonblank: bool = False) -> str:
    if not isinstance(value, str):
        raise Invalid(f"expected a string, got {show(value)}")
    if "\x00" in value:
        raise Invalid("must not hold a NUL character")
    if nonblank and not value.strip():
        raise Invalid("must not be empty")
    return value


def _command(value: Any) -> str | tuple[str, ...]:
    if isinstance(value, str):
        return _text(value, nonblank=True)
    if not isinstance(value, list):
        raise Invalid(
            f"expected a string (run by the shell) or an array of strings (argv), got {show(value)}"
        )
    if not value:
        raise Invalid("must not be empty")
    for index, item in enumerate(value):
        try:
            _text(item, nonblank=index == 0)
        except Invalid as exc:
            raise Invalid(exc.message, at=(index,)) from None
    return tuple(value)


def _enum(kind: type[StrEnum]) -> Callable[[Any], Any]:
    choices = [m.value for m in kind]

    def check(value: Any) -> Any:
        if isinstance(value, str) and value in choices:
            return kind(value)
        listed = ", ".join(show(c) for c in choices)
        hint = did_you_mean(value, choices) if isinstance(value, str) else ""
        raise Invalid(f"expected one of {listed}, got {show(value)}{hint}")

    return check


def _duration(*, positive: bool) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            if isinstance(value, str):
                raise Invalid(_duration_message(value)) from None
            if isinstance(value, int | float) and not isinstance(value, bool):
                raise Invalid(str(exc)) from None
            raise Invalid(
                f'expected a duration such as "90s" or a number of seconds, got {show(value)}'
            ) from None
        if positive and seconds <= 0:
            raise Invalid(f"must be longer than 0s, got {show(value)}")
        if seconds > MAX_DURATION:
            raise Invalid(f"must be at most 3650d (ten years), got {show(value)}")
        return seconds

    return check


def _duration_message(value: str) -> str:
    return (
        f'invalid duration {show(value)} (write it as "500ms", "90s", "2h30m", "1d" or a number of seconds)'
    )


def _integer(low: int, high: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(f"expected an integer from {low} to {high}, got {show(value)}")
        if not low <= value <= high:
            raise Invalid(
                f"must be from {low} to {high}, got {value if abs(value) < 10**20 else 'a huge number'}"
            )
        return value

    return check


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"expected true or false, got {show(value)}")
    return value


def _string_table(
    name_rule: re.Pattern[str], name_help: str, value_rule: re.Pattern[str] | None
) -> Callable[[Any], Mapping[str, str]]:
    def check(value: Any) -> Mapping[str, str]:
        if not isinstance(value, dict):
            raise Invalid(f'expected a table of strings, like {{ NAME = "value" }}, got {show(value)}')
        for name, item in value.items():
            if not name_rule.match(name):
                raise Invalid(f"invalid name {show(name)}: {name_help}", at=(name,))
            try:
                _text(item)
            except Invalid as exc:
                raise Invalid(exc.message, at=(name,)) from None
            if value_rule is not None and not value_rule.match(item):
                raise Invalid(
                    f"invalid value {show(item)}: up to 63 of A-Z a-z 0-9 . _ : / @ + -", at=(name,)
                )
        return MappingProxyType(dict(value))

    return check


def _strings(item_rule: re.Pattern[str] | None, item_help: str) -> Callable[[Any], tuple[str, ...]]:
    def check(value: Any) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise Invalid(f"expected an array of strings, got {show(value)}")
        seen: set[str] = set()
        for index, item in enumerate(value):
            try:
                _text(item, nonblank=True)
            except Invalid as exc:
                raise Invalid(exc.message, at=(index,)) from None
            if item_rule is not None and not item_rule.match(item):
                raise Invalid(f"invalid name {show(item)}: {item_help}", at=(index,))
            if item in seen:
                raise Invalid(f"{show(item)} is listed twice", at=(index,))
            seen.add(item)
        return tuple(value)

    return check


# An address as cron's MAILTO holds one: user@host or a local user name; never blanks, commas or header breaks.
_ADDRESS = re.compile(r"[^\s,<>\"()\x00-\x1f\x7f]{1,254}\Z")


def _address(value: Any) -> str:
    text = _text(value, nonblank=True)
    if not _ADDRESS.match(text) or text.startswith("@") or text.endswith("@"):
        raise Invalid(f"invalid mail address {show(text)}: write user@example.com or a local user name")
    return text


def _mailto(value: Any) -> tuple[str, ...]:
    """An address, a list of them, or "" (cron's MAILTO="": no mail)."""
    if value == "":
        return ()
    if isinstance(value, str):
        return tuple(_address(part.strip()) for part in value.split(","))
    if not isinstance(value, list):
        raise Invalid(f'expected an address, an array of addresses, or "" (no mail), got {show(value)}')
    out = []
    for index, item in enumerate(value):
        try:
            out.append(_address(item))
        except Invalid as exc:
            raise Invalid(exc.message, at=(index,)) from None
    return tuple(out)


def _user(value: Any) -> str:
    text = _text(value, nonblank=True)
    if not _USER.match(text) or len(text) > 64:
        raise Invalid(f"invalid user name {show(text)}")
    return text


_DST_KEYS = {"gap": _enum(DstGap), "overlap": _enum(DstOverlap)}


def _dst(value: Any) -> DstPolicy | None:
    if value == "cron":
        return None
    if not isinstance(value, dict):
        raise Invalid(
            f'expected "cron" or a table like {{ gap = "run", overlap = "first" }}, got {show(value)}'
        )
    chosen: dict[str, Any] = {}
    for name, item in value.items():
        if name not in _DST_KEYS:
            raise Invalid(
                f"unknown key; dst takes gap and overlap{did_you_mean(name, _DST_KEYS)}", at=(name,)
            )
        try:
            chosen[name] = _DST_KEYS[name](item)
        except Invalid as exc:
            raise Invalid(exc.message, at=(name,)) from None
    # An empty policy keeps cron's rule for both, which is exactly what no policy means.
    return DstPolicy(**chosen) if chosen else None


_ENV_HELP = "environment variable names are letters, digits and _, not starting with a digit"

CHECKS: dict[str, Callable[[Any], Any]] = {
    "schedule": lambda v: _text(v, nonblank=True),
    "timezone": lambda v: _text(v, nonblank=True),
    "catch_up": _enum(CatchUp),
    "command": _command,
    "max_catch_up": _integer(1, MAX_CATCH_UP),
    "concurrency": _enum(Concurrency),
    "starting_deadline": _duration(positive=True),
    "timeout": _duration(positive=True),
    "retries": _integer(0, MAX_RETRIES),
    "retry_backoff": _duration(positive=False),
    "grace_period": _duration(positive=False),
    "env": _string_table(_ENV_NAME, _ENV_HELP, None),
    "pass_env": _strings(_ENV_NAME, _ENV_HELP),
    "stdin": _text,
    "workdir": lambda v: _text(v, nonblank=True),
    "user": _user,
    "source": _text,
    "labels": _string_table(
        _LABEL_KEY, "up to 63 of A-Z a-z 0-9 . _ / -, starting with a letter or digit", _LABEL_VALUE
    ),
    "description": _text,
    "paused": _boolean,
    "tags": _strings(None, ""),
    "jitter": _duration(positive=False),
    "dst": _dst,
    "on_failure": _command,
    "on_success": _command,
    "mailto": _mailto,
    "mailfrom": _address,
    "mail_on": _enum(MailOn),
}
KNOWN = tuple(CHECKS)
REQUIRED = ("schedule", "timezone", "catch_up", "command")
DURATIONS = frozenset({"starting_deadline", "timeout", "retry_backoff", "grace_period", "jitter"})

_MISSING = {
    "schedule": 'missing; every job needs one (5-field cron, "@daily" ..., or 6 fields starting with seconds)',
    "timezone": 'missing; every job names its IANA zone, e.g. "Europe/London" or "UTC" (there is no default)',
    "catch_up": 'missing; choose "skip", "latest" or "all" (there is no default)',
    "command": "missing; a string run by the shell, or an array of strings (argv)",
}


# ---------------------------------------------------------------------------------------------- a job


def check_id(job_id: str) -> str | None:
    if _ID.match(job_id) and len(job_id) <= MAX_ID_LENGTH:
        return None
    if len(job_id) > MAX_ID_LENGTH:
        return f"job id longer than {MAX_ID_LENGTH} characters"
    fixed = re.sub(r"[^a-z0-9._-]+", "-", job_id.lower()).strip("-._")
    hint = f" (try {show(fixed)})" if fixed and _ID.match(fixed) else ""
    return f"invalid job id: ids are lower-case letters, digits, '.', '_' and '-', starting with a letter or digit{hint}"


# A million jobs share a few schedules, zones and policies: a scalar value's check result is kept (keyed by
# its type too, as True == 1 == 1.0), so each distinct value is checked once and its result, one object,
# is shared by every job that has it. Keys whose values are mostly unique (commands, texts) are not kept.
_KEPT_KEYS = frozenset(CHECKS) - {"command", "stdin", "source", "description", "on_failure", "on_success"}
_KEPT_TYPES = frozenset({str, int, float, bool})
_MAX_KEPT = 50_000
_kept: dict[tuple[str, type, Any], Any] = {}


def check_table(table: Mapping[str, Any], report: Report) -> dict[str, Any]:
    """The Job field values of the keys that are valid; every problem goes to ``report``."""
    values: dict[str, Any] = {}
    for name, value in table.items():
        kind = type(value)
        memo = None
        if kind in _KEPT_TYPES and name in _KEPT_KEYS:
            memo = (name, kind, value)
            kept = _kept.get(memo, _kept)
            if kept is not _kept:
                values[name] = kept
                continue
        check = CHECKS.get(name)
        if check is None:
            report((name,), "unknown key" + did_you_mean(name, KNOWN))
            continue
        try:
            values[name] = checked = check(value)
        except Invalid as exc:
            report((name, *exc.at), exc.message)
            continue
        if memo is not None and len(_kept) < _MAX_KEPT:
            _kept[memo] = checked
    for name in REQUIRED:
        if name not in table:
            report((name,), _MISSING[name])
    return values


def check_together(values: dict[str, Any], table: Mapping[str, Any], report: Report, now: datetime) -> None:
    """The rules that tie keys together: max_catch_up, the schedule in its zone, env against pass_env."""
    catch_up = values.get("catch_up")
    if catch_up is CatchUp.ALL and "max_catch_up" not in table:
        report(
            ("max_catch_up",),
            f'required with catch_up = "all": an integer from 1 to {MAX_CATCH_UP}',
            ("catch_up",),
        )
    elif catch_up in (CatchUp.SKIP, CatchUp.LATEST) and "max_catch_up" in table:
        report(("max_catch_up",), f'only means something with catch_up = "all", not {show(str(catch_up))}')
    if "env" in values and "pass_env" in values:
        for name in sorted(set(values["env"]) & set(values["pass_env"])):
            report(("pass_env",), f"{show(name)} is also set in env; keep one of them")
    if "labels" in values and len(labels_key(values["labels"])) > MAX_LABELS_KEY:
        report(("labels",), f"too many labels: they must fit in {MAX_LABELS_KEY} characters as k=v,k=v")
    _check_schedule(values, report, now)


def _check_schedule(values: dict[str, Any], report: Report, now: datetime) -> None:
    schedule, zone = values.get("schedule"), values.get("timezone")
    for path, message in _schedule_problems(schedule, zone, values.get("dst"), now):
        report(path, message)


@functools.lru_cache(maxsize=4096)
def _schedule_problems(
    schedule: str | None, zone: str | None, dst: DstPolicy | None, now: datetime
) -> tuple[tuple[tuple[str], str], ...]:
    """Problems of one (schedule, zone, dst) triple. Cached, as are its parts: a large job set shares few
    schedules and zones, and each expression check asks croniter for a fire up to ten years ahead."""
    from schedctl.timing import cron

    schedule_problem = zone_problem = None
    if schedule is not None:
        schedule_problem = _expression_problem(schedule, now)
    if zone is not None:
        zone_problem = _guarded(cron.validate_zone, zone)
    problems = [(("schedule",), schedule_problem)] if schedule_problem else []
    problems += [(("timezone",), zone_problem)] if zone_problem else []
    # validate_expression already found a fire within ten years on the wall clock. Under cron's rule that
    # wall time happens in every zone (a fixed time in a gap is moved, a wildcard entry has more matches
    # than any gap can hide), so only an explicit DST policy needs the zone-aware look.
    if schedule is not None and zone is not None and dst is not None and not problems:
        fires_problem = _guarded(_check_fires, schedule, zone, dst, now)
        problems += [(("schedule",), fires_problem)] if fires_problem else []
    return tuple(problems)


@functools.lru_cache(maxsize=4096)
def _expression_problem(schedule: str, now: datetime) -> str | None:
    from schedctl.timing import cron

    if len(schedule) > MAX_SCHEDULE_LENGTH:
        return f"longer than {MAX_SCHEDULE_LENGTH} characters"
    return _guarded(cron.validate_expression, schedule, now)


def _check_fires(schedule: str, zone: str, dst: DstPolicy | None, now: datetime) -> None:
    from schedctl.timing import cron

    fire = cron.schedule_for(schedule, zone, dst).next_after(now)
    if fire is None or fire - now > HORIZON:
        raise Invalid(f"{show(schedule)} never fires in the next ten years")


def _guarded(check: Callable[..., object], *args: Any) -> str | None:
    """Run a cron check and return its error as a message. Anything but a schedctl error is a bug in
    schedctl, still reported as one line (naming the exception): a job file must never give a traceback."""
    try:
        check(*args)
    except (SchedctlError, Invalid) as exc:
        return one_line(str(exc))
    except Exception as exc:  # noqa: BLE001 - see docstring
        return f"cannot be evaluated ({type(exc).__name__}: {one_line(str(exc))})"
    return None
