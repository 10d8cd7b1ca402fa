"""Entries -> Jobs: readable stable ids, an explicit zone and policy for every job, nothing guessed."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedctl.crontab.convert import ImportOptions, assign_ids, check_options, convert
from schedctl.crontab.diagnostics import render
from schedctl.crontab.ids import dedupe, derive_id
from schedctl.crontab.parse import SYSTEM, USER, parse_crontab
from schedctl.errors import UsageError
from schedctl.jobs.job import CatchUp

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("command", "wanted"),
    [
        ("/usr/local/bin/backup-db --full", "backup-db"),
        ("cd / && run-parts --report /etc/cron.hourly", "cron-hourly"),
        ("test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }", "cron-daily"),
        ("php /var/www/app/artisan schedule:run >> /dev/null 2>&1", "artisan-schedule-run"),
        ("/usr/bin/python3 /opt/reports/weekly.py --send", "weekly"),
        ("flock -n /tmp/sync.lock /usr/local/bin/sync-files", "sync-files"),
        ("sleep $((RANDOM % 60)); curl -fsS https://hc-ping.com/0d3f", "curl-hc-ping-com"),
        ("PGPASSWORD=x nice -n 19 pg_dump -Fc app > /backups/app.dump", "pg-dump"),
        ("docker system prune -af", "docker-system"),
        ("find /home/alice/Downloads -type f -mtime +30 -delete", "find-downloads"),
        ("sh -c 'exec /usr/local/bin/rotate-uploads'", "rotate-uploads"),
        ("/usr/sbin/logrotate /etc/logrotate.conf", "logrotate"),
        ('"unbalanced quote', "unbalanced"),
    ],
)
def test_ids_are_readable_and_derived_from_the_command(command: str, wanted: str) -> None:
    assert derive_id(command) == wanted


def test_ids_are_deduplicated_in_order() -> None:
    assert dedupe(["backup", "report", "backup", "backup"]) == ["backup", "report", "backup-2", "backup-3"]
    assert dedupe(["backup"], taken=["backup", "backup-2"]) == ["backup-3"]


def entries(text: str, fmt: str = USER, file: str = "tab"):
    tab = parse_crontab(text, file, fmt)
    assert not tab.diagnostics, [render(d) for d in tab.diagnostics]
    return tab.entries


def test_the_same_crontab_gives_the_same_ids() -> None:
    text = "0 1 * * * /bin/backup a\n0 2 * * * /bin/backup b\n0 3 * * * /bin/report\n"
    assert assign_ids(entries(text)) == assign_ids(entries(text)) == ["backup", "backup-2", "report"]


def test_an_id_hint_is_honoured() -> None:
    assert assign_ids(
        entries("# schedctl: id=nightly-db\n0 1 * * * /bin/backup\n0 2 * * * /bin/backup\n")
    ) == ["nightly-db", "backup"]


def test_a_job_in_the_merge_target_keeps_its_id_and_a_different_one_gets_a_new_id() -> None:
    first = convert(entries("0 1 * * * /bin/backup\n"), ImportOptions("UTC", "skip"), NOW).jobs
    taken = {j.id: j for j in first}
    again = entries("0 1 * * * /bin/backup\n0 5 * * * /bin/backup --other-host\n")
    assert assign_ids(again, taken) == ["backup", "backup-2"]


def test_a_merge_target_keeps_the_ids_an_older_importer_gave() -> None:
    # Imported before ids came from comments and run-parts folders: merging the same lines again must find
    # these jobs under their ids, not add each a second time under its new name.
    text = (
        "# Nightly dump.\n0 1 * * * /bin/backup\n17 * * * * cd / && run-parts --report /etc/cron.hourly\n"
        "0 2 * * * /bin/other\n"
    )
    old = convert(entries(text), ImportOptions("UTC", "skip"), NOW).jobs
    old_ids = ["backup", "run-parts-etc-cron-hourly", "x"]
    renamed = [dataclasses.replace(j, id=i) for j, i in zip(old, old_ids, strict=True)]
    taken = {j.id: j for j in renamed}
    assert assign_ids(entries(text), taken) == ["backup", "run-parts-etc-cron-hourly", "x"]
    assert assign_ids(entries(text + "0 3 * * * /bin/backup\n"), taken)[3] == "backup-2"


def test_jobs_get_everything_cron_gave_them() -> None:
    text = (
        "SHELL=/bin/bash\nMAILTO=ops@example.com\nCRON_TZ=Europe/London\nRANDOM_DELAY=5\n"
        "# Nightly dump.\n30 2 * * * postgres /usr/local/bin/backup-db%yes%\n"
    )
    result = convert(
        entries(text, SYSTEM, "etc/cron.d/db"), ImportOptions(catch_up="all", max_catch_up=3), NOW
    )
    (job,) = result.jobs
    assert (job.id, job.schedule, job.timezone, job.catch_up, job.max_catch_up) == (
        "nightly-dump",  # the comment names it (schedctl.crontab.ids)
        "30 2 * * *",
        "Europe/London",
        CatchUp.ALL,
        3,
    )
    assert (job.command, job.stdin, job.user, job.jitter) == (
        "/usr/local/bin/backup-db",
        "yes\n",
        "postgres",
        300.0,
    )
    assert (dict(job.env), job.mailto) == ({"SHELL": "/bin/bash"}, ("ops@example.com",))
    assert (job.source, job.description) == ("etc/cron.d/db:6", "Nightly dump.")


def test_cron_tz_wins_over_the_timezone_flag() -> None:
    text = "0 1 * * * a\nCRON_TZ=Asia/Tokyo\n0 2 * * * b\n"
    jobs = convert(entries(text), ImportOptions("Europe/Berlin", "latest"), NOW).jobs
    assert [(j.id, j.timezone) for j in jobs] == [("a", "Europe/Berlin"), ("b", "Asia/Tokyo")]


def test_missing_zone_names_the_jobs_and_the_flag() -> None:
    text = "0 1 * * * /bin/a\nCRON_TZ=Asia/Tokyo\n0 2 * * * /bin/b\n"
    result = convert(entries(text, file="my.cron"), ImportOptions(catch_up="skip"), NOW)
    assert result.jobs == []
    assert result.missing == [
        "no timezone for job a (my.cron:1) (no CRON_TZ above them): pass --timezone ZONE, e.g. "
        "--timezone Europe/London (the host's zone is never used)"
    ]


def test_missing_policy_names_the_flag() -> None:
    result = convert(entries("CRON_TZ=UTC\n0 1 * * * /bin/a\n"), ImportOptions(), NOW)
    assert result.jobs == [] and result.missing == [
        "no catch-up policy for job a (tab:2): pass --catch-up skip|latest|all (all needs --max-catch-up N); "
        "change single jobs in the TOML after"
    ]
    result = convert(entries("CRON_TZ=UTC\n0 1 * * * /bin/a\n"), ImportOptions(catch_up="all"), NOW)
    assert result.missing == [
        "--catch-up all needs --max-catch-up N for job a (tab:2): the most missed ticks to run after downtime "
        "before refusing"
    ]


def test_no_zone_is_needed_when_cron_tz_covers_every_job() -> None:
    result = convert(entries("CRON_TZ=UTC\n0 1 * * * /bin/a\n"), ImportOptions(catch_up="skip"), NOW)
    assert result.missing == [] and [j.timezone for j in result.jobs] == ["UTC"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ImportOptions("Europe/Londn", "skip"),
            "--timezone: unknown zone 'Europe/Londn' (did you mean 'Europe/London'?)",
        ),
        (ImportOptions("localtime", "skip"), "--timezone: 'localtime' stands for the host's zone"),
        (ImportOptions("UTC", "skip", 5), "--max-catch-up only means something with --catch-up all"),
        (ImportOptions("UTC", "all", 0), "--max-catch-up must be from 1 to 1000000"),
    ],
)
def test_contradictory_or_wrong_flags_are_usage_errors(options: ImportOptions, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        check_options(options)
    assert str(caught.value).startswith(message)


def test_host_maintenance_is_imported_with_a_warning() -> None:
    text = "25 6 * * * root test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }\n"
    result = convert(entries(text, SYSTEM), ImportOptions("UTC", "skip"), NOW)
    assert [j.id for j in result.jobs] == ["cron-daily"]
    assert [render(d) for d in result.diagnostics] == [
        "tab:1: warning: host upkeep (run-parts /etc/cron.daily, behind an anacron guard: runs this host's own "
        "/etc/cron.daily scripts): imported, but it would run on a worker, not on this host; delete it from the "
        "TOML if it must stay with the host"
    ]


@pytest.mark.parametrize(
    ("command", "why"),
    [
        (
            "test -x /usr/bin/certbot -a \\! -d /run/systemd/system && perl -e 'sleep int(rand(43200))' && certbot -q renew",
            "certbot renew",
        ),
        (
            "if [ -x /usr/share/mdadm/checkarray ] && [ $(date +%d) -le 7 ]; then /usr/share/mdadm/checkarray --cron --all; fi",
            "mdadm checkarray",
        ),
        (
            "test -e /run/systemd/system || SERVICE_MODE=1 /usr/lib/x86_64-linux-gnu/e2fsprogs/e2scrub_all_cron",
            "e2scrub",
        ),
        ("command -v debian-sa1 > /dev/null && debian-sa1 1 1", "sysstat"),
        ("if [ -x /usr/share/atop/atop.daily ]; then /usr/share/atop/atop.daily & fi", "atop"),
        ("[ -x /usr/lib/ntpsec/rotate-stats ] && /usr/lib/ntpsec/rotate-stats", "ntpsec"),
        ("test -x /usr/sbin/apticron && /usr/sbin/apticron --cron", "apt"),
        ("[ -d /run/systemd/system ] || /usr/local/bin/cleanup", "a systemd guard"),
        (
            "test -x /usr/share/awstats/tools/update.sh && /usr/share/awstats/tools/update.sh",
            "guarded by `test -x`",
        ),
    ],
)
def test_host_upkeep_idioms_say_why(command: str, why: str) -> None:
    from schedctl.crontab.upkeep import host_upkeep

    assert (host_upkeep(command) or "").startswith(why)
    assert host_upkeep("/usr/local/bin/backup-db --full") is None


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.text(alphabet=st.sampled_from(list("0*/5 ,-@%\\=#'\"abcdefhilmnoprstuwy\t")), max_size=40),
        max_size=5,
    )
)
def test_the_whole_import_never_raises_on_crontab_like_text(lines: list[str]) -> None:
    tab = parse_crontab("\n".join(lines) + "\n", "fuzz", None)
    result = convert(tab.entries, ImportOptions("UTC", "skip"), NOW)
    assert len(result.jobs) + len([d for d in result.diagnostics if d.severity == "error"]) >= len(
        tab.entries
    )
