"""The event contract: one Kafka value (JSON, or an Avro record), validated here and nowhere else.

``{"event_time": <RFC 3339 string or epoch ms>, "model": str,
"features": {name: number | string | bool | null | ...}, "prediction": number?, "request_id": str?}``,
or the shape ``source.envelope`` maps (``schemas/envelope.py``).

Unknown top-level fields are ignored (kept out of the statistics, not an error), and so are
features no model monitors, whatever their type. A monitored value of the wrong type is the
value's problem: counted invalid for its feature (:class:`InvalidValue`), the rest of the event
kept (``source.on_invalid_value: reject_event`` rejects the event instead). A bad event raises
:class:`InvalidEventError` whose ``reason`` is one of :data:`REJECT_REASONS` (with ``:<feature>``
appended where a feature is at fault).

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
from typing import Any, Callable, Mapping, NamedTuple

import orjson

from driftwarden.core.projection import project, projected_names
from driftwarden.core.errors import InvalidEventError
from driftwarden.schemas.envelope import EnvelopeReader

# Epoch-millisecond bounds that catch seconds-instead-of-milliseconds and garbage: 2000-01-01 .. 2100-01-01.
MIN_EVENT_MS = 946_684_800_000
MAX_EVENT_MS = 4_102_444_800_000

REJECT_REASONS = (
    "future",  # a valid event whose time is too far ahead of its record's timestamp (pipeline.event_time.is_future)
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
    "not_avro_frame",  # format avro: not magic byte 0 and a schema id (core/confluent_avro.py)
    "avro_unknown_schema",  # format avro: a schema id the registry does not know
    "avro_undecodable",  # format avro: bytes that do not decode under their writer schema
)

NUMERIC = "numeric"
CATEGORICAL = "categorical"
BOOLEAN = "boolean"  # summarized like a categorical feature, its values "true" / "false"
BOOLEAN_TEXT = {True: "true", False: "false"}
#: The top-level field monitored like a numeric feature of this name (``monitor_prediction`` in the config).
PREDICTION = "prediction"
_NUMBER_TYPES = frozenset((int, float))
_NUMERIC_VALUE_TYPES = frozenset((int, float, type(None)))
_CATEGORICAL_VALUE_TYPES = frozenset((str, type(None)))


def sketch_kind(kind: str) -> str:
    """The kind of sketch a feature kind is summarized with: a boolean feature's is categorical."""
    return CATEGORICAL if kind == BOOLEAN else kind


_BOOLEAN_VALUE_TYPES = frozenset((bool, type(None)))


class InvalidValue(NamedTuple):
    """A monitored value of the wrong type: its reason (``wrong_type:<JSON type>``) and a short preview of it."""

    reason: str
    value: str


@dataclass(slots=True)
class Event:
    """One validated model request (read-only by convention).

    Built once per event of the stream, so a plain slots dataclass: a frozen one costs four times
    as much to construct (measured 1.0 vs 0.26 us). ``by_kind`` holds the configured features'
    values split by kind, in the order of the model's :class:`FeatureKinds`, when validation
    recognised the common shape (exactly the configured features); else None. ``invalid``: each
    monitored name (feature, or ``prediction``) whose value had the wrong type (None: there was none).
    """

    model: str
    event_ms: int
    features: Mapping[str, Any]
    prediction: float | None = None
    request_id: str | None = None
    by_kind: tuple[tuple, tuple] | None = None
    invalid: Mapping[str, InvalidValue] | None = None


class EventRules:
    """How a decoded record becomes an event: its envelope mapping and what a wrong-typed value costs.

    ``reject_invalid``: ``source.on_invalid_value: reject_event`` (the whole event is rejected,
    reason ``type_mismatch:<name>``); by default the value alone is counted invalid for its feature.
    ``decode``: how a raw value becomes a record (None: JSON; ``source.format: avro``: the Confluent
    wire format, :class:`core.confluent_avro.ConfluentAvroDecoder`, raising InvalidEventError).
    """

    __slots__ = ("reader", "reject_invalid", "decode")

    def __init__(self, reader: EnvelopeReader | None = None, reject_invalid: bool = False,
                 decode: Callable[[bytes], Any] | None = None) -> None:
        self.reader = reader or EnvelopeReader()
        self.reject_invalid = reject_invalid
        self.decode = decode

    def __reduce__(self) -> tuple:  # pickled with the job's functions
        return EventRules, (self.reader, self.reject_invalid, self.decode)

    @classmethod
    def of(cls, source: Any) -> "EventRules":
        """The rules of a config's ``source`` section (:class:`schemas.config.SourceConfig`)."""
        decode = None
        if source.format == "avro":
            from driftwarden.core.confluent_avro import ConfluentAvroDecoder

            decode = ConfluentAvroDecoder(source.schema_registry)
        return cls(EnvelopeReader(source.envelope), source.on_invalid_value == "reject_event", decode)


