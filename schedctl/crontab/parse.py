"""Crontab text -> entries, read the way cronie (Vixie cron's descendant on most Linux hosts) reads it.

What cron does, and so what this does:

* Each line is first tried as an environment setting (cronie ``load_env``): ``NAME=value`` with blanks allowed
  around ``=``; a value in single or double quotes is taken verbatim (and must be the whole value); an unquoted
  value has its trailing blanks removed. Anything else is a job line (``load_entry``).
* A job gets the environment in effect at its line. ``CRON_TZ`` sets the zone of the jobs below it (cronie);
  ``RANDOM_DELAY`` (minutes, cronie) delays each start; ``TZ`` is only passed to the job.
* A ``-`` before the schedule silences cron's syslog line for the job (cronie); it is dropped.
* The command is the rest of the line. cron's ``%`` rule (do_command.c): the first ``%`` not escaped by a
  backslash ends the command, ``\\%`` in the command is a literal ``%``; the rest is written to the job's
  standard input with every ``%`` turned into a newline (``\\%`` a literal ``%``) and a final newline added when
  the text does not end with one.
* A last line without a newline: cronie's ``load_env`` stops at it, so cron never runs it, and ``crontab``
  refuses to install such a file. A job on that line is reported as an error (it never ran under cron).

Schedules are checked by ``schedctl.cron.validate_expression``, the same check the TOML loader uses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from types import MappingProxyType

from schedctl.crontab.diagnostics import error, one_line, warning
from schedctl.crontab.percent import split_percent
from schedctl.errors import Diagnostic, SchedctlError

SYSTEM = "system"
USER = "user"
MAX_BYTES = 16 * 1024 * 1024  # a crontab is small; this bounds memory for a mistaken path

# Variables cron itself consumes; the job's definition carries them as `timezone` and `jitter`.
CONSUMED = ("CRON_TZ", "RANDOM_DELAY")

_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_BLANKS = " \t"  # cron's Skip_Blanks: only space and tab separate fields
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# An account name as useradd and systemd accept it; a path, a '*' or a number is not one.
_ACCOUNT = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?\Z")
# What a cron time field looks like, to catch a sixth (seconds) field before it is run as a command or user.
_FIELD_LIKE = re.compile(r"[0-9*?][0-9*?,/LW#-]*\Z|[0-9*,/-]*[LW#?][0-9*,/LW#-]*\Z")
_ID_HINT = re.compile(r"schedctl:\s*id=(\S+)\s*\Z")
_EXPORT_HEADER = re.compile(r"schedctl export\b.*\bformat: (system|user)\b")
# Legend lines of Debian's /etc/crontab and of `crontab -e`'s template: boilerplate, never a description.
_LEGEND = re.compile(
    r"\bm\s+h\s+dom\s+mon\s+dow\b|minute\s*\(0\s*-\s*59\)|example of job definition|edit this file to introduce"
    r"|^[\s|.*-]*-{4,}|^\s*\*(\s+\*){4}",
    re.IGNORECASE,
)
_COMMENTED_JOB = re.compile(r"\s*-?(@[a-z]+|[-0-9*/,]+[ \t]+[-0-9*/,]+([ \t]+[^ \t]+){3})[ \t]+[^ \t]")


@dataclass(frozen=True)
class Entry:
    """One job line as cron would run it."""

    file: str
    line: int
    schedule: str  # the five fields joined by one space, or the @-macro
    user: str | None  # the user column of a system crontab
    command: str
    stdin: str | None  # exactly what cron writes to the job's standard input; None when it writes nothing
    env: Mapping[str, str]  # in effect at the line, without CRON_TZ and RANDOM_DELAY
    cron_tz: str | None
    random_delay: int | None  # minutes
    description: str | None
    id_hint: str | None = None  # "# schedctl: id=NAME" directly above (written by `schedctl export`)

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Crontab:
    file: str
    format: str
    format_reason: str
    entries: list[Entry] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


@dataclass
class _Line:
    number: int
    text: str  # decoded (invalid bytes replaced), CR of a CRLF ending removed, leading blanks removed
    bad_byte: str | None  # "0xff at column 7" when the line is not UTF-8
    terminated: bool


class _State:
    """What cron carries from line to line: the environment, and the comment block above the next job."""

    def __init__(self) -> None:
        self.env: dict[str, str] = {}
        self.cron_tz: str | None = None
        self.bad_tz_line: int | None = None
        self.random_delay: int | None = None
        self.comments: list[str] = []
        self.id_hint: str | None = None

    def reset_block(self) -> None:
        self.comments = []
        self.id_hint = None


# ---------------------------------------------------------------------------------------------- entry point


def parse_crontab(data: bytes | str, file: str, fmt: str | None = None) -> Crontab:
    """Every job of one crontab, with a diagnostic for every line that cron would not run as written."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > MAX_BYTES:
        result = Crontab(file, fmt or USER, "")
        result.diagnostics.append(
            error(file, None, f"larger than {MAX_BYTES // (1024 * 1024)} MiB; not a crontab")
        )
        return result
    lines = _split_lines(raw)
    chosen, reason = (fmt, "--format") if fmt else detect_format(file, lines)
    result = Crontab(file, chosen, reason)
    state = _State()
    for line in lines:
        _read_line(line, state, result)
    return result


