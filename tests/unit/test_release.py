"""Issue 30: what a release promises a packager and a user: the version says which CHANGELOG entry is running,
and the package carries its licence and its type information."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import schedctl

ROOT = Path(__file__).resolve().parents[2]


def test_schedctl_version_is_the_newest_dated_changelog_entry() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "schedctl", "--version"], capture_output=True, text=True, timeout=60
    ).stdout.strip()
    assert printed == f"schedctl, version {schedctl.__version__}"
    headings = re.findall(
        r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", (ROOT / "CHANGELOG.md").read_text(), re.M
    )
    assert headings[0] == ("Unreleased", ""), "Keep a Changelog: Unreleased comes first"
    released = [(version, date) for version, date in headings[1:] if date]
    assert released and released[0][0] == schedctl.__version__, (released[:1], schedctl.__version__)


def test_the_package_declares_an_spdx_licence_its_licence_file_and_its_types() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"  # PEP 639: an SPDX expression, not a table
    assert project["project"]["license-files"] == ["LICENSE"] and (ROOT / "LICENSE").read_text().startswith(
        "MIT"
    )
    assert "version" in project["project"]["dynamic"]  # one source of truth: schedctl.__version__
    assert (Path(schedctl.__file__).parent / "py.typed").is_file()
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["schedctl"]
