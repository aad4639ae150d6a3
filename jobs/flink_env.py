"""Flink table environments for driftwarden jobs: jars, configuration, the Java UDFs (jobs/java)."""

from __future__ import annotations

import functools
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable, Iterator, Mapping

from driftwarden.core.errors import ConfigError
from driftwarden.core.paths import CACHE_DIR_ENV, cache_dir, run_dir

if TYPE_CHECKING:
    from pyflink.table import TableResult

log = logging.getLogger(__name__)

#: The jars the wheel carries (setup.py puts them there): the layout of the cache's jars/ folder.
BUNDLED_JARS = Path(__file__).resolve().parent / "jars"
CONNECTOR_JAR = "flink/flink-sql-connector-kafka-5.0.0-2.2.jar"
UDF_JAR = "udf/driftwarden-flink-udf.jar"
EVENT_MILLIS_UDF = "dev.driftwarden.flink.EventTimeMillis"
EVENT_MODEL_UDF = "dev.driftwarden.flink.EventModel"
FEATURE_COLUMNS_UDF = "dev.driftwarden.flink.FeatureColumns"
WINDOW_SUMMARY_AGG = "dev.driftwarden.flink.WindowSummaryAgg"
PLANNER_THREAD = "dev.driftwarden.flink.PlannerThread"
#: Memory of the embedded MiniCluster. The window aggregate runs in two phases, and the local
#: phase buffers records in Flink managed memory (a BytesHashMap), which the embedded cluster
#: otherwise leaves too small ("Too small memory allocated for BytesHashMap"); the Python
#: functions (validation of what Java cannot vouch for, one analysis per window) keep their
#: memory outside it. Network buffers: the embedded cluster allocates (and touches) 64 MiB of them
#: at start; a job of a few exchanges at parallelism 1-4 uses a few hundred 32 KiB buffers, so 32 MiB
#: (1,024 buffers) leaves room and 32 MiB of resident memory.
EMBEDDED_MEMORY = {
    "taskmanager.memory.managed.size": "128mb",
    "python.fn-execution.memory.managed": "false",
    "taskmanager.memory.network.min": "32mb",
    "taskmanager.memory.network.max": "32mb",
}
#: Heap of the JVM that runs the embedded MiniCluster (PyFlink's gateway), unless ``JVM_ARGS`` already
#: sets one. Left alone, the JVM takes a quarter of the machine's memory and keeps what it grew to
#: (1.3 GiB resident on bench/bench_job.py); the job's state is a few window summaries.
EMBEDDED_HEAP = "-Xmx512m"
#: Garbage collector of that JVM, unless ``JVM_ARGS`` names one: the parallel (throughput) collector.
#: The job allocates much (each event's row, strings and boxed values) and keeps little; on
#: bench/bench_job.py it costs less CPU per event than G1 (the JVM's default) at a smaller heap.
EMBEDDED_GC = "-XX:+UseParallelGC"
PYTHON_EXECUTABLE = "python.executable"
#: The module Flink runs to boot a Python worker (``<python.executable> -m BEAM_BOOT``).
BEAM_BOOT = "pyflink.fn_execution.beam.beam_boot"


#: Window aggregates run in one phase. Flink's local-global (two-phase) window aggregation needs
#: mini-batch to fire on an unbounded stream, and mini-batch puts a processing-time batch
#: assigner in front of the job's other branches, whose CURRENT_WATERMARK then reads the wall
#: clock (every event "late"): both measured. The job spreads a hot model over subtasks with
#: explicit partials instead (jobs/drift_job.py).
ONE_PHASE_WINDOWS = {"table.optimizer.agg-phase-strategy": "ONE_PHASE", "table.exec.mini-batch.enabled": "false"}
MERGE_SUMMARIES_AGG = "dev.driftwarden.flink.MergeSummaries"
MERGE_SEGMENTS_AGG = "dev.driftwarden.flink.MergeSegments"
EVENT_SEGMENT_UDF = "dev.driftwarden.flink.EventSegment"
SUMMARY_SOURCE = "dev.driftwarden.flink.SummarySource"
#: Engine options of the drift job, measured with Java Flight Recorder on bench/bench_job.py.
#: Object reuse: chained operators hand records over without a defensive copy (Flink's SQL operators
#: and the job's Java functions never keep or change an input row after the call); the copies were
#: about a fifth of the source thread's CPU.
JOB_TUNING = {"pipeline.object-reuse": "true"}


