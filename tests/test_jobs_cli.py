"""`driftwarden run` and `driftwarden reference build`: options, errors, secrets kept out of the job."""

from __future__ import annotations

import os
import stat

import yaml
from typer.testing import CliRunner

from driftwarden.cli import app
from jobs.cli import _password_to_pgpass, _scrub_environment
from schemas.config import MonitorConfig

runner = CliRunner()


def test_run_help_shows_defaults():
    result = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for default in ("[default: 1]", "[default: 10000]", "[default: 0]", "[default: no-bounded]"):
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


def test_postgres_password_goes_to_a_private_pgpass_file(tmp_path, monkeypatch):
    monkeypatch.setattr("jobs.cli.RUN_DIR", tmp_path)
    url = _password_to_pgpass("postgresql://user:pa:ss@db.example:5433/drift")
    assert "pa:ss" not in url and url == "postgresql://user@db.example:5433/drift"
    pgpass = tmp_path / "pgpass"
    assert pgpass.read_text() == "db.example:5433:drift:user:pa\\:ss\n"
    assert stat.S_IMODE(pgpass.stat().st_mode) == 0o600
    assert os.environ["PGPASSFILE"] == str(pgpass)
    assert _password_to_pgpass("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"


def test_webhook_secrets_leave_the_job_environment(monkeypatch):
    monkeypatch.setenv("HOOK_SECRET", "whsec_c2VjcmV0")
    monkeypatch.setenv("PYFLINK_GATEWAY_DISABLED", "true")
    cfg = MonitorConfig.model_validate({
        "models": [{"name": "m", "features": {"x": "numeric"}}],
        "alerting": {"routes": [{"name": "r", "url": "https://hooks.example/x", "secret_env": "HOOK_SECRET"}]},
    })
    _scrub_environment(cfg)
    assert "HOOK_SECRET" not in os.environ and "PYFLINK_GATEWAY_DISABLED" not in os.environ
