"""The demo's world: a credit-risk model's features, and the drift injected into them on a schedule.

Twenty numeric and five categorical features, drawn independently (so that a change in one
feature never drifts another: any drift outside the injected features is a false alarm).
Event ``i`` has event time ``base + i * window / per_window``, so every window holds exactly
``per_window`` events and window ``w`` holds events ``w * per_window .. (w + 1) * per_window - 1``.

The :class:`Schedule` is in windows: a drift-free period first, then six changes, each starting
on a window boundary and lasting to the end of the run (or of the cycle, for the endless stream).
Four move a feature for all traffic; one moves ``age`` only inside the ``country=DE`` segment
(10% of events: the global view barely moves); one moves the model's ``prediction`` alone (its
inputs keep their distributions):

>>> s = make_schedule(12)
>>> (s.clean_windows, [c.start_window for c in s.changes])
(4, [4, 5, 6, 7, 8, 9])
>>> [(c.feature, c.segment) for c in s.changes][-2:]
[('age', 'country=DE'), ('prediction', None)]
>>> g = StreamGenerator("m", base_ms=1_767_225_600_000, window_ms=10_000, per_window=100, schedule=s)
>>> batch = g.events(0, 250)
>>> (len(batch), len(batch[0]["features"]), g.window_of(batch[-1]))
(250, 25, 2)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from driftwarden.schemas.events import rfc3339

Draw = Callable[[np.random.Generator, int], np.ndarray]

#: name -> (draw(rng, n), baseline missing share)
NUMERIC: dict[str, tuple[Draw, float]] = {
    "amount": (lambda r, n: r.lognormal(3.5, 0.9, n), 0.0),
    "credit_score": (lambda r, n: r.normal(680, 60, n), 0.0),
    "age": (lambda r, n: np.clip(r.normal(41, 12, n), 18, 95), 0.0),
    "income_k": (lambda r, n: r.lognormal(4.0, 0.5, n), 0.01),
    "debt_ratio": (lambda r, n: r.beta(2, 5, n), 0.0),
    "utilization": (lambda r, n: r.beta(2, 3, n), 0.01),
    "tenure_months": (lambda r, n: r.gamma(2, 18, n), 0.0),
    "txn_count_24h": (lambda r, n: r.gamma(3, 1.2, n), 0.0),
    "avg_txn_amount": (lambda r, n: r.lognormal(3.2, 0.7, n), 0.0),
    "days_since_last_txn": (lambda r, n: r.exponential(4, n), 0.0),
    "session_seconds": (lambda r, n: r.gamma(2, 60, n), 0.0),
    "pages_viewed": (lambda r, n: r.gamma(4, 1.8, n), 0.0),
    "api_latency_ms": (lambda r, n: r.lognormal(4.5, 0.35, n), 0.0),
    "balance_change": (lambda r, n: r.normal(0, 150, n), 0.0),
    "bureau_score": (lambda r, n: r.normal(620, 80, n), 0.02),
    "num_cards": (lambda r, n: r.gamma(2.5, 1.0, n), 0.0),
    "distance_km": (lambda r, n: r.exponential(12, n), 0.02),
    "velocity_1h": (lambda r, n: r.gamma(1.5, 0.8, n), 0.0),
    "chargeback_rate": (lambda r, n: r.beta(1, 60, n), 0.0),
    "account_age_days": (lambda r, n: r.gamma(1.5, 400, n), 0.0),
}

#: name -> (categories, probabilities)
CATEGORICAL: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = {
    "country": (("US", "GB", "DE", "FR", "IN", "BR", "other"), (0.45, 0.12, 0.10, 0.08, 0.10, 0.08, 0.07)),
    "device_type": (("ios", "android", "web"), (0.42, 0.45, 0.13)),
    "channel": (("app", "web", "call_center"), (0.6, 0.3, 0.1)),
    "merchant_category": (("grocery", "electronics", "travel", "fashion", "gaming", "utilities"),
                          (0.3, 0.15, 0.1, 0.2, 0.1, 0.15)),
    "payment_method": (("card", "wallet", "bank_transfer"), (0.7, 0.2, 0.1)),
}

FEATURE_KINDS: dict[str, str] = {**{n: "numeric" for n in NUMERIC}, **{n: "categorical" for n in CATEGORICAL}}

MEAN_SHIFT, VARIANCE, NEW_CATEGORY, MISSING = "mean shift", "variance change", "new category", "missing values"
SEGMENT_SHIFT, PREDICTION_SHIFT = "segment shift", "prediction shift"
NEW_CATEGORY_VALUE = "smart_tv"
#: the segment the demo cuts its traffic by, and the one segment whose ``age`` moves (10% of events)
SEGMENT_BY, SHIFTED_SEGMENT = "country", "DE"
#: the segment shift moves ``age`` by half its standard deviation (12 years) inside that segment
SEGMENT_AGE_SHIFT = 6.0
#: the prediction shift adds this to the model's logit (about 0.7 of its standard deviation)
PREDICTION_LOGIT_SHIFT = 0.6


@dataclass(frozen=True)
class Change:
    """One injected change: what, on which feature, from which window on (relative to the run)."""

    kind: str
    feature: str
    start_window: int
    description: str
    segment: str | None = None  # "country=DE" (schemas.alert_tables.segment_key) for a change inside one segment


@dataclass(frozen=True)
class Schedule:
    """A drift-free period of ``clean_windows`` windows, then the changes, over ``windows`` windows."""

    windows: int
    clean_windows: int
    changes: tuple[Change, ...]

    def active(self, window: int) -> tuple[Change, ...]:
        """The changes in force in window ``window`` (0-based)."""
        return tuple(c for c in self.changes if c.start_window <= window)

    @property
    def injected_features(self) -> set[str]:
        """Names of the features that receive a change (for all traffic or inside a segment)."""
        return {c.feature for c in self.changes}


def make_schedule(windows: int, clean_share: float = 0.3) -> Schedule:
    """Spread the six changes over ``windows`` windows: clean first, each change >= 2 windows before the end."""
    if windows < 8:
        raise ValueError(f"the demo needs at least 8 windows, got {windows}: raise --duration or --speed")
    clean = max(2, round(windows * clean_share))
    step = max(1, (windows - 2 - clean) // 5)
    starts = [min(clean + i * step, windows - 2) for i in range(6)]  # a short run starts the last ones together
    changes = (
        Change(MEAN_SHIFT, "credit_score", starts[0], "credit_score mean drops by 0.8 sd (680 -> 632)"),
        Change(VARIANCE, "balance_change", starts[1], "balance_change spread x3 (sd 150 -> 450), same mean"),
        Change(NEW_CATEGORY, "device_type", starts[2], f"device_type gains '{NEW_CATEGORY_VALUE}' (25% of events)"),
        Change(MISSING, "bureau_score", starts[3], "bureau_score missing rises from 2% to 35%"),
        Change(SEGMENT_SHIFT, "age", starts[4], f"age +0.5 sd (+{SEGMENT_AGE_SHIFT:g} years) in {SEGMENT_BY}="
               f"{SHIFTED_SEGMENT} only (10% of events; global mean +0.05 sd)", f"{SEGMENT_BY}={SHIFTED_SEGMENT}"),
        Change(PREDICTION_SHIFT, "prediction", starts[5], f"a model release: prediction logit +{PREDICTION_LOGIT_SHIFT:g}"
               f" (mean risk 0.15 -> 0.22), every feature unchanged"),
    )
    return Schedule(windows, clean, changes)


class StreamGenerator:
    """Deterministic events of the demo model; event ``i`` is in window ``i // per_window``.

    ``cyclic``: the schedule repeats every ``schedule.windows`` windows (the endless stream).
    """

    def __init__(self, model: str, base_ms: int, window_ms: int, per_window: int,
                 schedule: Schedule | None = None, seed: int = 7, cyclic: bool = False) -> None:
        if per_window < 1 or window_ms < 1:
            raise ValueError("per_window and window_ms must be positive")
        self.model, self.base_ms, self.window_ms, self.per_window = model, base_ms, window_ms, per_window
        self.schedule, self.seed, self.cyclic = schedule, seed, cyclic
        self._cache: tuple[int, list[dict]] = (-1, [])

    def event_ms(self, index: int) -> int:
        """Event time (epoch ms) of event ``index``."""
        return self.base_ms + index * self.window_ms // self.per_window

    def window_of(self, event: dict) -> int:
        """0-based window of an event made by this generator."""
        return (_ms(event["event_time"]) - self.base_ms) // self.window_ms

    def window_start_ms(self, window: int) -> int:
        """Start (epoch ms) of window ``window``."""
        return self.base_ms + window * self.window_ms

    def events(self, start: int, count: int) -> list[dict]:
        """Events ``start .. start + count - 1`` as contract-shaped dicts (the same whatever the batching)."""
        out: list[dict] = []
        index, end = start, start + count
        while index < end:
            window = index // self.per_window
            first = window * self.per_window
            upto = min(end, first + self.per_window)
            out.extend(self._window_events(window)[index - first:upto - first])
            index = upto
        return out

    def _window_events(self, window: int) -> list[dict]:
        """All events of one window, drawn from a generator seeded by (seed, window); the last one is cached."""
        if self._cache[0] == window:
            return self._cache[1]
        rng = np.random.default_rng([self.seed, window])
        start, count = window * self.per_window, self.per_window
        windows = np.full(count, window)
        columns = {name: self._numeric(rng, name, draw, missing, windows) for name, (draw, missing) in NUMERIC.items()}
        columns.update({name: self._categorical(rng, name, cats, probs, windows)
                        for name, (cats, probs) in CATEGORICAL.items()})
        names = list(columns)
        in_segment = np.array([c == SHIFTED_SEGMENT for c in columns[SEGMENT_BY]]) & self._mask(SEGMENT_SHIFT, windows)
        columns["age"] = [a if a is None or not moved else round(a + SEGMENT_AGE_SHIFT, 4)
                          for a, moved in zip(columns["age"], in_segment)]
        score = _risk_score(columns, rng.normal(0, 0.5, count), PREDICTION_LOGIT_SHIFT * self._mask(PREDICTION_SHIFT, windows))
        events = [{"event_time": rfc3339(self.event_ms(start + k)), "model": self.model,
                   "request_id": f"req-{self.seed}-{start + k}", "prediction": score[k],
                   "features": dict(zip(names, row))}
                  for k, row in enumerate(zip(*(columns[n] for n in names)))]
        self._cache = (window, events)
        return events

    def _mask(self, kind: str, windows: np.ndarray) -> np.ndarray:
        """Which rows (by window) are under the change of ``kind``."""
        if self.schedule is None:
            return np.zeros(len(windows), dtype=bool)
        change = next((c for c in self.schedule.changes if c.kind == kind), None)
        if change is None:
            return np.zeros(len(windows), dtype=bool)
        local = windows % self.schedule.windows if self.cyclic else windows
        return local >= change.start_window

    def _numeric(self, rng: np.random.Generator, name: str, draw: Draw, missing: float,
                 windows: np.ndarray) -> list:
        values = draw(rng, len(windows))
        if name == "credit_score":
            values = values - 48.0 * self._mask(MEAN_SHIFT, windows)
        elif name == "balance_change":
            values = values * np.where(self._mask(VARIANCE, windows), 3.0, 1.0)
        if name == "bureau_score":
            missing = np.where(self._mask(MISSING, windows), 0.35, missing)
        out = values.round(4).tolist()
        for k in np.flatnonzero(rng.uniform(0, 1, len(windows)) < missing):
            out[k] = None
        return out

    def _categorical(self, rng: np.random.Generator, name: str, cats: Sequence[str], probs: Sequence[float],
                     windows: np.ndarray) -> list:
        values = np.asarray(cats, dtype=object)[rng.choice(len(cats), size=len(windows), p=probs)]
        if name == "device_type":
            swap = self._mask(NEW_CATEGORY, windows) & (rng.uniform(0, 1, len(windows)) < 0.25)
            values[swap] = NEW_CATEGORY_VALUE
        return values.tolist()


def training_snapshot(model: str, base_ms: int, window_ms: int, per_window: int, windows: int,
                      seed: int = 1) -> list[dict]:
    """A drift-free "training" snapshot: ``windows`` windows ending at ``base_ms``."""
    gen = StreamGenerator(model, base_ms - windows * window_ms, window_ms, per_window, None, seed)
    return gen.events(0, windows * per_window)


def _risk_score(columns: dict[str, list], noise: np.ndarray, shift: np.ndarray) -> list[float]:
    """The model's prediction: a logistic default risk from features no change of the schedule touches (so
    that it drifts only when the schedule moves it: ``shift`` is added to its logit)."""
    def col(name: str, fill: float) -> np.ndarray:
        return np.array([fill if v is None else v for v in columns[name]], dtype=float)

    logit = -2.0 + 4 * (col("debt_ratio", 0.29) - 0.29) + 2 * (col("utilization", 0.4) - 0.4) + noise + shift
    return (1 / (1 + np.exp(-logit))).round(4).tolist()


def _ms(event_time: str | int) -> int:
    from driftwarden.schemas.events import parse_event_time

    return parse_event_time(event_time)
