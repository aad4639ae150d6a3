"""Standard Webhooks signing: checked by an independent HMAC computation, and the verifier's refusals."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import pytest

from alerting.signing import WebhookVerificationError, decode_secret, secrets_from_env, signature_headers, verify_webhook
from driftwarden.errors import ConfigError

KEY = b"0123456789abcdef0123456789abcdef"
WHSEC = "whsec_" + base64.b64encode(KEY).decode()
BODY = b'{"version":"1","alerts":[]}'


def independent_signature(key: bytes, msg_id: str, ts: str, body: bytes) -> str:
    """The spec's recipe, written out without the module under test."""
    return base64.b64encode(hmac.new(key, msg_id.encode() + b"." + ts.encode() + b"." + body, hashlib.sha256).digest()).decode()


def test_signature_matches_an_independent_hmac() -> None:
    headers = signature_headers("msg_1", BODY, [decode_secret(WHSEC)], timestamp=1_700_000_000)
    assert headers["webhook-id"] == "msg_1"
    assert headers["webhook-timestamp"] == "1700000000"
    version, sig = headers["webhook-signature"].split(",", 1)
    assert version == "v1"
    assert sig == independent_signature(KEY, "msg_1", "1700000000", BODY)


def test_verifier_accepts_a_fresh_signature() -> None:
    headers = signature_headers("msg_2", BODY, [KEY])
    assert verify_webhook(headers, BODY, [WHSEC]) == "msg_2"


@pytest.mark.parametrize("mutate", [
    lambda h, b: (h, b + b" "),
    lambda h, b: (h, b.replace(b"1", b"2")),
    lambda h, b: ({**h, "webhook-id": "msg_other"}, b),
    lambda h, b: ({**h, "webhook-timestamp": str(int(h["webhook-timestamp"]) + 1)}, b),
    lambda h, b: ({**h, "webhook-signature": "v1," + base64.b64encode(b"x" * 32).decode()}, b),
    lambda h, b: ({**h, "webhook-signature": h["webhook-signature"].replace("v1,", "v2,")}, b),
    lambda h, b: ({k: v for k, v in h.items() if k != "webhook-signature"}, b),
], ids=["body-appended", "body-changed", "id-changed", "timestamp-changed", "forged", "wrong-version", "unsigned"])
def test_tampering_is_rejected(mutate) -> None:
    headers, body = mutate(signature_headers("msg_3", BODY, [KEY]), BODY)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(headers, body, [KEY])


def test_wrong_secret_is_rejected() -> None:
    headers = signature_headers("msg_4", BODY, [KEY])
    with pytest.raises(WebhookVerificationError, match="no matching signature"):
        verify_webhook(headers, BODY, [b"another-secret-entirely"])


@pytest.mark.parametrize("offset,message", [(-301, "too old"), (301, "in the future")])
def test_stale_and_future_timestamps_are_rejected(offset: int, message: str) -> None:
    now = time.time()
    headers = signature_headers("msg_5", BODY, [KEY], timestamp=int(now) + offset)
    with pytest.raises(WebhookVerificationError, match=message):
        verify_webhook(headers, BODY, [KEY], tolerance=300, now=now)


def test_timestamps_within_tolerance_are_accepted() -> None:
    now = time.time()
    for offset in (-299, 299):
        headers = signature_headers("msg_6", BODY, [KEY], timestamp=int(now) + offset)
        assert verify_webhook(headers, BODY, [KEY], now=now) == "msg_6"


def test_rotation_signs_with_every_secret_and_either_verifies() -> None:
    old, new = b"old-secret-old-secret", b"new-secret-new-secret"
    headers = signature_headers("msg_7", BODY, [new, old])
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert verify_webhook(headers, BODY, [old]) == "msg_7"
    assert verify_webhook(headers, BODY, [new]) == "msg_7"
    assert verify_webhook(signature_headers("msg_7", BODY, [new]), BODY, [old, new]) == "msg_7"


def test_secrets_come_from_named_env_vars() -> None:
    env = {"HOOK_SECRET": f"{WHSEC} raw-second-secret", "HOOK_OLD": "older"}
    assert secrets_from_env("HOOK_SECRET HOOK_OLD", env) == [KEY, b"raw-second-secret", b"older"]
    assert secrets_from_env(None, env) == []
    with pytest.raises(ConfigError, match="MISSING_VAR"):
        secrets_from_env("MISSING_VAR", env)


def test_bad_whsec_secret_is_a_config_error_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as info:
        decode_secret("whsec_***not-base64***")
    assert "not-base64" not in str(info.value)
