"""The demo's local stack: Kafka checks, the monitor config, the reference file, the job process.

The streaming job runs as ``driftwarden run`` in a child process of its own session (process
group), so that :meth:`JobProcess.stop` can end it together with the JVM and the Python workers
it starts, and a Ctrl-C in the terminal reaches only the demo, which then shuts it down.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import orjson
import yaml

from driftwarden.demo.scenario import FEATURE_KINDS, SEGMENT_BY, training_snapshot
from driftwarden.core.errors import KafkaSecurityError, ServiceError
from driftwarden.core.kafka_security import librdkafka_config
from driftwarden.schemas.config import KafkaSecurity, SourceConfig

#: The demo model's segments (ModelConfig.segments): the reference gets one per top country plus (other).
SEGMENTS = {"by": [SEGMENT_BY], "top": 4, "min_count": 200}

#: Environment variable set on every child of the demo; its value is the demo's run id.
RUN_MARKER_ENV = "DRIFTWARDEN_DEMO_RUN"


def kafka_source(bootstrap: str, security: KafkaSecurity | None) -> SourceConfig:
    """The demo's brokers and how to connect to them (``--bootstrap-servers``, ``--kafka-security``)."""
    return SourceConfig(bootstrap_servers=bootstrap, security=security or KafkaSecurity())


def check_kafka(source: SourceConfig, timeout_s: float = 5.0) -> None:
    """Raise ServiceError, naming the command that starts Kafka, when no broker answers; KafkaSecurityError,
    in one line, when it refuses the connection as ``--kafka-security`` makes it."""
    from driftwarden.core.kafka_check import check_kafka as connect

    try:
        connect(source, timeout_s)
    except KafkaSecurityError:
        raise
    except ServiceError as exc:
        raise ServiceError(f"Kafka is not reachable at {source.bootstrap_servers}: start it with "
                           f"`scripts/services.sh start kafka` (or pass --bootstrap-servers HOST:PORT of a running broker)") \
            from exc


def create_topic(source: SourceConfig, topic: str, partitions: int) -> None:
    """Create ``topic`` (an existing topic is fine)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**librdkafka_config(source), "log_level": 3})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ServiceError(f"cannot create topic {topic} on {source.bootstrap_servers}: {exc}") from exc


def monitor_config(topic: str, bootstrap: str, model: str, window_s: int, reference: dict[str, Any],
                   route: dict[str, Any] | None, group_wait: str = "1s",
                   security: KafkaSecurity | None = None) -> dict[str, Any]:
    """The monitor config (as a mapping) for the demo model, its topic and its webhook route."""
    # min_severity is left at its default (moderate: the false-alarm budget); the timers are short
    # because the demo's windows are seconds long
    alerting: dict[str, Any] = {"group_wait": group_wait, "group_interval": group_wait, "replay_topic": topic}
    if route:
        alerting["routes"] = [route]
    return {
        "source": {"topics": [topic], "bootstrap_servers": bootstrap, "group_id": f"driftwarden-{topic}",
                   **({"security": security.model_dump(exclude_none=True)} if security else {})},
        "window": {"size": f"{window_s}s", "out_of_orderness": "1s", "idleness": "30s"},
        "reference": reference,
        "thresholds": {"min_count": 30},
        # the prediction is monitored (its inputs are features no change touches; the schedule moves it alone);
        # segments by country: the top 4 by volume (US, GB, DE, IN) and (other), each judged from 200 events
        "models": [{"name": model, "features": dict(FEATURE_KINDS), "monitor_prediction": True,
                    "segments": dict(SEGMENTS)}],
        "alerting": alerting,
    }


def write_config(path: Path, config: dict[str, Any]) -> Path:
    """Validate the config as the job will, then write it as YAML."""
    from driftwarden.schemas.config import MonitorConfig

    MonitorConfig.model_validate(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def build_reference(path: Path, config_path: Path, model: str, base_ms: int, window_ms: int, per_window: int,
                    windows: int) -> int:
    """Build the reference file from a drift-free training snapshot, as `reference build` does (with the
    model's segments); return how many events it used."""
    from driftwarden.pipeline.judging import drift_policy
    from driftwarden.pipeline.reference_build import build_reference_set
    from driftwarden.schemas.config import load_config
    from driftwarden.schemas.events import parse_event

    cfg = load_config(config_path)
    events = [parse_event(orjson.dumps(d)) for d in training_snapshot(model, base_ms, window_ms, per_window, windows)]
    build_reference_set(events, cfg, drift_policy(cfg.thresholds)).save(path)
    return len(events)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def register_scrape_target(targets_dir: Path, name: str, port: int) -> Path | None:
    """Add 127.0.0.1:port to the local Prometheus's file_sd folder (when services.sh started one); return the file."""
    if not targets_dir.is_dir():
        return None
    path = targets_dir / f"{name}.json"
    path.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"], "labels": {"source": name}}]))
    return path


@dataclass
class JobProcess:
    """The streaming job (``driftwarden run``) as a child process in a session of its own."""

    config: Path
    reference: Path
    store_url: str
    checkpoint_dir: Path
    log_path: Path
    run_id: str
    metrics_port: int = 0
    process: subprocess.Popen | None = None

    def start(self) -> None:
        """Start the job on the embedded MiniCluster; its output goes to ``log_path``."""
        cmd = [sys.executable, "-m", "driftwarden.cli", "run", "--config", str(self.config),
               "--reference", str(self.reference), "--store-url", self.store_url,
               "--checkpoint-dir", str(self.checkpoint_dir), "--metrics-port", str(self.metrics_port)]
        env = {**os.environ, RUN_MARKER_ENV: self.run_id}
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=env, start_new_session=True)

    def alive(self) -> bool:
        """True while the job process runs."""
        return self.process is not None and self.process.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        """End the job's whole process group: SIGTERM, then SIGKILL after ``grace_s``."""
        if self.process is None:
            return
        pgid = self.process.pid
        _signal_group(pgid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(pgid, signal.SIGKILL)  # the JVM and Python workers of the group, whatever the parent did
        self.process.wait()
        deadline = time.monotonic() + grace_s
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the job's log, without Java stack frames (the exceptions' lines stay)."""
        from driftwarden.jobs.flink_errors import is_stack_frame

        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join([line for line in text.splitlines() if line.strip() and not is_stack_frame(line)][-lines:])


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def group_alive(pgid: int) -> bool:
    """True while any process of group ``pgid`` exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def marked_processes(run_id: str) -> list[int]:
    """PIDs of running processes started by the demo run ``run_id`` (found by their environment)."""
    needle = f"{RUN_MARKER_ENV}={run_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise KeyboardInterrupt, so the demo's commands stop the
    same way on Ctrl-C, ``kill`` and ``docker stop``: SIGINT even when the process was started with it
    ignored (in the background of a script or a CI job, which would leave ``kill -INT`` doing nothing).
    The previous handlers come back after the block."""
    previous_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGINT, previous_int)


def _raise_interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt
