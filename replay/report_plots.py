"""The HTML report's plots, drawn with matplotlib (Agg) and returned as base64 PNG (None when there is nothing to draw).

Names from events are drawn as plain text: call them inside :func:`literal_text` (math text off).
"""

from __future__ import annotations

import base64
import io
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from driftwarden.replay.engine import DriftDetail
from driftwarden.replay.html_cells import Cell
from driftwarden.replay.html_data import feature_timeline, moved_values, psi_contributions, unseen_summary


def moved_png(detail: DriftDetail) -> str | None:
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


def correlation_png(detail: DriftDetail) -> str | None:
    """A group's correlation difference (window - reference) as a heat map, of the features that moved most."""
    matrix = (detail.evidence or {}).get("correlation_delta") or {}
    names, delta = matrix.get("features") or [], np.array(matrix.get("delta") or [], dtype=np.float64)
    if len(names) < 2 or delta.shape != (len(names), len(names)):
        return None
    import matplotlib.pyplot as plt

    size = min(8.0, 2.5 + 0.35 * len(names))
    fig, ax = plt.subplots(figsize=(size + 1.2, size), dpi=90)
    image = ax.imshow(delta, cmap="RdBu_r", vmin=-1.0, vmax=1.0)
    labels = [str(n)[:18] for n in names]
    ax.set_xticks(range(len(names)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), labels)
    if len(names) <= 10:
        for (i, j), value in np.ndenumerate(delta):
            if i != j:
                ax.text(j, i, f"{value:+.2f}", ha="center", va="center", fontsize=8,
                        color="white" if abs(value) > 0.6 else "black")
    fig.colorbar(image, ax=ax, label="correlation change")
    ax.set_title("correlation, first drifted window minus reference")
    return _png(fig)


def unseen_png(doc: dict, detail: DriftDetail) -> str | None:
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


def distribution_png(detail: DriftDetail) -> str | None:
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


def contribution_png(detail: DriftDetail, bins: int) -> str | None:
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


def timeline_png(doc: dict, detail: DriftDetail) -> str | None:
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


def segment_timeline_png(doc: dict, cell: Cell) -> str | None:
    inside = feature_timeline(doc, cell.model, cell.feature, cell.segment)
    if not inside:
        return None
    import matplotlib.dates as mdates

    fig, ax = _figure(wide=True)
    overall = feature_timeline(doc, cell.model, cell.feature)
    ax.plot([p["time"] for p in overall], [p["score"] for p in overall], marker=".", color="#999", label="all traffic")
    ax.plot([p["time"] for p in inside], [p["score"] for p in inside], marker=".", color="#357",
            label=cell.segment_text)
    chosen = [p for p in inside if p["drifted"]]
    if chosen:
        ax.scatter([p["time"] for p in chosen], [p["score"] for p in chosen], marker="x", color="#b00", s=60, zorder=3,
                   label="drifted in the segment")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    ax.set_ylabel("drift score")
    ax.set_title("drift score per window (UTC): the segment against all traffic")
    ax.legend()
    return _png(fig)


@contextmanager
def literal_text() -> Iterator[None]:
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
