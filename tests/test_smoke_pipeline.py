"""The first end-to-end path: Kafka -> PyFlink (MiniCluster and standalone cluster) -> SQL store."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select

from driftwarden.core.store import make_engine
from driftwarden.jobs.smoke_job import SMOKE_WINDOW_MS, run_smoke
from driftwarden.schemas.events import rfc3339
from driftwarden.schemas.tables import window_counts
from tests.conftest import RUN_DIR
from tests.kafka_helpers import create_topic, produce

pytestmark = [pytest.mark.services, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _events(n: int, seed: int = 7) -> list[dict]:
    """Events of three models; a little disorder (< the 5 s bound), both event-time forms."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        t = T0 + 5_000 + i * 7 + rng.randint(-2000, 0)
        stamp = t if i % 2 else rfc3339(t)
        events.append({"event_time": stamp, "model": f"model-{i % 3}", "features": {"x": rng.random()}})
    return events


def _expected(events: list[dict]) -> Counter:
    from driftwarden.schemas.events import parse_event_time

    return Counter(
        (e["model"], parse_event_time(e["event_time"]) // SMOKE_WINDOW_MS * SMOKE_WINDOW_MS) for e in events
    )


def _stored(url: str) -> Counter:
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(select(window_counts.c.model, window_counts.c.window_start, window_counts.c.events))
        return Counter({(m, int(ws.timestamp() * 1000)): n for m, ws, n in rows})


@pytest.fixture(scope="module")
def smoke_topic(kafka_bootstrap: str) -> tuple[str, Counter]:
    topic = f"smoke-{os.getpid()}-{random.randint(0, 10**6)}"
    create_topic(kafka_bootstrap, topic, partitions=2)
    events = _events(10_000)
    produce(kafka_bootstrap, topic, events)
    return topic, _expected(events)


def test_minicluster_counts_every_event_exactly_once(smoke_topic, kafka_bootstrap, tmp_path):
    topic, expected = smoke_topic
    url = f"sqlite:///{tmp_path}/smoke.db"
    run_smoke(topic, kafka_bootstrap, url)
    stored = _stored(url)
    assert sum(stored.values()) == 10_000
    assert stored == expected


def test_standalone_cluster_gives_the_same_counts_in_postgres(smoke_topic, kafka_bootstrap, flink_rest, pg_engine):
    topic, expected = smoke_topic
    url = pg_engine.url.render_as_string(hide_password=False)
    env = dict(os.environ, FLINK_CONF_DIR=str(RUN_DIR / "flink/conf"))
    import pyflink

    flink = Path(pyflink.__file__).parent / "bin/flink"
    python = sys.executable
    cmd = [str(flink), "run", "-m", flink_rest, "-pyexec", python, "-pyclientexec", python,
           "-py", str(REPO / "jobs/smoke_job.py"), "--topic", topic, "--bootstrap-servers", kafka_bootstrap, "--store-url", url]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _stored(url) == expected
