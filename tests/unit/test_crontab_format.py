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

from schedctl.crontab.accounts import is_listed_account
from schedctl.crontab.diagnostics import render
from schedctl.crontab.parse import SYSTEM, USER, Crontab, parse_crontab

REPO = Path(__file__).resolve().parents[2]
PACKAGES = REPO / "tests" / "data" / "crontab" / "debian-packages"
EXAMPLES = REPO / "examples" / "crontabs"

# file in debian-packages -> (the package it comes from, its version in Debian 12, the user column's names).
# apticron, debsecan and popularity-contest write their file from a maintainer script (postinst or a helper
# it runs) with a random minute: the text is the script's, the minute is fixed here. sogo ships its jobs
# commented out ("sogo" below is the file as shipped); sogo-uncommented is it with the five jobs enabled, as
# its comments tell the admin to. xfsprogs ships xfs_scrub_all.cron for the admin to install into cron.d.
DEBIAN_FILES: dict[str, tuple[str, str, set[str]]] = {
    "amavisd-new": ("amavisd-new", "1:2.13.0-3+deb12u1", {"amavis"}),
    "anacron": ("anacron", "2.3-36", {"root"}),
    "apt-cacher": ("apt-cacher", "1.7.29", {"root"}),
    "apticron": ("apticron", "1.2.5+nmu1", {"root"}),
    "atop": ("atop", "2.8.1-1+deb12u1", {"root"}),
    "awstats": ("awstats", "7.8-3+deb12u2", {"www-data"}),
    "backupninja": ("backupninja", "1.2.2-1", {"root"}),
    "barman": ("barman", "3.4.0-1", {"barman"}),
    "cacti": ("cacti", "1.2.24+ds1-1+deb12u5", {"www-data"}),
    "certbot": ("certbot", "2.1.0-4", {"root"}),
    "clamav-unofficial-sigs": ("clamav-unofficial-sigs", "3.7.2-2.1", {"clamav"}),
    "cron-apt": ("cron-apt", "0.13.0.1", {"root"}),
    "debsecan": ("debsecan", "0.4.20.1", {"daemon"}),
    "dirvish": ("dirvish", "1.2.1-2.1", {"root"}),
    "dma": ("dma", "0.13-1+b1", {"root"}),
    "e2scrub_all": ("e2fsprogs", "1.47.0-2+b2", {"root"}),
    "ganeti": ("ganeti", "3.0.2-3", {"root", "gnt-masterd"}),
    "greylistclean": ("sa-exim", "4.2.1-20+b1", {"Debian-exim"}),
    "inn2": ("inn2", "2.7.1-1+deb12u1", {"news"}),
    "leafnode": ("leafnode", "1.12.0-2", {"news"}),
    "lightsquid": ("lightsquid", "1.8-7", {"root"}),
    "logcheck": ("logcheck", "1.4.2+deb12u1", {"logcheck"}),
    "mailman3": ("mailman3", "3.3.8-2~deb12u2", {"list"}),
    "mailman3-web": ("mailman3-web", "0+20200530-2.1", {"www-data"}),
    "mdadm": ("mdadm", "4.2-5", {"root"}),
    "mlmmj": ("mlmmj", "1.3.0-4", {"root"}),
    "munin": ("munin", "2.0.73-1", {"munin", "www-data"}),
    "munin-node": ("munin-node", "2.0.73-1", {"root"}),
    "ntpsec": ("ntpsec", "1.2.2+dfsg1-1+deb12u1", {"root"}),
    "php": ("php-common", "2:93", {"root"}),
    "popularity-contest": ("popularity-contest", "1.76", {"root"}),
    "roundcube-core": ("roundcube-core", "1.6.5+dfsg-1+deb12u14", {"www-data"}),
    "sogo-uncommented": ("sogo", "5.8.0-2+deb12u4", {"sogo"}),
    "sysstat": ("sysstat", "12.6.1-1", {"root"}),
    "tiger": ("tiger", "1:3.2.4~rc1-3.2", {"root"}),
    "uucp": ("uucp", "1.07-27+b2", {"uucp"}),
    "xfs_scrub_all": ("xfsprogs", "6.1.0-1", {"root"}),
}
# Shipped with every job commented out: nothing to import, whatever the format.
COMMENTED_OUT = {"apt-mirror": "0.5.4-2", "rsnapshot": "1.4.5-1", "sogo": "5.8.0-2+deb12u4"}
EXAMPLE_FILES = {
    "etc/crontab": {"root"},
    "etc/cron.d/billing": {"billing"},
    "etc/cron.d/ops": {"postgres", "root"},
    "debian/cron.d/sysupkeep": {"root"},
    "debian/cron.d/webstats": {"www-data"},
}


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


# A word in the sixth field of a user crontab is the command, even when an account has that name.
USER_CRONTABS = {
    "echo, then a quoted word": '30 7 * * 1-5 echo "standup" | mail -s standup team@example.com\n',
    "echo test": "0 9 * * * echo test >> /tmp/cron-alive\n",
    "php, then a script": "*/5 * * * * php /var/www/app/artisan schedule:run >> /dev/null 2>&1\n",
    "php, then a word": "* * * * * php artisan schedule:run\n",
    "python3, then a script": "0 1 * * * python3 /home/alice/bin/report.py\n",
    "nice, then a program": "0 1 * * * nice /usr/local/bin/heavy-report\n",
    "backup, then folders": "0 2 * * * backup /home/alice/docs /mnt/usb\n",
    "backup, then an option": "0 2 * * * backup --incremental /home/alice\n",
    "backup alone": "0 3 * * 0 backup\n",
    "backup, then a redirect": "0 2 * * * backup > /tmp/backup.log 2>&1\n",
    "backup, then &&": "0 2 * * * backup && echo done\n",
    "backup test": "0 2 * * * backup test\n",
    "backup, then a URL": "0 2 * * * backup s3://alice-backups/docs\n",
    "backup, and a line that has no user column": (
        "0 2 * * * backup /home/alice\n30 2 * * * /usr/bin/rsync -a /home/alice /mnt/usb\n"
    ),
    "mail, then an address": "0 1 * * * mail alice@example.com < /home/alice/report.txt\n",
    "list, then a folder": "0 1 * * * list /srv/music\n",
    "sync alone": "@daily sync\n",
    "CERN's root, then options": "0 1 * * * root -b -q /home/alice/analysis.C\n",
    "a variable before the command": "0 1 * * * LANG=C sort -o /tmp/words /tmp/words\n",
    "cd first": "0 1 * * * cd /home/alice && ./run.sh\n",
    "an unknown word, then a data folder": "0 1 * * * sync-photos /mnt/photos\n",
    "a script on the PATH, then a program path": "0 1 * * * deploy /usr/local/bin/app\n",
}


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
