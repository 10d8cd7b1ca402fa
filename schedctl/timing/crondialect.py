"""Which cron a crontab was written for: Debian's (Vixie cron 3.0 with Debian's patches) or cronie.

Most servers run Debian or Ubuntu; Fedora, RHEL, SUSE and Arch run cronie. The two read a crontab differently
in a few places (see ``schedctl.crontab.parse`` and ``schedctl.timing.cronexpr``), and a migration must read each file
the way the cron that ran it did. ``auto`` picks ``debian`` when the host's ``/etc/os-release`` names Debian in
``ID`` or ``ID_LIKE`` (Debian, Ubuntu, Mint, Raspberry Pi OS, ...), else ``cronie``.

A job file's ``schedule`` is always read as cronie reads it: one reading of cron syntax for TOML, documented.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# Said the same way by `import --help`, the import's warning (with --timezone) and its refusal (without).
DEBIAN_CRON_TZ = "Debian's cron ignores CRON_TZ and runs every job in the host's zone"
CRONIE_CRON_TZ = "--dialect cronie if the file came from a cron that honours CRON_TZ"

DEBIAN = "debian"
CRONIE = "cronie"
AUTO = "auto"
DIALECTS = (DEBIAN, CRONIE)
OS_RELEASE = "/etc/os-release"
OS_RELEASE_ENV = (
    "SCHEDCTL_OS_RELEASE"  # another os-release file to detect from (tests; an image built elsewhere)
)

# Debian cron(8), "/etc/cron.d": file names "must consist solely of upper- and lower-case letters, digits,
# underscores, and hyphens" (run-parts' rule; files with dots, such as .dpkg-dist leftovers, are never read).
_DEBIAN_NAME = re.compile(r"[A-Za-z0-9_-]+\Z")
# cronie (database.c, not_a_crontab): hidden files, editor backups and package-manager leftovers are skipped.
_CRONIE_SKIPPED = re.compile(
    r"^\.|~\Z|^#|\.(rpmsave|rpmorig|rpmnew|dpkg-old|dpkg-dist|dpkg-new|dpkg-tmp|swp|bak)\Z"
)
# Documentation shipped next to crontabs: cronie would read it and log every line as an error, running nothing;
# importing it would only abort the import, so it is skipped and named.
_DOCUMENTATION = re.compile(r"(?i)^(readme|changelog|license|copying)([._-].*)?\Z|\.(md|txt|rst|html)\Z")


def detect(os_release: str | Path | None = None) -> tuple[str, str]:
    """(dialect, why) for this host, from ``os_release`` (a path; default $SCHEDCTL_OS_RELEASE or
    /etc/os-release)."""
    os_release = os_release or os.environ.get(OS_RELEASE_ENV) or OS_RELEASE
    try:
        text = Path(os_release).read_text(encoding="utf-8", errors="replace")[:65536]
    except OSError:
        return CRONIE, f"{os_release} unreadable"
    values: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep:
            values[name.strip()] = value.strip().strip("'\"")
    words = f"{values.get('ID', '')} {values.get('ID_LIKE', '')}".lower().split()
    if DEBIAN in words:
        return DEBIAN, f"{os_release}: ID={values.get('ID', '')}"
    return CRONIE, f"{os_release}: ID={values.get('ID', '') or '?'}"


def resolve(choice: str | None, os_release: str | Path | None = None) -> tuple[str, str]:
    """(dialect, why): ``choice`` when it names one, else the host's."""
    if choice in DIALECTS:
        return str(choice), "--dialect"
    return detect(os_release)


def skipped_name(name: str, dialect: str) -> str | None:
    """Why cron (in ``dialect``) does not read a file of this name in a crontab folder; None when it does."""
    if _DOCUMENTATION.search(name):
        return "documentation, not a crontab"
    if dialect == DEBIAN:
        if not _DEBIAN_NAME.match(name):
            return "Debian's cron reads only names made of letters, digits, '_' and '-'"
        return None
    if _CRONIE_SKIPPED.search(name):
        return "cronie skips hidden files, editor backups and package leftovers"
    return None
