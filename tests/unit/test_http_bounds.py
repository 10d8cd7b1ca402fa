"""Issue 16 item 2: the metrics/health server is bounded: read timeout, connection cap, idle ones dropped first."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from schedctl.observability import http as obs_http


@pytest.fixture
def server() -> Iterator[obs_http.ObservabilityServer]:
    srv = obs_http.start("127.0.0.1", 0, None)
    try:
        yield srv
    finally:
        srv.stop()


def _livez(port: int, timeout: float = 2.0) -> tuple[int, float]:
    """The probe's status and how long it took. 503 counts as an answer: other tests in this process may
    leave a stalled loop registered in the health module; what is tested here is that the server answers."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/livez", timeout=timeout) as resp:
            return resp.status, time.monotonic() - started
    except urllib.error.HTTPError as exc:
        return exc.code, time.monotonic() - started


def _idle(port: int, count: int) -> list[socket.socket]:
    """Connections that start a request and never finish their headers (a slowloris)."""
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n")
        socks.append(sock)
    return socks


def _closed_by_server(sock: socket.socket, wait: float) -> bool:
    sock.settimeout(wait)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_a_silent_connection_is_closed_after_the_read_timeout(server: obs_http.ObservabilityServer) -> None:
    (sock,) = _idle(server.port, 1)
    try:
        # READ_TIMEOUT is 3 s; 8 s of margin for a loaded machine. Without a timeout it never closes.
        assert _closed_by_server(sock, obs_http.READ_TIMEOUT + 8)
    finally:
        sock.close()


def test_a_request_trickled_in_is_cut_at_the_deadline(
    server: obs_http.ObservabilityServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A byte every 0.5 s never trips the 3 s read timeout; the deadline for the whole request does."""
    monkeypatch.setattr(obs_http, "CONNECTION_DEADLINE", 2.0)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    started = time.monotonic()
    try:
        sock.sendall(b"GET /livez HTTP/1.1\r\n")
        closed = False
        while time.monotonic() - started < 15 and not closed:
            try:
                sock.sendall(b"X")
            except OSError:
                closed = True
                break
            closed = _closed_by_server(sock, 0.5)
        # 2 s deadline, checked every serve_forever turn (0.5 s); 15 s of margin for a loaded machine.
        assert closed
    finally:
        sock.close()


def test_connections_are_capped_and_a_probe_still_gets_in(server: obs_http.ObservabilityServer) -> None:
    socks = _idle(server.port, 3 * server.max_connections)
    try:
        deadline = time.monotonic() + 5
        while server.open_connections > server.max_connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.open_connections <= server.max_connections
        # The oldest idle ones were dropped at once to make room, long before any read timeout.
        assert _closed_by_server(socks[0], 1.0)
        status, took = _livez(server.port)
        assert status in (200, 503) and took < 2.0
    finally:
        for sock in socks:
            sock.close()


def test_when_every_slot_is_answering_the_new_connection_is_closed_at_once() -> None:
    srv = obs_http.ObservabilityServer(("127.0.0.1", 0), None, max_connections=2)
    # Not serving: mark two admitted connections as answering, then offer a third.
    a, b, c = (socket.socket() for _ in range(3))
    try:
        assert srv.verify_request(a, None) and srv.verify_request(b, None)
        srv.answering(a)
        srv.answering(b)
        assert srv.verify_request(c, None) is False
    finally:
        for sock in (a, b, c):
            sock.close()
        srv.server_close()


def test_the_cap_follows_a_low_descriptor_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(obs_http.resource, "getrlimit", lambda _which: (256, 256))
    assert obs_http.connection_cap() == 16
    monkeypatch.setattr(obs_http.resource, "getrlimit", lambda _which: (1 << 20, 1 << 20))
    assert obs_http.connection_cap() == obs_http.MAX_CONNECTIONS
