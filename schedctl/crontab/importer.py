"""``schedctl import``: read crontabs, make Jobs, write TOML — all or nothing.

Order matters: every line is read and every problem found before anything is written; a broken line (unless
``skip_invalid``) or a missing zone or policy means nothing is written at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from schedctl.crontab.convert import Conversion, ImportOptions, check_options, convert
from schedctl.crontab.diagnostics import error, errors_in, warning
from schedctl.crontab.parse import MAX_BYTES, NOT_TEXT, TOO_LARGE, Crontab, Entry, parse_crontab
from schedctl.crontab.write import write_atomic
from schedctl.errors import (
    EXIT_CONFIG,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    ConfigError,
    Diagnostic,
    SchedctlError,
    UsageError,
)
from schedctl.jobs.files import FileTooLarge, NotRegularFile, check_output_target, read_regular
from schedctl.jobs.job import Job
from schedctl.timing.crondialect import resolve, skipped_name

STDIN_NAME = "<stdin>"
MAX_ERRORS_PER_FILE = 20
NOT_A_CRONTAB_ERRORS = 3  # a file in a folder with this many errors and no job at all is named in one line  # then one line with the count of the rest: a wrong path must not flood the terminal
_SHOWN_SKIPPED = 10  # skipped names listed in a folder's one-line note


@dataclass(frozen=True)
class ImportRequest:
    paths: tuple[str, ...]
    options: ImportOptions
    fmt: str | None = None
    dialect: str | None = None  # "debian", "cronie", or None/"auto": the host's (/etc/os-release)
    os_release: str | None = None  # default: $SCHEDCTL_OS_RELEASE, else /etc/os-release
    output: str | None = None
    force: bool = False
    merge: bool = False
    skip_invalid: bool = False
    dry_run: bool = False


@dataclass
class ImportOutcome:
    dialect: str = ""
    dialect_reason: str = ""
    crontabs: list[Crontab] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    refused: list[Diagnostic] = field(default_factory=list)  # errors in diagnostics that are usage errors
    jobs: list[Job] = field(default_factory=list)  # imported now (new ones only when merging)
    kept: list[str] = field(default_factory=list)  # ids already in the --merge file, left untouched
    entries: dict[str, Entry] = field(default_factory=dict)
    text: str | None = None  # the TOML written, or that would be written
    written: str | None = None
    exit_code: int = EXIT_OK

    @property
    def failed(self) -> bool:
        return self.text is None

    @property
    def broken(self) -> list[Diagnostic]:
        """The errors on lines cron would not run as written (--skip-invalid leaves those out)."""
        return [d for d in errors_in(self.diagnostics) if d not in self.refused]


def run_import(request: ImportRequest, now: datetime, read_stdin: Callable[[], bytes]) -> ImportOutcome:
    check_options(request.options)
    _check_output(request)
    outcome = ImportOutcome()
    outcome.dialect, outcome.dialect_reason = resolve(request.dialect, request.os_release)
    outcome.crontabs, outcome.diagnostics = read_crontabs(
        request.paths, request.fmt, read_stdin, outcome.dialect
    )
    try:
        taken = _existing_jobs(request, now)
    except ConfigError as exc:  # the --merge target itself is invalid: say so in the importer's format
        outcome.diagnostics += [error(d.file, d.line, d.message) for d in exc.diagnostics]
        outcome.exit_code = EXIT_CONFIG
        return outcome
    entries = [e for c in outcome.crontabs for e in c.entries]
    conversion = convert(entries, request.options, now, taken)
    outcome.diagnostics += conversion.diagnostics
    outcome.missing = conversion.missing
    outcome.refused = conversion.refused
    outcome.entries = conversion.entries
    order = {c.file: i for i, c in enumerate(outcome.crontabs)}
    outcome.diagnostics.sort(key=lambda d: (order.get(d.file, -1), d.line or 0))
    broken = outcome.broken
    if (broken and not request.skip_invalid) or outcome.missing or outcome.refused:
        outcome.exit_code = EXIT_FAILURE if broken else EXIT_USAGE
        return outcome
    try:
        _finish(request, outcome, conversion, taken)
    except ConfigError as exc:
        message = "cannot add tables to this file (are its jobs written as [jobs.<id>] tables?)"
        outcome.diagnostics += [error(d.file, d.line, f"{message}: {d.message}") for d in exc.diagnostics]
        outcome.text, outcome.exit_code = None, EXIT_CONFIG
        return outcome
    outcome.exit_code = EXIT_FAILURE if broken else EXIT_OK
    return outcome


def _check_output(request: ImportRequest) -> None:
    if request.merge and request.force:
        raise UsageError("--merge and --force contradict each other: --merge keeps the jobs in the file")
    if (request.merge or request.force) and request.output is None:
        raise UsageError(f"{'--merge' if request.merge else '--force'} needs -o FILE")
    if request.output is None:
        return
    target = Path(request.output)
    if target.is_dir():
        raise UsageError(f"-o {request.output}: is a folder; name the TOML file to write")
    if check_output_target(target) is not None and not (request.force or request.merge):
        raise SchedctlError(
            f"{request.output} exists: nothing written; pass --force to replace it, or --merge "
            "to add the new jobs and keep the ones already there"
        )


def _existing_jobs(request: ImportRequest, now: datetime) -> dict[str, Job]:
    if not (request.merge and request.output and Path(request.output).exists()):
        return {}
    from schedctl.jobs.config import load_jobs

    return load_jobs(request.output, now)


def _finish(
    request: ImportRequest, outcome: ImportOutcome, conversion: Conversion, taken: dict[str, Job]
) -> None:
    from schedctl.jobs.config import dump_jobs, loads_jobs

    outcome.jobs = [j for j in conversion.jobs if j.id not in taken]
    outcome.kept = [j.id for j in conversion.jobs if j.id in taken]
    if taken:
        existing = Path(request.output or "").read_text(encoding="utf-8")
        # The file's own text stays byte for byte; new tables go after it.
        text = (
            existing
            if not outcome.jobs
            else existing.rstrip("\n") + "\n\n" + _tables_only(dump_jobs(outcome.jobs))
        )
        loads_jobs(text, request.output or "")  # the merged file must load, or nothing is written
        private = any(j.env or j.mailto for j in [*taken.values(), *outcome.jobs])
    else:
        text = dump_jobs(outcome.jobs)
        private = any(j.env or j.mailto for j in outcome.jobs)
    outcome.text = text
    if request.output and not request.dry_run:
        write_atomic(request.output, text, private=private)
        outcome.written = request.output


def _tables_only(text: str) -> str:
    """dump_jobs writes ``[jobs]`` first when it has no keys of its own; a merged file already has the table."""
    return text[len("[jobs]\n") :].lstrip("\n") if text.startswith("[jobs]\n") else text


# ---------------------------------------------------------------------------------------------- reading


def read_crontabs(
    paths: tuple[str, ...], fmt: str | None, read_stdin: Callable[[], bytes], dialect: str = "cronie"
) -> tuple[list[Crontab], list[Diagnostic]]:
    crontabs: list[Crontab] = []
    diagnostics: list[Diagnostic] = []
    folder_of: dict[str, str] = {}
    for name in paths:
        if name == "-":
            crontabs.append(parse_crontab(read_stdin(), STDIN_NAME, fmt, dialect))
            continue
        path = Path(name)
        for file in _files(path, diagnostics, dialect):
            crontabs.append(_read_file(file, fmt, diagnostics, dialect))
            if file != path:
                folder_of[str(file)] = str(path)
    # In a folder (`import /etc`, `import /bin`), files that are plainly no crontab are named together, one
    # line per folder and kind, instead of a line (or twenty) each.
    grouped: dict[tuple[str, str], list[str]] = {}
    for crontab in crontabs:
        kind = _not_a_crontab(crontab) if crontab.file in folder_of else None
        if kind:
            grouped.setdefault((folder_of[crontab.file], kind), []).append(Path(crontab.file).name)
            continue
        diagnostics.extend(_capped(crontab.diagnostics, crontab.file))
    for (folder, kind), names in grouped.items():
        diagnostics.append(error(folder, None, f"{kind}: {_some(names)}"))
    return crontabs, diagnostics


def _not_a_crontab(crontab: Crontab) -> str | None:
    """Why a file found in a folder is plainly no crontab, or None."""
    messages = [d.message for d in crontab.diagnostics]
    if messages == [NOT_TEXT]:
        return "not text files"
    if messages == [TOO_LARGE]:
        return TOO_LARGE.replace("; not a crontab", ", not crontabs")
    if not crontab.entries and len(errors_in(crontab.diagnostics)) >= NOT_A_CRONTAB_ERRORS:
        return "not crontabs (no line is a job cron would run; import one on its own to see why)"
    return None


def _some(names: list[str]) -> str:
    more = len(names) - _SHOWN_SKIPPED
    return ", ".join(names[:_SHOWN_SKIPPED]) + (f" and {more} more" if more > 0 else "")


def _capped(diagnostics: list[Diagnostic], file: str) -> list[Diagnostic]:
    """A file's first MAX_ERRORS_PER_FILE errors (its warnings with them), then one line counting the rest."""
    out: list[Diagnostic] = []
    errors = 0
    first_hidden: int | None = None
    for d in diagnostics:
        if d.severity == "error":
            errors += 1
            if errors > MAX_ERRORS_PER_FILE:
                first_hidden = d.line if first_hidden is None else first_hidden
                continue
        elif errors >= MAX_ERRORS_PER_FILE:
            continue
        out.append(d)
    if errors > MAX_ERRORS_PER_FILE:
        out.append(
            error(
                file,
                first_hidden,
                f"{errors - MAX_ERRORS_PER_FILE} more errors from this line on, not shown (is this a crontab?)",
            )
        )
    return out


