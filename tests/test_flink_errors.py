"""A Java failure raised through PyFlink is told by its exceptions, not its frames (jobs/flink_errors.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from py4j.protocol import Py4JJavaError
from pyflink.util.exceptions import CatalogException

from driftwarden.jobs.flink_env import make_table_env
from driftwarden.jobs.flink_errors import is_stack_frame, java_failure

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def jvm():
    """The gateway's JVM, started as every job starts it (make_table_env)."""
    from pyflink.java_gateway import get_gateway

    make_table_env(parallelism=1)
    return get_gateway().jvm


def test_a_py4j_failure_names_each_exception_of_its_chain_without_frames(jvm):
    """A real Java throw (not a mapped type: py4j's own error): the wrapper that only repeats its cause is
    left out, a long message is cut and says how much, no frame survives."""
    inner = jvm.java.io.IOException("disk gone\nsecond line\nthird line\nfourth line")
    future = jvm.java.util.concurrent.CompletableFuture.failedFuture(jvm.java.lang.RuntimeException("outer", inner))
    with pytest.raises(Py4JJavaError) as raised:
        future.get()
    assert "\tat java.base/java.util.concurrent.CompletableFuture" in str(raised.value)  # the frames were there
    assert java_failure(raised.value) == ("java.lang.RuntimeException: outer\n"
                                          "  caused by: java.io.IOException: disk gone\n"
                                          "    second line\n"
                                          "    third line\n"
                                          "    (1 more line)")


def test_an_exception_pyflink_maps_to_its_own_type_is_named_too(jvm):
    """PyFlink raises its own exception for some Java types (a catalog's error here), with the trace as text."""
    _, t_env = make_table_env(parallelism=1)
    with pytest.raises(CatalogException) as raised:
        t_env.use_catalog("nowhere")
    assert java_failure(raised.value) == ("org.apache.flink.table.catalog.exceptions.CatalogException: "
                                          "A catalog with name [nowhere] does not exist.")


def test_a_python_error_is_not_a_java_failure():
    assert java_failure(ValueError("no")) is None


@pytest.mark.services
def test_a_job_that_cannot_start_ends_naming_its_cause_after_the_whole_trace(kafka_bootstrap, tmp_path):
    """`driftwarden run --resume` on a corrupt checkpoint: which checkpoint, then exit 1 with the chain's
    exceptions down to the root cause last, after every frame (for a bug report)."""
    config = tmp_path / "monitor.yaml"
    config.write_text(yaml.safe_dump({
        "source": {"topics": ["corrupt-checkpoint"], "bootstrap_servers": kafka_bootstrap, "group_id": "g-corrupt"},
        "window": {"size": "10s"}, "reference": {"mode": "warmup", "warmup_windows": 2},
        "models": [{"name": "m", "features": {"x": "numeric"}}]}))
    metadata = tmp_path / "checkpoints" / "0f3a" / "chk-3" / "_metadata"
    metadata.parent.mkdir(parents=True)
    metadata.write_bytes(b"\x00\x01 not a checkpoint" * 8)
    done = subprocess.run([sys.executable, "-m", "driftwarden.cli", "run", "-c", str(config), "--bounded", "--resume",
                           "--store-url", f"sqlite:///{tmp_path / 'r.db'}", "--checkpoint-dir",
                           str(tmp_path / "checkpoints")], cwd=REPO, capture_output=True, text=True, timeout=240)
    assert done.returncode == 1, done.stderr[-3000:]
    assert f"resuming from {metadata.parent.as_uri()}" in done.stderr
    trace, _, error = done.stderr.partition("ServiceError: the streaming job failed:\n")
    assert "\tat org.apache.flink.runtime.checkpoint.Checkpoints" in trace
    lines = error.strip().splitlines()
    assert lines[0] == "org.apache.flink.table.api.TableException: Failed to execute sql", error
    assert lines[-1].startswith("  caused by: java.io.IOException: Unexpected magic number."), error
    assert not any(is_stack_frame(line) for line in lines), error
