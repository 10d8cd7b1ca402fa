"""The crontab parser against what cronie does with each construct (entry.c, env.c, do_command.c)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedctl.crontab.diagnostics import render
from schedctl.crontab.parse import SYSTEM, USER, Crontab, parse_crontab
from schedctl.crontab.percent import split_percent


def parse(text: str | bytes, file: str = "tab", fmt: str | None = USER) -> Crontab:
    return parse_crontab(text, file, fmt)


def only(text: str | bytes, fmt: str | None = USER):
    tab = parse(text, fmt=fmt)
    assert [d for d in tab.diagnostics if d.severity == "error"] == [], [render(d) for d in tab.diagnostics]
    assert len(tab.entries) == 1, tab.entries
    return tab.entries[0]


def errors(text: str | bytes, fmt: str | None = USER) -> list[str]:
    return [render(d) for d in parse(text, fmt=fmt).diagnostics if d.severity == "error"]


def warnings(text: str | bytes, fmt: str | None = USER) -> list[str]:
    return [render(d) for d in parse(text, fmt=fmt).diagnostics if d.severity == "warning"]


# ---------------------------------------------------------------------------------------------- lines


def test_comments_blank_lines_and_indented_comments_are_skipped() -> None:
    tab = parse("# a comment\n\n   # indented comment\n\t\n0 1 * * * true\n")
    assert [(e.line, e.command) for e in tab.entries] == [(5, "true")]
    assert tab.diagnostics == []


def test_crlf_endings_and_trailing_spaces_do_not_reach_the_command() -> None:
    tab = parse(b"SHELL=/bin/bash\r\n0 1 * * * /usr/bin/backup --full   \t\r\n")
    assert tab.entries[0].command == "/usr/bin/backup --full"
    assert tab.entries[0].env == {"SHELL": "/bin/bash"}


def test_a_trailing_blank_escaped_by_a_backslash_is_kept() -> None:
    assert only("0 1 * * * echo a\\   \n").command == "echo a\\ "
    assert only("0 1 * * * echo a\\\\   \n").command == "echo a\\\\"


def test_leading_blanks_before_the_schedule_are_allowed() -> None:
    assert only("   \t0 1 * * * true\n").schedule == "0 1 * * *"


def test_fields_separated_by_tabs_and_several_blanks() -> None:
    entry = only("17 *\t* * *\troot\tcd / && run-parts --report /etc/cron.hourly\n", fmt=SYSTEM)
    assert (entry.schedule, entry.user, entry.command) == (
        "17 * * * *",
        "root",
        "cd / && run-parts --report /etc/cron.hourly",
    )


@pytest.mark.parametrize(
    "schedule",
    [
        "0 0 * JAN,feb,Mar *",
        "0 0 * * mon-FRI",
        "0 0 * * Sun",
        "*/15 * * * *",
        "0 9-17/2 * * 1-5",
        "5,10,15 0 1-7 * *",
        "0 0 * * 7",
        "0 0 * * 0-7",
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
    ],
)
def test_schedules_cron_accepts(schedule: str) -> None:
    assert only(f"{schedule} /bin/job\n").schedule == schedule


def test_a_leading_dash_that_silences_syslog_is_dropped() -> None:
    entry = only("-30 2 * * * root /usr/local/bin/backup-db\n", fmt=SYSTEM)
    assert (entry.schedule, entry.user, entry.command) == ("30 2 * * *", "root", "/usr/local/bin/backup-db")
    assert only("-@daily /bin/x\n").schedule == "@daily"
    assert warnings("-@daily /bin/x\n") == [
        "tab:1: warning: the '-' (no syslog line) is dropped; cronie accepts it only in root's crontab, so if "
        "this was another user's crontab, cron never ran this line"
    ]


def test_reboot_is_reported_and_left_out() -> None:
    tab = parse("@reboot /usr/local/bin/warm-cache\n")
    assert tab.entries == []
    assert [render(d) for d in tab.diagnostics] == [
        "tab:1: warning: @reboot runs at boot, not at a time: left out; run it from the host's boot "
        "(a systemd unit) instead"
    ]


def test_a_last_line_without_newline_is_an_error_because_cron_never_runs_it() -> None:
    tab = parse("0 1 * * * first\n0 2 * * * second")
    assert [e.command for e in tab.entries] == ["first"]
    assert errors("0 1 * * * first\n0 2 * * * second") == [
        "tab:2: error: no newline at the end of the file: cron ignores this last line (cronie stops reading "
        "at it, and `crontab` refuses the file); add a newline"
    ]


def test_an_unterminated_comment_or_setting_at_the_end_is_harmless() -> None:
    assert errors("0 1 * * * x\n# the end") == []
    assert warnings("0 1 * * * x\nFOO=bar") == [
        "tab:2: warning: no newline at the end of the file: cron stops reading here, so this setting applies "
        "to nothing"
    ]


# ---------------------------------------------------------------------------------------------- environment


@pytest.mark.parametrize(
    ("line", "name", "value"),
    [
        ("FOO=bar", "FOO", "bar"),
        ("FOO = bar", "FOO", "bar"),
        ("FOO =bar baz  ", "FOO", "bar baz"),
        ("FOO='a b '", "FOO", "a b "),
        ('FOO="a # not a comment"', "FOO", "a # not a comment"),
        ('FOO = "quoted"   ', "FOO", "quoted"),
        ("FOO=b'c'", "FOO", "b'c'"),
        ('FOO=""', "FOO", ""),
        ("FOO=", "FOO", ""),
        ("FOO==x", "FOO", "=x"),
        ("MAILTO=ops@example.com", "MAILTO", "ops@example.com"),
    ],
)
def test_environment_lines_with_crons_quote_handling(line: str, name: str, value: str) -> None:
    entry = only(f"{line}\n0 1 * * * job\n")
    assert dict(entry.env) == {name: value}


@pytest.mark.parametrize("line", ['FOO="unterminated', "FOO='a' b", 'FOO="a"b'])
def test_broken_environment_lines_are_errors(line: str) -> None:
    assert errors(f"{line}\n") == [
        "tab:1: error: neither a job nor an environment setting cron accepts (a quoted value must be the whole "
        "value, and its quotes must close)"
    ]


def test_each_job_gets_the_environment_in_effect_at_its_line() -> None:
    tab = parse("SHELL=/bin/bash\n0 1 * * * a\nPATH=/usr/bin\nSHELL=/bin/zsh\n0 2 * * * b\n")
    assert [dict(e.env) for e in tab.entries] == [
        {"SHELL": "/bin/bash"},
        {"SHELL": "/bin/zsh", "PATH": "/usr/bin"},
    ]


def test_mailto_has_three_states() -> None:
    tab = parse('0 1 * * * unset\nMAILTO=""\n0 2 * * * empty\nMAILTO=ops@example.com\n0 3 * * * set\n')
    assert [e.env.get("MAILTO") for e in tab.entries] == [None, "", "ops@example.com"]


def test_cron_tz_sets_the_zone_of_the_jobs_below_it() -> None:
    tab = parse(
        "0 1 * * * before\nCRON_TZ=Europe/London\n0 2 * * * london\nCRON_TZ=America/New_York\n"
        "0 3 * * * new-york\nCRON_TZ=\n0 4 * * * default\n"
    )
    assert [(e.command, e.cron_tz) for e in tab.entries] == [
        ("before", None),
        ("london", "Europe/London"),
        ("new-york", "America/New_York"),
        ("default", None),
    ]
    assert all("CRON_TZ" not in e.env for e in tab.entries)


def test_an_invalid_cron_tz_is_an_error_and_so_are_the_jobs_it_covers() -> None:
    assert errors("CRON_TZ=Europe/Londn\n0 1 * * * x\n") == [
        "tab:1: error: CRON_TZ: unknown zone 'Europe/Londn' (did you mean 'Europe/London'?)",
        "tab:2: error: its zone comes from the invalid CRON_TZ on line 1",
    ]


def test_tz_is_only_environment_and_warned_about() -> None:
    tab = parse("TZ=Europe/Paris\n0 1 * * * x\n")
    assert tab.entries[0].env == {"TZ": "Europe/Paris"} and tab.entries[0].cron_tz is None
    assert warnings("TZ=Europe/Paris\n") == [
        "tab:1: warning: TZ only sets the jobs' environment: cron reads schedules in CRON_TZ (or the host's "
        "zone), and so does schedctl; set CRON_TZ or pass --timezone"
    ]


def test_random_delay_is_minutes_for_the_jobs_below() -> None:
    tab = parse("0 1 * * * a\nRANDOM_DELAY=10\n0 2 * * * b\nRANDOM_DELAY=0\n0 3 * * * c\n")
    assert [e.random_delay for e in tab.entries] == [None, 10, None]
    assert all("RANDOM_DELAY" not in e.env for e in tab.entries)


@pytest.mark.parametrize("value", ["ten", "-5", "1441", "5m"])
def test_a_bad_random_delay_is_an_error(value: str) -> None:
    assert errors(f"RANDOM_DELAY={value}\n") == [
        f"tab:1: error: RANDOM_DELAY {value!r} is not a whole number of minutes from 0 to 1440"
    ]


# ---------------------------------------------------------------------------------------------- the % rule


@pytest.mark.parametrize(
    ("text", "command", "stdin"),
    [
        ("echo hi", "echo hi", None),
        ("date +\\%F", "date +%F", None),
        ("mail -s hi root%line one%line two", "mail -s hi root", "line one\nline two\n"),
        ("cat%100\\% sure", "cat", "100% sure\n"),
        ("cat%a%", "cat", "a\n"),
        ("cat%", "cat", None),
        ("cat%%", "cat", "\n"),
        ("cat%back\\slash", "cat", "back\\slash\n"),
        ("echo \\\\%x", "echo \\\\", "x\n"),
        ("echo \\x%y", "echo \\x", "y\n"),
        ("cat%ends\\", "cat", "ends\\\n"),
    ],
)
def test_the_percent_rule_gives_exactly_what_cron_runs(text: str, command: str, stdin: str | None) -> None:
    assert split_percent(text) == (command, stdin)


def test_the_percent_rule_on_a_job_line() -> None:
    entry = only('0 10 * * 1 mail -s "On call" oncall@example.com%Hi,%%Handover at 11.%\n')
    assert entry.command == 'mail -s "On call" oncall@example.com'
    assert entry.stdin == "Hi,\n\nHandover at 11.\n"


# ---------------------------------------------------------------------------------------------- descriptions


def test_the_comment_lines_directly_above_are_the_description() -> None:
    tab = parse(
        "# not mine\n\n# Nightly backup\n# of the main database.\n30 2 * * * backup-db\n0 3 * * * other\n"
    )
    assert [e.description for e in tab.entries] == ["Nightly backup\nof the main database.", None]


def test_legends_and_commented_out_jobs_are_not_descriptions() -> None:
    debian = (
        "# Example of job definition:\n# .---------------- minute (0 - 59)\n# |  |  |  |  |\n"
        "# *  *  *  *  * user-name command to be executed\n17 * * * * root x\n"
    )
    assert parse(debian, fmt=SYSTEM).entries[0].description is None
    template = "# Edit this file to introduce tasks to be run by cron.\n#\n# m h  dom mon dow   command\n0 1 * * * x\n"
    assert parse(template).entries[0].description is None
    assert parse("# old job:\n#0 5 * * * old-thing\n0 1 * * * x\n").entries[0].description is None


def test_an_id_comment_from_export_is_a_hint_not_a_description() -> None:
    entry = only("# schedctl: id=nightly\n# Nightly.\n0 1 * * * x\n")
    assert (entry.id_hint, entry.description) == ("nightly", "Nightly.")


# ---------------------------------------------------------------------------------------------- formats


def test_format_is_detected_per_file() -> None:
    system_line = "17 * * * * root cd / && run-parts /etc/cron.hourly\n"
    assert parse_crontab(system_line, "/etc/crontab").format == SYSTEM
    assert parse_crontab(system_line, "etc/cron.d/backup").format == SYSTEM
    assert parse_crontab(system_line, "mine").format == SYSTEM  # content: a user column (root) on every line
    assert parse_crontab("0 1 * * * /usr/bin/backup-db --full\n", "mine").format == USER
    assert (
        parse_crontab("# Written by schedctl export (format: system; ...)\n0 1 * * * bob x\n", "f").format
        == SYSTEM
    )


def test_format_can_be_forced() -> None:
    tab = parse_crontab("0 1 * * * root run-it\n", "etc/cron.d/x", USER)
    assert (tab.format, tab.entries[0].user, tab.entries[0].command) == (USER, None, "root run-it")


def test_system_format_reads_the_user_column() -> None:
    entry = only("@weekly backup /usr/local/bin/prune --all\n", fmt=SYSTEM)
    assert (entry.schedule, entry.user, entry.command) == ("@weekly", "backup", "/usr/local/bin/prune --all")


# ---------------------------------------------------------------------------------------------- broken lines

BROKEN = [
    (
        "too few fields",
        "0 1 * *\n",
        USER,
        "too few fields: a job line needs 5 time fields and a command, found 4 fields",
    ),
    ("minute 61", "61 * * * * x\n", USER, "minute: 61 is out of range (0-59)"),
    ("hour 24", "0 24 * * * x\n", USER, "hour: 24 is out of range (0-23)"),
    ("day 0", "0 0 0 * * x\n", USER, "day of month: 0 is out of range (1-31)"),
    ("month 13", "0 0 * 13 * x\n", USER, "month: 13 is out of range (1-12)"),
    ("weekday 8", "0 0 * * 8 x\n", USER, "day of week: 8 is out of range (0-7)"),
    ("step 0", "*/0 * * * * x\n", USER, "minute: step '/0' must be at least 1"),
    ("reversed range", "0 5-1 * * * x\n", USER, "hour: range '5-1' is reversed: cronie rejects this line"),
    ("unknown month", "0 0 * foo * x\n", USER, "month: unknown name 'foo'"),
    ("unknown weekday", "0 0 * * monday x\n", USER, "day of week: unknown name 'monday'"),
    ("no command", "0 1 * * *\n", USER, "a schedule with no command"),
    ("no command, macro", "@daily   \n", USER, "a schedule with no command"),
    ("only stdin", "0 1 * * * %input\n", USER, "a schedule with no command (the line starts with '%')"),
    ("never exists", "0 0 30 2 * x\n", USER, "never fires: day 30 does not occur in Feb"),
    (
        "user is a path",
        "0 1 * * * /usr/bin/backup --full\n",
        SYSTEM,
        "the user column '/usr/bin/backup' cannot be an account name: it is a path (is this a user crontab? pass "
        "--format user)",
    ),
    (
        "user is no name",
        "0 1 * * * bob;rm x\n",
        SYSTEM,
        "the user column 'bob;rm' cannot be an account name: it is not an account name",
    ),
    (
        "no command after user",
        "0 1 * * * root\n",
        SYSTEM,
        "a schedule with no command (after the user column 'root')",
    ),
    (
        "not UTF-8",
        b"0 1 * * * echo caf\xe9\n",
        USER,
        "bytes that are not UTF-8 (byte 0xe9 at column 19); cron jobs here must be UTF-8",
    ),
    ("NUL", b"0 1 * * * echo a\x00b\n", USER, "a NUL character: cron would cut the line there"),
    (
        "seconds",
        "*/10 * * * * * x\n",
        USER,
        "6 time fields: cron has no seconds field, so '*' would be run as the "
        "command (or read as the user); write the 5-field schedule (a 6-field one with seconds belongs in the TOML)",
    ),
    (
        "seconds, numeric",
        "0 30 2 * * 1 x\n",
        USER,
        "6 time fields: cron has no seconds field, so '1' would be run "
        "as the command (or read as the user); write the 5-field schedule (a 6-field one with seconds belongs in "
        "the TOML)",
    ),
    (
        "seconds, system",
        "0 30 2 * * * root x\n",
        SYSTEM,
        "6 time fields: cron has no seconds field, so '*' would "
        "be run as the command (or read as the user); write the 5-field schedule (a 6-field one with seconds "
        "belongs in the TOML)",
    ),
    ("Quartz L", "0 0 L * * x\n", USER, "day of month: 'L' (last) is Quartz syntax, not cron"),
    ("Quartz W", "0 0 15W * * x\n", USER, "day of month: 'W' (nearest weekday) is Quartz syntax, not cron"),
    ("Quartz #", "0 0 * * 5#3 x\n", USER, "day of week: '#' (nth weekday) is Quartz syntax, not cron"),
    ("Quartz ?", "0 0 ? * 1 x\n", USER, "day of month: '?' is Quartz syntax"),
    ("Jenkins H", "H * * * * x\n", USER, "minute: 'H' is Jenkins hash syntax, not cron"),
    ("@every", "@every 5m x\n", USER, "@every is not cron syntax; use a step such as '*/5 * * * *'"),
    ("unknown macro", "@fortnightly x\n", USER, "unknown macro '@fortnightly'"),
    ("macro case", "@Daily x\n", USER, "cron reads @-macros in lower case only: '@Daily' (write '@daily')"),
    (
        "env name",
        "'MY VAR'=1\n",
        USER,
        "environment name 'MY VAR' cannot be passed to a job: names are letters, "
        "digits and _, not starting with a digit",
    ),
    ("env not UTF-8", b"FOO=caf\xe9\n", USER, "environment line is not UTF-8 text (byte 0xe9 at column 8)"),
]


@pytest.mark.parametrize(("text", "fmt", "message"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_every_broken_line_is_an_error(text: str | bytes, fmt: str, message: str) -> None:
    tab = parse(text, fmt=fmt)
    assert tab.entries == []
    # Schedule messages come from schedctl.timing.cron; the start of each is the contract, not its last words.
    rendered = [render(d) for d in tab.diagnostics]
    assert len(rendered) == 1 and rendered[0].startswith(f"tab:1: error: {message}"), rendered


def test_all_broken_lines_are_reported_not_just_the_first() -> None:
    text = "".join(
        b[1].decode("latin-1") if isinstance(b[1], bytes) else b[1] for b in BROKEN if b[2] == USER
    )
    tab = parse(text.encode("latin-1"))
    assert [d.line for d in tab.diagnostics] == list(range(1, text.count("\n") + 1))
    assert tab.entries == []


# ---------------------------------------------------------------------------------------------- never crashes

_LINE_PARTS = st.sampled_from(
    [
        "*",
        "*/5",
        "0",
        "59",
        "61",
        "1-5",
        "5-1",
        "mon",
        "JAN",
        "L",
        "#",
        "?",
        "H",
        "%",
        "\\",
        "\\%",
        "=",
        "'",
        '"',
        "@daily",
        "@reboot",
        "@every",
        "-",
        "root",
        "/usr/bin/x",
        " ",
        "\t",
        "\r",
        "CRON_TZ=",
        "RANDOM_DELAY=",
        "Europe/London",
        "MAILTO",
        "#",
        "\x00",
        "\xe9",
        "\u2028",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(_LINE_PARTS, max_size=9).map(" ".join), max_size=6),
    st.sampled_from([None, USER, SYSTEM]),
)
def test_the_parser_never_raises_on_crontab_like_lines(lines: list[str], fmt: str | None) -> None:
    tab = parse_crontab("\n".join(lines), "fuzz", fmt)
    for d in tab.diagnostics:
        assert "\n" not in render(d)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.sampled_from([None, USER, SYSTEM]))
def test_the_parser_never_raises_on_arbitrary_bytes(data: bytes, fmt: str | None) -> None:
    tab = parse_crontab(data, "fuzz", fmt)
    assert all(d.severity in ("error", "warning") for d in tab.diagnostics)
