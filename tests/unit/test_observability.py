"""Metrics, health, the HTTP endpoint, queue sampling and log output (observability/)."""

from __future__ import annotations

import io
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from schedctl.observability import health, metrics
from schedctl.observability import http as obs_http
from schedctl.observability.logging import configure, mask_secrets

# The contract in INTERFACES.md: name -> (type, label names).
EXPECTED = {
    "schedctl_leader": ("gauge", ()),
    "schedctl_lease_term": ("gauge", ()),
    "schedctl_lease_renewals": ("counter", ()),
    "schedctl_lease_renewal_failures": ("counter", ()),
    "schedctl_ticks_dispatched": ("counter", ("job_id",)),
    "schedctl_ticks_missed": ("counter", ("job_id", "reason")),
    "schedctl_ticks_refused": ("counter", ("job_id",)),
    "schedctl_runs_finished": ("counter", ("job_id", "state")),
    "schedctl_run_duration_seconds": ("histogram", ("job_id",)),
    "schedctl_queue_depth": ("gauge", ()),
    "schedctl_oldest_queued_age_seconds": ("gauge", ()),
    "schedctl_worker_active_runs": ("gauge", ()),
    "schedctl_last_success_timestamp_seconds": ("gauge", ("job_id",)),
}


def _families() -> dict[str, Any]:
    from prometheus_client import generate_latest

    return {f.name: f for f in text_string_to_metric_families(generate_latest(metrics.REGISTRY).decode())}


# -- metrics -----------------------------------------------------------------------------------------------


def test_every_contract_metric_is_exported_with_its_type_and_labels() -> None:
    metrics.TICKS_DISPATCHED.labels(job_id="contract").inc()
    metrics.TICKS_MISSED.labels(job_id="contract", reason="catch_up_skip").inc()
    metrics.TICKS_REFUSED.labels(job_id="contract").inc()
    metrics.RUNS_FINISHED.labels(job_id="contract", state="succeeded").inc()
    metrics.RUN_DURATION.labels(job_id="contract").observe(1.5)
    metrics.LAST_SUCCESS.labels(job_id="contract").set(1_700_000_000)
    families = _families()
    for name, (kind, labels) in EXPECTED.items():
        assert name in families, name
        assert families[name].type == kind, name
        if labels:
            sample_labels = {k for s in families[name].samples for k in s.labels if k not in ("le",)}
            assert set(labels) <= sample_labels, (name, sample_labels)


def test_counter_names_end_in_total_and_process_metrics_are_there() -> None:
    from prometheus_client import generate_latest

    text = generate_latest(metrics.REGISTRY).decode()
    assert "schedctl_lease_renewals_total " in text
    assert "# TYPE schedctl_ticks_dispatched_total counter" in text
    assert "process_resident_memory_bytes" in text
    assert "python_info" in text


def test_registry_is_not_the_global_one() -> None:
    from prometheus_client import REGISTRY as GLOBAL

    assert metrics.REGISTRY is not GLOBAL
    assert GLOBAL.get_sample_value("schedctl_leader") is None


def test_run_duration_buckets_span_a_second_to_hours() -> None:
    metrics.RUN_DURATION.labels(job_id="buckets").observe(4000)
    value = metrics.REGISTRY.get_sample_value(
        "schedctl_run_duration_seconds_bucket", {"job_id": "buckets", "le": "7200.0"}
    )
    below = metrics.REGISTRY.get_sample_value(
        "schedctl_run_duration_seconds_bucket", {"job_id": "buckets", "le": "3600.0"}
    )
    assert (below, value) == (0.0, 1.0)


