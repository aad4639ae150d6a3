"""Sustained overload: input at about twice what the live job can take, for 10 minutes, then a drain.

    .venv/bin/python bench/overload.py [--minutes 10] [--factor 2] [--plot docs/overload.png] [--json PATH]

On private services (bench/fault_harness.py: Kafka, PostgreSQL and Prometheus with the monitor-health
rules of deploy/prometheus, unchanged). The job's bottleneck here is what a deployment with many
models meets first: judging each (model, window) in Python and storing it. So:

1. Calibration: a backlog of 200 models' 10 s windows (12 windows, 40 events each) read by a bounded
   job: the windows it judges per second past its warm-up (W).
2. The live job (production defaults, 10 s windows, a warm-up reference) on a fresh topic of two
   partitions, for M = factor x W x 10 models: every model's events, 5 a second each, stamped with
   the wall clock. Before the overload only an eighth of the models send (a quarter of what the
   job takes), until its first windows are stored; then all M for ``--minutes`` (the job is asked
   for ``factor`` times the windows it can judge); then an eighth again, until the lag has drained
   and the "behind" rule has cleared. Then each partition gets a sentinel far ahead, and every
   (model, window) stored is compared with what was sent.

Every 5 s: the consumer lag (records, and seconds: the age of the oldest unread record, as the job's
/metrics report it), the input and consumed rates, the job's resident memory (client, JVM and Python
workers), Flink's checkpoint figures (each completed checkpoint's duration, failures) from its
reporter, and the state of the DriftwardenMonitorBehind alert in Prometheus. Prints a summary and,
with ``--plot``, draws the lag curve, the rates and the checkpoint durations.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import numpy as np
import orjson
import yaml
from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.fault_harness import (LiveJob, PrivateServices, create_topic, store_engine, unique_topic,  # noqa: E402
                                 wait_until)
from bench.faults import store_url_of  # noqa: E402
from bench_job import _process_tree  # noqa: E402
from driftwarden.jobs.consumer_lag import consumer_lags  # noqa: E402
from driftwarden.jobs.flink_metrics import free_port  # noqa: E402
from driftwarden.schemas.config import SourceConfig  # noqa: E402

WINDOW_S = 10
PER_MODEL_PER_S = 5
CALIBRATION_MODELS, CALIBRATION_WINDOWS, CALIBRATION_PER_WINDOW = 200, 12, 40
QUIET_SHARE = 8  # before and after the overload, one model in this many sends
SAMPLE_S = 5.0
BEHIND_ALERT = "DriftwardenMonitorBehind"
FEATURES = {"x": "numeric", "y": "numeric", "z": "numeric", "c": "categorical"}


def model_name(index: int) -> str:
    """The name of model ``index``."""
    return f"m{index:04d}"


def write_config(path: Path, topic: str, bootstrap: str, models: int) -> Path:
    """Production defaults but 10 s windows and a two-window warm-up reference, for ``models`` models."""
    path.write_text(yaml.safe_dump({
        "source": {"topics": [topic], "bootstrap_servers": bootstrap, "group_id": f"g-{topic}"},
        "window": {"size": f"{WINDOW_S}s"},
        "reference": {"mode": "warmup", "warmup_windows": 2},
        "models": [{"name": model_name(i), "features": FEATURES} for i in range(models)],
    }))
    return path


def event(rng: np.random.Generator, model: int, event_ms: int) -> bytes:
    """One event of model ``model``."""
    return orjson.dumps({"event_time": event_ms, "model": model_name(model),
                         "features": {"x": float(rng.normal()), "y": float(rng.gamma(2.0)), "z": float(rng.uniform()),
                                      "c": str(rng.choice(list("abcd")))}})


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True,
                     "queue.buffering.max.messages": 1_000_000, "log_level": 2})


class RateStream(threading.Thread):
    """``active`` models (of ``models``) each sending :data:`PER_MODEL_PER_S` events a second stamped with
    the wall clock, dealt round robin over ``partitions``; counts what it sent per (model, window)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, models: int) -> None:
        super().__init__(daemon=True)
        self.producer = _producer(bootstrap)
        self.topic, self.partitions, self.models = topic, partitions, models
        self.active = models
        self.sent: Counter = Counter()  # (model, window start ms) -> events
        self.total = 0
        self.failed = 0
        self.stopped = threading.Event()
        self.rng = np.random.default_rng(11)

    def run(self) -> None:
        next_tick = time.monotonic()
        while not self.stopped.is_set():
            now_ms = int(time.time() * 1000)
            start = now_ms - now_ms % (WINDOW_S * 1000)
            per_tick = self.active * PER_MODEL_PER_S // 10
            for i in range(per_tick):
                model = (self.total + i) % self.active
                self._produce(event(self.rng, model, now_ms), (self.total + i) % self.partitions)
                self.sent[(model_name(model), start)] += 1
            self.total += per_tick
            self.producer.poll(0)
            next_tick += 0.1
            time.sleep(max(0.0, next_tick - time.monotonic()))

    def _produce(self, value: bytes, partition: int) -> None:
        while True:
            try:
                self.producer.produce(self.topic, value, partition=partition, on_delivery=self._delivered)
                return
            except BufferError:
                self.producer.poll(0.5)

    def _delivered(self, err, _msg) -> None:
        if err is not None:
            self.failed += 1

    def stop(self) -> None:
        """Stop sending, send each partition a sentinel far ahead (it closes every window), flush."""
        self.stopped.set()
        self.join(30)
        sentinel = int(time.time() * 1000) + 3 * WINDOW_S * 1000
        for partition in range(self.partitions):
            last = orjson.dumps({"event_time": sentinel, "model": "sentinel", "features": {}})
            self.producer.produce(self.topic, last, partition=partition)
        if self.producer.flush(300) or self.failed:
            raise RuntimeError(f"records not delivered: {self.failed} failed")


