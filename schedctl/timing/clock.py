"""Time for the loops. Only the loops read the clock; everything below takes ``now`` as an argument."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps; for lease deadlines measured by this process."""

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> bool:
        """Sleep up to ``seconds``; return True when ``wake`` was set first."""


class SystemClock:
    """The real clock. ``skew`` shifts wall time only, to test a replica whose clock is wrong."""

    def __init__(self, skew: timedelta = timedelta(0)) -> None:
        self.skew = skew

    def now(self) -> datetime:
        return datetime.now(UTC) + self.skew

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> bool:
        if wake is None:
            time.sleep(max(0.0, seconds))
            return False
        return wake.wait(max(0.0, seconds))


class FakeClock:
    """A clock tests move by hand; ``sleep`` advances it instead of waiting."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._now = start.astimezone(UTC)
        self._mono = 0.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += timedelta(seconds=seconds)
            self._mono += seconds

    def set(self, instant: datetime) -> None:
        with self._lock:
            delta = (instant.astimezone(UTC) - self._now).total_seconds()
            self._now = instant.astimezone(UTC)
            self._mono += max(0.0, delta)

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> bool:
        if wake is not None and wake.is_set():
            return True
        self.advance(max(0.0, seconds))
        return False