def test_job_series_are_capped_and_the_rest_share_other(monkeypatch: pytest.MonkeyPatch) -> None:
    from prometheus_client import CollectorRegistry

    monkeypatch.setattr(metrics, "JOB_SERIES", metrics.JobSeries(2))
    registry = CollectorRegistry()
    counter = metrics.JobCounter("t_runs_total", "test", ["job_id", "state"], registry=registry)
    counter.labels("a", "succeeded").inc()
    counter.labels(job_id="b", state="failed").inc()
    counter.labels("c", "succeeded").inc()
    counter.labels(job_id="d", state="succeeded").inc()
    counter.labels("a", "failed").inc()  # a known job keeps its series
    value = registry.get_sample_value
    assert value("t_runs_total", {"job_id": "a", "state": "succeeded"}) == 1
    assert value("t_runs_total", {"job_id": "a", "state": "failed"}) == 1
    assert value("t_runs_total", {"job_id": "b", "state": "failed"}) == 1
    assert value("t_runs_total", {"job_id": "_other", "state": "succeeded"}) == 2
    assert value("t_runs_total", {"job_id": "c", "state": "succeeded"}) is None


def test_job_series_limit_zero_means_unlimited() -> None:
    series = metrics.JobSeries(0)
    assert [series.label(f"j{i}") for i in range(5000)][-1] == "j4999"


def test_no_created_series() -> None:
    from prometheus_client import generate_latest

    metrics.TICKS_DISPATCHED.labels(job_id="created").inc()
    assert b"_created" not in generate_latest(metrics.REGISTRY)


# -- health ------------------------------------------------------------------------------------------------


def test_a_loop_that_turns_is_live_and_one_that_stops_is_not() -> None:
    health.register("scheduler", 10, now=100.0)
    health.register("worker", 30, now=100.0)
    assert health.is_live(now=105.0)
    health.mark_turn("scheduler", now=109.0)
    assert health.is_live(now=118.0)
    assert not health.is_live(now=119.5)  # scheduler silent 10.5 s > 10
    stalled = [lh.loop for lh in health.liveness(now=119.5).loops if not lh.ok]
    assert stalled == ["scheduler"]
    assert "scheduler: STALLED" in health.liveness(now=119.5).describe()


def test_registration_counts_as_a_turn_and_unregister_forgets_the_loop() -> None:
    health.register("worker", 5, now=0.0)
    assert health.is_live(now=5.0)
    assert not health.is_live(now=5.1)
    health.unregister("worker")
    assert health.is_live(now=1000.0)
    assert health.liveness(now=1000.0).loops == ()


def test_mark_turn_without_register_gets_the_default_budget() -> None:
    health.mark_turn("adhoc", now=0.0)
    assert health.is_live(now=health.DEFAULT_MAX_SILENCE)
    assert not health.is_live(now=health.DEFAULT_MAX_SILENCE + 1)


# -- HTTP --------------------------------------------------------------------------------------------------


def _get(port: int, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def _serve(store: Any) -> Iterator[obs_http.ObservabilityServer]:
    srv = obs_http.start("127.0.0.1", 0, store)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def server(sqlite_url: str) -> Iterator[obs_http.ObservabilityServer]:
    """On a migrated SQLite file: for what does not depend on the backend."""
    from schedctl.store import open_store
    from schedctl.store.migrate import upgrade

    st = open_store(sqlite_url)
    upgrade(st)
    yield from _serve(st)
    st.dispose()


@pytest.fixture
def server_on_each_backend(store: Any) -> Iterator[obs_http.ObservabilityServer]:
    yield from _serve(store)


def test_metrics_endpoint_serves_the_registry(server: obs_http.ObservabilityServer) -> None:
    metrics.LEADER.set(1)
    status, ctype, body = _get(server.port, "/metrics")
    assert status == 200
    assert ctype.startswith("text/plain")
    assert "schedctl_leader 1.0" in body


def test_livez_follows_the_loops_not_the_database(server: obs_http.ObservabilityServer) -> None:
    health.register("scheduler", 0.2)
    assert _get(server.port, "/livez")[0] == 200
    time.sleep(0.3)
    status, _, body = _get(server.port, "/livez")
    assert status == 503 and "scheduler: STALLED" in body
    health.mark_turn("scheduler")
    assert _get(server.port, "/livez")[0] == 200
    server.readiness.store.dispose()  # a database outage must not fail liveness
    assert _get(server.port, "/livez")[0] == 200


def test_readyz_is_ready_on_a_current_schema_whether_or_not_leader(
    server: obs_http.ObservabilityServer,
) -> None:
    metrics.LEADER.set(0)
    status, _, body = _get(server.port, "/readyz")
    assert (status, body.strip()) == (200, "ok")


def test_readyz_is_503_while_a_loop_s_database_writes_fail(store: Any) -> None:
    """A full disk answers the probe's reads but refuses the loops' writes: the loops' word counts."""
    check = obs_http.ReadinessCheck(store, cache_seconds=0)
    assert check().ok
    health.store_failing("worker", "write: database error on sqlite file /x.db: database or disk is full")
    ready = check()
    assert not ready.ok
    assert ready.detail == (
        "database writes failing: worker: write: database error on sqlite file /x.db: database or disk is full"
    )
    health.store_working("worker")
    assert check().ok


def test_readyz_says_a_newer_schema_is_newer_not_to_upgrade(store: Any) -> None:
    """An old process whose schema a deploy upgraded under it: replace it, not `db upgrade` (which refuses)."""
    from sqlalchemy import text

    from schedctl.store.migrate import VERSION_TABLE, check

    head = check(store).head
    with store.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))
    ready = obs_http.ReadinessCheck(store, cache_seconds=0)()
    assert (ready.ok, ready.detail) == (False, f"schema at 9999, newer than this schedctl knows ({head})")