def _split_lines(raw: bytes) -> list[_Line]:
    pieces = raw.split(b"\n")
    terminated_last = pieces[-1] == b""
    if terminated_last:
        pieces.pop()
    lines = []
    for index, piece in enumerate(pieces):
        if piece.endswith(b"\r"):
            piece = piece[:-1]
        try:
            text, bad = piece.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            text, bad = (
                piece.decode("utf-8", "replace"),
                f"0x{piece[exc.start]:02x} at column {exc.start + 1}",
            )
        if index == 0 and text.startswith("\ufeff"):
            text = text[1:]
        last = index == len(pieces) - 1
        lines.append(_Line(index + 1, text.lstrip(_BLANKS), bad, terminated=terminated_last or not last))
    return lines


# ---------------------------------------------------------------------------------------------- format


def detect_format(file: str, lines: list[_Line]) -> tuple[str, str]:
    """System (a user column after the schedule) or user crontab, and why."""
    path = PurePath(file)
    if path.name == "crontab" and path.parent.name == "etc":
        return SYSTEM, "/etc/crontab"
    if path.parent.name == "cron.d":
        return SYSTEM, "a file in cron.d"
    for line in lines:
        if line.text.startswith("#"):
            header = _EXPORT_HEADER.search(line.text)
            if header:
                return header.group(1), "written by schedctl export"
    columns = [_sixth_token(line.text) for line in lines if _is_job_line(line.text)]
    columns = [c for c in columns if c is not None]
    if columns and all(c is not None and _ACCOUNT.match(c) for c in columns) and "root" in columns:
        return SYSTEM, "every job line has a user column"
    return USER, "no user column"


def _is_job_line(text: str) -> bool:
    return (
        bool(text)
        and not text.startswith("#")
        and _parse_env(text) is None
        and not text.startswith("@reboot")
    )


def _sixth_token(text: str) -> str | None:
    tokens = _tokens(text.removeprefix("-"), 7)
    wanted = 1 if tokens and tokens[0][0].startswith("@") else 5
    return tokens[wanted][0] if len(tokens) > wanted + 1 else None


def _tokens(text: str, limit: int) -> list[tuple[str, int]]:
    """Up to ``limit`` blank-separated tokens, each with the offset just past it."""
    out: list[tuple[str, int]] = []
    pos = 0
    while len(out) < limit:
        while pos < len(text) and text[pos] in _BLANKS:
            pos += 1
        if pos >= len(text):
            break
        start = pos
        while pos < len(text) and text[pos] not in _BLANKS:
            pos += 1
        out.append((text[start:pos], pos))
    return out


# ---------------------------------------------------------------------------------------------- lines


def _read_line(line: _Line, state: _State, result: Crontab) -> None:
    text = line.text
    if not text:
        state.reset_block()
        return
    if text.startswith("#"):
        if line.bad_byte:
            state.reset_block()  # cron does not mind; a description must be text
        else:
            _read_comment(text[1:], state)
        return
    setting = _parse_env(text)
    if setting is not None:
        _read_env(line, setting, state, result)
        state.reset_block()
        return
    try:
        _read_job(line, state, result)
    finally:
        state.reset_block()


def _read_comment(body: str, state: _State) -> None:
    hint = _ID_HINT.match(body.strip())
    if hint:
        state.id_hint = hint.group(1)
        return
    if _LEGEND.search(body) or _COMMENTED_JOB.match(body):
        state.comments = []  # a legend or a commented-out job above is not this job's description
        return
    state.comments.append(body[1:] if body.startswith(" ") else body)


def _report(result: Crontab, line: _Line, message: str, *, severity: str = "error") -> None:
    make = error if severity == "error" else warning
    result.diagnostics.append(make(result.file, line.number, one_line(message)))


