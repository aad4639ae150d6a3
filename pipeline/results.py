"""Write one window's outcome to the store: results, counts and alerts in one transaction."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import replace
from datetime import datetime, timezone

from sqlalchemy import Connection, Table, and_, func, select, text, update

from driftwarden.core.records import AlertSink, WindowReport
from driftwarden.core.store import storable_rows, store_text, upsert
from driftwarden.core.totals import RESULT_TOTAL_COLUMNS, add_totals, counts_totals, result_totals
from driftwarden.schemas.alert_tables import segment_key
from driftwarden.schemas.tables import dead_letters, segment_results, window_counts, window_results
from driftwarden.sketches.sequential import CusumState

#: Length of the store's model columns.
MODEL_CHARS = window_counts.c.model.type.length


def store_window(conn: Connection, report: WindowReport, events: int, unknown_features: int,
                 alerts: AlertSink | None, now: datetime | None = None) -> int:
    """Upsert the window's rows (idempotent per model/feature[/segment]/window) and enqueue its alerts
    (``alerts``: the monitor's alert rules, ``alerting.rules.AlertRules``; None: no alerts); the alerts enqueued.

    An outcome with a ``segment`` goes to ``segment_results`` (its segment as ``segment_key`` writes
    it), the others to ``window_results``; alerts are enqueued for all (a segment is part of the alert identity).

    The model is stored (and alerted on) as the store can keep it: a name from an event with a NUL
    or longer than the columns is escaped and cut with a marker (``core.store.store_text``).
    """
    now = now or datetime.now(timezone.utc)
    if store_text(report.model, MODEL_CHARS) != report.model:
        report = replace(report, model=store_text(report.model, MODEL_CHARS))
    plain = storable_rows(window_results, [_result_row(report, f, now) for f in report.features if f.segment is None])
    segmented = storable_rows(segment_results, [{**_result_row(report, f, now), "segment": segment_key(f.segment)}
                                                for f in report.features if f.segment is not None])
    # what the rows this write replaces (a window judged again after a restart) had added to the totals
    old = (result_totals(_stored(conn, window_results, report, "feature", plain), segmented=False)
           + result_totals(_stored(conn, segment_results, report, "feature", segmented), segmented=True))
    upsert(conn, window_results, plain, ("model", "feature", "window_start"), storable=True)
    upsert(conn, segment_results, segmented, ("model", "feature", "segment", "window_start"), storable=True)
    new = result_totals(plain, segmented=False)
    new.update(result_totals(segmented, segmented=True))
    lock_window(conn, report.model, report.window_start)  # before counting its late events
    deep_checked = any(f.alarm for f in report.features)
    counts = {"model": report.model, "window_start": report.window_start, "window_end": report.window_end,
              "events": events, "late": late_events(conn, report.model, report.window_start, report.window_end),
              "unknown_features": unknown_features, "deep_checked": deep_checked, "computed_at": now}
    store_counts(conn, counts, extra_totals=_difference(new, old))
    return alerts.enqueue(conn, report, now) if alerts is not None else 0


def store_counts(conn: Connection, counts: dict, extra_totals: Counter | None = None) -> None:
    """Upsert one ``window_counts`` row (idempotent per model and window) and add it to the running totals
    (with ``extra_totals``, what the window's result rows changed), as the last write of the transaction."""
    wc = window_counts.c
    old = conn.execute(select(wc.model, wc.events, wc.deep_checked).where(
        wc.model == counts["model"], wc.window_start == counts["window_start"])).mappings().all()
    upsert(conn, window_counts, [counts], ("model", "window_start"))
    added = counts_totals(storable_rows(window_counts, [counts]))
    added.update(extra_totals or {})
    add_totals(conn, _difference(added, counts_totals(old)))


def _stored(conn: Connection, table: Table, report: WindowReport, key: str, rows: list[dict]) -> list:
    """The stored rows of ``table`` for the report's model and window among those ``rows`` (storable rows:
    :func:`core.store.storable_rows`) will replace."""
    if not rows:
        return []
    keys = {(r[key], r.get("segment")) for r in rows}
    columns = [table.c[name] for name in RESULT_TOTAL_COLUMNS + (("segment",) if "segment" in table.c else ())]
    found = conn.execute(select(*columns).where(table.c.window_start == report.window_start,
                                                table.c.model == report.model)).mappings().all()
    return [r for r in found if (r[key], r.get("segment")) in keys]


def _difference(new: Counter, old: Counter) -> Counter:
    """``new`` - ``old`` per key, negative values kept (Counter's own ``-`` drops them)."""
    out = Counter(new)
    out.subtract(old)
    return out


def stored_events(conn: Connection, model: str, window_start: datetime) -> int | None:
    """Events of the stored (model, window), or None when the window has not been stored."""
    query = select(window_counts.c.events).where(window_counts.c.model == store_text(model, MODEL_CHARS),
                                                  window_counts.c.window_start == window_start)
    return conn.execute(query).scalar_one_or_none()


def lock_window(conn: Connection, model: str, window_start: datetime) -> None:
    """Serialise the transactions that count one (model, window)'s late events (PostgreSQL).

    A late record's dead letter and the window's own row are written by different functions of the
    job, concurrently: without the lock each could count the other's uncommitted row as missing.
    An advisory lock held to the end of the transaction; SQLite serialises writers anyway.
    """
    if conn.dialect.name != "postgresql":
        return
    digest = hashlib.blake2b(f"{model}\x1f{window_start.isoformat()}".encode(), digest_size=8).digest()
    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": int.from_bytes(digest, "big", signed=True)})


def recount_late(conn: Connection, model: str, start: datetime, end: datetime) -> None:
    """Recount the late events of a stored (model, window): call after storing a late dead letter.

    A window's late events mostly arrive after the window was stored; its ``late`` count then
    follows them, so it ends the same in the live job and in replay (and is idempotent on a rerun).
    """
    model = store_text(model, MODEL_CHARS)
    lock_window(conn, model, start)
    conn.execute(update(window_counts).where(window_counts.c.model == model, window_counts.c.window_start == start)
                 .values(late=late_events(conn, model, start, end)))


def previous_cusum(conn: Connection, model: str, window_start: datetime) -> dict[str, CusumState]:
    """Each feature's CUSUM as the model's latest stored window before ``window_start`` left it.

    The live job's slow-drift state across windows and restarts: read back from the results, so a
    re-judged window after a restart starts from the same sums (replay carries them in memory).
    ``model`` as the event named it: looked up as stored (``core.store.store_text``).
    """
    model = store_text(model, MODEL_CHARS)
    latest = select(func.max(window_results.c.window_start)).where(
        window_results.c.model == model, window_results.c.window_start < window_start).scalar_subquery()
    rows = conn.execute(select(window_results.c.feature, window_results.c.cusum_up, window_results.c.cusum_down)
                        .where(window_results.c.model == model, window_results.c.window_start == latest)).all()
    return {feature: CusumState(up, down or 0.0) for feature, up, down in rows if up is not None}


def late_events(conn: Connection, model: str, start: datetime, end: datetime) -> int:
    """Events of (model, window) that arrived after the window closed (kept in dead_letters)."""
    query = select(func.count()).select_from(dead_letters).where(and_(
        dead_letters.c.reason == "late", dead_letters.c.model == model,
        dead_letters.c.event_time >= start, dead_letters.c.event_time < end))
    return int(conn.execute(query).scalar_one())


def _result_row(report: WindowReport, f, now: datetime) -> dict:
    return {
        "model": report.model, "feature": f.name, "window_start": report.window_start,
        "window_end": report.window_end, "kind": f.kind, "count": f.count, "missing": f.missing,
        "gate_ks": f.gate_ks, "gate_ks_bound": f.gate_ks_bound, "gate_psi": f.gate_psi, "gate_emd": f.gate_emd,
        "gate_chi2": f.gate_chi2, "gate_js": f.gate_js, "gate_new_share": f.gate_new_share,
        "gate_missing_delta": f.gate_missing_delta, "gate_alarm": f.alarm,
        "deep_ks_stat": f.ks_stat, "deep_ks_pvalue": f.ks_pvalue, "deep_psi": f.psi, "deep_emd": f.emd,
        "deep_chi2_stat": f.chi2_stat, "deep_chi2_pvalue": f.chi2_pvalue,
        "p_adjusted": f.p_adjusted, "drifted": f.drifted, "severity": f.severity,
        "evidence": json.dumps(f.evidence, sort_keys=True) if f.evidence is not None else None,
        "cusum_up": f.cusum_up, "cusum_down": f.cusum_down, "error": f.error, "computed_at": now,
        "invalid": f.invalid, "true_count": f.true_count,
        "invalid_examples": json.dumps([dict(e) for e in f.invalid_examples]) if f.invalid_examples else None,
    }
