"""Every file in examples/ parses, says what the issue asks of it, names only commands the CLI has, and runs:
every job file passes `schedctl validate`, the README's first example runs and prints what the README says,
and the Kubernetes and systemd examples start the real `schedctl serve` with their own arguments and
environment, answer their probes and stop cleanly on their stop signal."""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner
from launch import SCHEDCTL, child_env

from schedctl.cli import cli

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
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


# -- every job file passes `schedctl validate`, as the examples' comments say to check them ---------------------


def _validate(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["validate", *args], input=stdin)
    return result.exit_code, result.output


@pytest.mark.parametrize("path", _files("*.toml"), ids=_id)
def test_schedctl_validate_accepts_every_toml_example(path: Path) -> None:
    code, output = _validate(str(path))
    jobs = len(tomllib.loads(path.read_text())["jobs"])
    assert (code, output.strip()) == (0, f"{path}: {jobs} jobs OK")


def test_schedctl_validate_accepts_the_configmap_jobs_from_stdin() -> None:
    """configmap.yaml says: check a change with `schedctl validate jobs.toml` (here: its text on stdin)."""
    (doc,) = [d for p in _files("*.yaml") for d in _yaml_docs(p) if d["kind"] == "ConfigMap"]
    for key, text in doc["data"].items():
        code, output = _validate("-", stdin=text)
        assert code == 0 and output.strip().endswith(f"{len(tomllib.loads(text)['jobs'])} jobs OK"), (
            key,
            output,
        )


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


IMAGE_VARIABLE = "${SCHEDCTL_IMAGE}"
_README_ENVSUBST = re.compile(
    r"^\s*envsubst '\$SCHEDCTL_IMAGE' < (examples/kubernetes/\S+\.yaml) \| kubectl apply -f -$", re.M
)


def _kubernetes_containers() -> dict[str, list[dict[str, Any]]]:
    return {
        _id(path): [c for doc in _yaml_docs(path) for c in _containers(doc)]
        for path in sorted(KUBERNETES.glob("*.yaml"))
    }


def test_every_kubernetes_container_runs_the_image_named_by_the_variable() -> None:
    found = {where: [c["image"] for c in cs] for where, cs in _kubernetes_containers().items() if cs}
    assert set(found) == {
        "kubernetes/migrate-job.yaml",
        "kubernetes/scheduler.yaml",
        "kubernetes/worker.yaml",
    }
    assert all(images == [IMAGE_VARIABLE] for images in found.values()), found


