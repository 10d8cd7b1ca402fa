"""`schedctl next`: the cron module seen from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from schedctl.cli import cli

JOBS = """\
[jobs.backup]
schedule = "30 1 * * *"
timezone = "Europe/London"
catch_up = "skip"
command = "backup.sh"
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["next", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_marks_gap_and_overlap() -> None:
    code, out, _ = run("--schedule", "30 1 * * *", "--timezone", "Europe/London",
                       "--from", "2026-03-28T00:00:00Z", "--count", "2", "--json")  # fmt: skip
    assert code == 0
    assert json.loads(out) == [
        {
            "utc": "2026-03-28T01:30:00Z",
            "local": "2026-03-28T01:30:00+00:00",
            "gap_moved": False,
            "overlap": None,
        },
        {
            "utc": "2026-03-29T01:00:00Z",
            "local": "2026-03-29T02:00:00+01:00",
            "gap_moved": True,
            "overlap": None,
        },
    ]


def test_until_and_policy_flags() -> None:
    code, out, _ = run("--schedule", "30 1 * * *", "--timezone", "America/New_York", "--dst-overlap", "both",
                       "--from", "2026-11-01T00:00:00-04:00", "--until", "2026-11-02T00:00:00Z", "--json")  # fmt: skip
    assert code == 0
    assert [(r["local"], r["overlap"]) for r in json.loads(out)] == [
        ("2026-11-01T01:30:00-04:00", "first"),
        ("2026-11-01T01:30:00-05:00", "last"),
    ]


def test_plain_text_has_local_utc_and_marks() -> None:
    code, out, err = run("--schedule", "30 1 * * *", "--timezone", "Europe/London",
                         "--from", "2026-10-24T00:00:00Z", "--count", "2")  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["LOCAL", "UTC", "NOTE"]
    assert lines[1].startswith("2026-10-24 01:30:00+0100 BST")
    assert "2026-10-25T00:30:00Z" in lines[2] and "repeated time: runs at its first pass only" in lines[2]
    assert "at 01:30 every day" in err


def test_large_count_streams() -> None:
    code, out, _ = run("--schedule", "* * * * *", "--timezone", "UTC", "--from", "2026-01-01T00:00:00Z",
                       "--count", "20000", "--json")  # fmt: skip
    rows = json.loads(out)
    assert code == 0 and len(rows) == 20000 and rows[-1]["utc"] == "2026-01-14T21:20:00Z"


def test_times_read_as_in_every_command_no_offset_is_utc() -> None:
    """`--from`/`--until` read like `missed --since/--until` and `runs`: no offset means UTC, never the
    host's zone (this used to be a usage error in `next` alone)."""
    base = ["--schedule", "0 * * * *", "--timezone", "Europe/Berlin", "--count", "2", "--json"]
    naive = run(*base, "--from", "2026-01-01T00:00:00")
    zulu = run(*base, "--from", "2026-01-01T00:00:00Z")
    offset = run(*base, "--from", "2026-01-01T01:00:00+01:00")
    assert naive[0] == zulu[0] == offset[0] == 0, (naive, zulu, offset)
    assert json.loads(naive[1]) == json.loads(zulu[1]) == json.loads(offset[1])
    assert json.loads(naive[1])[0]["utc"] == "2026-01-01T01:00:00Z"


def test_usage_errors_exit_2() -> None:
    cases = [
        ["--schedule", "* * * * *", "--timezone", "UTC", "--until", "tomorrow"],
        ["--schedule", "61 * * * *", "--timezone", "UTC"],
        ["--schedule", "* * * * *", "--timezone", "Europe/Londn"],
        ["--schedule", "* * * * *"],  # no zone: never the host's
        [],
        ["backup", "--schedule", "* * * * *", "--timezone", "UTC"],
        ["--schedule", "* * * * *", "--timezone", "UTC", "--count", "0"],
    ]
    for args in cases:
        code, _, err = run(*args)
        assert code == 2, (args, err)
    _, _, err = run("--schedule", "* * * * *", "--timezone", "Europe/Londn")
    assert "did you mean 'Europe/London'?" in err


def test_job_from_file(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    code, out, _ = run(
        "backup", "--jobs", str(jobs), "--from", "2026-03-28T12:00:00Z", "--count", "1", "--json"
    )
    assert code == 0, out
    assert json.loads(out)[0]["local"] == "2026-03-29T02:00:00+01:00"


def test_unknown_job(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    proc = subprocess.run([sys.executable, "-m", "schedctl", "next", "backpu", "--jobs", str(jobs)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1
    assert "did you mean 'backup'?" in proc.stderr


def test_next_does_not_import_sqlalchemy() -> None:
    code = (
        "import sys\n"
        "from schedctl.cli import main\n"
        "try:\n"
        "    main(['next', '--schedule', '0 * * * *', '--timezone', 'Europe/London', '--count', '3'])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'psycopg', 'pymysql', 'alembic')]\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("ok")
