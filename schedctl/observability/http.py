"""``/metrics``, ``/livez`` and ``/readyz`` on one port, served from a daemon thread.

- ``/metrics``: Prometheus text from ``metrics.REGISTRY``.
- ``/livez``: 200 while every registered loop turns (``health``); never asks the database, so a database
  outage cannot turn into a restart storm.
- ``/readyz``: 200 when the database answers and its schema is the one this version understands; cached for
  ``READY_CACHE_SECONDS`` so a probe storm costs one query a second. Never depends on leadership: standbys are
  ready, or a rolling update of three replicas would stall on the two that are not leading.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from schedctl.errors import SchedctlError
from schedctl.observability import health
from schedctl.observability.metrics import REGISTRY

if TYPE_CHECKING:
    from schedctl.store import Store

log = logging.getLogger("schedctl.observability.http")

READY_CACHE_SECONDS = 1.0


@dataclass(frozen=True)
class Readiness:
    ok: bool
    detail: str


class ReadinessCheck:
    """Database reachable (``SELECT 1``) and schema current (``migrate.check``), remembered for a second."""

    def __init__(self, store: Store | None, cache_seconds: float = READY_CACHE_SECONDS) -> None:
        self.store = store
        self.cache_seconds = cache_seconds
        self._lock = threading.Lock()
        self._cached: tuple[float, Readiness] | None = None

    def __call__(self) -> Readiness:
        with self._lock:
            now = time.monotonic()
            if self._cached is not None and now - self._cached[0] < self.cache_seconds:
                return self._cached[1]
            result = self._check()
            self._cached = (time.monotonic(), result)
            return result

    def _check(self) -> Readiness:
        if self.store is None:
            return Readiness(True, "ok (no database)")
        try:
            from sqlalchemy import text

            from schedctl.store import migrate

            with self.store.connect() as conn:
                conn.execute(text("SELECT 1"))
            status = migrate.check(self.store)
        except Exception as exc:  # any failure is "not ready", said in one line; the process stays up
            return Readiness(False, f"database not usable: {_one_line(exc)}")
        if not status.ok:
            return Readiness(
                False,
                f"schema at {status.current}, this schedctl needs {status.head}: run `schedctl db upgrade`",
            )
        return Readiness(True, "ok")


def _one_line(exc: BaseException) -> str:
    from schedctl.observability.logging import mask_secrets

    text = str(exc).strip().splitlines()
    return mask_secrets(text[0] if text else type(exc).__name__)


class _Handler(BaseHTTPRequestHandler):
    server: ObservabilityServer
    server_version = "schedctl"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
        elif path == "/livez":
            live = health.liveness()
            self._send(200 if live.ok else 503, (live.describe() + "\n").encode())
        elif path == "/readyz":
            ready = self.server.readiness()
            self._send(200 if ready.ok else 503, (ready.detail + "\n").encode())
        else:
            self._send(404, b"not found: try /metrics, /livez or /readyz\n")

    def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # Probes every few seconds would drown the log at INFO.
        log.debug(format, *args, extra={"event": "http_request"})


class ObservabilityServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], store: Store | None) -> None:
        super().__init__(address, _Handler)
        self.readiness = ReadinessCheck(store)
        self.thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def start(host: str, port: int, store: Store | None) -> ObservabilityServer:
    """Bind ``host:port`` (port 0 picks a free one: read ``server.port``) and serve in a daemon thread.

    Raises SchedctlError (one line, exit 1) when the address cannot be bound: a port in use, a bad host.
    """
    try:
        server = ObservabilityServer((host, port), store)
    except OSError as exc:
        raise SchedctlError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    thread = threading.Thread(target=server.serve_forever, name="schedctl-http", daemon=True)
    server.thread = thread
    thread.start()
    log.debug(
        "http endpoint on %s:%d",
        host,
        server.port,
        extra={"event": "http_started", "host": host, "port": server.port},
    )
    return server
