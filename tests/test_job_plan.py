"""The drift job's plan: every row crosses as few tasks as the job needs (jobs/drift_job.py).

Rows go from the source to the partition-mark OVER (one exchange, by Kafka partition) and from
there straight into the window aggregate's exchange: each branch of the union (vouched in Java,
validated in Python) gives its rows' shard and segment itself. A step after the union would be a
task of its own at any parallelism (an operator with two inputs is never chained), one more
hand-over of every row: measured at 1.4 us per event in that task alone (bench/bench_job.py).
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


@pytest.mark.parametrize("segmented, parallelism", [(False, 1), (True, 1), (False, 2)])
def test_the_union_feeds_the_window_aggregate_directly(tmp_path, segmented: bool, parallelism: int) -> None:
    """The partial window aggregate's inputs are the two branches themselves, by hash exchange (no
    operator of two inputs between them), and its grouping reads the branches' shard (and segment)."""
    segments = {"m": (("c0",), (("a",), other_key(("c0",))))} if segmented else {}
    nodes = _plan_nodes(tmp_path, segments, parallelism)
    by_id = {node["id"]: node for node in nodes}
    partial = next(n for n in nodes if "dw_window_summary(" in n["contents"])
    inputs = partial.get("predecessors", [])
    assert [p["ship_strategy"] for p in inputs] == ["HASH", "HASH"], partial
    assert all(len(by_id[p["id"]].get("predecessors", [])) == 1 for p in inputs), [by_id[p["id"]] for p in inputs]
    assert ("groupBy=[model, segment, shard]" if segmented else "groupBy=[model, shard]") in partial["contents"]
    assert not [n for n in nodes if len(n.get("predecessors", [])) > 1 and n is not partial]
