"""The smoke job: count events per (model, 10 s event-time window) from Kafka into the SQL store.

The first end-to-end path: a real topic, the Kafka connector, event-time windows, the store.
Runs on the embedded MiniCluster (``python -m jobs.smoke_job``) or on a cluster
(``flink run -py jobs/smoke_job.py``); both write the same rows.
"""

from __future__ import annotations

import argparse
import sys

from driftwarden.core.endpoints import bootstrap_servers
from driftwarden.core.store import make_engine
from driftwarden.jobs.flink_env import StatementRunner, make_table_env
from driftwarden.jobs.sinks import store_window_counts
from driftwarden.jobs.source import interval_sql, kafka_source_ddl
from driftwarden.schemas.config import SourceConfig

SMOKE_WINDOW_MS = 10_000


def build_smoke_insert(t_env, source: SourceConfig, store_url: str, window_ms: int = SMOKE_WINDOW_MS) -> str:
    """Register tables and functions; return the INSERT statement of the smoke pipeline."""
    t_env.execute_sql(kafka_source_ddl("events", source, out_of_orderness_ms=5_000, bounded=True))
    t_env.execute_sql("CREATE TEMPORARY TABLE done (n INT) WITH ('connector' = 'blackhole')")
    t_env.create_temporary_function("dw_store_window_counts", store_window_counts(store_url, window_ms))
    return f"""
INSERT INTO done
SELECT dw_store_window_counts(model, first_ms, events) FROM (
  SELECT DW_MODEL(`value`) AS model,
         MIN(DW_EVENT_MILLIS(`value`)) AS first_ms,
         COUNT(*) AS events
  FROM events
  WHERE DW_EVENT_MILLIS(`value`) IS NOT NULL
    AND DW_MODEL(`value`) IS NOT NULL
  GROUP BY DW_MODEL(`value`), TUMBLE(et, {interval_sql(window_ms)})
)"""


def run_smoke(topic: str, bootstrap: str, store_url: str, parallelism: int = 1) -> None:
    """Run the smoke job to the end of the topic (bounded) and return when it finished."""
    make_engine(store_url).dispose()  # create the tables once, before the sink opens the store
    _, t_env = make_table_env(parallelism=parallelism, checkpoint_interval_ms=0)
    source = SourceConfig(topics=[topic], bootstrap_servers=bootstrap, group_id=f"smoke-{topic}")
    StatementRunner(t_env).execute_sql(build_smoke_insert(t_env, source, store_url)).wait()


def produce_smoke_events(topic: str, bootstrap: str, count: int) -> None:
    """Create ``topic`` (2 partitions) if needed and publish ``count`` events of three models."""
    import time

    import orjson
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep a reference until the futures resolve
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        try:
            future.result(30)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    start = int(time.time() * 1000) - count * 5
    for i in range(count):
        event = {"event_time": start + i * 5, "model": f"model-{i % 3}", "features": {"x": i % 17 / 17}}
        producer.produce(topic, orjson.dumps(event))
        if i % 5000 == 0:
            producer.poll(0)
    producer.flush(30)


def print_counts(store_url: str) -> None:
    """Print what the smoke job stored: windows and events per model."""
    from sqlalchemy import func, select

    from driftwarden.schemas.tables import window_counts

    with make_engine(store_url).connect() as conn:
        rows = conn.execute(select(window_counts.c.model, func.count(), func.sum(window_counts.c.events))
                            .group_by(window_counts.c.model).order_by(window_counts.c.model)).all()
    for model, windows, events in rows:
        print(f"  {model}: {events} events in {windows} windows of 10 s")
    print(f"results in {store_url} (table window_counts)")


def main(argv: list[str] | None = None) -> None:
    """Command line of the smoke job (used by `flink run -py`, `make smoke` and tests)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--bootstrap-servers", help="Kafka; default: $DRIFTWARDEN_BOOTSTRAP_SERVERS, else localhost:9092")
    parser.add_argument("--store-url", required=True)
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--produce", type=int, default=0, help="first publish this many events to the topic")
    args = parser.parse_args(argv)
    servers = bootstrap_servers(args.bootstrap_servers)
    if args.produce:
        produce_smoke_events(args.topic, servers, args.produce)
    run_smoke(args.topic, servers, args.store_url, args.parallelism)
    if args.produce:
        print_counts(args.store_url)


if __name__ == "__main__":
    main(sys.argv[1:])
