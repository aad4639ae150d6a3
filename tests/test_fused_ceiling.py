"""bench/fused_ceiling.py's fused operator does the drift job's per-event work: over a real Kafka topic, its
window summaries equal Python's (pipeline.summary.WindowRows) byte for byte, so its ceiling is a ceiling of
that work and not of less."""

from __future__ import annotations

import pytest

from tests.conftest import load_bench

pytestmark = pytest.mark.services


def test_fused_operator_summarizes_each_window_as_python_does(kafka_bootstrap, tmp_path):
    bench = load_bench("fused_ceiling")
    classes = bench.compile_ceiling(tmp_path / "classes")
    assert bench.check_summaries(classes, tmp_path) == 4  # 3.5 windows of events: the last one fires at the end
