"""A statement planned on a py4j thread the planner never saw (FLINK-23020), and StatementRunner.

py4j serves each call on a free JVM thread of its own; when every one is busy (another Python thread
is in a call), it opens a new one. Calcite's metadata provider is a thread-local that Flink sets only
where the planner was built, so an INSERT planned on the new thread failed with
``NullPointerException: metadataHandlerProvider`` (seen twice in CI: the job never started). The
second time the INSERT ran in the runner, on a seeded thread: a view converted earlier on an unseeded
thread had left the planner's cluster a metadata query without the provider, which the runner now drops.
"""

from __future__ import annotations

import threading
import time

import pytest
from py4j.protocol import Py4JJavaError

from driftwarden.jobs.flink_env import StatementRunner, make_table_env

SOURCE = ("CREATE TEMPORARY TABLE src (x INT) WITH ('connector' = 'datagen', 'fields.x.kind' = 'sequence', "
          "'fields.x.start' = '1', 'fields.x.end' = '5')")
QUERY = "SELECT x + 1 AS y FROM src WHERE x > 2"  # a filter: the planner asks the metadata for its predicates


def on_a_new_jvm_thread(call):
    """``call()`` while every py4j connection is held by a sleeping call, so that py4j serves it on a new JVM thread."""
    from pyflink.java_gateway import get_gateway

    gateway = get_gateway()
    idle = len(gateway._gateway_client.deque)  # py4j's idle connections, one JVM thread each
    sleepers = [threading.Thread(target=gateway.jvm.java.lang.Thread.sleep, args=(3000,)) for _ in range(max(idle, 1))]
    for sleeper in sleepers:
        sleeper.start()
    time.sleep(0.5)
    try:
        return call()
    finally:
        for sleeper in sleepers:
            sleeper.join()


@pytest.fixture
def t_env():
    _, env = make_table_env(parallelism=1)
    env.execute_sql(SOURCE)
    return env


def test_a_statement_planned_on_a_new_py4j_thread_fails_without_the_runner(t_env):
    """The failure the runner exists for, made to happen: if a Flink upgrade fixes it, this says so."""
    with pytest.raises(Py4JJavaError, match="metadataHandlerProvider"):
        on_a_new_jvm_thread(lambda: t_env.execute_sql(QUERY))


def test_the_runner_plans_on_a_new_py4j_thread(t_env):
    runner = StatementRunner(t_env)
    result = on_a_new_jvm_thread(lambda: runner.execute_sql(QUERY))
    with result.collect() as rows:
        assert sorted(row[0] for row in rows) == [4, 5, 6]


VIEW = f"CREATE TEMPORARY VIEW v AS {QUERY}"


def test_a_view_made_on_a_new_py4j_thread_breaks_later_statements_without_the_runner(t_env):
    """Converting the view's query on a thread without the provider leaves the planner's cluster holding a
    metadata query made without one; the next statement fails on it, even on the thread Flink seeded
    (how the demo's job failed once in CI, in the runner, before the runner dropped that query)."""
    on_a_new_jvm_thread(lambda: t_env.execute_sql(VIEW))
    with pytest.raises(Py4JJavaError, match="metadataHandlerProvider"):
        t_env.execute_sql("SELECT y FROM v WHERE y > 4")


def test_the_runner_plans_after_a_view_was_made_on_a_new_py4j_thread(t_env):
    on_a_new_jvm_thread(lambda: t_env.execute_sql(VIEW))
    with StatementRunner(t_env).execute_sql("SELECT y FROM v WHERE y > 4").collect() as rows:
        assert sorted(row[0] for row in rows) == [5, 6]


def test_a_runner_made_on_another_py4j_thread_runs_too(t_env):
    """A runner made where the job's jar is loaded afresh (another JVM thread: another context class
    loader, so another PlannerThread class) still runs: py4j caches a method by its class's name, so
    every runner of the process is one PlannerThread object."""
    first = StatementRunner(t_env)
    with first.execute_sql(QUERY).collect() as rows:
        assert sorted(row[0] for row in rows) == [4, 5, 6]
    second = on_a_new_jvm_thread(lambda: StatementRunner(t_env))
    with second.execute_sql(QUERY).collect() as rows:
        assert sorted(row[0] for row in rows) == [4, 5, 6]
