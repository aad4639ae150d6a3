"""A schema registry client (the Confluent-compatible REST API): writer schemas by id, cached, retried.

Only ``GET /schemas/ids/{id}`` is asked, once per id: a schema is immutable under its id, so a
found schema is cached for good, and so is an id the registry answers it does not know (404).
The registry briefly unreachable (a refused connection, a timeout, a 5xx or 429 answer) delays
the caller: the request is retried after each of :data:`RETRY_DELAYS_S` (logged), and only then
fails with a :class:`ServiceError`; the records waiting on it are never dropped. The password is
read from the environment or a file (``password_env`` / ``password_file``, by
:func:`core.kafka_security.read_secret`, as Kafka's), never kept in config, logs or errors.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

import httpx
import orjson

from driftwarden.core.errors import ServiceError
from driftwarden.core.kafka_security import read_secret

log = logging.getLogger(__name__)

#: Seconds to wait before each retry of a registry the caller cannot reach (about 1 minute in all).
RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
#: Seconds one request may take.
TIMEOUT_S = 10.0


class RegistryClient:
    """Writer schemas by id from one registry (``schema_registry`` of the config), each asked once."""

    def __init__(self, url: str, username: str | None = None, password: str | None = None,
                 retry_delays_s: tuple[float, ...] = RETRY_DELAYS_S,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.url = url.rstrip("/")
        self._auth = (username, password or "") if username else None
        self._delays = retry_delays_s
        self._sleep = sleep
        self._cache: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._http: httpx.Client | None = None

    @classmethod
    def of(cls, config: Any) -> "RegistryClient":
        """The client of a config's ``source.schema_registry`` (:class:`schemas.config.SchemaRegistryConfig`)."""
        password = None
        if config.password_env or config.password_file:
            password = read_secret(config.password_env, config.password_file, "password", "source.schema_registry")
        return cls(config.url, config.username, password)

    def schema_text(self, schema_id: int) -> str | None:
        """The schema registered under ``schema_id`` (its JSON text), or None when the registry has no such id."""
        if schema_id in self._cache:
            return self._cache[schema_id]
        with self._lock:
            if schema_id not in self._cache:
                self._cache[schema_id] = self._fetch(schema_id)
            return self._cache[schema_id]

    def _fetch(self, schema_id: int) -> str | None:
        where = f"{self.url}/schemas/ids/{schema_id}"
        for attempt, delay in enumerate((*self._delays, None), start=1):
            try:
                answer = self._client().get(where)
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if answer.status_code == 200:
                    return orjson.loads(answer.content)["schema"]
                if answer.status_code == 404:
                    return None
                if answer.status_code in (401, 403):
                    raise ServiceError(f"schema registry {self.url} refused the credentials (HTTP {answer.status_code}); "
                                       "check source.schema_registry's username and password_env / password_file")
                problem = f"HTTP {answer.status_code}"
                if answer.status_code < 500 and answer.status_code != 429:
                    raise ServiceError(f"schema registry {self.url} answered {problem} for schema id {schema_id}")
            if delay is None:
                break
            log.warning("schema registry %s unreachable for schema id %d (%s): retry %d of %d in %.1f s",
                        self.url, schema_id, problem, attempt, len(self._delays), delay)
            self._sleep(delay)
        raise ServiceError(f"schema registry {self.url} unreachable for schema id {schema_id} after "
                           f"{len(self._delays)} retries over {sum(self._delays):.0f} s ({problem}); is it running?")

    def _client(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(auth=self._auth, timeout=TIMEOUT_S,
                                      headers={"Accept": "application/vnd.schemaregistry.v1+json"})
        return self._http

    def close(self) -> None:
        """Close the HTTP connection (the cache stays)."""
        if self._http is not None:
            self._http.close()
            self._http = None
