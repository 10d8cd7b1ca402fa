"""Is a name an account? For a system crontab's user column, read where the file is imported, not where it ran.

The host's own accounts count (``pwd``), and so do the standard system accounts of Debian and Fedora and the
ones common packages create: a /etc/cron.d file copied from a web server names ``www-data`` even on a host
without it. Names on none of these lists may still be accounts (a package creates its own at install time);
``schedctl.crontab.detect`` then looks at what follows the name instead.
"""

from __future__ import annotations

import pwd

# Debian's base-passwd (3.6.1, Debian 12): its passwd.master, which every Debian system starts from. gnats
# was in it until 3.6.0 and stays on upgraded hosts.
DEBIAN_BASE_PASSWD = frozenset(
    {
        "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy",
        "www-data", "backup", "list", "irc", "gnats", "_apt", "nobody",
    }
)  # fmt: skip
# Fedora's setup package: its /etc/passwd (root ... nobody); news, uucp and gopher were in it before Fedora
# moved them to the packages that use them.
FEDORA_SETUP = frozenset(
    {
        "root", "bin", "daemon", "adm", "lp", "sync", "shutdown", "halt", "mail", "operator", "games", "ftp",
        "nobody", "news", "uucp", "gopher",
    }
)  # fmt: skip
STANDARD_ACCOUNTS = DEBIAN_BASE_PASSWD | FEDORA_SETUP

# Accounts systemd and common packages create (adduser --system, sysusers.d), on Debian, Ubuntu and Fedora.
PACKAGE_ACCOUNTS = frozenset(
    {
        "systemd-network", "systemd-timesync", "systemd-resolve", "messagebus", "dbus", "syslog", "sshd",
        "postgres", "mysql", "redis", "munin", "amavis", "clamav", "cacti", "nagios", "zabbix", "smmsp",
        "postfix", "Debian-exim", "ntpsec", "_chrony", "chrony", "ntp", "bind", "named", "squid", "apache",
        "nginx", "sysstat", "mailman", "mailman3", "sympa", "tomcat", "jenkins", "git", "gitlab-www", "uwsgi",
        "nut", "snmp", "Debian-snmp", "prometheus", "elasticsearch", "mongodb", "rabbitmq", "memcache",
    }
)  # fmt: skip

# Accounts that are also everyday commands (`mail -s ...`, `sync`, `backup /home`, `uucp file host!path`):
# the name alone says nothing; what follows it must read as a command of its own.
ALSO_COMMANDS = frozenset(
    {
        "mail", "sync", "man", "lp", "list", "news", "backup", "games", "git", "nginx", "apache", "redis",
        "mysql", "postgres", "bin", "sys", "proxy", "postfix", "jenkins", "squid", "zabbix", "munin", "nut",
        "snmp", "bind", "irc", "sympa", "uwsgi", "tomcat", "mailman", "prometheus", "mongodb", "rabbitmq",
        "uucp", "daemon", "ftp", "halt", "shutdown", "gopher", "named", "nagios",
    }
)  # fmt: skip

# Programs a user crontab's line often starts with, that no system names an account after: such a sixth
# field is the command. Wrappers (nice, flock, chronic, xvfb-run ...) matter most: a program path follows
# them just as one follows a user column.
COMMANDS = frozenset(
    {
        "echo", "printf", "php", "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "java",
        "sh", "bash", "dash", "zsh", "ksh", "csh", "tcsh", "fish", "env", "nice", "ionice", "nohup", "time",
        "timeout", "chronic", "cronic", "flock", "lckdo", "setlock", "run-one", "sudo", "su", "xvfb-run",
        "systemd-cat", "systemd-run", "logger", "sleep", "curl", "wget", "rsync", "scp", "ssh", "tar",
        "gzip", "find", "cp", "mv", "rm", "ln", "mkdir", "touch", "cat", "date", "ls", "du", "make", "docker",
        "podman", "kubectl", "systemctl", "service", "kill", "pkill", "killall", "true", "false", "cd",
        "test", "exec", "eval", "source", "run-parts", "crontab", "mysqldump", "pg_dump", "pg_dumpall",
        "psql", "vacuumdb", "wp", "drush", "composer", "npm", "npx", "yarn", "pip", "pip3", "xargs", "if",
        "for", "while", "until", "case", "then", "do", "command", "builtin", "exit", "export",
    }
)  # fmt: skip


def is_listed_account(name: str) -> bool:
    """On a standard or package account list: true on every host alike."""
    return name in STANDARD_ACCOUNTS or name in PACKAGE_ACCOUNTS


def is_known_account(name: str) -> bool:
    return is_listed_account(name) or exists_here(name)


def exists_here(name: str) -> bool:
    """Only this host's accounts (what Debian's cron checks with getpwnam before running a line)."""
    try:
        pwd.getpwnam(name)
    except (KeyError, ValueError, OSError):
        return False
    return True
