"""Every file in examples/ parses, says what the issue asks of it, and names only commands the CLI has."""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from schedctl.cli import cli

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
SYSTEMD = EXAMPLES / "systemd"
KUBERNETES = EXAMPLES / "kubernetes"
HOOK = EXAMPLES / "hooks" / "mail-on-failure"


def _files(pattern: str) -> list[Path]:
    return sorted(EXAMPLES.rglob(pattern))


def _id(path: Path) -> str:
    return str(path.relative_to(EXAMPLES))


def _yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _unit(path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read_string(path.read_text())
    return parser


# -- everything parses -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", _files("*.toml"), ids=_id)
def test_toml_examples_parse_and_job_files_load(path: Path) -> None:
    from schedctl.jobs.config import load_jobs

    data = tomllib.loads(path.read_text())
    # Every TOML example is a job file: a misspelled top-level table must fail here, not be skipped.
    assert set(data) == {"jobs"}, f"{_id(path)}: top-level tables {sorted(data)}, expected only [jobs]"
    assert sorted(load_jobs(path)) == sorted(data["jobs"])


@pytest.mark.parametrize("path", _files("*.yaml") + _files("*.yml"), ids=_id)
def test_yaml_examples_are_kubernetes_objects(path: Path) -> None:
    docs = _yaml_docs(path)
    assert docs
    for doc in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(doc), doc
        assert doc["metadata"].get("name")


def test_configmap_jobs_load() -> None:
    from schedctl.jobs.config import loads_jobs

    found = 0
    for path in _files("*.yaml"):
        for doc in _yaml_docs(path):
            if doc["kind"] == "ConfigMap":
                for key, text in doc.get("data", {}).items():
                    if key.endswith(".toml"):
                        found += len(loads_jobs(text, f"{_id(path)}:{key}"))
    assert found > 0


# -- Kubernetes --------------------------------------------------------------------------------------------


def _deployments() -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["name"]: doc
        for path in _files("*.yaml")
        for doc in _yaml_docs(path)
        if doc["kind"] == "Deployment"
    }


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _argv(container: dict[str, Any]) -> list[str]:
    return [str(a) for a in container.get("command", []) + container.get("args", [])]


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _max_grace_period() -> float:
    from schedctl.jobs.config import loads_jobs
    from schedctl.jobs.job import DEFAULT_GRACE_PERIOD

    graces = [DEFAULT_GRACE_PERIOD]
    for path in _files("*.yaml"):
        for doc in _yaml_docs(path):
            if doc["kind"] == "ConfigMap":
                for key, text in doc.get("data", {}).items():
                    if key.endswith(".toml"):
                        graces += [job.grace_period for job in loads_jobs(text, key).values()]
    return max(graces)


def test_three_scheduler_replicas_and_workers() -> None:
    deployments = _deployments()
    roles = {_option(_argv(_container(d)), "--role"): d for d in deployments.values()}
    assert set(roles) == {"scheduler", "worker"}
    assert roles["scheduler"]["spec"]["replicas"] == 3
    assert roles["worker"]["spec"]["replicas"] >= 1


def test_worker_grace_period_covers_the_jobs_grace_period() -> None:
    worker = next(d for d in _deployments().values() if _option(_argv(_container(d)), "--role") == "worker")
    termination = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    # The jobs' grace_period, plus time to save checkpoints and hand runs back, inside Kubernetes' window.
    assert _max_grace_period() + 10 <= termination <= _max_grace_period() + 60


