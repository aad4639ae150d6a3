"""``source.security``: what the config accepts, how each error names file, line and field, how secrets are read.

No service is needed. The translations themselves are compared with the Java client in
tests/test_kafka_security_agreement.py.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from driftwarden.core.errors import ConfigError
from driftwarden.core.kafka_security import java_key_problem, java_properties, librdkafka_config, read_secret
from driftwarden.schemas.config import KafkaSecurity, SourceConfig, load_config, load_security
from tests.tls_helpers import make_client_tls

#: A value that must never be printed back, whatever field it is wrongly written into.
NOT_A_NAME = "s3cr3t-Pa55!"


def _config(tmp_path: Path, security: str) -> Path:
    """A monitor config whose source.security is ``security`` (YAML lines, indented under it)."""
    path = tmp_path / "monitor.yaml"
    path.write_text("source:\n  topics: [features]\n  bootstrap_servers: b:9093\n  security:\n"
                    + textwrap.indent(textwrap.dedent(security).strip("\n"), "    ") + "\n"
                    + "models:\n  - name: m\n    features: {x: numeric}\n")
    return path


def test_the_issue_example_loads_and_relative_files_are_read_from_the_config_folder(tmp_path):
    config = load_config(_config(tmp_path, """
        protocol: SASL_SSL
        sasl_mechanism: SCRAM-SHA-512
        username: driftwarden
        password_env: KAFKA_PASSWORD
        ca_file: ca.pem
        cert_file: /etc/client.pem
        key_file: client.key
        key_password_env: KEY_PASSWORD
    """))
    security = config.source.security
    assert (security.protocol, security.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert security.username == "driftwarden"
    assert security.ca_file == str(tmp_path / "ca.pem") and security.key_file == str(tmp_path / "client.key")
    assert security.cert_file == "/etc/client.pem"
    assert security.sasl and security.tls


def test_no_section_means_plaintext_and_only_bootstrap_servers():
    source = SourceConfig(bootstrap_servers="b:9092")
    assert source.security == KafkaSecurity() and source.security.protocol == "PLAINTEXT"
    assert librdkafka_config(source) == {"bootstrap.servers": "b:9092", "security.protocol": "PLAINTEXT"}
    assert java_properties(source.security) == {"security.protocol": "PLAINTEXT"}


@pytest.mark.parametrize("security, line, message", [
    ("protocol: SSL\nusername: u", 6, "source.security.username: only with protocol SASL_PLAINTEXT or SASL_SSL "
                                      "(protocol is SSL)"),
    ("protocol: PLAINTEXT\nca_file: ca.pem", 6, "source.security.ca_file: only with protocol SSL or SASL_SSL"),
    ("protocol: SASL_PLAINTEXT\nsasl_mechanism: PLAIN\nusername: u\npassword_env: P\nkey_file: k.pem", 9,
     "source.security.key_file: only with protocol SSL or SASL_SSL (protocol is SASL_PLAINTEXT)"),
    ("protocol: SASL_SSL\nsasl_mechanism: PLAIN\nusername: u", 5,
     "source.security: protocol SASL_SSL needs password_env or password_file"),
    ("protocol: SASL_SSL\npassword_file: pw", 5, "source.security: protocol SASL_SSL needs sasl_mechanism, username"),
    ("protocol: SASL_SSL\nsasl_mechanism: PLAIN\nusername: u\npassword_env: P\npassword_file: pw", 9,
     "source.security.password_file: give password_env or password_file, not both"),
    ("protocol: SASL_SSL\nsasl_mechanism: GSSAPI\nusername: u\npassword_env: P", 6,
     "source.security.sasl_mechanism: Input should be 'PLAIN', 'SCRAM-SHA-256' or 'SCRAM-SHA-512'"),
    ("protocol: sasl_ssl", 5, "source.security.protocol: Input should be 'PLAINTEXT', 'SSL', 'SASL_PLAINTEXT' or "
                              "'SASL_SSL'"),
    ("protocol: SSL\ncert_file: c.pem", 5, "source.security: mutual TLS needs both cert_file and key_file"),
    ("protocol: SSL\nkey_file: k.pem", 5, "source.security: mutual TLS needs both cert_file and key_file"),
    ("protocol: SSL\nkey_password_env: KP", 5, "source.security: key_password_env / key_password_file decrypt "
                                               "key_file: give key_file"),
    ("protocol: SSL\npasword_file: pw", 6, "source.security.pasword_file: Extra inputs are not permitted"),
    ("protocol: SSL\nca_file: 'a}b'", 6, "source.security.ca_file: a file path, not empty, without NUL or '}'"),
])
def test_each_error_names_file_line_and_field(tmp_path, security, line, message):
    path = _config(tmp_path, security)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}:{line}: {message}"), str(err.value)


@pytest.mark.parametrize("field", ["password_env", "key_password_env"])
def test_a_secret_written_where_a_variable_name_belongs_is_refused_and_never_printed(tmp_path, field):
    extra = "sasl_mechanism: PLAIN\nusername: u\n" if field == "password_env" else "cert_file: c\nkey_file: k\n"
    protocol = "SASL_SSL" if field == "password_env" else "SSL"
    path = _config(tmp_path, f"protocol: {protocol}\n{extra}{field}: '{NOT_A_NAME}'")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert f"source.security.{field}: the name of an environment variable" in str(err.value)
    assert NOT_A_NAME not in str(err.value)


def test_a_security_file_of_its_own_loads_with_the_same_rules(tmp_path):
    path = tmp_path / "security.yaml"
    path.write_text("protocol: SSL\nca_file: ca.pem\ncert_file: c.pem\nkey_file: k.pem\n")
    assert load_security(path).key_file == str(tmp_path / "k.pem")
    path.write_text("protocol: SSL\n\nusername: u\n")
    with pytest.raises(ConfigError, match=rf"^{path}:3: username: only with protocol SASL_"):
        load_security(path)


def test_secrets_are_read_without_their_final_line_breaks(tmp_path, monkeypatch):
    secret = tmp_path / "secret"
    secret.write_bytes('p"a\\ss w:rd}\n\r\n'.encode())
    assert read_secret(None, str(secret), "password") == 'p"a\\ss w:rd}'
    monkeypatch.setenv("DW_TEST_SECRET", "from-env\n")
    assert read_secret("DW_TEST_SECRET", None, "password") == "from-env"


def test_a_missing_secret_names_the_variable_or_file_and_never_a_value(tmp_path, monkeypatch):
    monkeypatch.delenv("DW_TEST_UNSET", raising=False)
    with pytest.raises(ConfigError, match="^source.security.password_env: environment variable DW_TEST_UNSET is "
                                          "not set; set it to the password"):
        read_secret("DW_TEST_UNSET", None, "password")
    with pytest.raises(ConfigError, match=f"^source.security.key_password_file: cannot read {tmp_path}/nope: "
                                          "No such file or directory"):
        read_secret(None, str(tmp_path / "nope"), "key_password")


def test_the_java_properties_hold_references_never_a_secret(tmp_path, monkeypatch):
    """Every SASL and mutual-TLS form, secrets from the environment and from files: the Java client's
    properties (the job's source settings, the SQL source's options) never hold the secret itself."""
    secret = tmp_path / "secret"
    secret.write_text(NOT_A_NAME)
    monkeypatch.setenv("DW_TEST_SECRET", NOT_A_NAME)
    for source in ({"password_env": "DW_TEST_SECRET"}, {"password_file": str(secret)}):
        key_source = {k.replace("password", "key_password"): v for k, v in source.items()}
        security = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256", username="u", ca_file="ca.pem",
                                 cert_file="c.pem", key_file="k.pem", **source, **key_source)
        props = java_properties(security)
        assert NOT_A_NAME not in repr(props)
        assert props["config.providers"] == "dwsecret"
        assert props["config.providers.dwsecret.class"] == "dev.driftwarden.flink.KafkaSecretProvider"
        rdkafka = librdkafka_config(SourceConfig(bootstrap_servers="b:9093", security=security))
        assert rdkafka["sasl.password"] == rdkafka["ssl.key.password"] == NOT_A_NAME


def test_keys_the_java_client_cannot_read_are_named_with_the_fix(tmp_path):
    tls = make_client_tls(tmp_path, "kp")

    def problem(key: Path) -> str | None:
        return java_key_problem(KafkaSecurity(protocol="SSL", cert_file=str(tls.cert_file), key_file=str(key)))

    assert problem(tls.key_pkcs8) is None and problem(tls.key_pbes1) is None
    assert "is a 'RSA PRIVATE KEY' (not PKCS#8)" in problem(tls.key_pkcs1)
    assert "openssl pkcs8 -topk8 -nocrypt" in problem(tls.key_pkcs1)
    assert "encrypted with PBES2" in problem(tls.key_pbes2) and "-v1 PBE-SHA1-3DES" in problem(tls.key_pbes2)
    assert "holds no PEM private key" in problem(tls.cert_file)
    assert problem(tmp_path / "only-on-the-taskmanagers.key") is None  # not readable here: not judged here
