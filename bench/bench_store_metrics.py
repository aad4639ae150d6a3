"""What one /metrics scrape of the store costs at a million rows: statements and time, beside a baseline.

Run: ``python bench/bench_store_metrics.py --store-url postgresql://driftwarden@127.0.0.1:55432/driftwarden``
(a PostgreSQL URL whose password comes from PGPASSFILE or the URL; a schema of its own is made and dropped;
``--store-url sqlite:///...`` measures SQLite). About three minutes on two cores at the default sizes.

For each size (``--sizes``: result rows; segment results, dead letters and deliveries half as many, window
counts one per 50 results) the store is filled in bulk (SQL ``INSERT ... SELECT``, then the running totals
counted from the rows once, as the version-7 upgrade does) and scraped ``--scrapes`` times by:

- baseline: the collector before running totals (``FullCountCollector`` below, its queries copied from it),
  which counts the tables on every scrape;
- candidate: ``alerting.metrics.StoreCollector``, which reads ``store_totals`` and one index entry per series.

Printed per size and collector: statements per scrape, median and min milliseconds per scrape (the min is
the least disturbed by other work on a shared machine), and the candidate's median as a share of the baseline's. Both collectors must report the same samples (checked).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy import Connection, Engine, and_, case, create_engine, event, func, select, text

from driftwarden.alerting.metrics import SCORE_COLUMNS, StoreCollector, _SEVERITY_VALUE
from driftwarden.core.store import make_engine
from driftwarden.core.totals import LATE_REASON, add_totals, recount
from driftwarden.schemas.alert_tables import alert_deliveries, alerts
from driftwarden.schemas.tables import dead_letters, segment_results, window_counts, window_results

MODELS = 10
FEATURES = 50
SEGMENTS = 4


class FullCountCollector(StoreCollector):
    """The baseline: StoreCollector as it was before the running totals (every table counted per scrape)."""

    def _families(self, conn: Connection) -> Iterator[Metric]:
        yield from self._window_counts(conn)
        yield from self._window_results(conn)
        yield from self._latest_scores(conn)
        yield from self._segment_scores(conn)
        yield from self._rejected(conn)
        yield from self._alerting(conn)

    def _window_counts(self, conn: Connection) -> Iterator[Metric]:
        closed = CounterMetricFamily("driftwarden_windows_closed", "Windows closed and written", labels=["model"])
        events = CounterMetricFamily("driftwarden_window_events", "Events counted in closed windows", labels=["model"])
        checked = CounterMetricFamily("driftwarden_windows_deep_checked",
                                      "Windows whose gate fired so that the deep check ran", labels=["model"])
        wc = window_counts.c
        deep = func.coalesce(func.sum(case((wc.deep_checked, 1), else_=0)), 0)
        for model, n, total, n_deep in conn.execute(select(
                wc.model, func.count(), func.coalesce(func.sum(wc.events), 0), deep).group_by(wc.model)):
            closed.add_metric([model], n)
            events.add_metric([model], total)
            checked.add_metric([model], n_deep)
        latest = GaugeMetricFamily("driftwarden_latest_window_events", "Events in the latest closed window",
                                   labels=["model"])
        newest = select(wc.model, func.max(wc.window_start).label("ws")).group_by(wc.model).subquery()
        for model, n in conn.execute(select(wc.model, wc.events).join(
                newest, and_(wc.model == newest.c.model, wc.window_start == newest.c.ws))):
            latest.add_metric([model], n)
        yield from (closed, events, checked, latest)

    def _window_results(self, conn: Connection) -> Iterator[Metric]:
        alarms = CounterMetricFamily("driftwarden_gate_alarms", "Windows where the cheap gate alarmed",
                                     labels=["model", "feature"])
        deep = CounterMetricFamily("driftwarden_deep_checks", "Deep checks run, by verdict",
                                   labels=["model", "feature", "verdict"])
        wr = window_results.c
        for model, feature, n in conn.execute(select(wr.model, wr.feature, func.count()).where(
                wr.gate_alarm.is_(True)).group_by(wr.model, wr.feature)):
            alarms.add_metric([model, feature], n)
        ran = (wr.deep_ks_stat.is_not(None)) | (wr.deep_psi.is_not(None)) | (wr.deep_emd.is_not(None))
        for model, feature, drifted, n in conn.execute(select(wr.model, wr.feature, wr.drifted, func.count()).where(
                ran).group_by(wr.model, wr.feature, wr.drifted)):
            deep.add_metric([model, feature, "drifted" if drifted else "not_drifted"], n)
        yield from (alarms, deep, self._judging_errors(conn))

    def _judging_errors(self, conn: Connection) -> Metric:
        """Stored (feature or segment) cells whose judging raised, per model (``driftwarden_judging_errors_total``)."""
        errors = CounterMetricFamily("driftwarden_judging_errors",
                                     "Features (and segment cells) of stored windows not judged because judging raised",
                                     labels=["model"])
        counts: dict[str, int] = {}
        for table in (window_results, segment_results):
            for model, n in conn.execute(select(table.c.model, func.count()).where(
                    table.c.error.is_not(None)).group_by(table.c.model)):
                counts[model] = counts.get(model, 0) + n
        for model, n in sorted(counts.items()):
            errors.add_metric([model], n)
        return errors

    def _latest_scores(self, conn: Connection) -> Iterator[Metric]:
        scores = GaugeMetricFamily("driftwarden_drift_score", "Drift scores of the latest window per feature",
                                   labels=["model", "feature", "score"])
        severity = GaugeMetricFamily("driftwarden_feature_severity",
                                     "Severity of the latest window (0 none, 1 minor, 2 moderate, 3 major)",
                                     labels=["model", "feature"])
        wr = window_results.c
        newest = select(wr.model, wr.feature, func.max(wr.window_start).label("ws")).group_by(
            wr.model, wr.feature).subquery()
        rows = conn.execute(select(window_results).join(newest, and_(
            wr.model == newest.c.model, wr.feature == newest.c.feature, wr.window_start == newest.c.ws)))
        for row in rows:
            for col in SCORE_COLUMNS:
                value = getattr(row, col)
                if value is not None:
                    scores.add_metric([row.model, row.feature, col], value)
            severity.add_metric([row.model, row.feature], _SEVERITY_VALUE.get(row.severity, 0))
        yield from (scores, severity)

    def _latest_segment_rows(self, conn: Connection) -> list[tuple]:
        """The latest segment_results row per (model, feature, segment), found by a group-by over the whole table."""
        sr = segment_results.c
        newest = select(sr.model, sr.feature, sr.segment, func.max(sr.window_start).label("ws")).group_by(
            sr.model, sr.feature, sr.segment).subquery()
        return [tuple(row) for row in conn.execute(select(
            sr.model, sr.feature, sr.segment, sr.window_start, sr.count, func.coalesce(sr.deep_psi, sr.gate_psi),
            sr.severity).join(newest, and_(sr.model == newest.c.model, sr.feature == newest.c.feature,
                                          sr.segment == newest.c.segment, sr.window_start == newest.c.ws)))]

    def _rejected(self, conn: Connection) -> Iterator[Metric]:
        """Dead letters: late events per model, every other reason as rejected."""
        rejected = CounterMetricFamily("driftwarden_rejected_events", "Events rejected (dead-lettered), by reason",
                                       labels=["reason"])
        late = CounterMetricFamily("driftwarden_late_events", "Events that arrived after their window closed",
                                   labels=["model"])
        dl = dead_letters.c
        for reason, model, n in conn.execute(select(dl.reason, dl.model, func.count()).group_by(dl.reason, dl.model)):
            if reason == LATE_REASON:
                late.add_metric([model or ""], n)
        for reason, n in conn.execute(select(dl.reason, func.count()).where(dl.reason != LATE_REASON)
                                      .group_by(dl.reason)):
            rejected.add_metric([reason], n)
        yield from (rejected, late)

    def _alerting(self, conn: Connection) -> Iterator[Metric]:
        outbox = GaugeMetricFamily("driftwarden_alert_outbox", "Webhook deliveries in the store, by status",
                                   labels=["route", "status"])
        d = alert_deliveries.c
        for route, status, n in conn.execute(select(d.route, d.status, func.count()).group_by(d.route, d.status)):
            outbox.add_metric([route, status], n)
        firing = GaugeMetricFamily("driftwarden_alerts_firing", "Alerts currently firing", labels=["model"])
        for model, n in conn.execute(select(alerts.c.model, func.count()).where(
                alerts.c.status == "firing").group_by(alerts.c.model)):
            firing.add_metric([model], n)
        yield from (outbox, firing)



def fill(engine: Engine, results: int) -> None:
    """Bulk rows: ``results`` window results over MODELS x FEATURES series, and the other tables in proportion."""
    windows = max(results // (MODELS * FEATURES), 1)
    seg_windows = max(results // 2 // (MODELS * 5 * SEGMENTS), 1)
    pg = engine.dialect.name == "postgresql"
    series = ("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < :top - 1) SELECT i FROM n"
              if not pg else "SELECT i FROM generate_series(0, :top - 1) AS n(i)")
    ts = ("datetime(1767225600 + 60 * ({w}), 'unixepoch')" if not pg
          else "to_timestamp(1767225600 + 60 * ({w}))")
    bool_ = (lambda expr: f"({expr})") if not pg else (lambda expr: f"({expr})")
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO window_counts (model, window_start, window_end, events, late, unknown_features, deep_checked,"
            f" computed_at) SELECT 'model-' || (i % {MODELS}), {ts.format(w='i / ' + str(MODELS))},"
            f" {ts.format(w='i / ' + str(MODELS) + ' + 1')}, 1000 + i % 7, 0, 0, {bool_('i % 5 = 0')}, "
            f"{ts.format(w='i / ' + str(MODELS) + ' + 1')} FROM ({series}) AS s"), {"top": MODELS * windows})
        conn.execute(text(
            "INSERT INTO window_results (model, feature, window_start, window_end, kind, count, missing, gate_ks,"
            " gate_psi, gate_emd, gate_alarm, deep_ks_stat, deep_psi, drifted, severity, computed_at)"
            f" SELECT 'model-' || (i % {MODELS}), 'feature-' || ((i / {MODELS}) % {FEATURES}),"
            f" {ts.format(w=f'i / {MODELS * FEATURES}')}, {ts.format(w=f'i / {MODELS * FEATURES} + 1')}, 'numeric',"
            f" 1000, 0, 0.01, 0.02 + (i % 13) * 0.01, 0.1, {bool_('i % 11 = 0')},"
            " CASE WHEN i % 11 = 0 THEN 0.2 END, CASE WHEN i % 11 = 0 THEN 0.3 END, "
            f"{bool_('i % 22 = 0')}, CASE WHEN i % 22 = 0 THEN 'major' ELSE 'none' END,"
            f" {ts.format(w=f'i / {MODELS * FEATURES} + 1')} FROM ({series}) AS s"), {"top": MODELS * FEATURES * windows})
        conn.execute(text(
            "INSERT INTO segment_results (model, feature, segment, window_start, window_end, kind, count, missing,"
            " gate_psi, gate_alarm, drifted, severity, computed_at)"
            f" SELECT 'model-' || (i % {MODELS}), 'feature-' || ((i / {MODELS}) % 5), 'country=' || ((i / {MODELS * 5})"
            f" % {SEGMENTS}), {ts.format(w=f'i / {MODELS * 5 * SEGMENTS}')}, {ts.format(w=f'i / {MODELS * 5 * SEGMENTS} + 1')},"
            f" 'numeric', 200, 0, 0.05, {bool_('1 = 0')}, {bool_('1 = 0')}, 'none',"
            f" {ts.format(w=f'i / {MODELS * 5 * SEGMENTS} + 1')} FROM ({series}) AS s"),
            {"top": MODELS * 5 * SEGMENTS * seg_windows})
        conn.execute(text(
            "INSERT INTO dead_letters (topic, partition, \"offset\", reason, model, payload, seen_at)"
            f" SELECT 'features', 0, i, CASE WHEN i % 3 = 0 THEN 'late' ELSE 'not_json' END, 'model-' || (i % {MODELS}),"
            f" '{{}}', {ts.format(w='i / 100')} FROM ({series}) AS s"), {"top": results // 2})
        conn.execute(text(
            "INSERT INTO alert_deliveries (webhook_id, route, model, group_key, format, body, alert_count, status,"
            " attempts, failures, created_at, next_attempt_at)"
            " SELECT 'msg_' || i, 'route-' || (i % 3), 'model-0', 'g', 'native', '{}', 1,"
            " CASE WHEN i % 50 = 0 THEN 'pending' ELSE 'sent' END, 1, 0,"
            f" {ts.format(w='i / 100')}, {ts.format(w='i / 100')} FROM ({series}) AS s"), {"top": results // 2})
        add_totals(conn, recount(conn))  # the running totals of these rows, as the version-7 upgrade counts them
    if pg:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))


def scrape_cost(engine: Engine, collector: StoreCollector, scrapes: int) -> tuple[int, float, float, bytes]:
    """Statements per scrape, median and min milliseconds, and the exposition text of the last scrape."""
    registry = CollectorRegistry()
    registry.register(collector)
    statements: list[str] = []
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    times, body = [], b""
    try:
        for _ in range(scrapes):
            statements.clear()
            t0 = time.perf_counter()
            body = generate_latest(registry)
            times.append(1000 * (time.perf_counter() - t0))
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    return len(statements), statistics.median(times), min(times), body


def main() -> None:
    """Fill a store at each size and print the scrape costs of the baseline and the candidate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--store-url", required=True, help="PostgreSQL (a schema is made and dropped) or sqlite:///")
    parser.add_argument("--sizes", default="10000,1000000", help="result rows per run, comma separated")
    parser.add_argument("--scrapes", type=int, default=15, help="scrapes timed per collector and size")
    args = parser.parse_args()
    print(f"{'rows':>9} {'collector':<10} {'statements':>10} {'median ms':>10} {'min ms':>9} {'ratio':>7}")
    for size in (int(s) for s in args.sizes.split(",")):
        url, cleanup = _fresh_store(args.store_url, size)
        engine = make_engine(url)
        try:
            t0 = time.perf_counter()
            fill(engine, size)
            fill_s = time.perf_counter() - t0
            base = scrape_cost(engine, FullCountCollector(engine), args.scrapes)
            cand = scrape_cost(engine, StoreCollector(engine), args.scrapes)
            assert _samples(base[3]) == _samples(cand[3]), "the collectors disagree"
            print(f"{size:>9} {'baseline':<10} {base[0]:>10} {base[1]:>10.1f} {base[2]:>9.1f}")
            print(f"{size:>9} {'candidate':<10} {cand[0]:>10} {cand[1]:>10.1f} {cand[2]:>9.1f} {cand[1] / base[1]:>7.3f}"
                  f"   (filled in {fill_s:.0f} s; {len(_samples(cand[3]))} samples per scrape)")
        finally:
            engine.dispose()
            cleanup()


def _samples(body: bytes) -> set[str]:
    """The exposition's sample lines, without comments (HELP/TYPE) and the _created timestamps."""
    return {line for line in body.decode().splitlines() if line and not line.startswith("#") and "_created" not in line}


def _fresh_store(url: str, size: int):
    """A store URL of its own for one size, and what removes it."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):] + f".{size}.{uuid.uuid4().hex[:6]}"
        import os

        return f"sqlite:///{path}", lambda: os.remove(path)
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))

    def drop() -> None:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()

    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options=-csearch_path%3D{schema}", drop


if __name__ == "__main__":
    main()
