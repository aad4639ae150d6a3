"""The live job's segment of an event (SQL ``dw_segment``, Java ``EventSegment``) is the segment replay gives it.

Replay cuts a window's events into segments with ``pipeline.segments`` (``segment_keys`` folded to the top keys);
the live job calls ``dw_segment`` in its SQL. Both are run here on the same rows, in a real Flink job (bounded):
several segmented models with different ``by`` features (two of them sharing a column), nulls (the missing
segment), values named like the reserved segments, values outside the top keys (other), a model without
segments (-1) and an unknown model.
"""

from __future__ import annotations

import itertools

import pyarrow as pa

from driftwarden.jobs.drift_job import register_segment_function, segment_spec_json, segment_sql
from driftwarden.jobs.feature_spec import FeatureColumnSpec
from driftwarden.jobs.flink_env import make_table_env
from driftwarden.pipeline.segments import MISSING, fold_to_top, other_key, segment_keys
from driftwarden.jobs.source import sql_literal
from driftwarden.schemas.config import MonitorConfig

CONFIG = MonitorConfig.model_validate({"models": [
    {"name": "shop", "features": {"x": "numeric", "country": "categorical"}, "segments": {"by": ["country"]}},
    {"name": "app", "features": {"device": "categorical", "country": "categorical"},
     "segments": {"by": ["device", "country"]}},
    {"name": "plain", "features": {"country": "categorical"}},
]})
#: each segmented model's by features and keys as live_segments gives them: top keys, the other last
SEGMENTS = {
    "shop": (("country",), (("US",), ("((other))",), (MISSING,), ("(((missing)))",), other_key(("country",)))),
    "app": (("device", "country"), (("ios", "US"), ("android", MISSING), (MISSING, "((other))"),
                                    other_key(("device", "country")))),
}
VALUES = ["US", "DE", "(other)", "(missing)", "((missing))", "ios", "android", None]


def _replay_segment(model: str, values: dict[str, str | None]) -> int:
    """The segment index replay's rule gives one event (pipeline/segments.py), -1 for an unsegmented model."""
    if model not in SEGMENTS:
        return -1
    by, keys = SEGMENTS[model]
    key = segment_keys({name: pa.array([values[name]], pa.string()) for name in by}, by)
    folded = fold_to_top(key, keys[:-1])[0]
    return keys.index(folded)


def test_the_live_segment_of_every_event_is_the_replay_one():
    spec = FeatureColumnSpec.from_config(CONFIG)
    country, device = spec.columns_of["shop"]["country"], spec.columns_of["app"]["device"]
    assert spec.columns_of["app"]["country"] == country  # one column shared by two segmented models
    rows = [(model, c, d) for model in ("shop", "app", "plain", "unknown")
            for c, d in itertools.product(VALUES, VALUES)]
    _, t_env = make_table_env(checkpoint_interval_ms=0)
    register_segment_function(t_env, "dw_segment", segment_spec_json(SEGMENTS, spec))

    def literal(value: str | None) -> str:
        return "CAST(NULL AS STRING)" if value is None else f"CAST({sql_literal(value)} AS STRING)"

    table = ", ".join(f"({literal(m)}, {literal(c)}, {literal(d)}, {i})" for i, (m, c, d) in enumerate(rows))
    query = (f"SELECT i, {segment_sql(SEGMENTS, spec)} FROM (VALUES {table}) "
             f"AS t(model, `{spec.names[country]}`, `{spec.names[device]}`, i)")
    with t_env.execute_sql(query).collect() as results:
        live = {row[0]: row[1] for row in results}
    expected = {i: _replay_segment(m, {"country": c, "device": d}) for i, (m, c, d) in enumerate(rows)}
    assert live == expected
    # every kind of outcome was met: each top key, the other segment, and no segments
    seen = {(rows[i][0], index) for i, index in live.items()}
    assert {("shop", i) for i in range(5)} | {("app", i) for i in range(4)} | {("plain", -1), ("unknown", -1)} == seen


def test_the_source_tasks_segment_lookup_is_the_replay_one(tmp_path):
    """The source task's allocation-free lookup (Java ``EventSegment.segmentOf``: a one-value key by its value, a
    longer one through a reused key holder) gives every event replay's segment, as ``dw_segment`` above does."""
    import json
    import subprocess

    from driftwarden.jobs.drift_job import _segment_columns
    from driftwarden.jobs.java_summary import SUMMARY_DUMP, flink_classpath, udf_jar

    spec = FeatureColumnSpec.from_config(CONFIG)
    columns = _segment_columns(SEGMENTS, spec)  # the lookup's arguments, in this order
    names = {spec.columns_of["shop"]["country"]: "country", spec.columns_of["app"]["device"]: "device"}
    rows = [(model, c, d) for model in ("shop", "app", "plain", "unknown", None)
            for c, d in itertools.product(VALUES, VALUES)]
    spec_file = tmp_path / "segments.json"
    spec_file.write_text(segment_spec_json(SEGMENTS, spec))
    lines = "".join(json.dumps({"model": m, "values": [{"country": c, "device": d}[names[col]] for col in columns]}) + "\n"
                    for m, c, d in rows)
    classpath = ":".join(str(p) for p in [udf_jar(), *flink_classpath()])
    out = subprocess.run(["java", "-cp", classpath, SUMMARY_DUMP, "--segment-lookup", str(spec_file)], input=lines,
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    expected = [_replay_segment(m, {"country": c, "device": d}) if m is not None else -1 for m, c, d in rows]
    assert [int(s) for s in out] == expected
    assert {("shop", i) for i in range(5)} | {("app", i) for i in range(4)} <= {(r[0], int(s)) for r, s in zip(rows, out)}
