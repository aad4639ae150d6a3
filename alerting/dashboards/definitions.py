"""The driftwarden dashboards: one per-model dashboard (``$model``) and an alert-delivery overview.

SQL panels read the results store (window_results, segment_results, window_counts, dead_letters,
alert tables); PromQL panels read what ``driftwarden`` exposes on /metrics (StoreCollector and
DeliveryMetrics). ``$segment`` filters the segment panels: one or more segments of the model, or All.
"""

from __future__ import annotations

from driftwarden.alerting.dashboards.model import Dashboard, Panel, PromQuery, SqlQuery, Variable

MODEL = "model = '$model'"

MODEL_VARIABLE = Variable("model", "Model", "SELECT DISTINCT model FROM window_counts ORDER BY 1")
#: All is sent as the column itself: ``segment IN (segment)`` holds on every row, and no list is built.
SEGMENT_VARIABLE = Variable("segment", "Segment",
                            f"SELECT DISTINCT segment FROM segment_results WHERE {MODEL} ORDER BY 1",
                            multi=True, all_value="segment")
SEGMENTS = f"{MODEL} AND segment IN ($segment)"
SEVERITY_RANK = "CASE severity WHEN 'major' THEN 3 WHEN 'moderate' THEN 2 WHEN 'minor' THEN 1 ELSE 0 END"


def _event_panels() -> tuple[Panel, ...]:
    return (
        Panel("Event rate (per window)", "timeseries", (SqlQuery(
            'SELECT window_end AS "time", events / GREATEST(EXTRACT(EPOCH FROM (window_end - window_start)), 1)'
            f' AS "events/s" FROM window_counts WHERE {MODEL} AND $__timeFilter(window_end) ORDER BY 1'),),
            unit="reqps"),
        Panel("Event rate (Prometheus)", "timeseries", (PromQuery(
            'sum(rate(driftwarden_window_events_total{model="$model"}[$__rate_interval]))', "events/s"),),
            unit="reqps"),
        Panel("Rejected events by reason", "timeseries", (SqlQuery(
            "SELECT $__timeGroupAlias(seen_at, '1m'), reason AS metric, count(*) AS value FROM dead_letters"
            f" WHERE reason <> 'late' AND ({MODEL} OR model IS NULL) AND $__timeFilter(seen_at)"
            " GROUP BY 1, 2 ORDER BY 1"),
            PromQuery("sum by (reason) (rate(driftwarden_rejected_events_total[$__rate_interval]))", "{{reason}}")),
            unit="short"),
        Panel("Late events", "timeseries", (SqlQuery(
            "SELECT $__timeGroupAlias(seen_at, '1m'), count(*) AS \"late events\" FROM dead_letters"
            f" WHERE reason = 'late' AND {MODEL} AND $__timeFilter(seen_at) GROUP BY 1 ORDER BY 1"),
            PromQuery('sum(rate(driftwarden_late_events_total{model="$model"}[$__rate_interval]))', "late/s")),
            unit="short"),
    )


def _drift_panels() -> tuple[Panel, ...]:
    return (
        Panel("Drift score per feature (PSI; deep where run)", "heatmap", (SqlQuery(
            'SELECT window_start AS "time", feature AS metric, COALESCE(deep_psi, gate_psi) AS value'
            f" FROM window_results WHERE {MODEL} AND $__timeFilter(window_start) ORDER BY 1"),),
            width=24, height=10, description="One row per feature; colour is the window's PSI.",
            options={"calculate": False, "yAxis": {"axisPlacement": "left"}, "color": {"scheme": "Oranges"},
                     "cellGap": 1}),
        Panel("Latest drift scores", "timeseries", (PromQuery(
            'driftwarden_drift_score{model="$model", score="gate_psi"}', "{{feature}}"),), unit="short"),
        Panel("Gate alarms and deep-check verdicts", "barchart", (SqlQuery(
            "SELECT $__timeGroupAlias(window_start, '1m'),"
            " sum(CASE WHEN gate_alarm THEN 1 ELSE 0 END) AS \"gate alarms\","
            " sum(CASE WHEN deep_ks_stat IS NOT NULL AND drifted THEN 1 ELSE 0 END) AS \"deep: drifted\","
            " sum(CASE WHEN deep_ks_stat IS NOT NULL AND NOT drifted THEN 1 ELSE 0 END) AS \"deep: cleared\""
            f" FROM window_results WHERE {MODEL} AND $__timeFilter(window_start) GROUP BY 1 ORDER BY 1"),)),
        Panel("Deep checks by verdict (Prometheus)", "timeseries", (
            PromQuery('sum by (verdict) (driftwarden_deep_checks_total{model="$model"})', "{{verdict}}"),
            PromQuery('sum(driftwarden_gate_alarms_total{model="$model"})', "gate alarms")),),
        Panel("Latest window per feature", "table", (SqlQuery(
            "SELECT feature, kind, count, missing, gate_ks, gate_psi, gate_emd, gate_alarm, deep_ks_pvalue,"
            " p_adjusted, drifted, severity FROM window_results"
            f" WHERE {MODEL} AND window_start = (SELECT max(window_start) FROM window_results WHERE {MODEL})"
            " ORDER BY feature", "table"),), width=24),
    )


