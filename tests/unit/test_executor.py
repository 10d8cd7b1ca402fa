"""One command, run for real: the environment contract, stdin, the output tail, timeouts, checkpoints."""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

import pytest
from factories import RUN, snapshot

from schedctl.jobs.job import StopReason
from schedctl.worker.executor import NO_CHECKPOINT, Execution, OutputTail


def run(tmp_path: Path, command, checkpoint=None, tail_bytes=8192, **kw) -> Execution:
    execution = Execution(RUN, snapshot(command, **kw), checkpoint, tmp_path, tail_bytes=tail_bytes)
    deadline = time.monotonic() + 20
    while not execution.done():
        assert time.monotonic() < deadline, "the command did not finish"
        execution.enforce()
        time.sleep(0.01)
    return execution


def env_of(execution: Execution) -> dict[str, str]:
    lines = execution.tail.text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_the_job_gets_crons_environment_not_the_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDCTL_DATABASE_URL", "postgresql://u:secret@db/prod")
    monkeypatch.setenv("AWS_PROFILE", "reports")
    monkeypatch.setenv("SHELL", "/bin/zsh-not-cron")
    execution = run(
        tmp_path,
        ["env"],
        pass_env=["AWS_PROFILE", "NOT_SET_ANYWHERE"],
        env={"PATH": "/opt/bin:/usr/bin:/bin", "MAILTO": "ops@example.com"},
    )
    env = env_of(execution)
    assert execution.returncode == 0
    assert "SCHEDCTL_DATABASE_URL" not in env and "NOT_SET_ANYWHERE" not in env
    assert env["AWS_PROFILE"] == "reports" and env["MAILTO"] == "ops@example.com"
    assert env["PATH"] == "/opt/bin:/usr/bin:/bin"
    assert env["SHELL"] == "/bin/sh"
    assert env["USER"] == env["LOGNAME"] and env["HOME"]
    assert env["SCHEDCTL_JOB_ID"] == "nightly-export"
    assert env["SCHEDCTL_SCHEDULED_FOR"] == "2026-03-29T01:30:00.005000Z"
    assert env["SCHEDCTL_ATTEMPT"] == "3"
    assert re.fullmatch(
        r"/dev/fd/\d+", env["SCHEDCTL_CHECKPOINT_FILE"]
    )  # a descriptor, not a path (issue 24)
    assert "SCHEDCTL_CHECKPOINT" not in env
    assert sorted(env) == sorted(
        [
            "HOME",
            "LOGNAME",
            "USER",
            "SHELL",
            "PATH",
            "AWS_PROFILE",
            "MAILTO",
            "SCHEDCTL_JOB_ID",
            "SCHEDCTL_SCHEDULED_FOR",
            "SCHEDCTL_ATTEMPT",
            "SCHEDCTL_CHECKPOINT_FILE",
        ]
    )


def test_default_path_and_a_string_command_through_the_shell(tmp_path):
    execution = run(tmp_path, 'echo "$PATH|$0"; exit 4')
    assert execution.tail.text() == "/usr/bin:/bin|/bin/sh\n"
    assert execution.returncode == 4


def test_a_list_command_runs_without_a_shell(tmp_path):
    execution = run(tmp_path, ["printf", "%s|", "a b", "$HOME", "; rm -rf /"])
    assert execution.tail.text() == "a b|$HOME|; rm -rf /|"


def test_stdin_is_fed_and_stderr_merged_in_order(tmp_path):
    execution = run(tmp_path, "cat; echo to-stderr >&2; echo after", stdin="line one\nline two\n")
    assert execution.tail.text() == "line one\nline two\nto-stderr\nafter\n"


def test_output_tail_keeps_only_the_last_bytes(tmp_path):
    execution = run(tmp_path, "head -c 3000000 /dev/zero | tr '\\0' a; printf END", tail_bytes=100)
    text = execution.tail.text()
    assert len(text) == 100 and text.endswith("aaaEND")


def test_output_tail_memory_is_bounded():
    tail = OutputTail(10)
    for _ in range(1000):
        tail.feed(b"x" * 65536)
    assert tail._held <= 2 * 10 + 65536
    assert tail.text() == "x" * 10
    assert tail.size == 1000 * 65536


def test_output_tail_of_tiny_writes_holds_few_strings():
    tail = OutputTail(8192)
    for _ in range(100_000):
        tail.feed(b"x")
    assert len(tail._chunks) <= 257 and tail.text() == "x" * 8192 and tail.size == 100_000


