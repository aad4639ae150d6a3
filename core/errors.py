"""The error hierarchy every driftwarden component raises.

Third-party failures (Kafka, Flink, SQL, HTTP) are translated at the boundary into
one of these, re-raised ``from`` the original, with a message that says what to do::

    DriftwardenError
    ├── ConfigError          a monitor config, CLI option or environment variable is wrong
    ├── InvalidEventError    one event is malformed (the stream goes on; the event is dead-lettered)
    ├── SketchError          a sketch cannot be built, merged or decoded
    │   └── SerializationError   bytes are corrupt or of an unknown format version
    ├── ServiceError         a real service (Kafka, PostgreSQL, Flink, Prometheus) is unreachable
    │   └── KafkaSecurityError   Kafka refused the connection as configured (authentication, TLS, protocol)
    ├── DeliveryError        a webhook could not be delivered
    └── ReplayError          a replay range or input cannot be read

The ``driftwarden`` command's exit codes, one meaning each (2 is the CLI library's usage error, so no
command returns it for anything else):

    0  done (whatever it found, unless a code below says otherwise)
    1  a DriftwardenError, printed in red without a traceback
    2  a usage error: an unknown or bad option or argument (click)
    3  the command ran and found the problem it checks for: ``status`` a job behind,
       ``bench`` a latency regression, ``demo --check`` a change missed or a false alarm
    4  ``status``: nothing behind, but a signal could not be read
  130  interrupted (Ctrl-C)
"""

from __future__ import annotations

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_FINDING = 3
EXIT_BEHIND = EXIT_FINDING
EXIT_REGRESSION = EXIT_FINDING
EXIT_UNKNOWN = 4


class DriftwardenError(Exception):
    """Base class of every error driftwarden raises on purpose."""


class ConfigError(DriftwardenError):
    """A monitor config, CLI option or environment variable is invalid."""


class InvalidEventError(DriftwardenError):
    """One event failed validation; ``reason`` is a short machine-friendly code."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class SketchError(DriftwardenError):
    """A sketch cannot be built, merged or compared."""


class SerializationError(SketchError):
    """Serialized bytes are corrupt, truncated or of an unknown version."""


class ServiceError(DriftwardenError):
    """A backing service is unreachable or answered with an error."""


class KafkaSecurityError(ServiceError):
    """Kafka refused the connection as ``source.security`` makes it; one line names the broker, the mechanism
    and the cause (wrong credentials, an untrusted or mismatched certificate, a protocol the listener does not
    speak)."""


class DeliveryError(DriftwardenError):
    """A webhook delivery failed for good."""


class ReplayError(DriftwardenError):
    """A replay range, topic or input file cannot be read."""
