"""The "monitor health" dashboard: is driftwarden itself keeping up, checkpointing, judging windows?

Its PromQL reads Flink's own metrics (Flink's Prometheus reporter, jobs/flink_metrics.py), the
per-model window metrics of the results sink (jobs/window_metrics.py), the consumer lag and the
outbox that ``driftwarden run --metrics-port`` exposes. :data:`SIGNALS` are the named queries,
shared with ``driftwarden status`` (jobs/status.py); the alert rules on the same signals live
in deploy/prometheus/driftwarden-health.rules.yml. Flink reports times in milliseconds.
"""

from __future__ import annotations

from driftwarden.alerting.dashboards.model import Dashboard, Panel, PromQuery, SqlQuery

OP = "flink_taskmanager_job_task_operator_"
JOB = "flink_jobmanager_job_"

SIGNALS: dict[str, str] = {
    "records_in_per_s": f"sum by (topic, partition) (rate({OP}KafkaSourceReader_topic_partition_currentOffset"
                        "[$__rate_interval]))",
    "consumer_lag_records": "max by (topic, partition) (driftwarden_consumer_lag_records)",
    "consumer_lag_seconds": "max by (topic, partition) (driftwarden_consumer_lag_seconds)",
    "watermark_lag_seconds": f"max by (job_name) ({OP}watermarkLag) / 1000",
    "partition_watermark_lag_seconds": f"time() - max by (split) ({OP}split_watermark_currentWatermark) / 1000",
    "last_window_age_seconds": f"time() - max by (model) ({OP}model_last_window_end_timestamp_seconds)",
    "windows_judged_per_min": f"sum by (model) (rate({OP}model_windows_judged[$__rate_interval])) * 60",
    "freshness_seconds": f"max by (model) ({OP}model_last_window_freshness_seconds)",
    "freshness_max_1h_seconds": f"max by (model) (max_over_time({OP}model_last_window_freshness_seconds[1h]))",
    "checkpoint_age_seconds": f"time() - max by (job_name) ({JOB}lastCheckpointCompletedTimestamp) / 1000",
    "checkpoint_duration_seconds": f"max by (job_name) ({JOB}lastCheckpointDuration) / 1000",
    "checkpoint_size_bytes": f"max by (job_name) ({JOB}lastCheckpointSize)",
    "failed_checkpoints": f"max by (job_name) ({JOB}numberOfFailedCheckpoints)",
    "restarts": f"max by (job_name) ({JOB}numRestarts)",
    "backpressured_ms_per_s": "max by (task_name) (flink_taskmanager_job_task_backPressuredTimeMsPerSecond)",
    # 0 while the store answers and nothing is pending; no series at all when the store is unread
    "outbox_backlog": 'sum by (route) (driftwarden_alert_outbox{status="pending"}) or sum(driftwarden_store_up) * 0',
}

UID = "driftwarden-health"


def _panel(title: str, signal: str, legend: str, unit: str = "short", description: str = "") -> Panel:
    return Panel(title, "timeseries", (PromQuery(SIGNALS[signal], legend),), unit=unit, description=description)


def health_dashboard() -> Dashboard:
    """Return the monitor-health dashboard: input, lag, watermarks, windows, checkpoints, restarts."""
    return Dashboard(UID, "driftwarden: monitor health", (
        _panel("Records in per second per partition", "records_in_per_s", "{{topic}}[{{partition}}]", "reqps"),
        _panel("Consumer lag (records)", "consumer_lag_records", "{{topic}}[{{partition}}]",
               description="Partition end offset minus the job's committed offset (committed on checkpoints)."),
        _panel("Consumer lag (seconds)", "consumer_lag_seconds", "{{topic}}[{{partition}}]", "s",
               "Age of the oldest record the job has not committed yet."),
        Panel("Watermark lag (wall clock - watermark)", "timeseries", (
            PromQuery(SIGNALS["watermark_lag_seconds"], "job {{job_name}}"),
            PromQuery(SIGNALS["partition_watermark_lag_seconds"], "{{split}}")), unit="s"),
        _panel("Windows judged per minute per model", "windows_judged_per_min", "{{model}}"),
        Panel("Freshness: window end to verdict stored", "timeseries", (
            PromQuery(SIGNALS["freshness_seconds"], "{{model}} latest window"),
            PromQuery(SIGNALS["freshness_max_1h_seconds"], "{{model}} worst of the last hour")), unit="s"),
        _panel("Last window judged, age", "last_window_age_seconds", "{{model}}", "s"),
        _panel("Last completed checkpoint, age", "checkpoint_age_seconds", "{{job_name}}", "s"),
        Panel("Checkpoint duration and size", "timeseries", (
            PromQuery(SIGNALS["checkpoint_duration_seconds"], "duration (s)"),
            PromQuery(SIGNALS["checkpoint_size_bytes"], "size (bytes)")), unit="short"),
        Panel("Failed checkpoints and restarts", "timeseries", (
            PromQuery(SIGNALS["failed_checkpoints"], "failed checkpoints"),
            PromQuery(SIGNALS["restarts"], "restarts")), unit="short"),
        _panel("Backpressured time per task (ms/s)", "backpressured_ms_per_s", "{{task_name}}", "ms"),
        _panel("Alert outbox backlog (pending deliveries)", "outbox_backlog", "{{route}}"),
        Panel("Last window judged per model (store)", "table", (SqlQuery(
            "SELECT model, max(window_end) AS last_window_end, max(computed_at) AS judged_at,"
            " count(*) AS windows FROM window_counts GROUP BY model ORDER BY model", "table"),), width=24),
    ))
