"""Time without jobs: cron expressions and their dialects, IANA zones and DST, the clock, and how times and
durations are written and read."""
