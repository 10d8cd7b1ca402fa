"""How every listing command prints: JSON or JSONL objects, or a table (rich on a terminal, aligned text in a
pipe), with instants in UTC to the second.

Data reaches rich only as ``text(value)`` and through ``console()`` (issue 24): a worker label ``team=[/red]``
or a run's output holding ``[link=...]`` is printed as it reads, never parsed as markup (which raised
MarkupError or made a hyperlink), never coloured by rich's highlighter, with control characters escaped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from schedctl.store import Store

T = TypeVar("T")


def listing(
    store: Store,
    fmt: str,
    items: Sequence[T],
    as_json: Callable[[T], dict[str, Any]],
    as_row: Callable[[T, bool], list[str]],
    columns: tuple[str, ...],
    wide_columns: tuple[str, ...],
) -> None:
    """``items`` in output format ``fmt``: one object each (``as_json``), or a table of ``as_row(item, wide)``
    under ``columns`` (plus ``wide_columns`` for ``-o wide``), after a line on stderr naming the database."""
    if fmt in ("json", "jsonl"):
        emit(fmt, [as_json(item) for item in items])
        return
    from schedctl.cli._store import say_database

    say_database(store)
    wide = fmt == "wide"
    table([as_row(item, wide) for item in items], columns + wide_columns if wide else columns)


def plain(value: object) -> str:
    """A data value as one printable line: control characters escaped (a command's escapes stay inert)."""
    from schedctl.text.printable import escape_controls

    return escape_controls(str(value))


def text(value: object) -> Text:
    """A data value for rich: ``plain(value)`` as a Text, which rich never parses as markup."""
    from rich.text import Text

    return Text(plain(value))


def console(*, stderr: bool = False, **options: Any) -> Console:
    """The Console every view prints with. Markup, emoji codes and highlighting are off, so a str that slips
    past ``text()`` still prints as it reads; rich leaves colour out when NO_COLOR is set."""
    from rich.console import Console

    return Console(stderr=stderr, markup=False, emoji=False, highlight=False, **options)


def table(rows: list[list[str]], header: tuple[str, ...]) -> None:
    """A rich table on a terminal; plain aligned columns otherwise, so pipes and scripts get stable text."""
    rows = [[plain(cell) for cell in row] for row in rows]
    if sys.stdout.isatty():
        from rich.table import Table

        tbl = Table(box=None, header_style="bold", pad_edge=False)
        for name in header:
            tbl.add_column(name, overflow="fold")
        for row in rows:
            tbl.add_row(*(text(cell) for cell in row))
        console().print(tbl)
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    for line in [list(header), *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def emit(output: str, items: list[dict[str, Any]]) -> None:
    if output == "jsonl":
        for item in items:
            click.echo(json.dumps(item, ensure_ascii=False))
    else:
        click.echo(json.dumps(items, indent=2, ensure_ascii=False))


def utc_text(at: datetime | None) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if at is not None else "-"
