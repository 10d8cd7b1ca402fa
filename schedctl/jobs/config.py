"""Job definitions in TOML: load them with one-line ``FILE:LINE`` errors, write them back with tomli-w.

A job file holds ``[jobs.<id>]`` tables and nothing else. Loading reports every error of every file it can
reach in one ``ConfigError`` and returns nothing when any job is bad, so a typo never half-applies a job set.
Values are checked here, once, for TOML and for the crontab importer alike (``job_from_mapping``).
"""

from __future__ import annotations

import gc
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomli_w

from schedctl.errors import ConfigError, Diagnostic
from schedctl.jobs import configkeys as keys
from schedctl.jobs.configkeys import Invalid, did_you_mean, one_line, render_path, show
from schedctl.jobs.job import CatchUp, Job
from schedctl.jobs.tomlfast import jobs_document
from schedctl.jobs.tomlpos import KeyLines, key_lines
from schedctl.timing.timetext import format_duration, parse_duration
from schedctl.timing.zones import DstPolicy

MAX_FILE_BYTES = 256 * 1024 * 1024  # 1,000,000 jobs take ~150 MB; this bounds memory for a mistaken path

_TOO_LARGE = f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB: not a job file"

# A key path inside one job (("schedule",), ("env", "PATH"), ("tags", 2)) -> its line, None when unknown.
LineOf = Callable[[tuple[str | int, ...]], int | None]


def load_jobs(path: str | Path, now: datetime | None = None) -> dict[str, Job]:
    """The jobs in a file, or in the ``*.toml`` files of a folder (not its sub-folders; names starting with
    a dot, like editors' lock files, are ignored). Ids must be unique across all files. Ordered by id."""
    with _no_cyclic_gc():
        return _load_jobs(Path(path), now)


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Loading makes hundreds of thousands of objects and no reference cycles: the cyclic collector would
    only rescan them again and again (a fifth of the time of loading 100,000 jobs)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _load_jobs(path: Path, now: datetime | None) -> dict[str, Job]:
    files = _job_files(path)
    diagnostics: list[Diagnostic] = []
    jobs: dict[str, Job] = {}
    # Only names are kept of the files already read: a folder of 1,000 files would otherwise hold every
    # file's text to the end. A duplicate id reads the other file again, to name its line.
    seen_in: list[Path] = []
    first_seen: dict[str, int] = {}  # id -> the index in seen_in of the file that defined it first
    rescanned: dict[int, _Positions] = {}
    first_ids: Iterable[str] = ()
    for file in files:
        try:
            text = _read(file)
        except OSError as exc:
            diagnostics.append(Diagnostic(str(file), None, f"cannot read: {exc.strerror or exc}"))
            continue
        except Invalid as exc:
            diagnostics.append(Diagnostic(str(file), exc.line, exc.message))
            continue
        found, ids, positions, problems = _load_file(text, str(file), now)
        del text
        diagnostics.extend(problems)
        number = len(seen_in)
        seen_in.append(file)
        if number == 0:  # the first file read: no id can be defined twice yet
            jobs, first_ids = found, ids
            continue
        if number == 1:
            first_seen = dict.fromkeys(first_ids, 0)
        for job_id in ids:
            if first_seen.setdefault(job_id, number) == number:
                if job_id in found:
                    jobs[job_id] = found[job_id]
                continue
            other = first_seen[job_id]
            if other not in rescanned:
                rescanned[other] = _Positions(_reread(seen_in[other]))
            other_line = rescanned[other].line_of(("jobs", job_id))
            there = f"{seen_in[other]}:{other_line}" if other_line is not None else str(seen_in[other])
            message = f"{render_path(('jobs', job_id))}: duplicate job id (also defined at {there})"
            diagnostics.append(Diagnostic(str(file), positions.line_of(("jobs", job_id)), message))
    if diagnostics:
        raise ConfigError(diagnostics)
    return _by_id(jobs)


def _by_id(jobs: dict[str, Job]) -> dict[str, Job]:
    """The jobs ordered by id; as they are when generated in order (no copy of a million entries then)."""
    ids = list(jobs)
    return jobs if ids == sorted(ids) else dict(sorted(jobs.items()))


def loads_jobs(text: str | bytes, filename: str, now: datetime | None = None) -> dict[str, Job]:
    """The jobs in one document; ``filename`` is what error lines name."""
    try:
        decoded = _decode(text)
    except Invalid as exc:
        raise ConfigError([Diagnostic(filename, exc.line, exc.message)]) from None
    jobs, _, _, diagnostics = _load_file(decoded, filename, now)
    if diagnostics:
        raise ConfigError(diagnostics)
    return dict(sorted(jobs.items()))


