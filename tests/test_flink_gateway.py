"""The embedded job's gateway JVM never blocks on its own stderr (jobs/flink_env.py).

PyFlink starts the JVM with its stderr on a pipe that nothing reads: once 64 KiB were written,
every JVM thread that logs to stderr would block for good. The JVM here is PyFlink's real gateway,
started as the job starts it, in a process of its own so that a blocked JVM cannot hang the tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
WRITE_200_KIB_TO_JVM_STDERR = """
from driftwarden.jobs.flink_env import _start_gateway_with_heap
from pyflink.java_gateway import get_gateway

import os
_start_gateway_with_heap()
print("environment after the start:", os.environ.get("FLINK_LOG_DIR"), os.environ.get("JVM_ARGS"), flush=True)
jvm = get_gateway().jvm
collectors = ",".join(sorted(bean.getName() for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()))
print("collectors:", collectors, "max heap MiB:", jvm.java.lang.Runtime.getRuntime().maxMemory() // 2**20, flush=True)
jvm.java.util.logging.Logger.getLogger("driftwarden.test").severe("a JDK log record")
for i in range(200):
    jvm.java.lang.System.err.println("jvm line %03d " % i + "x" * 1000)
print("the JVM wrote 200 KiB to its stderr and went on", flush=True)
"""


def test_the_gateway_jvm_goes_on_after_writing_more_than_a_pipe_holds_to_its_stderr(tmp_path):
    done = subprocess.run([sys.executable, "-c", WRITE_200_KIB_TO_JVM_STDERR], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                                       "DRIFTWARDEN_RUN_DIR": str(tmp_path),
                                                       **_java_home()})
    assert "went on" in done.stdout, done.stderr[-3000:]
    # FLINK_LOG_DIR and JVM_ARGS were set for the JVM's start only: a job started later by this
    # process (in another run folder) does not inherit this one's log folder
    assert "environment after the start: None None" in done.stdout
    # the default heap and the parallel collector (jobs/flink_env.EMBEDDED_HEAP, EMBEDDED_GC)
    assert "collectors: PS MarkSweep,PS Scavenge max heap MiB:" in done.stdout, done.stdout
    assert int(done.stdout.split("max heap MiB:")[1].split()[0]) <= 512
    forwarded = [line for line in done.stderr.splitlines() if line.startswith("[flink jvm] jvm line")]
    # the lines reach our stderr in order, far beyond what the pipe holds (the last few may still be
    # in flight when the process exits: the forwarding thread is a daemon)
    assert len(forwarded) > 150 and forwarded[:3] == [f"[flink jvm] jvm line {i:03d} " + "x" * 1000 for i in range(3)]
    # the JDK's logging (gRPC's, inside Beam) goes to a file of the run folder, not to stderr
    assert "a JDK log record" not in done.stderr
    assert "a JDK log record" in (tmp_path / "logs" / "flink-embedded" / "flink-jvm-jdk.log.0").read_text()


LOG_THROUGH_A_CLOSED_CLASS_LOADER = """
from py4j.protocol import Py4JJavaError

from driftwarden.jobs.flink_env import _jvm_with_job_jars, _start_gateway_with_heap
from pyflink.java_gateway import get_gateway

_start_gateway_with_heap()
jvm = _jvm_with_job_jars()
try:
    jvm.dev.driftwarden.flink.EventSegment("not a segment spec")  # an exception thrown in a job jar's class
except Py4JJavaError as thrown:
    error = thrown.java_exception
closed = jvm.org.apache.flink.util.FlinkUserCodeClassLoaders.parentFirst(
    get_gateway().new_array(jvm.java.net.URL, 0), jvm.java.lang.ClassLoader.getSystemClassLoader(), None, True)
closed.close()  # what Flink does to a job's class loader when the job ends
logger = jvm.org.slf4j.LoggerFactory.getLogger("org.apache.kafka.common.utils.Utils")
thread = jvm.java.lang.Thread.currentThread()
before = thread.getContextClassLoader()
thread.setContextClassLoader(closed)  # a thread the job left behind: the Kafka admin client closing
logger.error("Failed to close the admin client", error)
thread.setContextClassLoader(before)
print("logged", flush=True)
"""


def test_an_exception_logged_after_the_job_ended_reaches_the_log_not_stderr(tmp_path):
    """A thread a finished job left behind logs through the job's closed class loader: its line and
    stack trace still reach the embedded cluster's log, and no log4j error goes to stderr."""
    done = subprocess.run([sys.executable, "-c", LOG_THROUGH_A_CLOSED_CLASS_LOADER], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                                       "DRIFTWARDEN_RUN_DIR": str(tmp_path), **_java_home()})
    assert "logged" in done.stdout, done.stderr[-3000:]
    assert "An exception occurred processing Appender" not in done.stderr, done.stderr[-3000:]
    log = "\n".join(path.read_text() for path in (tmp_path / "logs" / "flink-embedded").glob("flink-*-python-*.log"))
    assert "Failed to close the admin client" in log
    assert "UncheckedIOException: segment spec" in log and "at dev.driftwarden.flink.PerModelJson.parse" in log


