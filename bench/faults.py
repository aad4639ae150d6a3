"""The faults of a real deployment, on the live job, each checked record for record.

    .venv/bin/python bench/faults.py [--runs 3] [--cases all] [--configs defaults,idleness-5s] [--json PATH]

Runs on services of its own (Kafka, PostgreSQL and, for the TaskManager case, a standalone Flink
cluster, all by ``scripts/services.sh`` with their own run folder and port offset:
``$DRIFTWARDEN_FAULT_PORT_OFFSET``, default the caller's ``DRIFTWARDEN_PORT_OFFSET`` + 500, or the next
hundred whose ports are all free), started here and stopped at the end. Each run: a fresh topic, a
stream stamped with the wall clock (200 events a second, round robin over the partitions, every 3 s one
late by its partition's own order, every 997th record not JSON), ``driftwarden run`` with the production
defaults but for the config named, two windows stored, then the case's faults one after the other, each
followed by the job catching up (a window past the fault stored); then the stream stops, each partition
gets a sentinel far ahead, and the store is compared with what was sent: every window with exactly its
events, every late dead letter one that was late, read = windowed + late + rejected.

Configs: ``defaults`` (the production window settings: out-of-orderness 5 s, idleness 30 s, periodic
watermarks; 10 s windows so that runs stay short), ``idleness-5s`` (10 s windows, out-of-orderness 1 s,
idleness 5 s). A broker outage lasts idleness + 10 s, so a rule that let a partition pass the
watermark merely for being silent would have it pass.

Prints one line per run (exact or not, windows exact, each fault's recovery time), a table per
(case, config): runs exact of runs, windows exact of windows, and a table per fault of each case: runs
whose windows around that fault were all exact, those windows exact of windows, the slowest catch-up. ``tests/test_faults.py`` runs a
CI-sized selection of the same runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fault_harness import (LiveJob, LiveStream, PrivateServices, Verdict, add_partitions,  # noqa: E402
                                 create_topic, stored_windows, unique_topic, wait_for_verdict, wait_until,
                                 write_config)
from driftwarden.schemas.config import WindowConfig  # noqa: E402

#: The window settings of each config, over the production defaults.
CONFIGS: dict[str, dict] = {
    "defaults": {"size": "10s"},
    "idleness-5s": {"size": "10s", "out_of_orderness": "1s", "idleness": "5s"},
}
POSTGRES_OUTAGE_S = 30
#: How long one wait may take: a job's start took up to 4 minutes on the loaded 2-core machine.
WAIT_S = 600


@dataclass
class Run:
    """One run's context: what the faults act on."""

    services: PrivateServices
    stream: LiveStream
    job: LiveJob
    window: WindowConfig
    topic: str


@dataclass
class Phase:
    """One fault of a run: when it began and ended (stream ms) and how long the job took to catch up (s)."""

    fault: str
    began_ms: int
    ended_ms: int
    recovery_s: float = 0.0


def broker_restart(run: Run) -> None:
    """The broker stopped (cleanly) for idleness + 10 s, then started again."""
    run.services.services("stop", "kafka")
    time.sleep(run.window.idleness_ms / 1000 + 10)
    run.services.services("start", "kafka")


def broker_killed_at_checkpoint(run: Run) -> None:
    """The broker killed (``kill -9``) as a checkpoint begins (its folder appears), down for idleness + 10 s."""
    before = set(run.job.checkpoints.glob("*/chk-*"))
    wait_until(lambda: set(run.job.checkpoints.glob("*/chk-*")) - before, 120, "a checkpoint to begin", run.job,
               step_s=0.01)
    run.services.kill("kafka")
    time.sleep(run.window.idleness_ms / 1000 + 10)
    run.services.services("start", "kafka")


def postgres_down(run: Run) -> None:
    """PostgreSQL stopped for 30 s, then started again."""
    run.services.services("stop", "postgres")
    time.sleep(POSTGRES_OUTAGE_S)
    run.services.services("start", "postgres")


def partitions_added(run: Run) -> None:
    """The topic grown by two partitions mid-stream; the stream deals over them at once."""
    total = run.stream.partitions + 2
    add_partitions(run.services.kafka_bootstrap, run.topic, total)
    run.stream.set_partitions(total)


def job_killed_and_resumed(run: Run) -> None:
    """The job killed (``kill -9``, its whole process group) and started again with ``--resume``."""
    run.job.kill()
    time.sleep(5)
    run.job.start(resume=True)


def taskmanager_replaced(run: Run) -> None:
    """The standalone cluster's TaskManager killed (``kill -9``) and a new one started."""
    run.services.kill_taskmanager()
    time.sleep(5)
    run.services.start_taskmanager()


@dataclass(frozen=True)
class Case:
    """Faults applied one after the other to one live job."""

    faults: tuple[Callable[[Run], None], ...]
    partitions: int = 2
    cluster: bool = False


