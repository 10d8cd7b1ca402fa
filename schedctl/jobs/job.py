"""What a job is: the definition loaded from TOML, its policies, and the snapshot a run carries.

Policies are enums with every member documented, so a value never means "whatever the framework does".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, FrozenInstanceError, dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from schedctl.timing.zones import DstPolicy


class CatchUp(StrEnum):
    """What the scheduler does with ticks older than the catch-up grace (missed while no leader ran)."""

    SKIP = "skip"  # dispatch none of them; the next tick supersedes them (cache warm, metrics rollup)
    LATEST = "latest"  # dispatch only the most recent one (nightly report)
    ALL = (
        "all"  # dispatch every one, in order, up to max_catch_up; beyond that refuse until replayed (billing)
    )


class Concurrency(StrEnum):
    """What happens when a tick is due while a run of the same job is still active (executing, for forbid)."""

    ALLOW = "allow"  # queue it anyway; runs may overlap
    FORBID = "forbid"  # skip a tick due while a run executes; workers never run two of the job's runs at once
    REPLACE = "replace"  # ask the active run to stop (it ends `cancelled`) and queue the new one


class RunState(StrEnum):
    """The life of one row of ``job_runs``."""

    QUEUED = "queued"  # claimed by the scheduler for this tick, waiting for a worker
    RUNNING = "running"  # a worker holds it and heartbeats
    SUCCEEDED = "succeeded"  # the command exited 0
    FAILED = "failed"  # non-zero exit after every retry
    TIMED_OUT = "timed_out"  # still running at its timeout; terminated
    CANCELLED = "cancelled"  # stopped by `schedctl cancel` or by a `replace` successor
    SKIPPED = "skipped"  # the scheduler decided not to run this tick; `reason` says why

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL

    @property
    def active(self) -> bool:
        return self in (RunState.QUEUED, RunState.RUNNING)


_TERMINAL = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT, RunState.CANCELLED})


class SkipReason(StrEnum):
    """Why a tick got a `skipped` row instead of a run (a paused job's ticks get no row: see missed.Reason)."""

    CONCURRENCY = "concurrency"  # forbid: a tick due now while an earlier on-time run is executing
    # forbid: a tick due now while as many on-time runs of the job wait unstarted as it may queue (no worker
    # takes them); see store.dispatch.queue_bound
    QUEUE_FULL = "queue_full"
    STARTING_DEADLINE = "starting_deadline"  # dispatch would have been later than starting_deadline
    CATCH_UP_SKIP = "catch_up_skip"  # missed during downtime; catch_up = "skip"
    CATCH_UP_LATEST = (
        "catch_up_latest"  # missed during downtime; superseded by a later tick (catch_up = "latest")
    )
    CATCH_UP_REFUSED = (
        "catch_up_refused"  # more missed ticks than max_catch_up; waiting for `schedctl replay`
    )


class EventKind(StrEnum):
    """``job_events.kind``: what happened to a job besides its runs (``missed`` and ``status`` read the journal)."""

    DEFINED = "defined"  # first seen by a leader (or by `schedctl pause`); detail: its schedule key
    SCHEDULE_CHANGED = (
        "schedule_changed"  # its schedule key changed; ticks count from here; detail: "old -> new"
    )
    PAUSED = "paused"  # a pause began; detail: its PauseSource
    RESUMED = "resumed"  # a pause ended; detail: its PauseSource
    REPLAYED = "replayed"  # `schedctl replay` queued ticks again; detail: which
    PRUNED = "pruned"  # old runs were deleted; history (and what `missed` may report) starts later
    REFUSED = "refused"  # catch-up refused beyond max_catch_up; detail: the sentence the leader logged


class PauseSource(StrEnum):
    """Who paused a job: ``job_events.detail`` of a pause/resume, and ``paused_by`` for the job file's flag."""

    COMMAND = (
        "schedctl pause"  # `schedctl pause` (job_state.paused_by holds its user@host); lifted by `resume`
    )
    JOB_FILE = "job file"  # `paused = true` in the job file; lifted only by editing the file


class LeaseEndReason(StrEnum):
    """``lease_terms.end_reason``: how a term of the scheduler lease ended (NULL while it lasts)."""

    RELEASED = "released"  # its holder gave it up on a clean shutdown
    EXPIRED = "expired"  # its holder stopped renewing it; the next acquirer closed it at its expiry


class WorkerState(StrEnum):
    """A `serve` process's registry row as `schedctl workers` and `top` judge it (computed, never stored)."""

    ALIVE = "alive"  # seen within its stale_after
    STALE = "stale"  # silent past its stale_after, never marked stopped: crashed or partitioned
    STOPPED = "stopped"  # marked stopped on its way out (``stop_reason`` says why)


class CancelResult(StrEnum):
    """What `schedctl cancel` did to a run that had not ended (one that had is reported by its RunState)."""

    CANCELLED = "cancelled"  # it was queued: cancelled at once
    CANCEL_REQUESTED = "cancel_requested"  # it was running: its worker stops it at its next heartbeat


class StopReason(StrEnum):
    """Why the worker stopped a child itself (``Execution.stop``); a child that exited on its own has none."""

    TIMEOUT = "timeout"  # still running at its job's timeout
    CANCELLED = "cancelled"  # `schedctl cancel`, or a `replace` successor asked it to stop
    LOST = "lost"  # another worker took the run over: this copy records nothing
    SHUTDOWN = "shutdown"  # the worker is stopping: the run is handed back, not failed


class ServeStopReason(StrEnum):
    """``workers.stop_reason``: why a `serve` process marked its registry row stopped. The last two carry a
    detail: fill it in with ``text()``."""

    SHUTDOWN = "shutdown (SIGTERM or SIGINT)"  # a clean stop: what still ran was handed back
    STOPPED_AT_ONCE = "stopped at once (a second SIGTERM or SIGINT)"  # its runs were killed, not handed back
    CRASHED = "crashed: {error}"  # the worker loop raised; error: "Type: message"
    OUTCOMES_ABANDONED = (
        "shutdown; {count} outcomes not recorded (database unreachable)"  # those runs are taken over
    )

    def text(self, **detail: object) -> str:
        return self.value.format(**detail)


class MailOn(StrEnum):
    """When a worker mails a run's output to ``mailto`` (what replaces cron's mail)."""

    OUTPUT = "output"  # whenever the run printed anything, whatever its outcome: cron's rule (the default)
    FAILURE = "failure"  # only when the run failed or timed out
    ALWAYS = "always"  # after every finished run, with or without output
    NEVER = "never"  # never


class Role(StrEnum):
    """What `schedctl serve` does."""

    SCHEDULER = "scheduler"  # compete for the lease; the leader inserts run rows, never runs jobs
    WORKER = "worker"  # claim queued runs and execute them
    ALL = "all"  # both in one process: the embedded one-machine mode


_EMPTY: Mapping[str, str] = MappingProxyType({})

DEFAULT_GRACE_PERIOD = 30.0  # seconds; Kubernetes' terminationGracePeriodSeconds default
DEFAULT_RETRY_BACKOFF = 10.0  # seconds before the first retry; doubles for each later one
# Kubernetes stops a CronJob after 100 missed start times; the same bound when a job does not set one.
DEFAULT_MAX_CATCH_UP = 100
# A tick younger than this is late, not missed. Defined once: the leader records the grace it uses with its
# term, and readers fall back to this only for terms recorded before that (schema revision 0003).
DEFAULT_CATCH_UP_GRACE = 60.0
DEFAULT_LEASE_NAME = "cron"  # one lease per installation; `--lease-name` / `--name` change it everywhere


@dataclass(frozen=True)
class _Declared:
    """One job definition. Durations are seconds (float).

    The declaration of ``Job``'s fields: what type checkers see as ``Job``, and what the runtime ``Job``
    takes its fields, order and defaults from (``dataclasses.fields``, ``replace`` and the constructor)."""

    id: str
    schedule: str
    timezone: str
    catch_up: CatchUp
    command: str | tuple[str, ...]
    max_catch_up: int | None = None
    concurrency: Concurrency = Concurrency.FORBID
    starting_deadline: float | None = None
    timeout: float | None = None
    retries: int = 0
    retry_backoff: float = DEFAULT_RETRY_BACKOFF
    grace_period: float = DEFAULT_GRACE_PERIOD
    env: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    pass_env: tuple[str, ...] = ()
    stdin: str | None = None
    workdir: str | None = None
    user: str | None = None
    source: str | None = None
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    description: str | None = None
    paused: bool = False
    tags: tuple[str, ...] = ()
    jitter: float | None = None
    dst: DstPolicy | None = None
    on_failure: str | tuple[str, ...] | None = None
    on_success: str | tuple[str, ...] | None = None
    mailto: tuple[str, ...] | None = None  # None: not set (no mail); (): MAILTO="" (no mail, said explicitly)
    mailfrom: str | None = None
    mail_on: MailOn = MailOn.OUTPUT

    @property
    def schedule_key(self) -> str:
        """What decides the fire times; when it changes, ticks count from the change, never retroactively."""
        dst = "" if self.dst is None else f"{self.dst.gap or ''}/{self.dst.overlap or ''}"
        return f"{self.schedule}|{self.timezone}|{dst}"

    @property
    def labels_key(self) -> str:
        return labels_key(self.labels)

    def snapshot(self) -> dict[str, Any]:
        """What a run is queued with (its job version), so workers need no job files and an edit does not
        change queued runs."""
        return {
            "command": list(self.command) if isinstance(self.command, tuple) else self.command,
            "stdin": self.stdin,
            "env": dict(self.env),
            "pass_env": list(self.pass_env),
            "workdir": self.workdir,
            "user": self.user,
            "labels": dict(self.labels),
            "timeout": self.timeout,
            "retries": self.retries,
            "retry_backoff": self.retry_backoff,
            "grace_period": self.grace_period,
            "concurrency": str(self.concurrency),
            "on_failure": list(self.on_failure) if isinstance(self.on_failure, tuple) else self.on_failure,
            "on_success": list(self.on_success) if isinstance(self.on_success, tuple) else self.on_success,
            # Not used to run it: what `status`/`missed` rebuild the job from when no job file is given.
            "schedule": self.schedule,
            "timezone": self.timezone,
            "catch_up": str(self.catch_up),
            "max_catch_up": self.max_catch_up,
            "mailto": None if self.mailto is None else list(self.mailto),
            "mailfrom": self.mailfrom,
            "mail_on": str(self.mail_on),
        }


# What one job stores itself; every other field lives in a tuple that equal jobs share (``_shared_options``).
# A million jobs loaded from files differ in these and little else: a slot for each of the 29 fields cost
# 264 bytes a job, ~180 MB a million, mostly to point at the same defaults.
_OWN = ("id", "schedule", "timezone", "command")
_FIELDS = tuple(f.name for f in fields(_Declared))
_OPTIONS = tuple(name for name in _FIELDS if name not in _OWN)
# The number fields: an int and an equal float must not share a tuple, since the snapshot (and so the
# version) tells 5 from 5.0.
_NUMBERS = tuple(
    i
    for i, name in enumerate(_OPTIONS)
    if name
    in (
        "max_catch_up",
        "starting_deadline",
        "timeout",
        "retries",
        "retry_backoff",
        "grace_period",
        "jitter",
        "paused",
    )
)
_ENV, _LABELS = _OPTIONS.index("env"), _OPTIONS.index("labels")
_SHARED_OPTIONS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_MAX_SHARED_OPTIONS = 10_000  # bounded like config's shared commands: job sets are few, reloads many


def _shared_options(options: tuple[Any, ...]) -> tuple[Any, ...]:
    """The one tuple equal to ``options`` (same values, same number types), or ``options`` itself when it
    cannot be shared (an unhashable value, a mapping that is not a read-only view: a caller's dict must stay
    its job's own) or the table is full."""
    if type(options[_ENV]) is not MappingProxyType or type(options[_LABELS]) is not MappingProxyType:
        return options
    key = (
        options[:_ENV],
        tuple(options[_ENV].items()),
        options[_ENV + 1 : _LABELS],
        tuple(options[_LABELS].items()),
        options[_LABELS + 1 :],
        tuple(type(options[i]) for i in _NUMBERS),
    )
    try:
        shared = _SHARED_OPTIONS.get(key)
    except TypeError:
        return options
    if shared is None:
        if len(_SHARED_OPTIONS) < _MAX_SHARED_OPTIONS:
            _SHARED_OPTIONS[key] = options
        return options
    return shared


def _defaults() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(_Declared):
        if f.default is not MISSING:
            out[f"_d_{f.name}"] = f.default
        elif f.default_factory is not MISSING:
            out[f"_d_{f.name}"] = f.default_factory()  # the shared empty mapping: immutable, so one will do
    return out


def _make_init() -> Any:
    """``__init__`` with ``_Declared``'s signature, generated as dataclasses generate theirs: a call as fast
    as the dataclass's, which loading a million jobs makes a million of."""
    defaults = _defaults()
    params = ", ".join(name if f"_d_{name}" not in defaults else f"{name}=_d_{name}" for name in _FIELDS)
    own = "".join(f"    _set(self, {name!r}, {name})\n" for name in _OWN)
    source = (
        f"def __init__(self, {params}):\n{own}"
        f"    _set(self, '_options', _shared_options(({', '.join(_OPTIONS)},)))\n"
    )
    namespace: dict[str, Any] = {}
    exec(source, {**defaults, "_set": object.__setattr__, "_shared_options": _shared_options}, namespace)  # noqa: S102
    return namespace["__init__"]


class _FlyweightJob:
    """``Job`` at run time: ``_Declared``'s fields, constructor, equality, repr and frozenness (and
    ``dataclasses.fields`` / ``replace``), with the fields outside ``_OWN`` in a shared tuple."""

    __slots__ = ("_options", *_OWN)
    __dataclass_fields__ = _Declared.__dataclass_fields__  # type: ignore[attr-defined]
    __dataclass_params__ = _Declared.__dataclass_params__  # type: ignore[attr-defined]
    __match_args__ = _Declared.__match_args__
    __init__ = _make_init()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def __repr__(self) -> str:
        return f"Job({', '.join(f'{name}={getattr(self, name)!r}' for name in _FIELDS)})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    # copy.copy, as a frozen slots dataclass has them: the slots' values, set past the frozen __setattr__.
    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(self.__slots__, state, strict=True):
            object.__setattr__(self, name, value)


def _option(i: int) -> property:
    return property(lambda self: self._options[i])


for _i, _name in enumerate(_OPTIONS):
    setattr(_FlyweightJob, _name, _option(_i))
for _name, _member in list(vars(_Declared).items()):
    if isinstance(_member, property) or (callable(_member) and not _name.startswith("__")):
        setattr(_FlyweightJob, _name, _member)
_FlyweightJob.__name__ = _FlyweightJob.__qualname__ = "Job"
_FlyweightJob.__doc__ = _Declared.__doc__

if TYPE_CHECKING:
    Job = _Declared
else:
    Job = _FlyweightJob


def shared_fields(job: Job) -> tuple[Any, ...]:
    """``job``'s fields beyond its id, schedule, zone and command: one object for every job whose other
    fields are equal, so what they render to can be cached by it (``runrows.snapshot_text``)."""
    return job._options  # type: ignore[attr-defined,no-any-return]


def labels_key(labels: Mapping[str, str]) -> str:
    """A canonical string for a label set, so a claim can match it with ``IN`` on every database."""
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


@dataclass(frozen=True, slots=True)  # the leader holds a pass of them, ~16,700 a second at a million jobs
class Tick:
    """One row the scheduler writes to ``job_runs``: decided by the planner, written by the store (both
    import it from here, so the store needs nothing of the planner)."""

    job_id: str
    scheduled_for: datetime
    state: RunState  # QUEUED or SKIPPED
    reason: SkipReason | None = None
    detail: str | None = None
    not_before: datetime | None = None
    # Queued by a catch-up pass for a time already past (backlog, not a tick due now): never skipped for
    # concurrency, never cancels a `replace` run.
    late: bool = False

    @property
    def queued(self) -> bool:
        return self.state is RunState.QUEUED
