"""``driftwarden replay``: re-read a topic range (or an archive), re-run the pipeline, report.

Exit codes: 0 done (whether or not something drifted), 1 a driftwarden error (bad range, missing
topic, unreadable input ...) printed in red without a traceback, 2 a usage error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from driftwarden.core.console import data_table
from driftwarden.core.endpoints import (BOOTSTRAP_SERVERS_HELP_DEFAULT, bootstrap_servers as resolve_servers,
                                        store_url as resolve_store_url)
from driftwarden.core.errors import ConfigError, DriftwardenError


def replay_command(
    topic: Annotated[Optional[str], typer.Option(help="Topic to re-read (with --from and --to).", show_default="none")] = None,
    start: Annotated[Optional[str], typer.Option("--from", help="Start of the range: RFC 3339 (2026-01-01T10:00:00Z) or epoch ms; Kafka record timestamps decide.", show_default="none")] = None,
    end: Annotated[Optional[str], typer.Option("--to", help="End of the range (exclusive), same forms as --from.", show_default="none")] = None,
    input_file: Annotated[Optional[Path], typer.Option("--input", help="Archived events instead of a topic: .jsonl, .jsonl.gz or .parquet.", show_default="none")] = None,
    reference: Annotated[Optional[Path], typer.Option(help="Reference: a file from `driftwarden reference build`, or raw reference events.", show_default="none: the config's reference")] = None,
    config: Annotated[Optional[Path], typer.Option(help="Monitor config YAML.", show_default="none: kinds from the reference, 60s windows, default thresholds")] = None,
    model: Annotated[Optional[list[str]], typer.Option("--model", help="Only this model (repeat for several).", show_default="all models")] = None,
    features: Annotated[Optional[str], typer.Option(help="Only these features, comma-separated (prediction: the monitored prediction).", show_default="all features")] = None,
    bootstrap_servers: Annotated[Optional[str], typer.Option(help="Kafka bootstrap servers (the config's source.security still applies).", show_default=BOOTSTRAP_SERVERS_HELP_DEFAULT)] = None,
    report_json: Annotated[Optional[Path], typer.Option(help="Write the JSON report here.", show_default="none")] = None,
    report_html: Annotated[Optional[Path], typer.Option(help="Write the self-contained HTML report here.", show_default="none")] = None,
    to_topic: Annotated[Optional[str], typer.Option(help="Re-publish the range to this (existing) topic, event times kept.", show_default="none")] = None,
    pace: Annotated[str, typer.Option(help="Re-publish pace: original, max, or xN (N times faster).", show_default=True)] = "max",
    store_url: Annotated[Optional[str], typer.Option(help="Also write results to this store URL (idempotent); replay never writes to a store unless told here.", show_default="none: read-only")] = None,
    workers: Annotated[Optional[int], typer.Option(min=0, help="Processes that parse and validate records (0: in the replay's own process).", show_default="auto: one per core from about 200,000 records, else 0")] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.", show_default=True)] = True,
) -> None:
    """Re-read a topic range or an archive, re-run the drift pipeline, and write a report."""
    console = Console(stderr=True)
    try:
        _replay(console, topic, start, end, input_file, reference, config, model, features, bootstrap_servers,
                report_json, report_html, to_topic, pace, store_url and resolve_store_url(store_url), workers, progress)
    except DriftwardenError as exc:
        console.print(f"[bold red]{type(exc).__name__}[/]: {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def _replay(console, topic, start, end, input_file, reference, config, model, features, bootstrap,
            report_json, report_html, to_topic, pace, store, workers, progress) -> None:
    from driftwarden.replay.progress import ReplayProgress
    from driftwarden.replay.publish import parse_pace
    from driftwarden.replay.setup import load_setup

    range_ms = _check_source(topic, start, end, input_file)
    speedup = parse_pace(pace)
    feature_list = [f.strip() for f in features.split(",") if f.strip()] if features else None
    setup = load_setup(config, reference, model, feature_list)
    source = setup.config.source  # its security applies to --bootstrap-servers too
    kafka = source.model_copy(update={"bootstrap_servers": resolve_servers(bootstrap, source.bootstrap_servers)})
    sink = _republisher(kafka, to_topic, speedup) if to_topic else None
    with ReplayProgress(enabled=progress, console=console) as bar:
        outcome, source = _run(topic, range_ms, input_file, kafka, setup, bar, sink, workers)
    if sink is not None:
        sink.close()
        console.print(f"re-published {sink.sent} records to {escape(to_topic)}")
    _outputs(console, outcome, setup, source, report_json, report_html, store)


def _check_source(topic, start, end, input_file) -> tuple[int, int] | None:
    from driftwarden.replay.times import check_range, parse_time

    if (topic is None) == (input_file is None):
        raise ConfigError("give exactly one source: --topic T --from TIME --to TIME, or --input FILE")
    if input_file is not None:
        if start or end:
            raise ConfigError("--from/--to select a topic range; with --input the whole file is replayed")
        return None
    if not start or not end:
        raise ConfigError("--topic needs both --from and --to (RFC 3339, e.g. 2026-01-01T10:00:00Z)")
    start_ms, end_ms = parse_time(start, "--from"), parse_time(end, "--to")
    check_range(start_ms, end_ms)
    return start_ms, end_ms


def _republisher(kafka, to_topic: str, speedup: float):
    from driftwarden.replay.publish import Republisher, target_partitions

    return Republisher(kafka, to_topic, speedup, target_partitions(kafka, to_topic))


def _run(topic, range_ms, input_file, kafka, setup, bar, sink, workers):
    from driftwarden.replay.run import replay_file, replay_topic

    if input_file is not None:
        return replay_file(input_file, setup, bar, sink, workers)
    return replay_topic(kafka, topic, range_ms[0], range_ms[1], setup, bar, sink, workers)


def _outputs(console, outcome, setup, source, report_json, report_html, store) -> None:
    from driftwarden.replay.report import build_report, write_report

    doc = build_report(outcome, setup, source)
    if report_json is not None:
        write_report(doc, report_json)
        console.print(f"JSON report: {escape(str(report_json))}")
    if report_html is not None:
        from driftwarden.replay.report_html import write_html

        write_html(doc, outcome, report_html)
        console.print(f"HTML report: {escape(str(report_html))}")
    if store is not None:
        from driftwarden.replay.store import store_outcome

        console.print(f"stored {store_outcome(store, outcome)} windows")
    _summary(console, doc)


def _summary(console: Console, doc: dict) -> None:
    from driftwarden.schemas.alert_tables import segment_key

    counts = doc["counts"]
    console.print("records: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f"; windows {len(doc['windows'])}")
    errors = [(w, f) for w in doc["windows"] for f in w["features"] if f.get("error")]
    if errors:
        w, f = errors[0]
        console.print(Text(f"{len(errors)} feature(s) not judged, judging raised (first: feature {f['name']!r} of model "
                           f"{w['model']!r}, window {w['window_start']}: {f['error']}); see the log", style="yellow"))
    if not doc["first_drift"]:
        console.print("[green]no feature drifted[/]")
        return
    table = data_table("model", "feature", "segment", "first drifted window", "severity", "drifted windows", title="drift")
    for entry in doc["first_drift"]:
        segment = segment_key(entry.get("segment")) or "(all)"
        table.add_row(Text(entry["model"]), Text(entry["feature"]), Text(segment), entry["window_start"],
                      entry["severity"], str(entry["drifted_windows"]))  # names are data: Text, never markup
    console.print(table)
