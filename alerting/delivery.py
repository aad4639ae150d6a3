"""Webhook delivery: the :class:`AlertSink` seam, the HTTP sink, and the retry policy.

One attempt is one POST; :func:`attempt_with_retries` wraps attempts in a tenacity loop
(exponential backoff with jitter, Retry-After honoured) bounded by the claim's time budget.
Errors raised by a sink form a small tree::

    DeliveryError                 (driftwarden.errors)
    ├── RetryableDeliveryError    5xx, 429, timeout, connection error, host not resolving: retried
    └── RejectedDeliveryError     3xx (redirects are never followed), 4xx but 429: not retried
        └── EndpointGoneError     410: the route is disabled
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Protocol

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_exponential_jitter
from tenacity.stop import stop_base

from alerting.records import Delivery
from alerting.rules import RetryPolicy, Route
from alerting.signing import signature_headers
from alerting.ssrf import Resolver, UnresolvableHostError, check_url, system_resolver
from driftwarden.errors import DeliveryError

USER_AGENT = "driftwarden-webhooks/1"


class RetryableDeliveryError(DeliveryError):
    """A delivery attempt failed in a way that may succeed later."""

    def __init__(self, message: str, status_code: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after


class RejectedDeliveryError(DeliveryError):
    """The receiver refused the delivery for good (not retried)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class EndpointGoneError(RejectedDeliveryError):
    """The receiver answered 410 Gone: the endpoint is disabled."""


class AlertSink(Protocol):
    """Where deliveries go: one ``send`` per attempt, returning the 2xx status or raising a DeliveryError."""

    name: str

    def send(self, delivery: Delivery) -> int:
        """Deliver once; return the success status code or raise a DeliveryError subclass."""
        ...


@dataclass
class WebhookSink:
    """An HTTP POST sink for one route: SSRF-checked, pinned to the checked IP, signed.

    The response body is never read (only the status and Retry-After), so a receiver cannot make
    the worker buffer an arbitrary amount of data.
    """

    route: Route
    client: httpx.Client
    keys: list[bytes] = field(repr=False)  # signing secrets: never in a repr or a log line
    resolver: Resolver = system_resolver
    clock: Callable[[], float] = time.time

    @property
    def name(self) -> str:
        """The route name."""
        return self.route.name

    def send(self, delivery: Delivery) -> int:
        """POST the delivery body once to the route's URL and classify the answer."""
        try:
            target = check_url(self.route.url, self.route.allow_private, self.resolver)
        except UnresolvableHostError as exc:
            raise RetryableDeliveryError(str(exc)) from exc
        body = delivery.body
        headers = {"content-type": "application/json", "user-agent": USER_AGENT, "host": target.host_header,
                   **signature_headers(delivery.webhook_id, body, self.keys, int(self.clock()))}
        try:
            with self.client.stream("POST", target.pinned_url, content=body, headers=headers,
                                    timeout=self.route.timeout_s, follow_redirects=False,
                                    extensions={"sni_hostname": target.host}) as response:
                status, retry_after = response.status_code, response.headers.get("retry-after")
        except httpx.TimeoutException as exc:
            raise RetryableDeliveryError(f"timed out after {self.route.timeout_s:g} s ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise RetryableDeliveryError(f"connection failed: {type(exc).__name__}") from exc
        return classify(status, retry_after, self.clock())


def classify(status: int, retry_after: str | None = None, now: float | None = None) -> int:
    """Return a 2xx status, or raise the DeliveryError that the status means."""
    if 200 <= status < 300:
        return status
    if status == 429 or status >= 500:
        raise RetryableDeliveryError(f"receiver answered {status}", status, parse_retry_after(retry_after, now))
    if status == 410:
        raise EndpointGoneError("receiver answered 410 Gone: endpoint disabled", status)
    if 300 <= status < 400:
        raise RejectedDeliveryError(f"receiver answered {status} (redirects are not followed)", status)
    raise RejectedDeliveryError(f"receiver answered {status}", status)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Return the seconds a Retry-After header asks for (delta-seconds or HTTP-date), None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


class wait_retry_after:
    """A tenacity wait: the receiver's Retry-After when it sent one (capped), else the fallback wait."""

    def __init__(self, fallback: Callable[[RetryCallState], float], cap: float) -> None:
        self.fallback = fallback
        self.cap = cap

    def __call__(self, state: RetryCallState) -> float:
        """Return the seconds to wait before the next attempt."""
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, RetryableDeliveryError) and exc.retry_after is not None:
            return min(exc.retry_after, self.cap)
        return self.fallback(state)


class stop_before_budget(stop_base):
    """A tenacity stop: stop when the time spent so far plus the next wait would pass the budget.

    Time spent is the larger of wall time and the waits slept, so an injected (fake) sleep counts too.
    """

    def __init__(self, budget_s: float) -> None:
        self.budget_s = max(budget_s, 0.0)

    def __call__(self, state: RetryCallState) -> bool:
        """Return True when no further attempt fits in the budget."""
        spent = max(state.seconds_since_start or 0.0, state.idle_for)
        return spent + (state.upcoming_sleep or 0.0) >= self.budget_s


def wait_strategy(policy: RetryPolicy) -> wait_retry_after:
    """Return the tenacity wait of a retry policy."""
    backoff = wait_exponential_jitter(multiplier=policy.initial_s, max=policy.max_backoff_s, jitter=policy.jitter_s)
    return wait_retry_after(backoff, policy.max_retry_after_s)


@dataclass(frozen=True)
class AttemptResult:
    """What a run of attempts under one claim ended with."""

    attempts: int
    status_code: int | None
    error: DeliveryError | None
    next_delay_s: float | None  # for a retryable error: how long to wait before the next claim


def attempt_with_retries(send: Callable[[], int], policy: RetryPolicy, budget_s: float,
                         sleep: Callable[[float], None] = time.sleep) -> AttemptResult:
    """Call ``send`` until it succeeds, fails for good, or the next wait would pass ``budget_s``."""
    wait = wait_strategy(policy)
    retrying = Retrying(retry=retry_if_exception_type(RetryableDeliveryError), wait=wait,
                        stop=stop_before_budget(budget_s), sleep=sleep, reraise=True)
    try:
        code = retrying(send)
        return AttemptResult(_attempts(retrying), code, None, None)
    except RetryableDeliveryError as exc:
        return AttemptResult(_attempts(retrying), exc.status_code, exc, _next_delay(retrying, wait, exc))
    except DeliveryError as exc:
        return AttemptResult(_attempts(retrying), getattr(exc, "status_code", None), exc, None)


def _attempts(retrying: Retrying) -> int:
    return int(retrying.statistics.get("attempt_number", 1))


def _next_delay(retrying: Retrying, wait: wait_retry_after, exc: BaseException) -> float:
    """The wait tenacity would have chosen next, for the durable retry schedule."""
    state = RetryCallState(retrying, None, (), {})
    state.attempt_number = _attempts(retrying)
    state.set_exception((type(exc), exc, exc.__traceback__))
    return float(wait(state))


def utcnow() -> datetime:
    """The current time, aware UTC."""
    return datetime.now(timezone.utc)
