"""The streaming drift job: Kafka in, summaries per (model, window), gate, deep check, results out.

Job graph (one Flink job; the per-event path stays in the JVM)::

    Kafka (raw JSON, per-partition watermarks on event time; event time and model read in Java)
      ├─ turned away in the JVM, each kept by ValidateRecord (Python) in the dead letters
      │  (store + <topic>.dlq) with its reason:
      │    no readable event time or model (Python names the exact reason);
      │    event time too far ahead of the record's Kafka timestamp: "future" (it never moved
      │    the watermark: see jobs/source.py); late (its window already fired): "late"
      └─ on time: features read in Java where Java can vouch for the record (DW_FEATURES), else
         validated in Python (ValidateRecord again; rejects ─► dead letters)
           └─► TUMBLE(model, shard) ─► WindowSummaryAgg (Java: histogram / capped counts /
               bottom-k sample, per event; shards spread one model over every subtask)
                 └─► TUMBLE(model) ─► MergeSummaries (Java: the partials, merged exactly)
                       └─► analyze + store results and alerts (Python, once per window)

Invariant (tested): read = valid + rejected, and valid = windowed + late. A late record is kept
as "late" without its features being validated.
Run embedded (``python -m jobs.drift_job --config ...``) or on a cluster (``flink run -py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Mapping

from core.store import make_engine
from jobs.dead_letters import REASON_SEPARATOR
from jobs.feature_spec import FeatureColumnSpec
from jobs.flink_env import StatementRunner, make_table_env, register_segment_function, register_window_aggregate
from jobs.segments import SegmentKey, other_key, segment_value
from jobs.source import kafka_source_ddl, sql_literal
from jobs.udfs import ENVELOPE, analyze_window_udf, validate_record_udtf
from schemas.config import MonitorConfig, load_config

log = logging.getLogger(__name__)

EVENT_MS = "COALESCE(DW_EVENT_MILLIS(`value`), 0)"
ON_TIME = "NOT envelope_bad AND NOT `future` AND NOT late"


def register(t_env, config: MonitorConfig, store_url: str, reference_path: str | None, bounded: bool,
             segments: Mapping[str, tuple] | None = None, parallelism: int = 1) -> None:
    """Create the source, the sink table, the UDFs and the views of the job (``segments``: :func:`live_segments`;
    ``parallelism``: the job's, which sets its shards: :func:`shard_count`)."""
    t_env.execute_sql(kafka_source_ddl("events", config.source, config.window.out_of_orderness_ms, bounded,
                                       config.window.watermark_emit, config.window.max_future_skew_ms))
    t_env.execute_sql("CREATE TEMPORARY TABLE done (n INT) WITH ('connector' = 'blackhole')")
    spec = FeatureColumnSpec.from_config(config)
    register_window_aggregate(t_env, "dw_window_summary", spec.aggregate_spec(config), segments_json(segments or {}))
    if segments:
        register_segment_function(t_env, "dw_segment", segment_spec_json(segments, spec))
    t_env.create_temporary_function("dw_validate", validate_record_udtf(config, store_url))
    t_env.create_temporary_function("dw_analyze", analyze_window_udf(config, store_url, reference_path))
    size = config.window.size_ms
    # envelope check in Java: no event time or no model -> dead letters (the sink names the exact
    # reason); the features of records Java vouches for arrive as typed columns (jobs/feature_spec.py)
    features_spec = sql_literal(spec.to_json())
    t_env.execute_sql(f"""CREATE TEMPORARY VIEW checked AS
SELECT `value`, `topic`, `partition`, `offset`, et, `future`, {EVENT_MS} AS event_ms, DW_MODEL(`value`) AS model,
       DW_EVENT_MILLIS(`value`) IS NULL OR COALESCE(DW_MODEL(`value`), '') = '' AS envelope_bad,
       DW_FEATURES(`value`, {features_spec}) AS f,
       DW_PREVIOUS_MARK(CASE WHEN `future` THEN 0 ELSE {EVENT_MS} END - {config.window.out_of_orderness_ms})
         OVER (PARTITION BY `topic`, `partition` ORDER BY pt ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
         AS partition_mark
FROM events""")
    t_env.execute_sql(f"""CREATE TEMPORARY VIEW classified AS
SELECT *, {late_sql(size)} AS late FROM checked""")
    vouched = ", ".join(f"f.`{name}` AS `{name}`" for name in spec.names)
    names = ", ".join(f"`{name}`" for name in ["unknown", *spec.names])
    validated = ", ".join(f"v.`{name}`" for name in ["unknown", *spec.names])
    # everything else goes to Python once: turned away (dead letters) or validated (a row if valid).
    # Each branch gives its rows' shard (and segment), in the column order of the window aggregate's
    # input, so that the union feeds its exchange directly: any step after the union would be a task
    # of its own, one more hand-over of every row (measured: 1.4 us per event in that task alone).
    outer = ("SELECT model, " + (f"{segment_sql(segments, spec)} AS segment, " if segments else "")
             + f"MOD(`offset`, {shard_count(parallelism)}) AS shard, event_ms, `topic`, `partition`, `offset`, "
             + f"{names}, et FROM")
    t_env.execute_sql(f"""CREATE TEMPORARY VIEW valid_rows AS
{outer} (
  SELECT model, et, event_ms, `topic`, `partition`, `offset`, 0 AS `unknown`, {vouched}
  FROM classified WHERE {ON_TIME} AND f.`ok`)
UNION ALL
{outer} (
  SELECT model, et, event_ms, `topic`, `partition`, `offset`, {validated}
  FROM classified, LATERAL TABLE(dw_validate(`topic`, `partition`, `offset`, {turned_away_sql(config)}, model,
                                             event_ms, `value`)) AS v({names})
  WHERE NOT ({ON_TIME} AND f.`ok`))""")


def late_sql(size_ms: int) -> str:
    """SQL of the late rule: the event's window ends at or below its partition's watermark so far.

    The partition's own watermark (``partition_mark``, Java ``PreviousMark``: kept in keyed state,
    restored with the offsets) makes lateness a function of the partition's order alone: the same
    on every run, after a resume and in replay (``replay/windowing.py``). The job-wide watermark is
    never ahead of it, except when ``window.idleness`` lets it pass an idle partition: an event
    of a window that already fired that way is late too (Flink would drop it unseen).
    """
    last_ms = f"event_ms - MOD(event_ms, {size_ms}) + {size_ms} - 1"
    return (f"(COALESCE({last_ms} <= partition_mark, FALSE) OR "
            f"COALESCE(TO_TIMESTAMP_LTZ({last_ms}, 3) <= CURRENT_WATERMARK(et), FALSE))")


def turned_away_sql(config: MonitorConfig) -> str:
    """SQL of the JVM's verdict on a record (see :class:`jobs.udfs.ValidateRecord`): NULL when it is on time."""
    future = f"future{REASON_SEPARATOR}event time more than {config.window.max_future_skew} ahead of its Kafka record's timestamp"
    return (f"CASE WHEN envelope_bad THEN '{ENVELOPE}' WHEN `future` THEN '{future.replace(chr(39), chr(39) * 2)}' "
            "WHEN late THEN 'late' ELSE CAST(NULL AS STRING) END")


#: Partial summaries per subtask: a window's events are summarized in this many shards per subtask
#: (by Kafka offset), so one hot model is spread over every subtask; the partials then merge.
SHARDS_PER_SUBTASK = 4


def shard_count(parallelism: int) -> int:
    """How many partial summaries a (model[, segment], window) is built in (a row's ``shard``: its
    Kafka offset modulo this): one at parallelism 1, else :data:`SHARDS_PER_SUBTASK` per subtask."""
    return 1 if parallelism == 1 else SHARDS_PER_SUBTASK * parallelism


def window_statement(config: MonitorConfig,
                     segments: Mapping[str, tuple[tuple[str, ...], tuple[SegmentKey, ...]]] | None = None) -> str:
    """The job's one INSERT: window summaries, merged, analyzed (dead letters are kept on the way).

    ``segments`` (:func:`live_segments`): per segmented model, its ``by`` features and its segment
    keys (the other segment's last); their partials are kept per segment, then merged per window
    into one segmented summary (Java ``MergeSegments``, sketches/FORMAT.md kind 18).
    """
    seconds = config.window.size_ms / 1000
    columns = "".join(f", `{name}`" for name in FeatureColumnSpec.from_config(config).names)
    merge, segment = ("dw_merge_summaries(part)", "") if not segments else ("dw_merge_segments(part, segment)", "segment, ")
    # partial summaries per (model[, segment], shard, window), then merged per (model, window): a
    # cascaded window aggregation (the inner window's window_time is the outer one's time attribute)
    return f"""INSERT INTO done SELECT dw_analyze(summary) FROM (
              SELECT {merge} AS summary FROM (
                SELECT model, {segment}window_start, window_end, window_time,
                       dw_window_summary(model, event_ms, `topic`, `partition`, `offset`, `unknown`{columns}) AS part
                FROM TABLE(TUMBLE(TABLE valid_rows, DESCRIPTOR(et), INTERVAL '{seconds:g}' SECOND))
                GROUP BY model, {segment}shard, window_start, window_end, window_time)
              GROUP BY model, window_start, window_end)"""


def live_segments(config: MonitorConfig, reference_path: str | None) -> dict[str, tuple[tuple[str, ...], tuple]]:
    """Per segmented model: its ``by`` features and segment keys, top ones first and the other last.

    The keys come from the reference file (``reference build`` with segments), as in replay; a
    model whose reference has no segments by its ``by`` is summarized without them (logged once).
    """
    if reference_path is None or not any(m.segments for m in config.models):
        return {}
    from jobs.references import ReferenceSet

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
    of jobs/segments.py (a null value is ``(missing)``; a value named like a reserved segment is escaped,
    and compared as the value it stands for)."""
    columns = _segment_columns(segments, spec)
    return json.dumps({model: {"args": [columns.index(spec.columns_of[model][name]) for name in by],
                               "keys": [[segment_value(name) for name in key] for key in keys[:-1]]}
                       for model, (by, keys) in segments.items()})


def _segment_columns(segments: Mapping[str, tuple[tuple[str, ...], tuple[SegmentKey, ...]]],
                     spec: FeatureColumnSpec) -> list[int]:
    """The feature columns that hold some segmented model's ``by`` features, ascending."""
    return sorted({spec.columns_of[model][name] for model, (by, _) in segments.items() for name in by})


def segments_json(segments: Mapping[str, tuple[tuple[str, ...], tuple[SegmentKey, ...]]]) -> str:
    """The segments spec of Java ``MergeSegments``: ``{model: {by: [...], keys: [[...], ...]}}``."""
    return json.dumps({model: {"by": list(by), "keys": [list(key) for key in keys]}
                       for model, (by, keys) in segments.items()})


def run_drift_job(config: MonitorConfig, store_url: str, reference_path: str | None = None,
                  bounded: bool = False, parallelism: int = 1, checkpoint_interval_ms: int = 10_000,
                  checkpoint_dir: str | None = None, resume_from: str | None = None,
                  wait: bool = True, bundle_size: int = 5000):
    """Build and start the job; wait for it when ``wait`` (a bounded job ends at the topic's end)."""
    make_engine(store_url).dispose()  # create the tables once, before parallel sinks open the store
    _, t_env = make_table_env(parallelism=parallelism, checkpoint_interval_ms=checkpoint_interval_ms,
                              idleness_ms=config.window.idleness_ms, checkpoint_dir=checkpoint_dir,
                              resume_from=resume_from, bundle_size=bundle_size)
    segments = live_segments(config, reference_path)
    register(t_env, config, store_url, reference_path, bounded, segments, parallelism)
    result = StatementRunner(t_env).execute_sql(window_statement(config, segments))
    if wait:
        result.wait()
    return result


def main(argv: list[str] | None = None) -> None:
    """Command line used by `flink run -py jobs/drift_job.py` and by `driftwarden run`."""
    parser = argparse.ArgumentParser(description="driftwarden streaming drift job")
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--store-url", required=True)
    parser.add_argument("--reference")
    parser.add_argument("--bounded", action="store_true")
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--checkpoint-interval-ms", type=int, default=10_000)
    parser.add_argument("--checkpoint-dir")
    parser.add_argument("--resume-from")
    args = parser.parse_args(argv)
    run_drift_job(load_config(args.config), args.store_url, args.reference, args.bounded, args.parallelism,
                  args.checkpoint_interval_ms, args.checkpoint_dir, args.resume_from)


if __name__ == "__main__":
    main(sys.argv[1:])
