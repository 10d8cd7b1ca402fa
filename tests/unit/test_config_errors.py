"""Every bad job file gives one-line ``FILE:LINE: jobs.<id>.<key>: message`` errors, one case per key.

Each case is a TOML document; the line marked ``#!`` is the line the first error must name.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schedctl.errors import ConfigError
from schedctl.jobs.config import loads_jobs

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
BASE = {
    "schedule": '"*/5 * * * *"',
    "timezone": '"UTC"',
    "catch_up": '"skip"',
    "command": '"true"',
}


def doc(*extra: str, drop: tuple[str, ...] = (), header: str = "[jobs.a]") -> str:
    lines = [header] + [f"{k} = {v}" for k, v in BASE.items() if k not in drop] + list(extra)
    return "\n".join(lines) + "\n"


CASES = [
    # (case id, document, expected path, fragment of the message)
    ("schedule-field", doc(drop=("schedule",)) + 'schedule = "61 * * * *" #!', "jobs.a.schedule", "minute"),
    ("schedule-type", doc(drop=("schedule",)) + "schedule = 5 #!", "jobs.a.schedule", "expected a string"),
    ("schedule-never", doc(drop=("schedule",)) + 'schedule = "0 0 30 2 *" #!', "jobs.a.schedule", "never"),
    ("schedule-dialect", doc(drop=("schedule",)) + 'schedule = "0 0 L * *" #!', "jobs.a.schedule", ""),
    ("schedule-missing", doc(drop=("schedule",), header="[jobs.a] #!"), "jobs.a.schedule", "missing"),
    (
        "timezone-typo",
        doc(drop=("timezone",)) + 'timezone = "Europe/Londn" #!',
        "jobs.a.timezone",
        "Europe/London",
    ),
    ("timezone-host", doc(drop=("timezone",)) + 'timezone = "localtime" #!', "jobs.a.timezone", ""),
    ("timezone-missing", doc(drop=("timezone",), header="[jobs.a] #!"), "jobs.a.timezone", "no default"),
    (
        "catch_up-case",
        doc(drop=("catch_up",)) + 'catch_up = "Skip" #!',
        "jobs.a.catch_up",
        "did you mean 'skip'",
    ),
    ("catch_up-missing", doc(drop=("catch_up",), header="[jobs.a] #!"), "jobs.a.catch_up", "no default"),
    ("command-empty", doc(drop=("command",)) + 'command = "  " #!', "jobs.a.command", "empty"),
    ("command-empty-argv", doc(drop=("command",)) + "command = [] #!", "jobs.a.command", "empty"),
    ("command-argv-item", doc(drop=("command",)) + 'command = ["ls", 5] #!', "jobs.a.command[1]", "string"),
    ("command-nul", doc(drop=("command",)) + 'command = "a\\u0000b" #!', "jobs.a.command", "NUL"),
    ("command-type", doc(drop=("command",)) + "command = { a = 1 } #!", "jobs.a.command", "argv"),
    ("command-missing", doc(drop=("command",), header="[jobs.a] #!"), "jobs.a.command", "missing"),
    (
        "max_catch_up-missing",
        doc(drop=("catch_up",)) + 'catch_up = "all"\n',
        "jobs.a.max_catch_up",
        "required",
    ),
    ("max_catch_up-with-skip", doc("max_catch_up = 5 #!"), "jobs.a.max_catch_up", '"skip"'),
    (
        "max_catch_up-bool",
        doc(drop=("catch_up",)) + 'catch_up = "all"\nmax_catch_up = true #!',
        "jobs.a.max_catch_up",
        "boolean",
    ),
    (
        "max_catch_up-zero",
        doc(drop=("catch_up",)) + 'catch_up = "all"\nmax_catch_up = 0 #!',
        "jobs.a.max_catch_up",
        "1 to 1000000",
    ),
    (
        "max_catch_up-big",
        doc(drop=("catch_up",)) + 'catch_up = "all"\nmax_catch_up = 1000001 #!',
        "jobs.a.max_catch_up",
        "1 to",
    ),
    ("concurrency", doc('concurrency = "forbidden" #!'), "jobs.a.concurrency", "did you mean 'forbid'"),
    (
        "starting_deadline",
        doc('starting_deadline = "soon" #!'),
        "jobs.a.starting_deadline",
        "invalid duration",
    ),
    (
        "starting_deadline-zero",
        doc('starting_deadline = "0s" #!'),
        "jobs.a.starting_deadline",
        "longer than 0s",
    ),
    ("timeout", doc("timeout = -5 #!"), "jobs.a.timeout", ">= 0"),
    ("timeout-huge", doc('timeout = "5000d" #!'), "jobs.a.timeout", "ten years"),
    ("retries-negative", doc("retries = -1 #!"), "jobs.a.retries", "0 to"),
    ("retries-bool", doc("retries = true #!"), "jobs.a.retries", "boolean"),
    ("retries-float", doc("retries = 1.5 #!"), "jobs.a.retries", "integer"),
    ("retry_backoff", doc('retry_backoff = "1x" #!'), "jobs.a.retry_backoff", "invalid duration"),
    ("grace_period", doc("grace_period = [] #!"), "jobs.a.grace_period", "duration"),
    ("env-name", doc('env = { "1X" = "a" } #!'), "jobs.a.env.1X", "names"),
    ("env-value", doc("env = { A = 1 } #!"), "jobs.a.env.A", "string"),
    ("env-type", doc('env = "A=1" #!'), "jobs.a.env", "table"),
    ("env-subtable", doc("[jobs.a.env]", 'OK = "1"', "BAD = 2 #!"), "jobs.a.env.BAD", "string"),
    ("pass_env-name", doc('pass_env = ["A B"] #!'), "jobs.a.pass_env[0]", "names"),
    ("pass_env-type", doc('pass_env = "TOKEN" #!'), "jobs.a.pass_env", "array"),
    ("pass_env-twice", doc('pass_env = ["A", "A"] #!'), "jobs.a.pass_env[1]", "twice"),
    (
        "pass_env-and-env",
        doc('env = { A = "1" }', 'pass_env = ["A"] #!'),
        "jobs.a.pass_env",
        "also set in env",
    ),
    ("stdin", doc("stdin = 5 #!"), "jobs.a.stdin", "string"),
    ("workdir", doc('workdir = "" #!'), "jobs.a.workdir", "empty"),
    ("user", doc('user = "bad user" #!'), "jobs.a.user", "user name"),
    ("source", doc("source = 1 #!"), "jobs.a.source", "string"),
    ("labels-value", doc('labels = { team = "a,b" } #!'), "jobs.a.labels.team", "invalid value"),
    ("labels-key", doc('labels = { "-x" = "a" } #!'), "jobs.a.labels.-x", "invalid name"),
    ("description", doc("description = 1 #!"), "jobs.a.description", "string"),
    ("paused", doc('paused = "yes" #!'), "jobs.a.paused", "true or false"),
    ("tags-type", doc('tags = "x" #!'), "jobs.a.tags", "array"),
    ("tags-item", doc('tags = ["x", 1] #!'), "jobs.a.tags[1]", "string"),
    ("jitter", doc('jitter = "1y" #!'), "jobs.a.jitter", "invalid duration"),
    ("dst-gap", doc('dst = { gap = "runn" } #!'), "jobs.a.dst.gap", "did you mean 'run'"),
    ("dst-overlap", doc('dst = { overlap = "Last" } #!'), "jobs.a.dst.overlap", "did you mean 'last'"),
    ("dst-key", doc('dst = { gaps = "run" } #!'), "jobs.a.dst.gaps", "did you mean 'gap'"),
    ("dst-type", doc('dst = "never" #!'), "jobs.a.dst", '"cron"'),
    ("on_failure", doc("on_failure = [] #!"), "jobs.a.on_failure", "empty"),
    ("on_success", doc("on_success = 5 #!"), "jobs.a.on_success", "string"),
    ("unknown-key", doc("scheduel = 1 #!"), "jobs.a.scheduel", "did you mean 'schedule'"),
    ("unknown-key-case", doc('Timezone = "UTC" #!'), "jobs.a.Timezone", "did you mean 'timezone'"),
    ("id", doc(header="[jobs.Backup_DB] #!"), "jobs.Backup_DB", 'try "backup_db"'),
    ("id-quoted", doc(header='[jobs."a b"] #!'), 'jobs."a b"', "invalid job id"),
    ("top-level-table", doc() + "[job.x] #!\n", "job", "did you mean 'jobs'"),
    ("top-level-key", 'schedule = "x" #!\n' + doc(), "schedule", "[jobs.<id>]"),
    ("jobs-not-table", "jobs = 1 #!\n", "jobs", "expected [jobs.<id>] tables"),
    ("array-of-tables", doc(header="[[jobs.a]] #!"), "jobs.a", "[[jobs.<id>]]"),
    ("job-not-table", "[jobs]\na = 5 #!\n", "jobs.a", "expected a table"),
    (
        "dotted-keys",
        'jobs.a.schedule = "* * * * *"\njobs.a.timezone = "Mars/Base" #!\njobs.a.catch_up = "skip"\njobs.a.command = "x"\n',
        "jobs.a.timezone",
        "",
    ),
    (
        "inline-table-job",
        '[jobs]\na = { schedule = "* * * * *", timezone = "UTC", catch_up = "sometimes", command = "x" } #!\n',
        "jobs.a.catch_up",
        "expected one of",
    ),
    (
        "quoted-id-with-dot",
        doc(header='[jobs."a.b"]') + 'retries = "x" #!',
        'jobs."a.b".retries',
        "integer",
    ),
    (
        "multi-line-string-is-skipped",
        doc('description = """', "[jobs.fake]", "retries = -1", '"""', "retries = -2 #!"),
        "jobs.a.retries",
        "",
    ),
    (
        "multi-line-literal-is-skipped",
        doc("description = '''", "retries = -1 ''''", "retries = -2 #!"),
        "jobs.a.retries",
        "",
    ),
    (
        "multi-line-array-element",
        doc("tags = [", '  "ok",', '  "",  #!', "]"),
        "jobs.a.tags[1]",
        "empty",
    ),
    (
        "second-job-after-comment",
        doc()
        + "# [jobs.b] in a comment\n[jobs.b]  # trailing\n"
        + "\n".join(f"{k} = {v}" for k, v in BASE.items())
        + "\nretries = -1 #!\n",
        "jobs.b.retries",
        "",
    ),
]


def _marked_line(text: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if "#!" in line)


@pytest.mark.parametrize(("text", "path", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_bad_key_gives_one_line_naming_file_line_and_key(text: str, path: str, fragment: str) -> None:
    if "#!" not in text:
        text = text.replace('catch_up = "all"', 'catch_up = "all" #!')
    with pytest.raises(ConfigError) as caught:
        loads_jobs(text, "jobs.toml", now=NOW)
    first = caught.value.diagnostics[0]
    rendered = str(first)
    assert rendered.startswith(f"jobs.toml:{_marked_line(text)}: {path}: "), rendered
    assert fragment in rendered
    assert "\n" not in rendered


SYNTAX_CASES = [
    ("unterminated-string", doc('description = "abc #!'), "invalid TOML"),
    ("missing-equals", doc("retries 3 #!"), "invalid TOML"),
    ("duplicate-table", doc() + doc(header="[jobs.a] #!"), "invalid TOML"),
    ("duplicate-key", doc('catch_up = "all" #!'), "catch_up is set twice"),
    ("duplicate-key-dotted", doc() + '[jobs]\na.command = "x" #!\n', "invalid TOML"),
]


@pytest.mark.parametrize(
    ("text", "fragment"), [c[1:] for c in SYNTAX_CASES], ids=[c[0] for c in SYNTAX_CASES]
)
def test_toml_syntax_errors_name_the_parsers_line(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        loads_jobs(text, "jobs.toml", now=NOW)
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.line == _marked_line(text), str(diagnostic)
    assert fragment in str(diagnostic)


def test_every_error_of_a_file_is_reported_at_once_and_nothing_is_loaded() -> None:
    text = (
        doc('timezone = "Nowhere/City"', drop=("timezone",))
        + "retries = -1\n"
        + doc(header="[jobs.b]")
        + 'paused = "no"\n'
    )
    with pytest.raises(ConfigError) as caught:
        loads_jobs(text, "jobs.toml", now=NOW)
    assert [str(d).split(": ")[1] for d in caught.value.diagnostics] == [
        "jobs.a.timezone",
        "jobs.a.retries",
        "jobs.b.paused",
    ]
    assert [d.line for d in caught.value.diagnostics] == [5, 6, 12]


def test_bytes_that_are_not_utf8_name_the_line_of_the_first_bad_byte() -> None:
    data = doc().encode() + b'description = "caf\xe9"\n'
    with pytest.raises(ConfigError) as caught:
        loads_jobs(data, "jobs.toml", now=NOW)
    assert str(caught.value) == "jobs.toml:6: not UTF-8 text: byte 0xe9 at column 19"


def test_a_raw_nul_byte_is_named_by_line() -> None:
    with pytest.raises(ConfigError) as caught:
        loads_jobs(doc().encode() + b"# \x00\n", "jobs.toml", now=NOW)
    assert str(caught.value).startswith("jobs.toml:6: a NUL character at column 3")


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    text = "x = " + "[" * 50_000 + "]" * 50_000 + "\n"
    with pytest.raises(ConfigError, match="nested too deeply"):
        loads_jobs(text, "jobs.toml", now=NOW)


def test_an_integer_python_cannot_convert_is_an_error() -> None:
    with pytest.raises(ConfigError, match="invalid TOML"):
        loads_jobs(doc("retries = " + "9" * 5000), "jobs.toml", now=NOW)


def test_a_utf8_bom_is_accepted() -> None:
    assert list(loads_jobs(b"\xef\xbb\xbf" + doc().encode(), "jobs.toml", now=NOW)) == ["a"]


def test_an_empty_document_holds_no_jobs() -> None:
    assert loads_jobs("", "jobs.toml", now=NOW) == {}
    assert loads_jobs("# nothing yet\n[jobs]\n", "jobs.toml", now=NOW) == {}
