"""``driftwarden demo`` (the whole product on the local stack), ``demo produce`` and ``demo receiver``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from driftwarden.core.console import command_app
from driftwarden.core.endpoints import (BOOTSTRAP_SERVERS_ENV, DEFAULT_BOOTSTRAP_SERVERS,
                                        bootstrap_servers as resolve_servers)
from driftwarden.core.errors import EXIT_FINDING, ConfigError
from driftwarden.demo import RUN_DIR

SERVERS_DEFAULT = f"${BOOTSTRAP_SERVERS_ENV}, else {DEFAULT_BOOTSTRAP_SERVERS} (make demo: the local stack's)"
SECURITY_HELP = ("YAML file of a monitor config's source.security section: how the demo's clients and job connect "
                 "(SASL, TLS, mutual TLS; docs/kafka-security.md).")

app = command_app("The live demo: a realistic stream with injected drift, caught by the real job, alerted by "
                  "signed webhooks. Plain `driftwarden demo` runs it (Kafka must be up: "
                  "`scripts/services.sh start kafka`).", invoke_without_command=True, no_args_is_help=False)


@app.callback()
def demo(
    ctx: typer.Context,
    bootstrap_servers: Optional[str] = typer.Option(None, help="Kafka bootstrap servers.",
                                                    show_default=SERVERS_DEFAULT),
    store_url: Optional[str] = typer.Option(None, help="Results store URL, e.g. postgresql://user@host/db "
                                            "(a password in it moves to .run/pgpass).",
                                            show_default="SQLite in the run folder"),
    duration: float = typer.Option(120.0, min=1, help="Seconds of producing (wall clock).", show_default=True),
    speed: float = typer.Option(5.0, min=0.1, help="Event-time clock speed: event seconds per wall second.",
                                show_default=True),
    rate: float = typer.Option(2000.0, min=1, help="Events per wall second.", show_default=True),
    window: int = typer.Option(10, min=1, help="Window size in event-time seconds.", show_default=True),
    partitions: int = typer.Option(3, min=1, help="Partitions of the demo topic.", show_default=True),
    reference_windows: int = typer.Option(20, min=5, help="Windows of drift-free training data for the reference.",
                                          show_default=True),
    live: bool = typer.Option(True, "--live/--no-live", help="Rich live view, or one line per window.",
                              show_default=True),
    check: bool = typer.Option(False, "--check/--no-check", help="Exit 3 unless every change is caught within two "
                               "windows with no false alarm and every webhook verified.", show_default=True),
    run_dir: Path = typer.Option(RUN_DIR / "demo", help="Each run writes a folder here.",
                                 show_default="demo in the run folder: $DRIFTWARDEN_RUN_DIR, else .run in a checkout, else ~/.local/state/driftwarden"),
    settle_timeout: float = typer.Option(120.0, help="Seconds to wait, after the last event, for the job to judge "
                                         "the last windows.", show_default=True),
    metrics: bool = typer.Option(True, "--metrics/--no-metrics", help="Serve the job's Prometheus /metrics on a "
                                 "free port (and register it with the local Prometheus when it runs).",
                                 show_default=True),
    kafka_security: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help=SECURITY_HELP,
                                                  show_default="none: PLAINTEXT"),
) -> None:
    """Run the demo: reference, streaming job, producer with injected drift, webhooks, summary, replay report."""
    if ctx.invoked_subcommand is not None:
        return
    from driftwarden.demo.runner import DemoOptions, run_demo
    from driftwarden.demo.summary import print_replay, print_summary, replay_report, write_summary

    console = Console()
    opts = DemoOptions(resolve_servers(bootstrap_servers), store_url, duration, speed, rate, window, partitions,
                       reference_windows, live, run_dir, settle_timeout, metrics, _security(kafka_security))
    run, outcome = run_demo(opts, console)
    print_summary(console, outcome)
    args = run.replay_args()
    t0 = time.monotonic()
    report = None
    try:
        if outcome.windows_closed:
            report = replay_report(console, args, run.dir / "incident.html")
    except KeyboardInterrupt:
        pass
    run.timings["replay_s"] = time.monotonic() - t0
    print_replay(console, report, args)
    console.print(f"summary: {write_summary(run, outcome, report)}", soft_wrap=True, markup=False)
    if run.interrupted:
        raise typer.Exit(130)
    if check and not outcome.passed:
        raise typer.Exit(EXIT_FINDING)


@app.command()
def produce(
    bootstrap_servers: Optional[str] = typer.Option(None, help="Kafka bootstrap servers.",
                                                    show_default=SERVERS_DEFAULT),
    topic: str = typer.Option("features", help="Topic to publish to (created if missing).", show_default=True),
    rate: float = typer.Option(2000.0, min=1, help="Events per wall second.", show_default=True),
    speed: float = typer.Option(1.0, min=0.1, help="Event seconds per wall second (1: real time; above 1 event "
                                "time runs ahead of the clock, and brokers refuse records more than "
                                "log.message.timestamp.after.max.ms ahead).", show_default=True),
    window: int = typer.Option(10, min=1, help="Window size in event-time seconds (match the monitor config).",
                               show_default=True),
    cycle: int = typer.Option(30, min=8, help="Windows per drift cycle: drift-free first, then the six changes; "
                              "then it starts again.", show_default=True),
    partitions: int = typer.Option(3, min=1, help="Partitions if the topic is created.", show_default=True),
    model: str = typer.Option("credit-risk", help="Model name of the events.", show_default=True),
    kafka_security: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help=SECURITY_HELP,
                                                  show_default="none: PLAINTEXT"),
) -> None:
    """Publish the demo's realistic stream to a topic, forever, with drift injected every cycle.

    Ctrl-C or SIGTERM stops it once what it sent is in the topic, and it says how many events that was.
    """
    from driftwarden.demo.producer import PacedProducer
    from driftwarden.demo.scenario import StreamGenerator, make_schedule
    from driftwarden.demo.stack import check_kafka, create_topic, kafka_source, stop_signals_interrupt

    console = Console()
    bootstrap = resolve_servers(bootstrap_servers)
    source = kafka_source(bootstrap, _security(kafka_security))
    check_kafka(source)
    create_topic(source, topic, partitions)
    window_ms = window * 1000
    base_ms = -(-int(time.time() * 1000) // window_ms) * window_ms
    schedule = make_schedule(cycle)
    per_window = max(1, round(rate * window / speed))
    gen = StreamGenerator(model, base_ms, window_ms, per_window, schedule, cyclic=True)
    producer = PacedProducer(source, topic, gen, rate)
    with stop_signals_interrupt():  # before the first line: a signal sent after it is never ignored
        console.print(f"publishing {model} to {topic} on {bootstrap}: {rate:g} events/s, {per_window} per "
                      f"{window} s window; cycle of {cycle} windows: " + "; ".join(
                          f"{c.kind} on {c.feature}{f' [{c.segment}]' if c.segment else ''} from window "
                          f"{c.start_window}" for c in schedule.changes), markup=False)
        try:
            producer.run()
        except KeyboardInterrupt:
            producer.stop()
    console.print(f"sent {producer.sent:,} events")


def _security(path: Optional[Path]):
    """The ``--kafka-security`` file's section, validated (None without one)."""
    from driftwarden.schemas.config import load_security

    return load_security(path) if path else None