def _value_panels() -> tuple[Panel, ...]:
    """Per-feature invalid values (wrong-typed, their events kept) and boolean features' shares."""
    return (
        Panel("Invalid values per feature (per window)", "timeseries", (SqlQuery(
            'SELECT window_start AS "time", feature AS metric, invalid AS value FROM window_results'
            f" WHERE {MODEL} AND invalid > 0 AND $__timeFilter(window_start) ORDER BY 1"),
            PromQuery('sum by (feature) (driftwarden_invalid_values_total{model="$model"})', "{{feature}} (total)")),
            unit="short", description="Monitored values of the wrong type, per feature: each counted invalid, the "
                                      "rest of its event kept (source.on_invalid_value: skip_value)."),
        Panel("Invalid value examples", "table", (SqlQuery(
            'SELECT window_start AS "window", feature, invalid, invalid_examples AS "examples (reason, value, where)"'
            f" FROM window_results WHERE {MODEL} AND invalid > 0 AND $__timeFilter(window_start)"
            " ORDER BY window_start DESC, feature LIMIT 50", "table"),),
            description="Up to five examples per feature and window, with the record that carried each."),
        Panel("Boolean features: share of true (per window)", "timeseries", (SqlQuery(
            'SELECT window_start AS "time", feature AS metric,'
            " CAST(true_count AS DOUBLE PRECISION) / NULLIF(count, 0) AS value FROM window_results"
            f" WHERE {MODEL} AND true_count IS NOT NULL AND $__timeFilter(window_start) ORDER BY 1"),),
            unit="percentunit", description="Shares among the window's values, nulls included."),
        Panel("Boolean shares, latest window (Prometheus)", "timeseries", (PromQuery(
            'driftwarden_boolean_share{model="$model"}', "{{feature}} {{value}}"),), unit="percentunit"),
    )


def _segment_panels() -> tuple[Panel, ...]:
    return (
        Panel("Segment drift score (PSI; deep where run)", "timeseries", (SqlQuery(
            'SELECT window_start AS "time", feature || \' [\' || segment || \']\' AS metric,'
            " COALESCE(deep_psi, gate_psi) AS value"
            f" FROM segment_results WHERE {SEGMENTS} AND $__timeFilter(window_start) ORDER BY 1"),),
            description="One line per (feature, segment) of the chosen segments; a segment below min_count "
                        "in a window is not judged and has no score there."),
        Panel("Drifted segments (feature x segment)", "table", (SqlQuery(
            'SELECT feature, segment, count(*) AS "drifted windows", max(window_start) AS "last drifted",'
            f" CASE max({SEVERITY_RANK}) WHEN 3 THEN 'major' WHEN 2 THEN 'moderate' WHEN 1 THEN 'minor'"
            ' ELSE \'none\' END AS "worst severity", max(COALESCE(deep_psi, gate_psi)) AS "max PSI",'
            ' min(p_adjusted) AS "min p adjusted (hierarchical)"'
            f" FROM segment_results WHERE {SEGMENTS} AND drifted AND $__timeFilter(window_start)"
            " GROUP BY feature, segment ORDER BY 3 DESC, 1, 2", "table"),),
            description="Each (feature, segment) cell that drifted in the time range, among the chosen segments."),
        Panel("Latest segment drift scores (Prometheus, top 10)", "timeseries", (PromQuery(
            'topk(10, driftwarden_segment_drift_score{model="$model"})', "{{feature}} [{{segment}}]"),),
            width=24, description="The latest window's PSI per (feature, segment), all segments of the model; "
                                  'segments past the label cap show as segment="_other".'),
    )


