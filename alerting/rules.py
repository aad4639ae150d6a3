"""Alert rules from the monitor config: routes, matchers, grouping, timers and the alert lifecycle.

:class:`AlertRules` is a pydantic model so that the config loader can embed it under an
``alerting:`` key; every field has a working default. The defaults obey the false-alarm budget:
only findings that are drift by the decision rule and at least ``moderate`` become alerts.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator
from sqlalchemy import Connection

from driftwarden.core.records import WindowReport, severity_rank
from driftwarden.alerting.ssrf import UnsafeURLError, check_network, check_syntax
from driftwarden.core.errors import ConfigError
from driftwarden.schemas.config import describe_validation_error, read_yaml

FORMATS = ("native", "alertmanager", "slack")
MATCHER_OPS = ("=", "!=", "=~", "!~", "glob", ">=")
LABELS = ("model", "feature", "segment", "severity")
GROUP_LABELS = ("model", "feature", "segment")  # identity labels only: a group never changes under an alert
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: Any) -> Any:
    """Turn ``"30s"``, ``"4h"``, ``"250ms"`` into a timedelta; pass anything else on to pydantic."""
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*", value)
        if match:
            return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    return value


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


class Matcher(BaseModel):
    """One label condition (labels: ``model``, ``feature``, ``segment``, ``severity``); ``>=`` compares severities."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: Literal["model", "feature", "segment", "severity"]
    op: Literal["=", "!=", "=~", "!~", "glob", ">="] = "="
    value: str

    @model_validator(mode="after")
    def _value_fits_op(self) -> "Matcher":
        if self.op in ("=~", "!~"):
            try:
                re.compile(self.value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from exc
        if self.op == ">=":
            severity_rank(self.value)
        return self

    def matches(self, labels: dict[str, str]) -> bool:
        """Return True when ``labels`` satisfy this condition."""
        actual = labels.get(self.label, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        if self.op == "=~":
            return re.fullmatch(self.value, actual) is not None
        if self.op == "!~":
            return re.fullmatch(self.value, actual) is None
        if self.op == "glob":
            return fnmatchcase(actual, self.value)
        return severity_rank(actual) >= severity_rank(self.value)


def matches_all(matchers: list[Matcher] | tuple[Matcher, ...], labels: dict[str, str]) -> bool:
    """Return True when every matcher accepts ``labels`` (an empty list matches everything)."""
    return all(m.matches(labels) for m in matchers)


class Route(BaseModel):
    """One webhook receiver and the alerts it wants."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,100}$")
    url: str
    format: Literal["native", "alertmanager", "slack"] = "native"
    secret_env: str | None = Field(
        default=None, description="env var name(s), space separated, holding the signing secrets")
    allow_private: bool = Field(
        default=False, description="allow-list this route: private/loopback addresses may be reached "
        "(link-local and site-local ones only when listed in allow_networks)")
    allow_networks: tuple[str, ...] = Field(
        default=(), description="CIDR networks this route may reach whatever their class, e.g. 169.254.10.0/24")
    matchers: tuple[Matcher, ...] = ()
    timeout_s: float = Field(default=10.0, gt=0)

    @field_validator("url")
    @classmethod
    def _url_is_well_formed(cls, url: str) -> str:
        try:
            check_syntax(url)
        except UnsafeURLError as exc:
            raise ValueError(str(exc)) from None
        return url

    @field_validator("allow_networks")
    @classmethod
    def _networks_parse(cls, networks: tuple[str, ...]) -> tuple[str, ...]:
        for network in networks:
            check_network(network)
        return networks


class RetryPolicy(BaseModel):
    """How failed deliveries are retried: exponential backoff with jitter, up to a maximum age."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    initial_s: float = Field(default=1.0, gt=0)
    max_backoff_s: float = Field(default=300.0, gt=0)
    jitter_s: float = Field(default=1.0, ge=0)
    max_age_s: float = Field(default=24 * 3600.0, gt=0)
    max_retry_after_s: float = Field(default=3600.0, gt=0)


class AlertRules(BaseModel):
    """The ``alerting:`` section of the monitor config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    routes: tuple[Route, ...] = ()
    group_by: tuple[Literal["model", "feature", "segment"], ...] = ("model",)
    group_wait: Duration = timedelta(seconds=30)
    group_interval: Duration = timedelta(minutes=5)
    repeat_interval: Duration = timedelta(hours=4)
    max_alerts: int = Field(default=100, ge=1, description="alerts listed in one notification; the rest are counted")
    min_severity: Literal["minor", "moderate", "major"] = "moderate"
    resolve_after_windows: int = Field(default=3, ge=1, description="clean windows in a row before resolved")
    resolve_min_count: int = Field(default=30, ge=0, description="values a window needs to count as clean")
    no_data_after: Duration = timedelta(minutes=15)
    retry: RetryPolicy = RetryPolicy()
    replay_topic: str = "features"
    dashboard_url: str | None = Field(
        default=None, description="link template; {model}, {from_ms}, {to_ms} are filled in")

    @field_validator("routes")
    @classmethod
    def _unique_names(cls, routes: tuple[Route, ...]) -> tuple[Route, ...]:
        names = [r.name for r in routes]
        if len(names) != len(set(names)):
            raise ValueError(f"route names must be unique, got {names}")
        return routes

    def route(self, name: str) -> Route:
        """Return the route called ``name``; raise ConfigError naming the known ones."""
        for route in self.routes:
            if route.name == name:
                return route
        raise ConfigError(f"no route {name!r}; known: {', '.join(r.name for r in self.routes) or 'none'}")

    def routes_for(self, labels: dict[str, str]) -> list[Route]:
        """Return the routes whose matchers accept an alert with these labels."""
        return [r for r in self.routes if matches_all(r.matchers, labels)]

    def enqueue(self, conn: Connection, report: WindowReport, now: datetime) -> int:
        """Apply these rules to a stored window's verdicts in the caller's transaction (``core.records.AlertSink``)."""
        from driftwarden.alerting.lifecycle import enqueue_alerts

        return enqueue_alerts(conn, report, self, now)


def load_rules(path: str | Path | None) -> AlertRules:
    """Load AlertRules from a YAML file (its ``alerting:`` key, or the whole file); defaults when None.

    The file is read as the monitor config is (schemas.config.read_yaml): an error names the file,
    the line and the field. A monitor config without an ``alerting:`` key has the default rules
    (no routes), as it has for the job.
    """
    if path is None:
        return AlertRules()
    path = Path(path)
    data, root = read_yaml(path)
    under: tuple[str, ...] = ()
    if isinstance(data, dict) and "alerting" in data:
        data, under = data["alerting"], ("alerting",)
    elif isinstance(data, dict) and "models" in data:
        data = {}
    try:
        return AlertRules.model_validate(data or {})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, root, exc, under)) from None


def parse_rules(data: Any, source: str = "the monitor config") -> AlertRules:
    """Validate an ``alerting:`` mapping into AlertRules; ConfigError (without echoing values) if invalid."""
    try:
        return AlertRules.model_validate(data or {})
    except ValidationError as exc:
        raise ConfigError(f"invalid alerting config in {source}: {_describe_errors(exc)}") from None


def _describe_errors(exc: ValidationError) -> str:
    """Say what is wrong and where, without echoing values (route URLs may hold tokens)."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'alerting'}: {e['msg']}"
                     for e in exc.errors(include_url=False, include_input=False))

