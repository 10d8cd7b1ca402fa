"""Liveness: is every loop of this process still turning? And are its database writes failing?

Each loop says how long it may stay silent (``register``) and calls ``mark_turn`` once per turn. ``/livez``
fails when any registered loop has been silent longer than it promised. This never touches the database:
a database outage must make the pod unready, not restart it (a restart storm helps nobody).

A loop whose database calls fail says so (``store_failing``) until one succeeds again (``store_working``):
``/readyz`` is not ready meanwhile, even when the database still answers its own probe, since a full disk
refuses the loops' writes while it answers every read.

Time is ``time.monotonic``: a wall-clock step (NTP, a VM resume) must not fail or pass liveness.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

# A loop that calls mark_turn without registering gets this silence budget.
DEFAULT_MAX_SILENCE = 60.0

_lock = threading.Lock()
_budget: dict[str, float] = {}
_last_turn: dict[str, float] = {}
_store_failing: dict[str, str] = {}  # loop -> why its last database call failed


@dataclass(frozen=True)
class LoopHealth:
    loop: str
    silent_for: float  # seconds since the last turn (or since registration, before the first one)
    max_silence: float

    @property
    def ok(self) -> bool:
        return self.silent_for <= self.max_silence


@dataclass(frozen=True)
class Liveness:
    loops: tuple[LoopHealth, ...]

    @property
    def ok(self) -> bool:
        return all(loop.ok for loop in self.loops)

    def describe(self) -> str:
        if not self.loops:
            return "ok (no loops registered)"
        parts = [
            f"{lh.loop}: {'ok' if lh.ok else 'STALLED'} ({lh.silent_for:.1f}s since last turn, max {lh.max_silence:g}s)"
            for lh in self.loops
        ]
        return "\n".join(parts)


def register(loop: str, max_silence_seconds: float, now: float | None = None) -> None:
    """Declare a loop; its silence is counted from now, so a slow first turn is not a failure."""
    at = time.monotonic() if now is None else now
    with _lock:
        _budget[loop] = float(max_silence_seconds)
        _last_turn[loop] = at


def unregister(loop: str) -> None:
    """A loop that ended on purpose (shutdown) is not a stalled one."""
    with _lock:
        _budget.pop(loop, None)
        _last_turn.pop(loop, None)
        _store_failing.pop(loop, None)


def store_failing(loop: str, reason: str) -> None:
    """The loop's database calls fail (``reason``, one line): not ready until ``store_working``."""
    with _lock:
        _store_failing[loop] = reason


def store_working(loop: str) -> None:
    with _lock:
        _store_failing.pop(loop, None)


def store_failures() -> dict[str, str]:
    """Loop -> why its database calls fail, for the loops whose last one failed."""
    with _lock:
        return dict(sorted(_store_failing.items()))


def mark_turn(loop: str, now: float | None = None) -> None:
    at = time.monotonic() if now is None else now
    with _lock:
        _budget.setdefault(loop, DEFAULT_MAX_SILENCE)
        _last_turn[loop] = at


def liveness(now: float | None = None) -> Liveness:
    at = time.monotonic() if now is None else now
    with _lock:
        loops = tuple(
            LoopHealth(loop=name, silent_for=max(0.0, at - _last_turn[name]), max_silence=_budget[name])
            for name in sorted(_budget)
        )
    return Liveness(loops)


def is_live(now: float | None = None) -> bool:
    """True when every registered loop turned within its budget."""
    return liveness(now).ok


def reset() -> None:
    """Forget every loop (tests, and a service that starts again in the same process)."""
    with _lock:
        _budget.clear()
        _last_turn.clear()
        _store_failing.clear()
