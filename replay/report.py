"""The replay report (JSON): the contract of DESIGN.md "Replay report", versioned.

Schema: ``schemas/replay_report.schema.json`` (every written report is validated against it).
Beyond the contract's keys the report adds ``schema_version``, ``source``, ``settings``,
``first_drift`` (the first window where each feature drifted), each feature's ``kind``, and the
rejected and late records with their coordinates (partition/offset or file/line).

Version 5: a window's ``features`` hold every verdict it judged: the global view's entries (no
``segment`` key) first, then one entry per (feature, segment) when segments are on, with its
``segment`` ({key: value}) and the hierarchical ``p_adjusted`` beside the feature entry's keys, as
DESIGN.md's contract says. (Versions 3 and 4 listed the segment entries apart, in the window's
``segments``, which version 5 no longer writes; version 4 added a feature's invalid values and a
boolean's shares.) ``alerts`` name a feature drifted in a segment too
(its ``segments`` say where), ``first_drift`` is per (model, feature, segment). A reader that wants
the global view only takes the entries without ``segment``: :func:`global_entries`.

Version 6 adds multivariate entries to version 5: ``kind`` ``group``, named after the group or
vector feature, with the pairs whose correlation moved most and the share of variance lost as evidence.
"""

from __future__ import annotations

import json
import math
from importlib import resources
import time
from functools import lru_cache
from pathlib import Path

import orjson

from driftwarden.core.records import FeatureOutcome, boolean_shares, severity_rank
from driftwarden.core.errors import ReplayError
from driftwarden.replay.engine import ReplayOutcome, WindowResult
from driftwarden.replay.setup import ReplaySetup
from driftwarden.schemas.events import rfc3339

SCHEMA_VERSION = 6
SCHEMA_PATH = resources.files("driftwarden.schemas") / "replay_report.schema.json"  # package data, in a checkout or a wheel
#: At most this many rejected (and late) records are listed; the counts always hold them all.
MAX_LISTED = 10_000


def build_report(outcome: ReplayOutcome, setup: ReplaySetup, source: dict) -> dict:
    """The report document for one replay."""
    windows = sorted(outcome.windows, key=lambda w: (w.report.model, w.report.window_start))
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": rfc3339(int(time.time() * 1000)),
        "source": source,
        "settings": _settings(setup),
        "windows": [window_entry(w) for w in windows],
        "alerts": [a for a in (_alert(w) for w in windows) if a is not None],
        "first_drift": first_drift(windows),
        "counts": _counts(outcome, windows),
        "rejected": [r.as_dict() for r in outcome.rejections[:MAX_LISTED]],
        "late": [{**r.where(), "model": e.model, "event_time": rfc3339(e.event_ms)}
                 for r, e in outcome.late[:MAX_LISTED]],
    }


def window_entry(result: WindowResult) -> dict:
    """One (model, window) entry of the report: the global view's feature entries, then each segment's."""
    report = result.report
    return {
        "model": report.model,
        "window_start": _iso(report.window_start),
        "window_end": _iso(report.window_end),
        "events": result.events,
        "late": result.late,
        "features": [feature_entry(f) for f in report.features if f.segment is None]
        + [segment_entry(f) for f in report.features if f.segment is not None],
    }


def global_entries(window: dict) -> list[dict]:
    """The feature entries of a report window's global view (those without a ``segment``)."""
    return [f for f in window["features"] if "segment" not in f]


def segment_entry(f: FeatureOutcome) -> dict:
    """One (feature, segment) verdict: the feature entry's keys plus ``segment`` and ``p_adjusted``."""
    return {**feature_entry(f), "segment": dict(f.segment or {}), "p_adjusted": _num(f.p_adjusted)}


