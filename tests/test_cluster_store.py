"""The drift job on the standalone Flink cluster writes to the password-protected PostgreSQL, and the password
shows nowhere Flink could show it.

scripts/services.sh runs PostgreSQL with scram-sha-256 authentication and the cluster with two TaskManagers
of one slot each, so a job at parallelism 2 runs on both. The TaskManagers are never given the password:
the store URL names a libpq password file (``?passfile=``, as a Kubernetes or Compose secret is mounted),
which their Python workers read. While the job runs, the command line and environment of every process of
the cluster and of the client are searched for the password; then every answer of Flink's REST API about
the job, the cluster's logs and the job's retained checkpoint.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from driftwarden.jobs.flink_env import latest_checkpoint
from driftwarden.schemas.config import DEFAULT_GROUP
from driftwarden.schemas.events import parse_event_time
from tests.conftest import RUN_DIR, pg_password
from tests.job_helpers import T0, WINDOW_MS, stored_verdicts, stream
from tests.kafka_helpers import create_topic, produce_to_partitions
from tests.secret_search import ProcessWatch, leaks_in
from tests.test_drift_job import _config, reference_file  # noqa: F401  (module fixture)

pytestmark = [pytest.mark.services, pytest.mark.slow]

N_WINDOWS = 6
PER_WINDOW = 300


def _passfile(folder: Path, url: str, password: str) -> Path:
    """A libpq password file (mode 600) for the URL's server and user: the TaskManagers' mounted secret."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    folder.mkdir(mode=0o700)
    path = folder / "pgpass"
    path.touch(mode=0o600)
    path.write_text(f"{parsed.host}:{parsed.port}:*:{parsed.username}:{password}\n")
    return path


def _cluster_pids() -> list[int]:
    """The JobManager's and TaskManagers' processes (scripts/services.sh's PID files)."""
    files = [RUN_DIR / "pids" / "flink--standalonesession.pid", RUN_DIR / "pids" / "flink--taskexecutor.pid"]
    return [int(line) for f in files for line in f.read_text().split()]


def _running_job(base: str, job: subprocess.Popen, timeout_s: float = 300) -> str:
    """The id of the job the client submitted, once it runs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert job.poll() is None, job.stdout.read()[-3000:]
        running = [j for j in httpx.get(f"{base}/jobs/overview", timeout=10).json()["jobs"] if j["state"] == "RUNNING"]
        if running:
            return max(running, key=lambda j: j["start-time"])["jid"]
        time.sleep(1)
    raise AssertionError("the job did not start on the cluster")


def _wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def _rest_answers(base: str, jid: str) -> dict[str, str]:
    """Every answer of Flink's REST API about the job, its vertices, the JobManager and the TaskManagers."""
    paths = [f"/jobs/{jid}", f"/jobs/{jid}/config", f"/jobs/{jid}/jobmanager/config",
             f"/jobs/{jid}/jobmanager/environment", f"/jobs/{jid}/plan", f"/jobs/{jid}/exceptions",
             f"/jobs/{jid}/checkpoints", f"/jobs/{jid}/checkpoints/config", "/jobmanager/config",
             "/jobmanager/environment", "/config", "/taskmanagers", "/jobs/overview"]
    answers = {}
    with httpx.Client(base_url=base, timeout=10) as client:
        vertices = client.get(f"/jobs/{jid}").json()["vertices"]
        paths += [f"/jobs/{jid}/vertices/{v['id']}" for v in vertices]
        paths += [f"/jobs/{jid}/vertices/{v['id']}/taskmanagers" for v in vertices]
        paths += [f"/taskmanagers/{tm['id']}" for tm in client.get("/taskmanagers").json()["taskmanagers"]]
        for path in paths:
            response = client.get(path)
            if response.status_code == 200:
                answers[path] = response.text
    return answers


def _monitored_counts(engine) -> Counter:
    """(model, window start ms) -> events of the monitored model's stored windows (none before the job made the tables)."""
    from sqlalchemy import inspect, select

    from driftwarden.schemas.tables import window_counts

    with engine.connect() as conn:
        if not inspect(conn).has_table("window_counts"):
            return Counter()
        rows = conn.execute(select(window_counts.c.model, window_counts.c.window_start, window_counts.c.events)
                            .where(window_counts.c.model == "m"))
        return Counter({(m, int(ws.timestamp() * 1000)): n for m, ws, n in rows})