def job_from_mapping(
    job_id: str,
    table: Mapping[str, Any],
    file: str,
    line_of: LineOf,
    now: datetime | None = None,
) -> Job:
    """A Job from plain values, checked exactly as a ``[jobs.<id>]`` table is.

    ``line_of`` maps a key path inside the job to the line to blame (the crontab importer passes
    ``lambda path: entry_line``). Raises ConfigError with every problem of the job.
    """
    diagnostics: list[Diagnostic] = []
    job = _build_job(job_id, table, file, line_of, now or datetime.now(UTC), diagnostics)
    if job is None:
        raise ConfigError(diagnostics)
    return job


def dump_jobs(jobs: Iterable[Job] | Mapping[str, Job]) -> str:
    """TOML that ``loads_jobs`` reads back to the same jobs; keys equal to their default are left out."""
    values = jobs.values() if isinstance(jobs, Mapping) else jobs
    tables = {job.id: _job_table(job) for job in sorted(values, key=lambda j: j.id)}
    return tomli_w.dumps({"jobs": tables})


# ---------------------------------------------------------------------------------------------- loading


def _job_files(path: Path) -> list[Path]:
    try:
        if path.is_dir():
            return sorted(p for p in path.glob("*.toml") if not p.name.startswith(".") and p.is_file())
        if path.exists():
            return [path]
    except OSError as exc:
        raise ConfigError(
            [Diagnostic(str(path), None, f"cannot read job definitions: {exc.strerror or exc}")]
        ) from None
    raise ConfigError([Diagnostic(str(path), None, "cannot read job definitions: no such file or directory")])


def _read(file: Path) -> str:
    """The file's text. The bytes are gone when this returns, before tomllib's peak (100,000 jobs: -12 MB)."""
    from schedctl.jobs.files import FileTooLarge, NotRegularFile, read_regular

    try:  # the size is checked before reading: a mistaken path may be a disk image
        data = read_regular(file, max_bytes=MAX_FILE_BYTES)
    except FileTooLarge:
        raise Invalid(_TOO_LARGE) from None
    except NotRegularFile as exc:
        raise Invalid(f"{exc.kind}, not a regular file: not read") from None
    return _decode(data)


def _reread(file: Path) -> str:
    """A file read before, for its key lines; "" (no lines) if it cannot be read now."""
    try:
        return _read(file)
    except (OSError, Invalid):
        return ""


