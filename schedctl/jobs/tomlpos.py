"""Where each key of a TOML document sits.

tomllib returns values without positions, so a ``FILE:LINE`` error about a bad value needs the line of its
key found in the text. This scanner walks a document tomllib already accepted (it is lenient, not a parser:
it never has to reject anything) and records the line on which every key path is first defined: table
headers ``[jobs.x]``, quoted parts ``[jobs."a.b"]``, dotted keys ``jobs.x.schedule = ...``, keys inside
inline tables, and array elements (as an integer path part). Multi-line strings and arrays are skipped as
values, so their contents never look like keys.
"""

from __future__ import annotations

import bisect
import re
import tomllib
from dataclasses import dataclass, field

Path = tuple[str | int, ...]

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SCALAR_END = frozenset(",]}\n#")


@dataclass
class KeyLines:
    """Line numbers (1-based) of key paths; ``line_of`` falls back to the nearest enclosing key."""

    lines: dict[Path, int] = field(default_factory=dict)
    duplicates: list[tuple[Path, int]] = field(default_factory=list)  # assignments of a path seen twice

    def line_of(self, path: Path) -> int | None:
        for end in range(len(path), 0, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None


def key_lines(text: str) -> KeyLines:
    """Scan ``text``; on text the scanner cannot follow, keep what it found so far."""
    scanner = _Scanner(text)
    try:
        scanner.document()
    except (IndexError, ValueError, RecursionError, _Stop):  # only text tomllib refused gets here
        pass
    return scanner.found


class _Stop(Exception):
    pass


class _Scanner:
    def __init__(self, text: str) -> None:
        self.s = text
        self.n = len(text)
        self.i = 0
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.found = KeyLines()
        self.array_tables: dict[Path, int] = {}
        self.assigned: set[Path] = set()

    def line(self, pos: int | None = None) -> int:
        return bisect.bisect_left(self.newlines, self.i if pos is None else pos) + 1

    def record(self, path: Path, line: int) -> None:
        for end in range(1, len(path) + 1):
            self.found.lines.setdefault(path[:end], line)

    def document(self) -> None:
        table: Path = ()
        while True:
            self.skip_blank(newlines=True)
            if self.i >= self.n:
                return
            if self.s[self.i] == "[":
                table = self.header()
            else:
                self.key_value(table)
            self.skip_to_line_end()

    def header(self) -> Path:
        line = self.line()
        is_array = self.s.startswith("[[", self.i)
        self.i += 2 if is_array else 1
        path: Path = tuple(self.key())
        self.i += 2 if is_array else 1
        self.record(path, line)
        if is_array:
            index = self.array_tables.get(path, 0)
            self.array_tables[path] = index + 1
            path = (*path, index)
            self.record(path, line)
        return path

    def key_value(self, table: Path) -> None:
        line = self.line()
        path = (*table, *self.key())
        if path in self.assigned:
            self.found.duplicates.append((path, line))
        self.assigned.add(path)
        self.record(path, line)
        self.skip_blank()
        if self.i >= self.n or self.s[self.i] != "=":
            raise _Stop
        self.i += 1
        self.skip_blank()
        self.value(path)

    def key(self) -> list[str]:
        parts: list[str] = []
        while True:
            self.skip_blank()
            ch = self.s[self.i]
            if ch == '"':
                parts.append(self.basic_string())
            elif ch == "'":
                end = self.s.index("'", self.i + 1)
                parts.append(self.s[self.i + 1 : end])
                self.i = end + 1
            else:
                start = self.i
                while self.i < self.n and self.s[self.i] in _BARE:
                    self.i += 1
                if self.i == start:
                    raise _Stop
                parts.append(self.s[start : self.i])
            self.skip_blank()
            if self.i < self.n and self.s[self.i] == ".":
                self.i += 1
                continue
            return parts

    def basic_string(self) -> str:
        """A one-line basic string; escapes are decoded well enough to name a key."""
        start = self.i + 1
        self.i = start
        while self.s[self.i] != '"':
            self.i += 2 if self.s[self.i] == "\\" else 1
        raw = self.s[start : self.i]
        self.i += 1
        if "\\" not in raw:
            return raw
        try:
            return str(tomllib.loads(f'k = "{raw}"')["k"])
        except tomllib.TOMLDecodeError:
            return raw

    def value(self, path: Path) -> None:
        s, i = self.s, self.i
        if s.startswith('"""', i):
            self.multiline('"""', escapes=True)
        elif s.startswith("'''", i):
            self.multiline("'''", escapes=False)
        elif s[i] == '"':
            self.basic_string()
        elif s[i] == "'":
            self.i = s.index("'", i + 1) + 1
        elif s[i] == "[":
            self.array(path)
        elif s[i] == "{":
            self.inline_table(path)
        else:
            while self.i < self.n and s[self.i] not in _SCALAR_END:
                self.i += 1

    def multiline(self, quote: str, escapes: bool) -> None:
        self.i += 3
        while True:
            if self.i >= self.n:
                raise _Stop  # unterminated: only in text tomllib refused
            if escapes and self.s[self.i] == "\\":
                self.i += 2
                continue
            if self.s.startswith(quote, self.i):
                self.i += 3
                # Up to two more quotes right before the delimiter belong to the string.
                for _ in range(2):
                    if self.i < self.n and self.s[self.i] == quote[0]:
                        self.i += 1
                return
            self.i += 1

    def array(self, path: Path) -> None:
        self.i += 1
        index = 0
        while True:
            self.skip_blank(newlines=True)
            if self.s[self.i] == "]":
                self.i += 1
                return
            element = (*path, index)
            self.record(element, self.line())
            self.value(element)
            index += 1
            self.next_item("]")

    def inline_table(self, path: Path) -> None:
        self.i += 1
        while True:
            self.skip_blank(newlines=True)
            if self.s[self.i] == "}":
                self.i += 1
                return
            self.key_value(path)
            self.next_item("}")

    def next_item(self, close: str) -> None:
        """After an element: a comma, or the closing bracket. Anything else (only in text tomllib refused)
        would leave the scanner where it stands, forever."""
        self.skip_blank(newlines=True)
        if self.s[self.i] == ",":
            self.i += 1
        elif self.s[self.i] != close:
            raise _Stop

    def skip_blank(self, newlines: bool = False) -> None:
        """Spaces and tabs; with ``newlines``, also line ends and comments."""
        while self.i < self.n:
            ch = self.s[self.i]
            if ch in " \t" or (newlines and ch in "\r\n"):
                self.i += 1
            elif newlines and ch == "#":
                self.skip_comment()
            else:
                return

    def skip_comment(self) -> None:
        end = self.s.find("\n", self.i)
        self.i = self.n if end < 0 else end

    def skip_to_line_end(self) -> None:
        self.skip_blank()
        if self.i < self.n and self.s[self.i] == "#":
            self.skip_comment()
