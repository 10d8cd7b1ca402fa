"""A crontab's shape before its meaning: system or user format, the blank-separated tokens of a line, and
whether a line is an environment setting (cronie's ``load_env`` state machine).

Split from ``schedctl.crontab.parse`` so that module reads lines for what they mean.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePath

from schedctl.crontab.accounts import ALSO_COMMANDS, is_known_account

SYSTEM = "system"
USER = "user"
_TOKEN = re.compile(r"[^ \t]+")
# An account name as useradd and systemd accept it; a path, a '*' or a number is not one.
ACCOUNT = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?\Z")
_EXPORT_HEADER = re.compile(r"schedctl export\b.*\bformat: (system|user)\b")


def detect_format(
    file: str, lines: list[tuple[int, str]], known_account: Callable[[str], bool] = is_known_account
) -> tuple[str, str, str | None]:
    """System (a user column after the schedule) or user crontab, why, and a refusal when it cannot tell.

    A /etc/cron.d file copied elsewhere has no folder name to go by: it is a system crontab when every job
    line's sixth field is an account (on this host, or one Debian packages create). When only some are, the
    file cannot be read safely either way (a user name would end up in a command), so it is refused."""
    path = PurePath(file)
    if path.name == "crontab" and path.parent.name == "etc":
        return SYSTEM, "/etc/crontab", None
    if path.parent.name == "cron.d":
        return SYSTEM, "a file in cron.d", None
    for _, text in lines:
        if text.startswith("#"):
            header = _EXPORT_HEADER.search(text)
            if header:
                return header.group(1), "written by schedctl export", None
    found = [(number, _sixth_token(text)) for number, text in lines if _is_job_line(text)]
    columns = [(n, c) for n, c in found if c is not None]
    if not columns:
        return USER, "no user column", None
    names = [c for _, c in columns]
    if all(ACCOUNT.match(c) for c in names) and "root" in names:
        return SYSTEM, "every job line has a user column", None
    # An account that is also a command (`mail -s ...`) is no evidence either way.
    accounts = [
        (n, c) for n, c in columns if ACCOUNT.match(c) and known_account(c) and c not in ALSO_COMMANDS
    ]
    others = [(n, c) for n, c in columns if c not in ALSO_COMMANDS and (n, c) not in accounts]
    if accounts and not others:
        shown = ", ".join(sorted({c for _, c in accounts})[:3])
        return SYSTEM, f"every job line's sixth field is an account ({shown}): a user column", None
    if accounts:
        number, name = accounts[0]
        return (
            USER,
            "",
            f"cannot tell whether this is a system crontab (a user column after the schedule): the sixth "
            f"field is an account on {len(accounts)} of {len(columns)} job lines ('{name}' on line {number}); "
            "pass --format system or --format user",
        )
    return USER, "no user column", None


def _is_job_line(text: str) -> bool:
    return (
        bool(text) and not text.startswith("#") and parse_env(text) is None and not text.startswith("@reboot")
    )


def _sixth_token(text: str) -> str | None:
    tokens = split_tokens(text.removeprefix("-"), 7)
    wanted = 1 if tokens and tokens[0][0].startswith("@") else 5
    return tokens[wanted][0] if len(tokens) > wanted + 1 else None


def split_tokens(text: str, limit: int) -> list[tuple[str, int]]:
    """Up to ``limit`` blank-separated tokens, each with the offset just past it."""
    out: list[tuple[str, int]] = []
    for match in _TOKEN.finditer(text):
        out.append((match.group(), match.end()))
        if len(out) == limit:
            break
    return out


def parse_env(text: str) -> tuple[str, str] | None:
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
    # EQ2: `NAME=` with nothing after it, an empty value: cronie's load_env ends `if (state != FINI && state !=
    # EQ2 && ...)` (older cronie, e.g. env.c at 043670b1, and Debian's cron read such a line as a job).
    if state in ("FINI", "EQ2"):
        return "".join(name), "".join(value)
    return None


def empty_setting(text: str) -> str | None:
    """The name of a `NAME=` line with nothing after the '=' (Debian's cron does not read it as a setting)."""
    match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*", text)
    return match.group(1) if match else None