class _Positions:
    """Key lines, scanned only when an error needs one: a valid file (the common, large case) never is."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._found: KeyLines | None = None

    def line_of(self, path: tuple[str | int, ...]) -> int | None:
        if self._found is None:
            self._found = key_lines(self._text)
        return self._found.line_of(path)


def _load_file(
    text: str, filename: str, now: datetime | None
) -> tuple[dict[str, Job], list[str], _Positions, list[Diagnostic]]:
    """(valid jobs, every declared id, where keys are, diagnostics) for one decoded document."""
    if not _defines_jobs_itself(text):
        loaded = _load_pieces(text, filename, now)
        if loaded is not None:
            return loaded
    try:
        document = _parse(text)
    except Invalid as exc:
        return {}, [], _Positions(""), [Diagnostic(filename, exc.line, exc.message)]
    positions = _Positions(text)
    diagnostics: list[Diagnostic] = []
    tables = _job_tables(document, filename, positions, diagnostics)
    jobs: dict[str, Job] = {}
    when = now or datetime.now(UTC)
    for job_id, table in tables.items():

        def line_of(path: tuple[str | int, ...], job_id: str = job_id) -> int | None:
            return positions.line_of(("jobs", job_id, *path))

        job = _build_job(job_id, table, filename, line_of, when, diagnostics)
        if job is not None:
            jobs[job_id] = job
    diagnostics.sort(key=lambda d: d.line or 0)
    return jobs, list(tables), positions, diagnostics


# A large file is parsed a piece at a time, each piece a run of whole [jobs.<id>] tables, and its jobs are
# built before the next piece is parsed: tomllib's document of 100,000 jobs peaks near 170 MB, more than
# the jobs themselves, and the process keeps that high-water mark. Pieces give the same jobs as one parse
# when each piece's only top-level key is "jobs" and no id is in two pieces (different ids are independent
# tables); anything else, any error included, is parsed whole, so diagnostics are exactly those of one parse.
_PIECE_CHARS = 1 << 20
# `[jobs]` or `jobs = {...}` defines the jobs table itself: two pieces could not tell it was defined twice.
# (Searched from each line end, a literal the regex engine skips to: "^" with MULTILINE tries every character.)
_JOBS_AT_START = re.compile(r"""[ \t]*(?:\[[ \t]*)?(?:jobs|"jobs"|'jobs')[ \t]*[\]=]""")
_JOBS_ITSELF_LATER = re.compile(r"""\n[ \t]*(?:\[[ \t]*)?(?:jobs|"jobs"|'jobs')[ \t]*[\]=]""")


def _defines_jobs_itself(text: str) -> bool:
    return _JOBS_AT_START.match(text) is not None or _JOBS_ITSELF_LATER.search(text) is not None


def _pieces(text: str) -> Iterable[str]:
    start = 0
    while start < len(text):
        cut = text.find("\n[jobs.", start + _PIECE_CHARS)
        end = len(text) if cut < 0 else cut + 1
        yield text[start:end]
        start = end


def _load_pieces(
    text: str, filename: str, now: datetime | None
) -> tuple[dict[str, Job], list[str], _Positions, list[Diagnostic]] | None:
    """``_load_file`` piece by piece; None when the document must be parsed whole."""
    positions = _Positions(text)
    diagnostics: list[Diagnostic] = []
    jobs: dict[str, Job] = {}
    ids: list[str] = []  # every id, in order
    refused: set[str] = set()  # the ids of invalid jobs: with those in jobs, every id seen so far
    when = now or datetime.now(UTC)
    for piece in _pieces(text):
        document = jobs_document(piece)
        if document is None:
            try:
                document = tomllib.loads(piece)
            except (tomllib.TOMLDecodeError, RecursionError, ValueError):
                return None
        tables = document.get("jobs")
        if len(document) != 1 or not isinstance(tables, dict):
            return None
        for job_id, table in tables.items():
            if job_id in jobs or job_id in refused or not isinstance(table, dict):
                return None
            ids.append(job_id)

            def line_of(path: tuple[str | int, ...], job_id: str = job_id) -> int | None:
                return positions.line_of(("jobs", job_id, *path))

            job = _build_job(job_id, table, filename, line_of, when, diagnostics)
            if job is not None:
                jobs[job_id] = job
            else:
                refused.add(job_id)
        del document, tables
    diagnostics.sort(key=lambda d: d.line or 0)
    return jobs, ids, positions, diagnostics


def _decode(data: str | bytes) -> str:
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError as exc:
            line = data.count("\n", 0, exc.start) + 1
            raise Invalid("not UTF-8 text: it holds a lone surrogate", line=line) from None
        text = data
    else:
        if len(data) > MAX_FILE_BYTES:
            raise Invalid(_TOO_LARGE)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            start = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
            line = data.count(b"\n", 0, start) + 1
            column = start - (data.rfind(b"\n", 0, start) + 1) + 1
            raise Invalid(f"not UTF-8 text: byte 0x{data[start]:02x} at column {column}", line=line) from None
    if len(text) > MAX_FILE_BYTES:
        raise Invalid(_TOO_LARGE)
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        column = nul - (text.rfind("\n", 0, nul) + 1) + 1
        raise Invalid(f"a NUL character at column {column}; a TOML file cannot hold one", line=line)
    return text.removeprefix("\ufeff")


def _parse(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _syntax_error(str(exc), text) from None
    except RecursionError:
        raise Invalid("invalid TOML: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise Invalid(f"invalid TOML: {one_line(str(exc))}") from None


def _syntax_error(message: str, text: str) -> Invalid:
    """tomllib (3.11) puts the position only in the message: "... (at line 3, column 5)"."""
    match = re.search(r" \(at line (\d+), column (\d+)\)$", message)
    reason = message[: match.start()] if match else message.removesuffix(" (at end of document)")
    if reason.startswith("Cannot overwrite a value"):
        # tomllib names no key, and for the last line of a file no line: the scanner finds the second one.
        duplicates = key_lines(text).duplicates
        if duplicates:
            path, line = duplicates[0]
            return Invalid(f"invalid TOML: {render_path(path)} is set twice", line=line)
    if match:
        return Invalid(
            f"invalid TOML: {_lower_first(reason)} (column {match.group(2)})", line=int(match.group(1))
        )
    return Invalid(
        f"invalid TOML: {_lower_first(reason)} (at end of file)", line=text.rstrip("\n").count("\n") + 1
    )


def _lower_first(text: str) -> str:
    """tomllib's reason as the tail of our line: lower-case start, key tuples as dotted paths."""

    def dotted(match: re.Match[str]) -> str:
        return render_path(re.findall(r"'((?:[^'\\]|\\.)*)'", match.group(0)))

    text = re.sub(r"\('(?:[^'\\]|\\.)*'(?:, '(?:[^'\\]|\\.)*')*,?\)", dotted, text)
    return text[:1].lower() + text[1:]


