"""The smoke job: count events per (model, 10 s event-time window) from Kafka into the SQL store.

The first end-to-end path: a real topic, the Kafka connector, event-time windows, the store.
Runs on the embedded MiniCluster (``python -m jobs.smoke_job``) or on a cluster
(``flink run -py jobs/smoke_job.py``); both write the same rows.
"""

from __future__ import annotations

import argparse
import sys

from driftwarden.store import make_engine
from jobs.flink_env import make_table_env
from jobs.sinks import store_window_counts
from jobs.source import kafka_source_ddl
from schemas.config import SourceConfig

SMOKE_WINDOW_MS = 10_000


def build_smoke_insert(t_env, source: SourceConfig, store_url: str, window_ms: int = SMOKE_WINDOW_MS) -> str:
    """Register tables and functions; return the INSERT statement of the smoke pipeline."""
    t_env.execute_sql(kafka_source_ddl("events", source, out_of_orderness_ms=5_000, bounded=True))
    t_env.execute_sql("CREATE TEMPORARY TABLE done (n INT) WITH ('connector' = 'blackhole')")
    t_env.create_temporary_function("dw_store_window_counts", store_window_counts(store_url, window_ms))
    seconds = window_ms // 1000
    return f"""
INSERT INTO done
SELECT dw_store_window_counts(model, first_ms, events) FROM (
  SELECT DW_MODEL(`value`) AS model,
         MIN(DW_EVENT_MILLIS(`value`)) AS first_ms,
         COUNT(*) AS events
  FROM events
  WHERE DW_EVENT_MILLIS(`value`) IS NOT NULL
    AND DW_MODEL(`value`) IS NOT NULL
  GROUP BY DW_MODEL(`value`), TUMBLE(et, INTERVAL '{seconds}' SECOND)
)"""


def run_smoke(topic: str, bootstrap: str, store_url: str, parallelism: int = 1) -> None:
    """Run the smoke job to the end of the topic (bounded) and return when it finished."""
    make_engine(store_url).dispose()  # create the tables once, before the sink opens the store
    _, t_env = make_table_env(parallelism=parallelism, checkpoint_interval_ms=0)
    source = SourceConfig(topics=[topic], bootstrap_servers=bootstrap, group_id=f"smoke-{topic}")
    t_env.execute_sql(build_smoke_insert(t_env, source, store_url)).wait()


def main(argv: list[str] | None = None) -> None:
    """Command line of the smoke job (used by `flink run -py` and by tests)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--bootstrap", default="127.0.0.1:59092")
    parser.add_argument("--store-url", required=True)
    parser.add_argument("--parallelism", type=int, default=1)
    args = parser.parse_args(argv)
    run_smoke(args.topic, args.bootstrap, args.store_url, args.parallelism)


if __name__ == "__main__":
    main(sys.argv[1:])
