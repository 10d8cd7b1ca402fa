"""deploy/: the Prometheus alert rules and the Grafana dashboard, checked against what a real `serve` exports.

The metric names come from scraping a real `schedctl serve --metrics-port` process, not from a list kept in
the test, so a renamed metric fails here. promtool (Debian's `prometheus` package) checks the rules, runs
their unit tests (deploy/prometheus/alerts_test*.yaml) and parses every dashboard query; without it those
tests skip and say so, and the name checks still run.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from launch import serve
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[1]
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yaml"
# promtool evaluates every rule at every evaluation_interval: the cases that span days are evaluated hourly.
ALERT_TESTS = [
    REPO / "deploy" / "prometheus" / name for name in ("alerts_test.yaml", "alerts_test_hourly.yaml")
]
DASHBOARD = REPO / "deploy" / "grafana" / "schedctl.json"

JOBS = """\
[jobs.nightly]
schedule = "0 3 * * *"
timezone = "UTC"
catch_up = "skip"
command = "true"
"""

# -- PromQL: the metric names an expression reads ---------------------------------------------------------

# Words of PromQL that are not metric names where they stand outside a call: operators and literals.
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "group_left", "group_right"}
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_WORD = re.compile(r"(?<![\w.:$])([a-zA-Z_:][\w:]*)")


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers outside strings, label matchers, ranges and label
    lists, that are not called (functions and aggregations are) and are not operators."""
    text = _STRINGS.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _WORD.finditer(text):
        word = match.group(1)
        if text[match.end() :].lstrip().startswith("(") or word.lower() in _KEYWORDS:
            continue
        names.add(word)
    return names


def test_metric_names_reads_promql_as_prometheus_does() -> None:
    assert metric_names(
        'histogram_quantile(0.95, sum by (le, job_id) (rate(a_bucket{job_id=~"$job", x="y{z}"}[$__rate_interval])))'
    ) == {"a_bucket"}
    assert metric_names("(b unless b offset 1h) or increase(c_total[1h]) > 2 * 86400") == {"b", "c_total"}
    assert metric_names("sum(d) by (instance) / on (instance) group_left e and bool f") == {"d", "e", "f"}
    assert metric_names("time() - max(g{a='h i'}) > 1e3 or vector(0)") == {"g"}


# -- what a real serve exports -----------------------------------------------------------------------------

_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
    "info": ("_info",),
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Family name -> the sample names `serve --role all --metrics-port` exports for it (every name a query
    may use, also of families that have no sample yet, such as a counter by job before its first tick)."""
    folder = tmp_path_factory.mktemp("serve")
    (folder / "jobs.toml").write_text(JOBS)
    port = _free_port()
    proc = serve(
        "--role", "all", "--migrate", "--db", f"sqlite:///{folder / 'schedctl.db'}",
        "--jobs", str(folder / "jobs.toml"), "--metrics-port", str(port),
        log=folder / "serve.log", cwd=folder,
    )  # fmt: skip
    try:
        body = None
        deadline = time.monotonic() + 30
        while body is None and time.monotonic() < deadline:
            assert proc.poll() is None, (folder / "serve.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                    body = resp.read().decode()
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)
        assert body is not None, "no /metrics within 30 s:\n" + (folder / "serve.log").read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    families: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(body):
        names = {family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))}
        families[family.name] = names | {sample.name for sample in family.samples}
    assert "schedctl_leader" in families and "schedctl_runs_finished" in families
    return families


def _all_names(exported: dict[str, set[str]]) -> set[str]:
    return set().union(*exported.values())


# -- the alert rules ---------------------------------------------------------------------------------------


def _rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return found


def test_promtool_accepts_the_alert_rules_and_their_tests_pass() -> None:
    promtool = _promtool()
    check = subprocess.run(
        [promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in check.stdout
    tested = subprocess.run(
        [promtool, "test", "rules", *(path.name for path in ALERT_TESTS)],
        cwd=ALERTS.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.count("SUCCESS") == len(ALERT_TESTS), tested.stdout


def test_every_alert_has_a_case_where_it_fires_and_one_where_it_does_not() -> None:
    cases = [
        case
        for path in ALERT_TESTS
        for test in yaml.safe_load(path.read_text())["tests"]
        for case in test["alert_rule_test"]
    ]
    for rule in _rules():
        mine = [case for case in cases if case["alertname"] == rule["alert"]]
        assert any(case["exp_alerts"] for case in mine), f"{rule['alert']}: no case where it fires"
        assert any(not case["exp_alerts"] for case in mine), f"{rule['alert']}: no case where it is quiet"


@pytest.mark.processes
def test_the_alert_rules_name_only_metrics_serve_exports(exported: dict[str, set[str]]) -> None:
    known = _all_names(exported)
    for rule in _rules():
        names = metric_names(rule["expr"])
        assert names, rule
        assert names <= known, f"{rule['alert']}: {sorted(names - known)} are not exported"


def test_the_readme_points_at_the_files_instead_of_a_snippet() -> None:
    readme = (REPO / "README.md").read_text()
    assert "deploy/prometheus/alerts.yaml" in readme and "deploy/grafana/schedctl.json" in readme
    assert "- alert: " not in readme


# -- the dashboard -----------------------------------------------------------------------------------------


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def _panels() -> Iterator[dict[str, Any]]:
    for panel in _dashboard()["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row holds its panels


def _queries() -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable."""
    for panel in _panels():
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for variable in _dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            match = re.fullmatch(r"label_values\((.+),\s*\w+\)", query)
            assert match, f"variable {variable['name']}: {query}"
            yield f"variable {variable['name']!r}", match.group(1)


def _as_prometheus_reads_it(expr: str) -> str:
    """The query with Grafana's variables replaced as Grafana does before sending it."""
    for variable, value in (
        ("__rate_interval", "5m"),
        ("__interval", "1m"),
        ("__range", "1h"),
        ("job", ".*"),
    ):
        expr = expr.replace("${" + variable + "}", value).replace("$" + variable, value)
    assert "$" not in expr, expr
    return expr


def test_the_dashboard_uses_a_datasource_variable_everywhere() -> None:
    dashboard = _dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    graphs = [panel for panel in _panels() if panel["type"] != "row"]
    assert len(graphs) >= 10
    for panel in graphs:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target.get("datasource", panel["datasource"]) == panel["datasource"], panel["title"]
    # No panel hides behind another: rows of the 24-column grid, cells claimed once.
    cells: dict[tuple[int, int], str] = {}
    for panel in _panels():
        pos = panel["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]


@pytest.mark.processes
def test_every_dashboard_query_names_only_exported_metrics_and_shows_every_schedctl_metric(
    exported: dict[str, set[str]],
) -> None:
    known = _all_names(exported)
    used: set[str] = set()
    for where, expr in _queries():
        names = metric_names(_as_prometheus_reads_it(expr))
        assert names, f"{where}: names no metric: {expr}"
        assert names <= known, f"{where}: {sorted(names - known)} are not exported by serve"
        used |= names
    unshown = sorted(f for f, samples in exported.items() if f.startswith("schedctl_") and not samples & used)
    assert unshown == [], f"metrics serve exports that no panel shows: {unshown}"


def test_promtool_parses_every_dashboard_query(tmp_path: Path) -> None:
    promtool = _promtool()
    queries = list(_queries())
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{n}", "expr": _as_prometheus_reads_it(expr)}
                    for n, (_, expr) in enumerate(queries)
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump(rules))
    check = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, (
        check.stdout + check.stderr + "\n" + "\n".join(f"{n}: {w}" for n, (w, _) in enumerate(queries))
    )
