"""The faults of a real deployment on the live job: every window exact, nothing wrongly late (bench/faults.py).

CI runs one case, sized to fit its time: the broker stopped for 15 s and started again while the
job reads a 2-partition topic under ``idleness: 5s``, the fault that half-counted windows when a
partition silent for ``idleness`` let the watermark pass its unread backlog. Every case (the broker
on 4 partitions and killed at a checkpoint, a TaskManager replaced, the job killed and resumed,
PostgreSQL down 30 s, partitions added) under both configs, three runs each, in runs of their own:
``.venv/bin/python bench/faults.py`` (docs/faults.md).

The services here are private (their own run folder and port offset: bench/fault_harness.py),
started and stopped by this module: the faults stop the broker and PostgreSQL and kill a
TaskManager, which must never touch the services other tests use.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from bench.fault_harness import PrivateServices
from bench.faults import CASES, CONFIGS, run_case
from driftwarden.schemas.config import WindowConfig

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.faults]

#: (case, config) of the CI selection; bench/faults.py runs every case under every config.
CI_RUNS = [("broker-restart-2p", "idleness-5s")]


@pytest.fixture(scope="module")
def private_services():
    root = Path(tempfile.mkdtemp(prefix="dw-faults-", dir="/var/tmp"))
    root.chmod(0o755)  # PostgreSQL runs as its own user and must reach its folder
    services = PrivateServices(root / "services")
    try:  # stopped and removed even when the start fails part way (a broker started, PostgreSQL not)
        services.services("start", "kafka", "postgres")
        yield services
    finally:
        services.services("stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("case, config", CI_RUNS)
def test_every_window_is_exact_through_the_fault(private_services, tmp_path, case: str, config: str) -> None:
    result = run_case(case, config, private_services, tmp_path / "run")
    print(result.line(WindowConfig.model_validate(CONFIGS[config]).size_ms))  # the figures, in CI's log
    verdict = result.verdict
    assert verdict.stored == verdict.expected, verdict.describe()  # every window with exactly its events
    assert verdict.wrongly_late == set(), verdict.describe()  # nothing dead-lettered as late that was on time
    assert verdict.late_stored == verdict.late_sent  # and every record late by its partition's order is
    assert verdict.read == sum(verdict.stored.values()) + len(verdict.late_stored) + verdict.rejected
    assert verdict.late_sent and verdict.rejected  # both kinds were in the stream
    assert [p.fault for p in result.phases] == [f.__name__ for f in CASES[case].faults]