def _job_tables(
    document: Mapping[str, Any], filename: str, positions: _Positions, diagnostics: list[Diagnostic]
) -> dict[str, Mapping[str, Any]]:
    """The ``[jobs.<id>]`` tables; everything else at the top level is reported."""
    for name in document:
        if name == "jobs":
            continue
        if name in keys.KNOWN:
            hint = f"job keys go inside a [jobs.<id>] table, like [jobs.backup] {name} = ..."
        else:
            hint = "job definitions go in [jobs.<id>] tables" + did_you_mean(name, ["jobs"])
        diagnostics.append(
            Diagnostic(
                filename, positions.line_of((name,)), f"{render_path((name,))}: unknown top-level key; {hint}"
            )
        )
    jobs = document.get("jobs", {})
    if not isinstance(jobs, dict):
        line = positions.line_of(("jobs",))
        diagnostics.append(Diagnostic(filename, line, f"jobs: expected [jobs.<id>] tables, got {show(jobs)}"))
        return {}
    tables: dict[str, Mapping[str, Any]] = {}
    for job_id, table in jobs.items():
        if isinstance(table, dict):
            tables[job_id] = table
            continue
        kind = (
            "an array of tables; write [jobs.<id>], not [[jobs.<id>]]"
            if isinstance(table, list)
            else show(table)
        )
        line = positions.line_of(("jobs", job_id))
        diagnostics.append(
            Diagnostic(filename, line, f"{render_path(('jobs', job_id))}: expected a table, got {kind}")
        )
    return tables


def _build_job(
    job_id: str,
    table: Mapping[str, Any],
    file: str,
    line_of: LineOf,
    now: datetime,
    diagnostics: list[Diagnostic],
) -> Job | None:
    before = len(diagnostics)

    def report(path: tuple[str | int, ...], message: str, blame: tuple[str | int, ...] | None = None) -> None:
        where = line_of(path if blame is None else blame)
        diagnostics.append(Diagnostic(file, where, f"{render_path(('jobs', job_id, *path))}: {message}"))

    try:
        problem = keys.check_id(job_id)
        if problem:
            report((), problem)
        values = keys.check_table(table, report)
        keys.check_together(values, table, report, now)
    except RecursionError:
        report((), "nested too deeply")
    if len(diagnostics) > before:
        return None
    # A million jobs name a handful of schedules, zones and commands: one string each, not one per job.
    # check_table already shares the results of the values it keeps (schedule, timezone, workdir, user);
    # commands are often all different, so they are shared through a bounded table, not interned for good.
    command = values.get("command")
    if type(command) is str:
        shared = _SHARED_COMMANDS.get(command)
        if shared is None and len(_SHARED_COMMANDS) < _MAX_SHARED_COMMANDS:
            _SHARED_COMMANDS[command] = command
        elif shared is not None:
            values["command"] = shared
    return Job(id=job_id, **values)


_SHARED_COMMANDS: dict[str, str] = {}
_MAX_SHARED_COMMANDS = 10_000


# ---------------------------------------------------------------------------------------------- dumping

_DEFAULTS = {f.name: f.default for f in fields(Job) if f.name != "id"}


def _job_table(job: Job) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for name, default in _DEFAULTS.items():
        value = getattr(job, name)
        if name not in keys.REQUIRED and (value == default or (isinstance(value, Mapping) and not value)):
            continue
        if name == "max_catch_up" and job.catch_up is not CatchUp.ALL:
            continue
        table[name] = _dump_value(name, value)
    if "dst" in table and not table["dst"]:
        del table["dst"]  # an empty policy is cron's rule, which is also what a missing key means
    return table


def _dump_value(name: str, value: Any) -> Any:
    if name in keys.DURATIONS:
        spelled = format_duration(value)
        try:
            return spelled if parse_duration(spelled) == value else value
        except ValueError:
            return value
    if name == "mailto" and isinstance(value, tuple) and len(value) < 2:
        return value[0] if value else ""  # one address as a string; () is MAILTO="" (no mail)
    if isinstance(value, DstPolicy):
        return {k: str(v) for k, v in (("gap", value.gap), ("overlap", value.overlap)) if v is not None}
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):  # StrEnum members included
        return str(value)
    return value
