"""How ``driftwarden run`` keeps the Kafka secrets of ``source.security`` out of the environment it hands on.

The end-to-end proof is tests/test_kafka_secrets_never_leak.py (a real job, everything searched); these pin
the two rules it rests on, without services.
"""

from __future__ import annotations

import os
import stat
import subprocess

from driftwarden.jobs import cli
from driftwarden.jobs.job_secrets import move_env_secrets, secret_env_names, with_secret_files
from driftwarden.schemas.config import MonitorConfig

SECURITY = {"protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": "u",
            "password_env": "DW_TEST_KAFKA_PW", "cert_file": "/c.pem", "key_file": "/k.pem",
            "key_password_env": "DW_TEST_KEY_PW"}


def _config(**security) -> MonitorConfig:
    return MonitorConfig.model_validate({"source": {"security": {**SECURITY, **security}},
                                         "models": [{"name": "m", "features": {"x": "numeric"}}]})


def test_an_embedded_run_moves_each_env_secret_into_a_private_file_and_out_of_the_environment(tmp_path,
                                                                                              monkeypatch):
    monkeypatch.setenv("DW_TEST_KAFKA_PW", "pw-1\n")
    monkeypatch.setenv("DW_TEST_KEY_PW", "kp-2")
    config = _config()
    folder = move_env_secrets(config.source.security, tmp_path)
    assert folder == tmp_path / "secrets" / str(os.getpid())
    assert "DW_TEST_KAFKA_PW" not in os.environ and "DW_TEST_KEY_PW" not in os.environ
    assert (folder / "DW_TEST_KAFKA_PW").read_text() == "pw-1" and (folder / "DW_TEST_KEY_PW").read_text() == "kp-2"
    for path in (tmp_path / "secrets", folder):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "DW_TEST_KAFKA_PW").stat().st_mode) == 0o600
    moved = with_secret_files(config, folder).source.security
    assert (moved.password_env, moved.key_password_env) == (None, None)
    assert (moved.password_file, moved.key_password_file) == (str(folder / "DW_TEST_KAFKA_PW"),
                                                              str(folder / "DW_TEST_KEY_PW"))
    assert moved.username == "u" and moved.key_file == "/k.pem"


def test_secrets_from_files_stay_where_they_are(tmp_path):
    config = _config(password_env=None, password_file="/run/secrets/kafka", key_password_env=None)
    assert secret_env_names(config.source.security) == []
    assert move_env_secrets(config.source.security, tmp_path) is None
    assert with_secret_files(config, tmp_path) is config


def test_the_flink_run_client_of_a_cluster_job_gets_no_secret_variable(monkeypatch):
    """`flink run` logs its whole environment (seen in its client log): it must not get the variables, which
    the TaskManagers hold in their own environment. ``subprocess.run`` is replaced because a cluster whose
    TaskManagers hold the variable cannot be started for one test here; the env it is handed is what counts."""
    monkeypatch.setenv("DW_TEST_KAFKA_PW", "pw-1")
    monkeypatch.setenv("DW_TEST_KEY_PW", "kp-2")
    monkeypatch.setenv("DW_TEST_OTHER", "kept")
    seen, commands = {}, []

    def flink_run(cmd, env, **_):
        seen.update(env)
        commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(cli.subprocess, "run", flink_run)
    cli._submit_to_cluster("127.0.0.1:1", [], secret_env_names(_config().source.security))
    assert "DW_TEST_KAFKA_PW" not in seen and "DW_TEST_KEY_PW" not in seen and seen["DW_TEST_OTHER"] == "kept"
    assert commands == [cli.cluster_submit_command("127.0.0.1:1", [])]  # the job by its module (-pym), as installed