CASES: dict[str, Case] = {
    "broker-restart-2p": Case((broker_restart,)),
    "broker-restart-4p": Case((broker_restart,), partitions=4),
    "broker-killed-at-checkpoint": Case((broker_killed_at_checkpoint,)),
    "taskmanager-replaced": Case((taskmanager_replaced,), cluster=True),
    "job-killed-resumed": Case((job_killed_and_resumed,)),
    "postgres-down-30s": Case((postgres_down,)),
    "partitions-added": Case((partitions_added,)),
    # every embedded case in one job, one after the other (the broker restarted again once the topic has 4 partitions)
    "sequence": Case((broker_restart, broker_killed_at_checkpoint, postgres_down, partitions_added, broker_restart,
                      job_killed_and_resumed)),
    # the broker's faults in one job (CI's selection): stopped, killed at a checkpoint, the topic grown, stopped again
    "broker-sequence": Case((broker_restart, broker_killed_at_checkpoint, partitions_added, broker_restart)),
}
#: Cases that apply several faults to one job: not in ``--cases all`` (each of their faults is a case of its own).
SEQUENCES = ("sequence", "broker-sequence")


@dataclass
class Result:
    """One run's outcome."""

    case: str
    config: str
    verdict: Verdict
    phases: list[Phase] = field(default_factory=list)
    seconds: float = 0.0

    def phase_windows(self, index: int, window_ms: int) -> tuple[int, int]:
        """(exact, checked) of the windows from the one before fault ``index`` began to the one before the next
        fault began (the last fault: to the end of the stream)."""
        began = self.phases[index].began_ms
        first = began - began % window_ms - window_ms
        after = self.phases[index + 1].began_ms - window_ms if index + 1 < len(self.phases) else float("inf")
        starts = [s for s in self.verdict.expected if first <= s < after]
        exact = sum(1 for s in starts if self.verdict.stored.get(s) == self.verdict.expected[s])
        return exact, len(starts)

    def line(self, window_ms: int) -> str:
        """One line: case, config, exact or not, windows exact, each fault's windows and recovery."""
        v = self.verdict
        faults = "; ".join(f"{p.fault}: windows {'/'.join(map(str, self.phase_windows(i, window_ms)))} exact, "
                           f"caught up {p.recovery_s:.0f} s after" for i, p in enumerate(self.phases))
        return (f"{self.case:<28} {self.config:<12} {'EXACT' if v.exact else 'WRONG':<5} windows "
                f"{v.windows_exact}/{len(v.expected)} exact, {len(v.late_sent)} late sent, "
                f"{len(v.wrongly_late)} wrongly late, {self.seconds:.0f} s; {faults}")


