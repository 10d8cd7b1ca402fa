"""The container image: built by deploy/image/build-local.sh from the Containerfile, and run with podman.

The build bootstraps a Debian base the first time on a machine (a few minutes; cached after, keyed by the
script) and installs the wheel built from this checkout. Then the image runs `serve --role all` on SQLite with
a mounted job folder, `serve --role scheduler` and `--role worker` against the PostgreSQL and MariaDB of the
suite, `db upgrade` as the Kubernetes Job runs it, and its HEALTHCHECK answers from /livez and /readyz.
Everything is checked from the host: the database the containers wrote, and their health port.

Containers run rootful with the host's network (the servers listen on the host's loopback). Where root may
not raise resource limits (no CAP_SYS_RESOURCE, as here), podman's default nofile/nproc limits are refused,
so the limits are given within the host's; and crun refuses a hybrid cgroup hierarchy, so runc runs them
when it is installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from databases import private_url
from launch import child_env

pytestmark = [pytest.mark.processes, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "deploy" / "image" / "build-local.sh"
IMAGE_UID = 10001
TICK = '[jobs.tick]\nschedule = "* * * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "id -u"\n'


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "the image is built and run as root (rootful podman, debootstrap)"
    if shutil.which("podman") is None:
        return "podman is not installed (.ci/run installs it): the containers run with podman"
    if shutil.which("debootstrap") is None:
        return "debootstrap is not installed (.ci/run installs it): the image's base is bootstrapped here"
    return None


def _run_options() -> list[str]:
    options = ["--network", "host"]
    if shutil.which("runc"):
        options += ["--runtime", "runc"]
    for flag, limit in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        hard = resource.getrlimit(limit)[1]
        value = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
        options += ["--ulimit", f"{flag}={value}:{value}"]
    return options


def _podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, f"podman {' '.join(args)}: {proc.stdout}{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    name = f"localhost/schedctl-test:{os.getpid()}"
    before = _unnamed_images()
    started = time.monotonic()
    try:
        proc = subprocess.run(["bash", str(BUILD), name], capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
        assert proc.stdout.splitlines()[-1] == name
        print(f"image {name} built in {time.monotonic() - started:.0f}s")
        yield name
    finally:
        _podman("rmi", "--force", name, check=False)
        _remove_unnamed_images_since(before)


def _images() -> list[dict[str, Any]]:
    ids = _podman("images", "--all", "--quiet", "--no-trunc", timeout=60).stdout.split()
    if not ids:
        return []
    images: list[dict[str, Any]] = json.loads(_podman("image", "inspect", *ids, timeout=60).stdout)
    return images


def _unnamed_images() -> set[str]:
    return {image["Id"] for image in _images() if not image["RepoTags"]}


def _remove_unnamed_images_since(before: set[str]) -> None:
    """The build's anonymous images (each CI run would leave some 70 MB behind), but not the steps that lead
    to a named image (the dependency stage, the base): the next build finds its cached layers through them.
    """
    images = _images()
    named = [image["RootFS"]["Layers"] for image in images if image["RepoTags"]]
    for image in images:
        layers = image["RootFS"]["Layers"]
        if image["RepoTags"] or image["Id"] in before or any(layers == n[: len(layers)] for n in named):
            continue
        _podman("rmi", "--force", image["Id"], check=False, timeout=60)


class Containers:
    """Containers of one test: started detached on the host's network, removed at the end whatever happens."""

    def __init__(self, image: str) -> None:
        self.image = image
        self.names: list[str] = []

    def start(self, *args: str, env: dict[str, str], volumes: tuple[str, ...] = ()) -> str:
        name = f"schedctl-test-{uuid.uuid4().hex[:10]}"
        options = _run_options()
        for key, value in env.items():
            options += ["--env", f"{key}={value}"]
        for volume in volumes:
            options += ["--volume", volume]
        self.names.append(name)
        _podman("run", "--detach", "--name", name, *options, self.image, *args)
        return name

    def run(self, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        options = _run_options()
        for key, value in env.items():
            options += ["--env", f"{key}={value}"]
        return _podman("run", "--rm", *options, self.image, *args, timeout=120, check=False)

    def logs(self, name: str) -> str:
        proc = _podman("logs", name, check=False, timeout=30)
        return f"--- {name}:\n{proc.stdout}{proc.stderr}"

    def state(self, name: str) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(_podman("inspect", "--format", "{{json .State}}", name).stdout)
        return state

    def stop(self, name: str) -> int:
        """SIGTERM, as a deploy sends it; the exit code."""
        _podman("stop", "--time", "30", name, timeout=60)
        return int(self.state(name)["ExitCode"])

    def remove_all(self) -> None:
        for name in self.names:
            _podman("rm", "--force", "--time", "0", name, check=False, timeout=60)


@pytest.fixture
def containers(image: str) -> Iterator[Containers]:
    running = Containers(image)
    try:
        yield running
    finally:
        running.remove_all()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _status(port: int, path: str) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
            status: int = answer.status
            return status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def _wait_for(what: str, check: Callable[[], bool], containers: Containers, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        for name in containers.names:
            if not containers.state(name)["Running"]:
                pytest.fail(f"{name} stopped while waiting for {what}\n" + containers.logs(name))
        time.sleep(0.3)
    pytest.fail(f"no {what} within {timeout:.0f}s\n" + "\n".join(map(containers.logs, containers.names)))


def _runs(url: str) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "schedctl", "runs", "tick", "--json", "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
    )
    if proc.returncode != 0:  # the schema is not there yet
        return []
    runs: list[dict[str, Any]] = json.loads(proc.stdout)
    return runs


def _succeeded(url: str, worker: str | None = None) -> bool:
    return any(r["state"] == "succeeded" and worker in (None, r["worker"]) for r in _runs(url))


def _job_folder(tmp_path: Path) -> Path:
    jobs = tmp_path / "jobs"
    jobs.mkdir(mode=0o755)
    (jobs / "tick.toml").write_text(TICK)
    jobs.chmod(0o755)  # readable by the image's user; writable by no one else (serve warns otherwise)
    return jobs


def test_the_image_is_small_non_root_and_runs_schedctl(image: str) -> None:
    (inspected,) = json.loads(_podman("image", "inspect", image).stdout)
    config = inspected["Config"]
    assert config["User"] == f"{IMAGE_UID}:{IMAGE_UID}"
    assert config["Entrypoint"] == ["/opt/schedctl/bin/schedctl"]
    # Kept only in the docker format: an OCI-format build would drop it silently.
    healthcheck = inspected["Healthcheck"]["Test"]
    assert healthcheck[0] == "CMD" and healthcheck[-1].endswith("healthcheck.py")
    size = inspected["Size"]
    # The Debian base is about 130 MB; schedctl with its dependencies about 65 MB; no compiler, no pip.
    assert size < 260_000_000, size
    from schedctl import __version__

    proc = _podman(
        "run", "--rm", *_run_options(), "--entrypoint", "sh", image, "-c", "schedctl --version; id -u"
    )
    assert proc.stdout.splitlines() == [f"schedctl, version {__version__}", str(IMAGE_UID)], proc.stderr
    # What the build used stays in its first stage: no pip, no compiler, no sources, no wheels, no pip cache.
    left = "for t in pip pip3 gcc cc; do command -v $t; done; ls -d /src /wheels /root/.cache/pip 2>/dev/null"
    proc = _podman(
        "run", "--rm", *_run_options(), "--user", "0", "--entrypoint", "sh", image, "-c", left + "; true"
    )
    assert proc.stdout == "", proc.stdout


def test_all_in_one_on_sqlite_with_a_mounted_job_folder(containers: Containers, tmp_path: Path) -> None:
    jobs = _job_folder(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, IMAGE_UID, IMAGE_UID)
    port = _free_port()
    # The image's own command: serve --role all --migrate, on the SQLite file in /var/lib/schedctl.
    name = containers.start(
        env={"SCHEDCTL_METRICS_PORT": str(port)},
        volumes=(f"{jobs}:/etc/schedctl/jobs:ro", f"{data}:/var/lib/schedctl"),
    )
    url = f"sqlite:///{data / 'schedctl.db'}"
    _wait_for("succeeded run of the per-second job", lambda: _succeeded(url), containers)
    _wait_for("200 from /readyz", lambda: _status(port, "/readyz") == 200, containers)
    # The job ran inside the container, as the image's user. A succeeded run by its tick: the job's latest
    # run may be one that is still running, with no output yet (seen under load).
    tick = next(r["scheduled_for"] for r in _runs(url) if r["state"] == "succeeded")
    proc = subprocess.run(
        [sys.executable, "-m", "schedctl", "logs", "tick", tick, "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
    )
    assert proc.stdout.strip() == str(IMAGE_UID), proc.stdout + proc.stderr
    health = _podman("healthcheck", "run", name, check=False)
    assert health.returncode == 0, health.stdout + health.stderr + containers.logs(name)
    assert containers.stop(name) == 0, containers.logs(name)


@pytest.mark.parametrize("backend", ["postgresql", "mysql"])
def test_scheduler_and_worker_containers_on_a_server(
    backend: str, containers: Containers, tmp_path: Path
) -> None:
    with contextlib.contextmanager(private_url)(backend, tmp_path) as url:
        # As examples/kubernetes/migrate-job.yaml runs it, before the first deploy.
        upgrade = containers.run("db", "upgrade", env={"SCHEDCTL_DATABASE_URL": url})
        assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
        jobs = _job_folder(tmp_path)
        ports = {"scheduler": _free_port(), "worker": _free_port()}
        identity = {role: f"image-{role}-{uuid.uuid4().hex[:6]}" for role in ports}
        names = {
            role: containers.start(
                "serve",
                "--role",
                role,
                env={
                    "SCHEDCTL_DATABASE_URL": url,
                    "SCHEDCTL_IDENTITY": identity[role],
                    "SCHEDCTL_METRICS_PORT": str(ports[role]),
                },
                volumes=(f"{jobs}:/etc/schedctl/jobs:ro",) if role == "scheduler" else (),
            )  # fmt: skip
            for role in ports
        }
        _wait_for(
            "run that the worker container finished", lambda: _succeeded(url, identity["worker"]), containers
        )
        for role, port in ports.items():
            _wait_for(
                f"200 from the {role}'s /readyz", lambda p=port: _status(p, "/readyz") == 200, containers
            )
        for name in names.values():
            assert containers.stop(name) == 0, containers.logs(name)


def test_the_healthcheck_is_unhealthy_while_the_database_is_down(containers: Containers) -> None:
    port = _free_port()
    with socket.socket() as closed:  # a port nothing listens on: bound, never listening
        closed.bind(("127.0.0.1", 0))
        down = f"postgresql://postgres@127.0.0.1:{closed.getsockname()[1]}/schedctl"
        name = containers.start(
            "serve",
            "--role",
            "worker",
            env={"SCHEDCTL_DATABASE_URL": down, "SCHEDCTL_METRICS_PORT": str(port)},
        )
        # Live (the loops turn, retrying) but not ready: the health check says so, naming /readyz.
        _wait_for("200 from /livez", lambda: _status(port, "/livez") == 200, containers)
        health = _podman("healthcheck", "run", name, check=False)
        assert health.returncode == 1, health.stdout + health.stderr
        log = containers.state(name)["Health"]["Log"][-1]
        assert log["ExitCode"] == 1 and f"127.0.0.1:{port}/readyz: 503" in log["Output"], log
