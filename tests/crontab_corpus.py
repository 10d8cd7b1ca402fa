"""The crontab corpus the format tests read: Debian's packaged cron.d files, the examples, user crontabs.

Both the library's tests (``tests/unit/test_crontab_format.py``) and the CLI's (``tests/cli/test_import_format.py``)
import this as ``crontab_corpus`` (``pythonpath = ["tests"]`` in pyproject's pytest options).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = REPO / "tests" / "data" / "crontab" / "debian-packages"
EXAMPLES = REPO / "examples" / "crontabs"

# file in debian-packages -> (the package it comes from, its version in Debian 12, the user column's names).
# apticron, debsecan and popularity-contest write their file from a maintainer script (postinst or a helper
# it runs) with a random minute: the text is the script's, the minute is fixed here. sogo ships its jobs
# commented out ("sogo" below is the file as shipped); sogo-uncommented is it with the five jobs enabled, as
# its comments tell the admin to. xfsprogs ships xfs_scrub_all.cron for the admin to install into cron.d.
DEBIAN_FILES: dict[str, tuple[str, str, set[str]]] = {
    "amavisd-new": ("amavisd-new", "1:2.13.0-3+deb12u1", {"amavis"}),
    "anacron": ("anacron", "2.3-36", {"root"}),
    "apt-cacher": ("apt-cacher", "1.7.29", {"root"}),
    "apticron": ("apticron", "1.2.5+nmu1", {"root"}),
    "atop": ("atop", "2.8.1-1+deb12u1", {"root"}),
    "awstats": ("awstats", "7.8-3+deb12u2", {"www-data"}),
    "backupninja": ("backupninja", "1.2.2-1", {"root"}),
    "barman": ("barman", "3.4.0-1", {"barman"}),
    "cacti": ("cacti", "1.2.24+ds1-1+deb12u5", {"www-data"}),
    "certbot": ("certbot", "2.1.0-4", {"root"}),
    "clamav-unofficial-sigs": ("clamav-unofficial-sigs", "3.7.2-2.1", {"clamav"}),
    "cron-apt": ("cron-apt", "0.13.0.1", {"root"}),
    "debsecan": ("debsecan", "0.4.20.1", {"daemon"}),
    "dirvish": ("dirvish", "1.2.1-2.1", {"root"}),
    "dma": ("dma", "0.13-1+b1", {"root"}),
    "e2scrub_all": ("e2fsprogs", "1.47.0-2+b2", {"root"}),
    "ganeti": ("ganeti", "3.0.2-3", {"root", "gnt-masterd"}),
    "greylistclean": ("sa-exim", "4.2.1-20+b1", {"Debian-exim"}),
    "inn2": ("inn2", "2.7.1-1+deb12u1", {"news"}),
    "leafnode": ("leafnode", "1.12.0-2", {"news"}),
    "lightsquid": ("lightsquid", "1.8-7", {"root"}),
    "logcheck": ("logcheck", "1.4.2+deb12u1", {"logcheck"}),
    "mailman3": ("mailman3", "3.3.8-2~deb12u2", {"list"}),
    "mailman3-web": ("mailman3-web", "0+20200530-2.1", {"www-data"}),
    "mdadm": ("mdadm", "4.2-5", {"root"}),
    "mlmmj": ("mlmmj", "1.3.0-4", {"root"}),
    "munin": ("munin", "2.0.73-1", {"munin", "www-data"}),
    "munin-node": ("munin-node", "2.0.73-1", {"root"}),
    "ntpsec": ("ntpsec", "1.2.2+dfsg1-1+deb12u1", {"root"}),
    "php": ("php-common", "2:93", {"root"}),
    "popularity-contest": ("popularity-contest", "1.76", {"root"}),
    "roundcube-core": ("roundcube-core", "1.6.5+dfsg-1+deb12u14", {"www-data"}),
    "sogo-uncommented": ("sogo", "5.8.0-2+deb12u4", {"sogo"}),
    "sysstat": ("sysstat", "12.6.1-1", {"root"}),
    "tiger": ("tiger", "1:3.2.4~rc1-3.2", {"root"}),
    "uucp": ("uucp", "1.07-27+b2", {"uucp"}),
    "xfs_scrub_all": ("xfsprogs", "6.1.0-1", {"root"}),
}
# Shipped with every job commented out: nothing to import, whatever the format.
COMMENTED_OUT = {"apt-mirror": "0.5.4-2", "rsnapshot": "1.4.5-1", "sogo": "5.8.0-2+deb12u4"}
EXAMPLE_FILES = {
    "etc/crontab": {"root"},
    "etc/cron.d/billing": {"billing"},
    "etc/cron.d/ops": {"postgres", "root"},
    "debian/cron.d/sysupkeep": {"root"},
    "debian/cron.d/webstats": {"www-data"},
}


# A word in the sixth field of a user crontab is the command, even when an account has that name.
USER_CRONTABS = {
    "echo, then a quoted word": '30 7 * * 1-5 echo "standup" | mail -s standup team@example.com\n',
    "echo test": "0 9 * * * echo test >> /tmp/cron-alive\n",
    "php, then a script": "*/5 * * * * php /var/www/app/artisan schedule:run >> /dev/null 2>&1\n",
    "php, then a word": "* * * * * php artisan schedule:run\n",
    "python3, then a script": "0 1 * * * python3 /home/alice/bin/report.py\n",
    "nice, then a program": "0 1 * * * nice /usr/local/bin/heavy-report\n",
    "backup, then folders": "0 2 * * * backup /home/alice/docs /mnt/usb\n",
    "backup, then an option": "0 2 * * * backup --incremental /home/alice\n",
    "backup alone": "0 3 * * 0 backup\n",
    "backup, then a redirect": "0 2 * * * backup > /tmp/backup.log 2>&1\n",
    "backup, then &&": "0 2 * * * backup && echo done\n",
    "backup test": "0 2 * * * backup test\n",
    "backup, then a URL": "0 2 * * * backup s3://alice-backups/docs\n",
    "backup, and a line that has no user column": (
        "0 2 * * * backup /home/alice\n30 2 * * * /usr/bin/rsync -a /home/alice /mnt/usb\n"
    ),
    "mail, then an address": "0 1 * * * mail alice@example.com < /home/alice/report.txt\n",
    "list, then a folder": "0 1 * * * list /srv/music\n",
    "sync alone": "@daily sync\n",
    "CERN's root, then options": "0 1 * * * root -b -q /home/alice/analysis.C\n",
    "a variable before the command": "0 1 * * * LANG=C sort -o /tmp/words /tmp/words\n",
    "cd first": "0 1 * * * cd /home/alice && ./run.sh\n",
    "an unknown word, then a data folder": "0 1 * * * sync-photos /mnt/photos\n",
    "a script on the PATH, then a program path": "0 1 * * * deploy /usr/local/bin/app\n",
}
