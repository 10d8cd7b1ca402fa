"""The regular TOML that tools write for ``[jobs.<id>]`` tables, read five times faster than tomllib does.

A million jobs are a generated file (or a folder of them), one ``key = value`` per line; tomllib, in pure
Python, spends ~30 us a job on it, most of the time of loading. ``jobs_document`` reads only a strict subset
of TOML, line by line with one regular expression: ``[jobs.<id>]`` and ``[jobs.<id>.<table>]`` headers with
bare keys, ``key = value`` with a bare key and a basic string (escapes ``\\ \" \n \t \b \f \r`` only), an
integer, a boolean or an array of such strings (on one line or several, as tomli-w writes it), blank lines and
comments. On anything else, or anything TOML forbids (a key or table defined twice, a control character), it
returns None and the caller parses with tomllib, which gives the error and its line: so what it returns is
always exactly what ``tomllib.loads`` returns for the same text.
"""

from __future__ import annotations

import re
from typing import Any

_KEY = r"[A-Za-z0-9_-]+"
# A basic string's body: no quote, backslash or control character except tab, or one of the short escapes.
_BODY = r'(?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[\\"ntbfr])*'
_STRING = f'"{_BODY}"'
_GAP = r"[ \t\n]*"
_COMMENT = r"(?:\#[^\x00-\x08\x0a-\x1f\x7f]*)?"

# One line (an array may span several); the last group takes any line that is not one of these.
_LINE = re.compile(
    rf"""[ \t]*(?:
        \[jobs\.({_KEY})(?:\.({_KEY}))?\]
      | ({_KEY})[ \t]*=[ \t]*(?:
            "({_BODY})"
          | (\[{_GAP}(?:{_STRING}{_GAP},{_GAP})*(?:{_STRING}{_GAP})?\])
          | (-?(?:0|[1-9][0-9]{{0,17}}))(?![0-9])
          | (true|false)
        )
    )?[ \t]*{_COMMENT}(?:\n|\Z)
    | ([^\n]*\n?)""",
    re.VERBOSE,
)
_ITEM = re.compile(f'"({_BODY})"')
_ESCAPE = re.compile(r"\\(.)")
_ESCAPED = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "b": "\b", "f": "\f", "r": "\r"}


def jobs_document(text: str) -> dict[str, Any] | None:
    """``tomllib.loads(text)`` when ``text`` is in the subset and holds at least one job; else None."""
    jobs: dict[str, dict[str, Any]] = {}
    job_id = None
    table: dict[str, Any] | None = None
    for header, sub, key, string, array, number, flag, other in _LINE.findall(text):
        if other:
            return None
        if key:
            if table is None or key in table:
                return None
            if array:
                table[key] = [_unescape(item) for item in _ITEM.findall(array)]
            elif number:
                table[key] = int(number)
            elif flag:
                table[key] = flag == "true"
            else:
                table[key] = _unescape(string) if "\\" in string else string
        elif header:
            if sub:
                parent = jobs.get(header)
                # A sub-table of an earlier job, or defined twice: legal or not, tomllib decides.
                if parent is None or header != job_id or sub in parent:
                    return None
                table = parent[sub] = {}
            else:
                if header in jobs:
                    return None
                job_id, table = header, {}
                jobs[header] = table
    return {"jobs": jobs} if jobs else None


def _unescape(body: str) -> str:
    if "\\" not in body:
        return body
    return _ESCAPE.sub(lambda m: _ESCAPED[m.group(1)], body)
