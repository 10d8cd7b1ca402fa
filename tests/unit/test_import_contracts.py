"""The import contracts in pyproject.toml (`lint-imports`) cover every module, so a new one cannot slip past.

The layers contract names packages, so a module added at the top of ``schedctl/`` would sit outside every layer;
the SQL contract names the modules that may not import SQLAlchemy, so a new one must be named there, or be in
``store/``, or be one of the loops that own a connection.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "schedctl"

# The loops that open, hold and hand out connections: the only modules outside store/ that import SQLAlchemy.
LOOPS = {
    "schedctl.leader.scheduler",
    "schedctl.worker.loop",
    "schedctl.service",
    "schedctl.cli._store",
    "schedctl.cli._session",
}
# The package's own entry points: above every layer, imported by nothing.
ENTRY = {"schedctl", "schedctl.__main__", "schedctl.cli"}
# Packages holding a loop: the contract cannot name them without naming the loop too, so they import nothing.
HOLDERS = {"schedctl.leader", "schedctl.worker"}


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {c["type"]: c for c in config["contracts"]}


def _modules() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if "migrations" in parts:  # alembic's scripts, loaded by file path, never imported
            continue
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _within(module: str, names: list[str]) -> list[str]:
    return [n for n in names if module == n or module.startswith(n + ".")]


def test_every_module_is_in_exactly_one_layer() -> None:
    layers = [name.strip() for entry in _contracts()["layers"]["layers"] for name in entry.split("|")]
    outside = [m for m in _modules() if m not in ENTRY and len(_within(m, layers)) != 1]
    assert outside == [], f"modules in no layer of pyproject's [tool.importlinter] contract: {outside}"


def test_every_module_outside_store_and_the_loops_is_forbidden_sqlalchemy() -> None:
    sources = _contracts()["forbidden"]["source_modules"]
    unchecked = [
        m
        for m in _modules()
        if m not in LOOPS | ENTRY | HOLDERS and not m.startswith("schedctl.store") and not _within(m, sources)
    ]
    for holder in HOLDERS:
        assert "import" not in (PACKAGE / holder.split(".")[1] / "__init__.py").read_text(encoding="utf-8")
    assert unchecked == [], f"name these in the SQL contract's source_modules: {unchecked}"
    assert [m for m in LOOPS if _within(m, sources)] == [], (
        "a loop may import SQLAlchemy: keep it out of sources"
    )
    assert LOOPS <= set(_modules()), "a loop named here no longer exists"


def test_lint_imports_keeps_both_contracts() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 kept, 0 broken" in done.stdout
