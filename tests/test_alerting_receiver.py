"""The demo webhook receiver: Content-Length checks (raw sockets), the start-up failure window, the record file."""

from __future__ import annotations

import base64
import json
import socket
import time

import httpx
import pytest

from driftwarden.alerting.signing import signature_headers
from driftwarden.demo.receiver import MAX_BODY, DemoReceiver, content_length

KEY = b"receiver-test-key-receiver-test-key"
SECRET = "whsec_" + base64.b64encode(KEY).decode()
BODY = json.dumps({"status": "firing", "alerts": [{"status": "firing", "model": "m", "feature": "x"}]}).encode()


def raw_post(url: str, length_header: str | None, body: bytes = b"") -> int:
    """Send a hand-written POST (so any Content-Length can be sent) and return the status code."""
    host, port = url.split("//")[1].rstrip("/").split(":")
    head = "POST / HTTP/1.1\r\nHost: x\r\n" + (f"Content-Length: {length_header}\r\n" if length_header is not None else "")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        reply = sock.recv(4096).decode("latin-1")
    return int(reply.split(" ", 2)[1])


@pytest.fixture()
def receiver():
    server = DemoReceiver([SECRET]).start()
    yield server
    server.stop()


@pytest.mark.parametrize("header", ["-1", "-4194305", "abc", "1e3", "+5", " ", "0x10", "\u0661\u0662"])
def test_negative_or_non_numeric_content_length_is_a_400(receiver, header: str) -> None:
    assert raw_post(receiver.url, header.encode("utf-8").decode("latin-1")) == 400
    assert receiver.received == 0


def test_missing_content_length_is_a_400_and_too_long_a_413(receiver) -> None:
    assert raw_post(receiver.url, None) == 400
    assert raw_post(receiver.url, str(MAX_BODY + 1)) == 413
    assert receiver.received == 0


def test_content_length_parser() -> None:
    assert [content_length(v) for v in ("12", " 7 ", "0", "-1", "x", None, "")] == [12, 7, 0, None, None, None, None]


def test_a_signed_post_still_passes(receiver) -> None:
    headers = signature_headers("msg_ok", BODY, [KEY])
    assert httpx.post(receiver.url, content=BODY, headers=headers).status_code == 200
    assert receiver.verified == 1


def test_fail_for_answers_503_then_verifies_and_records(tmp_path) -> None:
    record = tmp_path / "got.jsonl"
    server = DemoReceiver([SECRET], fail_for_s=1.0, record=record).start()
    try:
        headers = signature_headers("msg_late", BODY, [KEY])
        first = httpx.post(server.url, content=BODY, headers=headers).status_code
        time.sleep(1.1)
        second = httpx.post(server.url, content=BODY, headers=headers).status_code
    finally:
        server.stop()
    assert (first, second) == (503, 200)
    lines = [json.loads(x) for x in record.read_text().splitlines()]
    assert [x["webhook_id"] for x in lines] == ["msg_late"] and lines[0]["body"]["alerts"][0]["feature"] == "x"


def test_a_segment_alert_is_described_as_feature_and_segment() -> None:
    from driftwarden.demo.receiver import Webhook

    hook = Webhook("msg_1", "firing", ({"status": "firing", "severity": "major", "model": "m", "feature": "age",
                                       "segment": {"country": "DE", "app": "ios"}, "window": {"start": "t"}},))
    assert hook.describe() == "firing major m: age [app=ios,country=DE] window t"
