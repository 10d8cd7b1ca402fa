"""Job ids from a crontab line (schedctl.crontab.ids): what a sysadmin would call the job.

The general command rules: tests/unit/test_crontab_convert.py; this file holds the order of the rules (comment,
program, run-parts folder, bare utility with its words) and the shell idioms Debian packages use.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedctl.crontab.ids import MAX_LENGTH, derive_id
from schedctl.jobs.configkeys import ID_PATTERN


@pytest.mark.parametrize(
    ("command", "comment", "expected"),
    [
        # 1. The short comment just above the line names the job...
        ("/usr/local/bin/backup-db --full", "Nightly dump.", "nightly-dump"),
        ("cd / && run-parts --report /etc/cron.daily", "Backup the main database", "backup-main-database"),
        ("/usr/sbin/ganeti-cleaner master", "Clean job archive (at 01:45 AM)", "clean-job-archive"),
        ("/x/report", "Résumé quotidien", "resume-quotidien"),
        # ...unless it only says when (or that) it runs, is long, several lines, code, or no Latin text.
        ("/etc/dirvish/dirvish-cronjob", "run every night", "dirvish-cronjob"),
        ("/bin/fetch", "every 15 minutes", "fetch"),
        ("/bin/backup-db", "Dump the main database before the nightly backup window.", "backup-db"),
        ("/bin/report", "Run the report generator.\nDaily.", "report"),
        ("/bin/report", "see /etc/report.conf", "report"),
        ("/bin/report", "MAILTO=ops", "report"),
        ("/bin/report", "日本語", "report"),
        # 2. Else the program it runs, past checks and wrappers, as today.
        ("/usr/local/bin/backup-db.sh", None, "backup-db"),
        ("nice -n 10 /usr/bin/foo", None, "foo"),
        ("cd /srv && ./run.sh", None, "run"),
        ("timeout 60 flock -n /tmp/l sudo -u bob env A=1 /opt/sync", None, "sync"),
        ("echo hi | /usr/local/bin/notify", None, "notify"),  # a program named after a utility wins
        # 3. Else the folder run-parts runs.
        ("run-parts /etc/cron.daily", None, "cron-daily"),
        (
            "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.weekly; }",
            None,
            "cron-weekly",
        ),
        ("run-parts --report", None, "run-parts"),
        # 4. A bare utility is never the id on its own: it takes the first meaningful words it is given...
        ("echo hi", None, "echo-hi"),
        ("echo there", None, "echo-there"),
        ("echo hi there you", None, "echo-hi-there"),
        ("cat /etc/motd | mail -s motd root", None, "cat-motd"),
        ('mail -s "On-call handover" oncall@example.com', None, "mail-on-call-handover"),
        ("sh -c 'echo hello world'", None, "echo-hello-world"),
        ("perl -e 'print 1'", None, "perl-print"),
        ("command ls /srv", None, "ls-srv"),
        ("echo hi 2>&1", None, "echo-hi"),  # a file descriptor is no word
        # ...else what it writes to, what the rest of the command gives it, or a path in an expansion...
        ("echo 3 > /proc/sys/vm/drop_caches", None, "echo-drop-caches"),
        ("date >> /tmp/cron-alive 2>&1", None, "date-cron-alive"),
        ("df -h | mail -s disk root", None, "df-disk-root"),
        ("kill -HUP $(cat /run/nginx.pid)", None, "kill-nginx"),
        # ...a wrapper or a check with nothing to run takes its words too...
        ("flock -n /tmp/sync.lock", None, "flock-sync"),
        ("test -f /tmp/flag", None, "test-flag"),
        ("[ -f /tmp/flag ]", None, "test-flag"),
        # ...and only a command that is nothing more than the utility is named by it alone.
        ("echo", None, "echo"),
        ("sh", None, "sh"),
        ("rm -rf $DIR", None, "rm"),
    ],
)
def test_the_id_is_what_a_sysadmin_would_call_the_job(
    command: str, comment: str | None, expected: str
) -> None:
    assert derive_id(command, comment) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # Debian packages' idioms: the id names what runs, not the check or the delay before it.
        ("command -v debian-sa1 > /dev/null && debian-sa1 1 1", "debian-sa1"),
        (
            "test -x /usr/bin/certbot -a \\! -d /run/systemd/system && perl -e 'sleep int(rand(43200))' && "
            "certbot -q renew",
            "certbot-renew",
        ),
        (
            "[ -x /usr/sbin/x ] && cd /srv && nice -n 10 ionice -c3 flock -w 5 /tmp/l timeout 60 /opt/reindex",
            "reindex",
        ),
    ],
)
def test_ids_skip_the_wrappers_debian_packages_use(command: str, expected: str) -> None:
    assert derive_id(command) == expected


_VALID = re.compile(ID_PATTERN + r"\Z")


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("ab/.-_ $()`'\"|&;<>=éx0 \t")), max_size=60),
    st.one_of(st.none(), st.text(max_size=40)),
)
def test_every_id_is_a_valid_job_id_and_the_same_every_time(command: str, comment: str | None) -> None:
    made = derive_id(command, comment)
    assert _VALID.match(made) and len(made) <= MAX_LENGTH, made
    assert derive_id(command, comment) == made
