"""Starting schedctl as a child process, written once for tests/ and bench/.

The suite imports this as ``launch`` (``pythonpath = ["tests"]``); bench scripts put the repository root on
``sys.path`` and import ``tests.launch``. It lives under tests/ because CI runs the suite, not the benchmarks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
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
