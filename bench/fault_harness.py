"""Private services, a live event stream and the streaming job, for the fault suite and the overload bench.

Everything here runs on services of its own (``scripts/services.sh`` with a run folder and a port
offset of their own): the faults stop the broker, kill TaskManagers and stop PostgreSQL, which
must never touch the services others use. The stream is stamped with the wall clock, as in
production, and the fate of every record it sends is known (its partition and offset from the
broker's delivery report), so that what the job stored can be checked record for record:
every window with exactly its events, every late dead letter one that was late by its
partition's own order, and read = windowed + late + rejected.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
import contextlib
import functools
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

import httpx
import numpy as np
import orjson
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from sqlalchemy import Engine, create_engine, select
from sqlalchemy.exc import SQLAlchemyError

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from driftwarden.schemas.tables import dead_letters, window_counts  # noqa: E402

#: Port offset of the private services (``scripts/services.sh``'s ``DRIFTWARDEN_PORT_OFFSET``) unless
#: ``$DRIFTWARDEN_FAULT_PORT_OFFSET`` names one: the caller's offset (the shared services' is 0) plus 500.
FAULT_OFFSET_ENV = "DRIFTWARDEN_FAULT_PORT_OFFSET"
MODEL = "faulted"
SENTINEL_MODEL = "sentinel"
FEATURES = {"x": "numeric", "y": "numeric", "c": "categorical"}
MALFORMED = b'{"event_time": '  # not JSON: the job rejects it
LATE_REASON = "late"


#: Offsets tried after the first when one of its ports is taken, this far apart.
OFFSET_STEP, OFFSET_TRIES = 100, 20


@functools.cache
def service_ports() -> tuple[int, ...]:
    """Every port of ``scripts/services.sh``'s services at offset 0, as its ``ports`` command prints them (the one
    table of them): Kafka's four, Alertmanager and its receiver, the registry, PostgreSQL, Prometheus, Flink's REST
    and RPC and its metrics ports."""
    env = {k: v for k, v in os.environ.items() if k not in ("DRIFTWARDEN_PORT_OFFSET", "DRIFTWARDEN_PG_PORT")}
    out = subprocess.run(["bash", str(REPO / "scripts" / "services.sh"), "ports"], env=env, capture_output=True,
                         text=True, check=True).stdout
    return tuple(int(line.split()[1]) for line in out.splitlines())


def fault_port_offset() -> int:
    """The private services' port offset: :data:`FAULT_OFFSET_ENV` when set, else the first of the caller's offset
    plus 500, 600, ... at which every one of :func:`service_ports` is free now.

    The ports lie in Linux's ephemeral range: a client's connection (the suite holds many) can hold one of them
    when the services start mid-run, and PostgreSQL then failed to start (seen in 1 CI run in 4)."""
    if FAULT_OFFSET_ENV in os.environ:
        return int(os.environ[FAULT_OFFSET_ENV])
    first = int(os.environ.get("DRIFTWARDEN_PORT_OFFSET", "0")) + 500
    offsets = [first + OFFSET_STEP * i for i in range(OFFSET_TRIES)]
    return next((offset for offset in offsets if all(port_free(port + offset) for port in service_ports())), first)


def port_free(port: int) -> bool:
    """Whether a listening socket can bind 127.0.0.1:``port`` now (as a service's would)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT does not count
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class PrivateServices:
    """Kafka, PostgreSQL and (when asked) a standalone Flink cluster of their own, by ``scripts/services.sh``."""

    run_dir: Path
    offset: int = field(default_factory=fault_port_offset)

    def env(self) -> dict[str, str]:
        """The environment that points ``scripts/services.sh`` (and the job) at these services."""
        env = {**os.environ, "DRIFTWARDEN_RUN_DIR": str(self.run_dir), "DRIFTWARDEN_PORT_OFFSET": str(self.offset)}
        env.pop("DRIFTWARDEN_PG_PORT", None)
        return env

    def services(self, action: str, *names: str) -> None:
        """``scripts/services.sh <action> <names>`` on these services."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([str(REPO / "scripts" / "services.sh"), action, *names], env=self.env(),
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"services.sh {action} {' '.join(names)} failed: {done.stderr[-3000:]}")

    @property
    def kafka_bootstrap(self) -> str:
        """The private broker's bootstrap address."""
        return f"127.0.0.1:{59092 + self.offset}"

    @property
    def pg_url(self) -> str:
        """The private PostgreSQL's URL: its password in the libpq password file scripts/services.sh writes
        (``?passfile=``), so that it is on no command line and a cluster's TaskManagers can read it too."""
        passfile = quote(str(self.run_dir / "postgres" / "pgpass"), safe="/")
        return f"postgresql://driftwarden@127.0.0.1:{55432 + self.offset}/driftwarden?passfile={passfile}"

    @property
    def prometheus_url(self) -> str:
        """The private Prometheus's base URL."""
        return f"http://127.0.0.1:{59090 + self.offset}"

    @property
    def flink_rest(self) -> str:
        """host:port of the private Flink cluster's REST endpoint."""
        return f"127.0.0.1:{58081 + self.offset}"

    def kill(self, name: str) -> None:
        """``kill -9`` a service by its PID file (a crash, where ``stop`` shuts it down cleanly)."""
        pid_file = self.run_dir / "pids" / f"{name}.pid"
        for pid in pid_file.read_text().split():
            _kill_and_wait(int(pid))
        pid_file.unlink()

    def kill_taskmanager(self) -> None:
        """``kill -9`` one of the Flink cluster's TaskManagers (the first started); the others keep running.

        ``scripts/services.sh`` starts two of one slot each: killing both would leave the job, at parallelism 2,
        one slot short after a single replacement (it failed with NoResourceAvailableException)."""
        pid_file = next((self.run_dir / "pids").glob("flink-*-taskexecutor.pid"))
        pids = pid_file.read_text().split()
        workers = _descendants(int(pids[0]))  # its Python workers: gone with it, as with its machine
        for pid in [int(pids[0]), *workers]:
            _kill_and_wait(pid)
        pid_file.write_text("".join(f"{pid}\n" for pid in pids[1:]))  # taskmanager.sh appends the new one

    def start_taskmanager(self) -> None:
        """Start a TaskManager for the Flink cluster, as ``scripts/services.sh start flink`` does."""
        import pyflink

        home = Path(pyflink.__file__).parent
        flink = self.run_dir / "flink"
        env = {**self.env(), "FLINK_CONF_DIR": str(flink / "conf"), "FLINK_LOG_DIR": str(flink / "log"),
               "FLINK_PID_DIR": str(self.run_dir / "pids"), "FLINK_LIB_DIR": str(flink / "lib"),
               "FLINK_PLUGINS_DIR": str(REPO / ".cache" / "jars" / "plugins")}
        subprocess.run([str(home / "bin" / "taskmanager.sh"), "start"], env=env, check=True, capture_output=True,
                       timeout=120)


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children first), from /proc; ``kill -9`` of a JVM leaves them to init."""
    out, queue = [], [pid]
    while queue:
        parent = queue.pop(0)
        for task in Path(f"/proc/{parent}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                children = [int(c) for c in task.read_text().split()]
                out += children
                queue += children
    return out


def _kill_and_wait(pid: int, timeout_s: float = 30) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create a topic and wait until the broker confirms it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=60)


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    """Grow a topic to ``total`` partitions."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, total)]).values():
        future.result(timeout=60)


