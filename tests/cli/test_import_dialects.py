"""`import --dialect debian|cronie|auto`: each crontab is read the way the cron that ran it reads it.

What Debian's cron does was checked against its own `crontab(1)` (cron 3.0pl1-162 from Debian 12, run with
`crontab -n` in a private mount namespace; the daemon never started); cronie's from its src/entry.c and env.c.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from schedctl.cli import main
from schedctl.jobs.config import loads_jobs
from schedctl.timing.crondialect import CRONIE_CRON_TZ, DEBIAN_CRON_TZ

DATA = Path(__file__).parent.parent / "data"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def imported(capsys, path: Path, *extra: str) -> tuple[int, str, str]:
    return run(capsys, "import", str(path), "--timezone", "UTC", "--catch-up", "skip", *extra)


@pytest.mark.parametrize(
    ("release", "dialect"), [("os-release-ubuntu", "debian"), ("os-release-fedora", "cronie")]
)
def test_auto_detects_the_dialect_from_os_release(
    capsys, monkeypatch, tmp_path: Path, release, dialect
) -> None:
    monkeypatch.setenv("SCHEDCTL_OS_RELEASE", str(DATA / release))
    tab = tmp_path / "tab"
    tab.write_text("CRON_TZ=Europe/Paris\n0 1 * * * /bin/nightly\n")
    code, out, err = imported(capsys, tab)
    assert code == 0, err
    assert f"note: read as {'Debian' if dialect == 'debian' else 'cronie'}" in err
    assert f"(--dialect auto: {DATA / release}: ID=" in err
    job = loads_jobs(out, "out")["nightly"]
    # Debian's cron has no CRON_TZ: the zone is --timezone's, the variable stays in the env (and is reported).
    assert (job.timezone, dict(job.env)) == (
        ("UTC", {"CRON_TZ": "Europe/Paris"}) if dialect == "debian" else ("Europe/Paris", {})
    )
    assert (f"{tab}:1: warning: {DEBIAN_CRON_TZ}" in err) == (dialect == "debian")


def one_paragraph(text: str) -> str:
    return " ".join(text.split())


def test_cron_tz_under_debian_is_refused_in_one_line_that_names_the_way_out(capsys, tmp_path: Path) -> None:
    tab = tmp_path / "tz"
    tab.write_text(
        "0 1 * * * /bin/above\nCRON_TZ=Europe/Berlin\n0 2 * * * echo x\nCRON_TZ=UTC\n0 3 * * * b\n"
    )
    for extra in ((), ("--skip-invalid",)):  # no broken line to leave out: --skip-invalid changes nothing
        code, out, err = run(capsys, "import", str(tab), "--dialect", "debian", "--catch-up", "skip", *extra)
        assert (code, out) == (2, "")
        assert err.splitlines() == [
            f"{tab}:2: error: {DEBIAN_CRON_TZ}: pass --timezone ZONE with that zone, or {CRONIE_CRON_TZ}"
        ]
    # With --timezone, CRON_TZ is what it was for Debian's cron, a plain variable: said once, as a warning.
    code, out, err = imported(capsys, tab, "--dialect", "debian")
    assert code == 0, err
    jobs = loads_jobs(out, "out")
    assert {i: (j.timezone, j.env.get("CRON_TZ")) for i, j in jobs.items()} == {
        "above": ("UTC", None),
        "echo-x": ("UTC", "Europe/Berlin"),
        "b": ("UTC", "UTC"),
    }
    warned = [line for line in err.splitlines() if "CRON_TZ" in line]
    assert warned == [
        f"{tab}:2: warning: {DEBIAN_CRON_TZ}: these jobs run in --timezone UTC, and CRON_TZ stays in their env "
        f"({CRONIE_CRON_TZ})"
    ]
    # The help says the same thing; cronie honours CRON_TZ and says nothing about it.
    _, help_text, _ = run(capsys, "import", "--help")
    assert f"{DEBIAN_CRON_TZ} (or {CRONIE_CRON_TZ})" in one_paragraph(help_text)
    code, out, err = run(capsys, "import", str(tab), "--dialect", "cronie", "--catch-up", "skip")
    assert code == 2 and "CRON_TZ" not in err.split("no timezone", 1)[0]
    code, out, err = imported(capsys, tab, "--dialect", "cronie")
    zones = {i: j.timezone for i, j in loads_jobs(out, "out").items()}
    assert (code, zones) == (0, {"above": "UTC", "echo-x": "Europe/Berlin", "b": "UTC"})


def test_a_folder_is_read_with_each_crons_file_name_rules(capsys, tmp_path: Path) -> None:
    folder = tmp_path / "cron.d"
    folder.mkdir()
    (folder / "backup").write_text("0 1 * * * root /usr/local/bin/backup-db\n")
    (folder / "local.cron").write_text("0 2 * * * root /usr/local/bin/local-job\n")
    (folder / "README.md").write_text("# Crontabs\n\nThese run every night.\n")
    (folder / "backup.dpkg-old").write_text("0 1 * * * root /usr/local/bin/old\n")
    for dialect, wanted in (("debian", {"backup-db"}), ("cronie", {"backup-db", "local-job"})):
        code, out, err = imported(capsys, folder, "--dialect", dialect)
        assert code == 0, err
        assert set(loads_jobs(out, "out")) == wanted
        assert f"{folder}: warning: not read: README.md: documentation, not a crontab" in err
    code, _, err = imported(capsys, folder, "--dialect", "debian")
    assert (
        f"{folder}: warning: not read: backup.dpkg-old, local.cron: Debian's cron reads only names made of "
        "letters, digits, '_' and '-'" in err
    )


def test_a_file_that_is_not_a_crontab_stops_at_twenty_errors(capsys, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.write_text("".join(f"this is line {n} of some notes\n" for n in range(1, 51)))
    code, _, err = imported(capsys, notes)
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith(str(notes))]
    assert len(lines) == 21
    assert lines[-1] == f"{notes}:21: error: 30 more errors from this line on, not shown (is this a crontab?)"


def test_a_binary_file_is_one_line(capsys, tmp_path: Path) -> None:
    binary = tmp_path / "ls"
    binary.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 40 + b"\n0 1 * * * x\n")
    code, _, err = imported(capsys, binary)
    assert code == 1
    assert err.splitlines()[0] == f"{binary}: error: not a text file"
    assert len([line for line in err.splitlines() if str(binary) in line]) == 1


def test_an_unrelated_folder_does_not_flood(capsys, tmp_path: Path) -> None:
    # The shape of `import /etc` or `/bin`: dotted names, binaries, text that is not a crontab.
    folder = tmp_path / "etc"
    folder.mkdir()
    for n in range(30):
        (folder / f"thing{n}.conf").write_text("key = value\n" * 100)
    (folder / "hosts").write_text("127.0.0.1 localhost\n" * 200)
    (folder / "ls").write_bytes(b"\x7fELF" + bytes(4000))
    (folder / "bin").mkdir()
    for n in range(40):
        (folder / "bin" / f"tool{n}").write_bytes(b"\x7fELF" + bytes(4000))
    code, _, err = imported(capsys, folder, "--dialect", "debian")
    assert code == 1
    assert err.splitlines() == [
        f"{folder}: warning: not read: bin: a folder (cron does not look in sub-folders)",
        f"{folder}: warning: not read: thing0.conf, thing1.conf, thing10.conf, thing11.conf, thing12.conf, "
        "thing13.conf, thing14.conf, thing15.conf, thing16.conf, thing17.conf and 20 more: Debian's cron reads "
        "only names made of letters, digits, '_' and '-'",
        f"{folder}: error: not crontabs (no line is a job cron would run; import one on its own to see why): hosts",
        f"{folder}: error: not text files: ls",
        "schedctl: nothing written: 2 errors (fix them, or pass --skip-invalid to import the rest)",
    ]
    code, _, err = imported(capsys, folder / "bin", "--dialect", "debian")
    assert (
        err.splitlines()[0]
        == f"{folder / 'bin'}: error: not text files: "
        + ", ".join(sorted(f"tool{n}" for n in range(40))[:10])
        + " and 30 more"
    )


def test_export_for_debian_never_relies_on_cron_tz(capsys, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        '[jobs.berlin]\nschedule = "0 3 * * *"\ntimezone = "Europe/Berlin"\ncatch_up = "skip"\ncommand = "/bin/a"\n'
        '[jobs.tokyo]\nschedule = "0 3 * * *"\ntimezone = "Asia/Tokyo"\ncatch_up = "skip"\ncommand = "/bin/b"\n'
        'jitter = "5m"\n'
    )
    code, _, err = run(capsys, "export", str(jobs), "--dialect", "debian")
    assert code == 2 and "--dialect debian needs --timezone ZONE" in err
    code, out, err = run(capsys, "export", str(jobs), "--dialect", "debian", "--timezone", "Europe/Berlin")
    assert code == 0
    lines = [line for line in out.splitlines() if not line.startswith("#")]
    assert not [line for line in lines if line.startswith(("CRON_TZ", "RANDOM_DELAY"))], out
    assert "0 3 * * * /bin/a" in out.splitlines()
    assert (
        "schedctl: warning: job 'tokyo' written as a comment: its zone is Asia/Tokyo, not Europe/Berlin: Debian's "
        "cron has no CRON_TZ and would run it in the host's zone" in err
    )
    code, out, _ = run(capsys, "export", str(jobs), "--dialect", "cronie")
    assert "CRON_TZ=Asia/Tokyo" in out and "RANDOM_DELAY=5" in out
