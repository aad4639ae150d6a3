"""Standard Webhooks signing: checked by an independent HMAC computation, and the verifier's refusals."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import pytest

from driftwarden.alerting.signing import WebhookVerificationError, decode_secret, secrets_from_env, signature_headers, verify_webhook
from driftwarden.core.errors import ConfigError

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
    second = base64.b64encode(b"second-key").decode()  # bare base64: decoded as the reference library does
    env = {"HOOK_SECRET": f"{WHSEC} {second}", "HOOK_OLD": "whsec_b2xkZXI"}  # unpadded base64 of "older"
    assert secrets_from_env("HOOK_SECRET HOOK_OLD", env) == [KEY, b"second-key", b"older"]
    assert secrets_from_env(None, env) == []
    with pytest.raises(ConfigError, match="MISSING_VAR"):
        secrets_from_env("MISSING_VAR", env)


def test_bad_whsec_secret_is_a_config_error_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as info:
        decode_secret("whsec_***not-base64***")
    assert "not-base64" not in str(info.value)


def reference(secret: str | bytes):
    """The Standard Webhooks reference library (PyPI ``standardwebhooks``), a test dependency."""
    from standardwebhooks.webhooks import Webhook

    return Webhook(secret)


@pytest.mark.parametrize("secret", [WHSEC, base64.b64encode(KEY).decode(), "whsec_" + base64.b64encode(KEY).decode().rstrip("=")])
def test_our_signature_verifies_with_the_reference_library(secret: str) -> None:
    now = int(time.time())
    headers = signature_headers("msg_ref", BODY, [decode_secret(secret)], timestamp=now)
    assert reference(secret).verify(BODY, headers) == {"version": "1", "alerts": []}


def test_the_reference_library_signature_verifies_with_ours() -> None:
    from datetime import datetime, timezone

    now = int(time.time())
    signature = reference(WHSEC).sign("msg_theirs", datetime.fromtimestamp(now, timezone.utc), BODY.decode())
    headers = {"webhook-id": "msg_theirs", "webhook-timestamp": str(now), "webhook-signature": signature}
    assert verify_webhook(headers, BODY, [WHSEC]) == "msg_theirs"


def test_the_specification_example_verifies() -> None:
    """The example of the Standard Webhooks specification (and of the reference library's own tests)."""
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    headers = {"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
               "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}
    body = b'{"test": 2432232314}'
    assert verify_webhook(headers, body, [secret], now=1614265330) == "msg_p5jXN8AQM9LWM0D4loKWxJek"
    assert signature_headers(headers["webhook-id"], body, [decode_secret(secret)], 1614265330)[
        "webhook-signature"] == headers["webhook-signature"]


@pytest.mark.parametrize("secret", ["whsec_", ""])
def test_an_empty_key_is_refused(secret: str) -> None:
    with pytest.raises(ConfigError, match="empty"):
        decode_secret(secret)


def test_a_secret_the_reference_would_read_differently_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError, match="base64") as info:
        decode_secret("my plain password!")
    assert "reference library" in str(info.value) and "plain password" not in str(info.value)


@pytest.mark.parametrize("signature", ["v1,ñññ", "v1,\u00e9t\u00e9", "v1", "v1,", ",,,", "v1,abc def", "v2,xyz", "\x00"])
def test_malformed_or_non_ascii_signature_fails_verification_cleanly(signature: str) -> None:
    headers = {**signature_headers("msg_3", BODY, [KEY]), "webhook-signature": signature}
    with pytest.raises(WebhookVerificationError):
        verify_webhook(headers, BODY, [KEY])


@pytest.mark.parametrize("field,value", [("webhook-id", "m\u00e9g"), ("webhook-timestamp", "١٧٠٠"),
                                         ("webhook-timestamp", "-5"), ("webhook-timestamp", "1e9")])
def test_malformed_id_or_timestamp_fails_verification_cleanly(field: str, value: str) -> None:
    headers = {**signature_headers("msg_4", BODY, [KEY]), field: value}
    with pytest.raises(WebhookVerificationError):
        verify_webhook(headers, BODY, [KEY])
