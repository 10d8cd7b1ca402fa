"""Starting schedctl as a child process, written once for tests/ and bench/.

The suite imports this as ``launch`` (``pythonpath = ["tests"]``); bench scripts put the repository root on
``sys.path`` and import ``tests.launch``. It lives under tests/ because CI runs the suite, not the benchmarks.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

SCHEDCTL = (sys.executable, "-m", "schedctl")
# conftest pins the cron dialect with it (what `import`/`export` read as `auto`): a child keeps it.
KEPT = frozenset({"SCHEDCTL_OS_RELEASE"})


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment without schedctl's own settings (a child gets its options as flags)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_") or k in KEPT}
    env.update(extra)
    return env


def serve(
    *args: str,
    log: Path,
    stdout: int | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    append: bool = False,
    program: Sequence[str] = SCHEDCTL,
    **popen: Any,
) -> subprocess.Popen[bytes]:
    """`schedctl serve ARGS` with ``child_env()`` unless ``env`` is given.

    Its stderr goes to ``log`` (truncated, unless ``append``: several processes of a benchmark share one); so
    does its stdout unless ``stdout`` says where (``subprocess.DEVNULL`` for a log of the log lines alone).
    ``program`` is how to run schedctl (the benchmarks run the venv's console script).
    """
    with open(log, "ab" if append else "wb") as out:
        return subprocess.Popen(
            [*program, "serve", *args],
            stdout=out if stdout is None else stdout,
            stderr=subprocess.STDOUT if stdout is None else out,
            cwd=cwd,
            env=child_env() if env is None else env,
            **popen,
        )


def stop(procs: Sequence[subprocess.Popen[bytes]], timeout: float = 30.0) -> None:
    """SIGTERM each child still running, wait for all within ``timeout``, SIGKILL what is left."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick; a child binds it next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def until(
    check: Callable[[], object], what: str, *logs: Path, timeout: float = 40, every: float = 0.2
) -> None:
    """Wait until ``check()`` is true; past ``timeout`` fail with ``what`` and the tail of each log."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            tails = "\n".join(
                f"== {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs if p.exists()
            )
            raise AssertionError(f"timed out waiting for {what}\n{tails}")
        time.sleep(every)
