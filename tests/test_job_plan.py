"""The drift job's plan: the per-event work runs in the Kafka source's task (jobs/drift_job.py).

Every record is read, checked and added to its window's partial summary by ``SourceSummaries``,
chained to the source: no exchange and no row per event on the way. The only exchanges by hash
feed window aggregates: the partial summaries of the records Python validated (by model, segment
and shard), and the merge of all partials per (model, window), which reads the source task's
partials without another aggregate between them.
"""

from __future__ import annotations

import json
import re

import pytest

from driftwarden.jobs.drift_job import register, window_statement
from driftwarden.jobs.flink_env import make_table_env
from driftwarden.pipeline.segments import other_key
from driftwarden.jobs.source import kafka_source_ddl
from driftwarden.schemas.config import SourceConfig, load_config
from tests.job_helpers import write_config


def _plan(tmp_path, segments: dict, parallelism: int, **window: object) -> str:
    """Flink's plan of the drift job (its JSON execution plan last; nothing runs); ``window``: the config's
    window section (10 s windows, 2 s out-of-orderness unless given)."""
    config = load_config(write_config(tmp_path / "config.yaml", "plan-topic", "127.0.0.1:1", **window))
    _, t_env = make_table_env(parallelism=parallelism, checkpoint_interval_ms=0)
    register(t_env, config, f"sqlite:///{tmp_path / 'store.db'}", None, True, segments, parallelism)
    from pyflink.table import ExplainDetail

    return t_env.explain_sql(window_statement(config, segments), ExplainDetail.JSON_EXECUTION_PLAN)


def _plan_nodes(tmp_path, segments: dict, parallelism: int) -> list[dict]:
    """The job graph's nodes as Flink's JSON execution plan lists them (nothing runs)."""
    plan = _plan(tmp_path, segments, parallelism)
    return json.loads(plan[plan.index("{", plan.index("== Physical Execution Plan ==")):])["nodes"]


def _upstream(node: dict, by_id: dict[int, dict], avoiding: dict | None = None) -> list[dict]:
    """The nodes ``node`` reads from, directly or through others (not through ``avoiding``), nearest first."""
    seen, queue = [], [p["id"] for p in node.get("predecessors", [])]
    while queue:
        current = by_id[queue.pop(0)]
        if current not in seen and current is not avoiding:
            seen.append(current)
            queue += [p["id"] for p in current.get("predecessors", [])]
    return seen


@pytest.mark.parametrize("segmented, parallelism", [(False, 1), (True, 1), (False, 2)])
def test_the_per_event_work_is_chained_to_the_source(tmp_path, segmented: bool, parallelism: int) -> None:
    """SourceSummaries reads the Kafka source directly (forward, same parallelism: one task); every hash
    exchange feeds a window aggregate; the merge reaches the source task's partials through no other
    aggregate, and the Python path's partial aggregate groups by model (segment) and shard."""
    segments = {"m": (("c0",), (("a",), other_key(("c0",))))} if segmented else {}
    nodes = _plan_nodes(tmp_path, segments, parallelism)
    by_id = {node["id"]: node for node in nodes}
    [summaries] = [n for n in nodes if n["type"] == "SourceSummaries"]
    [read] = summaries["predecessors"]
    source = by_id[read["id"]]
    assert read["ship_strategy"] == "FORWARD" and source["type"] == "Source: kafka", (read, source)
    assert summaries["parallelism"] == source["parallelism"] == parallelism
    hashed = [n for n in nodes if any(p["ship_strategy"] == "HASH" for p in n.get("predecessors", []))]
    assert len(hashed) == 2 and all("WindowAggregate" in n["contents"] for n in hashed), hashed
    merge = next(n for n in nodes if "dw_merge_" in n["contents"])
    python_partials = next(n for n in nodes if "dw_window_summary(" in n["contents"])
    assert {n["id"] for n in hashed} == {merge["id"], python_partials["id"]}
    source_side = _upstream(merge, by_id, avoiding=python_partials)
    assert summaries in source_side and not [n for n in source_side if "WindowAggregate" in n["contents"]], source_side
    assert ("groupBy=[model, segment, shard]" if segmented else "groupBy=[model, shard]") in python_partials["contents"]


@pytest.mark.parametrize("size, planned", [("100s", "100 s"), ("1h", "1 h"), ("1234567ms", "1234567 ms")])
def test_windows_of_any_length_plan_to_the_millisecond(tmp_path, size: str, planned: str) -> None:
    """A window of 100 s or more plans (``INTERVAL '100' SECOND`` does not: its field holds 2 digits), and both
    of the job's windows (the Python path's partials, the merge) are the config's size to the millisecond (as
    Flink prints it: in its largest whole unit)."""
    plan = _plan(tmp_path, {"m": (("c0",), (("a",), other_key(("c0",))))}, 1, size=size, out_of_orderness="150s")
    sizes = re.findall(r"TUMBLE\(time_col=\[et\], size=\[([^\]]*)\]", plan)
    assert len(sizes) >= 2 and set(sizes) == {planned}, sizes


def test_the_sql_source_takes_an_out_of_orderness_of_minutes() -> None:
    """The SQL Kafka source's watermark (the smoke job's) plans with 150 s of out-of-orderness, exactly."""
    _, t_env = make_table_env(parallelism=1, checkpoint_interval_ms=0)
    t_env.execute_sql(kafka_source_ddl("events", SourceConfig(topics=["t"], bootstrap_servers="127.0.0.1:1"), 150_250,
                                       bounded=True))
    plan = t_env.explain_sql("SELECT COUNT(*) FROM events")
    assert re.search(r"watermark=\[-\([^,\]]+, 150250:INTERVAL DAY\(2\) TO SECOND\(3\)\)\]", plan), plan
