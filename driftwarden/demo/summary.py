"""The end of the demo: the summary table, the incident's HTML replay report, the replay command."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from driftwarden.core.console import data_table
from driftwarden.demo.outcome import MAX_CATCH_OFFSET, DemoOutcome

if TYPE_CHECKING:
    from driftwarden.demo.runner import DemoRun

FALSE_ALARM_NOTE = ("False alarm = a moderate/major drift verdict no change explains: on a feature outside the "
                    "injected ones, before its change, or, for a change inside one segment, in the global view or "
                    "another segment of that feature. A 'minor' verdict (significant but small) is not an alarm and is never routed: the "
                    "gate fires on ~1% of drift-free feature-windows by design and the deep test runs on that same "
                    "window. Alerts are routed from 'moderate' up.")


def print_summary(console: Console, outcome: DemoOutcome) -> None:
    """Which change was caught and when, false alarms, alerts in the drift-free period, webhooks."""
    table = data_table("change", "feature [segment]", "starts", "caught in", "severity", f"within {MAX_CATCH_OFFSET + 1}",
                       title=f"injected changes ({outcome.windows_closed}/{outcome.windows_expected} windows judged)")
    for c in outcome.catches:
        where = "-" if c.offset is None else f"w{c.start_window + c.offset} (+{c.offset})"
        table.add_row(c.kind, Text(c.feature + (f" [{c.segment}]" if c.segment else "")), f"w{c.start_window}",
                      where, c.severity, "[green]yes[/]" if c.in_time else "[red]no[/]")
    console.print(table)
    print_segment_drifts(console, outcome)
    alarms = ", ".join(f"{v.label} {v.severity} (window {v.window})" for v in outcome.false_alarms) or "none"
    console.print(f"false alarms: {escape(alarms)}; minor verdicts on undrifted features: {outcome.minor_elsewhere}")
    console.print(f"alerts during the drift-free period: {len(outcome.early_alerts) or 'none'}")
    console.print(f"webhooks: {outcome.webhooks} delivered, {outcome.verified} POSTs signature-verified, "
                  f"{outcome.rejected} rejected (of {outcome.received} received)")
    console.print(FALSE_ALARM_NOTE, style="dim")
    if outcome.interrupted:
        console.print(f"[bold yellow]interrupted[/]: the results above cover {outcome.windows_closed} of "
                      f"{outcome.windows_expected} windows")
    elif outcome.passed:
        console.print("[bold green]demo check passed[/]: every change caught in time, no false alarm")
    else:
        console.print("[bold red]demo check failed[/]:\n  " + escape("\n  ".join(outcome.problems)))


def print_segment_drifts(console: Console, outcome: DemoOutcome) -> None:
    """The (feature, segment) pairs that drifted: those the global view missed in full, the rest per feature."""
    local = [d for d in outcome.segment_drifts if d.alone]
    pairs = ", ".join(f"({d.feature}, {d.segment}) from w{d.first_window}, {d.alone} of {d.windows} window(s) with "
                      f"the global view quiet" for d in local) or "none"
    console.print(f"segment drifts the global view did not show: {escape(pairs)}", soft_wrap=True)
    along: dict[str, list[str]] = {}
    for d in outcome.segment_drifts:
        if not d.alone:
            along.setdefault(d.feature, []).append(d.segment)
    rest = "; ".join(f"{f} in {len(s)} segment(s)" for f, s in along.items()) or "none"
    console.print(f"segment drifts alongside a global drift of the same feature: {escape(rest)}", soft_wrap=True)


def replay_report(console: Console, args: list[str], html: Path) -> Path | None:
    """Write the incident's HTML replay report by calling replay's own command; None when unavailable."""
    try:
        from driftwarden.replay.cli import replay_command
    except ImportError as exc:
        console.print(f"[yellow]replay report unavailable ({escape(str(exc))}); run the command below once replay/ is installed[/]")
        return None
    import typer

    opts = dict(zip(args[2::2], args[3::2]))
    try:
        replay_command(topic=opts["--topic"], start=opts["--from"], end=opts["--to"], input_file=None,
                       reference=Path(opts["--reference"]), config=Path(opts["--config"]), model=None,
                       features=None, bootstrap_servers=opts["--bootstrap-servers"], report_json=html.with_suffix(".json"),
                       report_html=html, to_topic=None, pace="max", store_url=None, progress=False)
    except typer.Exit:
        console.print("[yellow]the replay report could not be written (see above)[/]")
        return None
    return html if html.exists() else None


def print_replay(console: Console, report: Path | None, args: list[str]) -> None:
    """Where the incident report is, and the command that replays the incident."""
    console.print(f"incident replay report: {escape(str(report or 'unavailable'))}")
    console.print(f"replay the incident: [bold]{escape(shlex.join(args))}[/]", highlight=False, soft_wrap=True)


def write_summary(run: "DemoRun", outcome: DemoOutcome, report: Path | None) -> Path:
    """Write summary.json (what the end-to-end test reads) into the run folder."""
    webhooks = run.receiver.webhooks if run.receiver else []
    doc = {"run_id": run.run_id, "topic": run.topic, "model": run.gen.model, "store_url": run.store_url,
           "windows": run.schedule.windows, "events_per_window": run.gen.per_window,
           "clean_windows": run.schedule.clean_windows, "window0_ms": run.gen.base_ms,
           "window_ms": run.gen.window_ms, "route": run.route,
           "webhook_alerts": [{"webhook_id": w.webhook_id, "status": a.get("status"),
                               "window_start": a.get("window", {}).get("start"),
                               "feature": a.get("feature"), "segment": a.get("segment")}
                              for w in webhooks for a in w.alerts],
           "report_html": str(report) if report else None, "replay_command": shlex.join(run.replay_args()),
           "timings": run.timings, "elapsed_s": time.monotonic() - run.created,
           "job_pgid": run.job.process.pid if run.job and run.job.process else None,
           **outcome.to_dict()}
    run.dir.mkdir(parents=True, exist_ok=True)
    path = run.dir / "summary.json"
    path.write_text(json.dumps(doc, indent=2, default=str))
    return path
