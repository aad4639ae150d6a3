"""Embedded jobs boot their Python workers without Beam's imports (jobs/loopback_boot.py).

The boot's request is read back with Apache Beam's own message classes; the launcher is run
against a real gRPC server standing in for the client's worker pool; and a real embedded job is
watched from outside while it runs: its boot processes are driftwarden's, and small.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from apache_beam.portability.api.org.apache.beam.model.fn_execution.v1 import beam_fn_api_pb2

from driftwarden.jobs.flink_env import BEAM_BOOT, launches, worker_launcher
from driftwarden.jobs.loopback_boot import START_WORKER, start_worker_error, start_worker_request

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from bench_job import _process_tree  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def test_the_request_is_beams_start_worker_request():
    params = {"PATH": "/usr/bin", "ÜMLAUT": "wert ✓", "EMPTY": "", "LONG": "x" * 300}
    parsed = beam_fn_api_pb2.StartWorkerRequest.FromString(start_worker_request("1-1", "localhost:4242", params))
    assert parsed.worker_id == "1-1"
    assert parsed.provision_endpoint.url == "localhost:4242"
    assert dict(parsed.params) == params
    assert not parsed.HasField("control_endpoint") and not parsed.HasField("logging_endpoint")


def test_the_response_error_is_read_from_beams_bytes():
    assert start_worker_error(beam_fn_api_pb2.StartWorkerResponse().SerializeToString()) == ""
    failed = beam_fn_api_pb2.StartWorkerResponse(error="Traceback: boom ✗").SerializeToString()
    assert start_worker_error(failed) == "Traceback: boom ✗"
    # fields this boot does not know (varint 2, 64-bit 3, string 4, 32-bit 5) are skipped
    unknown = bytes([2 << 3 | 0, 150, 1]) + bytes([3 << 3 | 1]) + bytes(8) + bytes([4 << 3 | 2, 1, 65]) \
        + bytes([5 << 3 | 5]) + bytes(4)
    assert start_worker_error(unknown + failed) == "Traceback: boom ✗"
    with pytest.raises(ValueError, match="truncated"):
        start_worker_error(failed[:-3])


class _WorkerPool:
    """A gRPC server with the worker pool's StartWorker method: keeps each request, answers ``error``."""

    def __init__(self, error: str = "") -> None:
        self.requests: list[beam_fn_api_pb2.StartWorkerRequest] = []
        self.error = error
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        method = grpc.unary_unary_rpc_method_handler(self._start_worker)
        service, name = START_WORKER.strip("/").split("/")
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(service, {name: method})])
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def _start_worker(self, request: bytes, context) -> bytes:
        self.requests.append(beam_fn_api_pb2.StartWorkerRequest.FromString(request))
        return beam_fn_api_pb2.StartWorkerResponse(error=self.error).SerializeToString()

    def __enter__(self) -> "_WorkerPool":
        self.server.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop(None)


def _launch(launcher: Path, args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(launcher), *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], **env})


def test_the_launcher_boots_a_loopback_worker_with_driftwardens_boot(tmp_path):
    launcher = worker_launcher(tmp_path / "run folder")  # a space in the path is quoted
    with _WorkerPool() as pool:
        done = _launch(launcher, ["-m", BEAM_BOOT, "--id=3-1", "--provision_endpoint=localhost:5005",
                                  "--semi_persist_dir=/tmp/semi"],
                       PYTHON_LOOPBACK_SERVER_ADDRESS=f"127.0.0.1:{pool.port}", MARKER="from the JVM")
    assert done.returncode == 0, done.stderr
    assert "driftwarden's boot" in done.stdout  # not PyFlink's beam_boot, which would send the same request
    [request] = pool.requests
    assert (request.worker_id, request.provision_endpoint.url) == ("3-1", "localhost:5005")
    assert request.params["MARKER"] == "from the JVM" and request.params["SEMI_PERSISTENT_DIRECTORY"] == "/tmp/semi"


def test_the_gateways_start_variables_are_not_sent_back_to_the_client(tmp_path):
    """The pool copies the params into the client's environment: the gateway's JVM_ARGS would stay there and
    a command the client starts later would log into (and take the heap and temporary folder of) its run folder."""
    gateway_start = {"JVM_ARGS": "-Xmx512m -Djava.io.tmpdir=/run/a/tmp/1", "FLINK_LOG_DIR": "/run/a/logs",
                     "LOG4J_PROPERTIES": "/run/a/log4j.properties"}
    with _WorkerPool() as pool:
        done = _launch(worker_launcher(tmp_path), ["-m", BEAM_BOOT, "--id=1", "--provision_endpoint=localhost:1"],
                       PYTHON_LOOPBACK_SERVER_ADDRESS=f"127.0.0.1:{pool.port}", MARKER="kept", **gateway_start)
    assert done.returncode == 0, done.stderr
    [request] = pool.requests
    assert request.params["MARKER"] == "kept"
    assert not set(gateway_start) & set(request.params), dict(request.params)


