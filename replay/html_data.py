"""The numbers behind the HTML report's plots and ranking, kept apart from the drawing.

The ranking and the plots are of the global view (the report entries without a ``segment``), unless a
segment is asked for.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from driftwarden.core.records import severity_rank
from driftwarden.replay.report import global_entries
from driftwarden.sketches import distances
from driftwarden.sketches.gate import bin_edges, category_probs


def psi_contributions(detail, bins: int = 10) -> tuple[list[str], list[float]] | None:
    """Labels and PSI terms ``(w - r) * ln(w / r)`` per reference-quantile bin or per category."""
    ref, win = detail.reference_sketch, detail.window_sketch
    if ref is None or win is None or ref.n == 0 or win.n == 0:
        return None
    if detail.kind == "numeric":
        edges = bin_edges(ref, bins)
        r = distances.probs_from_cdf(ref.cdf(edges))
        w = distances.probs_from_cdf(win.cdf(edges))
        bounds = ["-inf"] + [f"{e:.3g}" for e in edges] + ["inf"]
        labels = [f"({a}, {b}]" for a, b in zip(bounds, bounds[1:])]
    elif profile_of(detail) is not None:  # high cardinality: the head the gate compares, not every value
        r, w = profile_of(detail).head_probs(win)
        labels = [str(c)[:12] for c in profile_of(detail).head_labels(win)] + ["(other)"]
    else:
        r, w = category_probs(ref, win)
        cats = sorted(set(ref.frequencies()) | set(win.frequencies()))
        labels = [str(c)[:12] for c in cats] + ["(other)"]
    r, w = distances.smooth(np.asarray(r)), distances.smooth(np.asarray(w))
    return labels, ((w - r) * np.log(w / r)).tolist()


def profile_of(detail):
    """The reference's CategoricalProfile behind a drifted feature (high cardinality), or None."""
    return getattr(detail.reference, "profile", None) if detail.reference is not None else None


def moved_values(detail, top: int = 10) -> list[dict]:
    """The head values whose share moved most, ``{"value", "reference", "window"}``, largest move first."""
    profile, win = profile_of(detail), detail.window_sketch
    if profile is None or win is None or win.n == 0:
        return []
    return [{"value": "(other)" if v is None else v, "reference": a, "window": b} for v, a, b in profile.moved(win, top)]


def unseen_summary(detail, doc: dict) -> dict | None:
    """Unseen-value share of the first drifted window against the reference's baseline and threshold."""
    if profile_of(detail) is None:
        return None
    from driftwarden.sketches.reference import baseline_unseen_share

    ref = detail.reference
    return {"window": profile_of(detail).unseen_share(detail.window_sketch) if detail.window_sketch else None,
            "baseline": baseline_unseen_share(ref), "threshold": float(ref.thresholds.new_share),
            "timeline": [{"time": datetime.fromisoformat(w["window_start"]), "share": f["gate"].get("new_share")}
                         for w in doc["windows"] if w["model"] == detail.model
                         for f in w["features"] if f["name"] == detail.feature and "segment" not in f]}


def feature_timeline(doc: dict, model: str, feature: str, segment: dict | None = None) -> list[dict]:
    """Per window of ``model``: time, drift score (gate PSI, else deep PSI, else NaN), alarm, drifted, of the
    feature in all traffic or, with ``segment``, in that segment.

    Categorical features have no gate PSI in the report, so their line shows only deep-tested windows.
    """
    points = []
    for window in doc["windows"]:
        if window["model"] != model:
            continue
        for f in window["features"]:
            if f["name"] == feature and f.get("segment") == segment:
                score = f["gate"]["psi"]
                if score is None and f["deep"]:
                    score = f["deep"]["psi"]
                points.append({"time": datetime.fromisoformat(window["window_start"]), "score": float("nan") if score is None else score,
                               "alarm": f["gate"]["alarm"], "drifted": f["drifted"]})
    return points


def effect_ranking(doc: dict) -> list[dict]:
    """Every (model, feature) of the global view with its largest scores over the windows, largest PSI first."""
    rows: dict[tuple[str, str], dict] = {}
    for window in doc["windows"]:
        for f in global_entries(window):
            row = rows.setdefault((window["model"], f["name"]), {
                "model": window["model"], "feature": f["name"], "kind": f.get("kind", ""), "psi": None,
                "emd": None, "ks": None, "drifted_windows": 0, "first_drifted": None, "severity": "none"})
            _fold(row, f, window["window_start"])
    return sorted(rows.values(), key=lambda r: (-(r["psi"] or 0.0), -(r["emd"] or 0.0), r["model"], r["feature"]))


def _fold(row: dict, f: dict, start: str) -> None:
    deep = f["deep"] or {}
    for key, gate_key in (("psi", "psi"), ("emd", "emd"), ("ks", "ks")):
        value = deep.get("ks_stat" if key == "ks" else key)
        value = f["gate"][gate_key] if value is None else value
        if value is not None and (row[key] is None or value > row[key]):
            row[key] = value
    if f["drifted"]:
        row["drifted_windows"] += 1
        row["first_drifted"] = row["first_drifted"] or start
        if severity_rank(f["severity"]) > severity_rank(row["severity"]):
            row["severity"] = f["severity"]