# ---------------------------------------------------------------------------------------------- environment


def _parse_env(text: str) -> tuple[str, str] | None:
    """cronie's load_env state machine: (name, value), or None when cron reads the line as a job."""
    name: list[str] = []
    value: list[str] = []
    state, quote, i = "NAMEI", "", 0
    while i < len(text):
        c = text[i]
        if state in ("NAMEI", "VALUEI"):
            if c in "'\"":
                quote = c
                i += 1
            state = "NAME" if state == "NAMEI" else "VALUE"
            continue
        if state in ("NAME", "VALUE"):
            out = name if state == "NAME" else value
            if quote:
                if c == quote:
                    state = "EQ1" if state == "NAME" else "FINI"
                    i += 1
                    continue
                if state == "NAME" and c == "=":
                    return None
            elif state == "NAME":
                if c.isspace():
                    state, i = "EQ1", i + 1
                    continue
                if c == "=":
                    state = "EQ1"
                    continue
            out.append(c)
            i += 1
        elif state == "EQ1":
            if c == "=":
                state, quote = "EQ2", ""
            elif not c.isspace():
                return None
            i += 1
        else:  # EQ2, FINI: skip blanks; anything else starts the value, or (after a quote) is an error
            if c.isspace():
                i += 1
            elif state == "EQ2":
                state = "VALUEI"
            else:
                return None
    if state == "VALUE" and not quote:
        return "".join(name), "".join(value).rstrip()
    if state in ("FINI", "EQ2"):  # EQ2: `NAME=` with nothing after it, an empty value (cronie >= 1.5.3)
        return "".join(name), "".join(value)
    return None


def _read_env(line: _Line, setting: tuple[str, str], state: _State, result: Crontab) -> None:
    name, value = setting
    if not line.terminated:
        _report(
            result,
            line,
            "no newline at the end of the file: cron stops reading here, so this setting applies to nothing",
            severity="warning",
        )
        return
    problem = _env_problem(line, name, value)
    if problem:
        _report(result, line, problem)
        if name == "CRON_TZ":
            state.cron_tz, state.bad_tz_line = None, line.number
        return
    if name == "CRON_TZ":
        _set_cron_tz(line, value, state, result)
    elif name == "RANDOM_DELAY":
        _set_random_delay(line, value, state, result)
    else:
        if name == "TZ":
            _report(
                result,
                line,
                "TZ only sets the jobs' environment: cron reads schedules in CRON_TZ (or the "
                "host's zone), and so does schedctl; set CRON_TZ or pass --timezone",
                severity="warning",
            )
        state.env[name] = value


def _env_problem(line: _Line, name: str, value: str) -> str | None:
    if line.bad_byte:
        return f"environment line is not UTF-8 text (byte {line.bad_byte})"
    if "\x00" in name or "\x00" in value:
        return "environment line holds a NUL character"
    if not _ENV_NAME.match(name):
        return (
            f"environment name {name!r} cannot be passed to a job: names are letters, digits and _, "
            "not starting with a digit"
        )
    return None


def _set_cron_tz(line: _Line, value: str, state: _State, result: Crontab) -> None:
    from schedctl.cron import validate_zone

    if not value:
        state.cron_tz, state.bad_tz_line = None, None  # empty: back to the default zone
        return
    try:
        validate_zone(value)
    except SchedctlError as exc:
        _report(result, line, f"CRON_TZ: {exc}")
        state.cron_tz, state.bad_tz_line = None, line.number
        return
    state.cron_tz, state.bad_tz_line = value, None


def _set_random_delay(line: _Line, value: str, state: _State, result: Crontab) -> None:
    text = value.strip()
    if not re.fullmatch(r"[0-9]{1,5}", text) or int(text) > 24 * 60:
        _report(result, line, f"RANDOM_DELAY {value!r} is not a whole number of minutes from 0 to 1440")
        return
    state.random_delay = int(text) or None


# ---------------------------------------------------------------------------------------------- jobs


