"""The job the chaos harness schedules: appends to a ledger, checkpoints as it goes, and obeys SIGTERM.

Usage: chaos_job.py LEDGER STEPS STEP_SECONDS

Each line of the ledger is one JSON object written with a single O_APPEND write, so concurrent jobs never
interleave within a line. A job resumes from ``SCHEDCTL_CHECKPOINT`` and records where it started, which is
how the harness counts work resumed from checkpoints.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def main() -> int:
    ledger, steps, step_seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    job_id = os.environ["SCHEDCTL_JOB_ID"]
    scheduled_for = os.environ["SCHEDCTL_SCHEDULED_FOR"]
    attempt = int(os.environ["SCHEDCTL_ATTEMPT"])
    checkpoint_file = os.environ.get("SCHEDCTL_CHECKPOINT_FILE")
    done = 0
    if os.environ.get("SCHEDCTL_CHECKPOINT"):
        done = int(json.loads(os.environ["SCHEDCTL_CHECKPOINT"]).get("done", 0))
    resumed_from = done
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)

    def write(kind: str, **extra: object) -> None:
        record = {
            "kind": kind,
            "job_id": job_id,
            "scheduled_for": scheduled_for,
            "attempt": attempt,
            "pid": os.getpid(),
            "at": time.time(),
            **extra,
        }
        fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())
        finally:
            os.close(fd)

    write("start", resumed_from=resumed_from)
    while done < steps:
        if stopping:
            write("stopped", done=done)
            return 143
        time.sleep(step_seconds)
        done += 1
        if checkpoint_file:  # a descriptor (/dev/fd/N): written in place, in one write
            with open(checkpoint_file, "w") as f:
                f.write(json.dumps({"done": done}))
    write("end", done=done, resumed_from=resumed_from)
    return 0


if __name__ == "__main__":
    sys.exit(main())
