"""Text from job files and the database, made safe to print on a terminal (issues 16 and 24).

A command may hold ``\\x1b]0;...\\x07`` (accepted: it is the job's business); printed raw it retitles the
operator's terminal or worse. Tables and one-line messages show every control character escaped (``\\x1b``);
files keep them only in their own format's escaping (TOML's ``\\u001b``; a crontab has none, so such a job
is exported as a comment). A value echoed in an error line is also cut (``cut``): a 10,000-character job id
must not make a 10,000-character line. Rich markup is the views' concern: ``schedctl.cli._render``.
"""

from __future__ import annotations

import re

# C0 (tab and newline too: one cell, one line), DEL, C1, and the Unicode line and paragraph separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``"a\\x1b]0;x\\x07"`` -> ``"a\\\\x1b]0;x\\\\x07"``: one printable line."""
    return _CONTROL.sub(_escape, text)


def escape_lines(text: str) -> str:
    """Several lines (a message with one diagnostic a line): each line escaped, the line breaks kept."""
    return "\n".join(escape_controls(line) for line in text.split("\n"))


_CONTROL_IN_OUTPUT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def escape_output(text: str) -> str:
    """A job's output for a terminal: lines and tabs as printed, every other control character escaped, so
    a job user's ``\\x1b]...`` cannot retitle, recolour or hyperlink the terminal of whoever reads it."""
    return _CONTROL_IN_OUTPUT.sub(_escape, text)


def has_controls(text: str) -> bool:
    """Control characters other than tab and newline (which formats have their own rules for)."""
    return _CONTROL.search(text.replace("\t", "").replace("\n", "")) is not None


def cut(value: str, limit: int = 80, *, quote: str = "", length: int | None = None) -> str:
    """``value`` for a one-line message, escaped; past ``limit`` characters its head and how long it was:
    ``cut("a" * 10_000, quote="'")`` -> ``'aaaa...' (10000 characters)``. ``length``: the length to name
    when ``value`` is already a rendering of the original (a JSON string)."""
    text = escape_controls(value)
    if len(text) <= limit:
        return f"{quote}{text}{quote}"
    count = f"({len(value) if length is None else length} characters)"
    return f"{quote}{text[:limit]}...{quote} {count}" if quote else f"{text[:limit]}...{count}"


def quoted(value: str, limit: int = 80) -> str:
    """``cut(value, limit)`` in single quotes: a job id, a path or a label echoed in an error line."""
    return cut(value, limit, quote="'")
