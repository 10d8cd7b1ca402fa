"""The delay between retries against an unreachable database, shared by the worker, the scheduler and ``serve``."""

from __future__ import annotations


class Backoff:
    """Starts at ``minimum``, doubles on each failure up to ``maximum``, and returns to ``minimum`` on success."""

    def __init__(self, minimum: float, maximum: float) -> None:
        self.minimum = minimum
        self.maximum = maximum
        self.delay = minimum

    def grow(self) -> float:
        """Double the delay (bounded) after a failure, and return the new one."""
        self.delay = min(self.delay * 2, self.maximum)
        return self.delay

    def reset(self) -> None:
        self.delay = self.minimum
