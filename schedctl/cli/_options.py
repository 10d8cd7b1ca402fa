"""Options shared by many commands, so every command spells them the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_JOBS = "schedctl.toml"
DEFAULT_DB = "sqlite:///schedctl.db"


def jobs_option(f: F) -> F:
    return click.option(
        "--jobs",
        "jobs_path",
        envvar="SCHEDCTL_JOBS",
        default=DEFAULT_JOBS,
        show_default=True,
        show_envvar=True,
        type=click.Path(dir_okay=True, file_okay=True),
        help="Job file, or a folder of *.toml job files.",
    )(f)


def db_option(f: F) -> F:
    return click.option(
        "--db",
        "db_url",
        envvar="SCHEDCTL_DATABASE_URL",
        default=DEFAULT_DB,
        show_default=True,
        show_envvar=True,
        help="SQLAlchemy database URL.",
    )(f)


def output_option(f: F) -> F:
    """``-o table|wide|json|jsonl`` with ``--json`` as shorthand; the command receives ``output``."""
    f = click.option(
        "-o",
        "--output",
        type=click.Choice(["table", "wide", "json", "jsonl"]),
        default="table",
        show_default=True,
        help="Output format.",
    )(f)
    f = click.option("--json", "as_json", is_flag=True, help="Shorthand for -o json.")(f)
    return f


def resolve_output(output: str, as_json: bool) -> str:
    return "json" if as_json else output
