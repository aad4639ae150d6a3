"""Exactly once: kill -9 the embedded job, resume from the latest checkpoint, same store as a clean run.

Run on SQLite and on the production store, the scram-authenticated PostgreSQL of scripts/services.sh
(the job gets the password through the URL, which `driftwarden run` moves into its private pgpass)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from driftwarden.jobs.drift_job import run_drift_job
from driftwarden.jobs.flink_env import latest_checkpoint
from driftwarden.schemas.config import load_config
from driftwarden.schemas.events import parse_event_time
from tests.job_helpers import (T0, WINDOW_MS, assert_same_results, late_partitions, stored_counts,
                               stored_dead_letter_keys, stored_late, stored_verdicts, stream, write_config)
from tests.kafka_helpers import create_topic, produce_to_partitions
from tests.test_drift_job import reference_file  # noqa: F401  (module fixture)

pytestmark = [pytest.mark.services, pytest.mark.slow]

N_WINDOWS = 10
PER_WINDOW = 500
FIRST_WINDOWS = 6  # of event time produced before the crash


def _sentinel() -> dict:
    """An event of an unmonitored model far after the data: its watermark closes the last windows."""
    return {"event_time": T0 + (N_WINDOWS + 3) * WINDOW_MS, "model": "sentinel", "features": {}}


def _start_job(config: Path, url: str, checkpoints: Path, resume: bool, parallelism: int = 1) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "driftwarden.cli", "run", "-c", str(config), "--store-url", url,
           "--checkpoint-interval", "1000", "--checkpoint-dir", str(checkpoints), "--parallelism", str(parallelism)]
    cmd += ["--resume"] if resume else []
    return subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_for(condition, timeout: float, what: str, job: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if job.poll() is not None:
            raise AssertionError(f"job exited ({job.returncode}) before {what}: {job.stderr.read()[-3000:]!r}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def _kill_hard(job: subprocess.Popen) -> None:
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:  # it already died: _wait_for reported why
        pass
    job.wait(30)


_ENGINES: dict[str, object] = {}


def _windows_stored(url: str) -> int:
    """Windows stored so far (polled: one engine per store, not one per poll)."""
    from sqlalchemy import create_engine, func, select

    from driftwarden.schemas.tables import window_counts

    engine = _ENGINES.setdefault(url, create_engine(url.replace("postgresql://", "postgresql+psycopg://")))
    try:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(window_counts)).scalar_one()
    except Exception:  # noqa: BLE001 - the store may not exist yet
        return 0


@pytest.fixture()
def two_stores(request, tmp_path):
    """URLs of two empty stores, the crashed run's and the clean run's: SQLite files, or schemas of the real PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/crashed.db", f"sqlite:///{tmp_path}/clean.db"
        return
    from sqlalchemy import create_engine, text

    pg_url = request.getfixturevalue("pg_url")
    schemas = [f"t_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    admin = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with admin.begin() as conn:
        for schema in schemas:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
    yield tuple(f"{pg_url}?options=-csearch_path%3D{schema}" for schema in schemas)
    for engine in _ENGINES.values():
        engine.dispose()
    _ENGINES.clear()
    with admin.begin() as conn:
        for schema in schemas:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


def _two_partitions(events: list[dict]) -> tuple[list[tuple[list, list]], int]:
    """tests.job_helpers.late_partitions, each cut at its first event of window ``FIRST_WINDOWS``."""
    partitions, late = late_partitions(events, N_WINDOWS)
    parts = []
    for records in partitions:
        cut = next(i for i, r in enumerate(records)
                   if parse_event_time(r["event_time"]) >= T0 + FIRST_WINDOWS * WINDOW_MS)
        parts.append((records[:cut], records[cut:]))
    return parts, late


# Each store once (a run takes 2-5 min): SQLite resumed as it was, the production store (PostgreSQL) rescaled,
# the harder case (its source marks and open partials redistributed over two subtasks).
@pytest.mark.parametrize(("two_stores", "resumed_parallelism"), [("sqlite", 1), ("postgres", 2)],
                         indirect=["two_stores"])
def test_kill_minus_nine_and_resume_equals_uninterrupted_run(kafka_bootstrap, topic_name, tmp_path, two_stores,
                                                             reference_file, resumed_parallelism: int):  # noqa: F811
    """Two partitions with out-of-order and late events, killed mid-stream and resumed (at parallelism 1, or
    rescaled to 2: the source task's marks and open partials are redistributed): every stored row (results,
    event and late counts per window, dead letters) equals an uninterrupted run's."""
    create_topic(kafka_bootstrap, topic_name, partitions=2)
    events = stream(N_WINDOWS, PER_WINDOW, shift_from=7)
    parts, n_late = _two_partitions(events)
    # each partition's first record after the crash: an event of a window its partition's mark passed before
    # the crash, late only if the resumed job restored the mark (no event after the resume has passed it)
    behind = [dict(events[(FIRST_WINDOWS - 2) * PER_WINDOW + 1], request_id=f"behind-{p}") for p in range(2)]
    parts = [(before, [late] + after) for (before, after), late in zip(parts, behind)]
    produce_to_partitions(kafka_bootstrap, topic_name, [before for before, _ in parts])
    (tmp_path / "reference.dwref").write_bytes(reference_file.read_bytes())
    config = write_config(tmp_path / "config.yaml", topic_name, kafka_bootstrap)
    (crashed_url, clean_url), checkpoints = two_stores, tmp_path / "chk"

    job = _start_job(config, crashed_url, checkpoints, resume=False)
    try:
        _wait_for(lambda: _windows_stored(crashed_url) >= FIRST_WINDOWS - 1 and latest_checkpoint(checkpoints), 240,
                  f"{FIRST_WINDOWS - 1} windows and a checkpoint", job)
        time.sleep(3)  # checkpoints every second: the newest is past everything produced so far
    finally:
        _kill_hard(job)
    windows_before_crash = _windows_stored(crashed_url)
    produce_to_partitions(kafka_bootstrap, topic_name, [after + [_sentinel()] for _, after in parts])

    job = _start_job(config, crashed_url, checkpoints, resume=True, parallelism=resumed_parallelism)
    try:
        _wait_for(lambda: _windows_stored(crashed_url) >= N_WINDOWS, 240, "every window after resume", job)
        time.sleep(2)  # let a window that was being written finish
    finally:
        _kill_hard(job)

    run_drift_job(load_config(config), clean_url, str(tmp_path / "reference.dwref"), bounded=True,
                  checkpoint_interval_ms=0)
    assert 3 <= windows_before_crash < N_WINDOWS
    monitored = lambda counts: {k: n for k, n in counts.items() if k[0] == "m"}  # noqa: E731
    assert monitored(stored_counts(crashed_url)) == monitored(stored_counts(clean_url))
    assert sum(monitored(stored_counts(crashed_url)).values()) == len(events)
    assert monitored(stored_late(crashed_url)) == monitored(stored_late(clean_url))
    assert sum(stored_late(clean_url).values()) == n_late + len(behind) == 2 * (N_WINDOWS - 1) + 2
    assert stored_dead_letter_keys(crashed_url) == stored_dead_letter_keys(clean_url)
    assert_same_results(stored_verdicts(crashed_url), stored_verdicts(clean_url))
