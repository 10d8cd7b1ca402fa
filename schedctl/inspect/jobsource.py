"""Which definition `status`, `missed` and `jobs` explain a job by: its job file, or the one the leader stored.

They work on any pod that reaches the database (a worker's has no job files), so the job files are optional.
Without any (the path does not exist, or defines no jobs) every job is explained by the definition the leader
stored (``store.definitions``: its version written last, and the schedule key ticks are counted by), and a job
named on the command line that the job files lack, by its stored one. When a job is in both and they differ,
the job file is shown: it is what the operator edits and what the leader runs after its next reload (a leader
not reloaded yet is the usual cause), and one line says so, naming when the leader last wrote its definition.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from schedctl.errors import JobNotFound
from schedctl.jobs.config import load_jobs
from schedctl.jobs.job import Job
from schedctl.text.printable import cut, quoted

if TYPE_CHECKING:
    from schedctl.store import Store
    from schedctl.store.definitions import StoredVersion

WHERE = "--jobs or SCHEDCTL_JOBS"  # how a command is told its job files
NAMED = 3  # job ids a note about several jobs names before "and N more"


@dataclass(frozen=True)
class ReportJobs:
    jobs: dict[str, Job]
    notes: list[str] = field(default_factory=list)  # one line each, for stderr: which definition was used


def job_files(path: str, now: datetime) -> dict[str, Job] | None:
    """The jobs the job files define; None when ``path`` does not exist (a file that does not load is an
    error, never taken for no file)."""
    if not Path(path).exists():
        return None
    return load_jobs(path, now=now)


def report_jobs(
    path: str, wanted: Sequence[str], now: datetime, store: Store | None, *, default: bool = False
) -> ReportJobs:
    """The named jobs (all of them when none is named) and the notes that say where a definition came from.
    ``store`` None: no database to fall back on, the job files alone as before. ``default``: ``path`` is the
    default, not given, so "does not exist here" is what to say. An id neither source knows is an error."""
    wanted = list(dict.fromkeys(wanted))
    files = job_files(path, now)
    if not files:
        if store is None:
            if files is None:
                load_jobs(path, now=now)  # raises the one line that says the path cannot be read
            return _only_files(path, {}, wanted)
        return _only_stored(path, files is None, wanted, store, default)
    if store is None:
        return _only_files(path, files, wanted)
    return _both(path, files, wanted, store)


def _only_files(path: str, files: Mapping[str, Job], wanted: list[str]) -> ReportJobs:
    for job_id in wanted:
        if job_id not in files:
            raise JobNotFound(f"no job {quoted(job_id)} in {cut(path)}{_did_you_mean(job_id, files)}")
    return ReportJobs({j: files[j] for j in wanted} if wanted else dict(files))


def _only_stored(path: str, missing: bool, wanted: list[str], store: Store, default: bool) -> ReportJobs:
    from schedctl.store.definitions import jobs_from_database

    why = (
        f"{cut(path)} does not exist{' here' if default else ''}"
        if missing
        else f"{cut(path)} defines no jobs"
    )
    with store.read() as conn:
        found = jobs_from_database(conn, wanted)
    for job_id in wanted:
        if job_id not in found:
            raise JobNotFound(
                f"no job {quoted(job_id)} in the database, and no job file ({why}; give --jobs PATH or set "
                "SCHEDCTL_JOBS)"
            )
    jobs = f"{len(found)} job{'s' if len(found) != 1 else ''}"
    return ReportJobs(found, [f"no job file ({why}; {WHERE}): {jobs} as the leader stored them"])


def _both(path: str, files: Mapping[str, Job], wanted: list[str], store: Store) -> ReportJobs:
    from schedctl.store.definitions import jobs_from_database, schedule_keys, stored_versions

    picked = {j: files[j] for j in wanted if j in files} if wanted else dict(files)
    absent = [j for j in wanted if j not in files]
    with store.read() as conn:
        versions = stored_versions(conn, [*picked, *absent])
        keys = schedule_keys(conn, list(picked))
        stored = jobs_from_database(conn, absent) if absent else {}
    notes: list[str] = []
    for job_id in absent:
        if job_id not in stored:
            hint = _did_you_mean(job_id, files)
            raise JobNotFound(f"no job {quoted(job_id)} in {cut(path)}{hint}, nor in the database")
        notes.append(
            f"job {_id(job_id)}: not in {cut(path)}; showing the definition the leader stored{_at(versions, job_id)}"
        )
    differ = [j for j, job in picked.items() if j in versions and _differs(job, versions[j], keys.get(j))]
    if len(differ) == 1:
        notes.append(
            f"job {_id(differ[0])}: the job file differs from the definition the leader stored"
            f"{_at(versions, differ[0])}; showing the job file"
        )
    elif differ:
        named = ", ".join(_id(j) for j in differ[:NAMED]) + (
            f" and {len(differ) - NAMED} more" if len(differ) > NAMED else ""
        )
        latest = max(versions[j].written_at for j in differ)
        notes.append(
            f"{len(differ)} jobs ({named}): the job files differ from the definitions the leader stored "
            f"(the latest at {_utc(latest)} UTC); showing the job files"
        )
    jobs = {j: picked.get(j) or stored[j] for j in wanted} if wanted else picked
    return ReportJobs(jobs, notes)


def _differs(job: Job, stored: StoredVersion, schedule_key: str | None) -> bool:
    """Whether the leader would run ``job`` differently: another snapshot (command, env, policy, schedule),
    or ticks counted by another schedule key (its DST policy is in the key only)."""
    from schedctl.store.runrows import shared_values

    return shared_values(job)[0] != stored.version or (
        schedule_key is not None and schedule_key != job.schedule_key
    )


def _did_you_mean(job_id: str, jobs: Mapping[str, Job]) -> str:
    close = difflib.get_close_matches(job_id, list(jobs), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _id(job_id: str) -> str:
    return cut(job_id)


def _at(versions: Mapping[str, StoredVersion], job_id: str) -> str:
    found = versions.get(job_id)
    return f" at {_utc(found.written_at)} UTC" if found is not None else ""


def _utc(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