DEFAULT_RULES = EventRules()


def parse_event(raw: bytes | str, feature_kinds: Mapping[str, str] | None = None,
                rules: EventRules = DEFAULT_RULES) -> Event:
    """Decode and validate one event; raise InvalidEventError naming what is wrong."""
    return validate_event(raw, lambda _model: feature_kinds, rules)


def validate_event(raw: bytes | str, kinds_of: Callable[[str], Mapping[str, str] | None],
                   rules: EventRules = DEFAULT_RULES) -> Event:
    """Like :func:`parse_event`, with the feature kinds looked up by the event's model."""
    if rules.decode is not None:
        doc = rules.decode(raw)
    else:
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise InvalidEventError("not_json", str(exc)) from exc
    if type(doc) is not dict:
        raise InvalidEventError("not_object", type(doc).__name__)
    return validate_document(doc, kinds_of, rules)


def validate_document(doc: Mapping[str, Any], kinds_of: Callable[[str], Mapping[str, str] | None],
                      rules: EventRules = DEFAULT_RULES) -> Event:
    """Validate one decoded record (a JSON object, or an Avro record as a dict) under ``rules``."""
    reader = rules.reader
    event_ms = parse_event_time(reader.event_time(doc)[0], reader.unit)
    model = reader.model(doc)
    if model is None:
        raise InvalidEventError("missing_model")
    if type(model) is not str or not model:
        raise InvalidEventError("bad_model", repr(model)[:80])
    features = reader.features(doc)
    if type(features) is not dict:
        raise InvalidEventError("bad_features", "features must be an object of name -> value")
    kinds = kinds_of(model)
    vector_invalid = None
    if getattr(kinds, "vectors", None):
        features, vector_invalid = project_vectors(features, kinds.vectors, rules.reject_invalid)
    by_kind, invalid = check_feature_kinds(features, kinds, rules.reject_invalid)
    if vector_invalid:
        invalid = {**(invalid or {}), **vector_invalid}
    prediction = reader.prediction(doc)
    if prediction is not None and type(prediction) not in _NUMBER_TYPES:
        if getattr(kinds, "prediction", False):  # monitored: the value's problem (or the event's, when strict)
            if rules.reject_invalid:
                raise InvalidEventError("bad_prediction", repr(prediction)[:80])
            invalid = {**(invalid or {}), PREDICTION: invalid_value(prediction)}
        prediction = None  # not monitored: ignored, whatever its type
    request_id = doc.get("request_id")
    return Event(model, event_ms, features, prediction, request_id if type(request_id) is str else None, by_kind,
                 invalid)


def parse_event_time(value: Any, unit: str = "ms") -> int:
    """Return epoch milliseconds from an RFC 3339 string or a number in ``unit`` (ms, s, us, ns).

    A number in milliseconds counts toward zero (as before); in seconds, micro- or nanoseconds an
    integer is divided exactly (toward minus infinity) and any other number rounded to the nearest
    millisecond. With ``unit`` ``iso8601`` only a text is a time.

    >>> parse_event_time(1767225600.0215, "s"), parse_event_time(1767225600123456, "us")
    (1767225600022, 1767225600123)
    """
    if type(value) is int and unit == "ms" and MIN_EVENT_MS <= value < MAX_EVENT_MS:  # the usual form, as is
        return value
    if value is None:
        raise InvalidEventError("missing_event_time")
    if type(value) in _NUMBER_TYPES and unit != "iso8601":
        event_ms = _number_ms(value, unit)
    elif isinstance(value, str):
        event_ms = _parse_rfc3339_ms(value)
    else:
        raise InvalidEventError("bad_event_time", type(value).__name__)
    if not MIN_EVENT_MS <= event_ms < MAX_EVENT_MS:
        raise InvalidEventError("event_time_out_of_range", f"{value!r} is not a time ({unit}) between 2000 and 2100")
    return event_ms


#: Milliseconds per unit of an epoch number (a divisor for the units finer than a millisecond).
_PER_UNIT = {"s": 1000.0, "us": 1000, "ns": 1_000_000}


