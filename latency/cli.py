"""``driftwarden bench``: baseline vs candidate inference latency on replayed inputs.

Exit codes: 0 no regression, 3 regression (gate a release in CI), 1 a driftwarden error,
2 a usage error. torch is imported inside the command so that ``driftwarden --help`` stays fast.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.text import Text

from driftwarden.core.console import data_table
from driftwarden.core.endpoints import store_url as resolve_store_url
from driftwarden.latency.errors import BenchOptionError


def _ints(text: str) -> str:
    """Check "1,8,64" early (click reports a bad value as a usage error)."""
    from driftwarden.latency.options import parse_int_list

    try:
        if any(b < 1 for b in parse_int_list(text)) or not parse_int_list(text):
            raise BenchOptionError("batch sizes must be positive")
    except BenchOptionError as exc:
        raise typer.BadParameter(f"{exc} (example: 1,8,64)") from exc
    return text


def _dtypes(text: str) -> str:
    """Check "fp32,bf16" or "auto" early."""
    from driftwarden.latency.options import DTYPES, parse_dtypes

    bad = [d for d in parse_dtypes(text) if d not in DTYPES]
    if bad:
        raise typer.BadParameter(f"unknown {bad}: use auto or any of {','.join(DTYPES)}")
    return text


def bench_command(
    baseline: Annotated[Path, typer.Option(help="Baseline model: TorchScript archive or torch.export .pt2.", show_default=False)],
    candidate: Annotated[Path, typer.Option(help="Candidate model (same formats).", show_default=False)],
    reference_input: Annotated[Path, typer.Option(help="JSONL events of the reference window.", show_default=False)],
    incident_input: Annotated[Optional[Path], typer.Option(help="JSONL events of the incident window (enables the 2x2).", show_default="none")] = None,
    adapter: Annotated[Optional[Path], typer.Option(help="Adapter YAML (or monitor config with an adapter: section).", show_default="none: every numeric feature, sorted, as one dense input")] = None,
    batch_sizes: Annotated[str, typer.Option(help="Comma-separated batch sizes.", callback=_ints, show_default=True)] = "1,8,64",
    dtypes: Annotated[str, typer.Option(help="fp32,bf16,fp16 or auto (fp32 on CPU; plus bf16/fp16 on a GPU that has them).", callback=_dtypes, show_default=True)] = "auto",
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.", show_default=True)] = "auto",
    min_count: Annotated[int, typer.Option(help="Minimum requests per arm and cell.", show_default=True)] = 100,
    min_duration: Annotated[float, typer.Option(help="Minimum seconds per arm and cell.", show_default=True)] = 10.0,
    rounds: Annotated[int, typer.Option(help="Interleaved rounds: each gives one ratio, and the intervals are over rounds.", show_default=True)] = 20,
    warmup: Annotated[int, typer.Option(help="Untimed warm-up requests per arm.", show_default=True)] = 10,
    tolerance: Annotated[float, typer.Option(help="Ratio change that counts: regression needs CI above 1+tolerance.", show_default=True)] = 0.05,
    confidence: Annotated[float, typer.Option(help="Confidence of the run's verdict: each interval is at the Bonferroni level over every cell's p50 and p99.", show_default=True)] = 0.95,
    arrival_rate: Annotated[float, typer.Option(help="Poisson arrivals per second (0 = back to back).", show_default=True)] = 0.0,
    memory_iterations: Annotated[int, typer.Option(help="Requests of the memory probe per model (0 = off).", show_default=True)] = 200,
    max_events: Annotated[int, typer.Option(help="Read at most this many events per file (0 = all).", show_default=True)] = 0,
    threads: Annotated[int, typer.Option(help="torch CPU threads (0 = torch default).", show_default=True)] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the rounds' arm orders and the arrivals.", show_default=True)] = 0,
    report_json: Annotated[Optional[Path], typer.Option(help="Write the JSON report here.", show_default="none")] = None,
    report_html: Annotated[Optional[Path], typer.Option(help="Write the HTML report here.", show_default="none")] = None,
    store_url: Annotated[Optional[str], typer.Option(help="SQL store URL: save rows in table latency_runs (only when given).", show_default="none")] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.", show_default=True)] = True,
) -> None:
    """Benchmark baseline vs candidate latency on reference and incident inputs; exit 3 on a regression."""
    from driftwarden.latency.options import BenchOptions, parse_dtypes, parse_int_list

    options = BenchOptions(
        baseline, candidate, reference_input, incident_input, adapter, parse_int_list(batch_sizes),
        parse_dtypes(dtypes), device, min_count, min_duration, rounds, warmup, tolerance, confidence,
        arrival_rate, memory_iterations, max_events, threads, seed,
    )
    report = run_and_report(options, report_json, report_html, store_url and resolve_store_url(store_url), progress,
                            Console())
    if report["exit_code"]:
        raise typer.Exit(code=report["exit_code"])


def run_and_report(options, report_json: Path | None, report_html: Path | None, store: str | None,
                   progress: bool, console: Console | None = None) -> dict:
    """Run the benchmark, write the outputs asked for, print a summary on ``console``; return the report."""
    from driftwarden.latency import html, report as reports, runner

    prepared = runner.prepare(options)
    result = _run_with_progress(prepared, progress)
    report = reports.build_report(result, int(time.time() * 1000))
    if report_json:
        reports.write_json(report, report_json)
    if report_html:
        html.write_html(report, result, report_html)
    if store:
        from driftwarden.latency import store as latency_store  # sqlalchemy only when a store is asked for

        latency_store.save(report, store)
    if console is not None:
        print_summary(report, console)
    return report


def _run_with_progress(prepared, enabled: bool):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from driftwarden.latency import runner

    steps = runner.total_steps(prepared.options, len(prepared.dtypes))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True, disable=not enabled) as bar:
        task = bar.add_task("benchmark", total=steps)
        return runner.run(prepared, _Advance(bar, task))


class _Advance:
    """Adapts a rich progress task to the runner's Progress protocol."""

    def __init__(self, bar, task) -> None:
        self._bar, self._task = bar, task

    def advance(self, description: str) -> None:
        """One step done."""
        self._bar.update(self._task, advance=1, description=description)


