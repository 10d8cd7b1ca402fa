"""Files schedctl reads or writes for an operator, possibly as root: only regular files.

A FIFO given as a job file would block the reader forever, and a device node given as ``-o PATH`` would be
replaced by the atomic rename (as root, ``-o /dev/null`` would turn /dev/null into a TOML file). Both are
refused here with one line, before anything is opened for long or written.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from schedctl.errors import SchedctlError


class NotRegularFile(SchedctlError):
    """The path is not a regular file."""

    def __init__(self, path: str | Path, kind: str) -> None:
        super().__init__(f"{path}: {kind}, not a regular file: not read")
        self.kind = kind


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a symbolic link"),
)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words for an error line."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def read_regular(path: str | Path, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file; raises NotRegularFile for anything else, OSError as open() does.

    Opened non-blocking and checked with fstat on the open descriptor, so a FIFO neither blocks the open nor
    can be swapped in between the check and the read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(path, kind_of(info.st_mode))
        if max_bytes is not None and info.st_size > max_bytes:
            raise FileTooLarge(info.st_size)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            return f.read()
    finally:
        if fd >= 0:
            os.close(fd)


class FileTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def check_output_target(path: str | Path) -> os.stat_result | None:
    """Where ``-o PATH`` may write: a new name or an existing regular file (its stat is returned).

    A symbolic link is refused rather than followed or replaced: following it as root writes wherever the
    link's owner pointed it, and replacing it silently surprises whoever made it. Name the real file instead.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SchedctlError(f"cannot write {path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        try:
            points_to = os.readlink(path)
        except OSError:
            points_to = "?"
        raise SchedctlError(
            f"-o {path}: a symbolic link (to {points_to}): nothing written; name the file itself"
        )
    if not stat.S_ISREG(info.st_mode):
        raise SchedctlError(
            f"-o {path}: {kind_of(info.st_mode)}: nothing written; schedctl writes only regular files"
        )
    return info
