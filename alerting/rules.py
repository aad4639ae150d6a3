"""Alert rules from the monitor config: routes, matchers, grouping, timers and the alert lifecycle.

:class:`AlertRules` is a pydantic model so that the config loader can embed it under an
``alerting:`` key; every field has a working default. The defaults obey the false-alarm budget:
only findings that are drift by the decision rule and at least ``moderate`` become alerts.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple
from urllib.parse import urlsplit

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)
from sqlalchemy import Connection

from driftwarden.core.records import WindowReport, severity_rank
from driftwarden.alerting.ssrf import UnsafeURLError, check_network, check_syntax
from driftwarden.core.errors import ConfigError
from driftwarden.schemas.config import ENV_NAME, describe_validation_error, env_var_name, read_yaml

log = logging.getLogger(__name__)
FORMATS = ("native", "alertmanager", "slack")
KINDS = ("webhook", "alertmanager", "pagerduty", "teams")
PAGERDUTY_URL = "https://events.pagerduty.com/v2/enqueue"
ENDS_AT_RESENDS = 4  # an Alertmanager alert's endsAt lies this many resend intervals ahead (as Prometheus sets it)
#: The reference that stands for a literal secret in the job's copy of the config; nothing ever reads it.
REDACTED_ENV = "DRIFTWARDEN_REDACTED_IN_JOB"
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
    """One receiver and the alerts it wants: a webhook, an Alertmanager, PagerDuty or a Teams channel.

    Secrets are referenced: ``url``, the signing ``secret`` and the ``token`` each come from
    ``*_env`` (an environment variable) or ``*_file`` (a file, e.g. a mounted Kubernetes secret);
    a literal secret in the config is accepted with a warning at load (the URL counts as a secret
    for Slack and Teams, whose URLs carry their credential, and wherever it has a query string).
    Values are read by the delivery worker (:func:`alerting.route_secrets.resolve`), never by the job.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,100}$")
    kind: Literal["webhook", "alertmanager", "pagerduty", "teams"] = Field(
        default="webhook", description="webhook (format below) | alertmanager (its API v2) | pagerduty (Events API "
        "v2) | teams (an Adaptive Card to an incoming-webhook or workflow URL)")
    url: str | None = Field(default=None, description="for alertmanager its base URL; pagerduty: " + PAGERDUTY_URL)
    url_env: str | None = None
    url_file: str | None = None
    format: Literal["native", "alertmanager", "slack"] = Field(
        default="native", description="webhook kind only: driftwarden's JSON, Alertmanager's webhook body or Slack's")
    secret: str | None = Field(default=None, repr=False, description="literal signing secret(s): prefer secret_env")
    secret_env: str | None = Field(
        default=None, description="env var name(s), space separated, holding the signing secrets")
    secret_file: str | None = Field(default=None, description="file holding the signing secret(s), one per line")
    token: str | None = Field(default=None, repr=False,
                              description="alertmanager: bearer token; pagerduty: the integration (routing) key")
    token_env: str | None = None
    token_file: str | None = None
    allow_private: bool = Field(
        default=False, description="allow-list this route: private/loopback addresses may be reached "
        "(link-local and site-local ones only when listed in allow_networks)")
    allow_networks: tuple[str, ...] = Field(
        default=(), description="CIDR networks this route may reach whatever their class, e.g. 169.254.10.0/24")
    matchers: tuple[Matcher, ...] = ()
    timeout_s: float = Field(default=10.0, gt=0)
    group_by: tuple[Literal["model", "feature", "segment"], ...] | None = Field(
        default=None, description="this route's grouping (default: the rules' group_by; pagerduty: one alert per event)")
    resend_interval: Duration = Field(
        default=timedelta(minutes=1), description="alertmanager: firing alerts are sent again this often; each "
        f"holds endsAt = send time + {ENDS_AT_RESENDS} x resend_interval")

    @field_validator("url")
    @classmethod
    def _url_is_well_formed(cls, url: str | None) -> str | None:
        if url is not None:
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

    _env_name = field_validator("url_env", "token_env")(env_var_name)

    @field_validator("secret_env")
    @classmethod
    def _env_names(cls, value: str | None) -> str | None:
        if value is not None and not all(ENV_NAME.match(name) for name in value.split() or [""]):
            raise ValueError("names of environment variables, space separated, never the secrets themselves")
        return value

    @field_validator("url_file", "secret_file", "token_file")
    @classmethod
    def _file_path(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        if not value.strip() or "\x00" in value:
            raise ValueError("a file path, not empty, without NUL")
        base = (info.context or {}).get("config_dir")
        return str(Path(base) / value) if base is not None and not Path(value).is_absolute() else value

    @model_validator(mode="after")
    def _kind_fits(self) -> "Route":
        for field in ("url", "secret", "token"):
            given = [f for f in (field, f"{field}_env", f"{field}_file") if getattr(self, f) is not None]
            if len(given) > 1:
                raise ValueError(f"give one of {', '.join(given)}")
        if self.kind != "pagerduty" and not self.has("url"):
            raise ValueError("give url, url_env or url_file")
        if self.kind != "webhook" and self.has("secret"):
            raise ValueError(f"a {self.kind} route is not signed: secret, secret_env and secret_file are for webhooks")
        if self.kind != "webhook" and "format" in self.model_fields_set:
            raise ValueError(f"format is for webhook routes (this one is of kind {self.kind})")
        if self.kind in ("webhook", "teams") and self.has("token"):
            raise ValueError(f"token is for alertmanager and pagerduty routes (this one is of kind {self.kind})")
        if self.kind == "pagerduty" and not self.has("token"):
            raise ValueError("a pagerduty route needs its integration key: token_env or token_file")
        if self.kind == "pagerduty" and self.group_by is not None:
            raise ValueError("a pagerduty route sends one event per alert: group_by does not apply")
        _warn_literal_secrets(self)
        return self

    def has(self, field: str) -> bool:
        """Whether ``field`` (url, secret, token) is given, literally or by reference."""
        return any(getattr(self, f) is not None for f in (field, f"{field}_env", f"{field}_file"))

    @property
    def body_format(self) -> str:
        """The payload format of this route's deliveries (payloads.render)."""
        return self.format if self.kind == "webhook" else {"alertmanager": "alertmanager_v2"}.get(self.kind, self.kind)

    @property
    def forwards(self) -> bool:
        """True for an Alertmanager route: every state is forwarded, silences and acks are Alertmanager's."""
        return self.kind == "alertmanager"

    def env_names(self) -> list[str]:
        """The environment variables this route reads its secrets from."""
        return (self.secret_env or "").split() + [n for n in (self.url_env, self.token_env) if n]

    def without_literal_secrets(self) -> dict[str, Any]:
        """This route as config data for a process that never delivers (the job): literal secrets replaced by a
        reference that is never read, so they stay out of the job's configuration."""
        data = self.model_dump(exclude_none=True, exclude_defaults=True, mode="json")
        data["name"] = self.name
        for field in ("url", "secret", "token"):
            if data.pop(field, None) is not None:
                data[f"{field}_env"] = REDACTED_ENV
        return data


def _warn_literal_secrets(route: Route) -> None:
    """Log a warning (never the value) for each secret written in the config itself."""
    for field in ("secret", "token"):
        if getattr(route, field) is not None:
            log.warning("route %s: a literal %s in the config; reference it with %s_env or %s_file instead",
                        route.name, field, field, field)
    if route.url is not None and (route.kind == "teams" or route.format == "slack" and route.kind == "webhook"
                                  or urlsplit(route.url).query):
        log.warning("route %s: its url carries a credential (a %s URL or a query string) and is written in the "
                    "config; reference it with url_env or url_file instead", route.name,
                    "Teams" if route.kind == "teams" else "Slack" if route.format == "slack" else "webhook")


class RetryPolicy(BaseModel):
    """How failed deliveries are retried: exponential backoff with jitter, up to a maximum age."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    initial_s: float = Field(default=1.0, gt=0)
    max_backoff_s: float = Field(default=300.0, gt=0)
    jitter_s: float = Field(default=1.0, ge=0)
    max_age_s: float = Field(default=24 * 3600.0, gt=0)
    max_retry_after_s: float = Field(default=3600.0, gt=0)


class Timers(NamedTuple):
    """Alertmanager's three timers of one route."""

    group_wait: timedelta
    group_interval: timedelta
    repeat_interval: timedelta


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
    monitor: str = Field(default="driftwarden", min_length=1, max_length=200,
                         description="the label naming this driftwarden (Alertmanager, PagerDuty's source)")

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

    def group_by_for(self, route: Route) -> tuple[str, ...]:
        """The labels that group ``route``'s alerts: its own, PagerDuty's one alert per event, else the rules'."""
        if route.kind == "pagerduty":
            return GROUP_LABELS
        return route.group_by if route.group_by is not None else self.group_by

    def timers_for(self, route: Route) -> "Timers":
        """``route``'s group_wait, group_interval and repeat_interval: an Alertmanager does its own grouping and
        waiting, so a forwarding route sends at once and again every ``resend_interval``."""
        if route.forwards:
            return Timers(timedelta(0), timedelta(0), route.resend_interval)
        return Timers(self.group_wait, self.group_interval, self.repeat_interval)

    def for_job(self) -> dict[str, Any]:
        """These rules as config data for the job, which never delivers: no literal secret in it."""
        data = self.model_dump(exclude_none=True, exclude_defaults=True, mode="json")
        data["routes"] = [r.without_literal_secrets() for r in self.routes]
        return data

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
        return AlertRules.model_validate(data or {}, context={"config_dir": path.absolute().parent})
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

