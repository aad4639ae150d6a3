"""The streaming drift job: Kafka in, summaries per (model, window), gate, deep check, results out.

Job graph (one Flink job; the per-event path stays in the JVM, in the Kafka source's task)::

    Kafka source (raw JSON, per-partition watermarks on event time, read in Java)
      └─ SourceSummaries (Java, chained to the source: no exchange, no row per event):
         envelope, the partition's lateness mark, the features where Java can vouch for the record,
         and the (model[, segment], window)'s partial summary (histogram / capped counts / bottom-k
         sample), updated per event; partials leave when the watermark passes the window
           ├─ partials ─────────────────────────────────────────────┐
           └─ everything else, to ValidateRecord (Python):           │
                turned away, kept in the dead letters (store +       │
                <topic>.dlq) with its reason: no readable event time │
                or model (Python names the exact reason); event time │
                too far ahead of its Kafka timestamp: "future"; late │
                (its window already fired in its partition): "late";│
                not vouched for: validated (rejects ─► dead letters) │
                  └─► TUMBLE(model, shard) ─► WindowSummaryAgg ──────┤ (partials)
                                                                     └─► TUMBLE(model) ─► MergeSummaries
                                                                         (the partials, merged exactly)
                       └─► analyze + store results and alerts (Python, once per window)

One hot model is spread over the subtasks as the topic's partitions are: each source subtask keeps
partials of the partitions it reads, and the partials merge.

Invariant (tested): read = valid + rejected, and valid = windowed + late. A late record is kept
as "late" without its features being validated.
Run embedded (``driftwarden run``, or ``python -m driftwarden.jobs.drift_job --config ...``) or on a cluster
(``flink run -pym driftwarden.jobs.drift_job``, as ``driftwarden run --jobmanager`` submits it).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Mapping

from driftwarden.core.kafka_security import java_properties
from driftwarden.core.store import make_engine
from driftwarden.jobs.feature_spec import FeatureColumnSpec
from driftwarden.jobs.flink_env import (StatementRunner, make_table_env, register_segment_function, register_summary_source,
                            register_window_aggregate)
from driftwarden.pipeline.segments import SegmentKey, other_key, segment_value
from driftwarden.pipeline.validation import FUTURE, LATE, REASON_SEPARATOR, future_detail
from driftwarden.jobs.source import STARTUP_MODES, interval_sql
from driftwarden.jobs.udfs import ENVELOPE, analyze_window_udf, validate_record_udtf
from driftwarden.schemas.events import parse_event_time
from driftwarden.schemas.config import MonitorConfig, load_config

log = logging.getLogger(__name__)


def register(t_env, config: MonitorConfig, store_url: str, reference_path: str | None, bounded: bool,
             segments: Mapping[str, tuple] | None = None, parallelism: int = 1) -> None:
    """Create the source task, the sink table, the UDFs and the views of the job (``segments``: :func:`live_segments`;
    ``parallelism``: the job's, which sets the Python path's shards: :func:`shard_count`)."""
    spec = FeatureColumnSpec.from_config(config)
    register_summary_source(t_env, source_settings(config, spec, bounded, segments or {}))
    t_env.execute_sql("CREATE TEMPORARY TABLE done (n INT) WITH ('connector' = 'blackhole')")
    register_window_aggregate(t_env, "dw_window_summary", spec.aggregate_spec(config), segments_json(segments or {}, config))
    if segments:
        register_segment_function(t_env, "dw_segment", segment_spec_json(segments, spec))
    t_env.create_temporary_function("dw_validate", validate_record_udtf(config, store_url))
    t_env.create_temporary_function("dw_analyze", analyze_window_udf(config, store_url, reference_path))
    # what the source task did not summarize goes to Python once: turned away (dead letters) or validated
    # (a row if valid), then into the window aggregate, in shards (and segments) as the source task's partials
    names = ", ".join(f"`{name}`" for name in ["unknown", "invalid", *spec.names])
    validated = ", ".join(f"v.`{name}`" for name in ["unknown", "invalid", *spec.names])
    t_env.execute_sql(f"""CREATE TEMPORARY VIEW valid_rows AS