def test_output_tail_decodes_a_character_split_across_reads_and_counts_what_it_shows():
    tail = OutputTail(8192)
    data = "é€\x00ok\n".encode()
    for i in range(len(data)):
        tail.feed(data[i : i + 1])
    assert tail.snapshot() == ("é€\ufffdok\n", 6)
    tail.feed(b"\xe2\x82")  # a character cut short at the end of the output: one U+FFFD, counted
    assert tail.snapshot() == ("é€\ufffdok\n\ufffd", 7)


def test_timeout_sends_sigterm_then_sigkill_to_the_whole_group(tmp_path):
    marker = tmp_path / "grandchild.pid"
    command = f"trap '' TERM; (trap '' TERM; sleep 30) & echo $! > {marker}; sleep 30"
    start = time.monotonic()
    execution = run(tmp_path, command, timeout=0.3, grace_period=0.3)
    elapsed = time.monotonic() - start
    assert execution.stop_reason == "timeout" and execution.killed
    assert execution.returncode == 128 + 9
    assert 0.5 <= elapsed < 5
    grandchild = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild):
        assert time.monotonic() < deadline, "the grandchild survived the SIGKILL of its group"
        time.sleep(0.02)


def test_sigterm_lets_a_job_exit_cleanly_inside_its_grace(tmp_path):
    execution = Execution(
        RUN,
        snapshot("trap 'echo got-term; exit 0' TERM; while :; do sleep 0.05; done", grace_period=5),
        None,
        tmp_path,
    )
    time.sleep(0.2)
    execution.stop(StopReason.SHUTDOWN)
    deadline = time.monotonic() + 5
    while not execution.done():
        assert time.monotonic() < deadline
        execution.enforce()
        time.sleep(0.01)
    assert execution.returncode == 0 and not execution.killed
    assert execution.tail.text().endswith("got-term\n")  # sleep, in the same group, got it too


def test_checkpoint_round_trip_and_invalid_json_is_ignored(tmp_path, caplog):
    command = 'echo "$SCHEDCTL_CHECKPOINT"; cat "$SCHEDCTL_CHECKPOINT_FILE"; echo'
    execution = run(tmp_path, command, checkpoint={"offset": 41})
    assert execution.tail.text() == '{"offset":41}\n{"offset":41}\n'
    assert execution.read_checkpoint() is NO_CHECKPOINT  # unchanged: nothing new to save

    execution = run(tmp_path, 'printf \'{"offset": 42}\' > "$SCHEDCTL_CHECKPOINT_FILE"')
    assert execution.read_checkpoint() == {"offset": 42}
    assert execution.read_checkpoint() is NO_CHECKPOINT
    assert execution.final_checkpoint() == {"offset": 42}

    with caplog.at_level(logging.WARNING, logger="schedctl.executor"):
        execution = run(tmp_path, 'printf \'{"offset": \' > "$SCHEDCTL_CHECKPOINT_FILE"')
        assert execution.read_checkpoint() is NO_CHECKPOINT
        assert execution.final_checkpoint() is NO_CHECKPOINT
    events = [(r.event, r.job_id, r.attempt) for r in caplog.records]
    assert events == [("checkpoint_refused", "nightly-export", 3)]  # said once, however often it is read
    assert execution.checkpoint_problem and "not valid JSON" in execution.checkpoint_problem
    assert os.listdir(tmp_path) == []  # the checkpoint never had a name


def test_a_command_that_cannot_start_reports_why(tmp_path):
    execution = run(tmp_path, ["/nonexistent/program"])
    assert execution.start_error and "/nonexistent/program" in execution.start_error
    assert execution.returncode is None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_run_as_job_user_switches_user_and_home(tmp_path):
    import pwd

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    execution = Execution(
        RUN,
        snapshot("id -un; echo $HOME $USER", user="nobody", workdir="/"),
        None,
        tmp_path,
        run_as_job_user=True,
    )
    while not execution.done():
        time.sleep(0.01)
    assert execution.tail.text() == f"nobody\n{nobody.pw_dir} nobody\n"


def test_a_start_failure_names_the_workers_limit_with_its_value(tmp_path: Path) -> None:
    """What tests/processes/test_worker_resources.py meets for real, from the errors themselves: a worker's
    limit is named with its value, anything else as the system said it."""
    import errno
    import resource

    from schedctl.worker.executor import start_failure

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert start_failure(OSError(errno.EMFILE, "Too many open files"), tmp_path) == (
        f"cannot start the command: the worker is out of file descriptors (EMFILE, ulimit -n {soft})"
    )
    assert start_failure(OSError(errno.ENOSPC, "No space left"), tmp_path) == (
        f"cannot start the command: no space left in the worker's folder {tmp_path} (ENOSPC)"
    )
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory", "no-such-program")
    assert start_failure(missing, tmp_path) == (
        "cannot start the command: [Errno 2] No such file or directory: 'no-such-program'"
    )
