"""`schedctl import` and `schedctl export` end to end: files, exit codes, what goes to which stream."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from schedctl.cli import main
from schedctl.jobs.config import load_jobs, loads_jobs

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "crontabs"
DATA = REPO / "tests" / "data" / "crontab"
LOCATED = re.compile(r"^[^\s:]+:\d+: ")

# The commands examples/crontabs/README.md documents, run from examples/crontabs.
EXAMPLE_IMPORTS = {
    "etc-crontab.toml": ["etc/crontab", "--timezone", "Europe/London", "--catch-up", "skip"],
    "billing.toml": ["etc/cron.d/billing", "--catch-up", "all", "--max-catch-up", "3"],
    "ops.toml": ["etc/cron.d/ops", "--timezone", "Europe/London", "--catch-up", "latest"],
    "alice.toml": ["user/alice.crontab", "--catch-up", "latest"],
    "debian.toml": [
        "debian/cron.d", "--dialect", "debian", "--timezone", "Europe/Berlin", "--catch-up", "skip",
    ],
}  # fmt: skip
# How each is exported back for its cron (the default: cronie, from the suite's os-release).
EXAMPLE_EXPORTS = {"debian.toml": ["--dialect", "debian", "--timezone", "Europe/Berlin"]}


def run(capsys: pytest.CaptureFixture[str], *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.stdin = sys.__stdin__
    out, err = capsys.readouterr()
    return code, out, err


def assert_only_diagnostics_are_located(out: str, err: str) -> None:
    assert not any(LOCATED.match(line) for line in out.splitlines())
    for line in err.splitlines():
        if LOCATED.match(line):
            assert re.match(r"^[^\s:]+:\d+: (error|warning): ", line), line


@pytest.fixture
def crontab(tmp_path: Path) -> Path:
    path = tmp_path / "mine.cron"
    path.write_text(
        "MAILTO=ops@example.com\n# Nightly dump.\n30 2 * * * /usr/local/bin/backup-db\n"
        "*/5 * * * * /usr/local/bin/poll-queue\n"
    )
    return path


def test_import_writes_toml_to_stdout_and_the_summary_to_stderr(capsys, crontab: Path) -> None:
    code, out, err = run(
        capsys, "import", str(crontab), "--timezone", "Europe/London", "--catch-up", "latest"
    )
    assert code == 0
    jobs = loads_jobs(out, "out")
    assert sorted(jobs) == ["nightly-dump", "poll-queue"]
    assert (
        jobs["nightly-dump"].source == f"{crontab}:3" and jobs["nightly-dump"].description == "Nightly dump."
    )
    assert "nightly-dump" in err and "Europe/London" in err and "latest" in err
    assert "mail their output as cron did only when the workers run with --smtp URL" in err
    assert "2027-03-28: moved to 02:00 (clocks go forward)" not in err  # 02:30 is not in London's gap (01:00)
    assert_only_diagnostics_are_located(out, err)


def test_the_summary_lists_each_id_with_its_line(capsys, tmp_path: Path) -> None:
    path = tmp_path / "tab"
    path.write_text(
        "0 1 * * * echo hi\n0 2 * * * echo there\n0 3 * * * echo hi\n"
        "0 4 * * * cat /etc/motd | mail -s motd root\n# Rotate uploads\n0 5 * * * /usr/local/bin/rotate.sh\n"
        "0 6 * * * nice -n 10 /usr/bin/foo\n0 7 * * * cd /srv && ./run.sh\n"
    )
    code, out, err = run(capsys, "import", str(path), "--timezone", "UTC", "--catch-up", "skip")
    assert code == 0, err
    rows = [line.split() for line in err.splitlines() if f"{path}:" in line and not line.startswith("note:")]
    listed = [(row[0], row[-2]) for row in rows]  # ID, SOURCE (the DST column is last)
    assert listed == [
        ("echo-hi", f"{path}:1"),  # a bare utility never names a job alone: its words do
        ("echo-there", f"{path}:2"),
        ("echo-hi-2", f"{path}:3"),  # a repeat gets a number
        ("cat-motd", f"{path}:4"),
        ("rotate-uploads", f"{path}:6"),  # the comment above the line
        ("foo", f"{path}:7"),
        ("run", f"{path}:8"),
    ]
    assert sorted(loads_jobs(out, "out")) == sorted(i for i, _ in listed)


def test_the_summary_warns_about_dst_with_dates(capsys, tmp_path: Path) -> None:
    path = tmp_path / "ny"
    path.write_text("CRON_TZ=America/New_York\n30 2 * * * /bin/two-thirty\n30 1 * * * /bin/one-thirty\n")
    code, _, err = run(capsys, "import", str(path), "--catch-up", "skip")
    assert code == 0
    assert re.search(r"two-thirty .* \d{4}-03-\d\d: moved to 03:00 \(clocks go forward\)", err)
    assert re.search(r"one-thirty .* \d{4}-11-\d\d: 01:30 runs once, not twice \(clocks go back\)", err)


def test_import_refuses_without_a_catch_up_policy(capsys, crontab: Path, tmp_path: Path) -> None:
    target = tmp_path / "jobs.toml"
    code, out, err = run(capsys, "import", str(crontab), "--timezone", "UTC", "-o", str(target))
    assert (code, out, target.exists()) == (2, "", False)
    assert "nothing imported" in err
    assert "no catch-up policy for jobs nightly-dump" in err and "pass --catch-up skip|latest|all" in err
    assert_only_diagnostics_are_located(out, err)


def test_import_refuses_without_a_zone_and_names_the_jobs(capsys, tmp_path: Path) -> None:
    path = tmp_path / "mixed"
    path.write_text("0 1 * * * /bin/no-zone\nCRON_TZ=Asia/Tokyo\n0 2 * * * /bin/tokyo\n")
    code, out, err = run(capsys, "import", str(path), "--catch-up", "skip")
    assert (code, out) == (2, "")
    assert f"no timezone for job no-zone ({path}:1)" in err and "--timezone ZONE" in err
    assert "tokyo" not in err.split("no timezone", 1)[1].split("\n")[0]


def test_a_broken_line_fails_the_whole_import(capsys, tmp_path: Path) -> None:
    path = tmp_path / "broken"
    path.write_text("0 1 * * * /bin/good\n61 * * * * /bin/bad-minute\n0 0 L * * /bin/quartz\n")
    target = tmp_path / "jobs.toml"
    code, out, err = run(
        capsys, "import", str(path), "--timezone", "UTC", "--catch-up", "skip", "-o", str(target)
    )
    assert (code, out, target.exists()) == (1, "", False)
    assert f"{path}:2: error: minute: 61 is out of range (0-59)" in err.splitlines()
    assert any(line.startswith(f"{path}:3: error: day of month: 'L'") for line in err.splitlines())
    assert "nothing written: 2 errors (fix them, or pass --skip-invalid to import the rest)" in err
    assert_only_diagnostics_are_located(out, err)


def test_skip_invalid_imports_the_rest_and_still_exits_1(capsys, tmp_path: Path) -> None:
    path = tmp_path / "broken"
    path.write_text("0 1 * * * /bin/good\n61 * * * * /bin/bad\n")
    target = tmp_path / "jobs.toml"
    code, _, err = run(
        capsys,
        "import",
        str(path),
        "--timezone",
        "UTC",
        "--catch-up",
        "skip",
        "-o",
        str(target),
        "--skip-invalid",
    )
    assert code == 1
    assert list(load_jobs(target)) == ["good"]
    assert f"{path}:2: error: minute: 61 is out of range (0-59)" in err


def test_import_refuses_to_overwrite_without_force(capsys, crontab: Path, tmp_path: Path) -> None:
    target = tmp_path / "jobs.toml"
    target.write_text("# mine\n")
    args = ["import", str(crontab), "--timezone", "UTC", "--catch-up", "skip", "-o", str(target)]
    code, _, err = run(capsys, *args)
    assert code == 1 and "exists: nothing written; pass --force" in err
    assert target.read_text() == "# mine\n"
    code, _, _ = run(capsys, *args, "--force")
    assert code == 0 and sorted(load_jobs(target)) == ["nightly-dump", "poll-queue"]


def test_dash_as_output_is_standard_output(
    capsys, monkeypatch: pytest.MonkeyPatch, crontab: Path, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "import", str(crontab), "--timezone", "UTC", "--catch-up", "skip", "-o", "-")
    assert code == 0, err
    assert sorted(loads_jobs(out, "out")) == ["nightly-dump", "poll-queue"] and "wrote" not in err
    (tmp_path / "jobs.toml").write_text(out)
    code, exported, err = run(capsys, "export", "jobs.toml", "-o", "-")
    assert (code, err) == (0, "")
    assert "30 2 * * * /usr/local/bin/backup-db" in exported.splitlines()
    # --force has nothing to replace on stdout; `./-` still names a file called '-'.
    code, again, _ = run(
        capsys, "import", str(crontab), "--timezone", "UTC", "--catch-up", "skip", "-o", "-", "--force"
    )
    assert (code, again) == (0, out)
    assert not (tmp_path / "-").exists()
    code, _, err = run(capsys, "export", "jobs.toml", "-o", "./-")
    assert code == 0 and (tmp_path / "-").read_text() == exported and "wrote 2 jobs to ./-" in err


def test_merge_into_standard_output_is_refused(capsys, crontab: Path) -> None:
    code, out, err = run(
        capsys, "import", str(crontab), "--timezone", "UTC", "--catch-up", "skip", "-o", "-", "--merge"
    )
    assert (code, out) == (2, "")
    assert (
        err.strip() == "schedctl: --merge needs -o FILE: '-' is standard output, which holds no jobs to keep"
    )


def test_export_and_validate_read_toml_from_standard_input(capsys, crontab: Path) -> None:
    code, toml, _ = run(capsys, "import", str(crontab), "--timezone", "UTC", "--catch-up", "skip")
    assert code == 0
    code, exported, err = run(capsys, "export", "-", stdin=toml.encode())
    assert (code, err) == (0, "") and "*/5 * * * * /usr/local/bin/poll-queue" in exported.splitlines()
    code, out, _ = run(capsys, "validate", "-", stdin=toml.encode())
    assert (code, out) == (0, "<stdin>: 2 jobs OK\n")
    code, _, err = run(capsys, "validate", "-", stdin=b'[jobs.x]\nschedule = "61 * * * *"\n')
    assert code == 78 and "<stdin>:2: jobs.x.schedule: minute: 61 is out of range (0-59)" in err.splitlines()


def test_merge_adds_new_jobs_and_leaves_the_file_as_it_was(capsys, tmp_path: Path) -> None:
    target = tmp_path / "jobs.toml"
    existing = (
        '# hand-edited\n[jobs.backup-db]\nschedule = "30 2 * * *"\ntimezone = "UTC"\ncatch_up = "all"\n'
        'max_catch_up = 5\ncommand = "/usr/local/bin/backup-db"\n'
    )
    target.write_text(existing)
    path = tmp_path / "cron"
    path.write_text(
        "30 2 * * * /usr/local/bin/backup-db\n0 3 * * * /usr/local/bin/report\n"
        "0 4 * * * /usr/local/bin/backup-db\n"
    )
    code, _, err = run(
        capsys, "import", str(path), "--timezone", "UTC", "--catch-up", "skip", "-o", str(target), "--merge"
    )
    assert code == 0, err
    text = target.read_text()
    assert text.startswith(existing)
    jobs = load_jobs(target)
    assert sorted(jobs) == ["backup-db", "backup-db-2", "report"]
    assert jobs["backup-db"].max_catch_up == 5  # untouched: the edited policy survives
    assert "wrote 2 jobs" in err and "1 already there, untouched" in err
    # Merging the same crontab again adds nothing.
    code, _, err = run(
        capsys, "import", str(path), "--timezone", "UTC", "--catch-up", "skip", "-o", str(target), "--merge"
    )
    assert code == 0 and target.read_text() == text and "wrote 0 jobs" in err


def test_merge_and_force_together_is_a_usage_error(capsys, crontab: Path, tmp_path: Path) -> None:
    code, _, err = run(
        capsys,
        "import",
        str(crontab),
        "--catch-up",
        "skip",
        "--timezone",
        "UTC",
        "-o",
        str(tmp_path / "x.toml"),
        "--merge",
        "--force",
    )
    assert code == 2 and "contradict" in err


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(
    capsys, crontab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "jobs.toml"
    target.write_text("old\n")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    code, _, err = run(
        capsys,
        "import",
        str(crontab),
        "--timezone",
        "UTC",
        "--catch-up",
        "skip",
        "-o",
        str(target),
        "--force",
    )
    assert code == 1 and "No space left on device; it was left as it was" in err
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.toml", "mine.cron"]


def test_the_file_is_replaced_in_one_rename(
    capsys, crontab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "jobs.toml"
    seen: list[tuple[str, str]] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        # At the moment of the rename the whole new text is already on disk next to the target.
        seen.append((Path(src).parent.name, Path(src).read_text()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    code, _, _ = run(
        capsys, "import", str(crontab), "--timezone", "UTC", "--catch-up", "skip", "-o", str(target)
    )
    assert code == 0
    assert seen == [(tmp_path.name, target.read_text())]


def test_a_file_with_env_values_is_private(capsys, crontab: Path, tmp_path: Path) -> None:
    with_env, without_env = tmp_path / "env.toml", tmp_path / "plain.toml"
    run(capsys, "import", str(crontab), "--timezone", "UTC", "--catch-up", "skip", "-o", str(with_env))
    plain = tmp_path / "plain.cron"
    plain.write_text("0 1 * * * /bin/x\n")
    run(capsys, "import", str(plain), "--timezone", "UTC", "--catch-up", "skip", "-o", str(without_env))
    assert stat.S_IMODE(with_env.stat().st_mode) == 0o600
    assert stat.S_IMODE(without_env.stat().st_mode) & 0o044  # readable by others, as the umask allows


def test_dry_run_prints_and_writes_nothing(capsys, crontab: Path, tmp_path: Path) -> None:
    target = tmp_path / "jobs.toml"
    code, out, err = run(
        capsys,
        "import",
        str(crontab),
        "--timezone",
        "UTC",
        "--catch-up",
        "skip",
        "-o",
        str(target),
        "--dry-run",
    )
    assert code == 0 and not target.exists()
    assert sorted(loads_jobs(out, "out")) == ["nightly-dump", "poll-queue"]
    assert "dry run: nothing written" in err


def test_import_reads_standard_input(capsys) -> None:
    code, out, err = run(
        capsys,
        "import",
        "-",
        "--timezone",
        "UTC",
        "--catch-up",
        "skip",
        stdin=b"0 1 * * * /bin/from-stdin\n61 * * * * /bin/x\n",
    )
    assert code == 1 and "<stdin>:2: error: minute: 61 is out of range (0-59)" in err
    code, out, _ = run(
        capsys, "import", "-", "--timezone", "UTC", "--catch-up", "skip", stdin=b"0 1 * * * /bin/from-stdin\n"
    )
    assert code == 0 and loads_jobs(out, "out")["from-stdin"].source == "<stdin>:1"


def test_a_folder_is_read_like_cron_d(capsys, tmp_path: Path) -> None:
    folder = tmp_path / "cron.d"
    folder.mkdir()
    (folder / "backup").write_text("0 1 * * * root /usr/local/bin/backup-db\n")
    (folder / "backup.dpkg-old").write_text("0 1 * * * root /usr/local/bin/old\n")
    (folder / ".placeholder").write_text("")
    code, out, err = run(capsys, "import", str(folder), "--timezone", "UTC", "--catch-up", "skip")
    assert code == 0
    assert loads_jobs(out, "out")["backup-db"].user == "root"
    assert (
        f"{folder}: warning: not read: .placeholder, backup.dpkg-old: cronie skips hidden files, editor "
        "backups and package leftovers" in err
    )


def test_format_can_be_forced(capsys, tmp_path: Path) -> None:
    folder = tmp_path / "cron.d"
    folder.mkdir()
    (folder / "x").write_text("0 1 * * * backup-db --full\n")
    code, out, _ = run(
        capsys, "import", str(folder / "x"), "--timezone", "UTC", "--catch-up", "skip", "--format", "user"
    )
    assert code == 0 and loads_jobs(out, "out")["backup-db"].command == "backup-db --full"


@pytest.mark.parametrize("name", sorted(EXAMPLE_IMPORTS))
def test_the_example_toml_is_what_import_makes(capsys, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.chdir(EXAMPLES)
    code, out, err = run(capsys, "import", *EXAMPLE_IMPORTS[name])
    assert code == 0, err
    assert out == (EXAMPLES / name).read_text(), f"regenerate examples/crontabs/{name} (see its README)"


@pytest.mark.parametrize("name", sorted(EXAMPLE_IMPORTS))
def test_export_then_import_gives_the_same_jobs(
    capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    monkeypatch.chdir(EXAMPLES)
    code, exported, err = run(capsys, "export", name, *EXAMPLE_EXPORTS.get(name, []))
    assert (code, err) == (0, "")
    back = tmp_path / "back.cron"
    back.write_text(exported)
    flags = EXAMPLE_IMPORTS[name][1:]
    code, out, err = run(capsys, "import", str(back), *flags)
    assert code == 0, err
    strip = lambda jobs: {k: dataclasses.replace(v, source=None) for k, v in jobs.items()}  # noqa: E731
    assert strip(loads_jobs(out, "again")) == strip(load_jobs(name))


def test_export_reports_what_cron_cannot_express(capsys, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        '[jobs.fast]\nschedule = "*/10 * * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\n'
        'command = "/bin/fast"\n[jobs.ok]\nschedule = "@daily"\ntimezone = "UTC"\ncatch_up = "skip"\n'
        'command = "/bin/ok"\n'
    )
    code, out, err = run(capsys, "export", "--jobs", str(jobs))
    assert code == 0
    assert (
        "# schedctl: not exported (a 6-field schedule with seconds: cron has no seconds): */10 * * * * * "
        "/bin/fast" in out
    )
    assert "@daily /bin/ok" in out.splitlines()
    assert (
        err
        == "schedctl: warning: job 'fast' written as a comment: a 6-field schedule with seconds: cron has "
        "no seconds\n"
    )


_MIXED_USERS = (
    '[jobs.backup]\nschedule = "0 2 * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "/bin/backup"\n'
    'user = "alice"\n'
    '[jobs.rotate]\nschedule = "0 3 * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "/bin/rotate"\n'
    '[jobs.prune]\nschedule = "0 4 * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "/bin/prune"\n'
)


def test_export_never_drops_a_job_without_a_user_silently(capsys, tmp_path: Path) -> None:
    """One job names a user, so the export is a system crontab: the two without one fail it, by name, and
    nothing is written (before: they became comments and the exit was 0)."""
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(_MIXED_USERS)
    target = tmp_path / "rollback.cron"
    code, out, err = run(capsys, "export", "--jobs", str(jobs), "-o", str(target))
    assert code == 1 and out == "" and not target.exists()
    assert "'rotate'" in err and "'prune'" in err and "name no user" in err and "--user NAME" in err
    assert "'backup'" not in err
    assert len(err.strip().splitlines()) == 1  # one line, no traceback


def test_export_user_fills_the_user_column_of_jobs_that_name_none(capsys, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(_MIXED_USERS)
    code, out, err = run(capsys, "export", "--jobs", str(jobs), "--user", "root")
    assert code == 0, err
    lines = [line for line in out.splitlines() if line and not line.startswith(("#", "CRON_TZ"))]
    assert sorted(lines) == [
        "0 2 * * * alice /bin/backup",
        "0 3 * * * root /bin/rotate",
        "0 4 * * * root /bin/prune",
    ]
    assert err == ""  # every job reads back the same, with the user it was given
    code, _, err = run(capsys, "export", "--jobs", str(jobs), "--user", "root", "--format", "crontab-user")
    assert code == 2 and "--user fills the user column of a system crontab" in err


def test_import_does_not_load_sqlalchemy(crontab: Path) -> None:
    code = (
        "import sys\nfrom schedctl.cli import main\n"
        f"sys.argv = ['schedctl', 'import', {str(crontab)!r}, '--timezone', 'UTC', '--catch-up', 'skip']\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'psycopg', 'pymysql'))\n"
        "sys.stderr.write(repr(loaded))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith("[]"), done.stderr[-500:]


def test_every_broken_line_of_a_real_file_is_reported_with_its_line(capsys) -> None:
    path = DATA / "broken.crontab"
    code, out, err = run(capsys, "import", str(path), "--timezone", "UTC", "--catch-up", "skip")
    assert (code, out) == (1, "")
    located = [line.split(": ", 2)[:2] for line in err.splitlines() if LOCATED.match(line)]
    assert located == [[f"{path}:{n}", "error"] for n in (4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)] + [
        [f"{path}:15", "warning"],
        [f"{path}:17", "error"],
    ]
    assert_only_diagnostics_are_located(out, err)


def test_a_crontab_edited_on_windows_imports_cleanly(capsys) -> None:
    code, out, err = run(
        capsys, "import", str(DATA / "windows-edited.crontab"), "--timezone", "UTC", "--catch-up", "skip"
    )
    assert code == 0, err
    jobs = loads_jobs(out, "out")
    assert jobs["rotate-uploads"].command == "/usr/local/bin/rotate-uploads --keep 7"
    assert jobs["rotate-uploads"].description == "Rotate uploads."
    assert (dict(jobs["report"].env), jobs["report"].mailto) == ({"SHELL": "/bin/bash"}, ("ops@example.com",))
    assert jobs["report"].stdin == "weekly\n"


def test_an_invalid_merge_target_is_reported_in_the_importers_format(
    capsys, crontab: Path, tmp_path: Path
) -> None:
    target = tmp_path / "jobs.toml"
    target.write_text(
        '[jobs.x]\nschedule = "61 * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "x"\n'
    )
    code, out, err = run(
        capsys,
        "import",
        str(crontab),
        "--timezone",
        "UTC",
        "--catch-up",
        "skip",
        "-o",
        str(target),
        "--merge",
    )
    assert (code, out) == (78, "")
    assert err.startswith(f"{target}:2: error: jobs.x.schedule: minute: 61 is out of range (0-59)")
    assert_only_diagnostics_are_located(out, err)
