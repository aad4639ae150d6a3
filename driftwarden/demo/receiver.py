"""A local webhook receiver: verifies each POST's Standard Webhooks signature, records and prints it.

Answers 200 to a verified webhook, 401 to one that fails verification (the sender then marks
the delivery failed: a forged alert never reads as delivered). Redeliveries are recognised by
their ``webhook-id`` and counted once.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from alerting.signing import WebhookVerificationError, verify_webhook

MAX_BODY = 4 * 1024 * 1024


@dataclass(frozen=True)
class Webhook:
    """One verified webhook: its id and the alerts of its native body."""

    webhook_id: str
    status: str
    alerts: tuple[dict, ...]

    def describe(self) -> str:
        """One line per alert: status, severity, window start and the drifted features."""
        lines = []
        for a in self.alerts:
            names = ", ".join(f"{f['name']} ({f['severity']})" for f in a.get("features", []))
            lines.append(f"{a.get('status')} {a.get('severity')} {a.get('model')} "
                         f"window {a.get('window', {}).get('start')}: {names}")
        return "\n".join(lines) or f"{self.status} (no alerts)"


class DemoReceiver:
    """Threaded HTTP server; ``received``/``verified``/``rejected`` count POSTs, ``webhooks`` keeps the verified."""

    def __init__(self, secrets: list[str], host: str = "127.0.0.1", port: int = 0,
                 on_webhook: Callable[[Webhook], None] | None = None,
                 on_reject: Callable[[str], None] | None = None) -> None:
        self.secrets = secrets
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
        if self.on_webhook and not duplicate:
            self.on_webhook(webhook)
        return 200

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(min(length, MAX_BODY))
                status = receiver.handle({k.lower(): v for k, v in self.headers.items()}, body)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_args) -> None:
                pass

        return Handler
