"""One rule names the store and Kafka for every command: the option, else the config, else the environment, else
the default (core/endpoints.py), and the alert commands follow it through their --config (the README's recipe:
the job and the alert worker share the store the config names)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.core.endpoints import (BOOTSTRAP_SERVERS_ENV, DEFAULT_BOOTSTRAP_SERVERS, STORE_URL_ENV,
                                        bootstrap_servers, store_url)
from driftwarden.schemas.config import MonitorConfig, SourceConfig
from tests.test_alerting_cli import store_with_alert


def test_store_url_option_then_config_then_environment_then_sqlite(monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(STORE_URL_ENV, "postgresql://env@db/env")
    assert store_url("postgresql://opt@db/opt", "postgresql://cfg@db/cfg") == "postgresql://opt@db/opt"
    assert store_url(None, "postgresql://cfg@db/cfg") == "postgresql://cfg@db/cfg"
    assert store_url(None, None) == "postgresql://env@db/env"
    monkeypatch.delenv(STORE_URL_ENV)
    assert store_url(None, None) == f"sqlite:///{tmp_path / 'driftwarden.db'}"  # absolute: workers run elsewhere
    assert store_url("sqlite:///sub/s.db") == f"sqlite:///{tmp_path / 'sub' / 's.db'}"


def test_kafka_option_then_config_then_environment_then_localhost(monkeypatch) -> None:
    monkeypatch.setenv(BOOTSTRAP_SERVERS_ENV, "env:9092")
    assert bootstrap_servers("opt:9092", "cfg:9092") == "opt:9092"
    assert bootstrap_servers(None, "cfg:9092") == "cfg:9092"
    assert SourceConfig().bootstrap_servers == "env:9092"  # a config that names none
    assert SourceConfig(bootstrap_servers="cfg:9092").bootstrap_servers == "cfg:9092"
    config = MonitorConfig.model_validate({"source": {"bootstrap_servers": "cfg:9092"},
                                           "models": [{"name": "m", "features": {"x": "numeric"}}]})
    assert config.with_bootstrap_servers("opt:9092").source.bootstrap_servers == "opt:9092"
    assert config.with_bootstrap_servers(None) is config
    monkeypatch.delenv(BOOTSTRAP_SERVERS_ENV)
    assert SourceConfig().bootstrap_servers == DEFAULT_BOOTSTRAP_SERVERS == "localhost:9092"


@pytest.mark.parametrize("command", [["alerts", "list"], ["alerts", "prune", "--keep", "1d"]])
def test_alert_commands_read_the_configs_store_before_the_environment(command, monkeypatch, tmp_path) -> None:
    with_alert = store_with_alert(tmp_path, store=f"sqlite:///{tmp_path / 'job.db'}")[0]  # the store the job wrote
    monkeypatch.setenv(STORE_URL_ENV, f"sqlite:///{tmp_path / 'other.db'}")
    config = tmp_path / "monitor.yaml"
    config.write_text(f"store_url: {with_alert}\nmodels: [{{name: m, features: {{x: numeric}}}}]\n")
    result = CliRunner().invoke(app, [*command, "--config", str(config)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    if command[1] == "list":
        assert "firing" in result.output, result.output  # the job's store, not $DRIFTWARDEN_STORE_URL's
    assert not (tmp_path / "other.db").exists()


def test_a_store_url_that_is_not_text_names_the_line(tmp_path) -> None:
    config = tmp_path / "monitor.yaml"
    config.write_text("models: []\nstore_url: [1, 2]\n")
    result = CliRunner().invoke(app, ["alerts", "list", "--config", str(config)])
    assert result.exit_code != 0 and f"{config}:2: store_url must be a text" in str(result.exception)
