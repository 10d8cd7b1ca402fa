"""Jobs that look after the host they are on: on schedctl they would run on whichever worker claims them.

Found in the cron files Debian 12 packages ship (/etc/crontab, anacron, atop, certbot, e2fsprogs, mdadm, ntpsec,
php-common, sysstat, ...). Each idiom says in one line why the job belongs to its host. The first match wins,
most specific first; the guards (`test -x`, the systemd check) come last, as they only hint at a package.
"""

from __future__ import annotations

import re

_RUN_PARTS = re.compile(r"\brun-parts\b(?:\s+--?[\w-]+)*\s+(/\S+)")
_IDIOMS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), why)
    for pattern, why in (
        (r"\bcertbot\b.*\brenew\b", "certbot renew: renews the certificates this host serves"),
        (r"\bcheckarray\b|\bmdadm\b", "mdadm checkarray: checks this host's RAID arrays"),
        (r"\be2scrub\w*", "e2scrub: checks this host's ext4 file systems"),
        (r"\b(debian-sa1|sa1|sa2)\b", "sysstat: records this host's activity statistics"),
        (r"\batop\w*\b", "atop: records this host's processes and load"),
        (r"\b(ntpsec\w*|ntpdate|ntp-\w+)\b", "ntpsec: looks after this host's clock and its NTP statistics"),
        (
            r"\b(apt-get|apt|apticron|debsecan|unattended-upgrades?)\b",
            "apt: updates or audits this host's packages",
        ),
        (r"\bsessionclean\b", "php sessionclean: removes this host's expired PHP sessions"),
        (r"\blogrotate\b", "logrotate: rotates this host's logs"),
        (r"\banacron\b", "anacron: runs this host's periodic scripts"),
        (
            r"\b(popularity-contest|updatedb|mandb|man-db|fstrim)\b",
            "upkeep of this host's own files and disks",
        ),
        (
            r"-d /run/systemd/system\b",
            "a systemd guard: on a systemd host this does nothing (a systemd timer does the work), but a worker "
            "without systemd would run it",
        ),
        (
            r"(?:\btest|\[)\s+-x\s+(/\S+)",
            "guarded by `test -x`: it runs only where that package is installed",
        ),
    )
)


def host_upkeep(command: str) -> str | None:
    """Why ``command`` looks after its own host, in one line; None when nothing says so."""
    run_parts = _RUN_PARTS.search(command)
    if run_parts:
        folder = run_parts.group(1).rstrip(";)")
        guard = ", behind an anacron guard" if "anacron" in command else ""
        return f"run-parts {folder}{guard}: runs this host's own {folder} scripts"
    for pattern, why in _IDIOMS:
        if pattern.search(command):
            return why
    return None
