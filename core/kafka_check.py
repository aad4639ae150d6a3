"""Connect to Kafka once, as ``source.security`` says, and say in one line what is wrong when that fails.

``run`` (before the job starts), ``replay``, ``status`` and the demo call :func:`check_kafka` first: the Kafka
clients retry a refused connection for ever, so a wrong password was a hang, or a job restarting in a loop.
librdkafka names most causes in its error callback; a certificate it cannot verify is checked again with
Python's ``ssl`` (an untrusted CA, or a name the certificate does not list), and a listener that closes the
connection at once is probed for TLS (plaintext spoken to a TLS listener). Errors::

    KafkaSecurityError   refused as configured: authentication, TLS, a protocol the listener does not speak
    ServiceError         no broker answers (nothing listens, or no answer within the timeout)
"""

from __future__ import annotations

import re
import socket
import ssl
import time

from driftwarden.core.errors import KafkaSecurityError, ServiceError
from driftwarden.core.kafka_security import librdkafka_config
from driftwarden.schemas.config import KafkaSecurity, SourceConfig

#: Seconds to wait for the brokers' first answer; a refusal is reported as soon as it arrives.
DEFAULT_TIMEOUT_S = 10.0
#: librdkafka's errors name the broker first: ``sasl_ssl://127.0.0.1:59093/bootstrap: ...``.
_BROKER = re.compile(r"^(?:\w+://)?(?P<broker>\[[^\]]+\]:\d+|[^/\s:]+:\d+)/\S*?: (?P<text>.*)$", re.S)
_OFFERED = re.compile(r"supported mechanisms: (?P<offered>[\w, -]+)")
#: OpenSSL's verify results for a certificate that does not name the host or address connected to.
_NAME_MISMATCH = {62, 64}


def check_kafka(source: SourceConfig, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Return once the brokers answer a metadata request; else raise, naming broker, mechanism and cause.

    KafkaSecurityError when the connection is refused as configured, ServiceError when no broker answers,
    ConfigError when a secret cannot be read.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list = []
    try:
        admin = AdminClient({**librdkafka_config(source), "error_cb": errors.append, "log_level": 0})
    except KafkaException as exc:  # a client certificate or key that cannot be loaded (a wrong key password)
        raise KafkaSecurityError(f"{describe(source)}: cannot load key_file {source.security.key_file} with "
                                 f"cert_file (a wrong key password? not PEM?): {exc.args[0].str()}") from None
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.list_topics(timeout=0.25)
            return
        except KafkaException as exc:
            last = exc.args[0].str()
        admin.poll(0)
        _raise_for(errors, source)
        if time.monotonic() > deadline:
            raise ServiceError(f"{describe(source)}: no answer within {timeout_s:g} s ({last}); is Kafka running "
                               "there (scripts/services.sh start kafka)?")


def describe(source: SourceConfig, broker: str | None = None) -> str:
    """The broker (default: the bootstrap servers) and how it is spoken to, for a message.

    >>> describe(SourceConfig(bootstrap_servers="b:9093", security={"protocol": "SASL_SSL",
    ...     "sasl_mechanism": "SCRAM-SHA-512", "username": "dw", "password_env": "PW"}))
    "Kafka b:9093 (SASL_SSL, SCRAM-SHA-512, user 'dw')"
    """
    security = source.security
    how = security.protocol
    if security.sasl:
        how += f", {security.sasl_mechanism}, user {security.username!r}"
    if security.cert_file:
        how += f", client certificate {security.cert_file}"
    return f"Kafka {broker or source.bootstrap_servers} ({how})"


def _raise_for(errors: list, source: SourceConfig) -> None:
    """Raise for the first decisive error librdkafka reported, if any."""
    from confluent_kafka import KafkaError

    for error in errors:
        broker, text = _split(error.str())
        cause = _cause(error.code(), text, broker, source.security)
        if cause is not None:
            raise KafkaSecurityError(f"{describe(source, broker)}: {cause}")
        if error.code() == KafkaError._TRANSPORT and "refused" in text.lower():
            raise ServiceError(f"{describe(source, broker)}: nothing listens there (connection refused); is Kafka "
                               "running (scripts/services.sh start kafka)?")
    if any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors):
        broker = source.bootstrap_servers.split(",")[0].strip()
        raise KafkaSecurityError(f"{describe(source, broker)}: {_closed_at_once(broker, source.security)}")


