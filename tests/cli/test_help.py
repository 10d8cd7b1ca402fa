"""Every command exists, has one-line help that matches the top-level listing, and is documented in the README."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from schedctl.cli import COMMANDS, cli

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_loads_and_has_help(name: str) -> None:
    ctx = click.Context(cli)
    command = cli.get_command(ctx, name)
    assert command is not None, f"{name} is listed but its module does not define it"
    assert command.name == name or name in ("import", "next"), command.name
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def documents(readme: str, name: str) -> bool:
    """Whether the README shows ``schedctl NAME`` as a whole word: "schedctl runs" is no mention of `run`."""
    return re.search(rf"(?<![\w-])schedctl {re.escape(name)}(?![\w-])", readme) is not None


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_is_documented_in_the_readme(name: str) -> None:
    assert documents(README, name), f"README never shows `schedctl {name}`"


def test_a_longer_command_is_no_mention_of_a_shorter_one() -> None:
    assert not documents("see `schedctl runs` and schedctl run-all", "run")
    assert documents("then `schedctl run billing`", "run") and documents("schedctl run\n", "run")


def test_top_level_help_lists_every_command_and_the_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert f"  {name} " in result.output
    for code in ("0", "1", "2", "78", "130"):
        assert f"  {code} " in result.output


def test_version() -> None:
    from schedctl import __version__

    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


def _every_command() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    out = []
    for name in sorted(COMMANDS):
        command = cli.get_command(ctx, name)
        assert command is not None
        out.append((name, command))
        if isinstance(command, click.Group):
            out += [(f"{name} {sub}", c) for sub, c in command.commands.items()]
    return out


@pytest.mark.parametrize(("name", "command"), _every_command(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_option_has_help_text(name: str, command: click.Command) -> None:
    missing = [
        p.opts[0]
        for p in command.params
        if isinstance(p, click.Option) and not p.hidden and not (p.help or "").strip()
    ]
    assert missing == [], f"schedctl {name}: options without help: {missing}"


def _help(*args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], terminal_width=200)
    assert result.exit_code == 0
    return " ".join(result.output.split())


def test_help_texts_say_what_the_readme_says() -> None:
    readme = " ".join(README.split())
    assert "a system crontab when any job has a `user`" in readme
    assert "a system crontab (user column) when any job has a user" in _help("export")
    assert "exit 0 (130 only if a loop is still stuck after a few seconds)" in readme
    assert "exit 0 (130 only if a loop is still stuck after a few seconds)" in _help("serve")
    zsh = "mkdir -p ~/.zfunc && schedctl completion zsh > ~/.zfunc/_schedctl"
    assert zsh in readme and zsh in _help("completion")
    assert "fpath=(~/.zfunc $fpath)" in readme and "fpath=(~/.zfunc $fpath)" in _help("completion")
