"""A PostgreSQL outage mid-stream loses nothing: the job waits, retries (counted on /metrics), catches up.

The server stopped and started here is a private instance (scripts/services.sh on another port
and run folder): the shared one serves other tests. The job is `driftwarden run` in a process of
its own, unbounded, as in production.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest
from sqlalchemy.exc import SQLAlchemyError

from driftwarden.schemas.events import parse_event_time
from tests.job_helpers import (T0, WINDOW_MS, stored_counts, stored_dead_letters, stream,
                               write_warmup_config)
from tests.kafka_helpers import create_topic, produce

pytestmark = [pytest.mark.services, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
OUTAGE_S = 30
START_S = 600  # generous: the job's start-up alone took 3 minutes on a shared 2-core machine
PER_WINDOW = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivatePostgres:
    """A PostgreSQL of this test's own, started and stopped by scripts/services.sh."""

    def __init__(self) -> None:
        self.run_dir = Path(f"/var/tmp/dw-outage-{uuid.uuid4().hex[:8]}")  # reachable by the postgres user
        self.run_dir.mkdir(mode=0o755)
        self.run_dir.chmod(0o755)
        self.port = _free_port()

    @property
    def url(self) -> str:
        """Its store URL, with the password scripts/services.sh generated at its first start."""
        password = (self.run_dir / "postgres" / "password").read_text().strip()
        return f"postgresql://driftwarden:{password}@127.0.0.1:{self.port}/driftwarden"

    def services(self, action: str) -> None:
        """``scripts/services.sh <action> postgres`` on this instance."""
        env = {**os.environ, "DRIFTWARDEN_RUN_DIR": str(self.run_dir), "DRIFTWARDEN_PG_PORT": str(self.port)}
        subprocess.run([str(REPO / "scripts" / "services.sh"), action, "postgres"], env=env, check=True,
                       capture_output=True, timeout=120)

    def remove(self) -> None:
        self.services("stop")
        shutil.rmtree(self.run_dir, ignore_errors=True)


@pytest.fixture()
def private_pg():
    pg = PrivatePostgres()
    pg.services("start")
    yield pg
    pg.remove()


def _counts(url: str) -> Counter:
    try:
        return stored_counts(url)
    except SQLAlchemyError:
        return Counter()


def _wait_for(what: str, check, timeout_s: float, job: subprocess.Popen | None = None, log: Path | None = None) -> None:
    """Poll ``check`` until true; on time-out fail with the job's stacks (SIGUSR1: faulthandler) and log tail."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() >= deadline:
            if job is not None and job.poll() is None:
                os.kill(job.pid, signal.SIGUSR1)
                time.sleep(2)
            tail = log.read_text(errors="replace")[-12000:] if log and log.exists() else ""
            raise AssertionError(f"timed out waiting for {what}; the job's output ends:\n{tail}")
        time.sleep(1)


def _metric(port: int, name: str) -> float:
    """Sum of a metric's samples on the job's /metrics (0 when absent)."""
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", body, re.M))


def _task_failures(run_dir: Path) -> int:
    """Task failures (each one a restart) in the embedded job's Flink log."""
    return sum(log.read_text(errors="replace").count("switched from RUNNING to FAILED")
               for log in (run_dir / "logs" / "flink-embedded").glob("*.log"))


def test_a_store_outage_mid_stream_loses_and_duplicates_no_window(kafka_bootstrap, topic_name, tmp_path, private_pg):
    create_topic(kafka_bootstrap, topic_name, partitions=1)
    events = stream(8, PER_WINDOW)
    flush = {**events[-1], "event_time": T0 + 9 * WINDOW_MS + 5_000}  # moves the watermark past window 7
    expected = Counter(("m", parse_event_time(e["event_time"]) // WINDOW_MS * WINDOW_MS) for e in events)
    produce(kafka_bootstrap, topic_name, events[:4 * PER_WINDOW])
    config = write_warmup_config(tmp_path / "config.yaml", topic_name, kafka_bootstrap)
    metrics_port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "DRIFTWARDEN_RUN_DIR": str(tmp_path / "run")}
    job = subprocess.Popen([sys.executable, "-m", "driftwarden.cli", "run", "-c", str(config), "--store-url",
                            private_pg.url, "--metrics-port", str(metrics_port), "--checkpoint-interval", "2000",
                            "--checkpoint-dir", str(tmp_path / "chk")], env=env, start_new_session=True,
                           stdout=open(tmp_path / "job.log", "wb"), stderr=subprocess.STDOUT)
    try:
        _wait_for("the first windows", lambda: len(_counts(private_pg.url)) >= 2, START_S)
        private_pg.services("stop")
        stopped = time.monotonic()
        produce(kafka_bootstrap, topic_name, events[4 * PER_WINDOW:] + [flush])
        run_dir = tmp_path / "run"
        _wait_for("a counted retry or a failed task", lambda: _task_failures(run_dir) > 0 or _metric(
            metrics_port, "driftwarden_store_write_retries_total") > 0, START_S)
        assert _task_failures(run_dir) == 0  # the sink waits: no task fails, nothing restarts
        assert _metric(metrics_port, "driftwarden_store_waiting") == 1
        assert job.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - stopped)))
        private_pg.services("start")
        _wait_for("every window", lambda: len(_counts(private_pg.url)) >= len(expected), START_S, job,
                  tmp_path / "job.log")
        assert stored_counts(private_pg.url) == expected
        assert stored_dead_letters(private_pg.url) == Counter()
        assert _metric(metrics_port, "driftwarden_store_waiting") == 0
        assert job.poll() is None and _task_failures(run_dir) == 0
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGTERM)
            try:
                job.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
