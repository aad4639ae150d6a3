"""The event contract: one Kafka value, JSON, validated here and nowhere else.

``{"event_time": <RFC 3339 string or epoch ms>, "model": str,
"features": {name: number | string | null}, "prediction": number?, "request_id": str?}``

Unknown top-level fields are ignored (kept out of the statistics, not an error).
A bad event raises :class:`InvalidEventError` whose ``reason`` is one of
:data:`REJECT_REASONS` (with ``:<feature>`` appended where a feature is at fault).

>>> e = parse_event(b'{"event_time": "2026-01-01T00:00:01Z", "model": "m", "features": {"x": 1.5}}')
>>> (e.model, e.event_ms, e.features["x"])
('m', 1767225601000, 1.5)
>>> parse_event(b'{"model": "m", "features": {}}')
Traceback (most recent call last):
...
driftwarden.core.errors.InvalidEventError: missing_event_time
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from operator import itemgetter
from typing import Any, Callable, Mapping

import orjson

from driftwarden.core.errors import InvalidEventError

# Epoch-millisecond bounds that catch seconds-instead-of-milliseconds and garbage: 2000-01-01 .. 2100-01-01.
MIN_EVENT_MS = 946_684_800_000
MAX_EVENT_MS = 4_102_444_800_000

REJECT_REASONS = (
    "future",  # a valid event whose time is too far ahead of its record's timestamp (is_future)
    "not_json",
    "not_object",
    "missing_event_time",
    "bad_event_time",
    "event_time_out_of_range",
    "missing_model",
    "bad_model",
    "bad_features",
    "bad_feature_type",
    "type_mismatch",
    "bad_prediction",
)

NUMERIC = "numeric"
CATEGORICAL = "categorical"
#: The top-level field monitored like a numeric feature of this name (``monitor_prediction`` in the config).
PREDICTION = "prediction"
_NUMBER_TYPES = frozenset((int, float))
_NUMERIC_VALUE_TYPES = frozenset((int, float, type(None)))
_CATEGORICAL_VALUE_TYPES = frozenset((str, type(None)))


@dataclass(slots=True)
class Event:
    """One validated model request (read-only by convention).

    Built once per event of the stream, so a plain slots dataclass: a frozen one costs four times
    as much to construct (measured 1.0 vs 0.26 us). ``by_kind`` holds the configured features'
    values split by kind, in the order of the model's :class:`FeatureKinds`, when validation
    recognised the common shape (exactly the configured features); else None.
    """

    model: str
    event_ms: int
    features: Mapping[str, float | str | None]
    prediction: float | None = None
    request_id: str | None = None
    by_kind: tuple[tuple, tuple] | None = None


def parse_event(raw: bytes | str, feature_kinds: Mapping[str, str] | None = None) -> Event:
    """Decode and validate one event; raise InvalidEventError naming what is wrong."""
    return validate_event(raw, lambda _model: feature_kinds)


def validate_event(raw: bytes | str, kinds_of: Callable[[str], Mapping[str, str] | None]) -> Event:
    """Like :func:`parse_event`, with the feature kinds looked up by the event's model."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidEventError("not_json", str(exc)) from exc
    if type(doc) is not dict:
        raise InvalidEventError("not_object", type(doc).__name__)
    event_ms = parse_event_time(doc.get("event_time"))
    model = doc.get("model")
    if model is None:
        raise InvalidEventError("missing_model")
    if type(model) is not str or not model:
        raise InvalidEventError("bad_model", repr(model)[:80])
    features = doc.get("features")
    if type(features) is not dict:
        raise InvalidEventError("bad_features", "features must be an object of name -> number|string|null")
    by_kind = check_feature_kinds(features, kinds_of(model))
    prediction = doc.get("prediction")
    if prediction is not None and type(prediction) not in _NUMBER_TYPES:
        raise InvalidEventError("bad_prediction", repr(prediction)[:80])
    request_id = doc.get("request_id")
    return Event(model, event_ms, features, prediction, request_id if type(request_id) is str else None, by_kind)


def parse_event_time(value: Any) -> int:
    """Return epoch milliseconds from an RFC 3339 string or an epoch-ms number."""
    if type(value) is int and MIN_EVENT_MS <= value < MAX_EVENT_MS:  # the stream's usual form, as is
        return value
    if value is None:
        raise InvalidEventError("missing_event_time")
    if type(value) in _NUMBER_TYPES:
        if not math.isfinite(value):
            raise InvalidEventError("bad_event_time", repr(value))
        event_ms = int(value)
    elif isinstance(value, str):
        event_ms = _parse_rfc3339_ms(value)
    else:
        raise InvalidEventError("bad_event_time", type(value).__name__)
    if not MIN_EVENT_MS <= event_ms < MAX_EVENT_MS:
        raise InvalidEventError("event_time_out_of_range", f"{value!r} is not epoch ms between 2000 and 2100")
    return event_ms


def _parse_rfc3339_ms(text: str) -> int:
    if not (text.isascii() and text.isprintable()):  # fromisoformat skips a NUL that Java's parser refuses
        raise InvalidEventError("bad_event_time", f"{text[:40]!r} is not RFC 3339")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidEventError("bad_event_time", f"{text[:40]!r} is not RFC 3339") from exc
    if parsed.tzinfo is None:
        raise InvalidEventError("bad_event_time", f"{text[:40]!r} has no UTC offset")
    return int(parsed.timestamp() * 1000)


