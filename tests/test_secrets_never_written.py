"""A store password, in any form of URL, never reaches a command line, a log, a report or summary.json.

Forms: ``user:pass@``, ``?password=``, and ``$DRIFTWARDEN_STORE_URL``. Each run below writes into
a folder of its own (its working directory and ``DRIFTWARDEN_RUN_DIR``); the test then greps
everything the run printed and wrote, and, for the streaming job, the command line and the
environment of every process the job started (the JVM and its Python workers), while they run.
The test PostgreSQL asks for its password (scram-sha-256): a run that reaches it carries the real one, in
both forms at once (user:pass@ and ?password=); an unreachable server is given two random ones.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.replay.synthetic import incident_events
from tests.conftest import REPO, pg_password
from tests.job_helpers import T0, stored_counts, stream, write_config
from tests.kafka_helpers import create_topic, produce
from tests.secret_search import ProcessWatch, leaks_in

pytestmark = pytest.mark.services


def _secrets() -> tuple[str, str]:
    """Two passwords no run could print by chance."""
    return f"pw1-{uuid.uuid4().hex}", f"pw2-{uuid.uuid4().hex}"


def _with_passwords(schema_url: str, user_pass: str | None, query_pass: str | None, port: int | None = None) -> str:
    """The test schema's URL with a password as ``user:pass@`` and/or ``?password=`` (and another port, if given)."""
    from sqlalchemy.engine import make_url

    url = make_url(schema_url)
    url = url._replace(password=user_pass, port=port or url.port, drivername="postgresql")
    if query_pass:
        url = url.update_query_dict({"password": query_pass})
    return url.render_as_string(hide_password=False)


def _env(run_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRIFTWARDEN_STORE_URL", "PGPASSFILE")}
    return {**env, "DRIFTWARDEN_RUN_DIR": str(run_dir), "PYTHONPATH": str(REPO), **extra}


@pytest.fixture(scope="module")
def replay_inputs(tmp_path_factory) -> dict[str, Path]:
    """A small drifting incident and its raw reference."""
    d = tmp_path_factory.mktemp("inputs")
    for name, events in (("ref.jsonl", incident_events(2000, T0 - 3_600_000, 300, None, seed=1)),
                         ("stream.jsonl", incident_events(1200, T0, 400, T0 + 4 * 60_000, seed=2))):
        (d / name).write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return {"reference": d / "ref.jsonl", "stream": d / "stream.jsonl"}


@pytest.mark.parametrize("form", ["both", "unreachable"])  # each form alone: tests/test_jobs_cli.py
def test_replay_store_password_is_nowhere_in_what_the_run_writes(form, replay_inputs, pg_engine, tmp_path):
    pw1, pw2 = _secrets() if form == "unreachable" else (pg_password(),) * 2
    schema_url = pg_engine.url.render_as_string(hide_password=False)
    url = _with_passwords(schema_url, pw1, pw2, port=1 if form == "unreachable" else None)
    cmd = [sys.executable, "-m", "driftwarden.cli", "replay", "--no-progress", "--input", str(replay_inputs["stream"]),
           "--reference", str(replay_inputs["reference"]), "--store-url", url, "--report-json", "r.json",
           "--report-html", "r.html"]
    done = subprocess.run(cmd, cwd=tmp_path, env=_env(tmp_path / "run"), capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    if form == "unreachable":
        assert done.returncode == 1 and "ServiceError: cannot reach the store at" in output, output
    else:
        assert done.returncode == 0 and "stored " in output, output
        assert (tmp_path / "r.json").is_file() and (tmp_path / "r.html").is_file()
    assert leaks_in(tmp_path, output, (pw1, pw2)) == []


@pytest.mark.slow
def test_job_cli_moves_every_password_form_out_of_the_job(kafka_bootstrap, topic_name, pg_engine, tmp_path):
    """`driftwarden run` with $DRIFTWARDEN_STORE_URL carrying user:pass@ and ?password=, on a real topic."""
    pw1 = pw2 = pg_password()
    create_topic(kafka_bootstrap, topic_name, partitions=1)
    produce(kafka_bootstrap, topic_name, stream(3, 100))
    snapshot = tmp_path / "train.jsonl"
    snapshot.write_bytes(b"\n".join(orjson.dumps(e) for e in stream(6, 100, seed=9, start_ms=T0 - 3_600_000)))
    config = write_config(tmp_path / "config.yaml", topic_name, kafka_bootstrap)
    built = CliRunner().invoke(app, ["reference", "build", "-i", str(snapshot), "-o", str(tmp_path / "reference.dwref"),
                                     "-c", str(config)])
    assert built.exit_code == 0, built.output
    url = _with_passwords(pg_engine.url.render_as_string(hide_password=False), pw1, pw2)
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "driftwarden.cli", "run", "--config", str(config), "--bounded",
           "--checkpoint-dir", str(run_dir / "checkpoints")]
    job = subprocess.Popen(cmd, cwd=tmp_path, env=_env(run_dir, DRIFTWARDEN_STORE_URL=url), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    watch = ProcessWatch([job.pid], (pw1, pw2))
    try:
        output, _ = job.communicate(timeout=600)
    finally:
        watch.stop()
        job.kill()
    assert job.returncode == 0, output
    assert sum(stored_counts(pg_engine.url.render_as_string(hide_password=False)).values()) == 300
    assert len(watch.seen) >= 2, "the job's JVM and Python workers were not seen"
    assert watch.leaks == []
    pgpass = run_dir / "pgpass"
    assert pw1 in pgpass.read_text() and (pgpass.stat().st_mode & 0o777) == 0o600
    assert (run_dir / "logs").is_dir()  # the embedded cluster's logs are among what was grepped
    assert leaks_in(tmp_path, output, (pw1, pw2), allowed=(pgpass,)) == []


def test_demo_keeps_the_password_out_of_the_job_command_and_summary(tmp_path, monkeypatch):
    from driftwarden.demo.runner import DemoOptions, DemoRun

    pw1, pw2 = _secrets()
    monkeypatch.setattr("driftwarden.jobs.cli.RUN_DIR", tmp_path)
    monkeypatch.delenv("PGPASSFILE", raising=False)
    opts = DemoOptions("127.0.0.1:59092", f"postgresql://u:{pw1}@db.example/d?password={pw2}", 20, 5, 2000, 10, 1, 3,
                       False, tmp_path, 10)
    run = DemoRun(opts, console=None)  # type: ignore[arg-type]  (set-up only: nothing is printed)
    assert run.store_url == "postgresql://u@db.example/d"  # what JobProcess and write_summary are given
    assert pw1 in (tmp_path / "pgpass").read_text()
