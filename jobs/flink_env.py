"""Flink table environments for driftwarden jobs: jars, configuration, the Java event-time UDF."""

from __future__ import annotations

import os
from pathlib import Path

from driftwarden.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
JAR_DIR = Path(os.environ.get("DRIFTWARDEN_CACHE_DIR", REPO / ".cache")) / "jars"
CONNECTOR_JAR = "flink/flink-sql-connector-kafka-5.0.0-2.2.jar"
UDF_JAR = "udf/driftwarden-flink-udf.jar"
EVENT_MILLIS_UDF = "dev.driftwarden.flink.EventTimeMillis"


def job_jars() -> list[str]:
    """file:// URLs of the jars every job needs; ConfigError when bootstrap has not fetched them."""
    jars = [JAR_DIR / CONNECTOR_JAR, JAR_DIR / UDF_JAR]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise ConfigError(f"missing jar(s) {', '.join(missing)}: run scripts/bootstrap.sh")
    return [j.as_uri() for j in jars]


def make_table_env(parallelism: int = 1, checkpoint_interval_ms: int = 10_000, streaming: bool = True):
    """A StreamTableEnvironment with the Kafka connector, checkpointing and our UDF registered."""
    from pyflink.common import Configuration
    from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
    from pyflink.table import EnvironmentSettings, StreamTableEnvironment

    config = Configuration()
    config.set_string("pipeline.jars", ";".join(job_jars()))
    config.set_string("table.local-time-zone", "UTC")
    config.set_string("python.fn-execution.bundle.size", "5000")
    config.set_string("python.fn-execution.arrow.batch.size", "5000")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(parallelism)
    if checkpoint_interval_ms > 0:
        env.enable_checkpointing(checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    settings = EnvironmentSettings.in_streaming_mode() if streaming else EnvironmentSettings.in_batch_mode()
    t_env = StreamTableEnvironment.create(env, environment_settings=settings)
    t_env.create_java_temporary_system_function("DW_EVENT_MILLIS", EVENT_MILLIS_UDF)
    return env, t_env
