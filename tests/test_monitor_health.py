"""Watching the watcher: Flink's reporter, the window metrics, the health dashboard, rules and status.

The live tests share one streaming job on the embedded MiniCluster (a child process) that reads
events stamped with the wall clock; the last test stops it and watches the freshness rule fire on
a private Prometheus (1 s evaluation, the rules' ``for`` shortened) so the shared one is left alone.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from driftwarden.alerting.dashboards.health import SIGNALS, health_dashboard
from driftwarden.alerting.dashboards.macros import expand_promql
from driftwarden.alerting.dashboards.model import PromQuery
from driftwarden.cli import app
from driftwarden.core.errors import EXIT_BEHIND
from driftwarden.jobs.flink_metrics import EXCLUDED_VARIABLES
from driftwarden.jobs.window_metrics import OTHER_MODEL, WindowMetrics
from driftwarden.schemas.config import MonitorConfig
from tests.health_helpers import (MODEL, LiveJob, LiveProducer, free_port, not_flinks_or_kafkas,
                                  promtool_problems, write_live_config)
from tests.kafka_helpers import create_topic

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "deploy" / "prometheus" / "driftwarden-health.rules.yml"
FLINK_MODEL = MODEL.replace("-", "_")  # Flink's reporter writes label values with [A-Za-z0-9_:] only


# ---------------------------------------------------------------- no services


class RecordingGroup:
    """A metric group with PyFlink's surface that keeps what is registered (real code, no Flink)."""

    def __init__(self, path: tuple = ()) -> None:
        self.path, self.counters, self.gauges, self.groups = path, {}, {}, {}

    def add_group(self, name: str, extra: str | None = None) -> "RecordingGroup":
        key = (name, extra)
        return self.groups.setdefault(key, RecordingGroup(self.path + (key,)))

    def counter(self, name: str):
        return self.counters.setdefault(name, _Count())

    def gauge(self, name: str, obj) -> None:
        self.gauges[name] = obj


class _Count:
    def __init__(self) -> None:
        self.n = 0

    def inc(self, n: int = 1) -> None:
        self.n += n


class _Summary:
    def __init__(self, model: str, window_end_ms: int) -> None:
        self.model, self.window_end_ms = model, window_end_ms


def test_window_metrics_count_windows_and_keep_the_newest_windows_end_and_freshness() -> None:
    group = RecordingGroup()
    metrics = WindowMetrics(group, {"fraud"}, 60, clock=lambda: 1_000.0)
    for end_ms, model in ((997_000, "fraud"), (940_000, "fraud"), (999_500, "someone-else's")):
        metrics.judged(_Summary(model, end_ms))
    fraud = group.groups[("model", "fraud")]
    assert fraud.counters["windows_judged"].n == 2
    assert fraud.gauges["last_window_end_timestamp_seconds"]() == 997 and fraud.gauges["window_size_seconds"]() == 60
    assert fraud.gauges["last_window_freshness_seconds"]() == 3  # the newest window's (an older one came later)
    assert not fraud.groups  # no key/value group under a model: nothing (such as "le") enters a metric's name
    assert set(group.groups) == {("model", "fraud"), ("model", OTHER_MODEL)}  # model names from events: bounded
    WindowMetrics(None, {"fraud"}, 60).judged(_Summary("fraud", 0))  # metrics off in Flink: a no-op


def test_a_sub_second_window_reports_a_size_of_one_second_not_zero() -> None:
    """The stale rule allows 3 windows (3 * window_size_seconds): a 250 ms window must not read as 0 s."""
    group = RecordingGroup()
    config = MonitorConfig.model_validate({"window": {"size": "250ms"}, "models": [{"name": "fraud",
                                                                                   "features": {"x": "numeric"}}]})
    metrics = WindowMetrics.open(type("Context", (), {"get_metric_group": lambda self: group})(), config)
    metrics.judged(_Summary("fraud", 1_000))
    assert group.groups[("model", "fraud")].gauges["window_size_seconds"]() == 1