def print_summary(report: dict, console: Console) -> None:
    """Print one line per cell (ratios with CIs, verdict, attribution) and the run's verdict."""
    table = data_table("batch", "dtype", "p50 ratio [CI]", "p99 ratio [CI]", "inputs p50 ratio", "verdict", "attributed to",
                       title="candidate / baseline latency")
    for cell in report["cells"]:
        if cell["status"] != "ok":
            table.add_row(str(cell["batch_size"]), cell["dtype"], "-", "-", "-", "unsupported", Text(cell["reason"][:60]))
            continue
        eff, inp = cell["model_effect"], cell["input_effect"]
        cells = (str(cell["batch_size"]), cell["dtype"], _ci(eff["p50"]), _ci(eff["p99"]),
                 _ci(inp["p50"]) if inp else "-", cell["verdict"], cell["attribution"])
        table.add_row(*map(Text, cells))  # literal: "[no CI: ...]" would otherwise be read as a style tag
    console.print(table)
    mem = ", ".join(f"{k}: {v['status']}" for k, v in report["memory"].items())
    console.print(f"memory: {mem}; telemetry: {report['telemetry']['status']}")
    console.print(f"verdict: [bold]{report['verdict']}[/] (attributed to {report['attribution']}); exit code {report['exit_code']}")


def _ci(r: dict) -> str:
    if r["ratio"] is None:
        return "n/a"
    if r["ci_low"] is None or r["ci_high"] is None:
        return f"{r['ratio']:.3f} [no CI: too few requests]"
    return f"{r['ratio']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