@dataclass
class Sample:
    """One look at the job, ``t`` seconds into the live run."""

    t: float
    phase: str
    sent: int
    lag_records: int
    lag_seconds: float
    rss_mib: float
    checkpoints: int
    failed_checkpoints: int
    last_checkpoint_ms: float
    watermark_lag_s: float
    alert: str  # "", "pending" or "firing"


@dataclass
class Outcome:
    """The run's figures."""

    windows_per_s: float = 0.0
    models: int = 0
    rate_overload: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    checkpoint_ms: list[tuple[float, float]] = field(default_factory=list)  # (t, duration) per completed checkpoint
    windows_expected: int = 0
    windows_exact: int = 0


def metric(text: str, name: str) -> float | None:
    """The largest sample of metric ``name`` in a Prometheus exposition, None when absent."""
    values = [float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)]
    return max(values) if values else None


def calibrate(services: PrivateServices, root: Path) -> float:
    """Windows a second the job judges (past its warm-up) on a backlog: :data:`CALIBRATION_MODELS` models."""
    topic = unique_topic("calibrate")
    create_topic(services.kafka_bootstrap, topic, 2)
    producer, rng = _producer(services.kafka_bootstrap), np.random.default_rng(3)
    first_ms = int(time.time() * 1000) // 1000 * 1000 - (CALIBRATION_WINDOWS + 1) * WINDOW_S * 1000
    for i in range(CALIBRATION_WINDOWS * CALIBRATION_PER_WINDOW * CALIBRATION_MODELS):
        event_ms = first_ms + i * WINDOW_S * 1000 // (CALIBRATION_PER_WINDOW * CALIBRATION_MODELS)
        producer.produce(topic, event(rng, i % CALIBRATION_MODELS, event_ms), partition=i % 2)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    workdir = root / "calibration"
    workdir.mkdir(parents=True)
    store_url = store_url_of(services)
    job = LiveJob(write_config(workdir / "config.yaml", topic, services.kafka_bootstrap, CALIBRATION_MODELS),
                  store_url, workdir, services, bounded=True)
    job.start()
    counts = []  # (monotonic, windows stored)
    try:
        total = CALIBRATION_WINDOWS * CALIBRATION_MODELS
        while job.alive() and (not counts or counts[-1][1] < total):
            counts.append((time.monotonic(), _windows_stored(store_url)))
            time.sleep(1)
    finally:
        job.kill()
    lo, hi = 0.3 * total, 0.9 * total
    window = [(t, n) for t, n in counts if lo <= n <= hi]
    if len(window) < 2 or window[-1][0] <= window[0][0]:
        raise RuntimeError(f"calibration did not see the job judge windows steadily: {counts[-5:]}\n{job.log_tail()}")
    return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])


