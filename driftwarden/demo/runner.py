"""Orchestration of ``driftwarden demo``: set up, run, watch, shut down, judge, report.

Parts and where they run: the webhook receiver, the alert delivery worker and the producer are
threads of the demo process; the streaming job is a child process in its own session. Whatever
happens (the end of the run, Ctrl-C, SIGTERM, an error), :meth:`DemoRun.shutdown` stops all of
them and kills the job's process group, so nothing is left running.
"""

from __future__ import annotations

import base64
import math
import os
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.live import Live
from sqlalchemy import and_, func, select

from driftwarden.demo import RUN_DIR
from driftwarden.demo import live as view
from driftwarden.demo.outcome import DemoOutcome, closed_windows, evaluate, verdicts
from driftwarden.demo.producer import PacedProducer
from driftwarden.demo.receiver import DemoReceiver, Webhook
from driftwarden.demo.scenario import Schedule, StreamGenerator, make_schedule
from driftwarden.demo.stack import (JobProcess, build_reference, check_kafka, create_topic, free_port, kafka_source,
                                    monitor_config, register_scrape_target, stop_signals_interrupt, write_config)
from driftwarden.core.errors import ConfigError, ServiceError
from driftwarden.jobs.cli import password_to_pgpass
from driftwarden.schemas.config import KafkaSecurity

SECRET_ENV = "DRIFTWARDEN_WEBHOOK_SECRET"
MODEL = "credit-risk"
MIN_PER_WINDOW = 2500  # its 10% segment (country=DE) needs >= 200 events a window to be judged
PROMETHEUS_TARGETS = RUN_DIR / "prometheus" / "targets"


@dataclass(frozen=True)
class DemoOptions:
    """The knobs of one demo run (see ``driftwarden demo --help``)."""

    bootstrap: str
    store_url: str | None
    duration_s: float
    speed: float
    rate: float
    window_s: int
    partitions: int
    reference_windows: int
    live: bool
    run_root: Path
    settle_timeout_s: float
    metrics: bool = True
    security: KafkaSecurity | None = None  # --kafka-security: how every client connects (docs/kafka-security.md)


