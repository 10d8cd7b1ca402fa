"""``schedctl import``: read crontabs, make Jobs, write TOML — all or nothing.

Order matters: every line is read and every problem found before anything is written; a broken line (unless
``skip_invalid``) or a missing zone or policy means nothing is written at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from schedctl.crontab.convert import Conversion, ImportOptions, check_options, convert
from schedctl.crontab.diagnostics import error, errors_in, warning
from schedctl.crontab.parse import Crontab, Entry, parse_crontab
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
from schedctl.files import NotRegularFile, check_output_target, read_regular
from schedctl.job import Job

STDIN_NAME = "<stdin>"
# Names cron itself skips in a cron.d folder: editor backups, package manager leftovers, hidden files.
_SKIPPED_NAME = re.compile(r"^\.|~$|\.(rpmsave|rpmorig|rpmnew|dpkg-old|dpkg-dist|dpkg-new|dpkg-tmp|swp|bak)$")


@dataclass(frozen=True)
class ImportRequest:
    paths: tuple[str, ...]
    options: ImportOptions
    fmt: str | None = None
    output: str | None = None
    force: bool = False
    merge: bool = False
    skip_invalid: bool = False
    dry_run: bool = False


@dataclass
class ImportOutcome:
    crontabs: list[Crontab] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)  # imported now (new ones only when merging)
    kept: list[str] = field(default_factory=list)  # ids already in the --merge file, left untouched
    entries: dict[str, Entry] = field(default_factory=dict)
    text: str | None = None  # the TOML written, or that would be written
    written: str | None = None
    exit_code: int = EXIT_OK

    @property
    def failed(self) -> bool:
        return self.text is None


def run_import(request: ImportRequest, now: datetime, read_stdin: Callable[[], bytes]) -> ImportOutcome:
    check_options(request.options)
    _check_output(request)
    outcome = ImportOutcome()
    outcome.crontabs, outcome.diagnostics = read_crontabs(request.paths, request.fmt, read_stdin)
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
    outcome.entries = conversion.entries
    order = {c.file: i for i, c in enumerate(outcome.crontabs)}
    outcome.diagnostics.sort(key=lambda d: (order.get(d.file, -1), d.line or 0))
    broken = errors_in(outcome.diagnostics)
    if (broken and not request.skip_invalid) or outcome.missing:
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
    from schedctl.config import load_jobs

    return load_jobs(request.output, now)


def _finish(
    request: ImportRequest, outcome: ImportOutcome, conversion: Conversion, taken: dict[str, Job]
) -> None:
    from schedctl.config import dump_jobs, loads_jobs

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
        private = any(j.env for j in [*taken.values(), *outcome.jobs])
    else:
        text = dump_jobs(outcome.jobs)
        private = any(j.env for j in outcome.jobs)
    outcome.text = text
    if request.output and not request.dry_run:
        write_atomic(request.output, text, private=private)
        outcome.written = request.output


def _tables_only(text: str) -> str:
    """dump_jobs writes ``[jobs]`` first when it has no keys of its own; a merged file already has the table."""
    return text[len("[jobs]\n") :].lstrip("\n") if text.startswith("[jobs]\n") else text


# ---------------------------------------------------------------------------------------------- reading


def read_crontabs(
    paths: tuple[str, ...], fmt: str | None, read_stdin: Callable[[], bytes]
) -> tuple[list[Crontab], list[Diagnostic]]:
    crontabs: list[Crontab] = []
    diagnostics: list[Diagnostic] = []
    for name in paths:
        if name == "-":
            crontabs.append(parse_crontab(read_stdin(), STDIN_NAME, fmt))
            continue
        for file, problem in _files(Path(name), diagnostics):
            if problem is None:
                crontabs.append(_read_file(file, fmt, diagnostics))
    for crontab in crontabs:
        diagnostics.extend(crontab.diagnostics)
    return crontabs, diagnostics


def _files(path: Path, diagnostics: list[Diagnostic]) -> list[tuple[Path, str | None]]:
    if not path.is_dir():
        return [(path, None)]
    out: list[tuple[Path, str | None]] = []
    try:
        children = sorted(path.iterdir())
    except OSError as exc:
        diagnostics.append(error(str(path), None, f"cannot read the folder: {exc.strerror or exc}"))
        return []
    for child in children:
        if child.is_dir():
            diagnostics.append(
                warning(str(child), None, "a folder: not read (cron does not look in sub-folders)")
            )
        elif _SKIPPED_NAME.search(child.name):
            diagnostics.append(warning(str(child), None, "not read: cron skips files with such names"))
        else:
            out.append((child, None))
    return out


def _read_file(file: Path, fmt: str | None, diagnostics: list[Diagnostic]) -> Crontab:
    try:
        data = read_regular(file)
    except NotRegularFile as exc:
        diagnostics.append(error(str(file), None, f"{exc.kind}, not a regular file: not read"))
        return Crontab(str(file), fmt or "user", "")
    except OSError as exc:
        diagnostics.append(error(str(file), None, f"cannot read: {exc.strerror or exc}"))
        return Crontab(str(file), fmt or "user", "")
    return parse_crontab(data, str(file), fmt)
