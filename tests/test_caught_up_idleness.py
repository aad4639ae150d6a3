"""The job's idleness rule: a partition lets the watermark pass it only when it is caught up.

The rule (jobs/java ``PartitionProgress``) is driven here through the real class with explicit
times; ``SplitOwner`` is checked against the Kafka connector's own enumerator; and a live job on
a topic with an empty partition shows the empty (caught-up) partition does not hold windows back.
The faults that make a partition fall behind are tests/test_faults.py's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
import yaml
from pyflink.java_gateway import get_gateway

from driftwarden.jobs.flink_env import _jvm_with_job_jars, _start_gateway_with_heap
from driftwarden.schemas.events import parse_event_time
from tests.job_helpers import T0, WINDOW_MS, stored_counts, stream, write_warmup_config
from tests.kafka_helpers import create_topic, produce, sasl_ssl_security

S = 1_000_000_000  # nanoseconds
IDLENESS = 5 * S
EARLIEST, LATEST = -2, -1  # Kafka split sentinels (KafkaPartitionSplit)
UNKNOWN = -(2**63)


@pytest.fixture(scope="module")
def jvm():
    _start_gateway_with_heap()
    return _jvm_with_job_jars()


def progress(jvm, start: int):
    return jvm.dev.driftwarden.flink.PartitionProgress(start)


def checked_every_second(p, end: int, seconds: range) -> None:
    """A check each second of ``seconds`` finding the partition ending at ``end``, its position read now."""
    for t in seconds:
        p.checked(p.position(), p.position(), end, t * S)


def test_a_caught_up_partition_is_idle_only_after_idleness_of_checks(jvm) -> None:
    p = progress(jvm, 10)
    checked_every_second(p, 10, range(0, 5))
    assert not p.idleNow(IDLENESS)  # caught up from 0 s to 4 s: not yet
    checked_every_second(p, 10, range(5, 6))
    assert p.idleNow(IDLENESS)


def test_a_partition_behind_holds_the_watermark_however_long_it_is_silent(jvm) -> None:
    p = progress(jvm, 10)
    checked_every_second(p, 11, range(0, 3600))
    assert not p.idleNow(IDLENESS)


def test_an_unanswered_check_restarts_the_wait(jvm) -> None:
    """The broker away (no end known) is never "caught up": an idle partition is active again at once."""
    p = progress(jvm, 10)
    checked_every_second(p, 10, range(0, 6))
    assert p.idleNow(IDLENESS)
    p.checked(10, 10, UNKNOWN, 6 * S)
    assert not p.idleNow(IDLENESS)
    checked_every_second(p, 10, range(7, 12))
    assert not p.idleNow(IDLENESS)
    checked_every_second(p, 10, range(12, 13))
    assert p.idleNow(IDLENESS)


def test_a_record_read_ends_idleness_and_a_check_from_before_it_counts_for_nothing(jvm) -> None:
    p = progress(jvm, 10)
    checked_every_second(p, 10, range(0, 6))
    p.emitted(10)  # offset 10 read: position 11
    assert not p.idleNow(IDLENESS)
    for t in range(6, 20):
        p.checked(10, 10, 11, t * S)  # position read before the record: stale
    assert not p.idleNow(IDLENESS)
    checked_every_second(p, 11, range(20, 26))
    assert p.idleNow(IDLENESS)


def test_idleness_zero_never_lets_a_partition_pass(jvm) -> None:
    p = progress(jvm, 10)
    checked_every_second(p, 10, range(0, 100))
    assert not p.idleNow(0)


def test_a_split_starting_at_a_sentinel_counts_from_the_offset_it_stands_for(jvm) -> None:
    empty = progress(jvm, EARLIEST)
    for t in range(0, 6):  # earliest offset 7 of a partition ending at 7: nothing to read
        empty.checked(EARLIEST, 7, 7, t * S)
    assert empty.idleNow(IDLENESS)
    unread = progress(jvm, EARLIEST)
    for t in range(0, 60):
        unread.checked(EARLIEST, 0, 7, t * S)
        unread.checked(EARLIEST, UNKNOWN, 7, t * S)
    assert not unread.idleNow(IDLENESS)
    latest = progress(jvm, LATEST)
    latest.resolve(LATEST, 42)
    assert latest.position() == 42
    latest.emitted(42)
    latest.resolve(LATEST, 99)  # a record moved it already: the sentinel is gone
    assert latest.position() == 43


def test_split_owner_is_the_kafka_enumerators_rule(jvm) -> None:
    """A new partition is held for by the reader the connector's enumerator will assign it to."""
    enumerator = jvm.java.lang.Class.forName(
        "org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumerator", True,
        jvm.java.lang.Thread.currentThread().getContextClassLoader())
    partition_class = jvm.java.lang.Class.forName(
        "org.apache.flink.kafka.shaded.org.apache.kafka.common.TopicPartition", True,
        jvm.java.lang.Thread.currentThread().getContextClassLoader())
    types = get_gateway().new_array(jvm.java.lang.Class, 2)
    types[0], types[1] = partition_class, jvm.java.lang.Integer.TYPE
    method = enumerator.getDeclaredMethod("getSplitOwner", types)
    method.setAccessible(True)
    for topic in ("features", "faults-3f9a2c", "ünïcode-topic", "t"):
        for readers in (1, 2, 3, 7):
            for partition in range(12):
                args = get_gateway().new_array(jvm.java.lang.Object, 2)
                args[0], args[1] = jvm.org.apache.flink.kafka.shaded.org.apache.kafka.common.TopicPartition(
                    topic, partition), readers
                assert jvm.dev.driftwarden.flink.SplitOwner.of(topic, partition, readers) == method.invoke(None, args)