def feature_entry(f: FeatureOutcome) -> dict:
    """One feature's verdict in the contract's shape (deep is null unless the gate fired)."""
    deep = None
    if f.alarm:
        deep = {"ks_stat": _num(f.ks_stat), "ks_pvalue": _num(f.ks_pvalue), "psi": _num(f.psi),
                "emd": _num(f.emd), "p_adjusted": _num(f.p_adjusted)}
    entry = {
        "name": f.name, "kind": f.kind, "count": f.count, "missing": f.missing,
        "gate": {"ks": _num(f.gate_ks), "psi": _num(f.gate_psi), "emd": _num(f.gate_emd),
                 "new_share": _num(f.gate_new_share), "alarm": f.alarm},
        "deep": deep, "drifted": f.drifted, "severity": f.severity,
    }
    if f.evidence is not None:  # version 2: why the deep test judged as it did
        entry["evidence"] = dict(f.evidence)
    if f.error is not None:  # judging this feature raised: no verdict ("not judged: <exception type>")
        entry["error"] = f.error
    if f.invalid:  # values of the wrong type, kept out of count and missing
        entry["invalid"] = f.invalid
        entry["invalid_examples"] = [dict(e) for e in f.invalid_examples]
    if f.true_count is not None:  # a boolean feature: the shares of true, false and null
        entry["shares"] = boolean_shares(f.count, f.missing, f.true_count)
    return entry



def first_drift(windows: list[WindowResult]) -> list[dict]:
    """The first window in which each (model, feature) drifted, and how many windows drifted."""
    found: dict[tuple[str, str, str], dict] = {}
    for w in windows:
        for f in w.report.features:
            if not f.drifted:
                continue
            key = (w.report.model, f.name, _segment_text(f))
            entry = found.setdefault(key, {"model": key[0], "feature": key[1], "window_start": _iso(
                w.report.window_start), "severity": f.severity, "drifted_windows": 0})
            if f.segment is not None:
                entry["segment"] = dict(f.segment)
            entry["drifted_windows"] += 1
    return [found[k] for k in sorted(found, key=lambda k: (found[k]["window_start"], k))]


def _alert(result: WindowResult) -> dict | None:
    drifted = sorted((f for f in result.report.features if f.drifted), key=lambda f: -severity_rank(f.severity))
    if not drifted:
        return None
    worst = max((f.severity for f in drifted), key=severity_rank)
    alert = {"model": result.report.model, "window_start": _iso(result.report.window_start),
             "window_end": _iso(result.report.window_end), "severity": worst,
             "features": list(dict.fromkeys(f.name for f in drifted))}
    segments = [{"feature": f.name, "segment": dict(f.segment), "severity": f.severity}
                for f in drifted if f.segment is not None]
    if segments:
        alert["segments"] = segments
    return alert


def _segment_text(f: FeatureOutcome) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((f.segment or {}).items()))


def _counts(outcome: ReplayOutcome, windows: list[WindowResult]) -> dict:
    c = outcome.counts
    counts = {k: int(c.get(k, 0)) for k in ("read", "valid", "rejected", "late", "windowed", "filtered_out")}
    invalid: dict[str, dict[str, int]] = {}
    for w in windows:
        for f in w.report.features:
            if f.invalid and f.segment is None:
                by_feature = invalid.setdefault(w.report.model, {})
                by_feature[f.name] = by_feature.get(f.name, 0) + f.invalid
    if invalid:
        counts["invalid_values"] = invalid
    return counts


def _settings(setup: ReplaySetup) -> dict:
    config = setup.config
    return {
        "window_ms": config.window.size_ms,
        "out_of_orderness_ms": config.window.out_of_orderness_ms,
        "bins": config.thresholds.bins,
        "reference": setup.reference_label,
        "models": sorted(setup.models) if setup.models else None,
        "features": sorted(setup.features) if setup.features else None,
    }


def _iso(moment) -> str:
    return rfc3339(int(round(moment.timestamp() * 1000)))


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


@lru_cache(maxsize=1)
def report_schema() -> dict:
    """The JSON Schema of the report."""
    return json.loads(SCHEMA_PATH.read_text())


def validate_report(doc: dict) -> None:
    """ReplayError naming the first place where ``doc`` breaks the schema."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(report_schema()).iter_errors(doc), key=lambda e: e.path)
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "(top)"
        raise ReplayError(f"replay report breaks its schema at {where}: {errors[0].message}")


def write_report(doc: dict, path: Path) -> None:
    """Validate the report and write it as indented JSON."""
    validate_report(doc)
    try:
        Path(path).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    except OSError as exc:
        raise ReplayError(f"cannot write the report to {path}: {exc.strerror}") from exc
