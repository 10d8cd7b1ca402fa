"""Text from job files and the database, made safe to print on a terminal (issue 16).

A command may hold ``\\x1b]0;...\\x07`` (accepted: it is the job's business); printed raw it retitles the
operator's terminal or worse. Tables and one-line messages show every control character escaped (``\\x1b``);
files keep them only in their own format's escaping (TOML's ``\\u001b``; a crontab has none, so such a job
is exported as a comment).
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


def has_controls(text: str) -> bool:
    """Control characters other than tab and newline (which formats have their own rules for)."""
    return _CONTROL.search(text.replace("\t", "").replace("\n", "")) is not None
