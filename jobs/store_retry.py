"""Retries of the sinks' store writes: while the store is unreachable the job waits, then catches up.

A window's transaction (results, counts, alerts, its dead letters) is retried whole after an error
of the store's availability (connection refused or lost, server shutting down: SQLAlchemy's
``OperationalError`` and ``InterfaceError``); every write is idempotent, so a retry after a commit
whose answer was lost stores nothing twice. A login the server refuses (no password, a wrong one) is
not an outage: it fails at once with a :class:`ServiceError` that says where the password goes. Errors of a row's content are not retried here (see
``pipeline.dead_letters.store_dead_letters``). The wait is bounded (:data:`RETRY_FOR_S`); after it the
error reaches Flink, whose restart strategy then ends the job with the error.

Each retry is logged and counted in ``driftwarden_store_write_retries_total{sink}``, and
``driftwarden_store_waiting{sink}`` is 1 while a sink waits. The embedded job (MiniCluster) runs its
Python functions in loopback mode, inside the process that started it: ``driftwarden run
--metrics-port`` serves these two there (:func:`register_metrics`). On a Flink cluster they live in
the TaskManagers' Python workers, where only the logged retries are seen.
"""

from __future__ import annotations

import logging
from typing import Callable, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge
from sqlalchemy.exc import InterfaceError, OperationalError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay, wait_exponential

from driftwarden.core.errors import ServiceError

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Longest a sink waits for the store before its error fails the task (seconds).
RETRY_FOR_S = 600.0
#: Waits between attempts grow from this to :data:`MAX_WAIT_S` (seconds).
FIRST_WAIT_S = 0.5
MAX_WAIT_S = 5.0
RETRYABLE = (OperationalError, InterfaceError)
#: What libpq says when the server refuses the login: a retry cannot help.
LOGIN_REFUSED = ("password authentication failed", "no password supplied")

# registry=None: nothing global is touched; register_metrics adds them to a registry that serves them
RETRIES = Counter("driftwarden_store_write_retries", "Store writes of the job retried after a store error",
                  ["sink"], registry=None)
WAITING = Gauge("driftwarden_store_waiting", "1 while a sink of the job waits for the store", ["sink"],
                registry=None)


def register_metrics(registry: CollectorRegistry) -> None:
    """Serve the store-retry metrics of the job's sinks (run in this process) from ``registry``."""
    registry.register(RETRIES)
    registry.register(WAITING)


def with_store_retries(sink: str, write: Callable[[], T], retry_for_s: float = RETRY_FOR_S,
                       sleep: Callable[[float], None] | None = None) -> T:
    """Run ``write`` (one whole transaction), retrying it while the store is unavailable."""
    kwargs = {"sleep": sleep} if sleep is not None else {}
    retrying = Retrying(retry=retry_if_exception(lambda exc: isinstance(exc, RETRYABLE) and not login_refused(exc)),
                        stop=stop_after_delay(retry_for_s),
                        wait=wait_exponential(multiplier=FIRST_WAIT_S, max=MAX_WAIT_S), reraise=True,
                        before_sleep=lambda state: _note_retry(sink, state, retry_for_s), **kwargs)
    try:
        return retrying(write)
    except RETRYABLE as exc:
        if login_refused(exc):
            raise ServiceError(f"{sink}: the store refused the login ({_refusal(exc)}): give the process that writes "
                               "(on a Flink cluster, each TaskManager) the password, in a libpq password file the "
                               "store URL names with ?passfile=PATH (docs/store.md)") from exc
        raise
    finally:
        WAITING.labels(sink).set(0)


def login_refused(exc: BaseException) -> bool:
    """Whether a store error is the server refusing the login (not the store being unavailable)."""
    return isinstance(exc, RETRYABLE) and any(marker in str(exc) for marker in LOGIN_REFUSED)


def _refusal(exc: BaseException) -> str:
    """Which refusal, in libpq's words (never the connection string)."""
    return next(marker for marker in LOGIN_REFUSED if marker in str(exc))


def _note_retry(sink: str, state: RetryCallState, retry_for_s: float) -> None:
    """Log and count one failed attempt."""
    RETRIES.labels(sink).inc()
    WAITING.labels(sink).set(1)
    error = state.outcome.exception() if state.outcome else None
    log.warning("%s: the store is unavailable (%s), attempt %d failed; retrying for up to %.0f s in all",
                sink, type(error).__name__, state.attempt_number, retry_for_s)
