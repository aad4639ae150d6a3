"""Standard Webhooks signing and verification (https://www.standardwebhooks.com).

Each POST carries ``webhook-id`` (stable across retries: the receiver's idempotency key),
``webhook-timestamp`` (integer seconds) and ``webhook-signature``: space-separated
``v1,<base64 HMAC-SHA256 of "id.timestamp.body">``, one per active secret, so that a secret
can be rotated without a gap. Secrets come from the environment, never from the config file,
and are never logged. A secret is base64 (Standard Webhooks' ``whsec_<base64>`` form, or the
same base64 without the prefix, which the reference library decodes the same way); the key
must not be empty. Anything else is refused with the reason, since a sender and a receiver that
read one secret differently would reject every webhook.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import time
from typing import Iterable, Mapping

from driftwarden.core.errors import ConfigError, DriftwardenError

SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE_S = 300


class WebhookVerificationError(DriftwardenError):
    """A received webhook failed verification (bad signature, or timestamp out of tolerance)."""


def decode_secret(secret: str | bytes) -> bytes:
    """Return the key bytes of a secret (``whsec_<base64>`` or bare base64 text; bytes are the key itself)."""
    if isinstance(secret, bytes):
        if not secret:
            raise ConfigError("an empty webhook secret is not allowed")
        return secret
    prefixed = secret.startswith(SECRET_PREFIX)
    text = secret[len(SECRET_PREFIX):] if prefixed else secret
    try:
        key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)  # unpadded, as the reference accepts
    except (binascii.Error, ValueError):
        raise ConfigError(
            f"a webhook secret {'after whsec_ ' if prefixed else ''}is not valid base64: Standard Webhooks "
            "secrets are whsec_<base64 of the key> (the reference library base64-decodes a secret with or "
            "without the prefix, so a plain-text secret would sign with different bytes than the receiver "
            "checks); make one with: python -c \"import base64,os; print('whsec_'+base64.b64encode("
            "os.urandom(32)).decode())\"") from None
    if not key:
        raise ConfigError("an empty webhook secret is not allowed" + (" (nothing after whsec_)" if prefixed else ""))
    return key


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
    if not all(isinstance(v, str) and v.isascii() and v.isprintable() for v in (msg_id, ts_text, sig_text)):
        raise WebhookVerificationError("webhook-id, webhook-timestamp or webhook-signature is not printable ASCII")
    timestamp = _check_timestamp(ts_text, tolerance, time.time() if now is None else now)
    offered = [s.split(",", 1)[1].encode() for s in sig_text.split() if s.startswith("v1,")]
    for key in (decode_secret(s) for s in secrets):
        expected = sign(key, msg_id, timestamp, body).split(",", 1)[1].encode()
        if any(hmac.compare_digest(expected, candidate) for candidate in offered):
            return msg_id
    raise WebhookVerificationError("no matching signature")


def _check_timestamp(text: str, tolerance: int, now: float) -> int:
    """Parse the timestamp header and refuse one more than ``tolerance`` seconds off either way."""
    if not text.isdigit():
        raise WebhookVerificationError("webhook-timestamp is not an integer")
    try:
        timestamp = int(text)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from None
    if timestamp < now - tolerance:
        raise WebhookVerificationError("webhook-timestamp is too old")
    if timestamp > now + tolerance:
        raise WebhookVerificationError("webhook-timestamp is in the future")
    return timestamp
