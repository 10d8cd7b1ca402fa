"""System or user crontab, from the content alone: the evidence a sysadmin staging a migration would use.

A /etc/cron.d file copied out of its folder has no name to go by. The system files here are the cron.d files
of Debian 12 (bookworm) packages, each as its package ships it (``tests/data/crontab/debian-packages``), and
the system files of ``examples/crontabs`` copied to a folder named ``staging``. Account names are judged
against the standard and package account lists only, never this host's /etc/passwd, so the test means the
same on every machine.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from crontab_corpus import COMMENTED_OUT, DEBIAN_FILES, EXAMPLE_FILES, EXAMPLES, PACKAGES, USER_CRONTABS

from schedctl.crontab.accounts import is_listed_account
from schedctl.crontab.diagnostics import render
from schedctl.crontab.parse import SYSTEM, USER, Crontab, parse_crontab


def parse(text: str | bytes, file: str = "staging/tab", dialect: str = "cronie") -> Crontab:
    return parse_crontab(text, file, None, dialect, known_account=is_listed_account)


def refusal(tab: Crontab) -> str | None:
    messages = [render(d) for d in tab.diagnostics if "pass --format system or --format user" in d.message]
    return messages[0] if messages else None


def assert_read_as_system(tab: Crontab, users: set[str]) -> None:
    assert tab.format == SYSTEM, tab.format_reason
    assert refusal(tab) is None
    assert {e.user for e in tab.entries} == users
    for entry in tab.entries:
        # Read as a user crontab, the account would have become the command's first word.
        assert entry.command.split()[0] != entry.user, entry


def test_the_corpus_is_complete() -> None:
    on_disk = {p.name for p in PACKAGES.iterdir() if p.name != "README.md"}
    assert on_disk == set(DEBIAN_FILES) | set(COMMENTED_OUT)
    assert len(DEBIAN_FILES) + len(EXAMPLE_FILES) == 42


@pytest.mark.parametrize("name", sorted(DEBIAN_FILES))
def test_every_debian_packages_cron_d_file_is_a_system_crontab(name: str) -> None:
    _, _, users = DEBIAN_FILES[name]
    assert_read_as_system(parse((PACKAGES / name).read_bytes(), f"staging/{name}", "debian"), users)


@pytest.mark.parametrize("name", sorted(EXAMPLE_FILES))
def test_every_example_system_file_copied_out_of_its_folder_is_a_system_crontab(
    tmp_path: Path, name: str
) -> None:
    staged = tmp_path / "staging" / Path(name).name
    staged.parent.mkdir()
    shutil.copy(EXAMPLES / name, staged)
    assert_read_as_system(parse(staged.read_bytes(), str(staged)), EXAMPLE_FILES[name])


@pytest.mark.parametrize("name", sorted(COMMENTED_OUT))
def test_a_file_with_every_job_commented_out_has_nothing_to_import(name: str) -> None:
    tab = parse((PACKAGES / name).read_bytes(), f"staging/{name}", "debian")
    assert (tab.entries, refusal(tab)) == ([], None)
    assert tab.format_reason == "no job lines"


def test_the_example_user_crontab_stays_a_user_crontab() -> None:
    tab = parse((EXAMPLES / "user" / "alice.crontab").read_bytes())
    assert (tab.format, refusal(tab)) == (USER, None)


@pytest.mark.parametrize("case", sorted(USER_CRONTABS))
def test_a_user_crontab_whose_sixth_field_is_a_word_stays_a_user_crontab(case: str) -> None:
    tab = parse(USER_CRONTABS[case])
    assert (tab.format, refusal(tab)) == (USER, None), tab.format_reason
    assert tab.entries and all(e.user is None for e in tab.entries)


# `backup` is a Debian account: what follows it, and the rest of the file, decide.
BACKUP_SYSTEM_FILES = {
    "test -x first": "0 2 * * * backup test -x /usr/local/sbin/dump-all && /usr/local/sbin/dump-all\n",
    "[ first": "0 2 * * * backup [ -d /var/backups ] && /usr/local/sbin/dump-all\n",
    "if first": "0 2 * * * backup if [ -x /usr/local/sbin/dump-all ]; then /usr/local/sbin/dump-all; fi\n",
    "a program path": "0 2 * * * backup /usr/local/sbin/dump-all --all\n",
    "beside root": "0 1 * * * root /usr/sbin/logrotate /etc/logrotate.conf\n0 2 * * * backup dump-all\n",
}


@pytest.mark.parametrize("case", sorted(BACKUP_SYSTEM_FILES))
def test_backup_as_the_user_column_of_a_system_file(case: str) -> None:
    tab = parse(BACKUP_SYSTEM_FILES[case])
    assert tab.format == SYSTEM, tab.format_reason
    assert tab.entries[-1].user == "backup"


def test_an_unknown_account_counts_when_a_shell_command_follows_it() -> None:
    # A package's own account (created at install time) is on no list and maybe not on this host.
    tab = parse("0 1 * * * ingest if [ -x /usr/bin/ingest ]; then /usr/bin/ingest; fi\n")
    assert (tab.format, tab.entries[0].user) == (SYSTEM, "ingest")


PREFIX = (
    "staging/tab:2: error: cannot tell whether this is a system crontab (a user column after the schedule): "
)
MIXED = {
    "an account line and a path line": (
        "0 4 * * * www-data /usr/bin/a\n0 5 * * * /usr/bin/b --now\n",
        "line 2 has no user column ('/usr/bin/b' is a path), but line 1 has one ('www-data', an account, then a "
        "command)",
    ),
    "news, then a command, and a line without a user": (
        "15 4 * * * news test -x /usr/lib/news/bin/news.daily && news.daily\n10 * * * * /usr/bin/rnews -U\n",
        "line 2 has no user column ('/usr/bin/rnews' is a path), but line 1 has one ('news', an account, then a "
        "command)",
    ),
    "root, then echo": (
        "0 1 * * * root /usr/sbin/logrotate /etc/logrotate.conf\n0 2 * * * echo hi\n",
        "line 2 has no user column ('echo' is a command), but line 1 has one ('root', an account, then a command)",
    ),
    "a line without a user, then an unknown account's shell command": (
        "0 1 * * * /usr/bin/rnews -U\n0 2 * * * ingest [ -x /usr/bin/ingest ] && /usr/bin/ingest\n",
        "line 1 has no user column ('/usr/bin/rnews' is a path), but line 2 has one ('ingest', not an account "
        "here, but '[' after it starts a shell command)",
    ),
}


@pytest.mark.parametrize("case", sorted(MIXED))
def test_mixed_evidence_is_refused_naming_the_lines(case: str) -> None:
    text, message = MIXED[case]
    tab = parse(text)
    assert tab.entries == []
    assert refusal(tab) == PREFIX + message + "; pass --format system or --format user"


REASONS = {
    "inn2": "every job line has a user column: news (an account), then a command",
    "munin": "every job line has a user column: munin, www-data (accounts), then a command",
    "barman": (
        "every job line has a user column: barman (not an account here, but on line 3 '[' after it starts a "
        "shell command)"
    ),
    "sogo-uncommented": (
        "every job line has a user column: sogo (not an account here, but on line 5 '/usr/sbin/sogo-tool' "
        "after it is a program named for it)"
    ),
    "ganeti": (
        "every job line has a user column: root (an account), then a command; gnt-masterd (not an account "
        "here, but on line 10 '[' after it starts a shell command)"
    ),
}


@pytest.mark.parametrize("name", sorted(REASONS))
def test_the_reason_for_system_names_the_evidence(name: str) -> None:
    assert parse((PACKAGES / name).read_bytes()).format_reason == REASONS[name]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("0 1 * * * /usr/bin/backup-db --full\n", "no user column on line 1: '/usr/bin/backup-db' is a path"),
        ("0 9 * * * echo test\n", "no user column on line 1: 'echo' is a command"),
        ("0 3 * * 0 backup\n", "no user column on line 1: nothing follows 'backup'"),
        (
            "0 2 * * * backup --incremental /home/alice\n",
            "no user column on line 1: '--incremental' after 'backup' cannot start a command",
        ),
        (
            "0 2 * * * backup /home/alice/docs\n",
            "no line shows a user column: on line 1, 'backup' is an account but also a command, and "
            "'/home/alice/docs' after it does not read as one",
        ),
    ],
)  # fmt: skip
def test_the_reason_for_user_names_the_evidence(text: str, reason: str) -> None:
    assert parse(text).format_reason == reason


def test_the_folder_and_the_name_still_decide_first() -> None:
    echo = "0 9 * * * echo test\n"
    assert parse_crontab(echo, "etc/cron.d/x").format_reason == "a file in a cron.d folder"
    assert parse_crontab("0 1 * * * root x\n", "/etc/crontab").format_reason == "/etc/crontab"
    assert parse_crontab(echo, "x", SYSTEM).format_reason == "--format system"


def test_no_command_word_is_a_listed_account() -> None:
    from schedctl.crontab.accounts import COMMANDS, PACKAGE_ACCOUNTS, STANDARD_ACCOUNTS

    assert COMMANDS & (STANDARD_ACCOUNTS | PACKAGE_ACCOUNTS) == set()


def test_the_reason_lists_the_names_of_lines_that_could_be_read_either_way() -> None:
    tab = parse("0 1 * * * root /usr/sbin/logrotate /etc/logrotate.conf\n0 2 * * * backup dump-all\n")
    assert tab.format_reason == "every job line has a user column: root, backup (accounts), then a command"
    tab = parse("0 1 * * * root /usr/sbin/x\n0 2 * * * sync-photos /mnt/photos\n")
    assert tab.format_reason == (
        "every job line has a user column: root (an account), then a command; sync-photos (not an account "
        "here, read with the others)"
    )