@pytest.mark.parametrize("name", sorted(_deployments()))
def test_probes_db_secret_and_identity(name: str) -> None:
    container = _container(_deployments()[name])
    argv = _argv(container)
    port = _option(argv, "--metrics-port")
    assert port is not None, "probes need --metrics-port"
    # serve binds 127.0.0.1 by default; the kubelet probes the pod IP.
    assert _option(argv, "--metrics-host") == "0.0.0.0"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert int(ports.get(get["port"], get["port"])) == int(port)
    env = {e["name"]: e for e in container["env"]}
    assert "secretKeyRef" in env["SCHEDCTL_DATABASE_URL"]["valueFrom"]
    assert env["SCHEDCTL_IDENTITY"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def test_scheduler_mounts_the_job_configmap() -> None:
    scheduler = next(
        d for d in _deployments().values() if _option(_argv(_container(d)), "--role") == "scheduler"
    )
    spec = scheduler["spec"]["template"]["spec"]
    jobs = _option(_argv(_container(scheduler)), "--jobs")
    assert jobs is not None
    mounts = {m["mountPath"]: m["name"] for m in _container(scheduler)["volumeMounts"]}
    mount = next(path for path in mounts if jobs.startswith(path.rstrip("/") + "/"))
    volume = next(v for v in spec["volumes"] if v["name"] == mounts[mount])
    configmaps = {
        doc["metadata"]["name"]: doc
        for path in _files("*.yaml")
        for doc in _yaml_docs(path)
        if doc["kind"] == "ConfigMap"
    }
    assert Path(jobs).name in configmaps[volume["configMap"]["name"]]["data"]


# -- systemd -----------------------------------------------------------------------------------------------

UNITS = sorted(SYSTEMD.glob("*.service"))


@pytest.mark.parametrize("path", UNITS, ids=_id)
def test_units_stop_gently_and_do_not_loop_on_bad_config(path: Path) -> None:
    service = _unit(path)["Service"]
    assert service["KillSignal"] == "SIGTERM"
    assert service["Restart"] == "on-failure"
    assert "78" in service["RestartPreventExitStatus"].split()
    assert service["EnvironmentFile"].lstrip("-")
    assert "serve --role" in service["ExecStart"]


def test_worker_unit_stop_timeout_covers_the_grace_period() -> None:
    from schedctl.jobs.job import DEFAULT_GRACE_PERIOD
    from schedctl.timing.timetext import parse_duration

    (worker,) = [p for p in UNITS if "--role worker" in _unit(p)["Service"]["ExecStart"]]
    service = _unit(worker)["Service"]
    assert DEFAULT_GRACE_PERIOD + 10 <= parse_duration(service["TimeoutStopSec"]) <= DEFAULT_GRACE_PERIOD + 60
    # Only the worker gets SIGTERM; it forwards it to the jobs itself (systemd would signal them twice).
    assert service["KillMode"] == "mixed"


def test_environment_file_names_the_database_url() -> None:
    env = (SYSTEMD / "schedctl.env").read_text()
    assert re.search(r"^SCHEDCTL_DATABASE_URL=postgresql://", env, re.MULTILINE)


@pytest.mark.parametrize("path", UNITS, ids=_id)
def test_units_pass_systemd_analyze_verify(path: Path, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    schedctl = Path(sys.executable).parent / "schedctl"
    if not schedctl.exists():
        pytest.skip(f"no schedctl console script next to {sys.executable}")
    # verify checks that ExecStart's binary exists: point it at this environment's schedctl.
    text = path.read_text().replace("/opt/schedctl/bin/schedctl", str(schedctl))
    unit = tmp_path / path.name
    unit.write_text(text)
    proc = subprocess.run(
        [analyze, "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"},
    )
    problems = [
        line for line in (proc.stdout + proc.stderr).splitlines() if unit.name in line or path.name in line
    ]
    if proc.returncode != 0 and not problems and "Failed to" in proc.stderr:
        pytest.skip(f"systemd-analyze cannot run here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0 and not problems, proc.stdout + proc.stderr


# -- the commands the examples name exist -------------------------------------------------------------------

_CODE_SPAN = re.compile(r"`(schedctl [^`]+)`")
_WORD_SCHEDCTL = re.compile(r"(?:^|[\s/\"'])schedctl\s")


def _invocations() -> Iterator[tuple[str, list[str]]]:
    """(where, argv after `schedctl`) for every schedctl command an example runs or tells the reader to run."""
    for path in sorted(p for p in EXAMPLES.rglob("*") if p.is_file()):
        if path.suffix in (".yaml", ".yml"):
            for doc in _yaml_docs(path):
                for container in _containers(doc):
                    argv = _argv(container)
                    if argv and Path(argv[0]).name == "schedctl":
                        yield _id(path), argv[1:]
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for span in _CODE_SPAN.findall(text):
            yield _id(path), shlex.split(span)[1:]
        if path.suffix == ".service":
            for key, value in _unit(path)["Service"].items():
                if key.startswith("Exec") and _WORD_SCHEDCTL.search(" " + value):
                    argv = shlex.split(value)
                    start = next(i for i, a in enumerate(argv) if Path(a).name == "schedctl")
                    yield _id(path), argv[start + 1 :]


def _containers(doc: Any) -> Iterator[dict[str, Any]]:
    if isinstance(doc, dict):
        if "image" in doc and ("command" in doc or "args" in doc):
            yield doc
        for value in doc.values():
            yield from _containers(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from _containers(value)


def _resolve(argv: list[str]) -> tuple[click.Command, list[str], list[str]]:
    """The command an argv names, the words that named it, and the rest."""
    ctx = click.Context(cli)
    command: click.Command = cli
    path: list[str] = []
    rest = list(argv)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(ctx, rest[0])
        assert sub is not None, f"no command `schedctl {' '.join(path + [rest[0]])}`"
        path.append(rest.pop(0))
        command = sub
    return command, path, rest


def test_examples_name_commands() -> None:
    assert len(list(_invocations())) >= 5


def _unique_invocations() -> list[tuple[str, list[str]]]:
    return list({(where, tuple(argv)): (where, argv) for where, argv in _invocations()}.values())


@pytest.mark.parametrize(
    "where, argv", _unique_invocations(), ids=lambda v: v if isinstance(v, str) else " ".join(v)
)
def test_every_command_and_option_named_exists(where: str, argv: list[str]) -> None:
    command, path, rest = _resolve(argv)
    assert path, f"{where}: `schedctl {' '.join(argv)}` names no command"
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    known |= {"-h", "--help"}
    for word in rest:
        if word.startswith("--"):
            name = word.split("=", 1)[0]
            assert name in known, f"{where}: `schedctl {' '.join(path)}` has no option {name}"


# -- the mail hook -----------------------------------------------------------------------------------------


def _fake_sendmail(tmp_path: Path) -> Path:
    fake = tmp_path / "sendmail"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" > {tmp_path}/args\ncat > {tmp_path}/message\n')
    fake.chmod(0o755)
    return fake


def _hook_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "LOGNAME": "alice",
        "SENDMAIL": str(_fake_sendmail(tmp_path)),
        "SCHEDCTL_JOB_ID": "nightly-backup",
        "SCHEDCTL_SCHEDULED_FOR": "2026-12-01T02:30:00Z",
        "SCHEDCTL_ATTEMPT": "3",
        "SCHEDCTL_STATE": "failed",
        "SCHEDCTL_EXIT_STATUS": "2",
        "SCHEDCTL_OUTPUT_TAIL": "pg_dump: error: connection refused\n",
    }
    env.update(extra)
    return env


def _run_hook(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HOOK)], env=env, capture_output=True, text=True, timeout=30)


def test_hook_is_valid_sh() -> None:
    assert subprocess.run(["sh", "-n", str(HOOK)]).returncode == 0
    assert os.access(HOOK, os.X_OK)


def test_hook_mails_the_output_to_mailto(tmp_path: Path) -> None:
    proc = _run_hook(
        _hook_env(tmp_path, MAILTO="ops@example.com,dba@example.com", MAILFROM="cron@example.com")
    )
    assert proc.returncode == 0, proc.stderr
    message = (tmp_path / "message").read_text()
    headers, _, body = message.partition("\n\n")
    assert "To: ops@example.com,dba@example.com" in headers.splitlines()
    assert "From: cron@example.com" in headers.splitlines()
    assert "nightly-backup: failed, exit status 2" in headers
    assert "pg_dump: error: connection refused" in body
    assert "2026-12-01T02:30:00Z" in body
    assert (tmp_path / "args").read_text().split() == ["-i", "-t"]


def test_hook_without_mailto_mails_the_user_and_empty_mailto_mails_nobody(tmp_path: Path) -> None:
    assert _run_hook(_hook_env(tmp_path)).returncode == 0
    assert "To: alice" in (tmp_path / "message").read_text().splitlines()
    (tmp_path / "message").unlink()
    assert _run_hook(_hook_env(tmp_path, MAILTO="")).returncode == 0
    assert not (tmp_path / "message").exists()
    assert _run_hook(_hook_env(tmp_path, MAILTO='""')).returncode == 0
    assert not (tmp_path / "message").exists()


def test_hook_says_so_when_there_is_no_sendmail(tmp_path: Path) -> None:
    proc = _run_hook(_hook_env(tmp_path, MAILTO="ops@example.com", SENDMAIL=str(tmp_path / "missing")))
    assert proc.returncode == 1
    assert "not found" in proc.stderr and "nightly-backup" in proc.stderr


def test_hook_header_values_cannot_inject_headers(tmp_path: Path) -> None:
    proc = _run_hook(
        _hook_env(tmp_path, MAILTO="ops@example.com", SCHEDCTL_JOB_ID="x\nBcc: evil@example.com")
    )
    assert proc.returncode == 0
    headers = (tmp_path / "message").read_text().partition("\n\n")[0]
    assert not any(line.startswith("Bcc:") for line in headers.splitlines())