def test_promtool_rule_tests_pass() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool not found: Debian's prometheus package ships it (scripts/services.sh installs it)"
    done = subprocess.run([promtool, "test", "rules", "driftwarden-health.test.yml"], cwd=REPO / "tests" / "promtool",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_local_prometheus_config_loads_the_rules(tmp_path) -> None:
    config = render_prometheus_config(tmp_path, tmp_path / "targets", RULES)
    done = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "5 rules found" in done.stdout, done.stdout + done.stderr


def test_every_dashboard_signal_is_a_panel() -> None:
    exprs = {q.expr for _, q in health_dashboard().queries() if isinstance(q, PromQuery)}
    assert set(SIGNALS.values()) == exprs


# ---------------------------------------------------------------- a live job


def render_prometheus_config(folder: Path, targets: Path, rules: Path) -> Path:
    """scripts/prometheus.yml filled in the way scripts/services.sh does."""
    text = (REPO / "scripts" / "prometheus.yml").read_text()
    path = folder / "prometheus.yml"
    path.write_text(text.replace("@TARGETS@", str(targets)).replace("@RULES@", str(rules)))
    return path


def scoped(expr: str, instances: list[str]) -> str:
    """Restrict every flink_* and driftwarden_* selector in ``expr`` to this test's scrape targets."""
    matcher = f'instance=~"{"|".join(instances)}"'  # dots match themselves too

    def add(match: re.Match) -> str:
        name, labels = match.group(1), match.group(2)
        return f"{name}{{{matcher}" + (f", {labels[1:-1]}}}" if labels and labels != "{}" else "}")
    return re.sub(r"\b((?:flink|driftwarden)_\w+)(\{[^}]*\})?", add, expr)


@pytest.fixture(scope="module")
def live(kafka_bootstrap, prometheus_targets_dir, tmp_path_factory):
    """The drift job running on events stamped now, its reporter and /metrics listed for the shared Prometheus."""
    topic = f"health-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=2)
    workdir = tmp_path_factory.mktemp("health")
    config = write_live_config(workdir / "monitor.yaml", topic, kafka_bootstrap)
    producer = LiveProducer(kafka_bootstrap, topic, partitions=2)
    producer.start()
    job = LiveJob(config, f"sqlite:///{workdir}/store.db", workdir)
    client_target = prometheus_targets_dir / f"health-{job.metrics_port}.json"
    client_target.write_text(json.dumps([{"targets": [f"127.0.0.1:{job.metrics_port}"]}]))
    job.start()
    try:
        job.wait_for(f'flink_taskmanager_job_task_operator_model_windows_judged{{model="{FLINK_MODEL}"')
        yield job
    finally:
        job.stop()
        producer.stop()
        client_target.unlink(missing_ok=True)
        for stale in prometheus_targets_dir.glob(f"flink-embedded-*-{job.reporter_port}.json"):
            stale.unlink()  # the job was killed: its exit hook did not run


@pytest.mark.services
def test_reporter_serves_flink_and_window_metrics_with_bounded_labels(live, prometheus_targets_dir) -> None:
    text = live.wait_for("flink_taskmanager_job_task_operator_model_last_window_freshness_seconds{")
    for name in ("flink_taskmanager_job_task_operator_KafkaSourceReader_topic_partition_currentOffset",
                 "flink_taskmanager_job_task_operator_split_watermark_currentWatermark",
                 "flink_taskmanager_job_task_operator_watermarkLag",
                 "flink_jobmanager_job_lastCheckpointCompletedTimestamp", "flink_jobmanager_job_numRestarts",
                 "flink_taskmanager_job_task_backPressuredTimeMsPerSecond",
                 "flink_taskmanager_job_task_operator_model_last_window_freshness_seconds",
                 "flink_taskmanager_job_task_operator_model_last_window_end_timestamp_seconds"):
        assert re.search(rf"^{name}\{{", text, re.M), name
    labels = set(re.findall(r'[{,](\w+)="', text))
    assert not labels & set(EXCLUDED_VARIABLES), labels & set(EXCLUDED_VARIABLES)
    assert {"job_name", "model", "topic", "partition"} <= labels and "le" not in labels
    targets = [json.loads(p.read_text()) for p in prometheus_targets_dir.glob(f"flink-embedded-*-{live.reporter_port}.json")]
    assert targets and targets[0][0]["targets"] == [f"127.0.0.1:{live.reporter_port}"]


@pytest.mark.services
def test_metric_names_follow_the_conventions_on_real_scrapes_of_the_job_and_its_flink_reporter(live) -> None:
    """promtool check metrics on the job's /metrics (all of it) and on its Flink reporter, where every metric
    the job defines (``..._operator_model_*``) passes and only names Flink (camelCase) or the Kafka client
    (its consumer metrics, forwarded by Flink as gauges) chose remain."""
    live.wait_for("flink_taskmanager_job_task_operator_model_last_window_freshness_seconds{")
    job = job_metrics(live, ("driftwarden_windows_closed_total{", "driftwarden_consumer_lag_seconds{"))
    assert promtool_problems(job) == []
    reporter = httpx.get(f"http://127.0.0.1:{live.reporter_port}/metrics", timeout=30).text
    problems = promtool_problems(reporter)
    assert problems and not_flinks_or_kafkas(problems) == []  # what remains is Flink's and Kafka's naming


def job_metrics(live: LiveJob, needles: tuple[str, ...], timeout_s: float = 60) -> str:
    """The job's /metrics once it holds every needle (its store metrics are read at most every 5 s)."""
    deadline, text = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        text = httpx.get(f"http://127.0.0.1:{live.metrics_port}/metrics", timeout=30).text
        if all(needle in text for needle in needles):
            return text
        time.sleep(1)
    raise AssertionError(f"{needles} not all on the job's /metrics within {timeout_s} s:\n{text[:2000]}")


@pytest.mark.services
def test_metric_names_follow_the_conventions_on_real_scrapes_of_the_flink_clusters_reporters(
        flink_rest, prometheus_targets_dir) -> None:
    """promtool check metrics on every reporter endpoint of the standalone cluster (its JobManager and
    TaskManagers, as scripts/services.sh lists them for Prometheus): only names Flink chose remain."""
    listed = json.loads((prometheus_targets_dir / "flink-cluster.json").read_text())[0]["targets"]
    assert len(listed) >= 2, listed
    for target in listed:
        text = httpx.get(f"http://{target}/metrics", timeout=30).text
        assert "flink_" in text and "# TYPE" in text, (target, text[:500])
        problems = promtool_problems(text)
        assert not_flinks_or_kafkas(problems) == [], target


@pytest.mark.services
def test_every_health_panel_query_returns_series_from_the_real_prometheus(live, prometheus_url) -> None:
    instances = [f"127.0.0.1:{live.reporter_port}", f"127.0.0.1:{live.metrics_port}"]
    pending = {f"{title} :: {q.expr}": scoped(expand_promql(q.expr, {}), instances)
               for title, q in health_dashboard().queries() if isinstance(q, PromQuery)}
    assert len(pending) == len(SIGNALS)
    deadline = time.monotonic() + 180
    while pending and time.monotonic() < deadline:
        for key, expr in list(pending.items()):
            answer = httpx.get(f"{prometheus_url}/api/v1/query", params={"query": expr}, timeout=10).json()
            assert answer["status"] == "success", (key, answer)
            if answer["data"]["result"]:
                del pending[key]
        time.sleep(2)
    assert not pending, f"no series within 180 s for: {sorted(pending)}\n{live.log_tail()}"


@pytest.mark.services
def test_status_is_zero_for_the_running_job(live, prometheus_url) -> None:
    result = CliRunner().invoke(app, ["status", "--config", str(live.config), "--store-url", live.store_url,
                                      "--prometheus", prometheus_url, "--max-windows", "4"])
    assert result.exit_code == 0, result.output
    for needle in (f"model {MODEL}", "consumer lag", "watermark lag", "last checkpoint age", "outbox backlog"):
        assert needle in result.output, needle


@pytest.mark.services
def test_freshness_rule_fires_when_the_job_stops(live, tmp_path) -> None:
    rules = yaml.safe_load(RULES.read_text())
    for rule in rules["groups"][0]["rules"]:
        rule["for"] = "2s"  # the production rules, minus the waiting
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "targets").mkdir()
    (tmp_path / "targets" / "job.json").write_text(json.dumps([{"targets": [f"127.0.0.1:{live.reporter_port}"]}]))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    prometheus = subprocess.Popen(
        ["prometheus", f"--config.file={render_prometheus_config(tmp_path, tmp_path / 'targets', tmp_path / 'rules.yml')}",
         f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("wb"))
    try:
        assert wait_until(lambda: query(url, "flink_taskmanager_job_task_operator_model_last_window_end_timestamp_seconds"),
                          60)
        time.sleep(3)  # a few evaluations with the series present
        assert wait_until(lambda: not query(url, 'ALERTS{alertname="DriftwardenNoWindowJudged"}'), 240), \
            "pending or firing while the job was judging windows"
        live.stop()
        stopped = time.monotonic()
        assert wait_until(lambda: firing(url, "DriftwardenNoWindowJudged"), 90), "freshness rule did not fire"
        alert = firing(url, "DriftwardenNoWindowJudged")[0]
        assert alert["labels"]["model"] == FLINK_MODEL and alert["labels"]["severity"] == "page"
        print(f"DriftwardenNoWindowJudged fired {time.monotonic() - stopped:.0f} s after the job stopped")
        # the rule reads the last scraped window end, status the last stored one (a few seconds later):
        # status says "behind" once its own last window is 3 windows old
        runs = []

        def status_behind() -> bool:
            runs.append(CliRunner().invoke(app, ["status", "--config", str(live.config), "--store-url",
                                                 live.store_url, "--prometheus", url]))
            return runs[-1].exit_code == EXIT_BEHIND and "behind" in runs[-1].output

        assert wait_until(status_behind, 60), runs[-1].output
    finally:
        prometheus.terminate()
        prometheus.wait(30)


def query(url: str, expr: str) -> list:
    """Series of an instant query on the private Prometheus (an HTTP error while it starts: 503, text)."""
    return httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10).raise_for_status().json()["data"]["result"]


def firing(url: str, name: str) -> list[dict]:
    """Alerts named ``name`` that are firing now."""
    alerts = httpx.get(f"{url}/api/v1/alerts", timeout=10).raise_for_status().json()["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == name and a["state"] == "firing"]


def wait_until(predicate, timeout_s: float):
    """Poll ``predicate`` every second until it is truthy or the time is up; return its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = predicate()
        except httpx.HTTPError:
            value = None
        if value or time.monotonic() > deadline:
            return value
        time.sleep(1)