class FeatureKinds(dict):
    """One model's feature kinds (name -> NUMERIC | CATEGORICAL), with its names split by kind.

    :meth:`split` is the stream's fast path: an event carrying exactly the configured features,
    each with a value of its kind's type, is recognised (and its values taken in order) by a few
    C-level calls instead of a Python loop over the features.

    >>> kinds = FeatureKinds({"x": NUMERIC, "c": CATEGORICAL, "y": NUMERIC})
    >>> kinds.split({"c": "a", "x": 1.5, "y": None})
    ((1.5, None), ('a',))
    >>> kinds.split({"x": "1.5", "c": "a", "y": 2}) is None  # not the common shape: the full check decides
    True
    >>> kinds.values_in_order({"x": 2, "z": True})
    ((2, None), (None,))

    With ``prediction`` the event's top-level prediction is one more numeric column, named
    :data:`PREDICTION`, after the numeric features (the dict itself, which validation checks the
    features against, holds the features only):

    >>> FeatureKinds({"x": NUMERIC, "c": CATEGORICAL}, prediction=True).columns
    {'x': 'numeric', 'c': 'categorical', 'prediction': 'numeric'}
    """

    def __init__(self, kinds: Mapping[str, str], prediction: bool = False) -> None:
        super().__init__(kinds)
        self.prediction = prediction
        self.numeric = tuple(name for name, kind in kinds.items() if kind == NUMERIC)
        self.categorical = tuple(name for name, kind in kinds.items() if kind == CATEGORICAL)
        self.numeric_columns = self.numeric + ((PREDICTION,) if prediction else ())
        self.columns = {**kinds, PREDICTION: NUMERIC} if prediction else dict(kinds)
        self._numeric_of = _values_getter(self.numeric)
        self._categorical_of = _values_getter(self.categorical)

    def __reduce__(self) -> tuple:  # pickled with the job's functions: rebuild the getters on load
        return FeatureKinds, (dict(self), self.prediction)

    def split(self, features: Mapping[str, Any]) -> tuple[tuple, tuple] | None:
        """``(numeric values, categorical values)`` in this object's order, when ``features`` holds
        exactly the configured names, each with a value of its kind's type (or null); else None."""
        if len(features) != len(self):
            return None
        try:
            numbers, labels = self._numeric_of(features), self._categorical_of(features)
        except KeyError:
            return None
        if _NUMERIC_VALUE_TYPES.issuperset(map(type, numbers)) and _CATEGORICAL_VALUE_TYPES.issuperset(
                map(type, labels)):
            return numbers, labels
        return None

    def values_in_order(self, features: Mapping[str, Any]) -> tuple[tuple, tuple]:
        """The configured features' values in this object's order (None where absent), any event."""
        return tuple(map(features.get, self.numeric)), tuple(map(features.get, self.categorical))


def _values_getter(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple]:
    """``itemgetter`` that always returns a tuple (it returns a bare value for one name)."""
    if len(names) == 1:
        (name,) = names
        return lambda features: (features[name],)
    return itemgetter(*names) if names else (lambda features: ())


def check_feature_kinds(features: Mapping[str, Any],
                        feature_kinds: Mapping[str, str] | None) -> tuple[tuple, tuple] | None:
    """Raise InvalidEventError naming the first feature whose value has the wrong type.

    With :class:`FeatureKinds` the common shape is accepted by :meth:`FeatureKinds.split`, whose
    values by kind are returned; any other event takes one pass over its features, on exact types
    (JSON gives only int, float, str, bool, None, list and dict), which names the first offending
    feature, and None is returned for a valid one.
    """
    if type(feature_kinds) is FeatureKinds:
        by_kind = feature_kinds.split(features)
        if by_kind is not None:
            return by_kind
    kinds = feature_kinds or {}
    for name, value in features.items():
        value_type = type(value)
        if value_type in _NUMBER_TYPES:
            if kinds.get(name) == CATEGORICAL:
                raise InvalidEventError(f"type_mismatch:{name}", f"expected categorical, got {value!r}"[:120])
        elif value_type is str:
            if kinds.get(name) == NUMERIC:
                raise InvalidEventError(f"type_mismatch:{name}", f"expected numeric, got {value!r}"[:120])
        elif value is not None:
            raise InvalidEventError(f"bad_feature_type:{name}", value_type.__name__)
    return None


def is_future(event_ms: int, record_timestamp_ms: int | None, max_skew_ms: int) -> bool:
    """Whether an event time is more than ``max_skew_ms`` ahead of its Kafka record's timestamp.

    The record's timestamp (set by the producer or, on a LogAppendTime topic, by the broker) is the
    partition's progress as the log itself states it: the rule needs no state, so it gives the same
    answer live, after any restart and in replay. A record without a timestamp (None, 0 or negative)
    is never future. The live job's twin is Java ``SourceSummaries.isFuture`` (and the smoke job's SQL ``jobs.source.future_sql``).

    >>> is_future(4_102_000_000_000, 1_767_225_600_000, 900_000), is_future(1_767_226_500_000, 1_767_225_600_000, 900_000)
    (True, False)
    """
    return record_timestamp_ms is not None and record_timestamp_ms > 0 and event_ms - record_timestamp_ms > max_skew_ms


def utc_from_ms(epoch_ms: int) -> datetime:
    """Epoch milliseconds as a timezone-aware UTC datetime."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)


def rfc3339(epoch_ms: int) -> str:
    """Format epoch milliseconds as an RFC 3339 UTC string (millisecond precision)."""
    seconds, millis = divmod(int(epoch_ms), 1000)
    stamp = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{millis:03d}Z"
