"""Standard Webhooks signing and verification (https://www.standardwebhooks.com).

Each POST carries ``webhook-id`` (stable across retries: the receiver's idempotency key),
``webhook-timestamp`` (integer seconds) and ``webhook-signature``: space-separated
``v1,<base64 HMAC-SHA256 of "id.timestamp.body">``, one per active secret, so that a secret
can be rotated without a gap. Secrets come from the environment, never from the config file,
and are never logged. A secret in the ``whsec_<base64>`` form is base64-decoded; any other
string is used as its UTF-8 bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import time
from typing import Iterable, Mapping

from driftwarden.errors import ConfigError, DriftwardenError

SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE_S = 300


class WebhookVerificationError(DriftwardenError):
    """A received webhook failed verification (bad signature, or timestamp out of tolerance)."""


def decode_secret(secret: str | bytes) -> bytes:
    """Return the key bytes of a secret (``whsec_`` base64 form, or raw text/bytes)."""
    if isinstance(secret, bytes):
        return secret
    if secret.startswith(SECRET_PREFIX):
        try:
            return base64.b64decode(secret[len(SECRET_PREFIX):], validate=True)
        except binascii.Error as exc:
            raise ConfigError("a whsec_ secret is not valid base64") from exc
    if not secret:
        raise ConfigError("an empty webhook secret is not allowed")
    return secret.encode()


def secrets_from_env(names: str | None, environ: Mapping[str, str] | None = None) -> list[bytes]:
    """Read the signing secrets named by ``names`` (space-separated env vars, each may hold several)."""
    if not names:
        return []
    env = os.environ if environ is None else environ
    keys: list[bytes] = []
    for name in names.split():
        if name not in env:
            raise ConfigError(f"environment variable {name} (a webhook signing secret) is not set")
        keys.extend(decode_secret(part) for part in env[name].split())
    return keys


def sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """Return one ``v1,<base64>`` signature of ``id.timestamp.body`` under ``key``."""
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def signature_headers(msg_id: str, body: bytes, keys: Iterable[bytes], timestamp: int | None = None) -> dict[str, str]:
    """Return the three Standard Webhooks headers for one attempt (signature omitted without keys)."""
    ts = int(time.time()) if timestamp is None else int(timestamp)
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(ts)}
    signatures = [sign(k, msg_id, ts, body) for k in keys]
    if signatures:
        headers["webhook-signature"] = " ".join(signatures)
    return headers


def verify_webhook(
    headers: Mapping[str, str],
    body: bytes,
    secrets: Iterable[str | bytes],
    tolerance: int = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> str:
    """Check a received webhook against any of ``secrets``; return its webhook-id or raise."""
    lower = {k.lower(): v for k, v in headers.items()}
    msg_id, ts_text, sig_text = (lower.get(h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not msg_id or not ts_text or not sig_text:
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature header")
    timestamp = _check_timestamp(ts_text, tolerance, time.time() if now is None else now)
    offered = [s.split(",", 1)[1] for s in sig_text.split() if s.startswith("v1,")]
    for key in (decode_secret(s) for s in secrets):
        expected = sign(key, msg_id, timestamp, body).split(",", 1)[1]
        if any(hmac.compare_digest(expected, candidate) for candidate in offered):
            return msg_id
    raise WebhookVerificationError("no matching signature")


def _check_timestamp(text: str, tolerance: int, now: float) -> int:
    """Parse the timestamp header and refuse one more than ``tolerance`` seconds off either way."""
    try:
        timestamp = int(text)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from None
    if timestamp < now - tolerance:
        raise WebhookVerificationError("webhook-timestamp is too old")
    if timestamp > now + tolerance:
        raise WebhookVerificationError("webhook-timestamp is in the future")
    return timestamp
