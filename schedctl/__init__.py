"""schedctl: move a crontab onto several machines without a tick firing twice."""

__version__ = "0.1.0"