def test_the_launcher_fails_with_the_pools_error_and_passes_anything_else_to_python(tmp_path):
    launcher = worker_launcher(tmp_path)
    with _WorkerPool(error="no such environment") as pool:
        failed = _launch(launcher, ["-m", BEAM_BOOT, "--id=1", "--provision_endpoint=localhost:1"],
                         PYTHON_LOOPBACK_SERVER_ADDRESS=f"127.0.0.1:{pool.port}")
    assert failed.returncode != 0 and "Error starting worker: no such environment" in failed.stderr
    plain = _launch(launcher, ["-c", "import sys; print(sys.executable)"])
    assert plain.returncode == 0 and plain.stdout.strip() == sys.executable
    # written again only when it changes: same content, same file
    assert worker_launcher(tmp_path) == launcher and launcher.stat().st_mode & 0o111


def test_a_launcher_that_cannot_run_is_found_out(tmp_path):
    """A run folder mounted noexec holds the launcher but cannot run it: the job then keeps PyFlink's boot."""
    assert launches(worker_launcher(tmp_path / "runs"))
    blocked = worker_launcher(tmp_path / "noexec")
    blocked.chmod(0o644)
    assert not launches(blocked)


EMBEDDED_JOB = """
import os
import time
from pyflink.table import DataTypes
from pyflink.table.udf import udf
from driftwarden.jobs.flink_env import make_table_env

_, t_env = make_table_env(checkpoint_interval_ms=0)
t_env.create_temporary_function("slow", udf(lambda x: (time.sleep(0.5), x)[1], result_type=DataTypes.BIGINT()))
t_env.execute_sql("CREATE TEMPORARY TABLE out_t (x BIGINT) WITH ('connector' = 'blackhole')")
t_env.execute_sql("INSERT INTO out_t SELECT slow(x) FROM (VALUES (1), (2), (3), (4), (5), (6)) AS t(x)").wait()
print("job done; JVM_ARGS here after it:", os.environ.get("JVM_ARGS"), flush=True)
"""


@pytest.mark.slow
def test_an_embedded_jobs_python_workers_boot_without_beam(tmp_path):
    """While a real embedded job runs, its worker boot processes run jobs/loopback_boot.py and stay small."""
    boots, _, out = _run_embedded_job(tmp_path)
    assert boots, "no Python worker boot process was seen while the job ran"
    # the gateway's JVM_ARGS (its heap, its JDK logging into this run folder) did not come back into the client
    assert "JVM_ARGS here after it: None" in out, out
    assert all("loopback_boot.py" in cmdline and BEAM_BOOT not in cmdline for cmdline, _ in boots.values()), boots
    # PyFlink's own boot: about 150 MiB resident (Beam's protobuf modules); this one about 30
    assert max(rss for _, rss in boots.values()) < 64 * 2**20, boots


@pytest.mark.slow
def test_a_job_whose_launcher_cannot_run_boots_as_pyflink_does(tmp_path):
    """The launcher is in the run folder but cannot run there: a warning, and the job runs all the same."""
    worker_launcher(tmp_path).chmod(0o644)  # the same script the job would write: left as it is
    boots, err, _ = _run_embedded_job(tmp_path)
    assert "cannot run" in err and str(tmp_path / "python-worker") in err
    assert boots and all(BEAM_BOOT in cmdline for cmdline, _ in boots.values()), boots


def _run_embedded_job(run_dir: Path) -> tuple[dict[int, tuple[str, int]], str, str]:
    """Run EMBEDDED_JOB in a process of its own with ``run_dir``; its boot processes seen while it ran, its stderr
    and its stdout."""
    # a clean environment: a loopback job run earlier in this process leaves the worker's variables
    # here (PyFlink copies them in), PYFLINK_GATEWAY_DISABLED among them
    kept = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "JAVA_HOME", "FLINK_HOME")}
    job = subprocess.Popen([sys.executable, "-c", EMBEDDED_JOB], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env={**kept, "PYTHONPATH": str(REPO), "DRIFTWARDEN_RUN_DIR": str(run_dir)})
    boots: dict[int, tuple[str, int]] = {}
    watcher = threading.Thread(target=_watch_boots, args=(job, boots), daemon=True)
    watcher.start()
    out, err = job.communicate(timeout=180)
    watcher.join(timeout=10)
    assert "job done" in out, err[-3000:]
    return boots, err, out


def _watch_boots(job: subprocess.Popen, boots: dict[int, tuple[str, int]]) -> None:
    """Record every Python worker boot process under ``job`` (cmdline, largest RSS) until it ends."""
    while job.poll() is None:
        for pid in _process_tree(job.pid)[1:]:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError, IndexError):
                continue
            if "--provision_endpoint" in cmdline and "python" in cmdline.split()[0]:
                boots[pid] = (cmdline, max(rss, boots.get(pid, ("", 0))[1]))
        time.sleep(0.1)

