"""Running totals of the store (``store_totals``): what /metrics reports, kept as rows are written.

Each writer adds what its rows contribute, in the same transaction as the rows: a window's results
and counts (``pipeline.results``), dead letters (``pipeline.dead_letters``), webhook deliveries as
they change status (``alerting.outbox``, ``alerting.worker``). A rewritten row (a window judged again
after a restart) adds its new contribution less its old one, so the totals equal a count of the rows
(:func:`recount`) until retention deletes old rows; then the totals keep what those rows counted.

A total is keyed (metric, model, item, label); the metrics:

==========================  =========  =========  ===========================================
metric                      model      item       label
==========================  =========  =========  ===========================================
windows_closed              model                 (count of window_counts rows)
window_events               model                 (sum of their events)
windows_deep_checked        model                 (windows whose gate fired)
windows_judged              model      feature    (window_results rows: the series of a feature)
gate_alarms                 model      feature
invalid_values              model      feature    (sum of window_results.invalid: wrong-typed values)
deep_checks                 model      feature    drifted | not_drifted
segment_windows_judged      model      feature    segment
judging_errors              model                 (result rows of both tables with an error)
rejected_events                                   reason (dead letters but late)
late_events                 model                 (late dead letters; model "" when unknown)
deliveries                             route      status (a gauge: deliveries in the store)
==========================  =========  =========  ===========================================
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

from sqlalchemy import Connection, func, select
from sqlalchemy.dialects import postgresql, sqlite

from driftwarden.schemas.tables import dead_letters, segment_results, store_totals, window_counts, window_results

Key = tuple[str, str, str, str]
LATE_REASON = "late"  # dead_letters.reason of events that missed their window
DEEP_COLUMNS = ("deep_ks_stat", "deep_psi", "deep_emd")  # any set: the deep test ran
#: The result rows' columns :func:`result_totals` reads (``segment`` too, of ``segment_results``).
RESULT_TOTAL_COLUMNS = ("model", "feature", "error", "gate_alarm", "invalid", "drifted", *DEEP_COLUMNS)


def add_totals(conn: Connection, deltas: Mapping[Key, int]) -> None:
    """Add each non-zero delta to its total (a new total starts at 0), in key order so that writers never deadlock."""
    from driftwarden.core.store import execute_many, storable_rows

    rows = storable_rows(store_totals, [{"metric": k[0], "model": k[1], "item": k[2], "label": k[3], "value": n}
                                        for k, n in sorted(deltas.items()) if n])
    if not rows:
        return
    execute_many(conn, lambda: _add_statement(conn), rows, ("add_totals",))


def _add_statement(conn: Connection):
    """INSERT into ``store_totals`` that adds to the total when it exists."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(store_totals)
    return stmt.on_conflict_do_update(index_elements=["metric", "model", "item", "label"],
                                      set_={"value": store_totals.c.value + stmt.excluded.value})


def read_totals(conn: Connection, *metrics: str) -> dict[Key, int]:
    """The totals of the given metrics (every metric when none is given)."""
    t = store_totals.c
    query = select(t.metric, t.model, t.item, t.label, t.value)
    if metrics:
        query = query.where(t.metric.in_(metrics))
    return {(m, model, item, label): int(v) for m, model, item, label, v in conn.execute(query)}


def result_totals(rows: Iterable[Mapping[str, Any]], segmented: bool) -> Counter:
    """What result rows (of ``window_results``, or of ``segment_results`` when ``segmented``) add to the totals."""
    out: Counter = Counter()
    for r in rows:
        model, feature = r["model"], r["feature"]
        out["judging_errors", model, "", ""] += r.get("error") is not None
        if segmented:
            out["segment_windows_judged", model, feature, r["segment"]] += 1
            continue
        out["windows_judged", model, feature, ""] += 1
        out["gate_alarms", model, feature, ""] += bool(r["gate_alarm"])
        out["invalid_values", model, feature, ""] += r.get("invalid") or 0
        if any(r.get(c) is not None for c in DEEP_COLUMNS):
            out["deep_checks", model, feature, "drifted" if r["drifted"] else "not_drifted"] += 1
    return out


