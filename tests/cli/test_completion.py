"""Shell completion: generated scripts, loading them in real shells, job-id candidates."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.shell_completion import ShellComplete, get_completion_class
from click.testing import CliRunner

from schedctl.cli import COMMANDS, cli
from schedctl.cli._complete import complete_job_ids, completion_script, job_ids

REPO = Path(__file__).resolve().parents[2]
COMPLETIONS = REPO / "completions"
FILES = {"bash": "schedctl.bash", "zsh": "_schedctl", "fish": "schedctl.fish"}
BIN = Path(sys.executable).parent  # where the `schedctl` console script is installed


def _schedctl_on_path() -> dict[str, str]:
    if not (BIN / "schedctl").exists():
        pytest.skip(f"no schedctl console script next to {sys.executable}")
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _shell(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (CI needs it for this test: apt-get install {name})")
    return path


JOBS_TOML = """\
[jobs.backup]
schedule = "30 2 * * *"
timezone = "Europe/London"
catch_up = "skip"
command = "backup.sh"

[jobs."nightly.report"]
schedule = '@daily'
timezone = "UTC"
catch_up = "latest"
command = ["report"]

[ jobs.beat ]
timezone = "UTC"
schedule = "* * * * *"
catch_up = "skip"
command = "true"

[jobs.backup.env]
MAILTO = "ops@example.com"
"""


@pytest.mark.parametrize("shell", sorted(FILES))
def test_committed_scripts_match_what_the_cli_generates(shell: str) -> None:
    committed = (COMPLETIONS / FILES[shell]).read_text(encoding="utf-8")
    assert committed == completion_script(shell), (
        f"completions/{FILES[shell]} is out of date: run `python completions/generate.py`"
    )


def test_generator_check_mode_passes_on_the_committed_files() -> None:
    proc = subprocess.run(
        [sys.executable, str(COMPLETIONS / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("shell", sorted(FILES))
def test_completion_command_prints_the_script(shell: str) -> None:
    result = CliRunner().invoke(cli, ["completion", shell])
    assert result.exit_code == 0, result.output
    assert result.output == completion_script(shell)
    assert "_SCHEDCTL_COMPLETE" in result.output


def test_completion_command_refuses_other_shells() -> None:
    result = CliRunner().invoke(cli, ["completion", "tcsh"])
    assert result.exit_code == 2


def test_bash_loads_the_script_and_completes_commands(tmp_path: Path) -> None:
    bash = _shell("bash")
    env = _schedctl_on_path()
    script = f"""
source {COMPLETIONS / FILES["bash"]}
complete -p schedctl
COMP_WORDS=(schedctl ru); COMP_CWORD=1
_schedctl_completion schedctl
echo "REPLY=${{COMPREPLY[*]}}"
"""
    proc = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "complete -o nosort -F _schedctl_completion schedctl" in proc.stdout
    assert "REPLY=run runs" in proc.stdout


def test_bash_completes_job_ids_from_the_job_file(tmp_path: Path) -> None:
    bash = _shell("bash")
    env = _schedctl_on_path()
    (tmp_path / "schedctl.toml").write_text(JOBS_TOML)
    script = f"""
source {COMPLETIONS / FILES["bash"]}
COMP_WORDS=(schedctl status b); COMP_CWORD=2
_schedctl_completion schedctl
echo "REPLY=${{COMPREPLY[*]}}"
"""
    proc = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "REPLY=backup beat" in proc.stdout


def test_zsh_loads_the_script(tmp_path: Path) -> None:
    zsh = _shell("zsh")
    env = {**_schedctl_on_path(), "HOME": str(tmp_path), "ZDOTDIR": str(tmp_path)}
    script = f"""