def test_readyz_is_503_when_the_database_is_unreachable() -> None:
    from schedctl.store import open_store

    unreachable = open_store("postgresql://schedctl:hunter2@127.0.0.1:1/nothing")
    srv = obs_http.start("127.0.0.1", 0, unreachable)
    try:
        status, _, body = _get(srv.port, "/readyz")
        assert status == 503
        assert "hunter2" not in body
        assert _get(srv.port, "/livez")[0] == 200
    finally:
        srv.stop()


def test_readyz_is_503_when_the_schema_is_missing(sqlite_url: str) -> None:
    from schedctl.store import open_store

    empty = open_store(sqlite_url)
    srv = obs_http.start("127.0.0.1", 0, empty)
    try:
        status, _, body = _get(srv.port, "/readyz")
        assert status == 503, body
    finally:
        srv.stop()
        empty.dispose()


def test_readiness_is_cached_for_a_second(store: Any) -> None:
    check = obs_http.ReadinessCheck(store, cache_seconds=60)
    assert check().ok
    store.dispose()
    store.engine.pool.dispose()
    # Still the cached answer: a probe storm costs one query per cache period.
    calls = []
    check._check = lambda: calls.append(1) or obs_http.Readiness(False, "x")  # type: ignore[method-assign]
    assert check().ok and calls == []
    check.cache_seconds = 0
    assert not check().ok and calls == [1]


def test_unknown_path_is_404(server: obs_http.ObservabilityServer) -> None:
    assert _get(server.port, "/")[0] == 404


def test_start_on_a_busy_port_is_a_one_line_error(server: obs_http.ObservabilityServer) -> None:
    from schedctl.errors import SchedctlError

    with pytest.raises(SchedctlError, match=rf"cannot serve metrics on 127.0.0.1:{server.port}: .*in use"):
        obs_http.start("127.0.0.1", server.port, None)


# -- queue sampling ----------------------------------------------------------------------------------------


def _run_row(
    job_id: str, scheduled_for: datetime, state: str, not_before: datetime | None = None
) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "scheduled_for": scheduled_for,
        "state": state,
        "manual": False,
        "attempt": 0,
        "failures": 0,
        "queued_at": scheduled_for,
        "not_before": not_before,
        "labels_key": "",
        "concurrency": "forbid",
        "cancel_requested": False,
    }


def test_sample_queue_counts_due_queued_runs_and_the_oldest_age(store: Any) -> None:
    from schedctl.observability.queue import sample_queue
    from schedctl.store.schema import job_runs

    assert sample_queue(store) == (0, 0.0)
    now = datetime.now(UTC)
    rows = [
        _run_row("a", now - timedelta(seconds=30), "queued"),
        _run_row("a", now - timedelta(seconds=10), "queued"),
        _run_row("b", now - timedelta(seconds=500), "queued", not_before=now + timedelta(hours=1)),  # backoff
        _run_row("c", now - timedelta(seconds=900), "running"),
        _run_row("d", now - timedelta(seconds=900), "skipped"),
    ]
    with store.begin() as conn:
        conn.execute(job_runs.insert(), rows)
    depth, age = sample_queue(store)
    assert depth == 2
    assert 25 <= age <= 40, age
    assert metrics.REGISTRY.get_sample_value("schedctl_queue_depth") == 2
    assert metrics.REGISTRY.get_sample_value("schedctl_oldest_queued_age_seconds") == pytest.approx(age)