def _number_ms(value: int | float, unit: str) -> int:
    """Epoch milliseconds of a number in ``unit`` (see :func:`parse_event_time`; Java ``EventTimeMillis``)."""
    if not math.isfinite(value):
        raise InvalidEventError("bad_event_time", repr(value))
    if unit == "ms":
        return int(value)
    if unit == "s":
        return value * 1000 if type(value) is int else math.floor(value * 1000.0 + 0.5)
    if type(value) is int:
        return value // _PER_UNIT[unit]
    return math.floor(value / float(_PER_UNIT[unit]) + 0.5)


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
    """One model's feature kinds (name -> NUMERIC | CATEGORICAL | BOOLEAN), with its names split by kind.

    A boolean feature is summarized like a categorical one, its values the texts ``"true"`` and
    ``"false"``: :attr:`categorical` lists the categorical and boolean features, in configured order.

    :meth:`split` is the stream's fast path: an event carrying exactly the configured features,
    each with a value of its kind's type, is recognised (and its values taken in order) by a few
    C-level calls instead of a Python loop over the features.

    >>> kinds = FeatureKinds({"x": NUMERIC, "c": CATEGORICAL, "y": NUMERIC, "b": BOOLEAN})
    >>> kinds.split({"c": "a", "x": 1.5, "y": None, "b": True})
    ((1.5, None), ('a', 'true'))
    >>> kinds.split({"x": "1.5", "c": "a", "y": 2, "b": None}) is None  # not the common shape: the full check decides
    True
    >>> kinds.values_in_order({"x": 2, "z": True, "b": False})
    ((2, None), (None, 'false'))

    With ``prediction`` the event's top-level prediction is one more numeric column, named
    :data:`PREDICTION`, after the numeric features (the dict itself, which validation checks the
    features against, holds the features only):

    >>> FeatureKinds({"x": NUMERIC, "c": CATEGORICAL}, prediction=True).columns
    {'x': 'numeric', 'c': 'categorical', 'prediction': 'numeric'}
    """

    def __init__(self, kinds: Mapping[str, str], prediction: bool = False,
                 vectors: Mapping[str, tuple[int, int]] | None = None) -> None:
        super().__init__(kinds)
        self.prediction = prediction
        #: vector features: name -> (length, projections); their projected coordinates are numeric kinds here
        self.vectors = dict(vectors or {})
        self.numeric = tuple(name for name, kind in kinds.items() if kind == NUMERIC)
        self.categorical = tuple(name for name, kind in kinds.items() if kind != NUMERIC)
        self.boolean = frozenset(name for name, kind in kinds.items() if kind == BOOLEAN)
        self._boolean_at = tuple(i for i, name in enumerate(self.categorical) if name in self.boolean)
        self._label_types = tuple(_BOOLEAN_VALUE_TYPES if name in self.boolean else _CATEGORICAL_VALUE_TYPES
                                  for name in self.categorical)
        self.numeric_columns = self.numeric + ((PREDICTION,) if prediction else ())
        self.columns = {**kinds, PREDICTION: NUMERIC} if prediction else dict(kinds)
        self._numeric_of = _values_getter(self.numeric)
        self._categorical_of = _values_getter(self.categorical)

    def __reduce__(self) -> tuple:  # pickled with the job's functions: rebuild the getters on load
        return FeatureKinds, (dict(self), self.prediction, self.vectors)

    def split(self, features: Mapping[str, Any]) -> tuple[tuple, tuple] | None:
        """``(numeric values, categorical values)`` in this object's order, when ``features`` holds
        exactly the configured names, each with a value of its kind's type (or null); else None."""
        if len(features) != len(self):
            return None
        try:
            numbers, labels = self._numeric_of(features), self._categorical_of(features)
        except KeyError:
            return None
        if not _NUMERIC_VALUE_TYPES.issuperset(map(type, numbers)):
            return None
        if not self._boolean_at:
            return (numbers, labels) if _CATEGORICAL_VALUE_TYPES.issuperset(map(type, labels)) else None
        if not all(type(v) in accepted for v, accepted in zip(labels, self._label_types)):
            return None
        return numbers, self._boolean_texts(labels)

    def values_in_order(self, features: Mapping[str, Any],
                        invalid: Mapping[str, Any] | None = None) -> tuple[tuple, tuple]:
        """The configured features' values in this object's order (None where absent or ``invalid``), any event."""
        numbers, labels = tuple(map(features.get, self.numeric)), tuple(map(features.get, self.categorical))
        if invalid:
            numbers = tuple(None if name in invalid else v for name, v in zip(self.numeric, numbers))
            labels = tuple(None if name in invalid else v for name, v in zip(self.categorical, labels))
        return numbers, self._boolean_texts(labels) if self._boolean_at else labels

    def _boolean_texts(self, labels: tuple) -> tuple:
        """The categorical values with each boolean feature's value as its text, ``"true"`` or ``"false"``."""
        out = list(labels)
        for i in self._boolean_at:
            value = out[i]
            out[i] = None if value is None else BOOLEAN_TEXT[value]
        return tuple(out)


def _values_getter(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple]:
    """``itemgetter`` that always returns a tuple (it returns a bare value for one name)."""
    if len(names) == 1:
        (name,) = names
        return lambda features: (features[name],)
    return itemgetter(*names) if names else (lambda features: ())


