"""Where an event's parts sit in the records a team already publishes: ``source.envelope`` in the config.

The default is the contract's own shape (``event_time``, ``model``, ``features``, ``prediction``);
a mapping names other fields (dotted paths reach into nested objects), the time's unit, a model
that is the same for every record of the topic, or features at the record's top level::

    source:
      envelope:
        event_time: {field: ts, unit: s}        # ms (default) | s | us | ns | iso8601
        model: {field: model_id}                # or {value: fraud-v3}
        features: {root: true, exclude: [request_id]}   # or {field: features}
        prediction: {field: output.score}

The same mapping is read by Python (:class:`EnvelopeReader`, here) and by the job's Java side
(``Envelope``, from :meth:`EnvelopeConfig.to_java`); ``tests/test_feature_columns.py`` compares them.

>>> reader = EnvelopeReader(EnvelopeConfig.model_validate({"event_time": {"field": "meta.ts", "unit": "s"},
...     "model": {"value": "m"}, "features": {"root": True, "exclude": ["request_id"]}}))
>>> doc = {"meta": {"ts": 1767225600.5}, "x": 1.5, "request_id": "r1"}
>>> (reader.event_time(doc), reader.model(doc), reader.features(doc))
((1767225600.5, True), 'm', {'meta': {'ts': 1767225600.5}, 'x': 1.5})
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Units an event time may be written in; a text is read as RFC 3339 whatever the unit.
TIME_UNITS = ("ms", "s", "us", "ns", "iso8601")
_MISSING = object()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _check_path(path: str) -> str:
    """A dotted field path: non-empty parts without NUL."""
    if not path or any(not part for part in path.split(".")) or "\x00" in path:
        raise ValueError(f"{path!r} is not a field path: write a field name, or names joined by dots (meta.ts)")
    return path


class TimeMapping(_Strict):
    """Where the event time is and what unit a number there is in."""

    field: str = "event_time"
    unit: Literal["ms", "s", "us", "ns", "iso8601"] = "ms"

    @field_validator("field")
    @classmethod
    def _field_path(cls, value: str) -> str:
        return _check_path(value)


class ModelMapping(_Strict):
    """The model's field, or one model name for every record (``value``: one topic per model)."""

    field: str | None = None
    value: str | None = Field(default=None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _one_of(self) -> "ModelMapping":
        if self.field is not None and self.value is not None:
            raise ValueError("give model.field (the model's name in each record) or model.value (one name for "
                             "every record), not both")
        if self.field is not None:
            _check_path(self.field)
        return self

    @property
    def path(self) -> str | None:
        """The model's field path (None when the model is a constant)."""
        return None if self.value is not None else (self.field or "model")


class FeaturesMapping(_Strict):
    """The features' object (``field``), or the record's top level less some fields (``root``)."""

    field: str | None = None
    root: bool = False
    exclude: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _one_of(self) -> "FeaturesMapping":
        if self.root and self.field is not None:
            raise ValueError("features at the record's top level (root: true) have no field; give one of them")
        if self.exclude and not self.root:
            raise ValueError("features.exclude lists top-level fields that are not features: it needs root: true")
        if self.field is not None:
            _check_path(self.field)
        return self

    @property
    def path(self) -> str | None:
        """The features object's path (None at the root)."""
        return None if self.root else (self.field or "features")


class PredictionMapping(_Strict):
    """Where the model's output is."""

    field: str = "prediction"

    @field_validator("field")
    @classmethod
    def _field_path(cls, value: str) -> str:
        return _check_path(value)


class EnvelopeConfig(_Strict):
    """The mapping of a published record onto an event (defaults: the contract's own envelope)."""

    event_time: TimeMapping = Field(default_factory=TimeMapping)
    model: ModelMapping = Field(default_factory=ModelMapping)
    features: FeaturesMapping = Field(default_factory=FeaturesMapping)
    prediction: PredictionMapping = Field(default_factory=PredictionMapping)

    @model_validator(mode="after")
    def _paths_apart(self) -> "EnvelopeConfig":
        paths = {"event_time": self.event_time.field, "model": self.model.path,
                 "features": self.features.path, "prediction": self.prediction.field}
        named = [(part, path) for part, path in paths.items() if path is not None]
        for i, (part, path) in enumerate(named):
            for other, other_path in named[i + 1:]:
                if _overlap(path, other_path):
                    raise ValueError(f"{part} ({path}) and {other} ({other_path}) point at the same field or one "
                                     "inside the other; map each part of the event to a field of its own")
        for name in self.features.exclude:
            _check_path(name)
        return self

    @property
    def is_default(self) -> bool:
        """Whether this is the contract's own envelope."""
        return self == DEFAULT_ENVELOPE

    def top_level_fields(self) -> frozenset[str]:
        """Top-level fields that are parts of the envelope, never features (with ``root``: left out of them)."""
        paths = (self.event_time.field, self.model.path, self.prediction.field)
        return frozenset(p for p in paths if p is not None and "." not in p) | frozenset(self.features.exclude)

    def to_java(self) -> dict:
        """The mapping as the job's Java side reads it (``Envelope.Mapping``)."""
        return {"event_time": self.event_time.field.split("."), "unit": self.event_time.unit,
                "model": self.model.path.split(".") if self.model.value is None else None,
                "model_value": self.model.value,
                "features": None if self.features.root else self.features.path.split("."),
                "exclude": sorted(self.top_level_fields()) if self.features.root else [],
                "prediction": self.prediction.field.split(".")}


def _overlap(a: str, b: str) -> bool:
    """Whether two dotted paths name the same field or one lies inside the other."""
    pa, pb = a.split("."), b.split(".")
    return pa[:len(pb)] == pb or pb[:len(pa)] == pa


DEFAULT_ENVELOPE = EnvelopeConfig()


def field_at(doc: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at a path of nested objects, or :data:`_MISSING` where an object or field is absent."""
    value: Any = doc
    for part in path:
        if type(value) is not dict:
            return _MISSING
        value = value.get(part, _MISSING)
        if value is _MISSING:
            return _MISSING
    return value


class EnvelopeReader:
    """One envelope mapping applied to decoded records (dicts, from JSON or Avro)."""

    __slots__ = ("config", "_time", "unit", "_model", "_model_value", "_features", "_exclude", "_prediction")

    def __init__(self, config: EnvelopeConfig = DEFAULT_ENVELOPE) -> None:
        self.config = config
        self._time = tuple(config.event_time.field.split("."))
        self.unit = config.event_time.unit
        self._model_value = config.model.value
        self._model = tuple(config.model.path.split(".")) if config.model.value is None else ()
        self._features = None if config.features.root else tuple(config.features.path.split("."))
        self._exclude = config.top_level_fields()
        self._prediction = tuple(config.prediction.field.split("."))

    def __reduce__(self) -> tuple:  # pickled with the job's functions
        return EnvelopeReader, (self.config,)

    def event_time(self, doc: Mapping[str, Any]) -> tuple[Any, bool]:
        """The event time's value (None when absent) and whether it was present at all."""
        value = field_at(doc, self._time)
        return (None, False) if value is _MISSING else (value, True)

    def model(self, doc: Mapping[str, Any]) -> Any:
        """The model's name as the record has it (None when absent), or the configured constant."""
        if self._model_value is not None:
            return self._model_value
        value = field_at(doc, self._model)
        return None if value is _MISSING else value

    def features(self, doc: Mapping[str, Any]) -> Any:
        """The features' object (None when absent; not necessarily a dict: the caller checks)."""
        if self._features is None:
            exclude = self._exclude
            return {k: v for k, v in doc.items() if k not in exclude}
        value = field_at(doc, self._features)
        return None if value is _MISSING else value

    def prediction(self, doc: Mapping[str, Any]) -> Any:
        """The prediction's value (None when absent)."""
        value = field_at(doc, self._prediction)
        return None if value is _MISSING else value
