"""When some scheduler held the lease, merged over its terms: tells "no leader" from "a leader but nothing"
for `missed`, each term judged by the catch-up grace its leader recorded."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from schedctl.jobs.job import DEFAULT_CATCH_UP_GRACE, LeaseEndReason
from schedctl.store.rows import TermRecord
from schedctl.timing.timetext import clock_text


@dataclass
class _Cover:
    start: datetime
    end: datetime
    terms: list[TermRecord]  # in order of acquisition; terms[0] began this stretch of leadership

    @property
    def closer(self) -> TermRecord:
        """The term whose end closed the stretch."""
        return max(self.terms, key=lambda t: t.held_until)


class LeaseTimeline:
    """When some scheduler held the lease, merged over terms, to tell "no leader" from "a leader but nothing"."""

    def __init__(
        self, terms: Iterable[TermRecord], now: datetime, fallback_grace: float = DEFAULT_CATCH_UP_GRACE
    ) -> None:
        self.now = now
        self.fallback_grace = fallback_grace
        covers: list[_Cover] = []
        for t in sorted(terms, key=lambda t: t.acquired_at):
            if covers and t.acquired_at <= covers[-1].end:
                covers[-1].terms.append(t)
                covers[-1].end = max(covers[-1].end, t.held_until)
            else:
                covers.append(_Cover(t.acquired_at, t.held_until, [t]))
        self.covers = covers
        self._starts = [c.start for c in covers]
        graces = [self.grace_of(t) for c in covers for t in c.terms]
        self.max_grace = max(graces, default=timedelta(seconds=fallback_grace))
        self._gap_memo: dict[tuple[int, date], str] = {}

    def grace_of(self, term: TermRecord) -> timedelta:
        """The grace that term's leader split late from missed ticks by."""
        grace = term.catch_up_grace if term.catch_up_grace is not None else self.fallback_grace
        return timedelta(seconds=grace)

    def holder_near(self, tick: datetime) -> TermRecord | None:
        """The latest term held at some instant of ``[tick, tick + its grace]``: that leader should have
        recorded the tick (a leader that arrives within its grace dispatches it late, not missed)."""
        k = bisect.bisect_right(self._starts, tick + self.max_grace) - 1
        while k >= 0 and self.covers[k].end >= tick:  # covers are disjoint: an earlier one ends earlier
            held = [
                t
                for t in self.covers[k].terms
                if t.acquired_at <= tick + self.grace_of(t) and t.held_until >= tick
            ]
            if held:
                return held[-1]
            k -= 1
        return None

    def last_end(self) -> TermRecord | None:
        """The term that ended last, when no term holds now; None while one does (or none ever did)."""
        if not self.covers or self.covers[-1].end > self.now:
            return None
        return self.covers[-1].closer

    def gap_text(self, tick: datetime) -> str:
        """The sentence for a tick no leader held: which term ended last, and when the next began."""
        i = bisect.bisect_right(self._starts, tick) - 1
        # A week-long outage of a minutely job is 10,000 ticks in one gap: one sentence per gap and day.
        key = (i, tick.astimezone(UTC).date())
        text = self._gap_memo.get(key)
        if text is None:
            text = self._gap_memo[key] = self._gap_sentence(i, tick)
        return text

    def _gap_sentence(self, i: int, tick: datetime) -> str:
        before = self.covers[i].closer if i >= 0 else None
        after = self.covers[i + 1].terms[0] if i + 1 < len(self.covers) else None
        if before is None:
            head = "no scheduler had held the lease"
        else:
            head = (
                f"no scheduler held the lease from {clock_text(before.held_until, tick)} "
                f"(term {before.term}, {before.holder}, ended: {self._end_reason(before)})"
            )
        if after is None:
            return (
                f"{head} and none has since" if before is not None else "no scheduler has ever held the lease"
            )
        return f"{head} until {clock_text(after.acquired_at, tick)} (term {after.term}, {after.holder})"

    def _end_reason(self, term: TermRecord) -> str:
        if term.end_reason:
            return term.end_reason
        return LeaseEndReason.EXPIRED if term.expires_at <= self.now else "still held"
