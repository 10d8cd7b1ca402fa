"""``/metrics``, ``/livez`` and ``/readyz`` on one port, served from a daemon thread.

- ``/metrics``: Prometheus text from ``metrics.REGISTRY``.
- ``/livez``: 200 while every registered loop turns (``health``); never asks the database, so a database
  outage cannot turn into a restart storm.
- ``/readyz``: 200 when the database answers, its schema is the one this version understands, and no loop of
  this process has its database calls failing (a full disk answers reads but refuses writes); cached for
  ``READY_CACHE_SECONDS`` so a probe storm costs one query a second. Never depends on leadership: standbys are
  ready, or a rolling update of three replicas would stall on the two that are not leading.

The port is open to anyone who can reach it, so the server is bounded (issue 16): prometheus-client's own
exposition (``generate_latest``) behind the standard library's HTTP parser, with
- a read and write timeout on every connection (``READ_TIMEOUT``) and a deadline for sending the request
  (``CONNECTION_DEADLINE``), so a client that never finishes its headers, or trickles them a byte at a time,
  costs a few seconds, not forever;
- at most ``connection_cap()`` connections at once. When they are all taken, the oldest one still waiting for
  its request is dropped to make room (an idle flood cannot lock a probe out); when every one of them is
  being answered, the new one is closed at once. Either way the server holds a bounded number of file
  descriptors and threads, and the scheduler and the worker keep theirs (a flood of idle connections once
  took every descriptor and every run failed with EMFILE).
"""

from __future__ import annotations

import errno
import logging
import resource
import socket
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
READ_TIMEOUT = 3.0  # seconds a connection may stay silent (each read, each write)
CONNECTION_DEADLINE = 10.0  # seconds to send a request, however slowly it trickles in
MAX_CONNECTIONS = 32  # a probe every few seconds and a scrape every 15 s need two or three
LISTEN_BACKLOG = 128


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
        failing = health.store_failures()
        if failing:
            said = "; ".join(f"{loop}: {_first_line(why, 'failing')}" for loop, why in failing.items())
            return Readiness(False, f"database writes failing: {said}")
        try:
            from schedctl.store import access, migrate

            access.ping(self.store)
            status = migrate.check(self.store)
            if not status.ok:
                if status.newer:  # a deploy upgraded the schema under this (old) process: replace it
                    return Readiness(
                        False, f"schema at {status.current}, newer than this schedctl knows ({status.head})"
                    )
                return Readiness(
                    False,
                    f"schema at {status.current}, this schedctl needs {status.head}: run `schedctl db upgrade`",
                )
            access.require_writes(self.store)  # answering but refusing our writes is not ready either
        except Exception as exc:  # any failure is "not ready", said in one line; the process stays up
            return Readiness(False, f"database not usable: {_first_line(str(exc), type(exc).__name__)}")
        return Readiness(True, "ok")


def _first_line(text: str, otherwise: str) -> str:
    """A driver's message may run to several lines (the SQL, a hint): the probe answers with the first, with
    any password in it masked, or ``otherwise`` when there is none."""
    from schedctl.observability.logging import mask_secrets

    lines = text.strip().splitlines()
    return mask_secrets(lines[0] if lines else otherwise)


def connection_cap(cap: int = MAX_CONNECTIONS) -> int:
    """Connections served at once: ``cap``, or fewer when the descriptor limit is low (1/16 of it)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return cap
    return max(2, min(cap, soft // 16))


@dataclass
class _Connection:
    accepted_at: float
    answering: bool = False  # its request line and headers have arrived: it is not idle any more
    dropped: bool = False


class _Handler(BaseHTTPRequestHandler):
    server: ObservabilityServer
    server_version = "schedctl"
    timeout = READ_TIMEOUT  # StreamRequestHandler puts it on the socket: every read and write is bounded

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        if parsed:
            self.server.answering(self.request)
        return parsed

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
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self, address: tuple[str, int], store: Store | None, max_connections: int | None = None
    ) -> None:
        super().__init__(address, _Handler)
        self.readiness = ReadinessCheck(store)
        self.thread: threading.Thread | None = None
        self.max_connections = max_connections or connection_cap()
        self._lock = threading.Lock()
        self._connections: dict[socket.socket, _Connection] = {}

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            return super().get_request()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                # The process is out of descriptors (not because of us: we hold a bounded number). The
                # listening socket stays readable, so without a pause this thread would spin on accept().
                time.sleep(0.5)
            raise

    def verify_request(self, request: Any, client_address: Any) -> bool:
        """Admit the connection, making room by dropping the oldest idle one; False closes it at once."""
        now = time.monotonic()
        with self._lock:
            self._drop_expired(now)
            live = [(c.accepted_at, s) for s, c in self._connections.items() if not c.dropped]
            if len(live) >= self.max_connections:
                idle = [(t, s) for t, s in live if not self._connections[s].answering]
                if not idle:
                    return False
                self._drop(min(idle, key=lambda pair: pair[0])[1])
            self._connections[request] = _Connection(accepted_at=now)
        return True

    def answering(self, request: socket.socket) -> None:
        with self._lock:
            connection = self._connections.get(request)
            if connection is not None:
                connection.answering = True

    def service_actions(self) -> None:
        # Called by serve_forever() every turn (at least every poll interval, 0.5 s).
        with self._lock:
            self._drop_expired(time.monotonic())

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._connections.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away, or one dropped above: not worth a traceback on stderr.
        log.debug("http connection from %s ended with an error", client_address, exc_info=True)

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._connections)

    def _drop_expired(self, now: float) -> None:
        for sock, connection in list(self._connections.items()):
            # An answer being written is bounded by the write timeout alone: a big scrape may take a while.
            expired = now - connection.accepted_at > CONNECTION_DEADLINE
            if expired and not connection.dropped and not connection.answering:
                self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        """Wake the connection's thread (its read returns end-of-file); that thread closes the socket."""
        self._connections[sock].dropped = True
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

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
