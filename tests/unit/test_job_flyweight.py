"""The memory-saving forms of a job (issue 27): ``Job``'s shared fields and the snapshot text rendered around
them must be indistinguishable from the plain dataclass and ``canonical_snapshot(job.snapshot())``."""

from __future__ import annotations

import copy
import dataclasses
from types import MappingProxyType

import pytest

from schedctl.jobs.job import CatchUp, Concurrency, Job, shared_fields
from schedctl.store.runrows import canonical_snapshot, snapshot_text


def _job(job_id: str, **kw: object) -> Job:
    return Job(job_id, "*/5 * * * *", "Europe/Paris", CatchUp.SKIP, f"report {job_id}", **kw)  # type: ignore[arg-type]


def test_equal_other_fields_are_one_object_and_the_job_stays_a_frozen_dataclass() -> None:
    a, b = _job("a", retries=2), _job("b", retries=2)
    assert shared_fields(a) is shared_fields(b)
    assert shared_fields(_job("c", timeout=5)) is not shared_fields(_job("d", timeout=5.0))  # 5 is not 5.0
    assert [f.name for f in dataclasses.fields(Job)][:5] == [
        "id",
        "schedule",
        "timezone",
        "catch_up",
        "command",
    ]
    assert dataclasses.replace(a, id="b", command="report b") == b and dataclasses.replace(a, retries=3) != a
    assert copy.copy(a) == a and repr(a).startswith("Job(id='a', schedule='*/5 * * * *'")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.retries = 3  # type: ignore[misc]
    env = {"A": "1"}
    assert _job("e", env=env).env is env  # a caller's own mapping is never swapped for another job's


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"command": ("sh", "-c", 'echo "\\u0000command\\u0000" é')},
        {"env": MappingProxyType({"X": "\x00schedule\x00", "Y": "ü"}), "concurrency": Concurrency.REPLACE},
        {
            "labels": MappingProxyType({"gpu": "1"}),
            "mailto": ("a@b",),
            "timeout": 5,
            "on_failure": ("x", "y"),
        },
        {"schedule": "@daily", "timezone": "America/New_York"},
    ],
)
def test_the_snapshot_text_is_the_canonical_one(kw: dict[str, object]) -> None:
    base = _job("z")
    for job in (
        dataclasses.replace(base, **kw),
        dataclasses.replace(base, id="w", **kw),
    ):  # rendered, then cached
        assert snapshot_text(job) == canonical_snapshot(job.snapshot())
