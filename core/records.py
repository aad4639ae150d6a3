"""Frozen records that flow through alerting: a window's verdicts in, alerts and deliveries out.

The streaming job builds a :class:`WindowReport` per (model, window) and hands it to
:func:`alerting.outbox.enqueue_alerts`; alerting never needs to know how a score was computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Mapping, Protocol

Severity = Literal["none", "minor", "moderate", "major"]
SEVERITIES: tuple[str, ...] = ("none", "minor", "moderate", "major")
AlertStatus = Literal["firing", "resolved", "nodata"]
ALERT_STATUSES: tuple[str, ...] = ("firing", "resolved", "nodata")


def severity_rank(severity: str) -> int:
    """Return the order of a severity (none=0 ... major=3); raise ValueError on an unknown one."""
    try:
        return SEVERITIES.index(severity)
    except ValueError:
        raise ValueError(f"unknown severity {severity!r}; valid: {', '.join(SEVERITIES)}") from None


def utc(moment: datetime) -> datetime:
    """Return ``moment`` as an aware UTC datetime (naive values are taken to be UTC already)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def boolean_shares(count: int, missing: int, true_count: int) -> dict[str, float | None]:
    """A boolean feature's shares of true, false and null values among its ``count`` (nulls included).

    >>> boolean_shares(4, 1, 2)
    {'true': 0.5, 'false': 0.25, 'null': 0.25}
    """
    if not count:
        return {"true": None, "false": None, "null": None}
    return {"true": true_count / count, "false": (count - missing - true_count) / count, "null": missing / count}

@dataclass(frozen=True)
class FeatureOutcome:
    """What the gate and (if it ran) the deep check found for one feature in one window."""

    name: str
    kind: str = "numeric"
    count: int = 0
    missing: int = 0
    gate_ks: float | None = None
    gate_psi: float | None = None
    gate_emd: float | None = None
    alarm: bool = False
    ks_stat: float | None = None
    ks_pvalue: float | None = None
    psi: float | None = None
    emd: float | None = None
    p_adjusted: float | None = None
    drifted: bool = False
    severity: Severity = "none"
    gate_ks_bound: float | None = None
    gate_chi2: float | None = None
    gate_js: float | None = None
    gate_new_share: float | None = None
    gate_missing_delta: float | None = None
    chi2_stat: float | None = None
    chi2_pvalue: float | None = None
    segment: Mapping[str, str] | None = field(default=None, hash=False)  # {key: value} when segments are on; part of the alert identity
    evidence: Mapping[str, Any] | None = field(default=None, hash=False)  # sketches.analysis.verdict_evidence
    # a high-cardinality categorical feature (its reference has a membership profile): the reference's own
    # unseen-value share (gate_new_share is the window's), and the head values whose share moved most as
    # (value, reference share, window share), value None for all values outside the head
    unseen_baseline: float | None = None
    moved_values: tuple[tuple[str | None, float, float], ...] = ()
    cusum_up: float | None = None  # slow-drift CUSUM sums after this window (sketches/sequential.py)
    cusum_down: float | None = None
    error: str | None = None  # "not judged: <exception type>" when judging this feature raised (no verdict)
    invalid: int = 0  # values of the wrong type in the window (kept out of count and missing)
    # up to five of them: {"reason", "value", "where"} (pipeline/invalid.py)
    invalid_examples: tuple[Mapping[str, str], ...] = field(default=(), hash=False)
    true_count: int | None = None  # a boolean feature: its true values (false = count - missing - true_count)

    def __post_init__(self) -> None:
        severity_rank(self.severity)
        if self.segment is not None:
            object.__setattr__(self, "segment", {str(k): str(v) for k, v in sorted(self.segment.items())} or None)
        object.__setattr__(self, "moved_values", tuple((v, float(r), float(w)) for v, r, w in self.moved_values))

    def scores(self) -> dict[str, float | None]:
        """Return the named scores of this feature (gate and deep), None where not computed."""
        return {
            "gate_ks": self.gate_ks, "gate_psi": self.gate_psi, "gate_emd": self.gate_emd,
            "ks_stat": self.ks_stat, "ks_pvalue": self.ks_pvalue, "psi": self.psi,
            "emd": self.emd, "p_adjusted": self.p_adjusted,
        }


@dataclass(frozen=True)
class WindowReport:
    """The verdicts of one (model, window): the unit the streaming job hands to alerting."""

    model: str
    window_start: datetime
    window_end: datetime
    features: tuple[FeatureOutcome, ...] | list[FeatureOutcome] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "window_start", utc(self.window_start))
        object.__setattr__(self, "window_end", utc(self.window_end))
        object.__setattr__(self, "features", tuple(self.features))
        if self.window_end <= self.window_start:
            raise ValueError("window_end must be after window_start")


@dataclass(frozen=True)
class Alert:
    """One alert as sent to receivers: one (model, feature[, segment]) in one state of its lifecycle."""

    fingerprint: str
    status: AlertStatus
    model: str
    feature: str
    segment: Mapping[str, str] | None
    severity: str
    outcome: FeatureOutcome
    window_start: datetime
    window_end: datetime
    starts_at: datetime
    ends_at: datetime | None = None


@dataclass(frozen=True)
class Delivery:
    """One claimed webhook POST: a sealed group of alerts for one (route, group)."""

    id: int
    webhook_id: str
    route: str
    model: str
    body: bytes
    attempts: int
    created_at: datetime
    claimed_until: datetime | None = None
    failures: int = 0  # failed attempts so far (also those of superseded deliveries): the backoff's exponent


def report_from_dict(entry: dict) -> WindowReport:
    """Build a WindowReport from one ``windows`` entry of the replay report JSON (DESIGN.md contract)."""
    features = []
    for f in entry["features"]:
        gate, deep = f.get("gate") or {}, f.get("deep") or {}
        features.append(FeatureOutcome(
            name=f["name"], kind=f.get("kind", "numeric"), count=f.get("count", 0), missing=f.get("missing", 0),
            gate_ks=gate.get("ks"), gate_psi=gate.get("psi"), gate_emd=gate.get("emd"), alarm=bool(gate.get("alarm")),
            ks_stat=deep.get("ks_stat"), ks_pvalue=deep.get("ks_pvalue"), psi=deep.get("psi"), emd=deep.get("emd"),
            p_adjusted=deep.get("p_adjusted"), drifted=bool(f.get("drifted")), severity=f.get("severity", "none"),
            segment=f.get("segment")))
    return WindowReport(entry["model"], _parse_time(entry["window_start"]), _parse_time(entry["window_end"]), features)


def _parse_time(value: str | datetime) -> datetime:
    """Parse an RFC 3339 string (``Z`` accepted) into an aware UTC datetime."""
    if isinstance(value, datetime):
        return utc(value)
    return utc(datetime.fromisoformat(value.replace("Z", "+00:00")))


class AlertSink(Protocol):
    """What turns a stored window's verdicts into alerts, in the store transaction that stores them
    (``alerting.rules.AlertRules``): the results writer calls it without knowing alerting."""

    def enqueue(self, conn: Any, report: WindowReport, now: datetime) -> int:
        """Apply the rules to ``report`` and queue what they fire; how many alerts changed."""
        ...
