"""The Kafka password and the client key's password reach no log, job configuration, plan, checkpoint, report,
command line or store row.

A SCRAM user made for this test with a password no run could print by chance, and a client certificate signed
by the broker's CA whose key is encrypted with a second such secret: the job connects over SASL_SSL with both
(the listener takes the certificate when offered), so the secrets are really used, and then everything the
run wrote or showed is searched for them:

* on the standalone cluster (secrets in files the TaskManagers read): the job's configuration, plan, vertices
  and exceptions, the JobManager's configuration and environment as the REST API (and so the web UI) shows
  them, while the job runs; the command line of every process on the machine, and the environment of every
  process of the run; the cluster's and the client's logs; the retained checkpoints; the store;
* on the embedded MiniCluster (secrets in environment variables, which ``run`` moves into a private file):
  the command lines and environments of the job's processes, the run folder (logs, checkpoints) but that
  private file, the output, the store;
* the replay report (JSON and HTML) and output of the same range over the same connection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import orjson
import pytest
import yaml

from tests.conftest import REPO, RUN_DIR
from tests.job_helpers import FEATURES, WINDOW_MS, stored_counts, stored_dead_letters, stream
from tests.kafka_helpers import create_topic, sasl_ssl_security, secure_client_config
from tests.tls_helpers import make_client_tls

pytestmark = [pytest.mark.services, pytest.mark.slow]

T0 = (int(time.time() * 1000) - 3_600_000) // WINDOW_MS * WINDOW_MS
N_WINDOWS, PER_WINDOW = 4, 200
PASSWORD_ENV, KEY_PASSWORD_ENV = "DW_LEAK_KAFKA_PASSWORD", "DW_LEAK_KEY_PASSWORD"


@pytest.fixture(scope="module")
def leak_case(secure_kafka, tmp_path_factory) -> dict:
    """A SCRAM user and a client key with fresh secrets, a topic, a reference, and both kinds of config."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    folder = tmp_path_factory.mktemp("leak")
    user, password, key_password = f"leak-{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}", f"kp-{uuid.uuid4().hex}"
    admin = AdminClient(secure_client_config(secure_kafka.sasl_ssl, sasl_ssl_security(secure_kafka)))
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)
    tls = make_client_tls(folder / "tls", key_password, (secure_kafka.ca_file, secure_kafka.ca_file.parent / "ca.key"))
    (folder / "password").write_text(password)
    base = {"protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": user,
            "ca_file": str(secure_kafka.ca_file), "cert_file": str(tls.cert_file), "key_file": str(tls.key_pbes1)}
    topic = f"leak-{uuid.uuid4().hex[:10]}"
    client = secure_client_config(secure_kafka.sasl_ssl, {**base, "password_file": str(folder / "password"),
                                                           "key_password_file": str(tls.key_password_file)})
    create_topic("", topic, partitions=1, client=client)
    _produce(client, topic)
    files = {**base, "password_file": str(folder / "password"), "key_password_file": str(tls.key_password_file)}
    env = {**base, "password_env": PASSWORD_ENV, "key_password_env": KEY_PASSWORD_ENV}
    from driftwarden.pipeline.judging import drift_policy
    from driftwarden.pipeline.reference_build import build_reference_set
    from driftwarden.schemas.config import MonitorConfig
    from driftwarden.schemas.events import parse_event

    config = MonitorConfig.model_validate({"models": [{"name": "m", "features": FEATURES}]})
    events = [parse_event(orjson.dumps(e)) for e in stream(8, PER_WINDOW, seed=5, start_ms=T0 - 3_600_000)]
    build_reference_set(events, config, drift_policy(config.thresholds)).save(folder / "reference.dwref")
    return {"folder": folder, "topic": topic, "secrets": (password, key_password), "bootstrap": secure_kafka.sasl_ssl,
            "configs": {"files": _config(folder, "files", topic, secure_kafka.sasl_ssl, files),
                        "env": _config(folder, "env", topic, secure_kafka.sasl_ssl, env)},
            "env": {PASSWORD_ENV: password, KEY_PASSWORD_ENV: key_password}}


def _produce(client: dict, topic: str) -> None:
    """N_WINDOWS windows of events, a record that is not JSON (a dead letter, on the DLQ topic too), and one
    event of the next window, whose time closes the last full window."""
    from confluent_kafka import Producer

    producer = Producer({**client, "linger.ms": 10})
    for i, event in enumerate(stream(N_WINDOWS, PER_WINDOW, start_ms=T0)):
        producer.produce(topic, orjson.dumps(event), timestamp=T0 + i * WINDOW_MS // PER_WINDOW)
    producer.produce(topic, b"not json", timestamp=T0 + N_WINDOWS * WINDOW_MS)
    tail = stream(1, 1, start_ms=T0 + N_WINDOWS * WINDOW_MS + 5000, seed=7)[0]
    producer.produce(topic, orjson.dumps(tail), timestamp=T0 + N_WINDOWS * WINDOW_MS + 5000)
    assert producer.flush(60) == 0


def _config(folder: Path, name: str, topic: str, bootstrap: str, security: dict) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "source": {"topics": [topic], "bootstrap_servers": bootstrap, "group_id": f"g-{name}-{topic}",
                   "security": security},
        "window": {"size": "10s", "out_of_orderness": "2s"},
        "reference": {"mode": "file", "path": str(folder / "reference.dwref")},
        "thresholds": {"min_count": 30}, "models": [{"name": "m", "features": FEATURES}]}))
    return path