def _subtask_taskmanagers(base: str, jid: str) -> dict[str, set[str]]:
    """Per vertex of the job at parallelism 2, the TaskManagers its subtasks ran on."""
    vertices = httpx.get(f"{base}/jobs/{jid}", timeout=10).json()["vertices"]
    spread = {}
    for vertex in vertices:
        subtasks = httpx.get(f"{base}/jobs/{jid}/vertices/{vertex['id']}", timeout=10).json()["subtasks"]
        if len(subtasks) == 2:
            spread[vertex["name"][:60]] = {s["taskmanager-id"] for s in subtasks}
    return spread


def test_job_at_parallelism_2_on_two_taskmanagers_stores_with_a_password_file_shown_nowhere(
        kafka_bootstrap, topic_name, flink_rest, pg_engine, reference_file, tmp_path):  # noqa: F811
    password = pg_password()
    create_topic(kafka_bootstrap, topic_name, partitions=2)
    events = stream(N_WINDOWS, PER_WINDOW)
    sentinel = {"event_time": T0 + (N_WINDOWS + 3) * WINDOW_MS, "model": "sentinel", "features": {}}
    produce_to_partitions(kafka_bootstrap, topic_name, [events[0::2] + [sentinel], events[1::2] + [sentinel]])
    _config(tmp_path, topic_name, kafka_bootstrap, reference_file)
    schema_url = pg_engine.url._replace(drivername="postgresql", password=None)
    passfile = _passfile(tmp_path / "secrets", schema_url.render_as_string(), password)
    url = schema_url.update_query_dict({"passfile": str(passfile)}).render_as_string()
    checkpoints = tmp_path / "chk"
    base = f"http://{flink_rest}"
    cmd = [sys.executable, "-m", "driftwarden.cli", "run", "-c", str(tmp_path / "config.yaml"), "--store-url", url,
           "--jobmanager", flink_rest, "--parallelism", "2", "--checkpoint-interval", "1000",
           "--checkpoint-dir", str(checkpoints), "--reference", str(tmp_path / "reference.dwref")]
    env = {k: v for k, v in os.environ.items() if k not in ("PGPASSFILE", "PGPASSWORD", "DRIFTWARDEN_STORE_URL")}
    client = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watch = ProcessWatch([client.pid, *_cluster_pids()], (password,), include_roots=True, needles=("passfile=",))
    try:
        jid = _running_job(base, client)
        expected = Counter(("m", parse_event_time(e["event_time"]) // WINDOW_MS * WINDOW_MS) for e in events)
        _wait_for(lambda: _monitored_counts(pg_engine) == expected, 300, "every window in PostgreSQL")
        _wait_for(lambda: latest_checkpoint(checkpoints) is not None, 60, "a retained checkpoint")
        answers = _rest_answers(base, jid)
        spread = _subtask_taskmanagers(base, jid)
        httpx.patch(f"{base}/jobs/{jid}", params={"mode": "cancel"}, timeout=10).raise_for_status()
        output, _ = client.communicate(timeout=120)
    finally:
        watch.stop()
        if client.poll() is None:
            client.kill()
    # the TaskManagers logged in: every window is judged and stored, each feature (and the default group) of each
    verdicts = stored_verdicts(url)
    assert _monitored_counts(pg_engine) == expected
    assert len(verdicts) == N_WINDOWS * 5 and {f for _, _, f in verdicts} == {"f0", "f1", "f2", "c0", DEFAULT_GROUP}
    assert spread and all(len(tms) == 2 for tms in spread.values()), spread  # parallelism 2 ran on both
    # the searches looked where the password could have gone, and found it nowhere
    assert watch.found["passfile="] > 0 and len(watch.seen) >= 5, (watch.found, len(watch.seen))
    assert f"/jobs/{jid}/config" in answers and f"/jobs/{jid}/jobmanager/config" in answers, sorted(answers)
    assert watch.leaks == []
    assert [path for path, text in answers.items() if password in text] == []
    assert leaks_in(RUN_DIR / "flink", output, (password,)) == []  # the cluster's logs, configuration, temporary files
    assert list(checkpoints.rglob("_metadata")) and leaks_in(checkpoints, "", (password,)) == []
    assert leaks_in(tmp_path, "", (password,), allowed=(passfile,)) == []


def test_the_clusters_jvms_keep_their_temporary_files_in_the_run_folder(flink_rest) -> None:
    """Each JVM of the cluster unpacks Flink's RPC jar (21 MiB) into its temporary folder at its start and leaves it:
    in /tmp every start of the cluster left 65 MiB behind. scripts/services.sh gives them the run folder's."""
    tmp, pids = RUN_DIR / "flink" / "tmp", _cluster_pids()
    for pid in pids:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert f"-Djava.io.tmpdir={tmp}".encode() in cmdline, pid
    assert len(list(tmp.glob("flink-rpc-*.jar"))) == len(pids)  # what each unpacked: there, once