@pytest.mark.services
@pytest.mark.slow
def test_an_empty_partition_is_caught_up_and_holds_no_window_back(kafka_bootstrap, secure_kafka, topic_name,
                                                                  tmp_path) -> None:
    """Events on partition 0 only, under the production defaults (idleness 30 s): partition 1 has nothing to
    read, so after idleness it stops holding the watermark and partition 0's windows close and are stored.
    The job reads over SASL_SSL: the partition-end checks must connect as ``source.security`` says (a check
    that cannot reach the broker counts as behind, and the empty partition would hold every window)."""
    create_topic(kafka_bootstrap, topic_name, partitions=2)
    events = stream(6, 300)
    produce(kafka_bootstrap, topic_name, events, [0] * len(events))
    expected = Counter(("m", parse_event_time(e["event_time"]) // WINDOW_MS * WINDOW_MS) for e in events)
    closed = {key: n for key, n in expected.items() if key[1] < T0 + 5 * WINDOW_MS - 2_000}  # the watermark passes
    config = write_warmup_config(tmp_path / "config.yaml", topic_name, secure_kafka.sasl_ssl)
    settings = yaml.safe_load(config.read_text())
    settings["source"]["security"] = sasl_ssl_security(secure_kafka)
    config.write_text(yaml.safe_dump(settings))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    job = subprocess.Popen([sys.executable, "-m", "driftwarden.cli", "run", "-c", str(config), "--store-url", url,
                            "--checkpoint-dir", str(tmp_path / "chk")], start_new_session=True,
                           env={**os.environ, "DRIFTWARDEN_RUN_DIR": str(tmp_path / "run")},
                           stdout=open(tmp_path / "job.log", "wb"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        while (stored := _stored(url)) != closed:
            assert job.poll() is None and time.monotonic() < deadline, (
                f"windows stored {stored}, expected {closed}; the job's output ends:\n"
                f"{(tmp_path / 'job.log').read_text()[-3000:]}")
            time.sleep(2)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)


def _stored(url: str) -> dict:
    try:
        return dict(stored_counts(url))
    except Exception:  # noqa: BLE001 - the store is created by the job
        return {}