class ProcessWatch:
    """Reads, until stopped, the command line of every process on the machine, and the environment of every
    process ``root`` started (not its own: it was given the secrets) and of ``also`` (e.g. the cluster's
    processes) and theirs."""

    def __init__(self, root: int, secrets: tuple[str, ...], also: tuple[int, ...] = ()) -> None:
        self.root, self.also, self.secrets = root, also, secrets
        self.leaks: set[str] = set()
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            parents = _parents()
            mine = (_descendants(parents, (self.root, *self.also)) - {self.root}) | set(self.also)
            self.seen.update(mine)
            for pid in parents:
                self._check(pid, "cmdline")
            for pid in mine:
                self._check(pid, "environ")

    def _check(self, pid: int, part: str) -> None:
        try:
            data = (Path("/proc") / str(pid) / part).read_bytes()
        except OSError:
            return
        self.leaks.update(f"/proc/{pid}/{part} holds secret {i}" for i, s in enumerate(self.secrets)
                          if s.encode() in data)

    def stop(self) -> None:
        """Stop watching."""
        self._stop.set()
        self._thread.join()


def _parents() -> dict[int, int]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return found


def _descendants(parents: dict[int, int], roots: tuple[int, ...]) -> set[int]:
    found, frontier = set(roots), set(roots)
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _leaks_in_files(folder: Path, secrets: tuple[str, ...], allowed: tuple[Path, ...] = (),
                    since: float = 0.0) -> list[str]:
    found = []
    for path in folder.rglob("*"):
        try:
            if not path.is_file() or path in allowed or path.stat().st_mtime < since:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        found += [f"{path} holds secret {i}" for i, s in enumerate(secrets) if s.encode() in data]
    return found


def _leaks_in_text(where: str, text: str, secrets: tuple[str, ...]) -> list[str]:
    return [f"{where} holds secret {i}" for i, s in enumerate(secrets) if s in text]


def _cluster_pids() -> tuple[int, ...]:
    pids = []
    for name in (RUN_DIR / "pids").glob("flink-*.pid"):
        pids += [int(p) for p in name.read_text().split()]
    return tuple(pids)


def _rest_views(rest: str, job: str) -> dict[str, str]:
    """What the REST API and the web UI show of the job and the cluster."""
    views = {}
    for path in (f"/jobs/{job}", f"/jobs/{job}/config", f"/jobs/{job}/plan", f"/jobs/{job}/exceptions",
                 f"/jobs/{job}/jobmanager/config", f"/jobs/{job}/jobmanager/environment", "/jobmanager/config",
                 "/jobmanager/environment", f"/jobs/{job}/checkpoints", f"/jobs/{job}/checkpoints/config"):
        answer = httpx.get(f"http://{rest}{path}", timeout=10)
        views[path] = answer.text
    for vertex in json.loads(views[f"/jobs/{job}"]).get("vertices", []):
        views[vertex["id"]] = httpx.get(f"http://{rest}/jobs/{job}/vertices/{vertex['id']}", timeout=10).text
    return views


def _running_job(rest: str, started: float) -> str | None:
    jobs = httpx.get(f"http://{rest}/jobs/overview", timeout=10).json()["jobs"]
    mine = [j for j in jobs if j["start-time"] >= started * 1000 - 5000 and j["state"] == "RUNNING"]
    return mine[0]["jid"] if mine else None


def _completed_checkpoints(rest: str, job: str) -> int:
    return httpx.get(f"http://{rest}/jobs/{job}/checkpoints", timeout=10).json()["counts"]["completed"]