def write_config(path: Path, topic: str, bootstrap: str, window: dict, warmup_windows: int = 2) -> Path:
    """A monitor config for the stream: ``window`` over the production defaults, a warm-up reference."""
    path.write_text(yaml.safe_dump({
        "source": {"topics": [topic], "bootstrap_servers": bootstrap, "group_id": f"g-{topic}"},
        "window": window,
        "reference": {"mode": "warmup", "warmup_windows": warmup_windows},
        "models": [{"name": MODEL, "features": FEATURES}],
    }))
    return path


@dataclass
class Sent:
    """A record the stream sent: its kind (``event``, ``late``, ``malformed``, ``sentinel``), event time and
    where the broker put it (partition and offset; -1 until its delivery report arrives)."""

    kind: str
    event_ms: int | None
    partition: int = -1
    offset: int = -1
    error: str | None = None


class LiveStream(threading.Thread):
    """Events of :data:`MODEL` stamped with the wall clock, ``rate`` a second, dealt round robin over the topic's
    partitions; every ``late_every_s`` one more to partition 0 that its own order makes late (its event time
    in the window before the one its partition is in, past the out-of-orderness), and every
    ``malformed_every``-th record not JSON."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, window_ms: int, out_of_orderness_ms: int,
                 rate: int = 200, late_every_s: float = 3.0, malformed_every: int = 997, seed: int = 7) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True,
                                  "message.timeout.ms": 600_000, "log_level": 2})
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.window_ms, self.out_of_orderness_ms = window_ms, out_of_orderness_ms
        self.late_every_s, self.malformed_every = late_every_s, malformed_every
        self.rng = np.random.default_rng(seed)
        self.sent: list[Sent] = []
        self.stopped = threading.Event()
        self._wall0, self._mono0 = time.time(), time.monotonic()
        self._next_partition = 0
        self._last_late = time.monotonic()
        self.error: BaseException | None = None

    def now_ms(self) -> int:
        """The stream's clock: the wall clock at start, then monotonic (never backwards)."""
        return int((self._wall0 + time.monotonic() - self._mono0) * 1000)

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                self._tick()
                self.producer.poll(0)
                time.sleep(0.05)
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def _tick(self) -> None:
        now = self.now_ms()
        for _ in range(max(1, self.rate // 20)):
            self._send_event(now)
        start = now - now % self.window_ms
        if (time.monotonic() - self._last_late >= self.late_every_s
                and now - start >= self.out_of_orderness_ms + 1_000):
            self._last_late = time.monotonic()
            self._send("late", start - 1, 0, self._event(start - 1))

    def _send_event(self, now: int) -> None:
        partition = self._next_partition % self.partitions
        self._next_partition += 1
        if self._next_partition % self.malformed_every == 0:
            self._send("malformed", None, partition, MALFORMED)
        else:
            self._send("event", now, partition, self._event(now))

    def _event(self, event_ms: int) -> bytes:
        return orjson.dumps({"event_time": event_ms, "model": MODEL,
                             "features": {"x": float(self.rng.normal()), "y": float(self.rng.gamma(2.0)),
                                          "c": str(self.rng.choice(list("abcd")))}})

    def _send(self, kind: str, event_ms: int | None, partition: int, value: bytes) -> None:
        record = Sent(kind, event_ms)
        self.sent.append(record)

        def delivered(err, msg) -> None:
            if err is not None:
                record.error = str(err)
            else:
                record.partition, record.offset = msg.partition(), msg.offset()

        while True:
            try:
                self.producer.produce(self.topic, value, partition=partition, on_delivery=delivered)
                return
            except BufferError:  # the local queue is full (the broker away): wait for room
                self.producer.poll(0.5)

    def set_partitions(self, partitions: int, timeout_s: float = 60) -> None:
        """Deal over ``partitions`` from now on, once the producer's metadata knows them."""
        deadline = time.monotonic() + timeout_s
        while len(self.producer.list_topics(self.topic, timeout=10).topics[self.topic].partitions) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the producer does not see {partitions} partitions of {self.topic}")
            time.sleep(0.5)
        self.partitions = partitions

    def stop(self, timeout_s: float = 300) -> None:
        """Stop sending events, send each partition a sentinel far ahead (its watermark then closes every
        window of the stream), and wait until the broker acknowledged everything."""
        self.stopped.set()
        self.join(30)
        if self.error is not None:
            raise RuntimeError("the live stream failed") from self.error
        last = self.now_ms()
        sentinel = last + 2 * self.window_ms + self.out_of_orderness_ms
        for partition in range(self.partitions):
            self._send("sentinel", sentinel, partition,
                       orjson.dumps({"event_time": sentinel, "model": SENTINEL_MODEL, "features": {}}))
        remaining = self.producer.flush(timeout_s)
        if remaining:
            raise RuntimeError(f"{remaining} records not acknowledged by the broker within {timeout_s} s")
        failed = [r for r in self.sent if r.error]
        if failed:
            raise RuntimeError(f"{len(failed)} records not delivered, e.g. {failed[0].error}")

    def expected_windows(self) -> Counter:
        """Window start -> the events of :data:`MODEL` sent on time in that window."""
        return Counter(r.event_ms - r.event_ms % self.window_ms for r in self.sent if r.kind == "event")

    def late_keys(self) -> set[tuple[int, int]]:
        """(partition, offset) of the records sent late by their partition's own order."""
        return {(r.partition, r.offset) for r in self.sent if r.kind == "late"}


@dataclass
class LiveJob:
    """``driftwarden run`` (embedded MiniCluster, or submitted to a cluster) in a process group of its own."""

    config: Path
    store_url: str
    workdir: Path
    services: PrivateServices
    jobmanager: str | None = None
    parallelism: int = 1
    reporter_port: int | None = None  # Flink's Prometheus reporter of the embedded job (None: a free port)
    metrics_port: int | None = None  # the job's own /metrics (consumer lag, store retries; None: off)
    bounded: bool = False
    process: subprocess.Popen | None = None
    starts: int = 0

    @property
    def checkpoints(self) -> Path:
        """Where the job's checkpoints are retained."""
        return self.workdir / "checkpoints"

    @property
    def log(self) -> Path:
        """The job's output (all its starts)."""
        return self.workdir / "job.log"

    def start(self, resume: bool = False) -> None:
        """Start the job (``resume``: from its newest retained checkpoint), production defaults otherwise."""
        env = {**self.services.env(), "PYTHONPATH": str(REPO), "DRIFTWARDEN_RUN_DIR": str(self.workdir / "run")}
        if self.jobmanager:
            env["FLINK_CONF_DIR"] = str(self.services.run_dir / "flink" / "conf")
        if self.reporter_port:
            env["DRIFTWARDEN_FLINK_METRICS_PORT"] = str(self.reporter_port)
        cmd = [sys.executable, "-m", "driftwarden.cli", "run", "-c", str(self.config), "--store-url", self.store_url,
               "--checkpoint-dir", str(self.checkpoints), "--parallelism", str(self.parallelism)]
        cmd += ["--jobmanager", self.jobmanager] if self.jobmanager else []
        cmd += ["--metrics-port", str(self.metrics_port)] if self.metrics_port else []
        cmd += ["--bounded"] if self.bounded else []
        cmd += ["--resume"] if resume else []
        with self.log.open("ab") as log:
            log.write(f"\n===== start {self.starts + 1}: {' '.join(cmd[3:])}\n".encode())
            self.process = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1

    def alive(self) -> bool:
        """Whether the job's process still runs."""
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """``kill -9`` the job's whole process group (the JVM and its Python workers with it)."""
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(60)
        if self.jobmanager:
            cancel_cluster_jobs(self.jobmanager)

    def log_tail(self, chars: int = 6000) -> str:
        """The end of the job's output."""
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def cancel_cluster_jobs(jobmanager: str) -> None:
    """Cancel every running job of the cluster at ``jobmanager``."""
    try:
        jobs = httpx.get(f"http://{jobmanager}/jobs", timeout=10).json()["jobs"]
        for job in jobs:
            if job["status"] not in ("FINISHED", "CANCELED", "FAILED"):
                httpx.patch(f"http://{jobmanager}/jobs/{job['id']}?mode=cancel", timeout=10)
    except httpx.HTTPError:
        pass


@contextmanager
def store_engine(store_url: str) -> Iterator[Engine]:
    """An engine on the store (a PostgreSQL URL as the job takes it), disposed afterwards."""
    engine = create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        yield engine
    finally:
        engine.dispose()


def stored_windows(store_url: str) -> Counter:
    """Window start (ms) -> events stored, for :data:`MODEL`; empty while the store cannot be read."""
    try:
        with store_engine(store_url) as engine, engine.connect() as conn:
            rows = conn.execute(select(window_counts.c.window_start, window_counts.c.events)
                                .where(window_counts.c.model == MODEL))
            return Counter({int(start.timestamp() * 1000): events for start, events in rows})
    except SQLAlchemyError:
        return Counter()


def stored_dead_letters(store_url: str, topic: str) -> list[tuple[int, int, str]]:
    """(partition, offset, reason) of the dead letters of ``topic``."""
    with store_engine(store_url) as engine, engine.connect() as conn:
        rows = conn.execute(select(dead_letters.c.partition, dead_letters.c.offset, dead_letters.c.reason)
                            .where(dead_letters.c.topic == topic))
        return [tuple(r) for r in rows]


@dataclass
class Verdict:
    """What the job stored against what the stream sent."""

    expected: Counter  # window start -> events sent on time
    stored: Counter  # window start -> events stored
    late_sent: set  # (partition, offset) sent late by their partition's order
    late_stored: set  # (partition, offset) dead-lettered as late
    read: int  # records of the stream but the sentinels
    rejected: int  # dead letters for any other reason

    @property
    def windows_exact(self) -> int:
        """Windows stored with exactly their events."""
        return sum(1 for start, n in self.expected.items() if self.stored.get(start) == n)

    @property
    def wrongly_late(self) -> set:
        """Records dead-lettered as late that were on time."""
        return self.late_stored - self.late_sent

    @property
    def exact(self) -> bool:
        """Every window exact, nothing else stored, late exactly the late records, and
        read = windowed + late + rejected."""
        windowed = sum(self.stored.values())
        return (self.stored == self.expected and self.late_stored == self.late_sent
                and self.read == windowed + len(self.late_stored) + self.rejected)

    def describe(self) -> str:
        """A line per window that differs, and the counts."""
        lines = [f"window {start}: sent {n} on time, stored {self.stored.get(start)}"
                 for start, n in sorted(self.expected.items()) if self.stored.get(start) != n]
        lines += [f"window {start}: stored {n}, none sent" for start, n in sorted(self.stored.items())
                  if start not in self.expected]
        lines.append(f"read {self.read} = windowed {sum(self.stored.values())} + late {len(self.late_stored)} + "
                     f"rejected {self.rejected}? late sent {len(self.late_sent)}, "
                     f"wrongly late {len(self.wrongly_late)}")
        return "\n".join(lines)


def verdict(stream: LiveStream, store_url: str) -> Verdict:
    """Compare the store with the stream (after :meth:`LiveStream.stop`)."""
    letters = stored_dead_letters(store_url, stream.topic)
    return Verdict(expected=stream.expected_windows(), stored=stored_windows(store_url),
                   late_sent=stream.late_keys(),
                   late_stored={(p, o) for p, o, reason in letters if reason == LATE_REASON},
                   read=sum(1 for r in stream.sent if r.kind != "sentinel"),
                   rejected=sum(1 for _, _, reason in letters if reason != LATE_REASON))


def wait_for_verdict(stream: LiveStream, store_url: str, job: LiveJob, timeout_s: float) -> Verdict:
    """Wait until the job stored every window the stream sent and every late or rejected record, or time out;
    the verdict then (a job that died fails at once, with its output)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not job.jobmanager and not job.alive():
            raise AssertionError(f"the job ended (exit {job.process.returncode}):\n{job.log_tail()}")
        try:
            found = verdict(stream, store_url)
        except SQLAlchemyError:
            found = None
        if found is not None and found.exact:
            return found
        if found is not None and set(found.stored) >= set(found.expected) and \
                len(found.late_stored) + found.rejected >= len(found.late_sent) + _malformed(stream):
            time.sleep(3)  # every window and dead letter is in: let a write in flight land, then judge
            return verdict(stream, store_url)
        if time.monotonic() > deadline:
            if found is None:
                raise AssertionError(f"the store never answered; the job's output ends:\n{job.log_tail()}")
            return found
        time.sleep(2)


def _malformed(stream: LiveStream) -> int:
    return sum(1 for r in stream.sent if r.kind == "malformed")


def wait_until(condition, timeout_s: float, what: str, job: LiveJob | None = None, step_s: float = 1.0) -> None:
    """Poll ``condition`` until true; fail naming ``what`` (with the job's output) on time-out or if the job died."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if job is not None and not job.alive():  # on a cluster too: `flink run` waits for the job attached
            raise AssertionError(f"the job ended before {what}:\n{job.log_tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}:\n"
                                 f"{job.log_tail() if job else ''}")
        time.sleep(step_s)


def unique_topic(prefix: str = "faults") -> str:
    """A fresh topic name."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
