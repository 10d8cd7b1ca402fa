"""Ids from the shell idioms Debian packages use (the general rules: tests/unit/test_crontab_convert.py)."""

from __future__ import annotations

import pytest

from schedctl.crontab.ids import derive_id


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
        ("command ls /srv", "ls"),
        ("perl -e 'print 1'", "perl"),
        (
            "[ -x /usr/sbin/x ] && cd /srv && nice -n 10 ionice -c3 flock -w 5 /tmp/l timeout 60 /opt/reindex",
            "reindex",
        ),
    ],
)
def test_ids_skip_the_wrappers_debian_packages_use(command: str, expected: str) -> None:
    assert derive_id(command) == expected
