"""A small schema registry serving the Confluent-compatible REST API, for development and tests.

Started by ``scripts/services.sh start registry`` on 127.0.0.1 (port 59098 + DRIFTWARDEN_PORT_OFFSET).
No real registry can be installed on these machines from the package registries they reach (see
docs/your-events.md, "The registry here"), so this one serves the part of the Confluent API that
producers and consumers use, with the Confluent wire format's ids:

* ``POST /subjects/{subject}/versions`` ``{"schema": "...", "schemaType": "AVRO"}`` -> ``{"id": n}``
  (the same schema registered again keeps its id; a schema fastavro cannot parse: 422, error 42201);
* ``POST /subjects/{subject}`` (is this schema registered under the subject?) -> its version;
* ``GET /schemas/ids/{id}`` -> ``{"schema": "..."}`` (unknown: 404, error 40403, as Confluent's);
* ``GET /subjects``, ``GET /subjects/{subject}/versions``, ``GET /subjects/{subject}/versions/{n|latest}``;
* ``GET /config`` (``BACKWARD``, read-only).

Every request needs HTTP basic auth as user ``driftwarden`` with the password in ``<dir>/password``
(written at the first start, mode 600), so clients are tested with credentials on. Schemas are kept
in ``<dir>/schemas.jsonl`` (appended, read back at start): ids survive a restart.

    python scripts/schema_registry.py --port 59098 --dir .run/registry
"""

from __future__ import annotations

import argparse
import base64
import hmac
import json
import re
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import fastavro

USER = "driftwarden"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class Store:
    """Schemas by id and subjects' versions, appended to a JSONL file and read back at start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.by_id: dict[int, str] = {}
        self.id_of: dict[str, int] = {}  # canonical form -> id
        self.subjects: dict[str, list[int]] = {}  # subject -> the id of each version, in order
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                entry = json.loads(line)
                self._remember(entry["subject"], entry["id"], entry["schema"])

    def _remember(self, subject: str, schema_id: int, schema: str) -> None:
        self.by_id[schema_id] = schema
        self.id_of.setdefault(canonical(schema), schema_id)
        versions = self.subjects.setdefault(subject, [])
        if schema_id not in versions:
            versions.append(schema_id)

    def register(self, subject: str, schema: str) -> int:
        """The schema's id under ``subject``: its existing one, or a new one (stored)."""
        with self.lock:
            schema_id = self.id_of.get(canonical(schema))
            if schema_id is None:
                schema_id = max(self.by_id, default=0) + 1
            if schema_id not in self.subjects.get(subject, []):
                self._remember(subject, schema_id, schema)
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(json.dumps({"subject": subject, "id": schema_id, "schema": schema}) + "\n")
            return schema_id


def canonical(schema: str) -> str:
    """The Avro parsing canonical form of a schema text (ValueError when it is not an Avro schema)."""
    try:
        return fastavro.schema.to_parsing_canonical_form(fastavro.parse_schema(json.loads(schema)))
    except Exception as exc:  # fastavro raises several kinds for a bad schema
        raise ValueError(f"not an Avro schema: {exc}") from exc


class Handler(BaseHTTPRequestHandler):
    """One request: basic auth, then the route."""

    store: Store
    password: str
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args) -> None:  # quiet: one line per error only
        pass

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, code: int, message: str) -> None:
        self._send(status, {"error_code": code, "message": message})

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        expected = "Basic " + base64.b64encode(f"{USER}:{self.password}".encode()).decode()
        if hmac.compare_digest(header.encode(), expected.encode()):
            return True
        self._error(401, 40101, "Unauthorized")
        return False

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:
        if not self._authorized():
            return
        path = urlsplit(self.path).path.rstrip("/")
        store = self.store
        if match := re.fullmatch(r"/schemas/ids/(\d+)", path):
            schema = store.by_id.get(int(match[1]))
            if schema is None:
                return self._error(404, 40403, "Schema not found")
            return self._send(200, {"schema": schema})
        if path == "/subjects":
            return self._send(200, sorted(store.subjects))
        if path == "/config":
            return self._send(200, {"compatibilityLevel": "BACKWARD"})
        if match := re.fullmatch(r"/subjects/([^/]+)/versions", path):
            versions = store.subjects.get(unquote(match[1]))
            if versions is None:
                return self._error(404, 40401, "Subject not found")
            return self._send(200, list(range(1, len(versions) + 1)))
        if match := re.fullmatch(r"/subjects/([^/]+)/versions/(latest|\d+)", path):
            return self._version(unquote(match[1]), match[2])
        self._error(404, 404, "Not found")

    def _version(self, subject: str, which: str) -> None:
        versions = self.store.subjects.get(subject)
        if versions is None:
            return self._error(404, 40401, "Subject not found")
        number = len(versions) if which == "latest" else int(which)
        if not 1 <= number <= len(versions):
            return self._error(404, 40402, "Version not found")
        schema_id = versions[number - 1]
        self._send(200, {"subject": subject, "version": number, "id": schema_id, "schema": self.store.by_id[schema_id]})

    def do_POST(self) -> None:
        if not self._authorized():
            return
        path = urlsplit(self.path).path.rstrip("/")
        try:
            body = self._body()
            schema = body["schema"]
            if body.get("schemaType", "AVRO") != "AVRO":
                return self._error(422, 42201, "only AVRO schemas are served here")
            canonical(schema)
        except (ValueError, KeyError, TypeError) as exc:
            return self._error(422, 42201, f"Invalid schema: {exc}")
        if match := re.fullmatch(r"/subjects/([^/]+)/versions", path):
            return self._send(200, {"id": self.store.register(unquote(match[1]), schema)})
        if match := re.fullmatch(r"/subjects/([^/]+)", path):
            subject = unquote(match[1])
            schema_id = self.store.id_of.get(canonical(schema))
            versions = self.store.subjects.get(subject, [])
            if schema_id not in versions:
                return self._error(404, 40403, "Schema not found")
            return self._send(200, {"subject": subject, "version": versions.index(schema_id) + 1, "id": schema_id,
                                    "schema": schema})
        self._error(404, 404, "Not found")


def password(folder: Path) -> str:
    """The registry's password: read from ``<folder>/password``, written (mode 600) at the first start."""
    path = folder / "password"
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(24), encoding="utf-8")
    return path.read_text(encoding="utf-8").strip()


def main() -> None:
    """Serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=59098)
    parser.add_argument("--dir", type=Path, required=True, help="where the password and the schemas are kept")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    Handler.store = Store(args.dir / "schemas.jsonl")
    Handler.password = password(args.dir)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"schema registry serving on 127.0.0.1:{args.port} ({len(Handler.store.by_id)} schemas)", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