ALERT_STATE_VALUE = ("CASE a.status WHEN 'resolved' THEN 0 WHEN 'nodata' THEN -1 ELSE"
                     " CASE a.severity WHEN 'major' THEN 3 WHEN 'moderate' THEN 2 ELSE 1 END END")
ALERT_STATES = tuple({"type": "value", "options": {str(value): {"text": text, "color": color, "index": i}}}
                     for i, (value, text, color) in enumerate((
                         (0, "resolved", "green"), (-1, "no data", "gray"), (1, "firing (minor)", "yellow"),
                         (2, "firing (moderate)", "orange"), (3, "firing (major)", "red"))))
ALERT_NAME = "a.feature || CASE WHEN a.segment <> '' THEN ' [' || a.segment || ']' ELSE '' END"


def _alert_panels() -> tuple[Panel, ...]:
    return (
        Panel("Alert state per feature", "state-timeline", (SqlQuery(
            f'SELECT a.window_start AS "time", {ALERT_NAME} AS metric, {ALERT_STATE_VALUE} AS value'
            " FROM alert_events a WHERE a.model = '$model' AND (a.window_start <= $__timeTo() AND a.window_start >="
            " (SELECT COALESCE(max(p.window_start), $__timeFrom()) FROM alert_events p"
            " WHERE p.fingerprint = a.fingerprint AND p.window_start <= $__timeFrom()))"
            " ORDER BY 1"),), width=24, height=8, mappings=ALERT_STATES,
            description="One row per alert (model, feature[, segment]): firing by severity, no data, resolved; "
                        "each change is placed at the window that caused it.",
            options={"mergeValues": True, "showValue": "never", "rowHeight": 0.8}),
        Panel("Alert deliveries by status", "timeseries", (SqlQuery(
            "SELECT $__timeGroupAlias(created_at, '5m'), status AS metric, count(*) AS value FROM alert_deliveries"
            f" WHERE {MODEL} AND $__timeFilter(created_at) GROUP BY 1, 2 ORDER BY 1"),)),
        Panel("Alerts", "table", (SqlQuery(
            "SELECT fingerprint, feature, segment, severity, status, starts_at, ends_at, acked_by FROM alerts"
            f" WHERE {MODEL} ORDER BY updated_at DESC LIMIT 50", "table"),)),
    )


def model_dashboard() -> Dashboard:
    """Return the per-model dashboard: events, rejects, late, drift heatmap, verdicts, invalid values and boolean
    shares, segments, alerts."""
    return Dashboard("driftwarden-model", "driftwarden: model drift",
                     _event_panels() + _drift_panels() + _value_panels() + _segment_panels() + _alert_panels(),
                     (MODEL_VARIABLE, SEGMENT_VARIABLE))


def delivery_dashboard() -> Dashboard:
    """Return the alert-delivery overview across routes."""
    return Dashboard("driftwarden-deliveries", "driftwarden: alert deliveries", (
        Panel("Delivery outcomes", "timeseries", (PromQuery(
            "sum by (route, outcome) (increase(driftwarden_alert_deliveries_total[$__rate_interval]))",
            "{{route}} {{outcome}}"),)),
        Panel("Delivery attempts by result", "timeseries", (PromQuery(
            "sum by (route, result) (rate(driftwarden_alert_delivery_attempts_total[$__rate_interval]))",
            "{{route}} {{result}}"),)),
        Panel("Attempt latency p95", "timeseries", (PromQuery(
            "histogram_quantile(0.95, sum by (route, le) (rate(driftwarden_alert_delivery_seconds_bucket"
            "[$__rate_interval])))", "{{route}}"),), unit="s"),
        Panel("Outbox by status", "timeseries", (PromQuery("sum by (route, status) (driftwarden_alert_outbox)",
                                                           "{{route}} {{status}}"),)),
        Panel("Dead and failed deliveries", "table", (SqlQuery(
            "SELECT webhook_id, route, model, status, attempts, last_status_code, last_error, created_at"
            " FROM alert_deliveries WHERE status IN ('dead', 'failed', 'disabled') AND $__timeFilter(created_at)"
            " ORDER BY created_at DESC LIMIT 100", "table"),), width=24),
    ))


def all_dashboards() -> list[Dashboard]:
    """Return every dashboard driftwarden ships."""
    from driftwarden.alerting.dashboards.health import health_dashboard

    return [model_dashboard(), delivery_dashboard(), health_dashboard()]