def store_url_of(services: PrivateServices) -> str:
    """A fresh, empty schema of the private PostgreSQL, as a store URL."""
    schema = f"r_{uuid.uuid4().hex[:10]}"
    engine = create_engine(services.pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    engine.dispose()
    return f"{services.pg_url}&options=-csearch_path%3D{schema}"


def _last_stored_end(store_url: str, window_ms: int) -> int:
    stored = stored_windows(store_url)
    return max(stored) + window_ms if stored else 0


def run_case(name: str, config_name: str, services: PrivateServices, workdir: Path) -> Result:
    """One run of case ``name`` under config ``config_name``; the job and stream are stopped afterwards."""
    case, began = CASES[name], time.monotonic()
    window_settings = CONFIGS[config_name]
    window = WindowConfig.model_validate(window_settings)
    if case.cluster:
        services.services("start", "flink")
    topic = unique_topic(name)
    create_topic(services.kafka_bootstrap, topic, case.partitions)
    workdir.mkdir(parents=True, exist_ok=True)
    config = write_config(workdir / "config.yaml", topic, services.kafka_bootstrap, window_settings)
    store_url = store_url_of(services)
    stream = LiveStream(services.kafka_bootstrap, topic, case.partitions, window.size_ms, window.out_of_orderness_ms)
    job = LiveJob(config, store_url, workdir, services, jobmanager=services.flink_rest if case.cluster else None,
                  parallelism=2 if case.cluster else 1)
    run = Run(services, stream, job, window, topic)
    stream.start()
    job.start()
    phases = []
    try:
        wait_until(lambda: len(stored_windows(store_url)) >= 2, WAIT_S, "the first two windows", job)
        for fault in case.faults:
            _progress(f"{name} {config_name}: {fault.__name__} ({fault.__doc__.strip()})")
            phase = Phase(fault.__name__, stream.now_ms(), 0)
            fault(run)
            phase.ended_ms, ended = stream.now_ms(), time.monotonic()
            wait_until(lambda: _last_stored_end(store_url, window.size_ms) > phase.ended_ms + window.size_ms,
                       WAIT_S, f"the job to catch up after {fault.__name__}", job)
            phase.recovery_s = time.monotonic() - ended
            _progress(f"{name} {config_name}: caught up {phase.recovery_s:.0f} s after {fault.__name__}")
            phases.append(phase)
        stream.stop()
        found = wait_for_verdict(stream, store_url, job, WAIT_S)
    finally:
        stream.stopped.set()
        job.kill()
    return Result(name, config_name, found, phases, time.monotonic() - began)


def _progress(message: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def table(results: list[Result]) -> str:
    """Per (case, config): runs exact of runs, windows exact of windows."""
    rows = {}
    for r in results:
        runs, exact, windows, windows_exact = rows.get((r.case, r.config), (0, 0, 0, 0))
        rows[(r.case, r.config)] = (runs + 1, exact + r.verdict.exact, windows + len(r.verdict.expected),
                                    windows_exact + r.verdict.windows_exact)
    lines = [f"{'case':<28} {'config':<12} {'runs exact':>10} {'windows exact':>14}"]
    lines += [f"{case:<28} {config:<12} {f'{e}/{n}':>10} {f'{we}/{w}':>14}"
              for (case, config), (n, e, w, we) in rows.items()]
    return "\n".join(lines)


def fault_table(results: list[Result]) -> str:
    """Per (case, config, fault): runs whose windows around the fault were all exact, windows exact of windows,
    and the slowest catch-up after it."""
    rows: dict[tuple[str, str, int, str], tuple[int, int, int, int, float]] = {}
    for r in results:
        window_ms = WindowConfig.model_validate(CONFIGS[r.config]).size_ms
        for i, p in enumerate(r.phases):
            exact, windows = r.phase_windows(i, window_ms)
            runs, runs_exact, total, total_exact, slowest = rows.get((r.case, r.config, i, p.fault), (0, 0, 0, 0, 0))
            rows[(r.case, r.config, i, p.fault)] = (runs + 1, runs_exact + (exact == windows), total + windows,
                                                    total_exact + exact, max(slowest, p.recovery_s))
    lines = [f"{'case':<28} {'config':<12} {'fault':<30} {'runs exact':>10} {'windows exact':>14} {'caught up':>10}"]
    lines += [f"{case:<28} {config:<12} {f'{i + 1}. {fault}':<30} {f'{e}/{n}':>10} {f'{we}/{w}':>14} "
              f"{f'<= {slowest:.0f} s':>10}"
              for (case, config, i, fault), (n, e, w, we, slowest) in rows.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen cases under the chosen configs ``--runs`` times each; 1 if any run was not exact."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each (case, config) (default: %(default)s)")
    parser.add_argument("--cases", default="all", help=f"comma-separated subset of {', '.join(CASES)}, or 'all' "
                                                       f"(every case but {', '.join(SEQUENCES)}, "
                                                       "each in a run of its own)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="also write every run's figures here (after each run)")
    parser.add_argument("--keep", action="store_true", help="keep the services' and runs' folders (logs)")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if c not in SEQUENCES] if args.cases == "all" else args.cases.split(",")
    configs = args.configs.split(",")
    unknown = [c for c in cases if c not in CASES] + [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown case or config: {', '.join(unknown)}")
    root = Path(tempfile.mkdtemp(prefix="dw-faults-", dir="/var/tmp"))
    root.chmod(0o755)  # PostgreSQL runs as its own user and must reach its folder
    services = PrivateServices(root / "services")
    services.services("start", "kafka", "postgres")
    print(f"private services on port offset {services.offset}, folders in {root}", flush=True)
    results: list[Result] = []
    failed: list[dict] = []  # runs that ended without a verdict (the job died, a wait timed out)
    try:
        for run_index in range(args.runs):
            for name in cases:
                for config_name in configs:
                    folder = root / f"{name}-{config_name}-{run_index}"
                    try:
                        result = run_case(name, config_name, services, folder)
                    except Exception as error:  # noqa: BLE001 - one failed run must not end the suite
                        print(f"{name:<28} {config_name:<12} FAILED without a verdict ({folder}): {error}", flush=True)
                        failed.append({"case": name, "config": config_name, "failed": str(error)[-2000:]})
                    else:
                        print(result.line(WindowConfig.model_validate(CONFIGS[config_name]).size_ms), flush=True)
                        if not result.verdict.exact:
                            print(result.verdict.describe(), flush=True)
                        results.append(result)
                    if args.json:  # after every run, so that a suite cut short keeps what it measured
                        args.json.write_text(json.dumps([_figures(r) for r in results] + failed, indent=1))
    finally:
        services.services("stop")
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(table(results))
    print(fault_table(results))
    for run in failed:
        print(f"{run['case']} {run['config']}: a run failed without a verdict (not in the tables)")
    return 0 if all(r.verdict.exact for r in results) and not failed else 1


def _figures(result: Result) -> dict:
    window_ms = WindowConfig.model_validate(CONFIGS[result.config]).size_ms
    v = result.verdict
    return {"case": result.case, "config": result.config, "exact": v.exact, "windows": len(v.expected),
            "windows_exact": v.windows_exact, "late_sent": len(v.late_sent), "wrongly_late": len(v.wrongly_late),
            "read": v.read, "rejected": v.rejected, "seconds": round(result.seconds),
            "faults": [{"fault": p.fault, "windows": result.phase_windows(i, window_ms),
                        "recovery_s": round(p.recovery_s)}
                       for i, p in enumerate(result.phases)]}


if __name__ == "__main__":
    sys.exit(main())
