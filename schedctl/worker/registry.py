"""This process's row in the worker registry: register at start, refresh on a timer, say why it stopped.

The worker loop calls ``due()``/``refresh()`` once per turn (it never sleeps longer than a second, so a
refresh is at most that late); a scheduler-only process runs the same object in a small thread
(``run_in_thread``) so standbys are visible too. Every database error is logged once per outage and
retried at the next interval: the registry is for people looking at the system, and must never stop
a worker from running jobs.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping

from schedctl import __version__
from schedctl.errors import StoreError
from schedctl.store import Store
from schedctl.store import workers as store_workers

log = logging.getLogger("schedctl.registry")

PRUNE_EVERY = 600.0  # seconds between prunes of long-stopped rows by each process


class Registry:
    def __init__(
        self,
        store: Store,
        *,
        identity: str,
        role: str,
        interval: float,
        stale_after: float,
        monotonic: Callable[[], float],
        labels: Mapping[str, str] | None = None,
        slots: int = 0,
        poll_interval: float = 1.0,
    ) -> None:
        from schedctl.timing.zones import tzdata_version

        self.store = store
        self.identity = identity
        self.interval = interval
        self._monotonic = monotonic
        self._me = store_workers.Registration(
            identity=identity,
            role=role,
            host=socket.gethostname(),
            pid=os.getpid(),
            schedctl_version=__version__,
            tzdata_version=tzdata_version(),
            labels=dict(labels or {}),
            slots=slots,
            poll_interval=poll_interval,
            stale_after=stale_after,
        )
        self._registered = False
        self._next = 0.0
        self._next_prune = 0.0
        self._failing = False

    def due(self) -> bool:
        return self._monotonic() >= self._next

    def refresh(self) -> None:
        """Register (first time, or after the row vanished) or refresh; prune old rows now and then."""
        now = self._monotonic()
        self._next = now + self.interval
        try:
            with self.store.begin() as conn:
                if not self._registered or not store_workers.refresh(conn, self.identity):
                    store_workers.register(conn, self._me)
                if now >= self._next_prune:
                    store_workers.prune(conn)
        except StoreError as exc:
            if not self._failing:
                log.warning(
                    "cannot update the worker registry (retrying every %gs): %s",
                    self.interval,
                    exc,
                    extra={"event": "registry_failed"},
                )
            self._failing = True
            return
        if now >= self._next_prune:
            self._next_prune = now + PRUNE_EVERY
        self._registered = True
        self._failing = False

    def stop(self, reason: str) -> None:
        """Mark the row stopped, with why; one try, since the process is on its way out."""
        if not self._registered:
            return
        try:
            with self.store.begin() as conn:
                store_workers.mark_stopped(conn, self.identity, reason)
        except StoreError as exc:
            log.warning(
                "could not mark this process stopped in the worker registry (it will show as stale): %s",
                exc,
                extra={"event": "registry_failed"},
            )

    def run_in_thread(self, stopping: threading.Event, reason: Callable[[], str]) -> threading.Thread:
        """Refresh every interval until ``stopping``; then mark stopped with ``reason()``."""

        def loop() -> None:
            while not stopping.is_set():
                self.refresh()
                stopping.wait(self.interval)
            self.stop(reason())

        thread = threading.Thread(target=loop, name="schedctl-registry", daemon=True)
        thread.start()
        return thread
