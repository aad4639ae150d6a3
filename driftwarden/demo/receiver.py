"""A local webhook receiver: verifies each POST's Standard Webhooks signature, records and prints it.

Answers 200 to a verified webhook, 401 to one that fails verification (the sender then marks
the delivery failed: a forged alert never reads as delivered), 400 to a missing, negative or
non-numeric ``Content-Length`` and 413 to a body over 4 MiB. Redeliveries are recognised by
their ``webhook-id`` and counted once. ``fail_for_s`` makes it answer 503 for its first seconds
(a receiver that is still starting), and ``record`` appends each verified webhook to a JSON
Lines file, so a test can kill and restart it and still see everything it accepted.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

from driftwarden.alerting.signing import WebhookVerificationError, verify_webhook
from driftwarden.schemas.alert_tables import segment_key

MAX_BODY = 4 * 1024 * 1024


@dataclass(frozen=True)
class Webhook:
    """One verified webhook: its id and the alerts of its native body."""

    webhook_id: str
    status: str
    alerts: tuple[dict, ...]

    def describe(self) -> str:
        """One line per alert: status, severity, model, feature (and segment) and the window start."""
        lines = []
        for a in self.alerts:
            segment = f" [{segment_key(a['segment'])}]" if isinstance(a.get("segment"), dict) and a["segment"] else ""
            lines.append(f"{a.get('status')} {a.get('severity')} {a.get('model')}: {a.get('feature')}{segment} "
                         f"window {a.get('window', {}).get('start')}")
        return "\n".join(lines) or f"{self.status} (no alerts)"


def content_length(value: str | None) -> int | None:
    """The request's body length, or None when the header is missing, negative or not a decimal number."""
    if value is None or not value.strip().isascii() or not value.strip().isdigit():
        return None
    return int(value.strip())


class DemoReceiver:
    """Threaded HTTP server; ``received``/``verified``/``rejected`` count POSTs, ``webhooks`` keeps the verified."""

    def __init__(self, secrets: list[str], host: str = "127.0.0.1", port: int = 0,
                 on_webhook: Callable[[Webhook], None] | None = None,
                 on_reject: Callable[[str], None] | None = None,
                 fail_for_s: float = 0.0, record: Path | None = None) -> None:
        self.secrets = secrets
        self.fail_until = time.monotonic() + fail_for_s
        self.record = record
        self.on_webhook, self.on_reject = on_webhook, on_reject
        self.webhooks: list[Webhook] = []
        self.received = self.verified = self.rejected = self.duplicates = 0
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="demo-receiver", daemon=True)

    @property
    def url(self) -> str:
        """Base URL the server listens on."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/"

    def start(self) -> "DemoReceiver":
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def serve_forever(self) -> None:
        """Serve in the calling thread (the ``demo receiver`` command)."""
        self._server.serve_forever()

    def handle(self, headers: dict[str, str], body: bytes) -> int:
        """Verify and record one POST; return the HTTP status to answer."""
        with self._lock:
            self.received += 1
        if time.monotonic() < self.fail_until:
            return 503
        try:
            webhook_id = verify_webhook(headers, body, self.secrets)
            doc = json.loads(body)
        except (WebhookVerificationError, ValueError) as exc:
            with self._lock:
                self.rejected += 1
            if self.on_reject:
                self.on_reject(str(exc))
            return 401 if isinstance(exc, WebhookVerificationError) else 400
        webhook = Webhook(webhook_id, str(doc.get("status")), tuple(doc.get("alerts") or ()))
        with self._lock:
            self.verified += 1
            duplicate = webhook_id in self._seen
            self._seen.add(webhook_id)
            if duplicate:
                self.duplicates += 1
            else:
                self.webhooks.append(webhook)
            if self.record is not None:
                with self.record.open("a", encoding="utf-8") as out:
                    out.write(json.dumps({"webhook_id": webhook_id, "at": time.time(), "body": doc}) + "\n")
        if self.on_webhook and not duplicate:
            self.on_webhook(webhook)
        return 200

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = content_length(self.headers.get("content-length"))
                if length is None or length > MAX_BODY:
                    self.close_connection = True  # the body (if any) is not read: the connection cannot be reused
                    status = 400 if length is None else 413
                else:
                    body = self.rfile.read(length)
                    status = receiver.handle({k.lower(): v for k, v in self.headers.items()}, body)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_args) -> None:
                pass

        return Handler
