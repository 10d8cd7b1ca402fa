"""Is a name an account? For a system crontab's user column, read where the file is imported, not where it ran.

The host's own accounts count (``pwd``), and so do the system accounts Debian's base system and common
packages create: a /etc/cron.d file copied from a web server names ``www-data`` even on a host without it.
"""

from __future__ import annotations

import pwd

# Debian's base-passwd accounts and the ones common packages that ship cron.d files add (adduser --system).
COMMON_SYSTEM_ACCOUNTS = frozenset(
    {
        "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy",
        "www-data", "backup", "list", "irc", "gnats", "nobody", "systemd-network", "systemd-timesync",
        "messagebus", "syslog", "_apt", "postgres", "mysql", "redis", "munin", "amavis", "clamav", "cacti",
        "nagios", "zabbix", "smmsp", "postfix", "Debian-exim", "ntpsec", "_chrony", "bind", "squid", "apache",
        "nginx", "sysstat", "mailman", "mailman3", "sympa", "tomcat", "jenkins", "git", "gitlab-www", "uwsgi",
        "nut", "snmp", "Debian-snmp", "prometheus", "elasticsearch", "mongodb", "rabbitmq", "memcache",
    }
)  # fmt: skip


# Accounts that are also everyday commands (`mail -s ...`, `sync`, `git pull`): as a sixth field they say nothing.
ALSO_COMMANDS = frozenset(
    {
        "mail", "sync", "man", "lp", "list", "news", "backup", "games", "git", "nginx", "apache", "redis",
        "mysql", "postgres", "bin", "sys", "proxy", "postfix", "jenkins", "squid", "zabbix", "munin", "nut",
        "snmp", "bind", "irc", "sympa", "uwsgi", "tomcat", "mailman", "prometheus", "mongodb", "rabbitmq",
    }
)  # fmt: skip


def is_known_account(name: str) -> bool:
    if name in COMMON_SYSTEM_ACCOUNTS:
        return True
    try:
        pwd.getpwnam(name)
    except (KeyError, ValueError, OSError):
        return False
    return True


def exists_here(name: str) -> bool:
    """Only this host's accounts (what Debian's cron checks with getpwnam before running a line)."""
    try:
        pwd.getpwnam(name)
    except (KeyError, ValueError, OSError):
        return False
    return True
