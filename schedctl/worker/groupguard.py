"""A watchdog that kills a worker's jobs when the worker dies without stopping them (SIGKILL, OOM, a crash).

Each job runs in a process group of its own, so that the worker can signal the whole job; the price is that
the kernel does not take the job down with a worker that was killed outright, and the run's takeover would
start a second copy beside the orphan. The worker therefore starts this small process at startup, in a
session of its own, and tells it through a pipe which groups are running (``+PGID`` / ``-PGID`` lines) and
which of its files to remove if it cannot (``rPATH``: its private folder, its wake-up socket). When the pipe
reaches end of file, because the worker exited or was killed, the watchdog sends SIGKILL to every group still
listed, removes those paths and exits. A worker that stops cleanly has listed no group by then and has removed
its files itself.

Run as ``python -m schedctl.worker.groupguard``; ``GroupGuard`` is the worker's side.
"""

from __future__ import annotations

import logging
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

log = logging.getLogger("schedctl.worker")


class GroupGuard:
    def __init__(self, proc: subprocess.Popen[bytes], fd: int) -> None:
        self._proc = proc
        self._fd = fd
        self._broken = False
        # Lines wait here until ``flush``: a busy worker starts and reaps dozens of runs a turn, and one write
        # (one wake-up of the watchdog) per turn instead of one per run was ~6% of its CPU in the minute
        # benchmark. The watchdog learns of a group within the turn that started it, as before, give or take
        # the turn's other starts.
        self._queued: list[bytes] = []

    @classmethod
    def start(cls) -> GroupGuard | None:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "schedctl.worker.groupguard"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's ^C or a signal to our group must not stop it first
                close_fds=True,
            )
        except OSError as exc:
            log.warning(
                "no job watchdog (%s): a worker killed with SIGKILL leaves its jobs running",
                exc,
                extra={"event": "group_guard_unavailable"},
            )
            return None
        assert proc.stdin is not None
        fd = proc.stdin.fileno()
        os.set_blocking(fd, False)
        return cls(proc, fd)

    def watch(self, pgid: int) -> None:
        self._queued.append(b"+%d\n" % pgid)

    def forget(self, pgid: int) -> None:
        self._queued.append(b"-%d\n" % pgid)

    def remove_on_exit(self, path: Path) -> None:
        self._queued.append(b"r" + os.fsencode(path) + b"\n")
        self.flush()

    def flush(self) -> None:
        """Send the queued lines, in pieces of at most ``PIPE_BUF`` so that each write is whole or nothing."""
        piece: list[bytes] = []
        size = 0
        for line in self._queued:
            if piece and size + len(line) > select.PIPE_BUF:
                self._send(b"".join(piece))
                piece, size = [], 0
            piece.append(line)
            size += len(line)
        if piece:
            self._send(b"".join(piece))
        self._queued.clear()

    def _send(self, line: bytes) -> None:
        if self._broken:
            return
        try:
            os.write(self._fd, line)
        except OSError as exc:  # it died, or stopped reading long enough to fill the pipe
            self._broken = True
            log.warning(
                "the job watchdog stopped listening (%s): a worker killed with SIGKILL leaves its jobs running",
                exc,
                extra={"event": "group_guard_lost"},
            )

    def close(self) -> None:
        """End of file for the watchdog: it kills what is still listed (nothing, after a clean stop) and exits."""
        self.flush()
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def main() -> None:
    # Signals meant for the worker's shutdown are not for us: we outlive its hand-back and leave on EOF.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    paths: list[bytes] = []
    for line in sys.stdin.buffer:
        if line.startswith(b"r"):
            paths.append(line[1:].rstrip(b"\n"))
            continue
        try:
            pgid = int(line[1:])
        except ValueError:
            continue
        if pgid <= 1:  # killpg(0) would be our own group, and 1 is init's
            continue
        if line.startswith(b"+"):
            groups.add(pgid)
        else:
            groups.discard(pgid)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    for path in paths:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            for remove in (
                os.unlink,
                lambda p: os.rmdir(os.path.dirname(p)),
            ):  # and its folder, when now empty
                try:
                    remove(path)
                except OSError:
                    pass


if __name__ == "__main__":
    main()
