"""``source.security``, translated once for each Kafka client library.

* librdkafka (confluent-kafka: replay, consumer lag, ``status``, the dead-letter topic writer, the demo):
  :func:`librdkafka_config`, with the secrets read when the client is made;
* the Java client of Flink's Kafka connector (the job's Kafka source, the smoke job's SQL source):
  :func:`java_properties`, which holds no secret: each is a reference (``${dwsecret:KIND:LOCATOR}``) that
  ``KafkaSecretProvider`` (jobs/java, a Kafka config provider) reads where the client runs, on the TaskManager.
  The job's configuration, plan, logs and checkpoints therefore never see a password.

Both say the same thing (``tests/test_kafka_security_agreement.py`` resolves the Java properties in the Java
client itself and compares, for every combination)::

    source.security   librdkafka                      Java client (the connector's shaded kafka-clients)
    protocol          security.protocol               security.protocol
    sasl_mechanism    sasl.mechanism                  sasl.mechanism, and the login module of sasl.jaas.config
    username          sasl.username                   sasl.jaas.config: username="..."
    password_*        sasl.password                   sasl.jaas.config: password="${dwsecret:env-jaas|file-jaas:...}"
    ca_file           ssl.ca.location                 ssl.truststore.location (type PEM)
    cert_file         ssl.certificate.location        ssl.keystore.certificate.chain ${dwsecret:file:...} (type PEM)
    key_file          ssl.key.location                ssl.keystore.key ${dwsecret:file:...}
    key_password_*    ssl.key.password                ssl.key.password ${dwsecret:env|file:...}
    (TLS)             ssl.endpoint.identification.algorithm https, in both

A secret never ends with a line break: a file's UTF-8 text, or a variable's value, is taken without its final
CR/LF characters, in both languages (:func:`read_secret`, ``KafkaSecretProvider``).
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

from driftwarden.core.errors import ConfigError
from driftwarden.schemas.config import KafkaSecurity, SourceConfig

#: Where the Flink Kafka connector's jar relocates kafka-clients: login modules are named by their class.
JAVA_KAFKA_PACKAGE = "org.apache.flink.kafka.shaded.org.apache.kafka"
#: The config provider of the job's jar that resolves the references, and its name in the properties.
SECRET_PROVIDER_CLASS = "dev.driftwarden.flink.KafkaSecretProvider"
SECRET_PROVIDER = "dwsecret"
#: DER of the PBES2 algorithm's OID (1.2.840.113549.1.5.13): OpenSSL's default for an encrypted PKCS#8 key.
_PBES2_OID = bytes.fromhex("06092a864886f70d01050d")
_PEM_KEY = re.compile(r"-----BEGIN ([A-Z ]*PRIVATE KEY)-----\s*(.*?)-----END", re.S)
LOGIN_MODULES = {"PLAIN": "common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-256": "common.security.scram.ScramLoginModule",
                 "SCRAM-SHA-512": "common.security.scram.ScramLoginModule"}


def librdkafka_config(source: SourceConfig) -> dict[str, str]:
    """librdkafka's settings for the source's brokers: ``bootstrap.servers`` and the security, secrets read now.

    >>> librdkafka_config(SourceConfig(bootstrap_servers="b:9092"))
    {'bootstrap.servers': 'b:9092', 'security.protocol': 'PLAINTEXT'}
    """
    return {"bootstrap.servers": source.bootstrap_servers, **librdkafka_security(source.security)}


def librdkafka_security(security: KafkaSecurity) -> dict[str, str]:
    """librdkafka's security settings (``security.protocol``, ``sasl.*``, ``ssl.*``), secrets read now."""
    conf = {"security.protocol": security.protocol}
    if security.sasl:
        conf.update({"sasl.mechanism": security.sasl_mechanism, "sasl.username": security.username,
                     "sasl.password": read_secret(security.password_env, security.password_file, "password")})
    if security.tls:
        conf["ssl.endpoint.identification.algorithm"] = "https"
        if security.ca_file:
            conf["ssl.ca.location"] = security.ca_file
        if security.cert_file:
            conf.update({"ssl.certificate.location": security.cert_file, "ssl.key.location": security.key_file})
        if security.key_password_env or security.key_password_file:
            conf["ssl.key.password"] = read_secret(security.key_password_env, security.key_password_file,
                                                   "key_password")
    return conf


