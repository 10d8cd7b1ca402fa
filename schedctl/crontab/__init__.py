"""Crontabs in and out: parse a crontab in its cron's dialect, convert its lines into job definitions
(`schedctl import`), write them as TOML, and export jobs back to a crontab."""
