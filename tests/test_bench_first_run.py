"""bench/bench_job.py's headline: each pipeline's first run over the topic in a process (and JVM) of its
own, so that neither finds the engine's code compiled by the JIT for the other (bench_job.first_run)."""

from __future__ import annotations

import contextlib
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


def test_first_runs_take_turns_and_the_headline_is_the_median_round(monkeypatch, capsys) -> None:
    """The pipelines' first runs alternate round by round, and the printed ratios are the medians of the
    rounds' ratios, each round's listed (stand-in runs: the bench's process handling is tested above)."""
    bench = load_bench("bench_job")
    order, walls = [], {"driftwarden": iter([20.0, 10.0, 40.0]), "plain": iter([10.0, 10.0, 10.0])}

    def fake_run(pipeline: str, full: str, empty: str) -> dict:
        order.append(pipeline)
        wall = next(walls[pipeline])
        return {"startup": 0.0, "startup_cpu": 0.0, "wall": wall, "cpu": 2 * wall, "peak_rss": 2**30}

    class FakeFloor(contextlib.nullcontext):  # a stand-in floor (its real runs: bench/fused_ceiling.py)
        def first_run(self) -> dict:
            order.append("floor")
            return {"startup": 0.0, "startup_cpu": 0.0, "wall": 5.0, "cpu": 5.0, "peak_rss": 2**29}

    monkeypatch.setattr(bench, "first_run_in_own_process", fake_run)
    monkeypatch.setattr(bench, "Floor", lambda full, empty: FakeFloor(FakeFloor()))
    first = bench.first_run_rounds("full", "empty", 3)
    assert order == ["driftwarden", "plain", "floor"] * 3
    bench.print_first_runs(1_000_000, first["driftwarden"], first["plain"], {"startup": 0.0, "wall": 10.0})
    out = capsys.readouterr().out
    # round ratios 0.50, 1.00, 0.25: the median is the first round's, not the mean (0.58) nor a pooled rate
    assert "ratio driftwarden / plain Flink: 0.50 (wall) / 0.50 (CPU)" in out
    assert "0.50 / 0.50, 1.00 / 1.00, 0.25 / 0.25" in out
    assert "driftwarden job :     50,000 events/s" in out


def test_a_baseline_jar_takes_turns_with_this_one_and_the_ratios_are_this_over_it(monkeypatch, capsys, tmp_path):
    """``--baseline-jar``: the two jars' first runs alternate (the order swapped every round), the baseline's
    process gets a cache whose UDF jar is the baseline and whose other jars are this checkout's, and the
    printed ratios are this jar over the baseline, the median of the rounds (stand-in runs)."""
    from driftwarden.jobs.flink_env import UDF_JAR, jar_dir

    bench = load_bench("bench_job")
    jar = tmp_path / "baseline.jar"
    jar.write_bytes(b"a jar")
    cpu = {"this": iter([10.0, 12.0, 11.0]), "baseline": iter([10.0, 10.0, 10.0])}
    caches = []

    def fake_run(pipeline: str, full: str, empty: str, cache: Path | None = None) -> dict:
        caches.append(cache)
        seconds = next(cpu["this" if cache is None else "baseline"])
        return {"startup": 1.0, "startup_cpu": 1.0, "wall": seconds + 1, "cpu": seconds + 1, "peak_rss": 0}

    monkeypatch.setattr(bench, "first_run_in_own_process", fake_run)
    bench.compare_jars(1_000_000, "full", "empty", tmp_path / "cache", jar, 3)
    baseline = tmp_path / "cache"
    assert caches == [None, baseline, baseline, None, None, baseline]
    assert (baseline / "jars" / UDF_JAR).resolve() == jar.resolve()
    assert (baseline / "jars" / "flink").resolve() == (jar_dir() / "flink").resolve()
    out = capsys.readouterr().out
    # rounds: CPU per event 10/10, 12/10, 11/10 (this / baseline); rates the inverse
    assert "this / baseline: rate 0.909, CPU per event 1.100" in out
    assert "1.000 / 1.000, 0.833 / 1.200, 0.909 / 1.100" in out
