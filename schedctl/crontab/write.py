"""Write a file all at once or not at all: a temporary file in the same folder, fsync, then rename over.

A reader (a scheduler reloading on SIGHUP, an editor) sees the old file or the new one, never half of one, and a
crash or a full disk leaves the old file as it was. A file holding environment values is created 0600: those
values are often tokens (issue 8), and the mode is set before the first byte is written.

Only a new name or an existing regular file is written (``schedctl.jobs.files.check_output_target``): a device
node, a FIFO or a symbolic link at the path is refused. Replacing an existing file keeps its owner, group
and mode (a ``user:group 0640`` jobs file stays readable by the service that reads it); when the new text
holds env values, the "other" bits are dropped all the same.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from schedctl.errors import SchedctlError
from schedctl.jobs.files import check_output_target


def write_atomic(path: str | Path, text: str, *, private: bool) -> None:
    target = Path(path)
    existing = check_output_target(target)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise SchedctlError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        # mkstemp creates 0600; widen to what the umask allows only when nothing secret is in it.
        if existing is not None:
            _keep_owner_and_mode(fd, existing, private)
        elif not private:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise SchedctlError(
                f"cannot write {target}: {exc.strerror or exc}; it was left as it was"
            ) from None
        raise
    _sync_folder(folder)


def _keep_owner_and_mode(fd: int, existing: os.stat_result, private: bool) -> None:
    mode = stat.S_IMODE(existing.st_mode)
    if private:
        mode &= ~0o007
    if (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
        # Only root may give a file away; anyone may keep their own group. Either fails loudly.
        os.fchown(fd, existing.st_uid, existing.st_gid)
    os.fchmod(fd, mode)


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX needs the directory fsynced too)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
