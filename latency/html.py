"""A self-contained HTML page of a benchmark report: verdict, 2x2 tables and latency CDFs
(matplotlib PNGs embedded as base64, no external file or script)."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from driftwarden.latency.runner import RunResult

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:72em}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f4f4f4}
.regression{color:#b00020;font-weight:bold}.improvement{color:#0a7d28;font-weight:bold}code{background:#f4f4f4}"""


def render(report: Mapping[str, Any], result: RunResult | None = None) -> str:
    """The whole page as one HTML string; CDF plots need the raw latencies in ``result``."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>driftwarden bench {_e(report['run_id'])}</title>",
             f"<style>{_STYLE}</style></head><body>", _header(report)]
    for cell in report["cells"]:
        parts.append(_cell(cell, result))
    parts += [_preprocessing(report["preprocessing"]), _memory(report["memory"]), _telemetry(report["telemetry"]),
              "</body></html>"]
    return "\n".join(parts)


def write_html(report: Mapping[str, Any], result: RunResult | None, path: Path) -> None:
    """Write the page to ``path``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(render(report, result), encoding="utf-8")


def cdf_png(series: Mapping[str, np.ndarray], title: str) -> str:
    """A latency CDF (log-scaled ms) of each named series, as a base64 PNG (colour: inputs; dashes: candidate)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=90)
    for name, ms in series.items():
        xs = np.sort(np.asarray(ms, dtype=float))
        style = dict(color="tab:orange" if "incident" in name else "tab:blue", ls="--" if "candidate" in name else "-")
        ax.plot(xs, np.arange(1, xs.size + 1) / xs.size, label=f"{name} (n={xs.size})", **style)
    ax.set_xscale("log")
    ax.set(xlabel="latency (ms)", ylabel="fraction of requests", title=title)
    ax.grid(True, which="both", alpha=.3)
    ax.legend(fontsize=8)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _header(r: Mapping[str, Any]) -> str:
    env, opts = r["environment"], r["options"]
    return (f"<h1>driftwarden bench: <span class='{_cls(r['verdict'])}'>{_e(r['verdict'])}</span></h1>"
            f"<p>change attributed to: <b>{_e(r['attribution'])}</b> &middot; exit code {r['exit_code']} &middot; {_e(r['created_at'])}</p>"
            f"<p>baseline <code>{_e(r['models']['baseline']['path'])}</code> vs candidate <code>{_e(r['models']['candidate']['path'])}</code>"
            f" on {_e(env['device'])} ({_e(env['device_name'])}), torch {_e(env['torch'])}, timer {_e(env['timer'])};"
            f" {opts['rounds']} interleaved rounds, &ge;{opts['min_count']} requests and &ge;{opts['min_duration_s']} s per arm,"
            f" tolerance {opts['tolerance']:.0%}; exact intervals of the median over rounds, every cell's p50 and p99"
            f" at the Bonferroni level that keeps {opts['confidence']:.0%} for the run; a missing interval means too few"
            " requests.</p>")


def _cell(cell: Mapping[str, Any], result: RunResult | None) -> str:
    title = f"batch {cell['batch_size']}, {cell['dtype']}"
    if cell["status"] != "ok":
        return f"<h2>{_e(title)}</h2><p>not measured: {_e(cell['reason'])}</p>"
    parts = [f"<h2>{_e(title)}: <span class='{_cls(cell['verdict'])}'>{_e(cell['verdict'])}</span>"
             f" (attributed to {_e(cell['attribution'])})</h2>", _table_2x2(cell), _effects(cell), _buckets(cell)]
    arms = (result.arms.get((cell["dtype"], cell["batch_size"])) if result else None) or []
    if arms:
        png = cdf_png({f"{a.model} / {a.inputs}": a.latency_ns / 1e6 for a in arms}, title)
        parts.append(f"<img alt='latency CDF {_e(title)}' src='data:image/png;base64,{png}'>")
    return "\n".join(parts)


def _table_2x2(cell: Mapping[str, Any]) -> str:
    sets = [s for s in ("reference", "incident") if any(a["inputs"] == s for a in cell["arms"])]
    head = "".join(f"<th>{s} inputs p50 / p99 (ms)</th>" for s in sets)
    rows = []
    for model in ("baseline", "candidate"):
        tds = "".join(_arm_td(cell, model, s) for s in sets)
        rows.append(f"<tr><th>{model}</th>{tds}</tr>")
    return f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table>"


def _arm_td(cell: Mapping[str, Any], model: str, inputs: str) -> str:
    arm = next(a for a in cell["arms"] if a["model"] == model and a["inputs"] == inputs)
    lat = arm["latency_ms"]
    return f"<td>{_f(lat['p50'])} / {_f(lat['p99'])}<br><small>{arm['requests']} req, {_f(arm['throughput']['samples_per_s'])} samples/s</small></td>"


def _effects(cell: Mapping[str, Any]) -> str:
    rows = [("model (candidate / baseline)", cell["model_effect"])]
    rows += [(f"model, on {k} inputs", v) for k, v in cell["model_effect_by_inputs"].items()]
    if cell["input_effect"]:
        rows.append(("inputs (incident / reference)", cell["input_effect"]))
        rows += [(f"inputs, with {k}", v) for k, v in cell["input_effect_by_model"].items()]
    body = "".join(f"<tr><th>{_e(name)}</th>{_ratio_td(e['p50'])}{_ratio_td(e['p99'])}<td class='{_cls(e['verdict'])}'>{_e(e['verdict'])}</td></tr>"
                   for name, e in rows)
    d = cell["decomposition"]
    return (f"<table><tr><th>effect</th><th>p50 ratio [95% CI]</th><th>p99 ratio [95% CI]</th><th>verdict</th></tr>{body}</table>"
            f"<p>total p50 change {_f(d['total_ratio_p50'])}x = model {_f(d['model_ratio_p50'])}x &times; inputs {_f(d['input_ratio_p50'])}x"
            f" (model share {_f(d['model_share'])}).</p>")


def _ratio_td(r: Mapping[str, Any]) -> str:
    return f"<td>{_f(r['ratio'])} [{_f(r['ci_low'])}, {_f(r['ci_high'])}]</td>"


def _buckets(cell: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><td>{_e(a['model'])}</td><td>{_e(a['inputs'])}</td><td>{_e(b['bucket'])}</td><td>{b['requests']}</td>"
                   f"<td>{_f(b['p50_ms'])}</td><td>{_f(b['p99_ms'])}</td></tr>" for a in cell["arms"] for b in a["by_bucket"])
    return ("<details><summary>latency by input-size bucket</summary><table><tr><th>model</th><th>inputs</th><th>bucket</th>"
            f"<th>requests</th><th>p50 ms</th><th>p99 ms</th></tr>{rows}</table></details>")


def _preprocessing(items: list) -> str:
    rows = "".join(f"<tr><td>{_e(p['inputs'])}</td><td>{p['batch_size']}</td><td>{_e(p['dtype'])}</td>"
                   f"<td>{_f(p['latency_ms']['p50'])}</td><td>{_f(p['latency_ms']['p99'])}</td></tr>" for p in items)
    return ("<h2>Preprocessing (features &rarr; tensors), timed apart from the model</h2><table><tr><th>inputs</th>"
            f"<th>batch</th><th>dtype</th><th>p50 ms</th><th>p99 ms</th></tr>{rows}</table>")


def _memory(mem: Mapping[str, Any]) -> str:
    rows = []
    for role, m in mem.items():
        slope = (m.get("allocated") or {}).get("slope_bytes_per_iter")
        rows.append(f"<tr><th>{_e(role)}</th><td>{_e(m['status'])}</td><td>{_e(m.get('signal', m.get('reason', '')))}</td>"
                    f"<td>{_f(slope)}</td><td>{_f(m.get('peak_allocated_bytes'))}</td><td>{_f(m.get('peak_reserved_bytes'))}</td></tr>")
    return ("<h2>Memory across iterations</h2><table><tr><th>model</th><th>class</th><th>signal</th><th>slope B/iter</th>"
            f"<th>peak allocated B</th><th>peak reserved B</th></tr>{''.join(rows)}</table>")


def _telemetry(t: Mapping[str, Any]) -> str:
    if t["status"] != "ok":
        return f"<h2>GPU telemetry</h2><p>unavailable: {_e(t['reason'])}</p>"
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_f(v['mean'])}</td><td>{_f(v['min'])}</td><td>{_f(v['max'])}</td></tr>"
                   for k, v in t["metrics"].items())
    reasons = ", ".join(f"{_e(k)}: {v}" for k, v in t["clock_event_reasons"].items()) or "none"
    return (f"<h2>GPU telemetry (NVML, {t['samples']} samples)</h2><table><tr><th>metric</th><th>mean</th><th>min</th>"
            f"<th>max</th></tr>{rows}</table><p>clock-event reasons seen (samples): {reasons}</p>")


def _f(x: Any) -> str:
    if x is None:
        return "n/a"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _e(x: Any) -> str:
    return html.escape(str(x))


def _cls(v: str) -> str:
    return {"regression": "regression", "improvement": "improvement"}.get(v, "")