#: The value types each feature kind accepts (null always): exact types, as JSON and Avro give them.
ACCEPTED_TYPES = {NUMERIC: _NUMERIC_VALUE_TYPES, CATEGORICAL: _CATEGORICAL_VALUE_TYPES, BOOLEAN: _BOOLEAN_VALUE_TYPES}


def project_vectors(features: Mapping[str, Any], vectors: Mapping[str, tuple[int, int]], reject_invalid: bool = False,
                    ) -> tuple[dict[str, Any], dict[str, InvalidValue] | None]:
    """The event's features with each vector feature replaced by its projected coordinates
    (``core/projection.py``; all null when it is null or absent), and each vector whose array is invalid
    (wrong length, not numbers, out of range): an invalid value of the vector feature, counted on its first
    coordinate's column (the feature's own counts in reports are under that name); with ``reject_invalid`` the
    event is rejected instead."""
    out = dict(features)
    invalid = None
    for name, (length, k) in vectors.items():
        value = out.pop(name, None)
        names = projected_names(name, k)
        projected = project(value, length, k) if value is not None else (None,) * k
        if isinstance(projected, str):
            if reject_invalid:
                raise InvalidEventError(f"type_mismatch:{name}", f"vector: {projected}")
            invalid = invalid or {}
            invalid[names[0]] = InvalidValue(f"bad_vector:{projected}", "")
            projected = (None,) * k
        out.update(zip(names, projected))
    return out, invalid


def check_feature_kinds(features: Mapping[str, Any], feature_kinds: Mapping[str, str] | None,
                        reject_invalid: bool = False) -> tuple[tuple[tuple, tuple] | None, dict | None]:
    """The common shape's values by kind (else None), and each monitored feature whose value has the wrong type.

    With :class:`FeatureKinds` the common shape is accepted by :meth:`FeatureKinds.split`, whose
    values by kind are returned; any other event takes one pass over the monitored features, on
    exact types (JSON gives only int, float, str, bool, None, list and dict). Features nobody
    monitors are ignored whatever their type. A wrong-typed monitored value is an
    :class:`InvalidValue` of its feature; with ``reject_invalid`` it rejects the event instead,
    naming the first such feature.
    """
    if type(feature_kinds) is FeatureKinds:
        by_kind = feature_kinds.split(features)
        if by_kind is not None:
            return by_kind, None
    invalid = None
    for name, kind in (feature_kinds or {}).items():
        value = features.get(name)
        if value is None or type(value) in ACCEPTED_TYPES.get(kind, _CATEGORICAL_VALUE_TYPES):
            continue
        if reject_invalid:
            raise InvalidEventError(f"type_mismatch:{name}", f"expected {kind}, got {value!r}"[:120])
        if invalid is None:
            invalid = {}
        invalid[name] = invalid_value(value)
    return None, invalid


#: A value's type as the reason of an invalid value names it (``wrong_type:<name>``).
_TYPE_NAMES = {str: "string", int: "number", float: "number", bool: "boolean", list: "array", dict: "object",
               bytes: "bytes"}
#: Longest preview of an invalid text value (characters).
PREVIEW_CHARS = 40
_EXACT_INTEGERS = 2 ** 53


def invalid_value(value: Any) -> InvalidValue:
    """The reason and preview of a wrong-typed value: its text (cut), ``true``/``false``, an integer's digits,
    or nothing (a fraction, an array, an object); the rule of Java ``InvalidValue``.

    >>> invalid_value("oops"), invalid_value(3.0), invalid_value([1])
    (InvalidValue(reason='wrong_type:string', value='oops'), InvalidValue(reason='wrong_type:number', value='3'), InvalidValue(reason='wrong_type:array', value=''))
    """
    kind = type(value)
    reason = "wrong_type:" + _TYPE_NAMES.get(kind, "other")
    if kind is str:
        return InvalidValue(reason, value[:PREVIEW_CHARS])
    if kind is bool:
        return InvalidValue(reason, BOOLEAN_TEXT[value])
    if kind in _NUMBER_TYPES and math.isfinite(value) and value == int(value) and abs(value) < _EXACT_INTEGERS:
        return InvalidValue(reason, str(int(value)))
    return InvalidValue(reason, "")


def utc_from_ms(epoch_ms: int) -> datetime:
    """Epoch milliseconds as a timezone-aware UTC datetime."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)


def rfc3339(epoch_ms: int) -> str:
    """Format epoch milliseconds as an RFC 3339 UTC string (millisecond precision)."""
    seconds, millis = divmod(int(epoch_ms), 1000)
    stamp = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{millis:03d}Z"