def new_run_id() -> str:
    """A sortable, unique id for one run (names its folder, topic and webhook route)."""
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def ensure_secret() -> None:
    """Use $DRIFTWARDEN_WEBHOOK_SECRET, or make one for this process and its children (never printed)."""
    if not os.environ.get(SECRET_ENV):
        os.environ[SECRET_ENV] = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def plan(opts: DemoOptions, now_ms: int, model: str = MODEL) -> tuple[Schedule, StreamGenerator]:
    """The schedule and generator of a run; raise ConfigError when the options cannot make a fair demo."""
    window_ms = opts.window_s * 1000
    windows = int(opts.duration_s * opts.speed // opts.window_s)
    try:
        schedule = make_schedule(windows)
    except ValueError as exc:
        raise ConfigError(f"{exc} (windows = duration x speed / window = {opts.duration_s:g} x {opts.speed:g} "
                          f"/ {opts.window_s})") from None
    per_window = round(opts.rate * opts.window_s / opts.speed)
    if per_window < MIN_PER_WINDOW:
        raise ConfigError(f"only {per_window} events per window (rate x window / speed): the demo needs at least "
                          f"{MIN_PER_WINDOW}; raise --rate or lower --speed")
    base_ms = (now_ms - windows * window_ms) // window_ms * window_ms  # in the past: brokers refuse far-future times
    return schedule, StreamGenerator(model, base_ms, window_ms, per_window, schedule)


class DemoRun:
    """One run of the demo; use :meth:`run`."""

    def __init__(self, opts: DemoOptions, console: Console) -> None:
        self.opts, self.console = opts, console
        self.run_id = new_run_id()
        self.dir = (opts.run_root / self.run_id).resolve()
        # several runs in one shared store must never mix their windows or alert states
        model = MODEL if opts.store_url is None else f"{MODEL}-{self.run_id}"
        self.schedule, self.gen = plan(opts, int(time.time() * 1000), model)
        # a password moves to the private .run/pgpass: the job's command line and summary.json never carry it
        self.store_url = password_to_pgpass(opts.store_url) if opts.store_url else f"sqlite:///{self.dir / 'results.db'}"
        self.topic = f"driftwarden-demo-{self.run_id}"
        self.kafka = kafka_source(opts.bootstrap, opts.security)
        self.route = f"demo-{self.run_id}"
        self.config_path = self.dir / "monitor.yaml"
        self.scrape_file: Path | None = None
        self.webhook_lines: list[str] = []
        self.receiver: DemoReceiver | None = None
        self.job: JobProcess | None = None
        self.producer: PacedProducer | None = None
        self._threads: list[threading.Thread] = []
        self._stop_worker = threading.Event()
        self._errors: list[BaseException] = []
        self.started = time.monotonic()
        self.interrupted = False
        self._receiver_stopped = False
        self.live = opts.live and console.is_terminal  # a pipe or a log file gets one line per window
        self.timings: dict[str, float] = {}
        self.engine = None
        self.created = time.monotonic()

    # -- set up ---------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Check Kafka, announce the schedule, write config and reference, start the receiver."""
        check_kafka(self.kafka)
        self.dir.mkdir(parents=True, exist_ok=True)
        ensure_secret()
        base = datetime.fromtimestamp(self.gen.base_ms / 1000, tz=timezone.utc).isoformat()
        self.console.print(view.schedule_table(self.schedule, base, self.opts.window_s, self.opts.speed))
        self.console.print(f"{self.gen.per_window} events per window; a change is 'caught' when its feature (in its "
                           f"segment, for a change inside one) gets a moderate/major verdict within 2 windows of its "
                           f"start. Run folder: {self.dir}", soft_wrap=True)
        self.receiver = DemoReceiver([os.environ[SECRET_ENV]], on_webhook=self._on_webhook,
                                     on_reject=lambda why: self.webhook_lines.append(f"REJECTED: {why}")).start()
        create_topic(self.kafka, self.topic, self.opts.partitions)
        route = {"name": self.route, "url": self.receiver.url, "format": "native", "secret_env": SECRET_ENV,
                 "allow_private": True, "timeout_s": 5}
        reference = {"mode": "file", "path": str(self.dir / "reference.dwref")}
        self.config_path = write_config(self.dir / "monitor.yaml", monitor_config(
            self.topic, self.opts.bootstrap, self.gen.model, self.opts.window_s, reference, route,
            security=self.opts.security))
        from driftwarden.core.store import make_engine

        self.engine = make_engine(self.store_url)  # tables made here, once: the job and worker would race
        t0 = time.monotonic()
        used = build_reference(self.dir / "reference.dwref", self.config_path, self.gen.model, self.gen.base_ms,
                               self.gen.window_ms, self.gen.per_window, self.opts.reference_windows)
        self.console.print(f"reference: {used:,} drift-free training events in {self.opts.reference_windows} windows "
                           f"({time.monotonic() - t0:.1f} s) -> {self.dir / 'reference.dwref'}", soft_wrap=True)

    def _on_webhook(self, webhook: Webhook) -> None:
        self.webhook_lines.extend(webhook.describe().splitlines())
        if not self.live:
            view.print_line(self.console, f"webhook {webhook.webhook_id} (signature verified): {webhook.describe()}")

    def start(self) -> None:
        """Start the job, the delivery worker and the producer."""
        port = free_port() if self.opts.metrics else 0
        self.job = JobProcess(self.config_path, self.dir / "reference.dwref", self.store_url,
                              self.dir / "checkpoints", self.dir / "job.log", self.run_id, port)
        self.job.start()
        self.console.print(f"streaming job started on the embedded MiniCluster (pid {self.job.process.pid}); "
                           f"log: {self.job.log_path}", soft_wrap=True)
        if port:
            self.scrape_file = register_scrape_target(PROMETHEUS_TARGETS, f"driftwarden-demo-{self.run_id}", port)
            scraped = " (scraped by the local Prometheus)" if self.scrape_file else ""
            self.console.print(f"job metrics: http://127.0.0.1:{port}/metrics{scraped}")
        self._spawn("delivery-worker", self._deliver)
        tail = math.ceil(self.gen.per_window * 2500 / self.gen.window_ms)  # moves the watermark past the last window
        self.producer = PacedProducer(self.kafka, self.topic, self.gen, self.opts.rate,
                                      self.schedule.windows * self.gen.per_window + tail)
        self._spawn("producer", self.producer.run)
        self.started = time.monotonic()
        self.timings["prepare_s"] = self.started - self.created

    def _spawn(self, name: str, target) -> None:
        def guarded() -> None:
            try:
                target()
            except BaseException as exc:  # noqa: BLE001 - reported by the watch loop
                self._errors.append(exc)

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _deliver(self) -> None:
        from driftwarden.alerting.rules import load_rules
        from driftwarden.alerting.worker import Dispatcher, build_sinks, make_client
        from driftwarden.core.store import make_engine

        rules = load_rules(self.config_path)
        engine = make_engine(self.store_url)
        with make_client() as client:
            Dispatcher(engine, rules, build_sinks(rules, client)).run_forever(self._stop_worker, 0.5)
        engine.dispose()

    # -- watch ----------------------------------------------------------------------------------
    def watch(self) -> None:
        """Show progress until every window is judged (or the settle timeout after the last event)."""
        if self.live:
            with Live(console=self.console, refresh_per_second=2, transient=False) as live:
                self._loop(lambda snap: live.update(view.render(snap, self.schedule)))
        else:
            printed: set[int] = set()
            self._loop(lambda snap: self._print_windows(snap, printed))

    def _loop(self, show) -> None:
        finished_at = None
        while True:
            snap = self.snapshot()
            show(snap)
            if snap.windows_closed and "first_window_s" not in self.timings:
                self.timings["first_window_s"] = snap.elapsed_s
            self._raise_failures()
            if snap.windows_closed >= self.schedule.windows:
                return
            if self.producer.done:
                finished_at = finished_at or time.monotonic()
                if time.monotonic() - finished_at > self.opts.settle_timeout_s:
                    self.console.print(f"[yellow]the job judged {snap.windows_closed}/{self.schedule.windows} "
                                       f"windows within {self.opts.settle_timeout_s:g} s of the last event[/]")
                    return
            time.sleep(1.0)

    def _raise_failures(self) -> None:
        if self._errors:
            raise self._errors[0]
        if self.producer.error:
            raise ServiceError(f"{self.producer.error}: is Kafka up? (`scripts/services.sh start kafka`)")
        if not self.job.alive():
            raise ServiceError(f"the streaming job exited (code {self.job.process.returncode}); its log "
                               f"{self.job.log_path} ends with (stack frames left out):\n{self.job.log_tail()}")

    def snapshot(self) -> view.Snapshot:
        """Current counters and verdicts, read from the producer, the store and the receiver."""
        rows = verdicts(self.engine, self.gen.model, self.gen.base_ms, self.gen.window_ms, self.schedule.windows)
        closed = closed_windows(self.engine, self.gen.model, self.gen.base_ms, self.gen.window_ms,
                                self.schedule.windows)
        phase = ("waiting for the job's first window (MiniCluster start-up; Kafka keeps the events)" if not closed
                 else "running" if not self.producer.done else "judging the last windows")
        return view.Snapshot(phase, time.monotonic() - self.started, self.producer.sent,
                             self.producer.events_per_second(), len(closed), rows, self.receiver.verified,
                             self.receiver.rejected, list(self.webhook_lines))

    def _print_windows(self, snap: view.Snapshot, printed: set[int]) -> None:
        for window in sorted({v.window for v in snap.verdicts} - printed):
            printed.add(window)
            line = view.window_line(window, snap.verdicts, self.schedule)
            view.print_line(self.console, f"[{snap.elapsed_s:4.0f}s] {line}")

    def settle_alerts(self, timeout_s: float = 20.0) -> None:
        """Wait until the outbox of this run's route is sealed and delivered (or ``timeout_s``)."""
        from driftwarden.schemas.alert_tables import alert_deliveries, alert_outbox

        deadline = time.monotonic() + timeout_s
        o, d = alert_outbox.c, alert_deliveries.c
        while time.monotonic() < deadline:
            with self.engine.connect() as conn:
                waiting = conn.execute(select(func.count()).select_from(alert_outbox).where(
                    and_(o.route == self.route, o.delivery_id.is_(None)))).scalar_one()
                pending = conn.execute(select(func.count()).select_from(alert_deliveries).where(
                    and_(d.route == self.route, d.status == "pending"))).scalar_one()
            if not waiting and not pending:
                return
            time.sleep(0.5)
        self.console.print(f"[yellow]alerts still queued after {timeout_s:g} s[/]")

    # -- tear down and report -------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop producer, job (its whole process group), worker and receiver; idempotent."""
        if self.producer is not None:
            self.producer.stop()
        if self.job is not None:
            self.job.stop()
        if self.scrape_file is not None:
            self.scrape_file.unlink(missing_ok=True)
        self._stop_worker.set()
        for thread in self._threads:
            thread.join(timeout=35)
        if self.receiver is not None and not self._receiver_stopped:
            self.receiver.stop()
            self._receiver_stopped = True

    def judge(self) -> DemoOutcome:
        """Evaluate the run from the store and the receiver."""
        from driftwarden.core.store import make_engine

        engine = self.engine or make_engine(self.store_url)
        rows = verdicts(engine, self.gen.model, self.gen.base_ms, self.gen.window_ms, self.schedule.windows)
        closed = closed_windows(engine, self.gen.model, self.gen.base_ms, self.gen.window_ms, self.schedule.windows)
        r = self.receiver
        outcome = evaluate(self.schedule, rows, closed, list(r.webhooks) if r else [], self.gen.base_ms,
                           self.gen.window_ms, r.received if r else 0, r.verified if r else 0, r.rejected if r else 0)
        if self.interrupted:
            outcome.interrupted = True
            outcome.problems.append("interrupted before the end")
        return outcome

    def incident_range(self) -> tuple[str, str]:
        """RFC 3339 bounds of the incident: one window before the first change to two after the last."""
        from driftwarden.schemas.events import rfc3339

        first = max(self.schedule.changes[0].start_window - 1, 0)
        last = min(self.schedule.changes[-1].start_window + 2, self.schedule.windows)
        return rfc3339(self.gen.window_start_ms(first)), rfc3339(self.gen.window_start_ms(last))

    def replay_args(self) -> list[str]:
        """The `driftwarden replay` command line of the incident."""
        start, end = self.incident_range()
        return ["driftwarden", "replay", "--topic", self.topic, "--from", start, "--to", end,
                "--bootstrap-servers", self.opts.bootstrap, "--reference", str(self.dir / "reference.dwref"),
                "--config", str(self.config_path), "--report-html", str(self.dir / "incident.html")]


def run_demo(opts: DemoOptions, console: Console) -> tuple[DemoRun, DemoOutcome]:
    """Run the whole demo; on Ctrl-C or SIGTERM shut everything down and judge what was seen."""
    demo = DemoRun(opts, console)
    with stop_signals_interrupt():
        try:
            demo.prepare()
            demo.start()
            demo.watch()
            demo.timings["windows_s"] = time.monotonic() - demo.started
            demo.settle_alerts()
            demo.timings["alerts_settled_s"] = time.monotonic() - demo.started
        except KeyboardInterrupt:
            demo.interrupted = True
            console.print("[yellow]interrupted: shutting everything down[/]")
        finally:
            demo.shutdown()
    return demo, demo.judge()
