"""Loading a job file or a folder of them: ids unique across files, unreadable paths, empty sets."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from schedctl.errors import EXIT_CONFIG, ConfigError
from schedctl.jobs import config
from schedctl.jobs.config import load_jobs

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def job(job_id: str, extra: str = "") -> str:
    return f'[jobs.{job_id}]\nschedule = "@hourly"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "true"\n{extra}'


def test_a_folder_loads_its_toml_files_sorted_by_id(tmp_path: Path) -> None:
    (tmp_path / "team-b.toml").write_text(job("zeta") + job("alpha"))
    (tmp_path / "team-a.toml").write_text(job("mid"))
    (tmp_path / "notes.txt").write_text("not a job file")
    (tmp_path / ".#team-a.toml").write_text("editor lock file, ignored")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deeper.toml").write_text(job("deeper"))  # not recursive
    assert list(load_jobs(tmp_path, now=NOW)) == ["alpha", "mid", "zeta"]


def test_a_duplicate_id_across_files_names_both_places(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(job("one") + "\n" + job("backup"))
    (tmp_path / "b.toml").write_text("# team b\n" + job("backup"))
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path, now=NOW)
    assert [str(d) for d in caught.value.diagnostics] == [
        f"{tmp_path / 'b.toml'}:2: jobs.backup: duplicate job id (also defined at {tmp_path / 'a.toml'}:7)"
    ]


def test_errors_of_every_file_are_reported_and_nothing_is_loaded(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(job("good") + job("bad", "retries = -1\n"))
    (tmp_path / "b.toml").write_text("[jobs.x\n")
    (tmp_path / "c.toml").write_bytes(b"\xff")
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path, now=NOW)
    assert [(Path(d.file).name, d.line) for d in caught.value.diagnostics] == [
        ("a.toml", 11),
        ("b.toml", 1),
        ("c.toml", 1),
    ]
    assert caught.value.exit_code == EXIT_CONFIG


def test_a_missing_path_is_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path / "nope.toml", now=NOW)
    assert (
        str(caught.value)
        == f"{tmp_path / 'nope.toml'}: cannot read job definitions: no such file or directory"
    )


def test_an_empty_file_and_an_empty_folder_hold_no_jobs(tmp_path: Path) -> None:
    (tmp_path / "empty.toml").write_text("")
    assert load_jobs(tmp_path / "empty.toml", now=NOW) == {}
    (tmp_path / "folder").mkdir()
    assert load_jobs(tmp_path / "folder", now=NOW) == {}


def test_a_huge_file_is_refused_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "MAX_FILE_BYTES", 1000)
    (tmp_path / "big.toml").write_bytes(b"#" * 1001)
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path / "big.toml", now=NOW)
    assert str(caught.value) == f"{tmp_path / 'big.toml'}: larger than 256 MiB: not a job file"
    with pytest.raises(ConfigError, match="not a job file"):
        config.loads_jobs(b"#" * 1001, "big.toml", now=NOW)


def test_the_shipped_examples_are_valid() -> None:
    examples = Path(__file__).parents[2] / "examples" / "schedctl.toml"
    jobs = load_jobs(examples, now=NOW)
    assert {str(j.catch_up) for j in jobs.values()} == {"skip", "latest", "all"}
    assert len({j.timezone for j in jobs.values()}) >= 2
    assert any(j.schedule == "* * * * *" for j in jobs.values())


DATA = Path(__file__).parents[1] / "data" / "config"


def test_every_spelling_of_every_key_loads() -> None:
    jobs = load_jobs(DATA / "every-key.toml", now=NOW)
    assert list(jobs) == ["billing", "cache-warm", "reports.weekly", "tick"]
    billing = jobs["billing"]
    assert (
        billing.description
        == "Hourly billing roll-up.\nRuns every missed hour after downtime, up to a day's worth."
    )
    assert (billing.timeout, billing.retry_backoff, billing.grace_period, billing.jitter) == (
        9000.0,
        30.0,
        0.5,
        5.0,
    )
    assert billing.stdin == '{"mode": "hourly"}\n'
    assert dict(billing.labels) == {"team": "billing", "region": "us-east-1"}
    assert billing.tags == ("money", "hourly")
    assert jobs["tick"].command == "date"
    assert config.loads_jobs(config.dump_jobs(jobs), "again.toml", now=NOW) == jobs


def test_a_file_full_of_mistakes_gives_exactly_the_expected_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA)
    with pytest.raises(ConfigError) as caught:
        load_jobs("bad.toml", now=NOW)
    assert [str(d) for d in caught.value.diagnostics] == (DATA / "bad.expected").read_text().splitlines()
