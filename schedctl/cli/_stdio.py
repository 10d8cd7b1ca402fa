"""``-`` as a file name: standard input where a command reads files, standard output where it writes one."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schedctl.jobs.job import Job

DASH = "-"
STDIN_NAME = "<stdin>"


def read_stdin(nothing: str) -> bytes:
    """All of standard input; ``nothing`` ends the error when there is none to read ("nothing to import")."""
    from schedctl.errors import SchedctlError

    # Python sets sys.stdin to None when descriptor 0 is closed (`schedctl import - <&-`).
    stream = sys.stdin
    if stream is None:
        raise SchedctlError(f"-: standard input is closed: {nothing}")
    try:
        return stream.buffer.read()
    except (OSError, ValueError) as exc:
        raise SchedctlError(
            f"-: cannot read standard input: {getattr(exc, 'strerror', None) or exc}"
        ) from None


def load_jobs_from(path: str, now: datetime) -> dict[str, Job]:
    """The jobs of a file or folder, or of the TOML on standard input for ``-``."""
    from schedctl.jobs.config import load_jobs, loads_jobs

    if path == DASH:
        return loads_jobs(read_stdin("no jobs to read"), STDIN_NAME, now)
    return load_jobs(path, now=now)
