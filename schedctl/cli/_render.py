"""How every listing command prints: JSON or JSONL objects, or a table (rich on a terminal, aligned text in a
pipe), with instants in UTC to the second."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
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


def table(rows: list[list[str]], header: tuple[str, ...]) -> None:
    """A rich table on a terminal; plain aligned columns otherwise, so pipes and scripts get stable text."""
    from schedctl.printable import escape_controls

    rows = [[escape_controls(cell) for cell in row] for row in rows]  # a command's escapes stay inert
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        tbl = Table(box=None, header_style="bold", pad_edge=False)
        for name in header:
            tbl.add_column(name, overflow="fold")
        for row in rows:
            tbl.add_row(*(Text(cell) for cell in row))  # Text: brackets in a reason are not markup
        Console().print(tbl)  # rich leaves colour out when NO_COLOR is set
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
