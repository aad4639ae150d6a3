"""bench/fused_ceiling.py's fused operator does the drift job's per-event work: over a real Kafka topic, its
window summaries equal Python's (pipeline.summary.WindowRows) byte for byte, so its ceiling is a ceiling of
that work and not of less."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_bench

pytestmark = pytest.mark.services


def test_fused_operator_summarizes_each_window_as_python_does(kafka_bootstrap, tmp_path):
    bench = load_bench("fused_ceiling")
    classes = bench.compile_ceiling(tmp_path / "classes")
    before = _flink_leftovers()
    assert bench.check_summaries(classes, tmp_path) == 4  # 3.5 windows of events: the last one fires at the end
    # its JVM's MiniCluster kept its folders and Flink's RPC jar (21 MiB) in a temporary folder removed after
    assert _flink_leftovers() - before == set()


def _flink_leftovers() -> set[Path]:
    """What a JVM's MiniCluster leaves in the JDK's default temporary folder (/tmp)."""
    return {*Path("/tmp").glob("minicluster_*"), *Path("/tmp").glob("flink-rpc-*.jar")}
