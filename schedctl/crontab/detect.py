"""System crontab (a user column after the schedule) or user crontab, and why, for a file with no folder to go by.

A /etc/cron.d file copied out of its folder looks like a user crontab whose commands all start with a name.
The evidence a sysadmin would use decides, line by line:

* the sixth field: an account here or on a standard list (``schedctl.crontab.accounts``) is evidence of a
  user column; a path, a common program (``php``, ``echo``) or a word that cannot be an account name is
  evidence against it; an account that is also a command (``backup``, ``news``, ``mail``) is neither alone;
* the field after it: a shell construct (``[``, ``test -x``, ``if``, ``NAME=value``) or a program path reads as
  the start of a command, so the sixth field was a user; an option, a quote, a redirect, a URL or nothing at
  all reads as an argument, so the sixth field was the command;
* the whole file: a system crontab has a user column on every line. Lines that say so and lines that say
  otherwise in one file are refused (``--format`` decides), naming both; lines that show neither leave a
  user crontab, as cron itself would read the file from a user's spool.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath

from schedctl.crontab.accounts import ALSO_COMMANDS, COMMANDS, is_known_account
from schedctl.crontab.fileformat import ACCOUNT, SYSTEM, USER, parse_env, split_tokens

_EXPORT_HEADER = re.compile(r"schedctl export\b.*\bformat: (system|user)\b")
# Shell grammar that starts a command and makes no sense as a program's first argument.
_SHELL_STARTS = frozenset({"[", "[[", "if", "{", "!", "for", "while", "until", "case"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# Where programs live: a path through one of these folders reads as a command, /home/alice/docs does not.
_PROGRAM_FOLDERS = frozenset(
    {"bin", "sbin", "libexec", "cron.daily", "cron.hourly", "cron.weekly", "cron.monthly"}
)
_PROGRAM_TREES = ("/usr/lib/", "/usr/share/")
_ARGUMENT_STARTS = ("-", "'", '"', ">", "<", "|", "&", ";", "%", "*", "2>", "1>")

# A line's verdict: it has a user column, it has none, or it could be read either way.
_HAS = "has"
_NONE = "none"
_EITHER = "either"


@dataclass(frozen=True)
class Detection:
    format: str
    reason: str
    refusal: str | None = None  # set when the file cannot be read safely either way
    line: int | None = None  # the line the refusal is about


@dataclass(frozen=True)
class _Evidence:
    line: int
    user: str  # the sixth field (the second after an @-macro)
    verdict: str
    why: str  # what the line shows, for the reason or the refusal
    known: bool  # the sixth field is an account (here or on a list)
    follows: str | None = None  # _HAS, not an account here: what after it makes the sixth field a user


def detect_format(
    file: str, lines: list[tuple[int, str]], known_account: Callable[[str], bool] = is_known_account
) -> Detection:
    path = PurePath(file)
    if path.name == "crontab" and path.parent.name == "etc":
        return Detection(SYSTEM, "/etc/crontab")
    if path.parent.name == "cron.d":
        return Detection(SYSTEM, "a file in a cron.d folder")
    for _, text in lines:
        if text.startswith("#"):
            header = _EXPORT_HEADER.search(text)
            if header:
                return Detection(header.group(1), "written by schedctl export")
    evidence = [e for number, text in lines if (e := _judge(number, text, known_account)) is not None]
    has = [e for e in evidence if e.verdict == _HAS]
    none = [e for e in evidence if e.verdict == _NONE]
    if has and none:
        without, with_ = none[0], has[0]
        return Detection(
            USER,
            "",
            "cannot tell whether this is a system crontab (a user column after the schedule): line "
            f"{without.line} has no user column ({without.why}), but line {with_.line} has one ({with_.why}); "
            "pass --format system or --format user",
            max(without.line, with_.line),
        )
    if has:
        return Detection(SYSTEM, _system_reason(evidence))
    if none:
        return Detection(USER, f"no user column on line {none[0].line}: {none[0].why}")
    if evidence:
        return Detection(USER, f"no line shows a user column: on line {evidence[0].line}, {evidence[0].why}")
    return Detection(USER, "no job lines")


def _judge(number: int, text: str, known_account: Callable[[str], bool]) -> _Evidence | None:
    """What one line says about a user column, or None when it is no job line (or too short to tell)."""
    if not text or text.startswith("#") or parse_env(text) is not None:
        return None
    body = text.removeprefix("-")  # cronie's 'no syslog line' mark
    tokens = [t for t, _ in split_tokens(body, 9)]
    at = 1 if tokens and tokens[0].startswith("@") else 5
    if len(tokens) <= at:
        return None  # a broken schedule: the line's own error says more than a guess could
    user, after = tokens[at], tokens[at + 1 :]
    if not ACCOUNT.match(user):
        kind = "a path" if "/" in user else "not an account name"
        return _Evidence(number, user, _NONE, f"'{user}' is {kind}", False)
    if not after:
        return _Evidence(number, user, _NONE, f"nothing follows '{user}'", False)
    first = after[0]
    if _is_argument(first):
        return _Evidence(number, user, _NONE, f"'{first}' after '{user}' cannot start a command", False)
    if user in COMMANDS:
        return _Evidence(number, user, _NONE, f"'{user}' is a command", False)
    starts_shell = _starts_shell_command(after)
    program = _is_program_path(first)
    if known_account(user):
        if user not in ALSO_COMMANDS or starts_shell or program:
            return _Evidence(number, user, _HAS, f"'{user}', an account, then a command", True)
        return _Evidence(
            number,
            user,
            _EITHER,
            f"'{user}' is an account but also a command, and '{first}' after it does not read as one",
            True,
        )
    if starts_shell:
        follows = f"'{first}' after it starts a shell command"
    elif program and _named_for(first, user):
        follows = f"'{first}' after it is a program named for it"
    else:
        follows = None
    if follows:
        return _Evidence(number, user, _HAS, f"'{user}', not an account here, but {follows}", False, follows)
    return _Evidence(
        number,
        user,
        _EITHER,
        f"'{user}' is not an account here, and '{first}' after it does not read as a command",
        False,
    )


def _system_reason(evidence: list[_Evidence]) -> str:
    """Which names make up the user column, and on what evidence: accounts, or what follows the others.

    ``evidence`` holds no _NONE line (the file would have been refused); its _EITHER lines are read with the
    rest, so their names are listed too."""
    known: list[str] = []
    others: dict[str, _Evidence] = {}
    for e in evidence:
        if e.known:
            if e.user not in known:
                known.append(e.user)
        elif e.user not in others or (others[e.user].follows is None and e.follows is not None):
            others[e.user] = e
    parts = []
    if known:
        shown = ", ".join(known[:3]) + (f" and {len(known) - 3} more" if len(known) > 3 else "")
        parts.append(f"{shown} ({'an account' if len(known) == 1 else 'accounts'}), then a command")
    for name, e in list(others.items())[:3]:
        why = f"but on line {e.line} {e.follows}" if e.follows else "read with the others"
        parts.append(f"{name} (not an account here, {why})")
    if len(others) > 3:
        parts.append(f"{len(others) - 3} more not accounts here")
    return "every job line has a user column: " + "; ".join(parts)


def _is_argument(token: str) -> bool:
    """A token no command starts with: an option, a quoted word, a redirect or operator, stdin, a URL, a number."""
    return token.startswith(_ARGUMENT_STARTS) or "://" in token or token.isdigit()


def _starts_shell_command(after: list[str]) -> bool:
    first = after[0]
    if first in _SHELL_STARTS or first.startswith("(") or _ASSIGNMENT.match(first):
        return True
    following = after[1] if len(after) > 1 else ""
    # `test -x /usr/bin/x && ...`, `command -v prog && ...`, `cd / && ...`: as arguments these would be odd;
    # a bare `test` or `cd` after a name may well be one (`backup test`).
    if first == "test":
        return following.startswith(("-", "!"))
    if first == "command":
        return following in ("-v", "-V", "-p")
    if first == "cd":
        return len(after) > 2 and after[2] in ("&&", ";", "||") or following.endswith(";")
    return False


def _is_program_path(token: str) -> bool:
    if not token.startswith(("/", "~/")) or token.endswith("/"):
        return False
    folders = token.split("/")[1:-1]
    return any(f in _PROGRAM_FOLDERS for f in folders) or (
        token.startswith(_PROGRAM_TREES) and len(folders) >= 3
    )


def _named_for(path: str, user: str) -> bool:
    """The path names the account (``sogo /usr/sbin/sogo-tool``, ``billing /opt/billing/bin/run``): a
    package's account running the package's program, not a wrapper (``nice /usr/bin/x``) running another."""
    return any(
        part == user or part.startswith((f"{user}-", f"{user}_", f"{user}.")) for part in path.split("/")
    )
