"""Webhook delivery: the :class:`AlertSink` seam, the HTTP sink, and the retry policy.

One claim is one attempt, one POST: a failure is recorded at once and the delivery waits
:func:`backoff_s` (exponential in its failures so far, with jitter; Retry-After honoured) before
it can be claimed again, so a worker is never held by one receiver's retries. Errors raised by a
sink form a small tree::

    DeliveryError                 (core.errors)
    ├── RetryableDeliveryError    5xx, 429, timeout, connection error, host not resolving: retried
    └── RejectedDeliveryError     3xx (redirects are never followed), 4xx but 429: not retried
        └── EndpointGoneError     410: the route is disabled
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Protocol

import httpx

from driftwarden.core.records import Delivery
from driftwarden.alerting.rules import RetryPolicy, Route
from driftwarden.alerting.signing import signature_headers
from driftwarden.alerting.ssrf import Resolver, UnresolvableHostError, check_url, system_resolver
from driftwarden.core.errors import DeliveryError

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
    the worker buffer an arbitrary amount of data. ``url`` (default: the route's literal URL) and
    ``headers`` may hold secrets and are never logged; ``prepare`` turns the stored body into the
    bytes sent at this moment (an Alertmanager alert's endsAt, PagerDuty's routing key), so that
    no secret is ever stored with a delivery.
    """

    route: Route
    client: httpx.Client
    keys: list[bytes] = field(repr=False)  # signing secrets: never in a repr or a log line
    resolver: Resolver = system_resolver
    clock: Callable[[], float] = time.time
    url: str | None = field(default=None, repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    prepare: Callable[[bytes, float], bytes] | None = None

    @property
    def name(self) -> str:
        """The route name."""
        return self.route.name

    def send(self, delivery: Delivery) -> int:
        """POST the delivery body once to the route's URL and classify the answer."""
        url = self.url or self.route.url or ""
        try:
            target = check_url(url, self.route.allow_private, self.resolver, self.route.allow_networks)
        except UnresolvableHostError as exc:
            raise RetryableDeliveryError(str(exc)) from exc
        now = self.clock()
        body = self.prepare(delivery.body, now) if self.prepare is not None else delivery.body
        headers = {"content-type": "application/json", "user-agent": USER_AGENT, "host": target.host_header,
                   **self.headers, **signature_headers(delivery.webhook_id, body, self.keys, int(now))}
        try:
            with self.client.stream("POST", target.pinned_url, content=body, headers=headers,
                                    timeout=self.route.timeout_s, follow_redirects=False,
                                    extensions={"sni_hostname": target.host}) as response:
                status, retry_after = response.status_code, response.headers.get("retry-after")
        except httpx.TimeoutException as exc:
            raise RetryableDeliveryError(f"timed out after {self.route.timeout_s:g} s ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise RetryableDeliveryError(f"connection failed: {type(exc).__name__}") from exc
        except httpx.HTTPError as exc:  # e.g. a URL httpx refuses: its message may hold the URL, a secret
            raise RejectedDeliveryError(f"request refused by the HTTP client: {type(exc).__name__}") from None
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


def backoff_s(policy: RetryPolicy, failures: int, retry_after: float | None = None, jitter: float | None = None) -> float:
    """Seconds to wait after the ``failures``-th failed attempt: exponential from ``initial_s`` up to ``max_backoff_s``.

    The exponent is the delivery's count of failures across every claim (and every notification it
    superseded), so the wait keeps growing however often the delivery is claimed again. A
    Retry-After the receiver sent wins, capped at ``max_retry_after_s``; ``jitter`` (default: a
    uniform draw in [0, jitter_s]) is added to the exponential wait.

    >>> p = RetryPolicy(initial_s=1, max_backoff_s=300, jitter_s=0)
    >>> [backoff_s(p, n) for n in (1, 2, 3, 9, 10, 30)]
    [1.0, 2.0, 4.0, 256.0, 300.0, 300.0]
    """
    if retry_after is not None:
        return min(retry_after, policy.max_retry_after_s)
    exponent = min(max(failures, 1) - 1, 64)
    extra = random.uniform(0, policy.jitter_s) if jitter is None else jitter
    return min(policy.initial_s * 2.0 ** exponent + extra, policy.max_backoff_s)


def utcnow() -> datetime:
    """The current time, aware UTC."""
    return datetime.now(timezone.utc)
