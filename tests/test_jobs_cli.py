"""`driftwarden run` and `driftwarden reference build`: options, errors, secrets kept out of the job."""

from __future__ import annotations

import json
import os
import stat

import pytest
import yaml
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.jobs.cli import _scrub_environment, job_store_url, password_to_pgpass
from driftwarden.core.errors import ConfigError
from driftwarden.schemas.config import load_config

runner = CliRunner()


def test_run_help_shows_defaults():
    result = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for default in ("[default: 1; x>=1]", "[default: 10000]", "[default: 0]", "[default: no-bounded]"):
        assert default in result.output


def test_bad_jobmanager_is_a_usage_error(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"models": [{"name": "m", "features": {"x": "numeric"}}]}))
    result = runner.invoke(app, ["run", "-c", str(config), "--jobmanager", "nohostport"])
    assert result.exit_code == 2 and "HOST:PORT" in result.output


def test_file_reference_mode_without_a_reference_is_a_config_error(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"reference": {"mode": "file", "path": ""},
                                      "models": [{"name": "m", "features": {"x": "numeric"}}]}))
    result = runner.invoke(app, ["run", "-c", str(config)])
    assert result.exit_code != 0


def test_invalid_config_names_file_line_and_field(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("models:\n  - name: m\n    features:\n      x: textual\n")
    events = tmp_path / "e.jsonl"
    events.write_text('{"event_time": 1767225600000, "model": "m", "features": {"x": 1}}\n')
    result = runner.invoke(app, ["reference", "build", "-i", str(events), "-o", str(tmp_path / "r"), "-c", str(config)])
    assert f"{config}:4: models.0.features.x" in str(result.exception)


def test_reference_build_prints_names_from_events_as_they_are(tmp_path):
    """Model names come from the events (no config: inferred) and are data, never console markup: a
    model named 'fraud[/]' stopped the command with rich's MarkupError, '[bold]churn' lost its bracket."""
    lines = [{"event_time": 1767225600000 + i * 1000, "model": model, "features": {"x": float(i % 97)}}
             for i in range(400) for model in ("fraud[/]", "[bold]churn")]
    events = tmp_path / "e.jsonl"
    events.write_text("".join(f"{json.dumps(line)}\n" for line in lines))
    out = tmp_path / "[v2]" / "ref.dwref"
    out.parent.mkdir()
    result = runner.invoke(app, ["reference", "build", "-i", str(events), "-o", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "fraud[/]: 1 features" in result.output and "[bold]churn: 1 features" in result.output
    assert f"wrote {out} from 800 events" in result.output


def test_postgres_password_goes_to_a_private_pgpass_file(tmp_path, monkeypatch):
    monkeypatch.setattr("driftwarden.jobs.cli.RUN_DIR", tmp_path)
    url = password_to_pgpass("postgresql://user:pa:ss@db.example:5433/drift")
    assert "pa:ss" not in url and url == "postgresql://user@db.example:5433/drift"
    pgpass = tmp_path / "pgpass"
    assert pgpass.read_text() == "db.example:5433:drift:user:pa\\:ss\n"
    assert stat.S_IMODE(pgpass.stat().st_mode) == 0o600
    assert os.environ["PGPASSFILE"] == str(pgpass)
    assert password_to_pgpass("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"


def test_a_password_in_the_query_goes_to_pgpass_too(tmp_path, monkeypatch):
    monkeypatch.setattr("driftwarden.jobs.cli.RUN_DIR", tmp_path)
    url = password_to_pgpass("postgresql+psycopg://db.example/drift?user=u&password=s3cr%3At&sslmode=require")
    assert url == "postgresql+psycopg://db.example/drift?sslmode=require&user=u"
    assert (tmp_path / "pgpass").read_text() == "db.example:5432:drift:u:s3cr\\:t\n"
    with pytest.raises(ConfigError, match="more than once"):
        password_to_pgpass("postgresql://db.example/drift?password=a&password=b")


def test_a_password_in_the_environment_variable_leaves_the_environment(tmp_path, monkeypatch):
    monkeypatch.setattr("driftwarden.jobs.cli.RUN_DIR", tmp_path)
    monkeypatch.setenv("DRIFTWARDEN_STORE_URL", "postgresql://u:hunter2@db.example/drift")
    assert job_store_url(None) == "postgresql://u@db.example/drift"
    assert "DRIFTWARDEN_STORE_URL" not in os.environ and "hunter2" in (tmp_path / "pgpass").read_text()
    monkeypatch.setenv("DRIFTWARDEN_STORE_URL", "postgresql://u@db.example/drift")  # nothing secret: kept
    assert job_store_url("sqlite:///x.db").startswith("sqlite:////")
    assert os.environ["DRIFTWARDEN_STORE_URL"] == "postgresql://u@db.example/drift"


def test_a_job_for_a_cluster_is_refused_a_password_and_told_to_name_a_password_file(tmp_path, monkeypatch):
    """A cluster's TaskManagers could only get a password through the job's arguments: refused, whatever the form."""
    monkeypatch.setattr("driftwarden.jobs.cli.RUN_DIR", tmp_path)
    monkeypatch.delenv("DRIFTWARDEN_STORE_URL", raising=False)
    for url in ("postgresql://u:hunter2@db.example/drift", "postgresql://u@db.example/drift?password=hunter2"):
        with pytest.raises(ConfigError, match=r"\?passfile=") as refused:
            job_store_url(url, cluster=True)
        assert "hunter2" not in str(refused.value)
    assert not (tmp_path / "pgpass").exists()
    named = "postgresql://u@db.example/drift?passfile=/run/secrets/pgpass"
    assert job_store_url(named, cluster=True) == named  # a file's name travels; the TaskManagers read it
    assert job_store_url("postgresql://u:hunter2@db.example/drift") == "postgresql://u@db.example/drift"  # embedded


def test_redacted_urls_hide_both_password_forms():
    from driftwarden.core.store import redact_url

    assert redact_url("postgresql://u:pw1@h/db?password=pw2&sslmode=require") == "postgresql://u:***@h/db?sslmode=require"
    assert redact_url("not a url:pw@h?password=pw2") == "h"


def test_webhook_secrets_leave_the_job_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HOOK_SECRET", "whsec_c2VjcmV0")
    monkeypatch.setenv("PYFLINK_GATEWAY_DISABLED", "true")
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump({
        "models": [{"name": "m", "features": {"x": "numeric"}}],
        "alerting": {"routes": [{"name": "r", "url": "https://hooks.example/x", "secret_env": "HOOK_SECRET"}]},
    }))
    _scrub_environment(load_config(path), path)
    assert "HOOK_SECRET" not in os.environ and "PYFLINK_GATEWAY_DISABLED" not in os.environ
