"""A TCP link the harness controls: it forwards between a process and its database, and on demand stops
forwarding without closing anything (a silent partition: no data, no FIN, no RST), or delays every chunk.

Only 127.0.0.1 and namespaces the harness creates (``Namespace``, prefixed with the run's name) are used. A freeze can be armed to fall right after a given statement has been forwarded to the
server, so the server runs it and then hears nothing more: the leader is cut off *inside* its renewal or its
fence, holding the row lock. Statements are recognised by their SQL text; psycopg prepares a statement it
has run five times and then sends only its name (``_pg3_N``). So each connection's pump learns every name
from the Parse messages it forwards, armed or not (a leader that has fenced five times before the harness
arms would otherwise never be recognised again), and recognises the Bind messages that use them.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Sequence

# A Parse message: 'P', its int32 length, the statement's name, its text (each NUL-terminated).
_PARSE = re.compile(rb"P[\s\S]{4}(_pg3_\d+)\x00([^\x00]*)\x00")

# What a leader's renewal and fence look like on the wire, on every backend.
RENEWAL = (b"UPDATE scheduler_lease SET",)
FENCE = (b"FROM scheduler_lease", b"FOR SHARE", b"LOCK IN SHARE MODE")


class Link:
    """One listening port (on 127.0.0.1, or a namespace's host end) forwarding every connection to ``target``."""

    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((listen_host, 0))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.port = int(self._listener.getsockname()[1])
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._armed: tuple[bytes, ...] | None = None  # freeze after forwarding a statement with all of these
        self.frozen_at: float | None = None  # time.time() of the last freeze
        self.delay = 0.0  # seconds added to every chunk, each way
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name=f"link-{self.port}").start()

    # -- faults ------------------------------------------------------------------------------------------
    def freeze(self) -> None:
        with self._lock:
            self._flowing.clear()
            self.frozen_at = time.time()

    def freeze_after(self, *patterns: bytes) -> None:
        """Freeze right after forwarding the next client chunk holding ``patterns[0]`` and one of the rest."""
        with self._lock:
            self._armed = tuple(patterns)
            self.frozen_at = None

    def heal(self) -> None:
        with self._lock:
            self._armed = None
            self.delay = 0.0
            self._flowing.set()

    @property
    def frozen(self) -> bool:
        return not self._flowing.is_set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        self._listener.close()
        for sock in list(self._sockets):
            try:
                sock.close()
            except OSError:
                pass

    # -- forwarding --------------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            for src, dst, upstream in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pump, args=(src, dst, upstream), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool) -> None:
        src.settimeout(0.2)
        prepared: dict[bytes, bytes] = {}  # this connection's prepared statements: name -> text
        try:
            while not self._closed.is_set():
                if not self._wait_flowing():
                    return
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    self._wait_flowing()  # a close is held back by a partition like anything else
                    dst.shutdown(socket.SHUT_WR)
                    return
                if self.delay:
                    time.sleep(self.delay)
                if not self._wait_flowing():
                    return
                dst.sendall(data)
                if upstream:
                    prepared.update(_PARSE.findall(data))
                if upstream and self._armed is not None and self._matches(data, prepared):
                    self.freeze()
                    with self._lock:
                        self._armed = None
        except OSError:
            for sock in (src, dst):
                try:
                    sock.close()
                except OSError:
                    pass

    def _wait_flowing(self) -> bool:
        while not self._flowing.wait(0.2):
            if self._closed.is_set():
                return False
        return not self._closed.is_set()

    def _matches(self, data: bytes, prepared: dict[bytes, bytes]) -> bool:
        armed: Sequence[bytes] | None = self._armed
        if not armed:
            return False
        if _holds(data, armed):
            return True
        return any(b"\x00" + name + b"\x00" in data for name, text in prepared.items() if _holds(text, armed))


def _holds(text: bytes, patterns: Sequence[bytes]) -> bool:
    """Whether ``text`` holds ``patterns[0]`` and one of the rest."""
    first, rest = patterns[0], patterns[1:]
    return first in text and (not rest or any(p in text for p in rest))


class Namespace:
    """A network namespace joined to this host by a veth pair.

    The process runs inside (``prefix`` its command line); its database link listens on the host end's
    address. ``cut`` drops real packets both ways. (``tc netem`` would add loss and delay, but this kernel
    has no netem qdisc.) ``delete`` removes the namespace and the pair; it never fails.
    """

    def __init__(self, name: str, host_if: str, subnet: str) -> None:
        self.name, self.host_if, self.ns_if = name, host_if, host_if + "n"
        self.host_ip, self.ns_ip = f"{subnet}.1", f"{subnet}.2"
        self._ip("netns", "add", name)
        try:
            self._ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            self._ip("link", "set", self.ns_if, "netns", name)
            self._ip("addr", "add", f"{self.host_ip}/24", "dev", self.host_if)
            self._ip("link", "set", self.host_if, "up")
            for args in (
                ("addr", "add", f"{self.ns_ip}/24", "dev", self.ns_if),
                ("link", "set", self.ns_if, "up"),
            ):
                self._ip("netns", "exec", name, "ip", *args)
            self._ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        except Exception:
            self.delete()
            raise

    @property
    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def cut(self) -> None:
        """Both ends of the pair down: every packet dropped, no RST, sockets left open on both sides."""
        self._ip("link", "set", self.host_if, "down")
        self._ip("netns", "exec", self.name, "ip", "link", "set", self.ns_if, "down")

    def heal(self) -> None:
        self._ip("link", "set", self.host_if, "up")
        self._ip("netns", "exec", self.name, "ip", "link", "set", self.ns_if, "up")

    def delete(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=10)
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True, timeout=10)

    @staticmethod
    def _ip(*args: str) -> None:
        Namespace._run("ip", *args)

    @staticmethod
    def _run(*args: str) -> None:
        done = subprocess.run(args, capture_output=True, text=True, timeout=10)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")


def free_subnet() -> str:
    """A 10.215.N /24 no route on this host uses yet."""
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, timeout=10).stdout
    for n in range(os.getpid() % 200, os.getpid() % 200 + 250):
        subnet = f"10.215.{n % 250 + 1}"
        if f"{subnet}." not in routes:
            return subnet
    raise RuntimeError("no free 10.215.N.0/24 subnet for a namespace")
