"""The checkpoint a run hands back to its worker, carried by a descriptor the worker owns (issue 24).

The worker may run as root while the job runs as a user it does not trust. The job therefore gets no path
that the worker later opens: the worker creates an unnamed file (``O_TMPFILE``) in its own 0700 folder,
gives it to the job user, and passes its descriptor to the child. The job reaches it as
``$SCHEDCTL_CHECKPOINT_FILE`` (``/dev/fd/N``), which opens the same inode again however the job's shell
or language opens files. The worker only ever reads its own descriptor, so there is nothing to swap for
a symlink, a hard link, a FIFO, a device or a directory: it is always the regular file the worker made.

What the job still controls is the content and the size (it can ``truncate -s 2G`` the file). Every read
looks at ``fstat`` first and reads at most ``CHECKPOINT_CAP`` bytes with ``pread``, which cannot block on a
regular file of a local file system and does not move the offset the job's descriptor shares.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from typing import Any

# A checkpoint travels back to the next attempt in $SCHEDCTL_CHECKPOINT, and Linux refuses to exec with
# one environment string over 128 KiB (MAX_ARG_STRLEN): half of that leaves room for the name and for
# JSON's escaping on the way back. A checkpoint is a cursor, not data.
CHECKPOINT_CAP = 64 * 1024

NO_CHECKPOINT: Any = object()


def cap_text(size: int) -> str:
    return f"the checkpoint is {size} bytes, over the {CHECKPOINT_CAP // 1024} KiB cap: not saved"


@dataclass(frozen=True)
class CheckpointRead:
    """What one look at the file found: a value (or ``NO_CHECKPOINT``), and why nothing was taken."""

    value: Any = NO_CHECKPOINT
    problem: str | None = None


def _descriptor_folder() -> str:
    # /dev/fd is the portable spelling; a minimal root without it still has /proc.
    return "/dev/fd" if os.path.isdir("/dev/fd") else "/proc/self/fd"


class CheckpointFile:
    """One run's checkpoint: an unnamed file in ``folder`` (the worker's), readable only by the worker and,
    when ``owner`` is given as ``(uid, gid)``, writable by the job user through the inherited descriptor."""

    def __init__(
        self, folder: str | os.PathLike[str], text: str | None, owner: tuple[int, int] | None
    ) -> None:
        self.fd = _unnamed_file(os.fspath(folder))
        try:
            if text:
                os.pwrite(self.fd, text.encode(), 0)
            if owner is not None:
                os.fchown(self.fd, *owner)
            st = os.fstat(self.fd)
        except BaseException:
            os.close(self.fd)
            raise
        self._seen: tuple[int, int, int] | None = _version(st)
        self.path = f"{_descriptor_folder()}/{self.fd}"

    def read(self, *, changed_only: bool) -> CheckpointRead:
        """The file's JSON now; with ``changed_only``, nothing unless it changed since the last look."""
        try:
            st = os.fstat(self.fd)
        except OSError as exc:
            return CheckpointRead(problem=f"the checkpoint could not be read: {exc.strerror}")
        if changed_only and _version(st) == self._seen:
            return CheckpointRead()
        self._seen = _version(st)
        if not stat.S_ISREG(st.st_mode):  # it cannot stop being one; said so it is checked, not assumed
            return CheckpointRead(problem="the checkpoint is not a regular file: not read")
        if st.st_size == 0:
            return CheckpointRead()
        if st.st_size > CHECKPOINT_CAP:
            return CheckpointRead(problem=cap_text(st.st_size))
        try:
            data = os.pread(self.fd, CHECKPOINT_CAP + 1, 0)
        except OSError as exc:
            return CheckpointRead(problem=f"the checkpoint could not be read: {exc.strerror}")
        if len(data) > CHECKPOINT_CAP:  # it grew between fstat and the read
            return CheckpointRead(problem=cap_text(len(data)))
        try:
            return CheckpointRead(value=json.loads(data.decode()))
        except (UnicodeDecodeError, ValueError) as exc:
            return CheckpointRead(problem=f"the checkpoint is not valid JSON ({exc}): ignored")

    def forget_seen(self) -> None:
        """Offer the current content again at the next ``read(changed_only=True)``."""
        self._seen = None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _version(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def _unnamed_file(folder: str) -> int:
    """A file with no name anywhere, 0600, non-blocking; a file system without O_TMPFILE gets a named one
    that is unlinked at once (the folder is the worker's own 0700 one, so nobody sees it in between)."""
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        return os.open(folder, flags | os.O_TMPFILE, 0o600)
    except (OSError, AttributeError):
        pass
    import tempfile

    fd, name = tempfile.mkstemp(dir=folder)
    os.unlink(name)
    os.set_blocking(fd, False)
    return fd