def test_sample_last_success_takes_the_newest_success_per_job(store: Any) -> None:
    from schedctl.observability.queue import sample_last_success
    from schedctl.store.schema import job_runs

    seeded = f"seeded-{store.dialect}"  # the gauge is process-wide: one series per backend's run
    base = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    rows = []
    for i, state in enumerate(["succeeded", "succeeded", "failed"]):
        row = _run_row(seeded, base + timedelta(hours=i), state)
        row["finished_at"] = base + timedelta(hours=i, minutes=5)
        rows.append(row)
    rows.append(_run_row(f"never-{store.dialect}", base, "failed") | {"finished_at": base})
    with store.begin() as conn:
        conn.execute(job_runs.insert(), rows)
    assert sample_last_success(store) == 1
    value = metrics.REGISTRY.get_sample_value("schedctl_last_success_timestamp_seconds", {"job_id": seeded})
    assert value == (base + timedelta(hours=1, minutes=5)).timestamp()
    labels = {"job_id": f"never-{store.dialect}"}
    assert metrics.REGISTRY.get_sample_value("schedctl_last_success_timestamp_seconds", labels) is None
    # A newer success this process saw itself is not moved back by the sample.
    metrics.LAST_SUCCESS.labels(job_id=seeded).set(value + 600)
    sample_last_success(store)
    assert metrics.REGISTRY.get_sample_value(
        "schedctl_last_success_timestamp_seconds", {"job_id": seeded}
    ) == (value + 600)


# -- logs --------------------------------------------------------------------------------------------------


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    sched_level = logging.getLogger("schedctl").level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("schedctl").setLevel(sched_level)


def test_json_lines_carry_event_and_run_fields(restore_logging: None) -> None:
    out = io.StringIO()
    configure("json", "info", stream=out)
    tick = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
    logging.getLogger("schedctl.worker").info(
        "run %s finished",
        "backup",
        extra={
            "event": "run_finished",
            "job_id": "backup",
            "scheduled_for": tick,
            "attempt": 2,
            "exit_status": 0,
        },
    )
    (line,) = out.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["event"] == "run_finished"
    assert entry["message"] == "run backup finished"
    assert entry["level"] == "info" and entry["logger"] == "schedctl.worker"
    assert (entry["job_id"], entry["scheduled_for"], entry["attempt"]) == (
        "backup",
        "2026-12-01T03:00:00+00:00",
        2,
    )
    assert entry["exit_status"] == 0
    assert datetime.fromisoformat(entry["ts"]).utcoffset() == timedelta(0)
    assert list(entry)[:5] == ["ts", "level", "logger", "event", "message"]


def test_json_exception_is_one_string_field_and_one_line(restore_logging: None) -> None:
    out = io.StringIO()
    configure("json", "debug", stream=out)
    try:
        raise RuntimeError("cannot reach postgresql://app:s3cret@db/prod")
    except RuntimeError:
        logging.getLogger("schedctl.scheduler").exception("pass failed", extra={"event": "pass_failed"})
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert isinstance(entry["exception"], str) and "RuntimeError" in entry["exception"]
    assert "s3cret" not in lines[0] and "postgresql://app:***@db/prod" in entry["exception"]


def test_database_passwords_are_masked_in_message_args_and_extras(restore_logging: None) -> None:
    for fmt in ("json", "text"):
        out = io.StringIO()
        configure(fmt, "info", stream=out)
        logging.getLogger("schedctl.service").info(
            "connecting to %s (was mysql://root:pw1@h/d)",
            "postgresql+psycopg://app:pa:ss@db.internal:5432/prod",
            extra={"event": "connecting", "url": "postgresql://u:pw2@x/y"},
        )
        text = out.getvalue()
        for secret in ("pw1", "pa:ss", "pw2"):
            assert secret not in text, (fmt, text)
        assert "postgresql+psycopg://app:***@db.internal:5432/prod" in text


