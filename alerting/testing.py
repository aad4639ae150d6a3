"""A real webhook receiver for tests and local trials: a threaded HTTP server on 127.0.0.1.

Its behaviour is a plain function from the received request to a :class:`Reply`; every request
is recorded (headers, body, arrival time) whatever the reply, so tests can count deliveries per
``webhook-id`` and verify signatures independently.
"""

from __future__ import annotations

import argparse
import json
import signal
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Received:
    """One request as the receiver saw it."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass(frozen=True)
class Reply:
    """What the receiver answers: status, extra headers, a body, and a delay before answering."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: bytes = b""


Behaviour = Callable[[Received], Reply]


class WebhookReceiver:
    """Context manager running a recording HTTP(S) server; ``url`` is its base URL.

    ``tls`` is (certfile, keyfile) to serve HTTPS; ``port`` 0 takes a free port.
    """

    def __init__(self, behaviour: Behaviour = lambda _r: Reply(), tls: tuple[str, str] | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.behaviour = behaviour
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._scheme = "https" if tls else "http"
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:PORT``."""
        return f"{self._scheme}://127.0.0.1:{self._server.server_address[1]}"

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self._server.server_address[1])

    def __enter__(self) -> "WebhookReceiver":
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until another thread calls ``__exit__`` (a signal handler, say)."""
        self._server.serve_forever()

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def by_webhook_id(self) -> dict[str, list[Received]]:
        """Group the received requests by their webhook-id header."""
        groups: dict[str, list[Received]] = {}
        for item in list(self.received):
            groups.setdefault(item.headers.get("webhook-id", ""), []).append(item)
        return groups

    def _record(self, item: Received) -> None:
        with self._lock:
            self.received.append(item)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length", "0"))
                item = Received(self.path, {k.lower(): v for k, v in self.headers.items()},
                                self.rfile.read(length), time.monotonic())
                receiver._record(item)
                reply = receiver.behaviour(item)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST  # noqa: N815 - a GET (an API a test stands in for) is recorded and answered alike

            def log_message(self, *_args: object) -> None:
                pass

        return Handler


def record_to(path: Path) -> Behaviour:
    """A behaviour that answers 200 and appends each request to ``path`` as one JSON line (path, time, body)."""
    lock = threading.Lock()

    def behaviour(item: Received) -> Reply:
        try:
            body: object = json.loads(item.body)
        except ValueError:
            body = item.body.decode("utf-8", "replace")
        with lock, path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"path": item.path, "at": time.time(), "body": body}) + "\n")
        return Reply()

    return behaviour


def main(argv: list[str] | None = None) -> None:
    """``python -m driftwarden.alerting.testing --port P --record FILE``: the receiver behind the local Alertmanager."""
    parser = argparse.ArgumentParser(description="Record every POST (e.g. Alertmanager's notifications) as JSON lines.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, required=True, help="port to listen on")
    parser.add_argument("--record", type=Path, required=True, help="JSON Lines file each request is appended to")
    args = parser.parse_args(argv)
    receiver = WebhookReceiver(record_to(args.record), host=args.host, port=args.port)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=receiver.__exit__).start())
    print(f"recording POSTs on {receiver.url} into {args.record}", flush=True)
    receiver.serve_forever()


if __name__ == "__main__":
    main()