autoload -U compinit && compinit -u -D
source {COMPLETIONS / FILES["zsh"]}
print -r -- "COMP=$_comps[schedctl]"
"""
    proc = subprocess.run(
        [zsh, "-f", "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "COMP=_schedctl_completion" in proc.stdout


def test_zsh_protocol_gives_commands_with_descriptions(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "COMP_WORDS": "schedctl comp",
        "COMP_CWORD": "1",
        "_SCHEDCTL_COMPLETE": "zsh_complete",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "schedctl"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.stdout.splitlines() == ["plain", "completion", COMMANDS["completion"][2]]


def test_fish_loads_the_script_and_completes_commands(tmp_path: Path) -> None:
    fish = _shell("fish")
    env = {
        **_schedctl_on_path(),
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "XDG_DATA_HOME": str(tmp_path / ".data"),
    }
    script = f"source {COMPLETIONS / FILES['fish']}; complete -C 'schedctl ru'"
    proc = subprocess.run(
        [fish, "--no-config", "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    names = [line.split("\t")[0] for line in proc.stdout.splitlines()]
    assert names == ["run", "runs"], proc.stdout
    assert "Queue a manual run of a job now." in proc.stdout


# -- job ids -----------------------------------------------------------------------------------------------


def test_job_ids_come_from_headers_with_their_schedules(tmp_path: Path) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBS_TOML)
    assert job_ids(path) == {"backup": "30 2 * * *", "nightly.report": "@daily", "beat": "* * * * *"}


def test_job_ids_from_a_folder_of_files(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('[jobs.alpha]\nschedule = "@hourly"\n')
    (tmp_path / "b.toml").write_text('[jobs.beta]\nschedule = "@daily"\n')
    (tmp_path / "notes.txt").write_text("[jobs.not_a_job]\n")
    assert sorted(job_ids(tmp_path)) == ["alpha", "beta"]


@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage[[[", b"[jobs.\n", b""])
def test_job_ids_never_raise(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "jobs.toml"
    path.write_bytes(content)
    assert job_ids(path) == {}
    assert job_ids(tmp_path / "missing.toml") == {}


def _tiny_command() -> click.Command:
    @click.command()
    @click.option("--jobs", "jobs_path", envvar="SCHEDCTL_JOBS", default="schedctl.toml")
    @click.argument("job", shell_complete=complete_job_ids)
    def tiny(jobs_path: str, job: str) -> None:
        """A command shaped like the real JOB commands."""

    return tiny


def _candidates(command: click.Command, args: list[str], incomplete: str) -> list[tuple[str, str | None]]:
    comp: ShellComplete = get_completion_class("zsh")(command, {}, "tiny", "_TINY_COMPLETE")  # type: ignore[misc]
    return [(item.value, item.help) for item in comp.get_completions(args, incomplete)]


def test_click_completes_job_ids_from_jobs_option_env_and_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "elsewhere.toml"
    path.write_text(JOBS_TOML)
    command = _tiny_command()
    assert _candidates(command, ["--jobs", str(path)], "b") == [
        ("backup", "30 2 * * *"),
        ("beat", "* * * * *"),
    ]
    monkeypatch.setenv("SCHEDCTL_JOBS", str(path))
    assert [v for v, _ in _candidates(command, [], "n")] == ["nightly.report"]
    monkeypatch.delenv("SCHEDCTL_JOBS")
    monkeypatch.chdir(tmp_path)
    assert _candidates(command, [], "") == []  # no ./schedctl.toml: nothing, and no error
    (tmp_path / "schedctl.toml").write_text(JOBS_TOML)
    assert len(_candidates(command, [], "")) == 3


def test_job_id_completion_is_fast_on_ten_thousand_jobs(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_text(
        "".join(
            f'[jobs.job-{i:05d}]\nschedule = "{i % 60} * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\n'
            f'command = "true"\n\n'
            for i in range(10_000)
        )
    )
    started = time.perf_counter()
    ids = job_ids(path)
    elapsed = time.perf_counter() - started
    assert len(ids) == 10_000
    assert elapsed < 1.0, f"{elapsed:.3f}s to scan 10,000 jobs"


def _job_param(name: str) -> click.Parameter | None:
    """The parameter of `schedctl NAME` that takes job ids: a JOB argument, or a --job option."""
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    for param in command.params:
        if isinstance(param, click.Argument) and param.name in ("job", "job_id", "job_ids"):
            return param
        if isinstance(param, click.Option) and "--job" in param.opts:
            return param
    return None


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_job_parameter_completes_job_ids(name: str) -> None:
    """A command that takes a JOB (argument or --job) offers the ids from the job files on <TAB>."""
    param = _job_param(name)
    if param is None:
        return
    assert getattr(param, "_custom_shell_complete", None) is complete_job_ids, (
        f"`schedctl {name}`: add shell_complete=complete_job_ids (schedctl.cli._complete) to {param.name!r}"
    )