SELECT model, {f"{segment_sql(segments, spec)} AS segment, " if segments else ""}MOD(`offset`, {shard_count(parallelism)}) AS shard,
       event_ms, `topic`, `partition`, `offset`, {names}, et FROM (
  SELECT model, et, event_ms, `topic`, `partition`, `offset`, {validated}
  FROM source_to_python, LATERAL TABLE(dw_validate(`topic`, `partition`, `offset`, turned_away, model, event_ms,
                                                   `value`)) AS v({names}))""")
    t_env.execute_sql(partials_sql(config, spec, bool(segments)))


def source_settings(config: MonitorConfig, spec: FeatureColumnSpec, bounded: bool,
                    segments: Mapping[str, tuple[tuple[str, ...], tuple[SegmentKey, ...]]]) -> str:
    """The settings of the job's source task (Java ``SourceSettings``): where to read and how to connect
    (``source.security`` as the Java client's properties, with references in place of secrets), the event-time
    rules (out-of-orderness, idleness, how far ahead of its Kafka timestamp an event may be), the
    feature columns and summary specs, the segments, and the reasons a record is turned away with."""
    source, window = config.source, config.window
    start = source.start if source.start in STARTUP_MODES else str(parse_event_time(source.start))
    future = f"{FUTURE}{REASON_SEPARATOR}{future_detail(window.max_future_skew)}"
    return json.dumps({
        "bootstrap_servers": source.bootstrap_servers, "group_id": source.group_id, "topics": source.topics,
        "kafka_properties": java_properties(source.security),
        "topic_pattern": source.topic_pattern, "start": start, "bounded": bounded, "format": source.format,
        # the registry's address and where its password is (never the password: Java reads it on the task's machine)
        "schema_registry": source.schema_registry.model_dump() if source.schema_registry else None,
        "out_of_orderness_ms": window.out_of_orderness_ms, "idleness_ms": window.idleness_ms,
        "watermark_emit": window.watermark_emit, "max_future_skew_ms": window.max_future_skew_ms,
        "columns": spec.to_json(), "aggregate": spec.aggregate_spec(config),
        "segments": segment_spec_json(segments, spec) if segments else None,
        "segment_columns": _segment_columns(segments, spec) if segments else [],
        "reasons": {"envelope": ENVELOPE, "future": future, "late": LATE},
    })


#: Partial summaries per subtask: a window's events are summarized in this many shards per subtask
#: (by Kafka offset), so one hot model is spread over every subtask; the partials then merge.
SHARDS_PER_SUBTASK = 4


def shard_count(parallelism: int) -> int:
    """How many partial summaries a (model[, segment], window) is built in (a row's ``shard``: its
    Kafka offset modulo this): one at parallelism 1, else :data:`SHARDS_PER_SUBTASK` per subtask."""
    return 1 if parallelism == 1 else SHARDS_PER_SUBTASK * parallelism


def window_statement(config: MonitorConfig,
                     segments: Mapping[str, tuple[tuple[str, ...], tuple[SegmentKey, ...]]] | None = None) -> str:
    """The job's one INSERT: the partial summaries (view ``partials``, see :func:`register`) merged per
    (model, window) and analyzed (dead letters are kept on the way).

    ``segments`` (:func:`live_segments`): per segmented model, its ``by`` features and its segment
    keys (the other segment's last); their partials are kept per segment, then merged per window
    into one segmented summary (Java ``MergeSegments``, sketches/FORMAT.md kind 18).
    """
    merge = "dw_merge_summaries(part)" if not segments else "dw_merge_segments(part, segment)"
    return f"""INSERT INTO done SELECT dw_analyze(summary) FROM (
              SELECT {merge} AS summary
              FROM TABLE(TUMBLE(TABLE partials, DESCRIPTOR(et), {interval_sql(config.window.size_ms)}))
              GROUP BY model, window_start, window_end)"""


def partials_sql(config: MonitorConfig, spec: FeatureColumnSpec, segmented: bool) -> str:
    """The view of every partial summary: the source task's, and the window aggregate's of the rows Python
    validated, per (model[, segment], shard, window); each timed at its window's last millisecond."""
    segment = "segment, " if segmented else ""
    columns = "".join(f", `{name}`" for name in spec.names)
    return f"""CREATE TEMPORARY VIEW partials AS
SELECT model, {segment}part, et FROM source_partials
UNION ALL
SELECT model, {segment}part, window_time AS et FROM (
  SELECT model, {segment}window_time,
         dw_window_summary(model, event_ms, `topic`, `partition`, `offset`, `unknown`, `invalid`{columns}) AS part
  FROM TABLE(TUMBLE(TABLE valid_rows, DESCRIPTOR(et), {interval_sql(config.window.size_ms)}))
  GROUP BY model, {segment}shard, window_start, window_end, window_time)"""


def live_segments(config: MonitorConfig, reference_path: str | None) -> dict[str, tuple[tuple[str, ...], tuple]]:
    """Per segmented model: its ``by`` features and segment keys, top ones first and the other last.

    The keys come from the reference file (``reference build`` with segments), as in replay; a
    model whose reference has no segments by its ``by`` is summarized without them (logged once).
    """
    if reference_path is None or not any(m.segments for m in config.models):
        return {}
    from driftwarden.pipeline.reference_set import ReferenceSet

    references, out = ReferenceSet.load(reference_path), {}
    for model in config.models:
        if model.segments is None:
            continue
        top = references.segment_keys_by(model.name, model.segments.by)
        if top is None:
            log.warning("model %s: segments by %s configured, but reference %s has none for it: its windows are "
                        "summarized without segments", model.name, ", ".join(model.segments.by), reference_path)
            continue
        out[model.name] = (tuple(model.segments.by), top + (other_key(model.segments.by),))
    return out


def segment_sql(segments: Mapping[str, tuple[tuple[str, ...], tuple[SegmentKey, ...]]],
                spec: FeatureColumnSpec) -> str:
    """SQL of an event's segment: ``dw_segment`` (Java ``EventSegment``, built with :func:`segment_spec_json`)
    over the model and the columns of every segmented model's ``by`` features: the index of the event's
    key among its model's keys (the last: other), -1 for a model without segments."""
    columns = "".join(f", `{spec.names[column]}`" for column in _segment_columns(segments, spec))
    return f"dw_segment(model{columns})"


def segment_spec_json(segments: Mapping[str, tuple[tuple[str, ...], tuple[SegmentKey, ...]]],
                      spec: FeatureColumnSpec) -> str:
    """The spec of Java ``EventSegment``: per segmented model, which of its arguments after the model hold
    its ``by`` features, and its top keys (all but the other, last) as the values they stand for: the rule
    of pipeline/segments.py (a null value is ``(missing)``; a value named like a reserved segment is escaped,
    and compared as the value it stands for)."""
    columns = _segment_columns(segments, spec)
    return json.dumps({model: {"args": [columns.index(spec.columns_of[model][name]) for name in by],
                               "keys": [[segment_value(name) for name in key] for key in keys[:-1]]}
                       for model, (by, keys) in segments.items()})


def _segment_columns(segments: Mapping[str, tuple[tuple[str, ...], tuple[SegmentKey, ...]]],
                     spec: FeatureColumnSpec) -> list[int]:
    """The feature columns that hold some segmented model's ``by`` features, ascending."""
    return sorted({spec.columns_of[model][name] for model, (by, _) in segments.items() for name in by})


def segments_json(segments: Mapping[str, tuple[tuple[str, ...], tuple[SegmentKey, ...]]],
                  config: MonitorConfig | None = None) -> str:
    """The segments spec of Java ``MergeSegments``: ``{model: {by: [...], keys: [[...], ...], sample_size: n}}``
    (``sample_size``: the model's ``segments.sample_size`` in ``config``; without it Java's default, 500)."""
    def spec(model: str, by: tuple[str, ...], keys: tuple[SegmentKey, ...]) -> dict:
        out: dict = {"by": list(by), "keys": [list(key) for key in keys]}
        found = config.model(model) if config is not None else None
        segmenting = found.segments if found is not None else None
        if segmenting is not None:
            out["sample_size"] = segmenting.sample_size
        return out
    return json.dumps({model: spec(model, by, keys) for model, (by, keys) in segments.items()})


def without_route_secrets(config: MonitorConfig) -> MonitorConfig:
    """``config`` with its alert routes' literal secrets left out: the job never delivers, and what it is
    given reaches Flink's job graph (alerting.rules.AlertRules.for_job)."""
    if not config.alerting:
        return config
    from driftwarden.alerting.rules import parse_rules

    return config.model_copy(update={"alerting": parse_rules(config.alerting).for_job()})


def run_drift_job(config: MonitorConfig, store_url: str, reference_path: str | None = None,
                  bounded: bool = False, parallelism: int = 1, checkpoint_interval_ms: int = 10_000,
                  checkpoint_dir: str | None = None, resume_from: str | None = None,
                  wait: bool = True, bundle_size: int = 5000):
    """Build and start the job; wait for it when ``wait`` (a bounded job ends at the topic's end)."""
    config = without_route_secrets(config)
    make_engine(store_url).dispose()  # create the tables once, before parallel sinks open the store
    _, t_env = make_table_env(parallelism=parallelism, checkpoint_interval_ms=checkpoint_interval_ms,
                              checkpoint_dir=checkpoint_dir, resume_from=resume_from, bundle_size=bundle_size)
    segments = live_segments(config, reference_path)
    register(t_env, config, store_url, reference_path, bounded, segments, parallelism)
    result = StatementRunner(t_env).execute_sql(window_statement(config, segments))
    if wait:
        result.wait()
    return result


def job_parser() -> argparse.ArgumentParser:
    """The job's own command line (``driftwarden run`` builds it; deploy/k8s/flinkdeployment.yaml writes it)."""
    parser = argparse.ArgumentParser(description="driftwarden streaming drift job", allow_abbrev=False)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--store-url", required=True)
    parser.add_argument("--bootstrap-servers", help="Kafka; default: the config's (driftwarden.core.endpoints)")
    parser.add_argument("--reference")
    parser.add_argument("--bounded", action="store_true")
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--checkpoint-interval-ms", type=int, default=10_000)
    parser.add_argument("--checkpoint-dir")
    parser.add_argument("--resume-from")
    parser.add_argument("--kafka-secrets", type=Path, help="folder of the Kafka secrets `driftwarden run` moved out "
                        "of the environment (jobs/job_secrets.py)")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Command line used by `flink run -pym driftwarden.jobs.drift_job` and by `driftwarden run`."""
    args = job_parser().parse_args(argv)
    config = load_config(args.config).with_bootstrap_servers(args.bootstrap_servers)
    if args.kafka_secrets:
        from driftwarden.jobs.job_secrets import with_secret_files

        config = with_secret_files(config, args.kafka_secrets)
    run_drift_job(config, args.store_url, args.reference, args.bounded, args.parallelism,
                  args.checkpoint_interval_ms, args.checkpoint_dir, args.resume_from)


if __name__ == "__main__":
    main(sys.argv[1:])
