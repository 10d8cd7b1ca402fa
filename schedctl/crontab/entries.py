"""What reading a crontab produces (``Entry``, ``Crontab``) and what the reader carries from line to line."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from schedctl.crontab.diagnostics import error, one_line, warning
from schedctl.errors import Diagnostic
from schedctl.timing.crondialect import CRONIE

BLANKS = " \t"  # cron's Skip_Blanks: only space and tab separate fields


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
    ignored_cron_tz: int | None = (
        None  # the line of a CRON_TZ above that the dialect's cron ignores (Debian's)
    )

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Crontab:
    file: str
    format: str
    format_reason: str
    dialect: str = CRONIE
    entries: list[Entry] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


@dataclass
class Line:
    number: int
    text: str  # decoded (invalid bytes replaced), CR of a CRLF ending removed, leading blanks removed
    bad_byte: str | None  # "0xff at column 7" when the line is not UTF-8
    terminated: bool


class LineState:
    """What cron carries from line to line: the environment, and the comment block above the next job."""

    def __init__(self, dialect: str, host_account: Callable[[str], bool]) -> None:
        self.dialect = dialect
        self.host_account = host_account
        self.continued_from: int | None = None  # the line above ended with a '\\' (cron has no continuation)
        self.env: dict[str, str] = {}
        self.cron_tz: str | None = None
        self.ignored_cron_tz: int | None = None
        self.bad_tz_line: int | None = None
        self.random_delay: int | None = None
        self.comments: list[str] = []
        self.id_hint: str | None = None

    def reset_block(self) -> None:
        self.comments = []
        self.id_hint = None


def report(result: Crontab, line: Line, message: str, *, severity: str = "error") -> None:
    make = error if severity == "error" else warning
    result.diagnostics.append(make(result.file, line.number, one_line(message)))