def _windows_stored(store_url: str) -> int:
    from sqlalchemy import func, select
    from sqlalchemy.exc import SQLAlchemyError

    from driftwarden.schemas.tables import window_counts

    try:
        with store_engine(store_url) as engine, engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(window_counts)).scalar_one()
    except SQLAlchemyError:
        return 0


class Watcher(threading.Thread):
    """Samples the job every :data:`SAMPLE_S` seconds into :attr:`outcome`."""

    def __init__(self, job: LiveJob, stream: RateStream, source: SourceConfig, prometheus: str,
                 outcome: Outcome) -> None:
        super().__init__(daemon=True)
        self.job, self.stream, self.source, self.prometheus, self.outcome = job, stream, source, prometheus, outcome
        self.phase = "start"
        self.began = time.monotonic()
        self.stopped = threading.Event()
        self._checkpoints_seen = 0

    def run(self) -> None:
        while not self.stopped.wait(SAMPLE_S):
            try:
                self.outcome.samples.append(self.sample())
            except Exception as exc:  # noqa: BLE001 - a missed sample is logged, the run goes on
                print(f"sample failed: {exc!r}", flush=True)

    def sample(self) -> Sample:
        """One look at lag, memory, checkpoints and the alert."""
        t = time.monotonic() - self.began
        lags = consumer_lags(self.source)
        text = httpx.get(f"http://127.0.0.1:{self.job.reporter_port}/metrics", timeout=10).text
        completed = int(metric(text, "flink_jobmanager_job_numberOfCompletedCheckpoints") or 0)
        duration = metric(text, "flink_jobmanager_job_lastCheckpointDuration") or 0.0
        if completed > self._checkpoints_seen:
            self._checkpoints_seen = completed
            self.outcome.checkpoint_ms.append((t, duration))
        return Sample(t=t, phase=self.phase, sent=self.stream.total, lag_records=sum(x.records for x in lags),
                      lag_seconds=max((x.seconds for x in lags), default=0.0), rss_mib=_rss_mib(self.job),
                      checkpoints=completed,
                      failed_checkpoints=int(metric(text, "flink_jobmanager_job_numberOfFailedCheckpoints") or 0),
                      last_checkpoint_ms=duration,
                      watermark_lag_s=(metric(text, "flink_taskmanager_job_task_operator_watermarkLag") or 0.0) / 1000,
                      alert=self.alert_state())

    def alert_state(self) -> str:
        """The behind alert's state in Prometheus ("" when inactive)."""
        alerts = httpx.get(f"{self.prometheus}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
        states = [a["state"] for a in alerts if a["labels"].get("alertname") == BEHIND_ALERT]
        return "firing" if "firing" in states else ("pending" if states else "")


def _rss_mib(job: LiveJob) -> float:
    total = 0
    for pid in _process_tree(job.process.pid):
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * 4096
        except (OSError, ValueError, IndexError):
            continue
    return total / 2**20


def live_run(services: PrivateServices, root: Path, models: int, minutes: float, outcome: Outcome) -> None:
    """The live job through quiet, overload and drain phases; fills ``outcome``."""
    topic = unique_topic("overload")
    create_topic(services.kafka_bootstrap, topic, 2)
    workdir = root / "live"
    workdir.mkdir(parents=True)
    config = write_config(workdir / "config.yaml", topic, services.kafka_bootstrap, models)
    store_url = store_url_of(services)
    job = LiveJob(config, store_url, workdir, services, reporter_port=free_port(), metrics_port=free_port())
    targets = services.run_dir / "prometheus" / "targets" / "overload-job.json"
    targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{job.reporter_port}", f"127.0.0.1:{job.metrics_port}"]}]))
    stream = RateStream(services.kafka_bootstrap, topic, 2, models)
    stream.active = max(1, models // QUIET_SHARE)
    source = SourceConfig(topics=[topic], bootstrap_servers=services.kafka_bootstrap, group_id=f"g-{topic}")
    watcher = Watcher(job, stream, source, services.prometheus_url, outcome)
    stream.start()
    job.start()
    try:
        wait_until(lambda: _windows_stored(store_url) >= stream.active * 2, 600, "the first windows", job)
        watcher.start()
        watcher.phase, stream.active = "overload", models
        time.sleep(minutes * 60)
        watcher.phase, stream.active = "drain", max(1, models // QUIET_SHARE)
        wait_until(lambda: _drained(outcome), 3600, "the lag to drain and the behind alert to clear", job, step_s=5)
        watcher.phase = "end"
        stream.stop()
        wait_until(lambda: _windows_stored(store_url) >= len(stream.sent), 1800, "every window stored", job, step_s=5)
        time.sleep(5)
        stored = _stored_counts(store_url)
        outcome.windows_expected = len(stream.sent)
        outcome.windows_exact = sum(1 for key, n in stream.sent.items() if stored.get(key) == n)
    finally:
        watcher.stopped.set()
        stream.stopped.set()
        job.kill()


def _drained(outcome: Outcome) -> bool:
    """The lag has been under a minute, and the behind alert inactive, for the last minute (of drain)."""
    drain = [s for s in outcome.samples if s.phase == "drain"]
    if not drain or drain[-1].t - drain[0].t < 60:
        return False
    return all(s.alert == "" and s.lag_seconds < 60 for s in drain if s.t >= drain[-1].t - 60)


def _stored_counts(store_url: str) -> Counter:
    from sqlalchemy import select

    from driftwarden.schemas.tables import window_counts

    with store_engine(store_url) as engine, engine.connect() as conn:
        rows = conn.execute(select(window_counts.c.model, window_counts.c.window_start, window_counts.c.events))
        return Counter({(m, int(ws.timestamp() * 1000)): n for m, ws, n in rows})


def summary(outcome: Outcome) -> str:
    """The run's figures as text."""
    s = outcome.samples
    overload = [x for x in s if x.phase == "overload"]
    peak = max(s, key=lambda x: x.lag_seconds)
    fired = next((x.t for x in s if x.alert == "firing"), None)
    cleared = next((x.t for x in s if fired is not None and x.t > fired and x.alert == ""), None)
    rate_in = (overload[-1].sent - overload[0].sent) / (overload[-1].t - overload[0].t)
    consumed = rate_in - (overload[-1].lag_records - overload[0].lag_records) / (overload[-1].t - overload[0].t)
    durations = [d for _, d in outcome.checkpoint_ms]
    by_phase = {p: [d for t, d in outcome.checkpoint_ms if _phase_at(s, t) == p] for p in ("overload", "drain")}
    lines = [
        f"job judges {outcome.windows_per_s:.1f} windows/s (calibration); {outcome.models} models of 10 s windows "
        f"= {outcome.models / WINDOW_S / outcome.windows_per_s:.2f}x that in the overload",
        f"overload: input {rate_in:,.0f} events/s, consumed {consumed:,.0f} events/s: "
        f"input/consumed {rate_in / consumed:.2f}",
        f"lag peak {peak.lag_records:,} records, {peak.lag_seconds:.0f} s, at {peak.t:.0f} s; "
        f"end of the overload at {overload[-1].t:.0f} s; lag under 60 s again at "
        f"{next((x.t for x in s if x.t > peak.t and x.lag_seconds < 60), float('nan')):.0f} s",
        f"behind alert: firing at {fired if fired is None else round(fired)} s, cleared at "
        f"{cleared if cleared is None else round(cleared)} s",
        f"peak RSS {max(x.rss_mib for x in s):,.0f} MiB (client, JVM, Python workers)",
        f"checkpoints: {s[-1].checkpoints - s[0].checkpoints} completed, "
        f"{s[-1].failed_checkpoints - s[0].failed_checkpoints} failed from the overload's start; duration ms "
        f"median {np.median(durations):.0f}, max {max(durations):.0f}; under overload median "
        f"{np.median(by_phase['overload'] or [0]):.0f} / max {max(by_phase['overload'] or [0]):.0f}; "
        f"draining median {np.median(by_phase['drain'] or [0]):.0f} / max {max(by_phase['drain'] or [0]):.0f}",
        f"windows exact {outcome.windows_exact}/{outcome.windows_expected}",
    ]
    return "\n".join(lines)


def _phase_at(samples: list[Sample], t: float) -> str:
    before = [x for x in samples if x.t <= t]
    return before[-1].phase if before else "start"


def plot(outcome: Outcome, path: Path) -> None:
    """Lag (seconds and records), input rate, checkpoint durations and the alert over the run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = outcome.samples
    t = np.array([x.t for x in s]) / 60
    fig, (top, mid, low) = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    top.plot(t, [x.lag_seconds for x in s], label="consumer lag (s, oldest unread record)")
    top.plot(t, [x.watermark_lag_s for x in s], label="watermark lag (s)", alpha=0.7)
    top.axhline(300, color="grey", ls=":", label="behind rule: 300 s for 5 min")
    firing = [x.t / 60 for x in s if x.alert == "firing"]
    if firing:
        top.axvspan(min(firing), max(firing), color="red", alpha=0.12, label="DriftwardenMonitorBehind firing")
    top.set_ylabel("seconds")
    top.legend(loc="upper left", fontsize=8)
    mid.plot(t, [x.lag_records for x in s], color="tab:purple", label="consumer lag (records)")
    rates = np.diff([x.sent for x in s]) / np.maximum(np.diff([x.t for x in s]), 1e-9)
    mid2 = mid.twinx()
    mid2.plot(t[1:], rates, color="tab:green", alpha=0.6, label="input (events/s)")
    mid.set_ylabel("records")
    mid2.set_ylabel("events/s")
    mid.legend(loc="upper left", fontsize=8)
    mid2.legend(loc="upper right", fontsize=8)
    low.plot([a / 60 for a, _ in outcome.checkpoint_ms], [d / 1000 for _, d in outcome.checkpoint_ms], "o", ms=3,
             label="checkpoint duration (s)")
    low.set_ylabel("seconds")
    low.set_xlabel("minutes")
    low.legend(loc="upper left", fontsize=8)
    for axis in (top, mid, low):
        for x in s:
            if x.phase == "overload":
                axis.axvspan(x.t / 60 - SAMPLE_S / 120, x.t / 60 + SAMPLE_S / 120, color="orange", alpha=0.05, lw=0)
    fig.suptitle(f"{outcome.models} models, 10 s windows: {outcome.models / WINDOW_S / outcome.windows_per_s:.1f}x "
                 "the windows the job judges, for the shaded minutes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    """Calibrate, overload, drain; print the figures (and plot them)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="minutes of overload (default: %(default)s)")
    parser.add_argument("--factor", type=float, default=2.0, help="times what the job takes (default: %(default)s)")
    parser.add_argument("--plot", type=Path, help="write the lag curve and checkpoint durations here (PNG)")
    parser.add_argument("--json", type=Path, help="write every sample here")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="dw-overload-", dir="/var/tmp"))
    root.chmod(0o755)
    services = PrivateServices(root / "services")
    services.services("start", "kafka", "postgres", "prometheus")
    outcome = Outcome()
    try:
        outcome.windows_per_s = calibrate(services, root)
        outcome.models = round(args.factor * outcome.windows_per_s * WINDOW_S)
        print(f"calibration: {outcome.windows_per_s:.1f} windows/s judged; overload with {outcome.models} models",
              flush=True)
        live_run(services, root, outcome.models, args.minutes, outcome)
    finally:
        services.services("stop")
        if args.json:
            args.json.write_text(json.dumps(asdict(outcome), indent=1))
        shutil.rmtree(root, ignore_errors=True)
    print(summary(outcome))
    if args.plot:
        plot(outcome, args.plot)
    return 0 if outcome.windows_exact == outcome.windows_expected else 1


if __name__ == "__main__":
    sys.exit(main())