def _read_job(line: _Line, state: _State, result: Crontab) -> None:
    text = line.text.removeprefix("-")  # cronie: '-' first silences the syslog line; nothing else changes
    if line.bad_byte:
        _report(
            result, line, f"bytes that are not UTF-8 (byte {line.bad_byte}); cron jobs here must be UTF-8"
        )
        return
    if "\x00" in text:
        _report(result, line, "a NUL character: cron would cut the line there")
        return
    parsed = _schedule_and_rest(line, text, result)
    if parsed is None:
        return
    schedule, rest = parsed
    if result.format == SYSTEM:
        split = _user_column(line, rest, result)
        if split is None:
            return
        user, rest = split
    else:
        user = None
        if looks_like_field(rest):
            _report(result, line, _six_fields(rest))
            return
    command, stdin = split_percent(rest)
    command = _strip_trailing_blanks(command)
    if not command:
        _report(result, line, "a schedule with no command" + (" (the line starts with '%')" if stdin else ""))
        return
    if not line.terminated:
        _report(
            result,
            line,
            "no newline at the end of the file: cron ignores this last line (cronie stops "
            "reading at it, and `crontab` refuses the file); add a newline",
        )
        return
    if state.bad_tz_line is not None:
        _report(result, line, f"its zone comes from the invalid CRON_TZ on line {state.bad_tz_line}")
        return
    description = "\n".join(state.comments).strip() or None
    result.entries.append(
        Entry(
            result.file,
            line.number,
            schedule,
            user,
            command,
            stdin,
            MappingProxyType(dict(state.env)),
            state.cron_tz,
            state.random_delay,
            description,
            state.id_hint,
        )
    )


def _schedule_and_rest(line: _Line, text: str, result: Crontab) -> tuple[str, str] | None:
    from schedctl.cron import validate_expression

    tokens = _tokens(text, 5)
    if not tokens:
        _report(result, line, "a '-' with no schedule after it")
        return None
    if "=" in tokens[0][0] or (len(tokens) > 1 and tokens[1][0].startswith("=")):
        _report(
            result,
            line,
            "neither a job nor an environment setting cron accepts (a quoted value must be "
            "the whole value, and its quotes must close)",
        )
        return None
    if text.startswith("@"):
        macro, end = tokens[0]
        if macro == "@reboot":
            _report(
                result,
                line,
                "@reboot runs at boot, not at a time: left out; run it from the host's boot "
                "(a systemd unit) instead",
                severity="warning",
            )
            return None
        if macro.lower() in _MACROS and macro not in _MACROS:
            _report(
                result, line, f"cron reads @-macros in lower case only: '{macro}' (write '{macro.lower()}')"
            )
            return None
        schedule = macro
    else:
        if len(tokens) < 5:
            _report(
                result,
                line,
                f"too few fields: a job line needs 5 time fields and a command, found "
                f"{len(tokens)} field{'s' if len(tokens) != 1 else ''}",
            )
            return None
        schedule, end = " ".join(t for t, _ in tokens), tokens[-1][1]
    rest = text[end:].lstrip(_BLANKS)
    try:
        validate_expression(schedule)
    except SchedctlError as exc:
        # `0 30 2 * * * cmd` fails as five fields; the real mistake is the sixth (seconds) one.
        _report(result, line, _six_fields(rest) if rest and looks_like_field(rest) else str(exc))
        return None
    if not rest:
        _report(result, line, "a schedule with no command")
        return None
    return schedule, rest


def _user_column(line: _Line, rest: str, result: Crontab) -> tuple[str, str] | None:
    tokens = _tokens(rest, 1)
    user, end = tokens[0]
    command = rest[end:].lstrip(_BLANKS)
    if _FIELD_LIKE.match(user):
        _report(result, line, _six_fields(rest))
        return None
    if not _ACCOUNT.match(user):
        why = "a path" if "/" in user else "not an account name"
        hint = " (is this a user crontab? pass --format user)" if "/" in user or not command else ""
        _report(result, line, f"the user column '{user}' cannot be an account name: it is {why}{hint}")
        return None
    if not command:
        _report(result, line, f"a schedule with no command (after the user column '{user}')")
        return None
    return user, command


def looks_like_field(rest: str) -> bool:
    first = _tokens(rest, 1)[0][0]
    return bool(_FIELD_LIKE.match(first))


def _six_fields(rest: str) -> str:
    first = _tokens(rest, 1)[0][0]
    return (
        f"6 time fields: cron has no seconds field, so '{first}' would be run as the command (or read "
        "as the user); write the 5-field schedule (a 6-field one with seconds belongs in the TOML)"
    )


def _strip_trailing_blanks(command: str) -> str:
    """Trailing blanks mean nothing to the shell, unless a backslash escapes the first of them."""
    match = re.search(r"[ \t]+\Z", command)
    if match is None:
        return command
    start = match.start()
    backslashes = start - len(command[:start].rstrip("\\"))
    return command[: start + 1] if backslashes % 2 else command[:start]
