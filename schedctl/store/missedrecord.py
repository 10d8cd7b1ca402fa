"""The lasting record of missed ticks: what history pruning keeps so `missed` and `replay` still name them.

Pruning deletes finished runs beyond the history limits and moves the job's history mark past them, and a
tick before the mark without a row is no hole: its run was pruned. So before the mark moves, every tick of
the pruned stretch that did not run is folded into ``missed_ranges``: runs of skipped rows with one reason
and detail become one range each, and stretches of ticks that never got a row (a leader down for a day: the
scheduler writes at most 1000 skipped rows per pass) become one range each too. `missed` then explains the
stretch exactly as it did before pruning. A range lasts ``keep_missed`` seconds after its last tick, whatever
the run history limits; a range tick whose (replayed) run is pruned later is taken out of it, since it ran.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from schedctl.jobs.job import RunState
from schedctl.store.dialect import db_now, id_chunks, in_list, insert_ignore, now_plus, select_db_now
from schedctl.store.missedranges import fires_in, schedule_of
from schedctl.store.rows import RangeRecord
from schedctl.store.schema import job_runs, job_state, missed_ranges

if TYPE_CHECKING:
    from schedctl.timing.cron import Schedule

DEFAULT_KEEP_MISSED = 7 * 86400.0  # seconds skipped/missed evidence is kept, whatever the run history limits


_TINY = timedelta(microseconds=1)


@dataclass
class _Range:
    first: datetime
    last: datetime
    ticks: int
    reason: str | None
    detail: str | None

    def row(self, job_id: str, key: str) -> dict[str, object]:
        return {
            "job_id": job_id,
            "first_tick": self.first,
            "last_tick": self.last,
            "ticks": self.ticks,
            "reason": self.reason,
            "reason_detail": self.detail,
            "schedule_key": key,
            "recorded_at": db_now(),
        }


def fold_before(
    conn: Connection, job_id: str, mark: datetime, pruned: Sequence[datetime], keep_missed: float
) -> None:
    """Before the history mark moves to ``mark``: fold the skipped rows and unrecorded ticks below it into
    ranges and delete those skipped rows; take the ticks of ``pruned`` (finished runs being deleted) out of
    any older range. Ticks older than ``keep_missed`` seconds are not recorded: they would expire at once,
    and counting a year-long stretch of a per-second job would hold the transaction for minutes."""
    state = conn.execute(
        select(job_state.c.defined_at, job_state.c.history_start, job_state.c.schedule_key).where(
            job_state.c.job_id == job_id
        )
    ).first()
    key = state.schedule_key if state is not None else ""
    schedule = schedule_of(key) if state is not None else None
    _punch(conn, job_id, pruned)
    r = job_runs.c
    rows = conn.execute(
        select(r.scheduled_for, r.state, r.reason, r.reason_detail)
        .where(r.job_id == job_id, r.scheduled_for < mark)
        .order_by(r.scheduled_for)
    ).all()
    floor = select_db_now(conn) - timedelta(seconds=keep_missed)
    ranges = [g for g in _ranges(rows, state, schedule, floor) if g.last >= floor]
    if ranges:
        # Two workers may prune one job at once: both fold the same ranges, and the second keeps the first's.
        insert_ignore(conn, missed_ranges, [g.row(job_id, key) for g in ranges])
    conn.execute(
        delete(job_runs).where(r.job_id == job_id, r.state == RunState.SKIPPED, r.scheduled_for < mark)
    )


def _ranges(
    rows: Iterable[object], state: object | None, schedule: Schedule | None, floor: datetime
) -> list[_Range]:
    out: list[_Range] = []
    defined_at = getattr(state, "defined_at", None)
    history_start = getattr(state, "history_start", None)
    # Ticks up to the old mark were folded by an earlier prune; ticks up to the definition are not the job's.
    start = defined_at
    if history_start is not None and defined_at is not None:
        start = max(defined_at, history_start - _TINY)
    prev = start
    current: _Range | None = None

    def flush() -> None:
        nonlocal current
        if current is not None:
            out.append(current)
            current = None

    for row in rows:
        at, run_state = row.scheduled_for, row.state  # type: ignore[attr-defined]
        if schedule is not None and prev is not None and at > prev:
            nxt = schedule.next_after(max(prev, floor - _TINY))
            if nxt is not None and nxt < at:  # ticks between two rows that never got one
                flush()
                count = sum(1 for _ in fires_in(schedule, nxt, at - _TINY))
                out.append(_Range(nxt, at - _TINY, count, None, None))
        if run_state == RunState.SKIPPED:
            reason, detail = row.reason, row.reason_detail  # type: ignore[attr-defined]
            if (
                current is not None
                and (current.reason, current.detail) == (reason, detail)
                and schedule is not None
                and start is not None
                and current.last > start
                and schedule.next_after(current.last) == at
            ):
                current.last, current.ticks = at, current.ticks + 1
            else:
                flush()
                current = _Range(at, at, 1, reason, detail)
        else:
            flush()
        if prev is None or at > prev:
            prev = at
    flush()
    return out


def _punch(conn: Connection, job_id: str, pruned: Sequence[datetime]) -> None:
    """A replayed tick ran: once its run is pruned, the range that held it must not name it again."""
    if not pruned:
        return
    m = missed_ranges.c
    hit = conn.execute(
        select(m.first_tick, m.last_tick, m.ticks, m.reason, m.reason_detail, m.schedule_key).where(
            m.job_id == job_id, m.first_tick <= max(pruned), m.last_tick >= min(pruned)
        )
    ).all()
    gone = set(pruned)
    for rng in hit:
        inside = {t for t in gone if rng.first_tick <= t <= rng.last_tick}
        if not inside:
            continue
        schedule = schedule_of(rng.schedule_key)
        conn.execute(delete(missed_ranges).where(m.job_id == job_id, m.first_tick == rng.first_tick))
        if schedule is None:
            continue  # a schedule that no longer parses cannot name its ticks: the range goes
        pieces: list[_Range] = []
        for t in fires_in(schedule, rng.first_tick, rng.last_tick):
            if t in inside:
                pieces.append(_Range(t, t, 0, rng.reason, rng.reason_detail))  # a separator
            elif pieces and pieces[-1].ticks:
                pieces[-1].last, pieces[-1].ticks = t, pieces[-1].ticks + 1
            else:
                pieces.append(_Range(t, t, 1, rng.reason, rng.reason_detail))
        rows = [p.row(job_id, rng.schedule_key) for p in pieces if p.ticks]
        if rows:
            insert_ignore(conn, missed_ranges, rows)


def expire(conn: Connection, job_ids: Iterable[str], keep_missed: float) -> int:
    """Drop the ranges whose last tick is older than ``keep_missed`` seconds; returns how many went."""
    ids = sorted(set(job_ids))
    if not ids:
        return 0
    m = missed_ranges.c
    result = conn.execute(
        delete(missed_ranges).where(m.job_id.in_(ids), m.last_tick < now_plus(-keep_missed))
    )
    return int(result.rowcount or 0)


# -- reading ----------------------------------------------------------------------------------------------

_RANGE_COLUMNS = (
    missed_ranges.c.job_id,
    missed_ranges.c.first_tick,
    missed_ranges.c.last_tick,
    missed_ranges.c.ticks,
    missed_ranges.c.reason,
    missed_ranges.c.reason_detail,
    missed_ranges.c.schedule_key,
)
assert [f.name for f in fields(RangeRecord)] == [c.name for c in _RANGE_COLUMNS]


def ranges_between_by_job(
    conn: Connection, job_ids: Sequence[str], after: datetime, until: datetime
) -> dict[str, list[RangeRecord]]:
    """Each job's missed ranges reaching into ``(after, until)``, oldest first."""
    out: dict[str, list[RangeRecord]] = {}
    m = missed_ranges.c
    for chunk in id_chunks(conn, job_ids):
        query = (
            select(*_RANGE_COLUMNS)
            .where(in_list(conn, m.job_id, chunk), m.first_tick < until, m.last_tick > after)
            .order_by(m.job_id, m.first_tick)
        )
        found: dict[str, list[RangeRecord]] = {j: [] for j in chunk}
        for row in conn.execute(query):
            found[row.job_id].append(RangeRecord(*row))
        out.update(found)
    return out