def _files(path: Path, diagnostics: list[Diagnostic], dialect: str) -> list[Path]:
    """The files cron itself would read: a file as given; in a folder, the names ``dialect``'s cron reads."""
    if not path.is_dir():
        return [path]
    try:
        children = sorted(path.iterdir())
    except OSError as exc:
        diagnostics.append(error(str(path), None, f"cannot read the folder: {exc.strerror or exc}"))
        return []
    out: list[Path] = []
    skipped: dict[str, list[str]] = {}
    for child in children:
        why = "a folder (cron does not look in sub-folders)" if child.is_dir() else None
        why = why or ("not a regular file" if not child.is_file() else skipped_name(child.name, dialect))
        if why:
            skipped.setdefault(why, []).append(child.name)
        else:
            out.append(child)
    for why, names in skipped.items():
        diagnostics.append(warning(str(path), None, f"not read: {_some(names)}: {why}"))
    return out


def _read_file(file: Path, fmt: str | None, diagnostics: list[Diagnostic], dialect: str) -> Crontab:
    try:
        # Never read a mistaken 100 MB binary into memory; a FIFO or device is refused before it can block.
        data = read_regular(file, MAX_BYTES)
    except FileTooLarge:
        return Crontab(str(file), fmt or "user", "", dialect, diagnostics=[error(str(file), None, TOO_LARGE)])
    except NotRegularFile as exc:
        diagnostics.append(error(str(file), None, f"{exc.kind}, not a regular file: not read"))
        return Crontab(str(file), fmt or "user", "", dialect)
    except OSError as exc:
        diagnostics.append(error(str(file), None, f"cannot read: {exc.strerror or exc}"))
        return Crontab(str(file), fmt or "user", "", dialect)
    return parse_crontab(data, str(file), fmt, dialect)
