"""Flink's own metrics in Prometheus: the reporter of the embedded MiniCluster and its scrape target.

The embedded MiniCluster builds its metric registry without Flink's plugin manager, so it finds
reporters only through the class loader: the reporter jar (``flink-metrics-prometheus``, fetched
from Maven Central by scripts/bootstrap.sh) rides on ``pipeline.jars``, which PyFlink also adds to
the gateway's context class loader before the MiniCluster starts. A standalone cluster loads the
same jar from its plugins folder (scripts/services.sh, Dockerfile) with the same options
(jobs/flink-conf.yaml, deploy/flink/config.yaml).

Label cardinality stays bounded: the variables that change with every submission, restart or
attempt (ids) are excluded, so a restart reuses the same series; what is left (host, job name,
task and operator names, subtask index, topic and partition of the Kafka source) is fixed by the
job graph and the topics.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
from pathlib import Path

from driftwarden.core.paths import run_dir

log = logging.getLogger(__name__)

REPORTER_JAR = "plugins/metrics-prometheus/flink-metrics-prometheus-2.2.1.jar"
REPORTER_FACTORY = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
#: Port of the embedded cluster's reporter: a number, a range ("9249-9260"), "0" or "off" to turn it
#: off; unset: a free port, registered with the local Prometheus (scripts/services.sh's file_sd folder).
PORT_ENV = "DRIFTWARDEN_FLINK_METRICS_PORT"
#: Flink metric variables dropped from the labels: ids that change on every submission or restart.
EXCLUDED_VARIABLES = ("job_id", "task_id", "task_attempt_id", "task_attempt_num", "tm_id", "operator_id")
JOB_NAME = "driftwarden"


def reporter_options(port: str) -> dict[str, str]:
    """Flink configuration of the Prometheus reporter named ``prom`` on ``port`` (a number or range)."""
    return {
        "metrics.reporter.prom.factory.class": REPORTER_FACTORY,
        "metrics.reporter.prom.port": port,
        "metrics.reporter.prom.scope.variables.excludes": ";".join(EXCLUDED_VARIABLES),
    }


def under_flink_cli() -> bool:
    """True when this process is a job's client started by ``flink run`` (the job runs on a cluster)."""
    return "PYFLINK_GATEWAY_PORT" in os.environ


def embedded_reporter(jar_dir: Path) -> tuple[list[str], dict[str, str]]:
    """Jars and options that give the embedded MiniCluster its reporter; nothing when turned off.

    ``PORT_ENV`` chooses the port; unset, a free port is taken and registered as a scrape target of
    the local Prometheus for as long as this process lives.
    """
    wanted = os.environ.get(PORT_ENV, "").strip()
    if wanted.lower() in ("0", "off") or under_flink_cli():
        return [], {}
    jar = jar_dir / REPORTER_JAR
    if not jar.is_file():
        from driftwarden.core.errors import ConfigError

        raise ConfigError(f"missing jar {jar}: run scripts/bootstrap.sh (or set {PORT_ENV}=off)")
    port = wanted or str(free_port())
    if port.isdigit():
        register_scrape_target(int(port))
    log.info("Flink metrics (embedded cluster) on http://127.0.0.1:%s/metrics", port)
    return [jar.as_uri()], reporter_options(port)


def targets_dir() -> Path:
    """The local Prometheus's file_sd folder (scripts/services.sh's, in the run folder)."""
    return run_dir() / "prometheus" / "targets"


def register_scrape_target(port: int) -> Path | None:
    """List 127.0.0.1:port in the local Prometheus's file_sd folder until this process exits."""
    folder = targets_dir()
    if not folder.is_dir():
        return None
    path = folder / f"flink-embedded-{os.getpid()}-{port}.json"
    path.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"], "labels": {"source": "flink-embedded"}}]))
    atexit.register(path.unlink, missing_ok=True)
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
