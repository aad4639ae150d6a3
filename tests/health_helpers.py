"""A live streaming job for the monitor-health tests: events stamped now, the job in a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import orjson
import yaml
from confluent_kafka import Producer

from driftwarden.jobs.flink_metrics import free_port

MODEL = "health-m"
WINDOW_S = 10


def promtool_problems(text: str) -> list[str]:
    """The problems ``promtool check metrics`` reports for an exposition, one per line (none: ``[]``)."""
    done = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    if done.returncode not in (0, 3):  # 3: lint problems found
        raise AssertionError(done.stdout + done.stderr)
    return [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]


#: Kafka's consumer metrics, which Flink's KafkaSource forwards as gauges under Kafka's own names (``..._total``, ``_ns``)
KAFKA_CLIENT_METRICS = "_KafkaSourceReader_KafkaConsumer_"


def not_flinks_or_kafkas(problems: list[str]) -> list[str]:
    """The problems about names neither Flink (camelCase) nor the Kafka client chose: driftwarden's own."""
    return [p for p in problems if p.startswith("flink_taskmanager_job_task_operator_model_")
            or not ("camelCase" in p or KAFKA_CLIENT_METRICS in p.split(" ", 1)[0])]


def write_live_config(path: Path, topic: str, bootstrap: str) -> Path:
    """A monitor config with short windows and a warm-up reference, for events stamped with the wall clock."""
    path.write_text(yaml.safe_dump({
        "source": {"topics": [topic], "bootstrap_servers": bootstrap, "group_id": f"g-{topic}"},
        "window": {"size": f"{WINDOW_S}s", "out_of_orderness": "1s", "idleness": "3s"},
        "reference": {"mode": "warmup", "warmup_windows": 2},
        "thresholds": {"min_count": 10},
        "models": [{"name": MODEL, "features": {"x": "numeric", "c": "categorical"}}],
    }))
    return path


class LiveProducer(threading.Thread):
    """Publishes ``rate`` events per second stamped with the wall clock, over every partition."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int = 100) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.stopped = threading.Event()
        self.sent = 0

    def run(self) -> None:
        rng = np.random.default_rng(7)
        while not self.stopped.is_set():
            now = int(time.time() * 1000)
            for i in range(self.rate // 10):
                event = {"event_time": now, "model": MODEL,
                         "features": {"x": float(rng.normal()), "c": str(rng.choice(list("abc")))}}
                self.producer.produce(self.topic, orjson.dumps(event), partition=(self.sent + i) % self.partitions)
            self.sent += self.rate // 10
            self.producer.poll(0)
            time.sleep(0.1)
        self.producer.flush(10)

    def stop(self) -> None:
        """Stop publishing and flush."""
        self.stopped.set()
        self.join(15)


@dataclass
class LiveJob:
    """``driftwarden run`` on the embedded MiniCluster as a child process with its Flink reporter port."""

    config: Path
    store_url: str
    workdir: Path
    reporter_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    def start(self) -> None:
        """Start the job; its output goes to ``workdir/job.log``."""
        env = dict(os.environ, DRIFTWARDEN_FLINK_METRICS_PORT=str(self.reporter_port))
        cmd = [sys.executable, "-m", "driftwarden.cli", "run", "--config", str(self.config),
               "--store-url", self.store_url, "--checkpoint-interval", "2000",
               "--checkpoint-dir", str(self.workdir / "checkpoints"), "--metrics-port", str(self.metrics_port)]
        log = (self.workdir / "job.log").open("wb")
        self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)

    @property
    def metrics_url(self) -> str:
        """The Flink reporter's /metrics URL."""
        return f"http://127.0.0.1:{self.reporter_port}/metrics"

    def scrape(self) -> str:
        """The reporter's exposition text, or "" while it does not answer."""
        try:
            return httpx.get(self.metrics_url, timeout=5).text
        except httpx.HTTPError:
            return ""

    def wait_for(self, needle: str, timeout_s: float = 480) -> str:
        """Scrape until ``needle`` appears; fail with the job's log tail otherwise.

        The default wait is long: on a loaded 2-core machine the embedded job took 250 s from start
        to its first records (Python workers starting), and its first windows judged after that.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, self.log_tail()
            text = self.scrape()
            if needle in text:
                return text
            time.sleep(2)
        raise AssertionError(f"{needle!r} not on {self.metrics_url} within {timeout_s} s\n{self.log_tail()}")

    def log_tail(self) -> str:
        """The last lines of the job's output."""
        path = self.workdir / "job.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def stop(self) -> None:
        """Kill the job's whole process group (the JVM and the Python workers with it)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
