"""bench/bench_job.py's CPU figure counts the job's Python workers, which end unreaped (bench/bench_job.TreeCpu)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from bench_job import timed  # noqa: E402

# one CPU second, then a note of its pid, then a rest before it ends
WORKER = """
import os, sys, time
t = time.process_time()
while time.process_time() - t < 1.0:
    pass
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(1.0)
"""


def _wait_until(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _ended(pid: int) -> bool:
    """Gone, or a zombie (a container's init may be slow to reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_worker_that_outlives_its_launcher_still_counts(tmp_path):
    """As PyFlink's workers do: started by a shell script, the script ends first, the worker ends as a
    child of init. Its CPU second is in the figure (the children's CPU of the tree never shows it)."""
    note = tmp_path / "pid"

    def run() -> None:
        launcher = subprocess.Popen(["sh", "-c", '"$0" -c "$1" "$2"; true', sys.executable, WORKER, str(note)])
        _wait_until(note.exists)
        pid = int(note.read_text())
        launcher.kill()
        launcher.wait()
        _wait_until(lambda: _ended(pid))

    _, cpu = timed(run)
    assert cpu >= 0.9


# a note of its pid, then, once told its launcher is gone (a file appears), one CPU second
LATE_WORKER = """
import os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
t = time.process_time()
while time.process_time() - t < 1.0:
    pass
"""


def test_a_worker_still_busy_after_its_launcher_ended_counts(tmp_path):
    """As a PyFlink worker whose launcher the JVM stopped at the job's end: the worker, a child of init
    by then, spends a CPU second after leaving the tree; that second is in the figure."""
    note, go = tmp_path / "pid", tmp_path / "go"

    def run() -> None:
        launcher = subprocess.Popen(["sh", "-c", '"$0" -c "$1" "$2" "$3"; true', sys.executable, LATE_WORKER,
                                    str(note), str(go)])
        _wait_until(note.exists)
        pid = int(note.read_text())
        time.sleep(0.5)  # sampled in the tree at least once
        launcher.kill()
        launcher.wait()
        go.write_text("")
        _wait_until(lambda: _ended(pid))

    _, cpu = timed(run)
    assert cpu >= 0.9


def test_cpu_by_thread_says_where_it_ran(tmp_path):
    """The per-thread figure (bench_job.TreeCpu.by_where) puts a worker's second under the Python
    workers and this process's own busy half second under the client; its total matches."""
    from bench_job import timed_by_thread

    note = tmp_path / "pid"

    def run() -> None:
        worker = subprocess.Popen([sys.executable, "-c", WORKER, str(note)])
        t = time.process_time()
        while time.process_time() - t < 0.5:
            pass
        worker.wait()

    _, cpu = timed_by_thread(run)
    where = cpu.by_where()
    workers = sum(v for k, v in where.items() if k.startswith("Python worker: "))
    client = sum(v for k, v in where.items() if k.startswith("client: "))
    assert workers >= 0.9 and 0.4 <= client < 0.9, where
    assert abs(sum(where.values()) - cpu.seconds) < 0.2, (where, cpu.seconds)


def test_steady_state_is_the_second_half_of_a_topic_alone():
    """bench_job.steady_state: a run over the whole topic less a run over its first half. A pipeline
    with a fixed start-up (0.3 CPU seconds) and 0.2 CPU seconds per half topic costs 0.2 for the
    second half, whichever run pays the start-up; the half topic runs before the whole one."""
    from bench_job import steady_state

    runs = []

    def run(topic: str) -> None:
        runs.append(topic)
        t = time.process_time()
        while time.process_time() - t < 0.3 + (0.4 if topic == "whole" else 0.2):
            pass

    wall, cpu = steady_state(run, "half", "whole")
    assert runs == ["half", "whole"]
    assert 0.15 <= cpu <= 0.3, cpu
    assert 0.15 <= wall <= 1.0, wall


def test_the_half_topic_is_the_full_topics_first_half():
    """bench_job's steady state subtracts a run over the half topic from one over the full topic: the
    half topic's events (every feature, the segment feature too) are the full topic's first ones."""
    from itertools import islice

    from bench_job import bench_features

    for segments in (0, 20):
        full = list(islice(bench_features(2_000, segments), 1_000))
        assert list(bench_features(1_000, segments)) == full
        assert len({e["c0"] for e in full}) == 8 and (segments == 0 or len({e["country"] for e in full}) > 20)


def test_steady_rounds_take_turns_and_give_each_drift_run_its_own_stores():
    """bench_job.steady_rounds: in each round every pipeline runs its half then its whole topic, the
    pipelines in turn (a round's figures share the machine's load); a pipeline with a store prefix gets
    a prefix of its own per round, so no run finds windows an earlier one stored."""
    from bench_job import steady_rounds

    runs: list[tuple] = []
    pipelines = {"a": (lambda topic, store: runs.append(("a", topic, store.name)), Path("/x/st")),
                 "b": (lambda topic: runs.append(("b", topic)), None)}
    out = steady_rounds(pipelines, "half", "whole", 2)
    assert runs == [("a", "half", "st-r0-half.db"), ("a", "whole", "st-r0-whole.db"), ("b", "half"), ("b", "whole"),
                    ("a", "half", "st-r1-half.db"), ("a", "whole", "st-r1-whole.db"), ("b", "half"), ("b", "whole")]
    assert [len(v) for v in out.values()] == [2, 2]


def test_the_steady_state_ratio_is_the_median_of_the_rounds(capsys):
    """bench_job.print_steady_state: the ratio printed is the median of the rounds' ratios (a noisy
    round does not move it), each round's printed too."""
    from bench_job import print_steady_state

    # 1,000 events; the first pipeline takes 1, 1 and 10 s, the second 2 s each time: ratios 2, 2, 0.2
    print_steady_state(1000, [(1.0, 0.001), (1.0, 0.001), (10.0, 0.01)], [(2.0, 0.002)] * 3)
    out = capsys.readouterr().out
    assert "ratio 2.00 (wall) / 2.00 (CPU); median of 3 rounds, each (wall / CPU): 2.00 / 2.00, 2.00 / 2.00, " \
           "0.20 / 0.20" in out, out
    print_steady_state(1000, [(1.0, 0.001)], [(2.0, 0.002)])
    assert "ratio 2.00 (wall) / 2.00 (CPU)\n" in capsys.readouterr().out
