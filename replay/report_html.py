"""The HTML replay report: one self-contained page (PNG plots embedded as base64).

Per drifted feature: reference vs window CDF overlay (numeric, from the sketches' quantiles) or
category shares (categorical), the PSI contribution of each bin or category, and the drift score
timeline with gate alarms and drifted windows marked. A high-cardinality categorical feature (its
reference has a ``CategoricalProfile``) shows instead its unseen-value share against the reference
baseline (text and per-window plot) and the head values whose share moved most (table and bars); then a table of all features ranked by
effect size, with the first window where each drifted.

Model, feature and category names come from events: HTML-escaped in the page, and drawn with
matplotlib's math text off (``$\\alpha$`` is a category like any other, not a formula).
"""

from __future__ import annotations

import base64
import html
import io
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

from driftwarden.core.errors import ReplayError
from driftwarden.replay.engine import DriftDetail, ReplayOutcome
from driftwarden.replay.html_data import effect_ranking, feature_timeline, moved_values, profile_of, psi_contributions, unseen_summary
from driftwarden.schemas.events import rfc3339

#: At most this many drifted features get plots (the table lists them all).
MAX_PLOTTED = 30
#: At most this many (window, feature, segment) rows in the segment table (drifted ones first; the JSON has them all).
MAX_SEGMENT_ROWS = 2000

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;font-size:0.9em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,td:nth-child(2){text-align:left}img{max-width:100%}
.major{color:#b00;font-weight:bold}.moderate{color:#d60}.minor{color:#a80}.feature{margin-top:2em}"""


def write_html(doc: dict, outcome: ReplayOutcome, path: Path) -> None:
    """Render the report page and write it to ``path``."""
    try:
        Path(path).write_text(render_html(doc, outcome), encoding="utf-8")
    except OSError as exc:
        raise ReplayError(f"cannot write the HTML report to {path}: {exc.strerror}") from exc


def render_html(doc: dict, outcome: ReplayOutcome) -> str:
    """The whole page as a string."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>driftwarden replay</title>"
             f"<style>{_STYLE}</style></head><body>", _header(doc), _ranking_table(doc), _segment_table(doc)]
    details = sorted(outcome.first_drift.values(), key=lambda d: (d.window_start_ms, d.model, d.feature))
    with _literal_text():
        parts.extend(_feature_section(doc, detail) for detail in details[:MAX_PLOTTED])
    if len(details) > MAX_PLOTTED:
        parts.append(f"<p>{len(details) - MAX_PLOTTED} more drifted features are listed in the table only.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _header(doc: dict) -> str:
    source = doc["source"]
    what = (f"topic <b>{_e(source['topic'])}</b> from {source['from']} to {source['to']}"
            if "topic" in source else f"file <b>{_e(source['input'])}</b>")
    counts = ", ".join(f"{k}: {v}" for k, v in doc["counts"].items())
    return (f"<h1>driftwarden replay</h1><p>{what}; reference {_e(doc['settings']['reference'])}; "
            f"windows of {doc['settings']['window_ms'] / 1000:g} s; generated {doc['generated_at']}</p>"
            f"<p>{len(doc['windows'])} windows; records {counts}</p>")


def _ranking_table(doc: dict) -> str:
    rows = effect_ranking(doc)
    if not rows:
        return "<p>No window was judged.</p>"
    head = ("<h2>Features ranked by effect size</h2><table><tr><th>model</th><th>feature</th><th>kind</th>"
            "<th>max PSI</th><th>max EMD</th><th>max KS</th><th>drifted windows</th><th>first drifted</th>"
            "<th>worst severity</th></tr>")
    body = "".join(
        f"<tr><td>{_e(r['model'])}</td><td>{_e(r['feature'])}</td><td>{r['kind']}</td><td>{_f(r['psi'])}</td>"
        f"<td>{_f(r['emd'])}</td><td>{_f(r['ks'])}</td><td>{r['drifted_windows']}</td>"
        f"<td>{r['first_drifted'] or '-'}</td><td class='{r['severity']}'>{r['severity']}</td></tr>" for r in rows)
    return head + body + "</table>"


def _segment_table(doc: dict) -> str:
    """Per window, per (feature, segment): counts, verdict, severity, p_adjusted (windows with segments only)."""
    rows = [(w, s) for w in doc["windows"] for s in w.get("segments", ())]
    if not rows:
        return ""
    shown = sorted(rows, key=lambda r: not r[1]["drifted"])[:MAX_SEGMENT_ROWS]
    shown.sort(key=lambda r: (r[0]["window_start"], r[0]["model"], r[1]["name"], _segment_text(r[1]["segment"])))
    head = ("<h2>Segments</h2><table><tr><th>window start</th><th>model</th><th>feature</th><th>segment</th>"
            "<th>count</th><th>missing</th><th>verdict</th><th>severity</th><th>p adjusted</th></tr>")
    body = "".join(
        f"<tr><td>{w['window_start']}</td><td>{_e(w['model'])}</td><td>{_e(s['name'])}</td>"
        f"<td>{_e(_segment_text(s['segment']))}</td><td>{s['count']}</td><td>{s['missing']}</td>"
        f"<td>{_segment_verdict(s)}</td><td class='{s['severity']}'>{s['severity']}</td>"
        f"<td>{_p(s['p_adjusted'])}</td></tr>" for w, s in shown)
    more = (f"<p>{len(rows) - len(shown)} more (feature, segment) rows, none drifted, are in the JSON report only.</p>"
            if len(rows) > len(shown) else "")
    return head + body + "</table>" + more


def _segment_text(segment: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(segment.items()))


def _segment_verdict(entry: dict) -> str:
    if entry["drifted"]:
        return "drifted"
    if entry["gate"]["alarm"]:
        return "gate alarm, not significant"
    return "judged, quiet" if entry["gate"]["psi"] is not None or entry["gate"]["ks"] is not None else "not judged"


def _feature_section(doc: dict, detail: DriftDetail) -> str:
    title = (f"<div class='feature'><h2>{_e(detail.model)} / {_e(detail.feature)} ({detail.kind})</h2>"
             f"<p>first drifted in the window starting {rfc3339(detail.window_start_ms)}</p>")
    bins = doc["settings"].get("bins", 10)
    if profile_of(detail) is not None:  # high cardinality: unseen share and the head, not one bar per value
        images = [_moved_png(detail), _contribution_png(detail, bins), _unseen_png(doc, detail)]
        title += _unseen_text(doc, detail) + _moved_table(detail)
    else:
        images = [_distribution_png(detail), _contribution_png(detail, bins), _timeline_png(doc, detail)]
    return title + "".join(f"<img src='data:image/png;base64,{img}'>" for img in images if img) + "</div>"


def _unseen_text(doc: dict, detail: DriftDetail) -> str:
    unseen = unseen_summary(detail, doc)
    return (f"<p>values the reference never saw: {_pct(unseen['window'])} of this window's events "
            f"(reference baseline {_pct(unseen['baseline'])}, gate threshold {_pct(unseen['threshold'])})</p>")


def _moved_table(detail: DriftDetail) -> str:
    rows = "".join(f"<tr><td>{_e(r['value'])}</td><td>{_pct(r['reference'])}</td><td>{_pct(r['window'])}</td>"
                   f"<td>{(r['window'] - r['reference']) * 100:+.2f} pts</td></tr>" for r in moved_values(detail))
    return ("<table><tr><th>top value that moved</th><th>reference share</th><th>window share</th><th>change</th></tr>"
            f"{rows}</table>") if rows else ""


def _moved_png(detail: DriftDetail) -> str | None:
    rows = moved_values(detail)
    if not rows:
        return None
    fig, ax = _figure()
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["reference"] for r in rows], 0.4, label="reference")
    ax.bar(x + 0.2, [r["window"] for r in rows], 0.4, label="first drifted window")
    ax.set_xticks(x, [str(r["value"])[:12] for r in rows], rotation=45, ha="right")
    ax.set_ylabel("share")
    ax.set_title("head values that moved most (of the reference's top values)")
    ax.legend()
    return _png(fig)


def _unseen_png(doc: dict, detail: DriftDetail) -> str | None:
    unseen = unseen_summary(detail, doc)
    points = [p for p in unseen["timeline"] if p["share"] is not None]
    if not points:
        return None
    import matplotlib.dates as mdates

    fig, ax = _figure(wide=True)
    ax.plot([p["time"] for p in points], [p["share"] for p in points], marker=".", color="#357",
            label="unseen-value share (gate)")
    ax.axhline(unseen["baseline"], color="#888", linestyle="--", label="reference baseline")
    ax.axhline(unseen["threshold"], color="#d60", linestyle=":", label="gate threshold")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    ax.set_ylabel("share of events")
    ax.set_title("values the reference never saw, per window (UTC)")
    ax.legend()
    return _png(fig)


def _distribution_png(detail: DriftDetail) -> str | None:
    ref, win = detail.reference_sketch, detail.window_sketch
    if ref is None or win is None or ref.n == 0 or win.n == 0:
        return None
    fig, ax = _figure()
    if detail.kind == "numeric":
        u = np.linspace(0.0, 1.0, 201)
        ax.plot(ref.quantiles(u), u, label="reference", drawstyle="steps-post")
        ax.plot(win.quantiles(u), u, label="first drifted window", drawstyle="steps-post")
        ax.set_xlabel(detail.feature)
        ax.set_ylabel("cumulative share")
        ax.set_title("CDF: reference vs window (from sketch quantiles)")
    else:
        _category_bars(ax, ref, win)
    ax.legend()
    return _png(fig)


def _category_bars(ax, ref, win, top: int = 15) -> None:
    rf, wf = ref.frequencies(), win.frequencies()
    cats = sorted(set(rf) | set(wf), key=lambda c: -(rf.get(c, 0) / ref.n + wf.get(c, 0) / win.n))[:top]
    x = np.arange(len(cats))
    ax.bar(x - 0.2, [rf.get(c, 0) / ref.n for c in cats], 0.4, label="reference")
    ax.bar(x + 0.2, [wf.get(c, 0) / win.n for c in cats], 0.4, label="first drifted window")
    ax.set_xticks(x, [str(c)[:12] for c in cats], rotation=45, ha="right")
    ax.set_ylabel("share")
    ax.set_title("category shares: reference vs window")


def _contribution_png(detail: DriftDetail, bins: int) -> str | None:
    contributions = psi_contributions(detail, bins)
    if contributions is None:
        return None
    labels, values = contributions
    fig, ax = _figure()
    ax.bar(np.arange(len(values)), values, color=["#c33" if v > 0.01 else "#888" for v in values])
    ax.set_xticks(np.arange(len(values)), labels, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("PSI contribution")
    ax.set_title(f"PSI per {'bin' if detail.kind == 'numeric' else 'category'} (total {sum(values):.3f})")
    return _png(fig)


def _timeline_png(doc: dict, detail: DriftDetail) -> str | None:
    points = feature_timeline(doc, detail.model, detail.feature)
    if not points:
        return None
    import matplotlib.dates as mdates

    fig, ax = _figure(wide=True)
    times, scores = [p["time"] for p in points], [p["score"] for p in points]
    ax.plot(times, scores, marker=".", color="#357", label="PSI (gate; deep where the gate has none)")
    for key, style in (("alarm", dict(marker="o", facecolors="none", edgecolors="#d60", s=80, label="gate alarm")),
                       ("drifted", dict(marker="x", color="#b00", s=60, label="drifted"))):
        chosen = [p for p in points if p[key]]
        if chosen:
            ax.scatter([p["time"] for p in chosen], [p["score"] for p in chosen], zorder=3, **style)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    ax.set_ylabel("drift score")
    ax.set_title("drift score per window (UTC)")
    ax.legend()
    return _png(fig)


@contextmanager
def _literal_text() -> Iterator[None]:
    """Matplotlib draws every label as plain text (no math text) inside this block."""
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False}):
        yield


def _figure(wide: bool = False):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(10 if wide else 6, 3.2), dpi=90)


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _e(text: str) -> str:
    return html.escape(str(text))


def _pct(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value * 100:.2f}%"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