def test_on_the_cluster_no_secret_reaches_rest_logs_checkpoints_command_lines_or_the_store(leak_case, flink_rest):
    folder, secrets = leak_case["folder"], leak_case["secrets"]
    url = f"sqlite:///{folder}/cluster.db"
    started = time.time()
    job_process = subprocess.Popen(
        [sys.executable, "-m", "driftwarden.cli", "run", "--config", str(leak_case["configs"]["files"]),
         "--store-url", url, "--jobmanager", flink_rest, "--checkpoint-interval", "1000",
         "--checkpoint-dir", str(folder / "cluster-chk")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "FLINK_CONF_DIR": str(RUN_DIR / "flink" / "conf")})
    watch = ProcessWatch(job_process.pid, secrets, _cluster_pids())
    try:
        job, views = _run_until_judged(flink_rest, started, url)
        counts = stored_counts(url)
    finally:
        for jid in [j["jid"] for j in httpx.get(f"http://{flink_rest}/jobs/overview", timeout=10).json()["jobs"]
                    if j["state"] == "RUNNING" and j["start-time"] >= started * 1000 - 5000]:
            httpx.patch(f"http://{flink_rest}/jobs/{jid}?mode=cancel", timeout=10)
        output, _ = job_process.communicate(timeout=120)
        watch.stop()
    assert sum(n for (_, start), n in counts.items() if start < T0 + N_WINDOWS * WINDOW_MS) == N_WINDOWS * PER_WINDOW, \
        output  # the secrets were used: the source read, the dead-letter producer wrote
    assert stored_dead_letters(url) == {"not_json": 1}
    assert len(watch.seen) >= 3, "the run's and the cluster's processes were not seen"
    leaks = sorted(watch.leaks)
    leaks += [leak for path, text in views.items() for leak in _leaks_in_text(f"REST {path}", text, secrets)]
    leaks += _leaks_in_text("the output of run", output, secrets)
    assert list((folder / "cluster-chk").rglob("_metadata")), "no checkpoint was retained"
    leaks += _leaks_in_files(folder / "cluster-chk", secrets)
    leaks += _leaks_in_files(RUN_DIR / "flink" / "log", secrets)
    leaks += _leaks_in_files(folder, secrets, allowed=(folder / "password", folder / "tls" / "key.password"),
                             since=started)  # the store, and anything else the run wrote beside the config
    assert leaks == []


def _run_until_judged(rest: str, started: float, url: str) -> tuple[str, dict[str, str]]:
    """Wait until the job runs, has judged every full window (the tail event's stays open) and completed a checkpoint;
    return its id and the REST views of it."""
    deadline, job = time.monotonic() + 400, None
    while time.monotonic() < deadline:
        job = job or _running_job(rest, started)
        if job and _completed_checkpoints(rest, job) >= 1 and _judged(url) >= N_WINDOWS:
            return job, _rest_views(rest, job)
        time.sleep(2)
    raise AssertionError(f"the job did not judge its windows in time (job {job})")


def _judged(url: str) -> int:
    try:
        return len(stored_counts(url))
    except Exception:  # noqa: BLE001 - the job has not made the tables yet
        return 0


def test_embedded_no_secret_reaches_command_lines_environments_logs_checkpoints_or_the_store(leak_case, tmp_path):
    secrets, run_dir = leak_case["secrets"], tmp_path / "run"
    url = f"sqlite:///{tmp_path}/embedded.db"
    job = subprocess.Popen(
        [sys.executable, "-m", "driftwarden.cli", "run", "--config", str(leak_case["configs"]["env"]), "--bounded",
         "--store-url", url, "--checkpoint-dir", str(run_dir / "checkpoints"), "--checkpoint-interval", "1000"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, **leak_case["env"], "DRIFTWARDEN_RUN_DIR": str(run_dir), "PYTHONPATH": str(REPO)})
    watch = ProcessWatch(job.pid, secrets)
    try:
        output, _ = job.communicate(timeout=600)
    finally:
        watch.stop()
        job.kill()
    assert job.returncode == 0, output
    assert sum(stored_counts(url).values()) == N_WINDOWS * PER_WINDOW + 1
    assert len(watch.seen) >= 2, "the job's JVM and Python workers were not seen"
    assert (run_dir / "logs").is_dir()  # the embedded cluster's logs are among what is searched
    leaks = sorted(watch.leaks) + _leaks_in_text("the output", output, secrets)
    assert leaks + _leaks_in_files(tmp_path, secrets) == []


def test_the_replay_report_and_output_hold_no_secret(leak_case, tmp_path):
    report = tmp_path / "r.json"
    done = subprocess.run(
        [sys.executable, "-m", "driftwarden.cli", "replay", "--topic", leak_case["topic"], "--from", str(T0),
         "--to", str(T0 + (N_WINDOWS + 1) * WINDOW_MS), "--config", str(leak_case["configs"]["env"]),
         "--report-json", str(report), "--report-html", str(tmp_path / "r.html"),
         "--store-url", f"sqlite:///{tmp_path}/r.db",
         "--no-progress"],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, **leak_case["env"]}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert orjson.loads(report.read_bytes())["counts"]["read"] == N_WINDOWS * PER_WINDOW + 2
    secrets = leak_case["secrets"]
    assert _leaks_in_text("the output", done.stdout + done.stderr, secrets) + _leaks_in_files(tmp_path, secrets) == []
