"""A crontab's shape before its meaning: the two formats, the blank-separated tokens of a line, and whether a
line is an environment setting (cronie's ``load_env`` state machine). Which format a file is in:
``schedctl.crontab.detect``.

Split from ``schedctl.crontab.parse`` so that module reads lines for what they mean.
"""

from __future__ import annotations

import re

SYSTEM = "system"
USER = "user"
_TOKEN = re.compile(r"[^ \t]+")
# An account name as useradd and systemd accept it; a path, a '*' or a number is not one.
ACCOUNT = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?\Z")


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
