"""bench/bench_job.py's headline: each pipeline's first run over the topic in a process (and JVM) of its
own, so that neither finds the engine's code compiled by the JIT for the other (bench_job.first_run)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import load_bench

pytestmark = pytest.mark.services


def test_a_first_run_runs_in_a_process_and_jvm_of_its_own(kafka_bootstrap: str, topic_name: str) -> None:
    """The figures come back from another process, whose JVM is not this process's and is gone after it."""
    bench = load_bench("bench_job")
    bench.BOOTSTRAP = kafka_bootstrap
    bench.fill_topic(f"{topic_name}-empty", 1, 1000)
    bench.fill_topic(topic_name, 100_000, 1000)  # enough that its run outlasts the start-up
    figures = bench.first_run_in_own_process("plain", topic_name, f"{topic_name}-empty")
    assert figures["pid"] != os.getpid()
    assert len(figures["jvm_pids"]) == 1 and figures["jvm_pids"][0] not in bench._process_tree()
    deadline = time.monotonic() + 60
    while _alive(figures["jvm_pids"][0]):  # the JVM ends with the process that started it
        assert time.monotonic() < deadline, "the first run's JVM outlived its process"
        time.sleep(0.2)
    assert figures["wall"] > figures["startup"] > 0 and figures["cpu"] > 0
    assert figures["peak_rss"] > 100 * 2**20


def _alive(pid: int) -> bool:
    """Running: neither gone nor a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
