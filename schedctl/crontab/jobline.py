"""A crontab's job line -> an ``Entry``: the schedule (five fields or an @-macro), a system crontab's user
column, and the command with its standard input (cron's ``%`` rule, ``schedctl.crontab.percent``)."""

from __future__ import annotations

import re
from types import MappingProxyType

from schedctl.crontab.entries import BLANKS, Crontab, Entry, Line, LineState, report
from schedctl.crontab.fileformat import ACCOUNT, SYSTEM, USER, split_tokens
from schedctl.crontab.percent import split_percent
from schedctl.errors import SchedctlError
from schedctl.timing.crondialect import DEBIAN

_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# What a cron time field looks like, to catch a sixth (seconds) field before it is run as a command or user.
_FIELD_LIKE = re.compile(r"[0-9*?][0-9*?,/LW#-]*\Z|[0-9*,/-]*[LW#?][0-9*,/LW#-]*\Z")


def read_job(line: Line, state: LineState, result: Crontab) -> None:
    if line.text.startswith("-") and state.dialect == DEBIAN:
        report(
            result,
            line,
            "a '-' before the schedule (cronie's 'no syslog line' mark): Debian's cron rejects this line "
            "(crontab(1): bad minute)",
        )
        return
    text = line.text.removeprefix("-")  # cronie: '-' first silences the syslog line; nothing else changes
    if line.bad_byte:
        report(result, line, f"bytes that are not UTF-8 (byte {line.bad_byte}); cron jobs here must be UTF-8")
        return
    if "\x00" in text:
        report(result, line, "a NUL character: cron would cut the line there")
        return
    parsed = _schedule_and_rest(line, text, result, state.dialect)
    if parsed is None:
        return
    if line.text.startswith("-") and result.format == USER:
        report(
            result,
            line,
            "the '-' (no syslog line) is dropped; cronie accepts it only in root's crontab, so if this was "
            "another user's crontab, cron never ran this line",
            severity="warning",
        )
    schedule, rest = parsed
    if result.format == SYSTEM:
        split = _user_column(line, rest, result)
        if split is None:
            return
        user, rest = split
        if state.dialect == DEBIAN and not state.host_account(user):
            report(
                result,
                line,
                f"user '{user}' does not exist on this host: Debian's cron skips this line here (imported: "
                "it runs where the user exists)",
                severity="warning",
            )
    else:
        user = None
        if looks_like_field(rest):
            report(result, line, _six_fields(rest))
            return
    command, stdin = split_percent(rest, state.dialect)
    command = _strip_trailing_blanks(command)
    if not command:
        report(result, line, "a schedule with no command" + (" (the line starts with '%')" if stdin else ""))
        return
    if not line.terminated:
        report(
            result,
            line,
            "no newline at the end of the file: cron ignores this last line (cronie stops "
            "reading at it, and `crontab` refuses the file); add a newline",
        )
        return
    if state.bad_tz_line is not None:
        report(result, line, f"its zone comes from the invalid CRON_TZ on line {state.bad_tz_line}")
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
            state.ignored_cron_tz,
        )
    )


def _schedule_and_rest(line: Line, text: str, result: Crontab, dialect: str) -> tuple[str, str] | None:
    from schedctl.timing.cron import validate_expression

    tokens = split_tokens(text, 5)
    if not tokens:
        report(result, line, "a '-' with no schedule after it")
        return None
    if "=" in tokens[0][0] or (len(tokens) > 1 and tokens[1][0].startswith("=")):
        report(
            result,
            line,
            "neither a job nor an environment setting cron accepts (a quoted value must be "
            "the whole value, and its quotes must close)",
        )
        return None
    if text.startswith("@"):
        macro, end = tokens[0]
        if macro == "@reboot":
            report(
                result,
                line,
                "@reboot runs at boot, not at a time: left out; run it from the host's boot "
                "(a systemd unit) instead",
                severity="warning",
            )
            return None
        if macro.lower() in _MACROS and macro not in _MACROS:
            report(
                result, line, f"cron reads @-macros in lower case only: '{macro}' (write '{macro.lower()}')"
            )
            return None
        schedule = macro
    else:
        if len(tokens) < 5:
            report(
                result,
                line,
                f"too few fields: a job line needs 5 time fields and a command, found "
                f"{len(tokens)} field{'s' if len(tokens) != 1 else ''}",
            )
            return None
        schedule, end = " ".join(t for t, _ in tokens), tokens[-1][1]
    rest = text[end:].lstrip(BLANKS)
    try:
        validate_expression(schedule, dialect=dialect)
    except SchedctlError as exc:
        # `0 30 2 * * * cmd` fails as five fields; the real mistake is the sixth (seconds) one.
        report(result, line, _six_fields(rest) if rest and looks_like_field(rest) else str(exc))
        return None
    if not rest:
        report(result, line, "a schedule with no command")
        return None
    return schedule, rest


def _user_column(line: Line, rest: str, result: Crontab) -> tuple[str, str] | None:
    tokens = split_tokens(rest, 1)
    user, end = tokens[0]
    command = rest[end:].lstrip(BLANKS)
    if _FIELD_LIKE.match(user):
        report(result, line, _six_fields(rest))
        return None
    if not ACCOUNT.match(user):
        why = "a path" if "/" in user else "not an account name"
        hint = " (is this a user crontab? pass --format user)" if "/" in user or not command else ""
        report(result, line, f"the user column '{user}' cannot be an account name: it is {why}{hint}")
        return None
    if not command:
        report(result, line, f"a schedule with no command (after the user column '{user}')")
        return None
    return user, command


def looks_like_field(rest: str) -> bool:
    first = split_tokens(rest, 1)[0][0]
    return bool(_FIELD_LIKE.match(first))


def _six_fields(rest: str) -> str:
    first = split_tokens(rest, 1)[0][0]
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