def test_every_log4j_pattern_of_pyflink_ends_in_a_plain_throwable(tmp_path):
    """jobs.flink_env.log4j_plain_throwables: each of PyFlink's log4j files (the embedded gateway's and
    those scripts/services.sh copies for the standalone cluster), once, whatever it is run on twice; a
    file that already says it is not written again."""
    import pyflink

    from driftwarden.jobs.flink_env import log4j_plain_throwables

    stocks = sorted((Path(pyflink.__file__).parent / "conf").glob("log4j*.properties"))
    assert len(stocks) >= 3
    for stock in stocks:
        once = log4j_plain_throwables(stock, tmp_path / stock.name).read_text()
        patterns = [line for line in once.splitlines() if ".layout.pattern" in line and not line.startswith("#")]
        assert patterns and all(line.endswith("%m%n%throwable") for line in patterns), (stock.name, patterns)
        os.utime(tmp_path / stock.name, ns=(10**9, 10**9))  # a time no write can give it
        assert log4j_plain_throwables(tmp_path / stock.name, tmp_path / stock.name).read_text() == once
        assert log4j_plain_throwables(stock, tmp_path / stock.name).read_text() == once
        assert (tmp_path / stock.name).stat().st_mtime_ns == 10**9  # untouched: log4j would reload it
        assert [line for line in once.splitlines() if ".layout.pattern" not in line] == \
            [line for line in stock.read_text().splitlines() if ".layout.pattern" not in line]


def test_jvm_args_keep_what_the_caller_set(tmp_path):
    """JVM_ARGS of the caller win: a heap or a collector given there replaces the embedded default."""
    from driftwarden.jobs.flink_env import EMBEDDED_GC, EMBEDDED_HEAP, gateway_jvm_args

    defaults = gateway_jvm_args("", tmp_path, tmp_path).split()
    assert EMBEDDED_HEAP in defaults and EMBEDDED_GC in defaults
    assert any(arg.startswith("-Djava.util.logging.config.file=") for arg in defaults)
    own = gateway_jvm_args("-Xmx2g -XX:+UseG1GC", tmp_path, tmp_path).split()
    assert own[:2] == ["-Xmx2g", "-XX:+UseG1GC"] and EMBEDDED_HEAP not in own and EMBEDDED_GC not in own
    assert gateway_jvm_args("-XX:+UseZGC", tmp_path, tmp_path).split()[:2] == ["-XX:+UseZGC", EMBEDDED_HEAP]
    # a folder with a space: no logging file (PyFlink splits JVM_ARGS on whitespace)
    spaced = tmp_path / "a b"
    assert "java.util.logging" not in gateway_jvm_args("", spaced, tmp_path)
    assert f"-Djava.io.tmpdir={tmp_path / 'tmp'}" in gateway_jvm_args("", tmp_path, tmp_path / "tmp").split()
    assert gateway_jvm_args("-Djava.io.tmpdir=/x", tmp_path, tmp_path / "tmp").count("java.io.tmpdir") == 1
    assert "java.io.tmpdir" not in gateway_jvm_args("", tmp_path, spaced)


def test_the_embedded_jvms_temporary_folders_go_away_after_their_process(tmp_path):
    """embedded_tmp_dir: this process's folder made; an ended process's folder removed with what it left
    (Flink's unpacked RPC jar); a running process's and anything not named by a pid kept."""
    from driftwarden.jobs.flink_env import embedded_tmp_dir

    ended = subprocess.Popen(["true"])
    ended.wait()
    left = tmp_path / str(ended.pid) / "flink-rpc-akka0f.jar"
    left.parent.mkdir()
    left.write_bytes(b"21 MiB")
    running = tmp_path / "1"  # init
    running.mkdir()
    (tmp_path / "notes").mkdir()
    mine = embedded_tmp_dir(tmp_path)
    assert mine == tmp_path / str(os.getpid()) and mine.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([str(os.getpid()), "1", "notes"])


def test_the_gateway_jvm_keeps_its_temporary_files_in_the_run_folder():
    """The real gateway (as every job starts it): Flink unpacks its jars and makes its folders under the run
    folder's tmp/flink-embedded/<pid>, not in /tmp where nothing removed them."""
    from pyflink.java_gateway import get_gateway

    from driftwarden.jobs.flink_env import make_table_env, run_dir

    make_table_env(parallelism=1)
    assert get_gateway().jvm.System.getProperty("java.io.tmpdir") == \
        str(run_dir() / "tmp" / "flink-embedded" / str(os.getpid()))


def _java_home() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "HOME", "FLINK_HOME")}


def test_forwarding_goes_on_draining_when_our_stderr_is_closed():
    """A closed stderr (a daemonised job) must not stop the draining: the JVM would block again."""
    import io

    from driftwarden.jobs.flink_env import _forward_lines

    closed = io.StringIO()
    closed.close()
    source = io.BytesIO(b"one\ntwo\n")
    _forward_lines(source, closed, "[flink jvm] ")
    assert source.read() == b""  # every line was read out of the pipe
    sink = io.StringIO()
    _forward_lines(io.BytesIO(b"a\nb"), sink, "> ")
    assert sink.getvalue() == "> a\n> b"
