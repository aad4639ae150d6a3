"""The drift job's plan: the per-event work runs in the Kafka source's task (jobs/drift_job.py).

Every record is read, checked and added to its window's partial summary by ``SourceSummaries``,
chained to the source: no exchange and no row per event on the way. The only exchanges by hash
feed window aggregates: the partial summaries of the records Python validated (by model, segment
and shard), and the merge of all partials per (model, window), which reads the source task's
partials without another aggregate between them.
"""

from __future__ import annotations

import json

import pytest

from jobs.drift_job import register, window_statement
from jobs.flink_env import make_table_env
from jobs.segments import other_key
from schemas.config import load_config
from tests.job_helpers import write_config


def _plan_nodes(tmp_path, segments: dict, parallelism: int) -> list[dict]:
    """The job graph's nodes as Flink's JSON execution plan lists them (nothing runs)."""
    config = load_config(write_config(tmp_path / "config.yaml", "plan-topic", "127.0.0.1:1"))
    _, t_env = make_table_env(parallelism=parallelism, checkpoint_interval_ms=0)
    register(t_env, config, f"sqlite:///{tmp_path / 'store.db'}", None, True, segments, parallelism)
    from pyflink.table import ExplainDetail

    plan = t_env.explain_sql(window_statement(config, segments), ExplainDetail.JSON_EXECUTION_PLAN)
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
