"""Pinning over real sockets: the POST goes to the checked IP, with the original Host and TLS name."""

from __future__ import annotations

import ssl
import subprocess
from datetime import datetime, timezone

import httpx
import pytest

from driftwarden.alerting.delivery import RetryableDeliveryError, WebhookSink
from driftwarden.core.records import Delivery
from driftwarden.alerting.rules import Route
from driftwarden.alerting.testing import WebhookReceiver

DELIVERY = Delivery(1, "msg_pin", "r", "m", b"{}", 0, datetime(2026, 3, 1, tzinfo=timezone.utc))


def resolver(table: dict[str, list[str]]):
    return lambda host, _port: table.get(host, [host])


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[str, str]:
    """A self-signed certificate for the name hooks.test only (no IP in its SAN)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=hooks.test", "-addext", "subjectAltName=DNS:hooks.test"],
                   check=True, capture_output=True)
    return cert, key


def test_http_goes_to_the_pinned_ip_with_the_original_host_header() -> None:
    with WebhookReceiver() as receiver, httpx.Client(trust_env=False) as client:
        route = Route(name="r", url=f"http://hooks.test:{receiver.port}/hook", allow_private=True)
        sink = WebhookSink(route, client, [], resolver({"hooks.test": ["127.0.0.1"]}))
        assert sink.send(DELIVERY) == 200
    assert receiver.received[0].headers["host"] == f"hooks.test:{receiver.port}"
    assert receiver.received[0].path == "/hook"


def test_https_verifies_the_certificate_against_the_original_name(certificate) -> None:
    cert, _key = certificate
    trust = ssl.create_default_context(cafile=cert)
    with WebhookReceiver(tls=certificate) as receiver, httpx.Client(verify=trust, trust_env=False) as client:
        good = WebhookSink(Route(name="r", url=f"https://hooks.test:{receiver.port}/hook", allow_private=True),
                           client, [], resolver({"hooks.test": ["127.0.0.1"]}))
        assert good.send(DELIVERY) == 200
        impostor = WebhookSink(Route(name="r", url=f"https://evil.test:{receiver.port}/hook", allow_private=True),
                               client, [], resolver({"evil.test": ["127.0.0.1"]}))
        with pytest.raises(RetryableDeliveryError, match="connection failed"):
            impostor.send(DELIVERY)
    assert len(receiver.received) == 1 and receiver.received[0].headers["host"] == f"hooks.test:{receiver.port}"