def test_the_readme_substitutes_the_image_in_every_manifest_it_applies(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    applied = _README_ENVSUBST.findall(readme)
    with_image = {f"examples/{where}" for where, cs in _kubernetes_containers().items() if cs}
    # Deploying applies each manifest that runs the image through envsubst; none is applied raw.
    assert with_image <= set(applied), applied
    assert not re.search(
        r"kubectl apply (-f \S+ )*-f examples/kubernetes/(migrate-job|scheduler|worker)", readme
    )
    envsubst = shutil.which("envsubst")
    if envsubst is None:
        pytest.skip("envsubst (gettext-base) is not installed")
    image = "registry.example.com/team/schedctl:1.2.3"
    for manifest in sorted(set(applied)):
        with open(REPO / manifest) as source:
            out = subprocess.run(
                [envsubst, "$SCHEDCTL_IMAGE"],
                stdin=source,
                capture_output=True,
                text=True,
                timeout=30,
                env={"PATH": os.environ.get("PATH", ""), "SCHEDCTL_IMAGE": image},
            ).stdout
        assert "${" not in out, manifest
        images = [c["image"] for doc in yaml.safe_load_all(out) if doc for c in _containers(doc)]
        assert images and set(images) == {image}, (manifest, images)


def test_no_service_link_can_set_the_metrics_port() -> None:
    # Kubernetes gives every pod NAME_PORT=tcp://IP:PORT for each Service: one named schedctl-metrics
    # would hand serve SCHEDCTL_METRICS_PORT=tcp://..., which it refuses.
    for path in sorted(KUBERNETES.glob("*.yaml")):
        for doc in _yaml_docs(path):
            if doc["kind"] in ("Deployment", "Job"):
                assert doc["spec"]["template"]["spec"]["enableServiceLinks"] is False, _id(path)


def test_the_pods_run_as_the_images_user() -> None:
    (user,) = re.findall(r"^USER (\d+):(\d+)$", (REPO / "Containerfile").read_text(), re.M)
    for where, containers in _kubernetes_containers().items():
        for container in containers:
            context = container.get("securityContext")
            if context is not None and "runAsUser" in context:
                assert context["runAsUser"] == int(user[0]), where


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


# -- the examples run --------------------------------------------------------------------------------------


def _readme_section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _blocks(section: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, urllib.error.URLError):
        return 0


def _schedctl(argv: list[str]) -> list[str]:
    """An example's `schedctl ...` (or `/opt/schedctl/bin/schedctl ...`) run with this checkout's schedctl."""
    assert Path(argv[0]).name == "schedctl", argv
    return [*SCHEDCTL, *argv[1:]]


def _stop(proc: subprocess.Popen[bytes], sig: int, timeout: float) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def _normalised(text: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<instant>", text).strip()


@pytest.mark.processes
def test_the_readme_first_example_runs_and_prints_what_the_readme_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    section = _readme_section("Set up")
    first = _blocks(section, "sh")[0].strip()
    serve_words = shlex.split(next(part for part in first.split("&&") if " serve " in part))
    (console,) = _blocks(section, "console")[:1]
    command, *expected = console.strip().splitlines()
    assert command.startswith("$ ") and expected, console
    (tmp_path / "examples").symlink_to(EXAMPLES)
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            _schedctl(serve_words), cwd=tmp_path, env=child_env(), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        # The job runs every 10 s: its first run has ended within 10 s of the start (40 s on a loaded machine).
        # The README's command runs in this process, from the folder serve runs in (a child costs seconds of
        # start-up here); the runner's output is what the terminal shows, stderr and stdout in order.
        monkeypatch.chdir(tmp_path)
        argv = shlex.split(command[2:])
        assert Path(argv[0]).name == "schedctl", command
        deadline = time.monotonic() + 40
        shown = ""
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            if (tmp_path / "schedctl.db").exists():
                result = CliRunner().invoke(cli, argv[1:], env={"SCHEDCTL_DATABASE_URL": None})
                shown = result.output
                if result.exit_code == 0 and ": succeeded" in shown:
                    break
            time.sleep(0.3)
        assert _normalised(shown) == _normalised("\n".join(expected)), shown
        assert "run succeeded" in log.read_text()
    finally:
        # Ctrl-C in its terminal, as the README says.
        code = _stop(proc, signal.SIGINT, 20)
    assert code == 0, log.read_text()


def _wait_ready(
    procs: dict[str, tuple[subprocess.Popen[bytes], int, list[str], Path]], timeout: float
) -> None:
    """Every process answers each of its probe paths with 200."""
    deadline = time.monotonic() + timeout
    waiting = dict(procs)
    while waiting and time.monotonic() < deadline:
        for name, (proc, port, paths, log) in list(waiting.items()):
            assert proc.poll() is None, f"{name} exited {proc.returncode}:\n{log.read_text()}"
            if all(_get(port, path) == 200 for path in paths):
                del waiting[name]
        time.sleep(0.2)
    assert not waiting, {name: log.read_text()[-2000:] for name, (_, _, _, log) in waiting.items()}


def _alive(db: str, want: Callable[[dict[str, str]], bool], timeout: float = 30) -> dict[str, str]:
    """Identity -> role of the alive rows of `schedctl workers`, once ``want`` holds of them. A process
    registers its row just after it starts serving its probes, so a first listing may miss it."""
    deadline = time.monotonic() + timeout
    while True:
        listed = CliRunner().invoke(cli, ["workers", "--json", "--db", db])
        assert listed.exit_code == 0, listed.output
        alive = {w["identity"]: w["role"] for w in json.loads(listed.stdout) if w["state"] == "alive"}
        if want(alive) or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _one_shot(argv: list[str], env: dict[str, str]) -> None:
    """A one-shot example command (`schedctl db upgrade`), in this process: as a child it costs seconds of
    start-up on a loaded machine, and what it does is the same."""
    assert Path(argv[0]).name == "schedctl", argv
    done = CliRunner().invoke(cli, argv[1:], env={k: v for k, v in env.items() if k.startswith("SCHEDCTL_")})
    assert done.exit_code == 0, done.output


def _with_port(argv: list[str], port: int) -> list[str]:
    """The argv with its metrics port replaced (several examples share 9464) and bound to loopback."""
    out = list(argv)
    out[out.index("--metrics-port") + 1] = str(port)
    if "--metrics-host" in out:
        out[out.index("--metrics-host") + 1] = "127.0.0.1"  # a test does not listen on every interface
    return out


@pytest.mark.processes
def test_the_kubernetes_examples_run_as_written(tmp_path: Path) -> None:
    """The migrate Job, then the scheduler and worker Deployments' containers, each with its command, its env
    (the Secret's URL, the pod name) and its ConfigMap mount, until the kubelet's probes would pass."""
    db = f"sqlite:///{tmp_path / 'schedctl.db'}"
    docs = [doc for path in sorted(KUBERNETES.glob("*.yaml")) for doc in _yaml_docs(path)]
    configmaps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}

    def env_of(container: dict[str, Any], pod: str) -> dict[str, str]:
        env = child_env()
        for var in container.get("env", []):
            source = var.get("valueFrom", {})
            if "secretKeyRef" in source:
                env[var["name"]] = db  # what `kubectl create secret ... --from-literal=url=` holds
            elif source.get("fieldRef", {}).get("fieldPath") == "metadata.name":
                env[var["name"]] = pod
            else:
                env[var["name"]] = str(var["value"])
        return env

    def argv_of(container: dict[str, Any]) -> list[str]:
        # Without `command`, the image's entrypoint (schedctl) runs the `args`.
        return _argv(container) if container.get("command") else ["schedctl", *_argv(container)]

    def mounted(argv: list[str], container: dict[str, Any], spec: dict[str, Any]) -> list[str]:
        """The argv with each ConfigMap mount path replaced by a folder holding the ConfigMap's files."""
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            folder = tmp_path / mount["name"]
            folder.mkdir(exist_ok=True)
            for key, text in configmaps[volumes[mount["name"]]["configMap"]["name"]]["data"].items():
                (folder / key).write_text(text)
            argv = [a.replace(mount["mountPath"].rstrip("/"), str(folder)) for a in argv]
        return argv

    (job,) = [d for d in docs if d["kind"] == "Job"]
    (migrate,) = job["spec"]["template"]["spec"]["containers"]
    done = subprocess.run(
        _schedctl(_argv(migrate)),
        env=env_of(migrate, "schedctl-db-upgrade-x"),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr

    procs: dict[str, tuple[subprocess.Popen[bytes], int, list[str], Path]] = {}
    graces = {}
    try:
        for deployment in _deployments().values():
            spec = deployment["spec"]["template"]["spec"]
            container = _container(deployment)
            pod = f"{deployment['metadata']['name']}-0"
            port = _free_port()
            argv = mounted(_with_port(argv_of(container), port), container, spec)
            log = tmp_path / f"{pod}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    _schedctl(argv), env=env_of(container, pod), stdout=out, stderr=subprocess.STDOUT
                )
            paths = [container[probe]["httpGet"]["path"] for probe in ("livenessProbe", "readinessProbe")]
            procs[pod] = (proc, port, paths, log)
            graces[pod] = spec["terminationGracePeriodSeconds"]
        _wait_ready(procs, 60)
        # SCHEDCTL_IDENTITY from the pod name
        alive = _alive(db, lambda alive: set(procs) <= set(alive))
        assert set(procs) <= set(alive), alive
    finally:
        codes = {pod: _stop(proc, signal.SIGTERM, graces.get(pod, 30)) for pod, (proc, *_) in procs.items()}
    assert set(codes.values()) == {0}, {pod: log.read_text()[-2000:] for pod, (*_, log) in procs.items()}


@pytest.mark.processes
def test_the_systemd_units_run_as_written(tmp_path: Path) -> None:
    """Each unit's ExecStart with the EnvironmentFile's variables (the URL pointed at SQLite, the job file at
    examples/schedctl.toml), after the `schedctl db upgrade` the README's step 4 runs; stopped with its
    KillSignal within its TimeoutStopSec."""
    from schedctl.timing.timetext import parse_duration

    env = child_env()
    for line in (SYSTEMD / "schedctl.env").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            env[name] = value
    assert {"SCHEDCTL_DATABASE_URL", "SCHEDCTL_JOBS"} <= set(env)
    env["SCHEDCTL_DATABASE_URL"] = f"sqlite:///{tmp_path / 'schedctl.db'}"
    env["SCHEDCTL_JOBS"] = str(EXAMPLES / "schedctl.toml")
    _one_shot(["schedctl", "db", "upgrade"], env)

    procs: dict[str, tuple[subprocess.Popen[bytes], int, list[str], Path]] = {}
    stops = {}
    try:
        for path in UNITS:
            service = _unit(path)["Service"]
            port = _free_port()
            log = tmp_path / f"{path.stem}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    _schedctl(_with_port(shlex.split(service["ExecStart"]), port)),
                    env=env,
                    cwd=tmp_path,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            procs[path.stem] = (proc, port, ["/livez", "/readyz"], log)
            assert service["KillSignal"] == "SIGTERM"
            stops[path.stem] = parse_duration(service["TimeoutStopSec"])
        _wait_ready(procs, 60)
        alive = _alive(env["SCHEDCTL_DATABASE_URL"], lambda alive: len(alive) == 2)
        assert sorted(alive.values()) == ["scheduler", "worker"], alive
    finally:
        codes = {name: _stop(proc, signal.SIGTERM, stops.get(name, 30)) for name, (proc, *_) in procs.items()}
    assert set(codes.values()) == {0}, {name: log.read_text()[-2000:] for name, (*_, log) in procs.items()}


# Which test runs each example: a new file under examples/ needs a line here, and so a test that runs it.
_RUNNERS = {
    "schedctl.toml": "test_the_readme_first_example_runs_and_prints_what_the_readme_says",
    "crontabs/*": "tests/cli/test_import_export.py",  # the README's imports, compared with the TOML
    "hooks/*": "tests/processes/test_mail_hook.py",  # the hook, run by a real worker's failed run
    "kubernetes/*.yaml": "test_the_kubernetes_examples_run_as_written",
    "systemd/*": "test_the_systemd_units_run_as_written",
    "tour/*": "tests/processes/test_tour.py",  # the README tour imports and runs them
}


def test_every_example_file_has_a_test_that_runs_it() -> None:
    from fnmatch import fnmatch

    for path in sorted(p for p in EXAMPLES.rglob("*") if p.is_file()):
        assert any(fnmatch(_id(path), pattern) for pattern in _RUNNERS), f"{_id(path)}: no test runs it"
    for runner in _RUNNERS.values():
        assert runner in globals() or (REPO / runner).is_file(), runner


def test_the_crontab_examples_readme_commands_are_the_ones_tested() -> None:
    """tests/cli/test_import_export.py runs examples/crontabs/README.md's imports from its own table: the same."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_export", REPO / "tests/cli/test_import_export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (block,) = _blocks((EXAMPLES / "crontabs" / "README.md").read_text(), "sh")
    documented = {}
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words[:2] == ["schedctl", "import"]:
            out = words.index("-o")
            documented[words[out + 1]] = words[2:out] + [w for w in words[out + 2 :] if w != "--force"]
    assert documented == module.EXAMPLE_IMPORTS