def java_properties(security: KafkaSecurity) -> dict[str, str]:
    """The Java client's security properties; every secret a reference that the client resolves where it runs.

    >>> props = java_properties(KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="PLAIN", username="key",
    ...                                       password_env="KAFKA_PASSWORD"))
    >>> props["sasl.jaas.config"].split(" ", 1)[1]
    'required username="key" password="${dwsecret:env-jaas:KAFKA_PASSWORD}";'
    """
    props = {"security.protocol": security.protocol}
    if security.sasl:
        module = f"{JAVA_KAFKA_PACKAGE}.{LOGIN_MODULES[security.sasl_mechanism]}"
        password = secret_reference(security.password_env, security.password_file, jaas=True)
        props.update({"sasl.mechanism": security.sasl_mechanism,
                      "sasl.jaas.config": f'{module} required username="{jaas_quoted(security.username)}" '
                                          f'password="{password}";'})
    if security.tls:
        props["ssl.endpoint.identification.algorithm"] = "https"
        if security.ca_file:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": security.ca_file})
        if security.cert_file:
            props.update({"ssl.keystore.type": "PEM",
                          "ssl.keystore.certificate.chain": secret_reference(None, security.cert_file),
                          "ssl.keystore.key": secret_reference(None, security.key_file)})
        if security.key_password_env or security.key_password_file:
            props["ssl.key.password"] = secret_reference(security.key_password_env, security.key_password_file)
    if any("${" in value for value in props.values()):
        props.update({"config.providers": SECRET_PROVIDER,
                      f"config.providers.{SECRET_PROVIDER}.class": SECRET_PROVIDER_CLASS})
    return props


def secret_reference(env: str | None, file: str | None, jaas: bool = False) -> str:
    """The reference ``KafkaSecretProvider`` resolves to the secret in environment variable ``env`` or in
    ``file`` (``jaas``: quoted for a JAAS option value, as :func:`jaas_quoted` does).

    >>> secret_reference("KAFKA_PASSWORD", None), secret_reference(None, "/run/secrets/kafka", jaas=True)
    ('${dwsecret:env:KAFKA_PASSWORD}', '${dwsecret:file-jaas:/run/secrets/kafka}')
    """
    kind = "env" if env else "file"
    return f"${{{SECRET_PROVIDER}:{kind}{'-jaas' if jaas else ''}:{env or file}}}"


def read_secret(env: str | None, file: str | None, field: str, section: str = "source.security") -> str:
    """The secret in environment variable ``env``, or in ``file`` (UTF-8); without its final line breaks.

    ``field``: the config's name for it (``password``, ``key_password``), and ``section`` the config section
    it is in (``source.schema_registry`` reads its password here too), for the ConfigError that says which
    variable is not set or which file cannot be read; the error never holds the secret.
    """
    if env:
        value = os.environ.get(env)
        if value is None:
            raise ConfigError(f"{section}.{field}_env: environment variable {env} is not set; "
                              f"set it to the {field.replace('_', ' ')} (or use {field}_file)")
        return value.rstrip("\r\n")
    try:
        return Path(file).read_bytes().decode("utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(f"{section}.{field}_file: cannot read {file}: {reason}") from None


def jaas_quoted(text: str) -> str:
    """``text`` escaped for a double-quoted JAAS option value (Kafka parses it with Java's StreamTokenizer):
    backslash and double quote escaped, control characters as octal escapes (KafkaSecretProvider's twin).

    >>> print(jaas_quoted('a"b\\\\c\\n'))
    a\\"b\\\\c\\012
    """
    out = []
    for char in text:
        if char in '\\"':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\{ord(char):03o}")
        else:
            out.append(char)
    return "".join(out)


def java_key_problem(security: KafkaSecurity) -> str | None:
    """Why the Java client (Flink's Kafka connector, Java 17) cannot load ``key_file``, when this process can
    read it and it is of a kind librdkafka takes but Java does not; None otherwise.

    Java reads PKCS#8 PEM only (``BEGIN PRIVATE KEY``, or ``BEGIN ENCRYPTED PRIVATE KEY`` encrypted with
    PBES1, e.g. ``-v1 PBE-SHA1-3DES``); OpenSSL's traditional keys (``BEGIN RSA PRIVATE KEY``) and its
    default PBES2 encryption fail there (measured: tests/test_kafka_security_agreement.py).
    """
    if not security.key_file:
        return None
    try:
        match = _PEM_KEY.search(Path(security.key_file).read_text(encoding="ascii", errors="replace"))
    except OSError:
        return None  # not readable here (a path on the TaskManagers only): the job's own client will say
    convert = f"openssl pkcs8 -topk8 -nocrypt -in {security.key_file} -out client-pkcs8.key"
    if match is None:
        return f"key_file {security.key_file} holds no PEM private key"
    if match[1] not in ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY"):
        return (f"key_file {security.key_file} is a '{match[1]}' (not PKCS#8), which Flink's Java Kafka client "
                f"cannot read: convert it with `{convert}` (keep the file private)")
    try:
        der = base64.b64decode(re.sub(r"\s+", "", match[2]))
    except ValueError:
        return f"key_file {security.key_file}: its PEM body is not base64"
    if match[1] == "ENCRYPTED PRIVATE KEY" and _PBES2_OID in der[:24]:
        return (f"key_file {security.key_file} is encrypted with PBES2 (OpenSSL's default), which Flink's Java "
                f"Kafka client cannot decrypt: re-encrypt it with PBES1 (`openssl pkcs8 -in {security.key_file} | "
                f"openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES -out client-pbes1.key`), or give it unencrypted "
                f"(`openssl pkcs8 -in {security.key_file} -out client-pkcs8.key`) in a file only the job can read")
    return None
