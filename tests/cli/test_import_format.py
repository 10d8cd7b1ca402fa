"""`schedctl import` of system files staged out of their cron.d folder: each read as a system crontab without
--format, and the summary says, one line per file, which format was chosen and why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from crontab_corpus import COMMENTED_OUT, DEBIAN_FILES, EXAMPLE_FILES, EXAMPLES, PACKAGES, USER_CRONTABS

from schedctl.cli import main
from schedctl.jobs.config import loads_jobs


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def notes_about(err: str, path: Path) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(f"note: {path}:")]


def test_a_staging_folder_of_system_files_imports_with_every_user_column(capsys, tmp_path: Path) -> None:
    staging = tmp_path / "staging"  # what a sysadmin copies /etc/cron.d into: no longer named cron.d
    staging.mkdir()
    for name in [*DEBIAN_FILES, *COMMENTED_OUT]:
        shutil.copy(PACKAGES / name, staging / name)
    for name in EXAMPLE_FILES:
        shutil.copy(EXAMPLES / name, staging / Path(name).name)
    # cronie: the examples' ops file has a '-' before a schedule, which Debian's cron rejects.
    code, out, err = run(
        capsys, "import", str(staging), "--dialect", "cronie", "--timezone", "UTC", "--catch-up", "skip"
    )
    assert code == 0, err
    users = {Path(name).name: want for name, want in EXAMPLE_FILES.items()}
    users.update({name: want for name, (_, _, want) in DEBIAN_FILES.items()})
    jobs = loads_jobs(out, "out").values()
    for name, want in users.items():
        assert {j.user for j in jobs if j.source and j.source.startswith(f"{staging / name}:")} == want, name
        [note] = notes_about(err, staging / name)
        assert note.startswith(
            f"note: {staging / name}: read as a system crontab: every job line has a user column: "
        )
    for name in COMMENTED_OUT:
        assert notes_about(err, staging / name) == [f"note: {staging / name}: no job lines."]
    assert len(users) == 42


def test_the_summary_names_the_format_of_every_file(capsys, tmp_path: Path) -> None:
    inn2 = tmp_path / "inn2"
    shutil.copy(PACKAGES / "inn2", inn2)
    mine = tmp_path / "mine"
    mine.write_text(USER_CRONTABS["backup, then folders"])
    forced = tmp_path / "forced"
    forced.write_text("0 1 * * * root /usr/sbin/x\n")
    code, out, err = run(
        capsys,
        "import",
        str(inn2),
        str(mine),
        "--dialect",
        "debian",
        "--timezone",
        "UTC",
        "--catch-up",
        "skip",
    )
    assert code == 0, err
    assert notes_about(err, inn2) == [
        f"note: {inn2}: read as a system crontab: every job line has a user column: news (an account), then a "
        "command."
    ]
    assert notes_about(err, mine) == [
        f"note: {mine}: read as a user crontab: no line shows a user column: on line 1, 'backup' is an account "
        "but also a command, and '/home/alice/docs' after it does not read as one."
    ]
    assert {j.command.split()[0] for j in loads_jobs(out, "out").values()} >= {"backup", "test"}
    code, _, err = run(
        capsys, "import", str(forced), "--format", "user", "--timezone", "UTC", "--catch-up", "skip"
    )
    assert code == 0, err
    assert notes_about(err, forced) == [f"note: {forced}: read as a user crontab: --format user."]


def test_a_long_reason_stays_on_one_line(capsys, tmp_path: Path) -> None:
    ganeti = tmp_path / "a-rather-long-folder-name-for-staging-the-cron-files-of-this-host" / "ganeti"
    ganeti.parent.mkdir()
    shutil.copy(PACKAGES / "ganeti", ganeti)
    code, _, err = run(capsys, "import", str(ganeti), "--timezone", "UTC", "--catch-up", "skip")
    assert code == 0, err
    [note] = notes_about(err, ganeti)
    assert note.endswith(
        "gnt-masterd (not an account here, but on line 10 '[' after it starts a shell command)."
    )


def test_mixed_evidence_fails_the_import_naming_file_and_line(capsys, tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    mixed.write_text(
        "15 4 * * * news test -x /usr/lib/news/bin/news.daily && news.daily\n10 * * * * /usr/bin/rnews -U\n"
    )
    code, out, err = run(capsys, "import", str(mixed), "--timezone", "UTC", "--catch-up", "skip")
    assert (code, out) == (1, "")
    assert err.splitlines()[0] == (
        f"{mixed}:2: error: cannot tell whether this is a system crontab (a user column after the schedule): "
        "line 2 has no user column ('/usr/bin/rnews' is a path), but line 1 has one ('news', an account, then a "
        "command); pass --format system or --format user"
    )
