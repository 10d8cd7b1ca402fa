"""All SQL lives under ``schedctl/store/``: outside it, only the loops that own a connection import SQLAlchemy.

An AST scan of the source, so an import hidden in a function body counts too; an import under
``if TYPE_CHECKING:`` (a ``Connection`` in an annotation) does not, since it never runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "schedctl"

# The loops that open, hold and hand out connections.
OWNERS = {"scheduler.py", "worker.py", "service.py", "cli/_store.py", "cli/_session.py"}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports_sqlalchemy(tree: ast.AST) -> list[int]:
    """Line numbers of every ``sqlalchemy`` import that runs (anywhere but under ``if TYPE_CHECKING:``)."""
    lines: list[int] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            if any(a.name == "sqlalchemy" or a.name.startswith("sqlalchemy.") for a in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "sqlalchemy" or node.module.startswith("sqlalchemy."):
                lines.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return lines


def importers(package: Path = PACKAGE) -> dict[str, list[int]]:
    """Module path (relative to the package, ``/``-separated) -> lines importing SQLAlchemy, outside store/."""
    out: dict[str, list[int]] = {}
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        if name.startswith("store/"):
            continue
        lines = _imports_sqlalchemy(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        if lines:
            out[name] = lines
    return out


def test_no_library_module_outside_the_store_imports_sqlalchemy() -> None:
    found = importers()
    offenders = {name: lines for name, lines in found.items() if name not in OWNERS}
    assert offenders == {}, f"SQL belongs in schedctl/store/; these import SQLAlchemy (lines): {offenders}"


def test_the_scan_sees_imports_in_function_bodies_but_not_type_checking_blocks(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "sql.py").write_text("import sqlalchemy\n")
    (tmp_path / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sqlalchemy.engine import Connection\n"
    )
    (tmp_path / "hidden.py").write_text("def f():\n    from sqlalchemy import text\n    return text\n")
    (tmp_path / "plain.py").write_text("import sqlalchemy.engine as e\n")
    (tmp_path / "lookalike.py").write_text("import sqlalchemy_utils\nfrom .sqlalchemy import x\n")
    assert importers(tmp_path) == {"hidden.py": [2], "plain.py": [1]}
