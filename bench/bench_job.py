"""End-to-end throughput of the streaming drift job vs a plain Flink SQL window over the same topic.

    .venv/bin/python bench/bench_job.py [--events 1000000] [--first-rounds 3] [--steady-rounds 3]
                                        [--compare-reporter | --malformed-share 0.01 | --segments 20 [--segment-bytes]
                                         | --multivariate-cost [--vector-events 50000]
                                         | --baseline-jar PATH]

Pre-fills a real Kafka topic with events of 20 numeric + 5 categorical features, then runs, on
the same topic, (1) the driftwarden job (bounded, embedded MiniCluster),
(2) a plain Flink SQL event-time TUMBLE computing COUNT and AVG of every numeric feature from the
same JSON (Flink's own `json` format), and (3) the floor: the job's own Kafka source reading every
record and parsing its envelope and features, nothing after it (bench/fused_ceiling.py's ``parse``),
and prints driftwarden / floor and plain Flink / floor in CPU per event (``--steady-rounds 0``: the
first runs only). The headline is each pipeline's first run over the topic
in a process of its own (its own JVM: the engine's code that both pipelines run is compiled by the
JIT for each alone; in one JVM the second pipeline would find it compiled by the first), its
start-up measured on an empty topic (after one warm-up job: the first job of the process also starts
the JVM) and subtracted; the pipelines take turns for ``--first-rounds`` rounds and the medians are
printed with each round's ratios (one run each is one draw of a shared machine's load: single first runs
read from 0.49 to 0.83 on this machine in one day). The JIT compiler's warm-up (about 3-5 s of CPU in the first run over data,
the engine's data paths) is not in that start-up, so the steady state is measured too, in this
process: once each pipeline has run over the topic,
a second run over the whole topic less a run over its first half (the same events) is the second
half's cost, warm (a long-running job's). Prints both rates and ratios, the peak resident memory of the
Flink JVM and Python workers, and, at two input rates 4x apart (same windows, a quarter of the
events), the state the job keeps: the bytes of one open window's summary (what the Java window
aggregate holds per (model, window): sketches and the event sample) and the largest completed
checkpoint on disk (checkpoints every second). Neither may grow with the rate.

``--baseline-jar PATH``: instead, the drift job's first run over the topic with this checkout's UDF jar and
with the jar at PATH (e.g. one built from another commit), each in a process of its own, in turns for
``--first-rounds`` rounds: events/s, CPU per event and the ratios this / baseline.

``--compare-reporter``: instead, run the driftwarden job with Flink's Prometheus reporter on (the
default, jobs/flink_metrics.py, scraped every ``--scrape-interval`` seconds), off, and on again, on
the same topic (each with its own start-up subtracted), and print the rates, the CPU per event and
the ratios on/off.

``--malformed-share 0.01``: instead, run the driftwarden job twice each on the clean topic and on the
same events with 1% malformed records among them (alternating), and once on malformed records
only: good events/s and CPU per good event (start-up, the median of three empty-topic runs, subtracted),
dirty / clean, and malformed records/s.

``--multivariate-cost``: instead, the job over a topic of 25 numeric features (model ``mv``) with its
default multivariate group on and off (``multivariate: []``), alternating, for ``--multivariate-rounds``
rounds, and once a round over a topic of one 384-dim vector feature: events/s, CPU per event (start-up
subtracted), on / off per round and the median (target >= 0.85), and the vector model's events/s beside;
each numeric run followed by one over the topic's first half: full less half is the second half's cost,
the per-job costs (the JIT compiling each job's code anew) left out; and where the CPU goes, on vs off.

``--segments 20``: instead, the topic's events carry one more categorical feature, ``country`` (40
values, Zipf volumes, seeded); a reference file is built by `reference build`'s function (with
segments by country, top 20) from a training snapshot of the same generator; the job then runs with
that reference file (file mode both times) with country configured and no segments, and with segments
``{by: [country], top: 20, min_count: 200}``, in turns (``--segment-rounds`` segmented runs, each between
two unsegmented ones): events/s and CPU per event (start-up, the median of three empty-topic runs, subtracted), the bytes of the summary each window's aggregate emits (kind 17 / kind 18) and where a segmented one's go (a table: numeric histograms, categorical counts, the event samples' keys and values, group moments, the rest; the whole window's frame and its segments'), the sink's judging
of such a summary in process (decode and judge, as `AnalyzeWindow` does but the store; ms per window and the
(segment, feature) cells the gate scored), where the CPU per event goes by process and thread (client, JVM thread groups, Python workers) in both, and the ratio
segmented / unsegmented (target >= 0.8 at 60 s windows, >= 0.9 at 600 s; each segmented run against the mean wall time and CPU per event of
the two unsegmented runs around it, the median of the runs); then both in the steady state, as above, in
``--steady-rounds`` rounds (the JIT compiler's warm-up, which differs between the two jobs, left out).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

BOOTSTRAP = os.environ.get("DRIFTWARDEN_KAFKA_BOOTSTRAP", "127.0.0.1:59092")
T0 = 1_767_225_600_000
NUMERIC = [f"n{i}" for i in range(20)]
CATEGORICAL = [f"c{i}" for i in range(5)]


def fill_topic(topic: str, events: int, per_second_of_event_time: int, malformed_share: float = 0.0,
               segments: int = 0, partitions: int = 2) -> int:
    """Create a topic of ``partitions`` partitions holding ``events`` JSON events (:func:`bench_features`, with
    ``segments``) and, among them, malformed records (bench/hostile_corpus.py: each rejected by
    validation) making ``malformed_share`` of all records; returns how many malformed records it holds.
    The producer is idempotent: a partition holds its records in the order they were produced."""
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 50, "batch.size": 1_000_000,
                         "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000,
                         "enable.idempotence": True})
    step = 1000 / per_second_of_event_time
    bad = _malformed_by_position(events, step, malformed_share)
    for i, features in enumerate(bench_features(events, segments)):
        for record in bad.get(i, ()):
            producer.produce(topic, record)
        producer.produce(topic, orjson.dumps({"event_time": int(T0 + i * step), "model": "bench",
                                              "features": features}))
        if i % 20_000 == 0:
            producer.poll(0)
    producer.flush(60)
    return sum(len(records) for records in bad.values())


def bench_features(events: int, segments: int = 0, seed: int = 0):
    """The bench events' feature maps: 20 numeric (normal) and 5 categorical (8 equally likely values)
    features, and with ``segments`` > 0 one more, ``country`` (:func:`segment_values`). Each kind draws
    from its own seeded stream, so a call for k events gives the first k events of a longer call
    (the steady state's half topic is the full topic's first half)."""
    values = np.random.default_rng(seed).normal(size=(events, len(NUMERIC))).round(5)
    cats = np.random.default_rng([seed, 2]).integers(0, 8, size=(events, len(CATEGORICAL)))
    countries = segment_values(np.random.default_rng([seed, 1]), events, segments) if segments else None
    for i in range(events):
        features = dict(zip(NUMERIC, values[i].tolist())) | {c: f"v{k}" for c, k in zip(CATEGORICAL, cats[i])}
        if countries is not None:
            features[SEGMENT_FEATURE] = countries[i]
        yield features


SEGMENT_FEATURE = "country"


def segment_shares(segments: int) -> np.ndarray:
    """Shares of the ``2 * segments`` values of the segment feature: Zipf, value j (from 0) ~ 1 / (j + 1).

    >>> [round(float(s), 3) for s in segment_shares(1)]
    [0.667, 0.333]
    """
    weights = 1.0 / np.arange(1, 2 * segments + 1)
    return weights / weights.sum()


def segment_values(rng: np.random.Generator, size: int, segments: int) -> list[str]:
    """``size`` values of the segment feature, ``k00``.. ``k{2N-1}``, drawn with :func:`segment_shares`."""
    names = np.array([f"k{j:02d}" for j in range(2 * segments)])
    return names[rng.choice(2 * segments, size=size, p=segment_shares(segments))].tolist()


def _malformed_by_position(events: int, step: float, share: float) -> dict[int, list[bytes]]:
    """Malformed records to insert before the event at each position, ``share`` of all records."""
    if share <= 0:
        return {}
    from bench.hostile_corpus import malformed

    times = [int(T0 + i * step) for i in range(events)]
    by_position: dict[int, list[bytes]] = {}
    for position, record in malformed(round(events * share / (1 - share)), times):
        by_position.setdefault(position, []).append(record)
    return by_position


def config_for(topic: str, segments: int = 0, segmented: bool = False, reference: str | None = None,
               source: dict | None = None):
    """Monitor config of the bench topic: warm-up reference of 3 windows; with ``segments`` > 0 the
    segment feature too and the reference file ``reference``, and when ``segmented``, segments by it
    (top ``segments``, min_count 200); ``source``: more keys of the source section (format, envelope)."""
    from driftwarden.schemas.config import MonitorConfig

    features = {n: "numeric" for n in NUMERIC} | {c: "categorical" for c in CATEGORICAL}
    model: dict = {"name": "bench", "features": features}
    reference_section: dict = {"mode": "warmup", "warmup_windows": 3}
    if segments:
        features[SEGMENT_FEATURE] = "categorical"
        reference_section = {"mode": "file", "path": reference}
        if segmented:
            model["segments"] = {"by": [SEGMENT_FEATURE], "top": segments, "min_count": 200}
    return MonitorConfig.model_validate({
        "source": {"topics": [topic], "bootstrap_servers": BOOTSTRAP, "group_id": f"bench-{topic}", **(source or {})},
        "window": {"size": f"{WINDOW_SECONDS}s"}, "reference": reference_section, "models": [model],
    })


PARALLELISM = 1
WINDOW_SECONDS = 10


def run_driftwarden(topic: str, store: Path, checkpoint_dir: Path | None = None, config=None) -> float:
    """Seconds the drift job takes to consume the whole topic (bounded); checkpoints every second
    into ``checkpoint_dir`` when given; ``config``: :func:`config_for` the topic by default."""
    from driftwarden.jobs.drift_job import run_drift_job

    config = config or config_for(topic)
    started = time.perf_counter()
    run_drift_job(config, f"sqlite:///{store}", config.reference.path, bounded=True, parallelism=PARALLELISM,
                  checkpoint_interval_ms=1000 if checkpoint_dir else 0,
                  checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None)
    return time.perf_counter() - started


def run_plain_flink(topic: str) -> float:
    """Seconds a plain Flink SQL TUMBLE COUNT/AVG takes over the same topic (bounded)."""
    from driftwarden.jobs.flink_env import make_table_env
    from driftwarden.jobs.source import interval_sql

    # Flink's defaults, not the drift job's memory and tuning: the baseline is plain Flink as it comes
    _, t_env = make_table_env(checkpoint_interval_ms=0, parallelism=PARALLELISM, memory={}, tuning={})
    columns = ",\n".join(f"  `{n}` DOUBLE" for n in NUMERIC) + ",\n" + ",\n".join(f"  `{c}` STRING" for c in CATEGORICAL)
    t_env.execute_sql(f"""CREATE TABLE src (
  event_time BIGINT, model STRING, features ROW<{columns}>,
  et AS TO_TIMESTAMP_LTZ(event_time, 3), WATERMARK FOR et AS et - INTERVAL '5' SECOND
) WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{BOOTSTRAP}',
  'properties.group.id' = 'plain-{uuid.uuid4().hex[:6]}', 'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset', 'format' = 'json')""")
    averages = ", ".join(f"a{n} DOUBLE" for n in NUMERIC)
    t_env.execute_sql(f"CREATE TEMPORARY TABLE out_t (model STRING, c BIGINT, {averages}) "
                      "WITH ('connector' = 'blackhole')")
    aggregates = ", ".join(f"AVG(features.`{n}`)" for n in NUMERIC)
    started = time.perf_counter()
    t_env.execute_sql(f"INSERT INTO out_t SELECT model, COUNT(*), {aggregates} FROM src "
                      f"GROUP BY model, TUMBLE(et, {interval_sql(1000 * WINDOW_SECONDS)})").wait()
    return time.perf_counter() - started


class _TreeSampler:
    """A thread that samples :func:`_process_tree` every ``interval_s`` during a ``with`` block
    (:meth:`_sample`); ``own_cpu`` is its own CPU, counted in this process but not the job's."""

    def __init__(self, interval_s: float = 0.2) -> None:
        self.own_cpu = 0.0
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._sample()
        self.own_cpu = time.thread_time()

    def _sample(self) -> None:
        raise NotImplementedError


