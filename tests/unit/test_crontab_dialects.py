"""Where Debian's cron and cronie read a crontab differently, each dialect follows its own cron.

Debian: its crontab(1) (cron 3.0pl1-162, Debian 12) run with `-n` in a private mount namespace, and its manual
pages. cronie: src/entry.c, src/env.c (cronie-crond/cronie as stored, entry.c at 4cd4d2e9).
"""

from __future__ import annotations

import pytest

from schedctl.crontab.diagnostics import render
from schedctl.crontab.parse import SYSTEM, USER, Crontab, parse_crontab

HOST_USERS = {"root", "alice"}


def parse(text: str, dialect: str, fmt: str | None = USER, file: str = "tab") -> Crontab:
    return parse_crontab(
        text, file, fmt, dialect, known_account=lambda n: n in HOST_USERS | {"www-data"},
        host_account=lambda n: n in HOST_USERS,
    )  # fmt: skip


def messages(tab: Crontab) -> list[str]:
    return [render(d) for d in tab.diagnostics]


def test_double_backslash_in_a_command() -> None:
    line = "0 1 * * * printf 'a\\\\b\\n'\n"
    assert parse(line, "debian").entries[0].command == "printf 'a\\b\\n'"
    assert parse(line, "cronie").entries[0].command == "printf 'a\\\\b\\n'"


def test_a_leading_dash() -> None:
    line = "-0 1 * * * /bin/quiet\n"
    assert parse(line, "cronie").entries[0].command == "/bin/quiet"
    tab = parse(line, "debian")
    assert tab.entries == []
    assert messages(tab) == [
        "tab:1: error: a '-' before the schedule (cronie's 'no syslog line' mark): Debian's cron rejects this "
        "line (crontab(1): bad minute)"
    ]


@pytest.mark.parametrize("name", ["CRON_TZ", "RANDOM_DELAY"])
def test_cron_tz_and_random_delay_are_plain_variables_in_debian(name: str) -> None:
    value = "Europe/Paris" if name == "CRON_TZ" else "30"
    text = f"{name}={value}\n0 1 * * * /bin/job\n"
    debian = parse(text, "debian")
    entry = debian.entries[0]
    assert (dict(entry.env), entry.cron_tz, entry.random_delay) == ({name: value}, None, None)
    if name == "CRON_TZ":
        # What it means depends on --timezone: the import says it (tests/cli/test_import_dialects.py).
        assert (entry.ignored_cron_tz, messages(debian)) == (1, [])
    else:
        assert messages(debian)[0].startswith("tab:1: warning: RANDOM_DELAY means nothing to Debian's cron")
    cronie = parse(text, "cronie").entries[0]
    assert dict(cronie.env) == {}
    assert (cronie.cron_tz or cronie.random_delay) in ("Europe/Paris", 30)


def test_an_empty_setting() -> None:
    text = "MAILTO=\n0 1 * * * /bin/job\n"
    cronie = parse(text, "cronie")
    assert dict(cronie.entries[0].env) == {"MAILTO": ""}  # cronie >= 1.5.3 reads an empty value
    debian = parse(text, "debian")
    assert messages(debian) == [
        "tab:1: error: 'MAILTO=' with nothing after it: Debian's cron does not read this as a setting and "
        'rejects the line (crontab(1): bad minute); write MAILTO="" for an empty value'
    ]
    assert dict(parse('MAILTO=""\n0 1 * * * /bin/job\n', "debian").entries[0].env) == {"MAILTO": ""}


@pytest.mark.parametrize(
    ("schedule", "cronie", "debian"),
    [
        ("5/15 * * * *", "a step only after a range or '*'", "a step only after a range or '*'"),
        ("0 0 * * mon-sun", None, "Debian's cron accepts this line and never runs it"),
        ("0 22-6 * * *", "cronie rejects this line", "Debian's cron accepts this line and never runs it"),
        (
            "0 0 30 2 *",
            "cron accepts this line and never runs it",
            "Debian's cron accepts this line and never",
        ),
    ],
)
def test_schedules(schedule: str, cronie: str | None, debian: str | None) -> None:
    for dialect, expected in (("cronie", cronie), ("debian", debian)):
        tab = parse(f"{schedule} /bin/job\n", dialect)
        if expected is None:
            assert tab.entries and not tab.diagnostics
        else:
            assert not tab.entries and expected in messages(tab)[0], (dialect, messages(tab))


def test_users_missing_on_this_host() -> None:
    text = "0 1 * * * www-data /usr/share/awstats/update.sh\n"
    debian = parse(text, "debian", fmt=SYSTEM)
    assert debian.entries[0].user == "www-data"
    assert messages(debian) == [
        "tab:1: warning: user 'www-data' does not exist on this host: Debian's cron skips this line here "
        "(imported: it runs where the user exists)"
    ]
    assert parse(text, "cronie", fmt=SYSTEM).diagnostics == []


@pytest.mark.parametrize("dialect", ["debian", "cronie"])
def test_no_line_continuation(dialect: str) -> None:
    text = "0 4 * * * /usr/share/awstats/tools/update.sh \\\n    -config=www.example.com\n"
    tab = parse(text, dialect)
    assert tab.entries[0].command == "/usr/share/awstats/tools/update.sh \\"
    assert messages(tab)[0].startswith("tab:1: warning: ends with '\\': cron has no line continuation")
    assert messages(tab)[1].startswith(
        "tab:2: error: line 1 ends with '\\', but cron has no line continuation: it reads this line on its own "
        "and rejects it ("
    )


def test_a_system_file_outside_cron_d_is_found_by_its_user_column() -> None:
    text = (
        "0 4 * * * www-data [ -x /usr/share/awstats/tools/update.sh ] && /usr/share/awstats/tools/update.sh\n"
    )
    tab = parse(text, "debian", fmt=None, file="backup/awstats")
    assert tab.format == SYSTEM
    assert tab.format_reason == "every job line has a user column: www-data (an account), then a command"
    assert tab.entries[0].user == "www-data"
    assert tab.entries[0].command.startswith("[ -x")


def test_a_file_with_some_user_columns_is_refused() -> None:
    text = "0 4 * * * www-data /usr/bin/a\n0 5 * * * /usr/bin/b --now\n"
    tab = parse(text, "cronie", fmt=None, file="backup/mixed")
    assert tab.entries == []
    assert messages(tab) == [
        "backup/mixed:2: error: cannot tell whether this is a system crontab (a user column after the schedule): "
        "line 2 has no user column ('/usr/bin/b' is a path), but line 1 has one ('www-data', an account, then a "
        "command); pass --format system or --format user"
    ]


def test_an_account_that_is_also_a_command_is_no_evidence() -> None:
    tab = parse('30 7 * * 1-5 mail -s "report" team@example.com\n', "cronie", fmt=None, file="alice")
    assert tab.format == USER and tab.entries[0].command.startswith("mail -s")