@app.command()
def receiver(
    host: str = typer.Option("127.0.0.1", help="Address to listen on.", show_default=True),
    port: int = typer.Option(8080, help="Port to listen on.", show_default=True),
    secret_env: str = typer.Option("DRIFTWARDEN_WEBHOOK_SECRET", help="Environment variable holding the signing "
                                   "secret(s), space separated.", show_default=True),
    fail_for: float = typer.Option(0.0, help="Answer 503 to every POST for this many seconds after start.",
                                   show_default=True),
    record: Optional[Path] = typer.Option(None, help="Append each verified webhook to this JSON Lines file.",
                                          show_default="none"),
) -> None:
    """Receive webhooks, verify their signatures, print them.

    Ctrl-C or SIGTERM stops it, and it says what it received.
    """
    from driftwarden.demo.receiver import DemoReceiver
    from driftwarden.demo.stack import stop_signals_interrupt

    secrets = os.environ.get(secret_env, "").split()
    if not secrets:
        raise ConfigError(f"set {secret_env} to the webhook signing secret the alert worker uses")
    console = Console()
    server = DemoReceiver(secrets, host, port, fail_for_s=fail_for, record=record,
                          on_webhook=lambda w: console.print("[green]verified[/] " + escape(f"{w.webhook_id}\n{w.describe()}"),
                                                             highlight=False),
                          on_reject=lambda why: console.print(f"[red]rejected[/]: {escape(why)}"))
    with stop_signals_interrupt():  # before the first line: a signal sent after it is never ignored
        console.print(f"listening on {server.url}")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    console.print(f"{server.verified} verified ({server.duplicates} redeliveries), {server.rejected} rejected")