class PeakRss(_TreeSampler):
    """Samples the summed resident memory of :func:`_process_tree` (client, Flink JVM, Python workers),
    and the largest completed checkpoint under ``checkpoint_dir`` when given."""

    def __init__(self, checkpoint_dir: Path | None = None) -> None:
        super().__init__()
        self.peak = 0
        self.checkpoint_peak = 0
        self.checkpoint_dir = checkpoint_dir

    def _sample(self) -> None:
        self.peak = max(self.peak, _tree_rss())
        if self.checkpoint_dir is not None:
            self.checkpoint_peak = max(self.checkpoint_peak, _largest_checkpoint(self.checkpoint_dir))


def _largest_checkpoint(folder: Path) -> int:
    """Bytes of the largest completed checkpoint (a chk-N folder with its _metadata) under ``folder``."""
    sizes = [0]
    for metadata in folder.glob("*/chk-*/_metadata"):
        try:
            sizes.append(sum(f.stat().st_size for f in metadata.parent.rglob("*") if f.is_file()))
        except OSError:  # Flink removed it meanwhile
            continue
    return max(sizes)


def _process_tree(root: int | None = None) -> list[int]:
    """This process (or ``root``) and every live descendant: the Flink JVM, and the job's Python
    functions wherever they run (PyFlink runs them in this process, "loopback", once it has run a
    local job; else in worker processes the JVM starts), as `driftwarden run` is one client process
    and its JVM."""
    parents: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            parents.setdefault(int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(int(pid))
        except (OSError, ValueError, IndexError):
            continue
    found, todo = [], [os.getpid() if root is None else root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += parents.get(pid, [])
    return found


def _tree_rss() -> int:
    total = 0
    for pid in _process_tree():
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    return total


class TreeCpu(_TreeSampler):
    """CPU seconds (user + system) that this process and its descendants use during a ``with`` block.

    Each process's own CPU is sampled (every 0.2 s and at the end) and the growth summed, so a
    process that ends within the block counts with its last sample: PyFlink's Python workers (process
    mode) outlive their launcher script, end as children of init and are never reaped into this
    tree, so their parents' cumulative children's CPU never shows them. A process once seen in the
    tree is sampled until it ends, in the tree or not: a worker whose launcher ended may still be
    working, as a child of init (before 2026-12-03 that CPU was missed). A process living less than the
    interval is missed. The sampler's own CPU is left out.
    """

    def __init__(self, by_thread: bool = False) -> None:
        super().__init__()
        self.seconds = 0.0
        self.by_thread = by_thread
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._first_threads: dict[tuple[int, int], tuple[str, float]] = {}
        self._last_threads: dict[tuple[int, int], tuple[str, float]] = {}

    def __enter__(self) -> "TreeCpu":
        self._sample()
        self._first, self._first_threads = dict(self._last), dict(self._last_threads)
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        self._sample()
        self.seconds = sum(cpu - self._first.get(pid, 0.0) for pid, cpu in self._last.items()) - self.own_cpu

    def by_where(self) -> dict[str, float]:
        """With ``by_thread``: CPU seconds per "where: thread" (client, JVM or Python worker, and the
        thread's name with its digits as #; the JVM's names cut to 15 characters by Linux), the
        sampler's own CPU left out of the client's."""
        out: dict[str, float] = {}
        for key, (where, cpu) in self._last_threads.items():
            out[where] = out.get(where, 0.0) + cpu - self._first_threads.get(key, (where, 0.0))[1]
        if self._last_threads:
            out["client: python"] = out.get("client: python", 0.0) - self.own_cpu
        return out

    def _sample(self) -> None:
        for pid in set(_process_tree()) | self._last.keys():  # the tree, and whatever left it since
            cpu = _own_cpu_seconds(pid)
            if cpu is not None:
                self._last[pid] = cpu
                if self.by_thread:
                    self._sample_threads(pid)

    def _sample_threads(self, pid: int) -> None:
        role = _role(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        for tid in tids:
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            name = re.sub(r"\d+", "#", stat[stat.index("(") + 1:stat.rindex(")")])
            self._last_threads[(pid, int(tid))] = (f"{role}: {name}", _stat_cpu_seconds(stat))


def _role(pid: int) -> str:
    """Where a process of the tree stands: this client, the Flink JVM or a Python worker."""
    if pid == os.getpid():
        return "client"
    try:
        return "JVM" if Path(f"/proc/{pid}/comm").read_text().strip() == "java" else "Python worker"
    except OSError:
        return "Python worker"


def _own_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of one process (its children's not included); None when it is gone."""
    try:
        return _stat_cpu_seconds(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def _stat_cpu_seconds(stat: str) -> float:
    """User + system CPU seconds of a /proc ``stat`` line (a process's or one of its threads')."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(run, *args) -> tuple[float, float]:
    """Wall seconds and the process tree's CPU seconds (:class:`TreeCpu`) of ``run(*args)``."""
    wall, cpu = timed_by_thread(run, *args, by_thread=False)
    return wall, cpu.seconds


def timed_by_thread(run, *args, by_thread: bool = True) -> tuple[float, TreeCpu]:
    """Wall seconds and the :class:`TreeCpu` (per thread too, :meth:`TreeCpu.by_where`) of ``run(*args)``."""
    wall = time.perf_counter()
    with TreeCpu(by_thread) as cpu:
        run(*args)
    return time.perf_counter() - wall, cpu


def window_state_bytes(store: Path) -> float:
    """Mean bytes of one window's summary: what the window aggregate holds for a (model, window)."""
    import sqlite3

    rows = sqlite3.connect(store).execute("SELECT length(summary) FROM window_summaries").fetchall()
    return float(np.mean([r[0] for r in rows])) if rows else float("nan")


def measure_state(topic: str, folder: Path, name: str) -> tuple[float, int]:
    """One checkpointed run: mean summary bytes per window and the largest checkpoint, in bytes."""
    checkpoints = folder / f"{name}-checkpoints"
    with PeakRss(checkpoints) as sampler:
        run_driftwarden(topic, folder / f"{name}.db", checkpoints)
    return window_state_bytes(folder / f"{name}.db"), sampler.checkpoint_peak


def reporter(port: int | None) -> None:
    """Turn Flink's Prometheus reporter of the next embedded jobs on (on ``port``) or off (None).

    The port is not registered with the local Prometheus (scripts/services.sh scrapes every second):
    the bench's own Scraper is the only one scraping, at the interval asked for.
    """
    from driftwarden.jobs.flink_metrics import PORT_ENV

    os.environ[PORT_ENV] = str(port) if port else "off"  # read by jobs.flink_env.make_table_env
    # a run folder without Prometheus's file_sd folder: jobs.flink_metrics.register_scrape_target skips it
    os.environ["DRIFTWARDEN_RUN_DIR"] = str(REPO / ".run" / "bench" / "run")


class Scraper:
    """Scrapes the /metrics URL in ``url`` (set it per job) every ``interval`` seconds, as Prometheus does."""

    def __init__(self, interval: float) -> None:
        self.url, self.interval, self.scrapes = "", interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Scraper":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import httpx

        while not self._stop.wait(self.interval):
            try:
                httpx.get(self.url, timeout=5).raise_for_status()
                self.scrapes += 1
            except httpx.HTTPError:  # the reporter's port opens when the job's cluster starts
                continue


def _timed_reported(topic: str, store: Path, scraper: Scraper | None) -> tuple[float, float]:
    """:func:`timed` drift job; with a scraper, its reporter on a port of its own (the previous job's
    cluster may still hold the last one while the next starts)."""
    from driftwarden.jobs.flink_metrics import free_port

    port = free_port() if scraper is not None else None
    reporter(port)
    if scraper is not None:
        scraper.url = f"http://127.0.0.1:{port}/metrics"
    return timed(run_driftwarden, topic, store)


def compare_reporter(events: int, full: str, empty: str, folder: Path, run: str, interval: float) -> None:
    """Drift job throughput and CPU with Flink's Prometheus reporter on (scraped every ``interval`` s) and off."""
    rates: dict[bool, list[float]] = {True: [], False: []}
    cpus: dict[bool, list[float]] = {True: [], False: []}
    # Python functions in worker processes, as on a cluster: in PyFlink's loopback mode (this process)
    # the fourth or fifth job of a process here once waited forever on a vanished worker (before the
    # gateway JVM's stderr was drained, jobs/flink_env.py, a likely cause; not reproduced since)
    os.environ["_python_worker_execution_mode"] = "process"
    reporter(None)
    # warm-up on the full topic: the JVM starts and JIT-compiles the hot paths before any measurement
    run_driftwarden(full, folder / f"{run}-warm.db")
    for i, on in enumerate((True, False, True)):  # on, off, on: a drift of the machine's load cancels out
        with Scraper(interval) if on else contextlib.nullcontext() as scraper:
            startup, startup_cpu = _timed_reported(empty, folder / f"{run}-empty-{i}.db", scraper)
            total, total_cpu = _timed_reported(full, folder / f"{run}-full-{i}.db", scraper)
        if total <= startup:
            raise SystemExit(f"the {events:,}-event run ({total:.1f} s) was not slower than the empty one "
                             f"({startup:.1f} s): too noisy to measure; use more --events")
        rates[on].append(events / (total - startup))
        cpus[on].append(1e6 * (total_cpu - startup_cpu) / events)
        scraped = f", {scraper.scrapes} scrapes" if on else ""
        print(f"reporter {'on ' if on else 'off'}: {rates[on][-1]:>10,.0f} events/s, {cpus[on][-1]:.1f} us CPU per event "
              f"({total:.1f} s total, {startup:.1f} s start-up{scraped})", flush=True)
    ratio = float(np.mean(rates[True])) / rates[False][0]
    cpu_ratio = cpus[False][0] / float(np.mean(cpus[True]))
    print(f"ratio reporter on (mean of the two runs around off) / off, scraped every {interval:g} s: throughput "
          f"{ratio:.3f}, CPU per event {cpu_ratio:.3f} (the reporter costs {100 * (1 - ratio):.1f}% of the throughput, "
          f"{100 * (1 - cpu_ratio):.1f}% of the CPU)")


def compare_malformed(events: int, full: str, empty: str, folder: Path, run: str, share: float) -> None:
    """The job on the clean topic, on the same events with ``share`` malformed records among them, and
    on malformed records only (as many as the dirty topic holds, times ten): rates and CPU per event."""
    dirty, junk = f"bench-dirty-{run}", f"bench-junk-{run}"
    print(f"filling {dirty} (and {junk}) ...", flush=True)
    n_bad = fill_topic(dirty, events, 1000, share)
    n_junk = fill_topic(junk, 0, 1000) + _fill_junk(junk, 10 * n_bad)
    run_driftwarden(empty, folder / f"{run}-warm.db")
    startup, startup_cpu = median_startup([timed(run_driftwarden, empty, folder / f"{run}-empty-{i}.db")
                                           for i in range(STARTUP_RUNS)])
    figures = {}
    for name, topic in (("clean", full), ("dirty", dirty), ("clean again", full), ("dirty again", dirty)):
        wall, cpu = timed(run_driftwarden, topic, folder / f"{run}-{name.replace(' ', '-')}.db")
        figures[name] = (events / max(wall - startup, 1e-9), 1e6 * max(cpu - startup_cpu, 1e-9) / events)
    junk_wall, junk_cpu = timed(run_driftwarden, junk, folder / f"{run}-junk.db")
    print(f"{events:,} good events; the dirty topic adds {n_bad:,} malformed records "
          f"({100 * n_bad / (events + n_bad):.2f}% of its records)")
    for name, (rate, cpu) in figures.items():
        print(f"{name:>12}: {rate:>9,.0f} good events/s, {cpu:.1f} us CPU per good event")
    clean = [figures["clean"], figures["clean again"]]
    dirty_runs = [figures["dirty"], figures["dirty again"]]
    rate_ratio = np.mean([r for r, _ in dirty_runs]) / np.mean([r for r, _ in clean])
    cpu_ratio = np.mean([c for _, c in clean]) / np.mean([c for _, c in dirty_runs])
    print(f"good events/s dirty / clean (mean of two runs each): {rate_ratio:.3f}; CPU per good event "
          f"clean / dirty: {cpu_ratio:.3f} (target: a drop of at most 10%, >= 0.90)")
    print(f"malformed records only: {n_junk / max(junk_wall - startup, 1e-9):,.0f} records/s "
          f"({n_junk:,} records, {1e6 * max(junk_cpu - startup_cpu, 1e-9) / n_junk:.0f} us CPU each)")


def fill_shaped(topic: str, events: int, shape: str, share: float) -> None:
    """A topic of 2 partitions holding the bench events (:func:`bench_features`, 1,000 per second of event time)
    in ``shape`` (bench/envelope_topics.py: json, avro, flat or wrong, ``share`` of them wrong-typed)."""
    from bench.envelope_topics import values

    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 50, "batch.size": 1_000_000,
                         "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000,
                         "enable.idempotence": True})
    timed_events = ((i, T0 + i, features) for i, features in enumerate(bench_features(events)))
    for i, value in enumerate(values(shape, topic, timed_events, NUMERIC, CATEGORICAL, share)):
        producer.produce(topic, value)
        if i % 20_000 == 0:
            producer.poll(0)
    producer.flush(60)


def compare_envelopes(events: int, folder: Path, run: str, share: float, rounds: int) -> None:
    """The job over the same events as the contract's JSON, as Confluent-framed Avro through the registry, as
    flat JSON under a mapped envelope, and as JSON with ``share`` wrong-typed values, in turns (``rounds``
    rounds, each in the same order): events/s and CPU per event (start-up, the median of three empty-topic
    runs, subtracted), and each shape's ratios to the JSON runs of its round."""
    from bench.envelope_topics import SHAPES, source_section

    topics = {shape: f"bench-{shape}-{run}" for shape in SHAPES}
    configs = {shape: config_for(topics[shape], source=source_section(shape)) for shape in SHAPES}
    empty = f"bench-empty-{run}"
    fill_shaped(empty, 1, "json", share)
    for shape in SHAPES:
        print(f"filling {topics[shape]} with {events:,} events ({shape}) ...", flush=True)
        fill_shaped(topics[shape], events, shape, share)
    run_driftwarden(empty, folder / f"{run}-warm.db")
    startup, startup_cpu = median_startup([timed(run_driftwarden, empty, folder / f"{run}-empty-{i}.db")
                                           for i in range(STARTUP_RUNS)])
    figures: dict[str, list[tuple[float, float]]] = {shape: [] for shape in SHAPES}
    for r in range(rounds):
        for shape in SHAPES:
            wall, cpu = timed(run_driftwarden, topics[shape], folder / f"{run}-{shape}-{r}.db", None, configs[shape])
            figures[shape].append((events / max(wall - startup, 1e-9), 1e6 * max(cpu - startup_cpu, 1e-9) / events))
    print(f"{events:,} events, {WINDOW_SECONDS} s windows, parallelism {PARALLELISM}, {rounds} rounds "
          f"(start-up {startup:.1f} s wall, {startup_cpu:.1f} s CPU, subtracted)")
    for shape in SHAPES:
        rates = [rate for rate, _ in figures[shape]]
        cpus = [cpu for _, cpu in figures[shape]]
        line = f"{shape:>6}: {np.median(rates):>9,.0f} events/s, {np.median(cpus):5.1f} us CPU per event"
        if shape != "json":
            rate_ratios = [r / j for (r, _), (j, _) in zip(figures[shape], figures["json"])]
            cpu_ratios = [j / c for (_, c), (_, j) in zip(figures[shape], figures["json"])]
            line += (f"; / json: events/s {np.median(rate_ratios):.3f} ({', '.join(f'{x:.3f}' for x in rate_ratios)}), "
                     f"CPU per event json / {shape} {np.median(cpu_ratios):.3f} "
                     f"({', '.join(f'{x:.3f}' for x in cpu_ratios)})")
        print(line)
    print("target: avro and flat within 10% of json (ratios >= 0.90); wrong: what the wrong-typed share costs")


MV_NUMERIC = [f"x{i}" for i in range(25)]
VECTOR_DIM = 384


def fill_multivariate_topic(topic: str, events: int, vector: bool = False) -> None:
    """A topic of 2 partitions holding ``events`` JSON events of model ``mv`` (1,000 per second of event time):
    25 normal numeric features ``x0..x24`` (the first two correlated, 0.8), or with ``vector`` one feature
    ``emb``, an array of 384 normal floats; seeded, 5 decimals."""
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 50, "batch.size": 1_000_000,
                         "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000,
                         "enable.idempotence": True})
    rng = np.random.default_rng(46)
    for start in range(0, events, 10_000):
        size = min(10_000, events - start)
        values = rng.normal(size=(size, VECTOR_DIM if vector else len(MV_NUMERIC))).round(5)
        if not vector:
            values[:, 1] = (0.8 * values[:, 0] + 0.6 * values[:, 1]).round(5)
        for i, row in enumerate(values.tolist()):
            features = {"emb": row} if vector else dict(zip(MV_NUMERIC, row))
            producer.produce(topic, orjson.dumps({"event_time": T0 + start + i, "model": "mv", "features": features}))
        producer.poll(0)
    producer.flush(120)


def multivariate_config(topic: str, groups: bool = True, vector: bool = False):
    """Monitor config of a :func:`fill_multivariate_topic` topic (warm-up reference of 3 windows): the 25
    numeric features with the default group (``groups``) or with ``multivariate: []`` (none), or with
    ``vector`` the one vector feature ``emb: {vector: 384}`` (16 projections, their group)."""
    from driftwarden.schemas.config import MonitorConfig

    model: dict = {"name": "mv"}
    if vector:
        model["features"] = {"emb": {"vector": VECTOR_DIM}}
    else:
        model["features"] = {n: "numeric" for n in MV_NUMERIC}
        if not groups:
            model["multivariate"] = []
    return MonitorConfig.model_validate({
        "source": {"topics": [topic], "bootstrap_servers": BOOTSTRAP, "group_id": f"bench-{topic}"},
        "window": {"size": f"{WINDOW_SECONDS}s"}, "reference": {"mode": "warmup", "warmup_windows": 3},
        "models": [model],
    })


def compare_multivariate(events: int, vector_events: int, folder: Path, run: str, rounds: int) -> None:
    """The job over one topic of 25 numeric features with the default group on and off (``multivariate: []``),
    alternating (on-off, off-on, ...) for ``rounds`` rounds, and over a topic of one 384-dim vector feature
    once a round: events/s and CPU per event of each (start-up, the median of three empty-topic runs,
    subtracted), and on / off per round and their median (target >= 0.85). Each numeric run is followed by
    a run over the topic's first half (the same events): full less half is the second half's cost, with the
    per-job costs (the JIT compiling the job's code, which MiniCluster loads anew for each job) left out."""
    numeric, half, vectors, empty = (f"bench-mv-{kind}-{run}" for kind in ("numeric", "half", "vector", "empty"))
    print(f"filling {numeric} ({events:,} events of 25 numeric features), {half} (its first half) and {vectors} "
          f"({vector_events:,} events of one {VECTOR_DIM}-dim vector) ...", flush=True)
    fill_multivariate_topic(numeric, events)
    fill_multivariate_topic(half, events // 2)
    fill_multivariate_topic(vectors, vector_events, vector=True)
    fill_multivariate_topic(empty, 1)
    configs = {"on": multivariate_config(numeric), "off": multivariate_config(numeric, groups=False),
               "vector": multivariate_config(vectors, vector=True)}
    halves = {"on": multivariate_config(half), "off": multivariate_config(half, groups=False)}
    counts = {"on": events, "off": events, "vector": vector_events}
    empty_config = multivariate_config(empty)
    run_driftwarden(empty, folder / f"{run}-mv-warm.db", None, empty_config)  # starts the JVM
    run_driftwarden(numeric, folder / f"{run}-mv-warm-full.db", None, configs["on"])  # JIT warm-up, not counted
    startups = [timed_by_thread(run_driftwarden, empty, folder / f"{run}-mv-empty-{i}.db", None, empty_config)
                for i in range(STARTUP_RUNS)]
    startup, startup_cpu = median_startup(startups)
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
    second: dict[str, list[tuple[float, float]]] = {name: [] for name in halves}
    where: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    for r in range(rounds):
        for name in (("on", "off") if r % 2 == 0 else ("off", "on")) + ("vector",):
            wall, cpu = timed_by_thread(run_driftwarden, configs[name].source.topics[0],
                                        folder / f"{run}-mv-{name}-{r}.db", None, configs[name])
            figures[name].append((net_rate(counts[name], wall, [w for w, _ in startups]),
                                  1e6 * max(cpu.seconds - startup_cpu.seconds, 1e-9) / counts[name]))
            started = startup_cpu.by_where()
            where[name].append({k: 1e6 * (v - started.get(k, 0.0)) / counts[name] for k, v in cpu.by_where().items()})
            if name in halves:
                half_wall, half_cpu = timed(run_driftwarden, half, folder / f"{run}-mv-{name}-half-{r}.db", None,
                                            halves[name])
                rest = events - events // 2
                rate = rest / (wall - half_wall) if wall > half_wall else float("nan")  # nan: the load swamped it
                second[name].append((rate, 1e6 * (cpu.seconds - half_cpu) / rest))
    print_multivariate_cost(events, vector_events, rounds, (startup, startup_cpu.seconds), figures)
    print("second half (a run over the whole topic less one over its first half: per-job costs left out):")
    for name in halves:
        rates, cpus = [r for r, _ in second[name]], [c for _, c in second[name]]
        print(f"  group {name:>3}: {np.nanmedian(rates):>9,.0f} events/s, {np.median(cpus):6.1f} us CPU per event "
              f"(rounds: {', '.join(f'{c:.1f}' for c in cpus)} us)")
    cpu_ratios = [off / on for (_, on), (_, off) in zip(second["on"], second["off"])]
    rate_ratios = [on / off for (on, _), (off, _) in zip(second["on"], second["off"])]
    print(f"  second half, group on / off: events/s {np.nanmedian(rate_ratios):.3f} "
          f"({', '.join(f'{x:.3f}' for x in rate_ratios)}), CPU per event off / on {np.median(cpu_ratios):.3f} "
          f"({', '.join(f'{x:.3f}' for x in cpu_ratios)}); target >= 0.85")
    print_group_cpu_by_where(where["off"], where["on"])


def net_rate(events: int, wall: float, startups: list[float]) -> float:
    """Events per second of a run, start-up left out: ``events`` over ``wall`` less the median of ``startups``
    (the empty-topic runs' wall seconds); nan when that difference is no larger than the start-up runs' spread
    (their max less their min), where the run cannot be told from its start-up.

    >>> net_rate(20_000, 12.0, [9.0, 10.0, 10.5])
    10000.0
    >>> net_rate(20_000, 10.2, [9.0, 10.0, 10.5])
    nan
    """
    spent = wall - float(np.median(startups))
    return events / spent if spent > max(startups) - min(startups) else float("nan")


def nan_median(values: list[float]) -> float:
    """The median of the values that are not nan; nan when none is.

    >>> nan_median([3.0, float("nan"), 1.0])
    2.0
    >>> nan_median([float("nan")])
    nan
    """
    kept = [v for v in values if not np.isnan(v)]
    return float(np.median(kept)) if kept else float("nan")


def rate_text(rate: float) -> str:
    """A rate for the printouts: ``n/a`` for nan (a run not told from its start-up).

    >>> rate_text(8737.4), rate_text(float("nan"))
    ('8,737', 'n/a')
    """
    return "n/a" if np.isnan(rate) else f"{rate:,.0f}"


def print_group_cpu_by_where(off: list[dict[str, float]], on: list[dict[str, float]], at_least_us: float = 0.3) -> None:
    """Where the CPU per event goes (us, start-up subtracted, mean of the rounds), group off vs on, each thread
    group that moved or costs at least ``at_least_us``, the largest difference first."""
    keys = {k for run in off + on for k in run}
    mean_off = {k: float(np.mean([run.get(k, 0.0) for run in off])) for k in keys}
    mean_on = {k: float(np.mean([run.get(k, 0.0) for run in on])) for k in keys}
    print("CPU per event by where it runs (us; start-up subtracted; JVM thread names as Linux keeps them):")
    print(f"  {'where: thread':<42} {'group off':>10} {'group on':>10} {'difference':>10}")
    for k in sorted(keys, key=lambda k: -(mean_on[k] - mean_off[k])):
        if max(abs(mean_on[k]), abs(mean_off[k])) >= at_least_us:
            print(f"  {k:<42} {mean_off[k]:>10.1f} {mean_on[k]:>10.1f} {mean_on[k] - mean_off[k]:>+10.1f}")


def print_multivariate_cost(events: int, vector_events: int, rounds: int, startup: tuple[float, float],
                            figures: dict[str, list[tuple[float, float]]]) -> None:
    """Print :func:`compare_multivariate`'s rates, CPU per event and ratios."""
    print(f"{events:,} events of 25 numeric features, {vector_events:,} of one {VECTOR_DIM}-dim vector, "
          f"{WINDOW_SECONDS} s windows, parallelism {PARALLELISM}, {rounds} rounds (start-up {startup[0]:.1f} s wall, "
          f"{startup[1]:.1f} s CPU, subtracted)")
    labels = {"on": "25 numeric, default group on", "off": "25 numeric, multivariate: []",
              "vector": f"one vector of {VECTOR_DIM}"}
    for name, label in labels.items():
        rates, cpus = [r for r, _ in figures[name]], [c for _, c in figures[name]]
        print(f"{label:>29}: {rate_text(nan_median(rates)):>9} events/s, {np.median(cpus):6.1f} us CPU per event "
              f"(rounds: {', '.join(rate_text(r) for r in rates)} events/s; {', '.join(f'{c:.1f}' for c in cpus)} us)")
    rate_ratios = [on / off for (on, _), (off, _) in zip(figures["on"], figures["off"])]
    cpu_ratios = [off / on for (_, on), (_, off) in zip(figures["on"], figures["off"])]
    print(f"group on / off: events/s {nan_median(rate_ratios):.3f} ({', '.join(f'{x:.3f}' for x in rate_ratios)}), "
          f"CPU per event off / on {np.median(cpu_ratios):.3f} ({', '.join(f'{x:.3f}' for x in cpu_ratios)}); "
          f"target >= 0.85")
    vector_rates = [v for v, _ in figures["vector"]]
    vector_ratio = nan_median(vector_rates) / nan_median([on for on, _ in figures["on"]])
    unmeasured = sum(np.isnan(vector_rates))
    ratio = "n/a" if np.isnan(vector_ratio) else f"{vector_ratio:.3f}"
    print(f"vector model / 25-feature model (group on): events/s {ratio}"
          + (f" ({unmeasured} vector run(s) n/a: no longer than the start-up runs' spread)" if unmeasured else ""))


def build_segment_reference(path: Path, segments: int, windows: int) -> None:
    """A reference file of the bench model with the segment feature, segmented by it (top ``segments``), built by
    `reference build`'s function from a training snapshot of ``windows`` windows of the same generator (seed 1)."""
    from driftwarden.pipeline.judging import drift_policy
    from driftwarden.pipeline.reference_build import build_reference_set
    from driftwarden.schemas.events import Event

    per_window = 1000 * WINDOW_SECONDS
    start = T0 - 10 * windows * per_window  # training data from before the bench topic's windows
    events = [Event("bench", start + i, features)
              for i, features in enumerate(bench_features(windows * per_window, segments, seed=1))]
    config = config_for("train", segments, segmented=True, reference=str(path))
    build_reference_set(events, config, drift_policy(config.thresholds)).save(path)


def bench_summaries(config, reference: Path, events: int, segments: int, windows: int = 3) -> list[bytes]:
    """The bytes of the summary the job judges for each of the first ``windows`` windows of the bench topic.

    The bytes (sketches/FORMAT.md kind 17, kind 18 with segments) that :class:`pipeline.summary.WindowRows`
    builds from the window's events (replay's summarizer; the live job's Java builds the same bytes,
    tests/test_segments_attribution.py).
    """
    from itertools import islice

    from driftwarden.pipeline.reference_set import ReferenceSet
    from driftwarden.pipeline.summary import summarize_window

    model = config.model("bench")
    top = ReferenceSet.load(reference).segment_keys("bench") if model.segments else None
    per_window = 1000 * WINDOW_SECONDS
    maps = bench_features(events, segments)  # one window's feature maps at a time (600,000 a 600 s window)
    return [summarize_window("bench", T0 + w * per_window, per_window, list(islice(maps, per_window)),
                             model, None, top).serialize() for w in range(windows)]


def summary_bytes(summaries: list[bytes]) -> float:
    """Mean bytes of :func:`bench_summaries` (with a file reference nothing is stored in window_summaries)."""
    return float(np.mean([len(b) for b in summaries]))


def segment_feature_bytes(summaries: list[bytes]) -> dict[str, float]:
    """Bytes per (segment, feature) of segmented summaries (kind 18): each segment's kind 17 frame over its
    features, split into the features' sketches and the rest (the segment's event sample, names, counts),
    the mean over the windows' segments; and the whole summary per (segment, feature), the model's frame included."""
    from driftwarden.pipeline.summary import WindowSummary

    frames, sketches, whole = [], [], []
    for data in summaries:
        summary = WindowSummary.deserialize(data)
        features = max(len(summary.sketches), 1)
        whole.append(len(data) / (features * max(len(summary.segments), 1)))
        for segment in summary.segments.values():
            frames.append(len(segment.serialize()) / features)
            sketches.append(sum(len(sketch.serialize()) for sketch in segment.sketches.values()) / features)
    return {"frame": float(np.mean(frames)), "sketches": float(np.mean(sketches)), "whole": float(np.mean(whole)),
            "segments": float(np.mean([len(WindowSummary.deserialize(d).segments) for d in summaries]))}


#: The parts of a window summary's bytes :func:`summary_parts` tells apart, in the order they are printed.
SUMMARY_PARTS = ("numeric histograms", "categorical counts", "event sample: keys", "event sample: values",
                 "group moments", "names, counts, framing")


def frame_parts(frame) -> dict[str, int]:
    """Where one kind 17 frame's bytes go (:data:`SUMMARY_PARTS`): each sketch's, the sample's keys and the rest
    of the sample, the group moments', and the rest (the frame's names, counts, lengths and trailer)."""
    from driftwarden.sketches.histogram import HistogramSketch

    parts = dict.fromkeys(SUMMARY_PARTS, 0)
    for sketch in frame.sketches.values():
        kind = "numeric histograms" if isinstance(sketch, HistogramSketch) else "categorical counts"
        parts[kind] += len(sketch.serialize())
    sample = len(frame.sample.serialize())
    parts["event sample: keys"] = 8 * frame.sample.size
    parts["event sample: values"] = sample - 8 * frame.sample.size
    parts["group moments"] = sum(len(moments.serialize()) for moments in frame.groups.values())
    parts["names, counts, framing"] = len(frame._serialize_window()) - sum(parts.values())
    return parts


def summary_parts(summaries: list[bytes]) -> dict[str, dict[str, float]]:
    """Mean bytes a window of each part (:data:`SUMMARY_PARTS`) in the whole window's frame (``global``) and in
    all its segments' frames together (``segments``); the segments' keys and lengths are in ``segments``'s
    ``names, counts, framing``."""
    from driftwarden.pipeline.summary import WindowSummary

    totals = {scope: dict.fromkeys(SUMMARY_PARTS, 0.0) for scope in ("global", "segments")}
    for data in summaries:
        summary = WindowSummary.deserialize(data)
        scoped = {"global": frame_parts(summary), "segments": dict.fromkeys(SUMMARY_PARTS, 0)}
        for segment in summary.segments.values():
            for part, size in frame_parts(segment).items():
                scoped["segments"][part] += size
        framing = "names, counts, framing"  # the segment frames' own, plus their keys and lengths in kind 18
        scoped["segments"][framing] += len(data) - sum(map(sum, (s.values() for s in scoped.values())))
        for scope, values in scoped.items():
            for part, size in values.items():
                totals[scope][part] += size / len(summaries)
    return totals


def print_summary_parts(parts: dict[str, dict[str, float]]) -> None:
    """Print :func:`summary_parts` as a small table: KiB a window per part, global and segments."""
    total = {scope: sum(values.values()) for scope, values in parts.items()}
    print(f"where a segmented window's bytes go (KiB a window): {'part':<24} {'global':>9} {'segments':>9} {'share':>6}")
    for part in SUMMARY_PARTS:
        both = parts["global"][part] + parts["segments"][part]
        print(f"{'':<52}{part:<24} {parts['global'][part] / 1024:>9,.1f} {parts['segments'][part] / 1024:>9,.1f} "
              f"{both / sum(total.values()):>6.1%}")
    print(f"{'':<52}{'total':<24} {total['global'] / 1024:>9,.1f} {total['segments'] / 1024:>9,.1f}")


def print_segment_bytes(sizes: dict[bool, float], per_cell: dict[str, float], features: int) -> None:
    """Print the summary bytes per window, unsegmented and segmented, and per (segment, feature)."""
    print(f"summary bytes per window (the bytes the window aggregate emits and the sink judges; with a file reference "
          f"none is stored in window_summaries): unsegmented {sizes[False] / 1024:,.1f} KiB, segmented "
          f"{sizes[True] / 1024:,.1f} KiB ({sizes[True] / sizes[False]:.1f}x; target <= 1 MiB at 20 segments x 25 "
          f"features)")
    print(f"bytes per (segment, feature), {per_cell['segments']:.0f} segments x {features} features a window: "
          f"{per_cell['whole']:,.0f} B of the whole summary; a segment's own frame {per_cell['frame']:,.0f} B, of "
          f"which its sketches {per_cell['sketches']:,.0f} B and its event sample and counts "
          f"{per_cell['frame'] - per_cell['sketches']:,.0f} B")


def segment_bytes_only(folder: Path, run: str, segments: int, train_windows: int, events: int) -> None:
    """``--segment-bytes``: build the segmented reference and print the summary bytes (no Flink job runs)."""
    reference = folder / f"{run}-segments.dwref"
    build_segment_reference(reference, segments, train_windows)
    configs = {flag: config_for("bytes", segments, flag, str(reference)) for flag in (False, True)}
    summaries = {flag: bench_summaries(configs[flag], reference, events, segments) for flag in (False, True)}
    print(f"{WINDOW_SECONDS} s windows ({1000 * WINDOW_SECONDS:,} events each), segment feature {SEGMENT_FEATURE!r}: "
          f"{2 * segments} values, segmented by it (top {segments} + other)")
    print_segment_bytes({flag: summary_bytes(summaries[flag]) for flag in (False, True)},
                        segment_feature_bytes(summaries[True]), len(configs[True].model("bench").sketch_kinds))
    print_summary_parts(summary_parts(summaries[True]))


def sink_judging(config, reference: Path, summaries: list[bytes], repeats: int = 3) -> tuple[float, int]:
    """The sink's work on each summary but the store, in process: decode it and judge it against the reference
    file (``pipeline.judging.analyze_summary``, as ``jobs.udfs.AnalyzeWindow`` calls it). Returns the fastest of
    ``repeats`` passes in ms per window, and the (segment, feature) cells the gate scored per window."""
    from driftwarden.pipeline.judging import analyze_summary, drift_policy, segment_references
    from driftwarden.pipeline.summary import WindowSummary
    from driftwarden.pipeline.reference_set import ReferenceSet

    references = ReferenceSet.load(reference)
    model, policy = config.model("bench"), drift_policy(config.thresholds, config.window.size_ms)

    def judge(data: bytes):
        summary = WindowSummary.deserialize(data)
        segments = segment_references(summary, references.segment_reference, model)
        return analyze_summary(summary, references.models["bench"], policy, None, *segments)

    scored = sum(f.gate_ks is not None or f.gate_chi2 is not None for data in summaries for f in judge(data).features)
    fastest = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for data in summaries:
            judge(data)
        fastest = min(fastest, time.perf_counter() - started)
    return 1000 * fastest / len(summaries), round(scored / len(summaries))


def stored_segment_rows(store: Path) -> tuple[int, float, float]:
    """Windows stored, segment result rows per window, and distinct segments judged per window."""
    import sqlite3

    db = sqlite3.connect(store)
    windows = db.execute("SELECT COUNT(DISTINCT window_start) FROM window_results").fetchone()[0]
    rows = db.execute("SELECT COUNT(*) FROM segment_results").fetchone()[0]
    judged = db.execute("SELECT COUNT(DISTINCT window_start || segment) FROM segment_results "
                        "WHERE gate_ks IS NOT NULL OR gate_chi2 IS NOT NULL").fetchone()[0]
    return windows, rows / max(windows, 1), judged / max(windows, 1)


def compare_segments(events: int, full: str, half: str, empty: str, folder: Path, run: str, segments: int,
                     train_windows: int, rounds: int = 2, steady_rounds_count: int = 3) -> None:
    """The job with the segment feature but no segments, and with segments by it (top ``segments``), both
    against one reference file (built with segments): events/s, CPU per event and summary bytes per window,
    and both once warm (:func:`steady_rounds` over ``half``, the first half of ``full``, ``steady_rounds_count``
    rounds: one difference of two runs is as noisy as the ratio it measures). ``rounds`` segmented runs, each
    between two unsegmented ones (:func:`segment_ratios`)."""
    reference = folder / f"{run}-segments.dwref"
    started = time.perf_counter()
    build_segment_reference(reference, segments, train_windows)
    print(f"reference {reference.name}: {train_windows} training windows, built in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    configs = {flag: (config_for(empty, segments, flag, str(reference)), config_for(full, segments, flag, str(reference)))
               for flag in (False, True)}
    os.environ["_python_worker_execution_mode"] = "process"  # as compare_reporter: loopback hung in later jobs
    run_driftwarden(empty, folder / f"{run}-warm.db", config=configs[False][0])
    startups = {flag: median_startup([timed_by_thread(run_driftwarden, empty, folder / f"{run}-empty-{int(flag)}-{i}.db",
                                                      None, configs[flag][0]) for i in range(STARTUP_RUNS)])
                for flag in (False, True)}
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpus: dict[bool, list[float]] = {False: [], True: []}
    where: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    stores = {}
    for i, flag in enumerate([False] + [True, False] * rounds):  # off, on, off, ...: a drift of the load cancels out
        stores[flag] = folder / f"{run}-full-{i}.db"
        total, total_cpu = timed_by_thread(run_driftwarden, full, stores[flag], None, configs[flag][1])
        startup, startup_cpu = startups[flag]
        if total <= startup:
            raise SystemExit(f"the {events:,}-event run ({total:.1f} s) was not slower than the empty one "
                             f"({startup:.1f} s): too noisy to measure; use more --events")
        rates[flag].append(events / max(total - startup, 1e-9))
        cpus[flag].append(1e6 * max(total_cpu.seconds - startup_cpu.seconds, 1e-9) / events)
        started = startup_cpu.by_where()
        where[flag].append({k: 1e6 * (v - started.get(k, 0.0)) / events for k, v in total_cpu.by_where().items()})
        print(f"{'segmented  ' if flag else 'unsegmented'}: {rates[flag][-1]:>10,.0f} events/s, {cpus[flag][-1]:.1f} us CPU "
              f"per event ({total:.1f} s total, {startup:.1f} s start-up)", flush=True)
    summaries = {flag: bench_summaries(configs[flag][1], reference, events, segments) for flag in (False, True)}
    sizes = {flag: summary_bytes(summaries[flag]) for flag in (False, True)}
    judging = {flag: sink_judging(configs[flag][1], reference, summaries[flag]) for flag in (False, True)}
    windows, rows, judged = stored_segment_rows(stores[True])
    print(f"{events:,} events, {WINDOW_SECONDS} s windows ({1000 * WINDOW_SECONDS:,} events each), parallelism "
          f"{PARALLELISM}; segment feature {SEGMENT_FEATURE!r}: {2 * segments} values, Zipf shares "
          f"{100 * segment_shares(segments)[0]:.1f}%..{100 * segment_shares(segments)[-1]:.2f}%; segmented: top "
          f"{segments} + (other), min_count 200: {windows} windows stored, {rows:.0f} segment rows and {judged:.1f} "
          f"segments judged per window")
    print_segment_bytes(sizes, segment_feature_bytes(summaries[True]), len(configs[True][1].model("bench").sketch_kinds))
    print_summary_parts(summary_parts(summaries[True]))
    print(f"the sink's judging per window (decode and judge, the store left out; in process, the first 3 windows): "
          f"unsegmented {judging[False][0]:.1f} ms for {judging[False][1]} cells scored by the gate, segmented "
          f"{judging[True][0]:.1f} ms for {judging[True][1]} ({judging[True][0] / judging[False][0]:.1f}x; "
          f"{1000 * judging[True][0] / max(judging[True][1], 1):.0f} us per scored cell, all of the judging counted)")
    print_cpu_by_where(where)
    walls = segment_ratios([1e6 / r for r in rates[False]], [1e6 / r for r in rates[True]])
    cpu_ratios = segment_ratios(cpus[False], cpus[True])
    each = (f"; each segmented run (throughput / CPU): "
            + ", ".join(f"{w:.3f} / {c:.3f}" for w, c in zip(walls, cpu_ratios))) if rounds > 1 else ""
    print(f"ratio segmented / unsegmented (each segmented run against the two unsegmented runs around it, their "
          f"wall time and CPU per event averaged{', the median of the runs' if rounds > 1 else ''}): throughput "
          f"{np.median(walls):.3f}, CPU per event (unsegmented / segmented) {np.median(cpu_ratios):.3f}{each}; "
          f"target >= 0.8 at 20 segments and 60 s windows, >= 0.9 at 600 s")
    if steady_rounds_count > 0:
        segments_steady_state(events, full, half, folder, run, segments, reference, steady_rounds_count)


def segments_steady_state(events: int, full: str, half: str, folder: Path, run: str, segments: int, reference: Path,
                          rounds: int) -> None:
    """The segmented and unsegmented jobs once warm (:func:`steady_rounds`, ``rounds`` rounds), printed."""
    steady = steady_rounds({label: (lambda topic, store, flag=flag: run_driftwarden(
                                topic, store, None, config_for(topic, segments, flag, str(reference))),
                                folder / f"{run}-steady-{int(flag)}")
                            for label, flag in (("segmented", True), ("unsegmented", False))},
                           half, full, rounds)
    print_steady_state(events - events // 2, steady["segmented"], steady["unsegmented"], ("segmented", "unsegmented"))


#: Empty-topic runs per job whose median is its start-up: one empty-topic job's CPU moved by 0.7 s from one run to
#: the next (10.8 and 11.5 s on 2026-12-03), and one measurement was subtracted from every run of that job.
STARTUP_RUNS = 3


def median_startup(runs: list[tuple[float, Any]]) -> tuple[float, Any]:
    """The run of median wall time among ``runs`` (wall seconds, then its CPU: seconds or a :class:`TreeCpu`),
    an odd number of them: its wall time and its CPU are one run's, so they stay consistent.

    >>> median_startup([(9.0, "a"), (7.0, "b"), (8.0, "c")])
    (8.0, 'c')
    """
    return sorted(runs, key=lambda run: run[0])[len(runs) // 2]


def segment_ratios(unsegmented: list[float], segmented: list[float]) -> list[float]:
    """Per segmented run ``j`` (run between unsegmented runs ``j`` and ``j + 1``): the unsegmented cost per event,
    the mean of those two, over its own; costs are wall or CPU time per event, so a throughput ratio averages the
    neighbours' times (the rate over their events together), as the CPU ratio does.

    >>> segment_ratios([10.0, 30.0, 20.0], [25.0, 20.0])
    [0.8, 1.25]
    """
    if len(unsegmented) != len(segmented) + 1:
        raise ValueError(f"{len(segmented)} segmented runs need {len(segmented) + 1} unsegmented around them")
    return [(unsegmented[j] + unsegmented[j + 1]) / 2 / cost for j, cost in enumerate(segmented)]


def print_cpu_by_where(where: dict[bool, list[dict[str, float]]], at_least_us: float = 0.3) -> None:
    """Where the CPU per event goes (start-up subtracted), unsegmented (mean of its runs) vs segmented,
    each thread group that moved or costs at least ``at_least_us``, the largest difference first."""
    groups = {k for runs in where.values() for run in runs for k in run}
    mean = {flag: {k: float(np.mean([run.get(k, 0.0) for run in where[flag]])) for k in groups} for flag in where}
    rows = sorted(groups, key=lambda k: -(mean[True][k] - mean[False][k]))
    print("CPU per event by where it runs (us; start-up subtracted; JVM thread names as Linux keeps them, 15 characters):")
    print(f"  {'where: thread':<42} {'unsegmented':>11} {'segmented':>10} {'difference':>10}")
    for k in rows:
        if max(abs(mean[True][k]), abs(mean[False][k])) >= at_least_us:
            print(f"  {k:<42} {mean[False][k]:>11.1f} {mean[True][k]:>10.1f} {mean[True][k] - mean[False][k]:>+10.1f}")


def steady_state(run, half: str, full: str, store: Path | None = None) -> tuple[float, float]:
    """Wall and CPU seconds the second half of ``full`` takes once warm: a run over ``full`` less a run
    over ``half`` (its first half), both made after a first run over ``full`` (the caller's) warmed
    the JIT compiler up; ``store``: the drift job's store files' prefix (None: plain Flink)."""
    args = (lambda topic: (topic, Path(f"{store}-{topic}.db"))) if store else (lambda topic: (topic,))
    half_wall, half_cpu = timed(run, *args(half))
    full_wall, full_cpu = timed(run, *args(full))
    return full_wall - half_wall, full_cpu - half_cpu


def steady_rounds(runs: dict[str, tuple], half: str, full: str, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """:func:`steady_state` of each pipeline ``rounds`` times (``runs``: name -> (run, store prefix or None)),
    the pipelines taking turns within each round, so that a round's figures were measured under the same
    load of a shared machine; each round's drift job writes stores of its own."""
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for i in range(rounds):
        for name, (run, store) in runs.items():
            out[name].append(steady_state(run, half, full, None if store is None else Path(f"{store}-r{i}")))
    return out


def round_ratios(events: int, first: list[tuple[float, float]], second: list[tuple[float, float]],
                 ) -> tuple[list[list[float]], list[list[float]], list[float], list[float]]:
    """From two pipelines' (wall, CPU) seconds for ``events`` events, one pair per round: each one's rates and
    CPU us per event, and each round's ratios, the first over the second (wall: rates; CPU: the second's CPU
    per event over the first's)."""
    rates = [[events / max(wall, 1e-9) for wall, _ in runs] for runs in (first, second)]
    cpus = [[1e6 * max(cpu, 1e-9) / events for _, cpu in runs] for runs in (first, second)]
    return rates, cpus, [a / b for a, b in zip(*rates)], [b / a for a, b in zip(*cpus)]


def each_round(walls: list[float], cpu_ratios: list[float], prefix: str) -> str:
    """``prefix`` and each round's "wall / CPU" ratios, when there were several rounds; else nothing."""
    if len(walls) < 2:
        return ""
    return prefix + ", ".join(f"{w:.2f} / {c:.2f}" for w, c in zip(walls, cpu_ratios))


def print_steady_state(events: int, first: list[tuple[float, float]], second: list[tuple[float, float]],
                       names: tuple[str, str] = ("driftwarden", "plain Flink")) -> None:
    """Print two pipelines' steady state (:func:`steady_state`: the wall and CPU seconds that ``events``
    more events took, one pair per round) and the ratios, the first over the second (``names``: theirs):
    the medians, and each round's ratios when there were several."""
    rates, cpus, walls, cpu_ratios = round_ratios(events, first, second)
    rounds = each_round(walls, cpu_ratios, f"; median of {len(walls)} rounds, each (wall / CPU): ")
    print(f"steady state, the topic's second half, warm (once warm, a run over the whole topic less one over its "
          f"first half): {names[0]} {np.median(rates[0]):,.0f} events/s, {np.median(cpus[0]):.1f} us CPU per event; "
          f"{names[1]} {np.median(rates[1]):,.0f} events/s, {np.median(cpus[1]):.1f} us; ratio "
          f"{np.median(walls):.2f} (wall) / {np.median(cpu_ratios):.2f} (CPU){rounds}")


def _fill_junk(topic: str, n: int) -> int:
    """Append ``n`` malformed records (bench/hostile_corpus.py) to ``topic``; returns ``n``."""
    from bench.hostile_corpus import malformed

    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 50})
    times = [T0 + i for i in range(n + 1)]
    for i, (_, record) in enumerate(malformed(n, times)):
        producer.produce(topic, record)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)
    return n


#: The pipelines bench_job compares, by the name ``--first-run`` takes.
PIPELINES = ("driftwarden", "plain")


def first_run(pipeline: str, full: str, empty: str) -> dict:
    """One pipeline's first run over ``full`` in this process (``--first-run``): the JVM started on
    ``empty``, then the start-up timed on ``empty``, then ``full`` with the peak RSS sampled. Wall and
    CPU seconds (the samplers' own CPU left out), the peak RSS in bytes, and the pids of this process and
    of its JVM."""
    folder, name = REPO / ".run" / "bench", uuid.uuid4().hex[:6]
    if pipeline == "driftwarden":
        def run(topic: str) -> float:
            return run_driftwarden(topic, folder / f"{name}-first-{topic}.db")
    else:
        run = run_plain_flink
    run(empty)  # the first job of the process also starts the JVM
    startup, startup_cpu = timed(run, empty)
    with PeakRss() as rss:
        wall, cpu = timed(run, full)
    jvms = [pid for pid in _process_tree() if _role(pid) == "JVM"]
    return {"startup": startup, "startup_cpu": startup_cpu, "wall": wall, "cpu": cpu - rss.own_cpu,
            "peak_rss": rss.peak, "pid": os.getpid(), "jvm_pids": jvms}


def first_run_rounds(full: str, empty: str, rounds: int) -> dict[str, list[dict]]:
    """:func:`first_run_in_own_process` of each pipeline ``rounds`` times, then the floor (:class:`Floor`), the
    pipelines taking turns within each round (as :func:`steady_rounds`): one run each is one draw of a shared
    machine's load."""
    out: dict[str, list[dict]] = {pipeline: [] for pipeline in (*PIPELINES, "floor")}
    with Floor(full, empty) as floor:
        for _ in range(rounds):
            for pipeline in PIPELINES:
                out[pipeline].append(first_run_in_own_process(pipeline, full, empty))
            out["floor"].append(floor.first_run())
    return out


class Floor:
    """The floor of any pipeline over the topic: the job's own Kafka source (its classes and settings) reading
    every record and parsing its envelope and features (``FeatureColumns``), nothing after it
    (bench/java/.../FusedCeiling.java, ``parse``); each run a first run in a JVM of its own, start-up timed on
    the empty topic and subtracted, as the other pipelines' (parallelism 1)."""

    def __init__(self, full: str, empty: str) -> None:
        self.full, self.empty = full, empty

    def __enter__(self) -> "Floor":
        import tempfile

        from bench import fused_ceiling

        self._tmp = tempfile.TemporaryDirectory(prefix="bench-floor-")
        folder = Path(self._tmp.name)
        fused_ceiling.bench_job.WINDOW_SECONDS = WINDOW_SECONDS  # its own copy of this module: the same windows
        self._run = fused_ceiling.run_pipeline
        self._classes = fused_ceiling.compile_ceiling(folder / "classes")
        self._settings = (fused_ceiling.write_settings(self.full, folder), fused_ceiling.write_settings(self.empty, folder))
        return self

    def __exit__(self, *exc) -> None:
        self._tmp.cleanup()

    def first_run(self) -> dict:
        """Wall and CPU seconds of one run over the full topic, and its start-up's (the JVM's CPU)."""
        print(f"first run of the floor over {self.full}, in a JVM of its own ...", flush=True)
        return self._run("parse", self._classes, *self._settings)


def first_run_in_own_process(pipeline: str, full: str, empty: str, cache: Path | None = None) -> dict:
    """:func:`first_run` of ``pipeline`` in a fresh process of this script (its own JVM), with this run's
    parallelism and windows: no other pipeline has warmed the JIT compiler up for it. ``cache``: the process's
    ``DRIFTWARDEN_CACHE_DIR`` (its jars; :func:`baseline_cache`), else this one's."""
    print(f"first run of {pipeline} over {full}{f' with the jars of {cache}' if cache else ''}, in a process of its "
          "own ...", flush=True)
    command = [sys.executable, __file__, "--first-run", pipeline, "--topic", full, "--empty-topic", empty,
               "--parallelism", str(PARALLELISM), "--window-seconds", str(WINDOW_SECONDS)]
    env = {**os.environ, "DRIFTWARDEN_CACHE_DIR": str(cache)} if cache else None
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    marked = [line for line in done.stdout.splitlines() if line.startswith(FIRST_RUN_MARK)]
    if done.returncode != 0 or not marked:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"the first run of {pipeline} failed (exit {done.returncode}): its stderr is above")
    return json.loads(marked[-1][len(FIRST_RUN_MARK):])


#: The line of ``--first-run``'s output that carries its figures (JSON after it).
FIRST_RUN_MARK = "first run: "


def baseline_cache(jar: Path, folder: Path) -> Path:
    """A cache folder whose jars are this process's (links) but the job's UDF jar, which is ``jar``: the
    ``DRIFTWARDEN_CACHE_DIR`` of ``--baseline-jar``'s runs."""
    from driftwarden.jobs.flink_env import UDF_JAR, jar_dir

    if not jar.is_file():
        raise SystemExit(f"--baseline-jar {jar}: no such file (build one with mvn -f jobs/java/pom.xml package)")
    jars = folder / "jars"
    for entry in jar_dir().iterdir():
        if entry.name != Path(UDF_JAR).parent.name:
            (jars / entry.name).parent.mkdir(parents=True, exist_ok=True)
            (jars / entry.name).symlink_to(entry.resolve())
    (jars / UDF_JAR).parent.mkdir(parents=True, exist_ok=True)
    (jars / UDF_JAR).symlink_to(jar.resolve())
    return folder


def compare_jars(events: int, full: str, empty: str, folder: Path, jar: Path, rounds: int) -> None:
    """The drift job's first run over ``full`` with this checkout's jar and with ``jar`` (the baseline), each in
    a process of its own, taking turns (the order swapped every round) for ``rounds`` rounds; prints each one's
    rate and CPU per event (start-up subtracted) and the ratios this jar / the baseline, each round's and the
    median."""
    cache = baseline_cache(jar, folder)
    runs: dict[str, list[dict]] = {"this": [], "baseline": []}
    for i in range(rounds):
        for name in (("this", "baseline") if i % 2 == 0 else ("baseline", "this")):
            runs[name].append(first_run_in_own_process("driftwarden", full, empty, cache if name == "baseline" else None))
    costs = {name: [(r["wall"] - r["startup"], r["cpu"] - r["startup_cpu"]) for r in rs] for name, rs in runs.items()}
    rates, cpus, walls, _ = round_ratios(events, costs["this"], costs["baseline"])
    cpu_ratios = [a / b for a, b in zip(*cpus)]
    print(f"{events:,} events, {WINDOW_SECONDS} s windows, parallelism {PARALLELISM}, {rounds} rounds (first runs, "
          "each in its own JVM, start-up subtracted; the two jars in turn)")
    for name, rs in runs.items():
        print(f"{name:<8} each run: " + "; ".join(f"wall {r['wall']:.1f} s (start-up {r['startup']:.1f} s), CPU "
                                                  f"{r['cpu']:.1f} s (start-up {r['startup_cpu']:.1f} s)" for r in rs))
    for label, i in (("this checkout's jar", 0), (f"baseline {jar.name}", 1)):
        print(f"{label:<28}: {np.median(rates[i]):>10,.0f} events/s, {np.median(cpus[i]):.2f} us CPU per event "
              f"(each round: {', '.join(f'{c:.2f}' for c in cpus[i])})")
    print(f"this / baseline: rate {np.median(walls):.3f}, CPU per event {np.median(cpu_ratios):.3f} (median; each "
          f"round: {', '.join(f'{w:.3f} / {c:.3f}' for w, c in zip(walls, cpu_ratios))})")


def print_floor(events: int, dw: list[dict], plain: list[dict], floor: list[dict]) -> None:
    """Print the floor's rate and CPU per event, and job / floor and plain Flink / floor in CPU per event (each
    round's ratio of the runs in that round; the median)."""
    costs = {name: [(r["wall"] - r["startup"], r["cpu"] - r["startup_cpu"]) for r in runs]
             for name, runs in (("dw", dw), ("plain", plain), ("floor", floor))}
    rates, cpus, _, _ = round_ratios(events, costs["floor"], costs["floor"])
    print(f"floor (the job's Kafka source parsing every record, nothing after it): {np.median(rates[0]):>10,.0f} "
          f"events/s, {np.median(cpus[0]):.1f} us CPU per event (parallelism 1)")
    for label, name in (("driftwarden job", "dw"), ("plain Flink SQL", "plain")):
        _, _, walls, cpu_ratios = round_ratios(events, costs["floor"], costs[name])
        print(f"{label} / floor, CPU per event: {np.median(cpu_ratios):.2f} (wall time per event {np.median(walls):.2f})"
              + each_round(walls, cpu_ratios, "; each round (wall / CPU): "))


def print_first_runs(events: int, dw: list[dict], plain: list[dict], after_dw: dict[str, float]) -> None:
    """Print both pipelines' first runs (:func:`first_run_rounds`: each in its own JVM, one pair per round),
    the median rates, CPU per event and ratios (each round's ratios when there were several), and plain
    Flink's first run in a JVM the drift job had warmed up (``after_dw``: what the bench measured before)."""
    rates, cpus, walls, cpu_ratios = round_ratios(
        events, *([(r["wall"] - r["startup"], r["cpu"] - r["startup_cpu"]) for r in runs] for runs in (dw, plain)))
    dw_rate, plain_rate = (float(np.median(r)) for r in rates)
    median = f"the median of {len(walls)} rounds, " if len(walls) > 1 else ""
    print(f"driftwarden job : {dw_rate:>10,.0f} events/s  ({median}its first run over the topic in its own JVM, "
          f"start-up subtracted: {np.median([r['startup'] for r in dw]):.1f} s)")
    print(f"plain Flink SQL : {plain_rate:>10,.0f} events/s  ({median}the same: "
          f"{np.median([r['startup'] for r in plain]):.1f} s)")
    rounds = each_round(walls, cpu_ratios, "; each round (the pipelines in turn; wall / CPU): ")
    print(f"ratio driftwarden / plain Flink: {np.median(walls):.2f} (wall) / {np.median(cpu_ratios):.2f} (CPU){rounds}")
    print(f"CPU per event (the process, the JVM, any Python workers; start-up subtracted; steadier than wall time on a "
          f"shared machine): driftwarden {np.median(cpus[0]):.1f} us, plain Flink {np.median(cpus[1]):.1f} us")
    warmed = events / max(after_dw["wall"] - after_dw["startup"], 1e-9)
    print(f"plain Flink's first run in a JVM the drift job had run in (its engine code compiled by the JIT already; "
          f"this bench's headline before 2026-12-02): {warmed:,.0f} events/s, ratio {dw_rate / warmed:.2f}")


def main() -> None:
    """Run both pipelines on the same topic and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000,
                        help="events in the throughput topic (the JIT compiling the data paths, about 3 s of CPU, "
                             "is not in the empty-topic start-up: smaller topics understate steady state)")
    parser.add_argument("--parallelism", type=int, default=1, help="of both pipelines")
    parser.add_argument("--window-seconds", type=int, default=10,
                        help="tumbling window of both pipelines (the job's own default is 60); the topic holds 1,000 "
                             "events per second of event time, so a window holds 1,000 x this many events (the "
                             "segments' per-window cost is spread over them)")
    parser.add_argument("--state-events", type=int, default=200_000,
                        help="events of the checkpointed state run at 1000 events/s (the other gets a quarter)")
    parser.add_argument("--malformed-share", type=float, default=0.0,
                        help="also run the job on the same events with this share of malformed records among them "
                             "(e.g. 0.01), and on a topic of malformed records only: good events/s with and without "
                             "them, and malformed records/s")
    parser.add_argument("--segments", type=int, default=0,
                        help="instead of plain Flink: the topic's events get one more categorical feature "
                             "(country, 2N values of Zipf volumes) and the drift job runs with it unsegmented and "
                             "segmented by it (top N, min_count 200), both against one reference file built with "
                             "segments: events/s, CPU per event, summary bytes per window, the ratio")
    parser.add_argument("--segment-rounds", type=int, default=2,
                        help="with --segments: segmented runs, each between two unsegmented ones (the median ratio "
                             "and each run's are printed)")
    parser.add_argument("--train-windows", type=int, default=12,
                        help="windows of the training snapshot the --segments reference file is built from")
    parser.add_argument("--segment-bytes", action="store_true",
                        help="with --segments: only print the summary bytes per window and per (segment, feature), "
                             "unsegmented and segmented, and where a segmented window's bytes go (no topic, no job: "
                             "in process)")
    parser.add_argument("--envelopes", action="store_true",
                        help="instead of plain Flink: the drift job over the same events as the contract's JSON, as "
                             "Confluent-framed Avro (the registry of scripts/services.sh), as flat JSON under a mapped "
                             "envelope and as JSON with --wrong-share wrong-typed values, in --envelope-rounds rounds")
    parser.add_argument("--wrong-share", type=float, default=0.05,
                        help="with --envelopes: the share of events whose first numeric feature is a text")
    parser.add_argument("--envelope-rounds", type=int, default=2, help="with --envelopes: rounds of the four runs")
    parser.add_argument("--multivariate-cost", action="store_true",
                        help="instead of plain Flink: the drift job over a topic of 25 numeric features with the "
                             "default multivariate group on and off (multivariate: []), alternating, and over a topic "
                             "of one 384-dim vector feature (--vector-events events), --multivariate-rounds rounds")
    parser.add_argument("--vector-events", type=int, default=50_000,
                        help="with --multivariate-cost: events of the vector topic")
    parser.add_argument("--multivariate-rounds", type=int, default=3, help="with --multivariate-cost: rounds")
    parser.add_argument("--compare-reporter", action="store_true",
                        help="instead of plain Flink: the drift job with Flink's Prometheus reporter on vs off")
    parser.add_argument("--scrape-interval", type=float, default=15.0,
                        help="seconds between scrapes with --compare-reporter (deploy/prometheus: 15; the local "
                             "test Prometheus of scripts/services.sh: 1)")
    parser.add_argument("--baseline-jar", type=Path,
                        help="instead of plain Flink: the drift job's first run with this checkout's UDF jar and with "
                             "this one, in turns for --first-rounds rounds: rate, CPU per event and the ratios "
                             "(what a Java change costs; docs/faults.md)")
    parser.add_argument("--first-rounds", type=int, default=3,
                        help="rounds of the first runs (the headline: both pipelines in turn in each, each run in a "
                             "JVM of its own); the median and each round's ratios are printed")
    parser.add_argument("--steady-rounds", type=int, default=3,
                        help="rounds of the steady-state measurement (both pipelines in turn in each); the median "
                             "is printed, and each round's ratios")
    parser.add_argument("--first-run", choices=PIPELINES,
                        help="(used by the bench itself) only time this pipeline's first run over --topic, start-up "
                             "on --empty-topic subtracted, in this process, and print the figures as JSON")
    parser.add_argument("--topic", help="with --first-run: the topic to run over")
    parser.add_argument("--empty-topic", help="with --first-run: a topic of one event, for the start-up")
    args = parser.parse_args()
    global PARALLELISM, WINDOW_SECONDS
    PARALLELISM, WINDOW_SECONDS = args.parallelism, args.window_seconds
    if args.first_run:
        if not (args.topic and args.empty_topic):
            parser.error("--first-run needs --topic and --empty-topic")
        print(FIRST_RUN_MARK + json.dumps(first_run(args.first_run, args.topic, args.empty_topic)), flush=True)
        return
    run = uuid.uuid4().hex[:6]
    folder = REPO / ".run" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    if args.segment_bytes:
        if args.segments <= 0:
            parser.error("--segment-bytes needs --segments N")
        segment_bytes_only(folder, run, args.segments, args.train_windows, args.events)
        return
    empty, half, full, fast, slow = (f"bench-{kind}-{run}" for kind in ("empty", "half", "full", "fast", "slow"))
    if args.multivariate_cost:
        compare_multivariate(args.events, args.vector_events, folder, run, args.multivariate_rounds)
        return
    if args.envelopes:
        compare_envelopes(args.events, folder, run, args.wrong_share, args.envelope_rounds)
        return
    fill_topic(empty, 1, 1000)
    print(f"filling {full} with {args.events:,} events ...", flush=True)
    fill_topic(full, args.events, 1000, segments=args.segments)
    if args.baseline_jar:
        compare_jars(args.events, full, empty, folder / f"{run}-baseline-cache", args.baseline_jar, args.first_rounds)
        return
    if args.segments > 0:
        fill_topic(half, args.events // 2, 1000, segments=args.segments)  # the full topic's first half
        compare_segments(args.events, full, half, empty, folder, run, args.segments, args.train_windows,
                         args.segment_rounds, args.steady_rounds)
        return
    if args.compare_reporter:
        compare_reporter(args.events, full, empty, folder, run, args.scrape_interval)
        return
    if args.malformed_share > 0:
        compare_malformed(args.events, full, empty, folder, run, args.malformed_share)
        return
    fill_topic(half, args.events // 2, 1000)  # the full topic's first half: the same events
    fill_topic(fast, args.state_events, 1000)
    fill_topic(slow, args.state_events // 4, 250)  # same windows, a quarter of the rate

    first = first_run_rounds(full, empty, args.first_rounds)
    run_driftwarden(empty, folder / f"{run}-warm.db")  # the first job of the process also starts the JVM
    run_driftwarden(full, folder / f"{run}-full.db")  # warms the drift job's paths up for its steady state
    after_dw = {"startup": timed(run_plain_flink, empty)[0], "wall": timed(run_plain_flink, full)[0]}
    steady = steady_rounds({"driftwarden": (run_driftwarden, folder / f"{run}-steady"), "plain": (run_plain_flink, None)},
                           half, full, args.steady_rounds) if args.steady_rounds > 0 else None
    fast_window, fast_checkpoint = measure_state(fast, folder, f"{run}-fast")
    slow_window, slow_checkpoint = measure_state(slow, folder, f"{run}-slow")

    print(f"{args.events:,} events, {WINDOW_SECONDS} s windows ({1000 * WINDOW_SECONDS:,} events each), "
          f"parallelism {PARALLELISM}")
    print_first_runs(args.events, first["driftwarden"], first["plain"], after_dw)
    print_floor(args.events, first["driftwarden"], first["plain"], first["floor"])
    features = len(NUMERIC) + len(CATEGORICAL)
    if steady is not None:
        print_steady_state(args.events - args.events // 2, steady["driftwarden"], steady["plain"])
    print(f"peak RSS of the client process (PyFlink runs the Python functions in it), the Flink JVM and any "
          f"Python workers, the drift job's first runs (the largest): "
          f"{max(r['peak_rss'] for r in first['driftwarden']) / 2**20:,.0f} MiB")
    for label, window, checkpoint in (("1000 events/s", fast_window, fast_checkpoint),
                                      (" 250 events/s", slow_window, slow_checkpoint)):
        print(f"state at {label}: {window / 1024:,.1f} KiB per open window ({window / features / 1024:,.1f} KiB "
              f"per feature), largest checkpoint {checkpoint / 1024:,.0f} KiB")


if __name__ == "__main__":
    main()
