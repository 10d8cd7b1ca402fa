"""Regenerate the completion scripts in this folder from the CLI:  python completions/generate.py

``--check`` exits 1 (and names the stale files) when a script differs from what the CLI generates now;
tests/cli/test_completion.py runs the same comparison.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = {"bash": "schedctl.bash", "zsh": "_schedctl", "fish": "schedctl.fish"}


def generated() -> dict[Path, str]:
    from schedctl.cli._complete import completion_script

    return {HERE / name: completion_script(shell) for shell, name in FILES.items()}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in generated().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path.name)
        if not check:
            path.write_text(text, encoding="utf-8")
    if check and stale:
        print(f"out of date: {', '.join(stale)} (run: python completions/generate.py)", file=sys.stderr)
        return 1
    if stale:
        print(f"wrote {', '.join(stale)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