def jar_dir() -> Path:
    """The folder of the job's jars: ``$DRIFTWARDEN_CACHE_DIR/jars`` when set, else the jars the wheel carries,
    else the cache's (a checkout: scripts/bootstrap.sh fetches and builds them into .cache/jars)."""
    if os.environ.get(CACHE_DIR_ENV) or not BUNDLED_JARS.is_dir():
        return cache_dir() / "jars"
    return BUNDLED_JARS


#: The folder of the job's jars when this module was imported (:func:`jar_dir`).
JAR_DIR = jar_dir()


def job_jars() -> list[str]:
    """file:// URLs of the jars every job needs; ConfigError when bootstrap has not fetched them."""
    folder = jar_dir()
    jars = [folder / CONNECTOR_JAR, folder / UDF_JAR]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise ConfigError(f"missing jar(s) {', '.join(missing)}: in a checkout run scripts/bootstrap.sh; "
                          f"installed, reinstall the wheel (it carries them) or unset {CACHE_DIR_ENV}")
    return [j.as_uri() for j in jars]


def make_table_env(parallelism: int = 1, checkpoint_interval_ms: int = 10_000,
                   checkpoint_dir: str | None = None, resume_from: str | None = None, streaming: bool = True,
                   bundle_size: int = 5000, restart_attempts: int = 5,
                   memory: Mapping[str, str] = EMBEDDED_MEMORY, tuning: Mapping[str, str] = JOB_TUNING):
    """A StreamTableEnvironment with the Kafka connector, checkpointing and our UDF registered.

    Checkpoints are retained on cancellation (and on a crash) in ``checkpoint_dir``;
    ``resume_from`` restores a job from one of them (see :func:`latest_checkpoint`).
    ``restart_attempts``: restarts after a failure (10 s apart) before the job fails for good, so an
    unreachable store ends the command with an error instead of a silent restart loop.
    ``memory``: the embedded cluster's memory options (see :data:`EMBEDDED_MEMORY`; a remote
    cluster keeps its own). ``tuning``: engine options of the job (:data:`JOB_TUNING`; ``{}``: Flink's
    defaults, as the plain-Flink baseline of bench/bench_job.py runs). ``bundle_size``: records per Python bundle; a Python operator forwards a watermark only after
    its bundle, so smaller bundles mean fresher watermarks downstream (and exact lateness) at some
    throughput cost.
    """
    _start_gateway_with_heap()
    from pyflink.common import Configuration
    from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
    from pyflink.table import EnvironmentSettings, StreamTableEnvironment

    from driftwarden.jobs.flink_metrics import JOB_NAME, embedded_reporter

    reporter_jars, reporter = embedded_reporter(jar_dir())
    config = Configuration()
    config.set_string("pipeline.jars", ";".join(job_jars() + reporter_jars))
    config.set_string("pipeline.name", JOB_NAME)
    for key, value in reporter.items():
        config.set_string(key, value)
    config.set_string("table.local-time-zone", "UTC")
    for key, value in ONE_PHASE_WINDOWS.items():
        config.set_string(key, value)
    config.set_string("python.fn-execution.bundle.size", str(bundle_size))
    config.set_string("python.fn-execution.arrow.batch.size", str(bundle_size))
    for key, value in {**memory, **tuning}.items():
        config.set_string(key, value)
    config.set_string("restart-strategy.type", "fixed-delay")
    config.set_string("restart-strategy.fixed-delay.attempts", str(restart_attempts))
    config.set_string("restart-strategy.fixed-delay.delay", "10 s")
    if checkpoint_dir:
        config.set_string("execution.checkpointing.dir", Path(checkpoint_dir).resolve().as_uri())
        config.set_string("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    if resume_from:
        config.set_string("execution.state-recovery.path", resume_from)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    _boot_loopback_workers_lightly(env)
    env.set_parallelism(parallelism)
    if checkpoint_interval_ms > 0:
        env.enable_checkpointing(checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    settings = EnvironmentSettings.in_streaming_mode() if streaming else EnvironmentSettings.in_batch_mode()
    t_env = StreamTableEnvironment.create(env, environment_settings=settings)
    # PyFlink loads these through the context class loader of the gateway thread that serves the call, and
    # put the job's jars on one thread's only: make sure of the thread serving these (a CI run once missed them)
    _jvm_with_job_jars()
    t_env.create_java_temporary_system_function("DW_EVENT_MILLIS", EVENT_MILLIS_UDF)
    t_env.create_java_temporary_system_function("DW_MODEL", EVENT_MODEL_UDF)
    t_env.create_java_temporary_system_function("DW_FEATURES", FEATURE_COLUMNS_UDF)
    return env, t_env


def _boot_loopback_workers_lightly(env) -> None:
    """In an embedded (local) job that names no ``python.executable``, start Python workers through
    :func:`worker_launcher`: loopback workers then boot without Beam's imports (jobs/loopback_boot.py)."""
    from pyflink.util.java_utils import get_j_env_configuration, is_local_deployment

    config = get_j_env_configuration(env._j_stream_execution_environment)
    if not is_local_deployment(config) or config.containsKey(PYTHON_EXECUTABLE):
        return
    launcher = worker_launcher(run_dir())
    if launches(launcher):
        config.setString(PYTHON_EXECUTABLE, str(launcher))
    else:
        log.warning("cannot run %s (a folder mounted noexec?): Python workers boot as PyFlink's own, "
                    "about 120 MiB more each", launcher)


@functools.lru_cache(maxsize=8)
def launches(launcher: Path) -> bool:
    """Whether ``launcher`` runs (once per process): a run folder on a noexec mount holds it but cannot run it."""
    try:
        return subprocess.run([str(launcher), "-c", "pass"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def worker_launcher(folder: Path, python: str = sys.executable) -> Path:
    """Write (if changed) and return ``folder/python-worker``: PyFlink's ``python.executable`` for
    embedded jobs.

    Flink starts each Python worker as ``<python.executable> -m pyflink.fn_execution.beam.beam_boot
    ARGS``. In loopback mode (``$PYTHON_LOOPBACK_SERVER_ADDRESS`` set: the worker runs in the
    client process) the launcher runs jobs/loopback_boot.py instead, which makes the same request
    without Beam's imports: each such process stays about 32 MiB resident instead of about 150 for
    the whole job. Anything else runs ``python`` unchanged.
    """
    boot = Path(__file__).resolve().parent / "loopback_boot.py"
    script = (f"#!/bin/sh\n# written by driftwarden's jobs/flink_env.py (worker_launcher)\n"
              f'if [ "$1" = "-m" ] && [ "$2" = "{BEAM_BOOT}" ] && [ -n "${{PYTHON_LOOPBACK_SERVER_ADDRESS:-}}" ]; then\n'
              f'    shift 2\n    exec {shlex.quote(python)} {shlex.quote(str(boot))} "$@"\nfi\n'
              f'exec {shlex.quote(python)} "$@"\n')
    launcher = folder / "python-worker"
    if not launcher.is_file() or launcher.read_text() != script:
        folder.mkdir(parents=True, exist_ok=True)
        written = folder / f".python-worker.{os.getpid()}"
        written.write_text(script)
        written.chmod(0o755)
        written.replace(launcher)  # atomic: concurrent jobs of one run folder never see half a script
    return launcher


def _start_gateway_with_heap() -> None:
    """Start PyFlink's gateway JVM (if not running) with :data:`EMBEDDED_HEAP` and :data:`EMBEDDED_GC` (unless
    ``JVM_ARGS`` sets a heap or names a collector), its logs in the run folder's logs/flink-embedded
    (:func:`driftwarden.core.paths.run_dir`), the JDK's logging there too (:func:`_jdk_logging_to_file`),
    log4j's exceptions written without loading classes (:func:`log4j_plain_throwables`), and its stderr
    forwarded to ours (:func:`_launch_draining_stderr`).

    ``JVM_ARGS``, ``FLINK_LOG_DIR`` and ``LOG4J_PROPERTIES`` are changed only while the gateway starts:
    processes started later (a cluster's scripts, a job of another run folder) see the caller's environment,
    after a loopback job too (jobs/loopback_boot.py leaves them out of what it sends back:
    ``GATEWAY_START_VARIABLES``).
    """
    import pyflink.java_gateway as java_gateway

    # the embedded cluster's logs go to the run folder, not into the virtualenv's site-packages. An
    # inherited FLINK_LOG_DIR is not followed: PyFlink's loopback worker copies the JVM's environment
    # into the process that ran a job, so a later job there would log into the earlier one's folder
    log_dir = run_dir() / "logs" / "flink-embedded"
    log_dir.mkdir(parents=True, exist_ok=True)
    tmp_dir = embedded_tmp_dir(run_dir() / "tmp" / "flink-embedded")
    launch = java_gateway.launch_gateway_server_process
    java_gateway.launch_gateway_server_process = lambda env, args: _launch_draining_stderr(launch, env, args)
    try:
        with _environment(JVM_ARGS=gateway_jvm_args(os.environ.get("JVM_ARGS") or "", log_dir, tmp_dir),
                          FLINK_LOG_DIR=str(log_dir), LOG4J_PROPERTIES=str(_embedded_log4j(log_dir))):
            java_gateway.get_gateway()
    finally:
        java_gateway.launch_gateway_server_process = launch


def gateway_jvm_args(inherited: str, log_dir: Path, tmp_dir: Path) -> str:
    """``JVM_ARGS`` of the gateway JVM: ``inherited`` plus :data:`EMBEDDED_HEAP` unless it sets a heap,
    :data:`EMBEDDED_GC` unless it names a collector, the JDK's logging into ``log_dir`` and its temporary
    folder ``tmp_dir`` (:func:`embedded_tmp_dir`) unless it names one."""
    extra = [] if "-Xmx" in inherited else [EMBEDDED_HEAP]
    if not re.search(r"-XX:\+Use\w*GC\b", inherited):
        extra.append(EMBEDDED_GC)
    if "java.util.logging.config.file" not in inherited and _one_word(log_dir):
        extra.append(f"-Djava.util.logging.config.file={_jdk_logging_to_file(log_dir)}")
    if "java.io.tmpdir" not in inherited and _one_word(tmp_dir):
        extra.append(f"-Djava.io.tmpdir={tmp_dir}")
    return " ".join([inherited, *extra]).strip()


def _one_word(folder: Path) -> bool:
    """True when ``folder`` has no whitespace: PyFlink splits JVM_ARGS on it, so a folder with a space
    is left out (the JDK's default is kept)."""
    return not any(c.isspace() for c in str(folder))


def embedded_tmp_dir(root: Path) -> Path:
    """The embedded JVM's temporary folder for this process, ``root/<pid>``; the folders of processes no
    longer running are removed first.

    The MiniCluster unpacks its RPC system's jar (21 MiB) into the temporary folder at every start and
    leaves it there when the JVM ends (its planner's jar, 44 MiB, and its I/O folders too when the JVM is
    killed): in /tmp each job start left 21-65 MiB that nothing removed. Here they go away with the next
    start after the process that made them ended.
    """
    root.mkdir(parents=True, exist_ok=True)
    for folder in root.iterdir():
        if folder.name.isdigit() and not _process_running(int(folder.name)):
            shutil.rmtree(folder, ignore_errors=True)
    mine = root / str(os.getpid())
    mine.mkdir(exist_ok=True)
    return mine


def _process_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Set environment variables for the ``with`` block, then put back what was there."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _jdk_logging_to_file(log_dir: Path) -> Path:
    """Write (and return) a java.util.logging config that logs to ``log_dir/flink-jvm-jdk.log``.

    The JDK's logging (gRPC inside Beam logs with it: a SEVERE stack trace each time a Python
    worker's call ends) otherwise writes to the JVM's stderr, the job's own.
    """
    config = log_dir / "jdk-logging.properties"
    pattern = str(log_dir / "flink-jvm-jdk.log").replace("%", "%%")
    config.write_text("handlers=java.util.logging.FileHandler\n.level=INFO\n"
                      f"java.util.logging.FileHandler.pattern={pattern}\n"
                      "java.util.logging.FileHandler.append=true\njava.util.logging.FileHandler.limit=10000000\n"
                      "java.util.logging.FileHandler.count=2\n"
                      "java.util.logging.FileHandler.formatter=java.util.logging.SimpleFormatter\n")
    return config


#: A log4j2 properties line that sets an appender's layout pattern.
_LAYOUT_PATTERN = re.compile(r"\s*appender\.[\w.]+\.layout\.pattern\s*=")


def log4j_plain_throwables(stock: Path, target: Path) -> Path:
    """Write the log4j2 properties file ``stock`` to ``target`` (may be the same file) with each
    layout pattern ending in ``%throwable``; return ``target``.

    A pattern without a throwable converter gets log4j's extended one, which loads the class of each
    stack frame through the logging thread's context class loader. On a thread a finished job left
    behind (the Kafka source's admin client closing after the job) that loader is Flink's closed
    user-code loader: the line and its exception are lost from the log, and log4j writes "An
    exception occurred processing Appender ... Trying to access closed classloader" and its stack
    trace to stderr instead. ``%throwable`` writes the same stack trace without loading a class.

    ``target`` is left untouched when it already says the same: PyFlink's file asks log4j to reload it
    when it changes (``monitorInterval``), and a reload reopens the log it writes afresh (``append =
    false``), so every job that starts would otherwise empty the log of each embedded job still running.
    A changed file is replaced whole, never seen half written.
    """
    lines = [f"{line}%throwable" if _LAYOUT_PATTERN.match(line) and "%throwable" not in line else line
             for line in stock.read_text().splitlines()]
    text = "\n".join(lines) + "\n"
    if not target.is_file() or target.read_text() != text:
        partial = target.with_name(f".{target.name}.{os.getpid()}")
        partial.write_text(text)
        partial.replace(target)
    return target


def _embedded_log4j(log_dir: Path) -> Path:
    """PyFlink's own log configuration for its gateway (``conf/log4j-cli.properties``), written into
    ``log_dir`` by :func:`log4j_plain_throwables`."""
    import pyflink

    stock = Path(pyflink.__file__).parent / "conf" / "log4j-cli.properties"
    return log4j_plain_throwables(stock, log_dir / "log4j-embedded.properties")


def _launch_draining_stderr(launch: Callable[[dict, list], subprocess.Popen], env: dict,
                            args: list) -> subprocess.Popen:
    """Start the gateway JVM with ``launch`` (PyFlink's) and forward its stderr to ours, line by line.

    PyFlink starts the JVM with ``stderr=PIPE`` and reads the pipe only if the JVM dies at start.
    Unread, the pipe fills (64 KiB), and then every JVM thread that writes to stderr (the JDK's
    console log handler: gRPC's and py4j's warnings) blocks for good, taking with it the gRPC
    servers that feed the Python functions: the job stops without an error.
    """
    process = launch(env, args)
    threading.Thread(target=_forward_lines, args=(process.stderr, sys.stderr, "[flink jvm] "),
                     name="flink-jvm-stderr", daemon=True).start()
    return process


def _forward_lines(source: IO[bytes], sink: IO[str], prefix: str) -> None:
    """Copy ``source``'s lines to ``sink`` until it ends, each after ``prefix``; a line ``sink`` cannot
    take (closed, say) is dropped, never left in the pipe."""
    for line in iter(source.readline, b""):
        try:
            sink.write(prefix + line.decode(errors="replace"))
            sink.flush()
        except (OSError, ValueError):
            continue


def _jvm_with_job_jars():
    """The gateway's JVM view, with the job's jars on the context class loader (py4j loads classes through it;
    PyFlink adds each jar once)."""
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import add_jars_to_context_class_loader

    add_jars_to_context_class_loader(job_jars())
    return get_gateway().jvm


def register_window_aggregate(t_env, name: str, spec_json: str, segments_json: str = "{}") -> None:
    """Register the Java window aggregate (``WindowSummaryAgg``), built with its spec, as ``name``,
    the merge of partial summaries (``MergeSummaries``) as ``dw_merge_summaries`` and the merge of
    per-segment partials (``MergeSegments``, built with the segments spec) as ``dw_merge_segments``."""
    jvm = _jvm_with_job_jars()
    t_env._j_tenv.createTemporarySystemFunction(name, getattr(jvm, WINDOW_SUMMARY_AGG)(spec_json))
    t_env._j_tenv.createTemporarySystemFunction("dw_merge_segments", getattr(jvm, MERGE_SEGMENTS_AGG)(segments_json))
    t_env.create_java_temporary_system_function("dw_merge_summaries", MERGE_SUMMARIES_AGG)


def register_segment_function(t_env, name: str, spec_json: str) -> None:
    """Register the Java segment assignment (``EventSegment``), built with its spec, as ``name``."""
    t_env._j_tenv.createTemporarySystemFunction(name, getattr(_jvm_with_job_jars(), EVENT_SEGMENT_UDF)(spec_json))


def register_summary_source(t_env, settings_json: str) -> None:
    """Build the drift job's source task (Java ``SummarySource``: the Kafka source, its per-partition
    watermarks and the per-event work chained to it) from ``settings_json`` and register its two views,
    ``source_partials`` and ``source_to_python`` (jobs/drift_job.py)."""
    j_tenv = t_env._j_tenv
    getattr(_jvm_with_job_jars(), SUMMARY_SOURCE).register(j_tenv.execEnv(), j_tenv, settings_json)


@functools.lru_cache(maxsize=None)
def _planner_thread():
    """The process's one ``PlannerThread`` object. An object, so its calls need no class lookup on the serving
    JVM thread (whose context class loader may lack the job's jar); one, because py4j caches a method by its
    class's name, and a second instance of a class loaded afresh elsewhere is refused by that cached method
    (``tests/test_planner_thread.py``)."""
    return getattr(_jvm_with_job_jars(), PLANNER_THREAD)()


class StatementRunner:
    """Runs SQL statements that the planner optimizes (an INSERT) with Calcite's metadata provider seeded
    on the JVM thread that plans them (``PlannerThread``).

    py4j serves each call on whichever of its JVM threads is free; once the Python side has made two
    calls at a time, a statement can land on a thread the planner never set up, and planning fails
    with ``NullPointerException: metadataHandlerProvider`` (FLINK-23020;
    ``tests/test_planner_thread.py`` makes it happen).
    """

    def __init__(self, t_env) -> None:
        self.t_env = t_env
        self._runner = _planner_thread()

    def execute_sql(self, statement: str) -> "TableResult":
        """``t_env.execute_sql(statement)``, planned with the metadata provider seeded on its thread."""
        from pyflink.table import TableResult

        return TableResult(self._runner.executeSql(self.t_env._j_tenv, statement))


def latest_checkpoint(checkpoint_dir: str | Path) -> str | None:
    """The newest completed checkpoint (a ``chk-N`` folder with its ``_metadata``) under the folder."""
    done = [p.parent for p in Path(checkpoint_dir).glob("*/chk-*/_metadata")]
    if not done:
        return None
    newest = max(done, key=lambda p: (p.stat().st_mtime, int(p.name.split("-")[1])))
    return newest.as_uri()