def _split(text: str) -> tuple[str | None, str]:
    """(the broker's host:port, the rest) of a librdkafka error text."""
    match = _BROKER.match(text)
    return (match["broker"], match["text"]) if match else (None, text)


def _cause(code: int, text: str, broker: str | None, security: KafkaSecurity) -> str | None:
    """What a librdkafka error says is wrong with the configuration, None when it is not about it."""
    from confluent_kafka import KafkaError

    if code == KafkaError._AUTHENTICATION:
        return _authentication(text, security)
    if code == KafkaError._SSL and "certificate verify failed" in text and broker:
        return _untrusted(broker, security) or f"TLS: {text}"
    if code == KafkaError._SSL:
        return f"TLS: {text}"
    if code == KafkaError._TRANSPORT and "PLAINTEXT broker listener" in text:
        return (f"TLS: the listener does not speak TLS, and protocol {security.protocol} does; use the broker's "
                f"TLS listener, or protocol {security.protocol.replace('SSL', 'PLAINTEXT')}")
    if code == KafkaError._TRANSPORT and re.search(r"alert (bad certificate|certificate required|handshake)", text):
        if not security.cert_file:
            return ("TLS: the listener requires a client certificate (mutual TLS) and none is configured: "
                    "set cert_file and key_file")
        return f"TLS: the broker refused the client certificate {security.cert_file} (not signed by a CA it trusts?)"
    return None


def _authentication(text: str, security: KafkaSecurity) -> str:
    offered = _OFFERED.search(text)
    if offered:
        return (f"the broker does not offer SASL mechanism {security.sasl_mechanism} (it offers "
                f"{offered['offered'].strip()}): set sasl_mechanism to one of them")
    if not security.sasl:
        return f"authentication failed: {text}"
    source = f"${security.password_env}" if security.password_env else f"file {security.password_file}"
    return (f"authentication failed: wrong password, or no user {security.username!r} for "
            f"{security.sasl_mechanism} (the broker does not say which); the password came from {source}")


def _untrusted(broker: str, security: KafkaSecurity) -> str | None:
    """Why the broker's certificate fails verification, found again with Python's ``ssl``; None if it passes."""
    host, port = _host_port(broker)
    context = ssl.create_default_context(cafile=security.ca_file)
    try:
        with socket.create_connection((host, port), timeout=5) as sock:
            with context.wrap_socket(sock, server_hostname=host):
                return None
    except ssl.SSLCertVerificationError as exc:
        if exc.verify_code in _NAME_MISMATCH:
            return (f"TLS: the broker's certificate is not valid for {host} ({exc.verify_message}); connect by a "
                    "host name or address that the certificate lists")
        signer = (f"ca_file {security.ca_file} did not sign it" if security.ca_file
                  else "no ca_file is set, and the system's trust store does not know its CA: set ca_file")
        return f"TLS: the broker's certificate is not trusted ({exc.verify_message}); {signer}"
    except (OSError, ssl.SSLError):
        return None


def _closed_at_once(broker: str, security: KafkaSecurity) -> str:
    """Why a broker closed the connection before answering: a TLS listener spoken to without TLS, or SASL."""
    if not security.tls and _speaks_tls(*_host_port(broker)):
        return (f"the listener speaks TLS and protocol {security.protocol} does not: set protocol "
                f"{'SASL_SSL' if security.sasl else 'SSL'} (with ca_file for a private CA)")
    return ("the broker closed the connection before answering; does the listener expect another protocol "
            f"than {security.protocol} (SASL, TLS)?")


def _speaks_tls(host: str, port: int) -> bool:
    """Whether ``host:port`` completes a TLS handshake (its certificate not checked)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=5) as sock:
            with context.wrap_socket(sock, server_hostname=host):
                return True
    except (OSError, ssl.SSLError):
        return False


def _host_port(broker: str) -> tuple[str, int]:
    host, port = broker.rsplit(":", 1)
    return host.strip("[]"), int(port)