def counts_totals(rows: Iterable[Mapping[str, Any]]) -> Counter:
    """What ``window_counts`` rows add to the totals."""
    out: Counter = Counter()
    for r in rows:
        out["windows_closed", r["model"], "", ""] += 1
        out["window_events", r["model"], "", ""] += int(r["events"])
        out["windows_deep_checked", r["model"], "", ""] += bool(r["deep_checked"])
    return out


def dead_letter_totals(rows: Iterable[Mapping[str, Any]]) -> Counter:
    """What stored dead letters (their ``reason`` and ``model``) add to the totals."""
    out: Counter = Counter()
    for r in rows:
        if r["reason"] == LATE_REASON:
            out["late_events", r["model"] or "", "", ""] += 1
        else:
            out["rejected_events", "", "", r["reason"]] += 1
    return out


def delivery_totals(rows: Iterable[Mapping[str, Any]], sign: int = 1) -> Counter:
    """What deliveries (their ``route`` and ``status``) add to the totals; ``sign`` -1: what they take away."""
    out: Counter = Counter()
    for r in rows:
        out["deliveries", "", r["route"], r["status"]] += sign
    return out


def recount(conn: Connection) -> Counter:
    """Every total counted afresh from the rows (a full scan of each table): the totals' definition, used to
    fill ``store_totals`` when a store is upgraded to version 8 and by tests to check the running totals."""
    from driftwarden.schemas.alert_tables import alert_deliveries

    out: Counter = Counter()
    wr, sr, wc, dl, d = window_results.c, segment_results.c, window_counts.c, dead_letters.c, alert_deliveries.c
    for model, n, events, deep in conn.execute(select(wc.model, func.count(), func.coalesce(func.sum(wc.events), 0),
                                                      func.sum(_as_int(wc.deep_checked))).group_by(wc.model)):
        out.update({("windows_closed", model, "", ""): n, ("window_events", model, "", ""): int(events),
                    ("windows_deep_checked", model, "", ""): int(deep or 0)})
    ran = wr.deep_ks_stat.is_not(None) | wr.deep_psi.is_not(None) | wr.deep_emd.is_not(None)
    for model, feature, n, alarms in conn.execute(select(wr.model, wr.feature, func.count(), func.sum(
            _as_int(wr.gate_alarm))).group_by(wr.model, wr.feature)):
        out.update({("windows_judged", model, feature, ""): n, ("gate_alarms", model, feature, ""): int(alarms or 0)})
    for model, feature, n in conn.execute(select(wr.model, wr.feature, func.sum(wr.invalid)).where(wr.invalid > 0)
                                          .group_by(wr.model, wr.feature)):
        out["invalid_values", model, feature, ""] += int(n)
    for model, feature, drifted, n in conn.execute(select(wr.model, wr.feature, wr.drifted, func.count()).where(ran)
                                                   .group_by(wr.model, wr.feature, wr.drifted)):
        out["deep_checks", model, feature, "drifted" if drifted else "not_drifted"] += n
    for model, feature, segment, n in conn.execute(select(sr.model, sr.feature, sr.segment, func.count())
                                                   .group_by(sr.model, sr.feature, sr.segment)):
        out["segment_windows_judged", model, feature, segment] += n
    for table in (window_results, segment_results):
        for model, n in conn.execute(select(table.c.model, func.count()).where(table.c.error.is_not(None))
                                     .group_by(table.c.model)):
            out["judging_errors", model, "", ""] += n
    for reason, model, n in conn.execute(select(dl.reason, dl.model, func.count()).group_by(dl.reason, dl.model)):
        out.update({k: n * v for k, v in dead_letter_totals([{"reason": reason, "model": model}]).items()})
    for route, status, n in conn.execute(select(d.route, d.status, func.count()).group_by(d.route, d.status)):
        out["deliveries", "", route, status] += n
    return +out  # without zeros


def _as_int(flag):
    """1 where a boolean column is true, else 0 (SQLite and PostgreSQL alike)."""
    from sqlalchemy import case

    return case((flag, 1), else_=0)