@pytest.mark.parametrize(
    "raw, masked",
    [
        ("postgresql://app:s3cret@db/x", "postgresql://app:***@db/x"),
        ("mysql+pymysql://root@localhost/x", "mysql+pymysql://root@localhost/x"),
        ("postgresql://db.internal:5432/x?user=a@b", "postgresql://db.internal:5432/x?user=a@b"),
        ("sqlite:////var/lib/schedctl.db", "sqlite:////var/lib/schedctl.db"),
        ("a=postgresql://u:p%40ss@h/d b", "a=postgresql://u:***@h/d b"),
    ],
)
def test_mask_secrets(raw: str, masked: str) -> None:
    assert mask_secrets(raw) == masked


def test_text_format_and_level(restore_logging: None) -> None:
    out = io.StringIO()
    configure("text", "warning", stream=out)
    log = logging.getLogger("schedctl.worker")
    log.info("hidden", extra={"event": "x"})
    log.warning("run took over", extra={"event": "run_takeover", "job_id": "backup", "attempt": 3})
    (line,) = out.getvalue().splitlines()
    assert "WARNING" in line and "schedctl.worker: run took over" in line
    assert line.endswith("job_id=backup attempt=3 event=run_takeover")


def test_configure_twice_keeps_one_handler(restore_logging: None) -> None:
    configure("text", "info", stream=io.StringIO())
    out = io.StringIO()
    configure("json", "info", stream=out)
    logging.getLogger("schedctl.x").info("once", extra={"event": "once"})
    assert len(out.getvalue().splitlines()) == 1
    ours = [h for h in logging.getLogger().handlers if getattr(h, "_schedctl_handler", False)]
    assert len(ours) == 1


def test_other_libraries_stay_at_warning(restore_logging: None) -> None:
    out = io.StringIO()
    configure("json", "debug", stream=out)
    logging.getLogger("sqlalchemy.engine").info("SELECT 1")
    logging.getLogger("schedctl.x").debug("mine", extra={"event": "mine"})
    assert [json.loads(line)["message"] for line in out.getvalue().splitlines()] == ["mine"]


def test_bad_format_or_level_is_refused() -> None:
    with pytest.raises(ValueError):
        configure("xml", "info")
    with pytest.raises(ValueError):
        configure("json", "loud")


def test_sampler_thread_updates_the_gauges_and_survives_a_database_error(sqlite_url: str) -> None:
    import threading

    from schedctl.observability.queue import start_sampler
    from schedctl.store import open_store
    from schedctl.store.migrate import upgrade
    from schedctl.store.schema import job_runs

    st = open_store(sqlite_url)
    upgrade(st)
    now = datetime.now(UTC)
    with st.begin() as conn:
        conn.execute(
            job_runs.insert(),
            [_run_row(f"sampled-{i}", now - timedelta(seconds=5), "queued") for i in range(3)],
        )
    stopping = threading.Event()
    broken = open_store("sqlite:////nonexistent-dir/x.db")
    bad = start_sampler(broken, stopping, interval=0.05)
    good = start_sampler(st, stopping, interval=0.05)
    try:
        deadline = time.monotonic() + 5
        while metrics.REGISTRY.get_sample_value("schedctl_queue_depth") != 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert metrics.REGISTRY.get_sample_value("schedctl_queue_depth") == 3
        assert bad.is_alive()
    finally:
        stopping.set()
        good.join(5)
        bad.join(5)
        st.dispose()
        broken.dispose()
    assert not good.is_alive() and not bad.is_alive()


def test_text_format_rounds_floats_and_json_keeps_them(restore_logging: None) -> None:
    for fmt, expected in (
        ("text", "duration_seconds=0.013375 "),
        ("json", '"duration_seconds":0.0133747569998377'),
    ):
        out = io.StringIO()
        configure(fmt, "info", stream=out)
        logging.getLogger("schedctl.worker").info(
            "done", extra={"event": "run_finished", "duration_seconds": 0.0133747569998377}
        )
        assert expected in out.getvalue()
