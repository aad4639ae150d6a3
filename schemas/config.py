"""The monitor config (YAML): which models and features to watch, windows, reference, thresholds.

Validated once, before any job starts; an error names the file, the line and the field::

    source:
      topics: [features]
      bootstrap_servers: kafka:9092   # default: $DRIFTWARDEN_BOOTSTRAP_SERVERS, else localhost:9092
    window: {size: 60s, out_of_orderness: 5s}
    reference: {mode: file, path: reference.dwref}
    models:
      - name: fraud-v3
        features: {amount: numeric, country: categorical}
        monitor_prediction: true   # default: the event's `prediction` is monitored as feature `prediction`

>>> cfg = MonitorConfig.model_validate({"models": [{"name": "m", "features": {"x": "numeric"}}]})
>>> (cfg.window.size_ms, cfg.model("m").features["x"])
(60000, 'numeric')
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Mapping

import yaml
from pydantic import (BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from driftwarden.core.errors import ConfigError
from driftwarden.core.projection import projected_names
from driftwarden.schemas.envelope import EnvelopeConfig
from driftwarden.schemas.events import PREDICTION, FeatureKinds, sketch_kind

ScalarKind = Literal["numeric", "categorical", "boolean"]


class VectorFeature(BaseModel):
    """A vector feature, ``{vector: 384}``: an array of ``vector`` floats per event, projected to
    ``projections`` numeric coordinates (``core/projection.py``, ``docs/multivariate.md``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    vector: int = Field(ge=2, le=4096)
    projections: int = Field(default=16, ge=2, le=64)


def _feature_kind_form(value: Any) -> str:
    """Which form a feature's kind is written in: a mapping is a vector, anything else names a scalar kind
    (so a misspelt kind gets one error, not one per form)."""
    return "form-vector" if isinstance(value, (Mapping, VectorFeature)) else "form-scalar"


#: A feature's kind: a scalar kind's name or a vector's mapping. The union's tags ("form-...") are left out of the
#: field an error names, as pydantic's "function-..." steps are (:func:`describe_validation_error`).
FeatureKind = Annotated[Annotated[ScalarKind, Tag("form-scalar")] | Annotated[VectorFeature, Tag("form-vector")],
                        Discriminator(_feature_kind_form)]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000, None: 1000}

#: Every duration of the window section stays below this (100 days): the job's SQL states them as intervals
#: with 2 day digits (``jobs.source.interval_sql``; Flink's watermark code accepts no other precision).
MAX_DURATION_MS = 100 * 86_400_000

#: A monitor config nested deeper than this is refused (the real one is four levels deep).
MAX_DEPTH = 64


def parse_duration_ms(value: Any) -> int:
    """Milliseconds of a duration written as ``250ms``, ``5s``, ``10m``, ``1h``, ``90d``, ``1w`` or plain seconds.

    >>> parse_duration_ms("250ms"), parse_duration_ms("1.5m"), parse_duration_ms(2), parse_duration_ms("1w")
    (250, 90000, 2000, 604800000)
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration (YAML reads yes/no/on/off as true/false); "
                         "write one like 60s, 5m, 250ms")
    if not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} is not a duration like 60s, 5m, 250ms")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite duration")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"{value!r} is a negative duration")
        return int(value * 1000)
    match = _DURATION.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a duration like 60s, 5m, 250ms, 1d")
    return int(float(match.group(1)) * _UNIT_MS[match.group(2)])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SchemaRegistryConfig(_Strict):
    """A schema registry with the Confluent-compatible REST API (Avro topics); the password is referenced, never inlined."""

    url: str = Field(min_length=1)
    username: str | None = None
    password_env: str | None = None  # the name of an environment variable holding the password
    password_file: str | None = None  # a file holding the password (a mounted secret)

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url[:80]!r} is not an http:// or https:// URL")
        return url.rstrip("/")

    @model_validator(mode="after")
    def _one_password(self) -> "SchemaRegistryConfig":
        if self.password_env and self.password_file:
            raise ValueError("give password_env or password_file, not both")
        if (self.password_env or self.password_file) and not self.username:
            raise ValueError("a password needs a username")
        return self


SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
#: The name of an environment variable (a secret is referenced by it, never written in a config).
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_var_name(value: str | None) -> str | None:
    """``value`` when it is absent or the name of an environment variable; a ValueError (pydantic's field error)
    saying so otherwise, e.g. when a secret itself was written where its variable's name belongs."""
    if value is not None and not ENV_NAME.match(value):
        raise ValueError("the name of an environment variable (letters, digits, _; not a digit first), "
                         "never the secret itself")
    return value


_SASL_ONLY = ("sasl_mechanism", "username", "password_env", "password_file")
_TLS_ONLY = ("ca_file", "cert_file", "key_file", "key_password_env", "key_password_file")


class KafkaSecurity(_Strict):
    """How every Kafka client connects: ``source.security``, in Kafka's own words (docs/kafka-security.md).

    Secrets are never written here: ``password_env`` / ``key_password_env`` name an environment
    variable, ``password_file`` / ``key_password_file`` a file (its final line break is not part of
    the secret). Files are PEM; a relative path is read from the config file's folder.
    Translated once for each client library: :mod:`driftwarden.core.kafka_security`.

    >>> KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", username="u", password_env="PW").tls
    True
    >>> try:
    ...     KafkaSecurity(protocol="SSL", username="u")
    ... except ValidationError as exc:
    ...     print(exc.errors()[0]["loc"], exc.errors()[0]["msg"])
    ('username',) Value error, only with protocol SASL_PLAINTEXT or SASL_SSL (protocol is SSL)
    """

    protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    username: str | None = Field(default=None, min_length=1)
    password_env: str | None = None
    password_file: str | None = None
    ca_file: str | None = None  # the CA that signed the brokers' certificates; the system trust store when omitted
    cert_file: str | None = None  # mutual TLS: the client certificate (with key_file)
    key_file: str | None = None  # PKCS#8 PEM (BEGIN PRIVATE KEY or BEGIN ENCRYPTED PRIVATE KEY)
    key_password_env: str | None = None
    key_password_file: str | None = None

    @property
    def sasl(self) -> bool:
        """Whether the protocol authenticates with SASL."""
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        """Whether the protocol runs over TLS."""
        return self.protocol in ("SSL", "SASL_SSL")

    @field_validator(*_SASL_ONLY)
    @classmethod
    def _sasl_only(cls, value: str | None, info: ValidationInfo) -> str | None:
        protocol = info.data.get("protocol")
        if value is not None and protocol is not None and not protocol.startswith("SASL_"):
            raise ValueError(f"only with protocol SASL_PLAINTEXT or SASL_SSL (protocol is {protocol})")
        return value

    @field_validator(*_TLS_ONLY)
    @classmethod
    def _tls_only(cls, value: str | None, info: ValidationInfo) -> str | None:
        protocol = info.data.get("protocol")
        if value is not None and protocol is not None and protocol not in ("SSL", "SASL_SSL"):
            raise ValueError(f"only with protocol SSL or SASL_SSL (protocol is {protocol})")
        return value

    _env_name = field_validator("password_env", "key_password_env")(env_var_name)

    @field_validator("password_file", "ca_file", "cert_file", "key_file", "key_password_file")
    @classmethod
    def _file_path(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        if not value.strip() or "\x00" in value or "}" in value:
            raise ValueError("a file path, not empty, without NUL or '}'")
        base = (info.context or {}).get("config_dir")
        return str(Path(base) / value) if base is not None and not Path(value).is_absolute() else value

    @field_validator("password_file", "key_password_file")
    @classmethod
    def _one_source(cls, value: str | None, info: ValidationInfo) -> str | None:
        env = info.field_name.replace("_file", "_env")
        if value is not None and info.data.get(env) is not None:
            raise ValueError(f"give {env} or {info.field_name}, not both")
        return value

    @model_validator(mode="after")
    def _complete(self) -> "KafkaSecurity":
        missing = []
        if self.sasl:
            missing += [f for f in ("sasl_mechanism", "username") if getattr(self, f) is None]
            if self.password_env is None and self.password_file is None:
                missing.append("password_env or password_file")
        if missing:
            raise ValueError(f"protocol {self.protocol} needs {', '.join(missing)}")
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("mutual TLS needs both cert_file and key_file")
        if self.key_file is None and (self.key_password_env or self.key_password_file):
            raise ValueError("key_password_env / key_password_file decrypt key_file: give key_file")
        return self


class SourceConfig(_Strict):
    """Where events come from, how a record is read (format, envelope, invalid values), and how to connect
    (``security``)."""

    topics: list[str] = Field(default_factory=lambda: ["features"])
    topic_pattern: str | None = None
    #: unset: $DRIFTWARDEN_BOOTSTRAP_SERVERS, else localhost:9092 (driftwarden.core.endpoints.bootstrap_servers;
    #: a command's --bootstrap-servers wins over the config)
    bootstrap_servers: str = Field(default=None, validate_default=True)
    group_id: str = "driftwarden"
    start: str = "earliest"  # earliest | latest | committed | an RFC 3339 timestamp
    dead_letter_topic: str | None = None  # default: "<first topic>.dlq"
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    # json: each Kafka value is a JSON object; avro: the Confluent wire format, schemas from schema_registry
    format: Literal["json", "avro"] = "json"
    schema_registry: SchemaRegistryConfig | None = None
    envelope: EnvelopeConfig = Field(default_factory=EnvelopeConfig)
    # a monitored value of the wrong type: counted invalid for its feature, the event kept (skip_value),
    # or the whole event rejected (reject_event, the strictness of earlier versions)
    on_invalid_value: Literal["skip_value", "reject_event"] = "skip_value"

    @model_validator(mode="after")
    def _avro_needs_registry(self) -> "SourceConfig":
        if self.format == "avro" and self.schema_registry is None:
            raise ValueError("format avro reads the Confluent wire format: give schema_registry: {url: ...}")
        return self

    @field_validator("bootstrap_servers", mode="before")
    @classmethod
    def _default_servers(cls, value: str | None) -> str:
        from driftwarden.core.endpoints import bootstrap_servers

        return bootstrap_servers(None, value)

    @field_validator("start")
    @classmethod
    def _check_start(cls, value: str) -> str:
        if value in ("earliest", "latest", "committed"):
            return value
        from driftwarden.schemas.events import parse_event_time
        from driftwarden.core.errors import InvalidEventError

        try:
            parse_event_time(value)
        except InvalidEventError as exc:
            raise ValueError("start must be earliest, latest, committed or an RFC 3339 timestamp") from exc
        return value

    @property
    def dlq_topic(self) -> str:
        """The dead-letter topic name."""
        return self.dead_letter_topic or f"{(self.topics or ['events'])[0]}.dlq"


class WindowConfig(_Strict):
    """Event-time tumbling windows and watermarks."""

    size: str | int | float = "60s"
    out_of_orderness: str | int | float = "5s"
    # a partition caught up (nothing left to read) this long stops holding the watermark back; one that
    # is behind holds it however long it is silent (docs/faults.md); 0: a partition never stops holding it
    idleness: str | int | float = "30s"
    # an event time more than this ahead of its Kafka record's timestamp is a bad clock: dead letters
    # with reason "future", never windowed, never moves the watermark (pipeline.event_time.is_future)
    max_future_skew: str | int | float = "15m"
    # "on-periodic": the watermark advances every 200 ms (cheapest); "on-event": after every event
    # (exact lateness on a backlog, used by tests that count late events)
    watermark_emit: Literal["on-periodic", "on-event"] = "on-periodic"

    @field_validator("size", "out_of_orderness", "idleness", "max_future_skew", mode="before")
    @classmethod
    def _check_duration(cls, value: Any) -> Any:
        parse_duration_ms(value)  # before pydantic's coercion: YAML's `yes` must not become 1 s
        return value

    @field_validator("size", mode="after")
    @classmethod
    def _positive_size(cls, value: str | int | float) -> str | int | float:
        if parse_duration_ms(value) < 1:
            raise ValueError(f"{value!r}: a window must last at least 1 ms")
        return value

    @field_validator("size", "out_of_orderness", mode="after")
    @classmethod
    def _below_100_days(cls, value: str | int | float) -> str | int | float:
        if parse_duration_ms(value) >= MAX_DURATION_MS:
            raise ValueError(f"{value!r} must be below 100 days (2400h)")
        return value

    @field_validator("max_future_skew")
    @classmethod
    def _check_skew(cls, value: str | int) -> str | int:
        if not 0 < parse_duration_ms(value) < MAX_DURATION_MS:
            raise ValueError(f"max_future_skew {value!r} must be above 0 and below 100 days (2400h)")
        return value

    @property
    def size_ms(self) -> int:
        """Window length in milliseconds."""
        return parse_duration_ms(self.size)

    @property
    def out_of_orderness_ms(self) -> int:
        """Bounded out-of-orderness of the watermark in milliseconds."""
        return parse_duration_ms(self.out_of_orderness)

    @property
    def max_future_skew_ms(self) -> int:
        """How far an event time may be ahead of its record's Kafka timestamp."""
        return parse_duration_ms(self.max_future_skew)

    @property
    def idleness_ms(self) -> int:
        """A partition caught up this long (nothing left to read) no longer holds the watermark back."""
        return parse_duration_ms(self.idleness)


#: Reference windows a seasonal reference needs at each phase: the gate's calibration needs this many
#: (``sketches.DriftPolicy.min_windows``; tests/test_seasons.py keeps the two equal).
PHASE_WINDOWS_NEEDED = 5
#: Seasons a seasonal reference holds at least: its windows of each phase are scored against those of
#: the other seasons (leave one season out), so a difference between seasons is in the null.
MIN_SEASONS = 2


class ReferenceConfig(_Strict):
    """What "normal" looks like: a reference file, the first N windows, or the last M windows.

    ``season`` (``file`` and ``rolling``; e.g. ``1d``, ``1w``): a seasonal reference. Each live window is
    compared with the reference windows at the same phase of the season (the same time of day for
    ``1d``) give or take ``phase_tolerance`` (default: one window each side), and the gate, the deep
    tests and the slow-drift rule are calibrated on those windows alone, each season's against the
    other seasons'. A ``file`` reference must cover at least :func:`seasons_needed` seasons; a
    ``rolling`` one holds the same phase of the last ``seasons`` seasons (the same hour yesterday,
    the day before, ...; ``rolling_windows`` and ``lag_windows`` are then not used).

    >>> ReferenceConfig(mode="rolling", season="1d").seasons_needed(3_600_000)
    2
    >>> ReferenceConfig(mode="file", path="r.dwref", season="1d", phase_tolerance=0).seasons_needed(3_600_000)
    5
    """

    mode: Literal["file", "warmup", "rolling"] = "warmup"
    path: str | None = None
    warmup_windows: int = Field(default=5, ge=1)
    rolling_windows: int = Field(default=10, ge=2)
    lag_windows: int = Field(default=1, ge=0)
    season: str | int | float | None = None
    phase_tolerance: str | int | float | None = None
    seasons: int = Field(default=MIN_SEASONS, ge=MIN_SEASONS, le=1000)

    @field_validator("season", "phase_tolerance", mode="before")
    @classmethod
    def _check_duration(cls, value: Any) -> Any:
        if value is not None:
            parse_duration_ms(value)  # before pydantic's coercion: YAML's `yes` must not become 1 s
        return value

    @model_validator(mode="after")
    def _file_needs_path(self) -> "ReferenceConfig":
        if self.mode == "file" and not self.path:
            raise ValueError("reference.mode 'file' needs reference.path")
        if self.season is None and self.phase_tolerance is not None:
            raise ValueError("phase_tolerance needs a season (e.g. season: 1d)")
        if self.season is not None and self.mode == "warmup":
            raise ValueError("season needs mode file or rolling: a warm-up reference (the first windows) holds "
                             "no whole season")
        if self.season is not None and parse_duration_ms(self.season) < 1:
            raise ValueError(f"season {self.season!r} must last at least 1 ms")
        return self

    @property
    def season_ms(self) -> int | None:
        """The season's length in milliseconds; None without a season."""
        return None if self.season is None else parse_duration_ms(self.season)

    def tolerance_windows(self, window_ms: int) -> int:
        """Neighbouring phases (windows) a seasonal reference takes in on each side: ``phase_tolerance``
        (default one window)."""
        return 1 if self.phase_tolerance is None else parse_duration_ms(self.phase_tolerance) // window_ms

    def seasons_needed(self, window_ms: int) -> int:
        """Seasons a seasonal reference must hold: two at least, and enough that each phase has
        ``PHASE_WINDOWS_NEEDED`` windows with the tolerance (2 t + 1 windows a season)."""
        per_season = 2 * self.tolerance_windows(window_ms) + 1
        return max(MIN_SEASONS, -(-PHASE_WINDOWS_NEEDED // per_season))

    def check_season(self, window_ms: int) -> None:
        """ValueError unless the season is whole windows, its tolerance below half of it, and a rolling one
        holds enough seasons."""
        season_ms = self.season_ms
        if season_ms is None:
            return
        if season_ms % window_ms or season_ms < 2 * window_ms:
            raise ValueError(f"season {self.season!r} must be a whole number of windows ({window_ms:,} ms each), "
                             "two at least")
        tolerance = self.tolerance_windows(window_ms)
        if 2 * tolerance + 1 > season_ms // window_ms:
            raise ValueError(f"phase_tolerance {self.phase_tolerance!r} ({tolerance} windows each side) spans more "
                             f"than the season {self.season!r}; keep it below half the season")
        needed = self.seasons_needed(window_ms)
        if self.mode == "rolling" and self.seasons < needed:
            raise ValueError(f"seasons {self.seasons}: with phase_tolerance {tolerance} windows each side a season "
                             f"gives {2 * tolerance + 1} reference windows per phase, and calibration needs "
                             f"{PHASE_WINDOWS_NEEDED}: set seasons to {needed} or widen phase_tolerance")


class ThresholdConfig(_Strict):
    """Overrides of the drift policy defaults (see sketches.DriftPolicy).

    ``false_alerts_per_week``: the monitor's false-alarm budget per model (default 1). The deep
    tests' level is derived from it and the window length: Benjamini-Hochberg across a window's
    features runs at ``alpha = false_alerts_per_week / windows per week`` (at most 0.05), which
    bounds the chance that a drift-free window reports any drifted feature. ``alpha`` set here
    overrides the derived level.
    """

    false_alerts_per_week: float = Field(default=1.0, gt=0)
    alpha: float | None = Field(default=None, gt=0, lt=1)
    psi_minor: float = Field(default=0.1, gt=0)
    psi_major: float = Field(default=0.25, gt=0)
    false_alarm_rate: float = Field(default=0.01, gt=0, lt=1)
    bins: int = Field(default=10, ge=2, le=100)
    min_count: int = Field(default=30, ge=1)

    @model_validator(mode="after")
    def _minor_below_major(self) -> "ThresholdConfig":
        if self.psi_minor >= self.psi_major:
            raise ValueError(f"psi_minor ({self.psi_minor:g}) must be below psi_major ({self.psi_major:g})")
        return self


class SegmentConfig(_Strict):
    """How a model's traffic is cut into segments (``pipeline/segments.py``), e.g. ``{by: [country]}``.

    A segment is one tuple of the ``by`` features' values (categorical features of the model, in
    ``by`` order). The ``top`` segments by volume in the reference get a reference and a summary
    each; every other value tuple is folded into the segment ``("(other)", ...)``. A segment with
    fewer than ``min_count`` events in a window is not judged. Each segment keeps an event sample of at
    most ``sample_size`` events (never more than the model's): only a capped categorical feature's tests
    read it, and it is most of a segmented window's bytes at the model's 2,000 (``sketches/FORMAT.md``).

    >>> SegmentConfig(by=["country"])
    SegmentConfig(by=('country',), top=20, min_count=200, sample_size=500)
    """

    by: tuple[str, ...] = Field(min_length=1)
    top: int = Field(default=20, ge=1, le=100)
    min_count: int = Field(default=200, ge=1)
    sample_size: int = Field(default=500, ge=10)

    @field_validator("by")
    @classmethod
    def _distinct(cls, by: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({n for n in by if by.count(n) > 1})
        if repeated:
            raise ValueError(f"a feature may appear once in by; repeated: {', '.join(map(repr, repeated))}")
        return by


#: The name of a model's default multivariate group (all its numeric features, when it has 2 to 64 of them).
DEFAULT_GROUP = "(numeric)"
#: Most features of one multivariate group (its state grows with the square).
MAX_GROUP_FEATURES = 64


class GroupConfig(_Strict):
    """A multivariate group of a model's numeric features (``docs/multivariate.md``): its moments are kept
    per window and its correlation structure, subspace and mean are tested together.

    >>> GroupConfig(name="risk-core", features=["a", "b"])
    GroupConfig(name='risk-core', features=('a', 'b'))
    """

    name: str = Field(min_length=1, max_length=200)
    features: tuple[str, ...] = Field(min_length=2, max_length=MAX_GROUP_FEATURES)

    @field_validator("name")
    @classmethod
    def _storable(cls, name: str) -> str:
        if "\x00" in name:
            raise ValueError("a group name cannot contain a NUL character")
        return name

    @field_validator("features")
    @classmethod
    def _distinct(cls, features: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({n for n in features if features.count(n) > 1})
        if repeated:
            raise ValueError(f"a feature may appear once in a group; repeated: {', '.join(map(repr, repeated))}")
        return features


class ModelConfig(_Strict):
    """One monitored model and the kind of each feature.

    ``monitor_prediction`` (default true): the event's top-level ``prediction`` is monitored like
    a numeric feature named ``prediction`` (reported, stored and alerted under that name; an
    event without one counts as a missing value). A feature of the model named ``prediction``
    would share that name: it is refused unless ``monitor_prediction`` is false.

    >>> ModelConfig(name="m", features={"x": "categorical"}).monitored
    {'x': 'categorical', 'prediction': 'numeric'}
    >>> ModelConfig(name="m", features={"x": "numeric"}, monitor_prediction=False).monitored
    {'x': 'numeric'}
    """

    name: str = Field(min_length=1, max_length=200)  # the store's model columns hold 200 characters
    features: dict[str, FeatureKind] = Field(min_length=1)
    monitor_prediction: bool = True
    sample_size: int = Field(default=2000, ge=10)
    sketch_buckets: int = Field(default=1024, ge=16, le=65536)
    segments: SegmentConfig | None = None
    #: multivariate groups; None: the default group of all numeric features (2 to 64 of them); []: none
    multivariate: list[GroupConfig] | None = None

    @field_validator("segments")
    @classmethod
    def _segments_by_categorical(cls, segments: SegmentConfig | None, info: ValidationInfo) -> SegmentConfig | None:
        features = info.data.get("features")
        if segments is None or features is None:  # no features: that field's own error says so
            return segments
        categorical = [n for n, kind in features.items() if kind == "categorical"]
        for name in segments.by:
            if features.get(name) != "categorical":
                what = f"a {features[name]} feature" if name in features else "not a feature of the model"
                raise ValueError(f"by: {name!r} is {what}; segments are cut by categorical features "
                                 f"({', '.join(map(repr, categorical)) or 'the model has none'})")
        return segments

    @model_validator(mode="after")
    def _prediction_name_is_free(self) -> "ModelConfig":
        if self.monitor_prediction and PREDICTION in self.features:
            raise ValueError(f"model {self.name!r}: a feature named {PREDICTION!r} clashes with the monitored "
                             f"prediction (reported as feature {PREDICTION!r}); rename the feature, or set "
                             "monitor_prediction: false for this model")
        return self

    @model_validator(mode="after")
    def _groups_of_numeric_features(self) -> "ModelConfig":
        seen: set[str] = set()
        for group in self.multivariate or ():
            if group.name in self.features or group.name == PREDICTION or group.name in seen:
                raise ValueError(f"model {self.name!r}: group name {group.name!r} is already a feature's, the "
                                 "prediction's or another group's; give the group a name of its own")
            seen.add(group.name)
            bad = [n for n in group.features if self.features.get(n) != "numeric"]
            if bad:
                numeric = [n for n, kind in self.features.items() if kind == "numeric"]
                raise ValueError(f"model {self.name!r}: group {group.name!r} has {', '.join(map(repr, bad))}, not "
                                 f"numeric features of the model ({', '.join(map(repr, numeric)) or 'it has none'})")
        return self

    @property
    def groups(self) -> dict[str, tuple[str, ...]]:
        """Each multivariate group's features: the configured ones, or by default one group
        (:data:`DEFAULT_GROUP`) of all numeric features when the model has 2 to 64 of them; then
        each vector feature's projected coordinates, a group named after it."""
        if self.multivariate is not None:
            groups = {group.name: group.features for group in self.multivariate}
        else:
            numeric = tuple(name for name, kind in self.features.items() if kind == "numeric")
            groups = {DEFAULT_GROUP: numeric} if 2 <= len(numeric) <= MAX_GROUP_FEATURES else {}
        return {**groups, **{name: projected_names(name, v.projections) for name, v in self.vectors.items()}}

    @property
    def vectors(self) -> dict[str, VectorFeature]:
        """The model's vector features."""
        return {name: kind for name, kind in self.features.items() if isinstance(kind, VectorFeature)}

    @property
    def scalar_kinds(self) -> dict[str, str]:
        """Each feature's kind, a vector feature replaced by its projected coordinates (numeric), in place."""
        out: dict[str, str] = {}
        for name, kind in self.features.items():
            if isinstance(kind, VectorFeature):
                out.update(dict.fromkeys(projected_names(name, kind.projections), "numeric"))
            else:
                out[name] = kind
        return out

    @property
    def kinds(self) -> FeatureKinds:
        """The model's feature kinds for validation, with the prediction as a column when monitored."""
        vectors = {name: (v.vector, v.projections) for name, v in self.vectors.items()}
        return FeatureKinds(self.scalar_kinds, prediction=self.monitor_prediction, vectors=vectors)

    @property
    def monitored(self) -> dict[str, str]:
        """Every monitored name and its kind, in summary order: the features, then ``prediction`` when monitored."""
        return self.kinds.columns

    @property
    def sketch_kinds(self) -> dict[str, str]:
        """:attr:`monitored` with each kind as its sketch's (a boolean feature is summarized as a categorical one)."""
        return {name: sketch_kind(kind) for name, kind in self.monitored.items()}

    @field_validator("name")
    @classmethod
    def _storable_name(cls, name: str) -> str:
        if "\x00" in name:
            raise ValueError("a model name cannot contain a NUL character")
        return name

    @field_validator("features")
    @classmethod
    def _storable_features(cls, features: dict[str, FeatureKind]) -> dict[str, FeatureKind]:
        bad = [repr(n)[:60] for n in features if not n or len(n) > 190 or "\x00" in n]
        if bad:
            raise ValueError(f"feature names must be 1 to 190 characters without NUL; not {', '.join(bad)}")
        return features


class RetentionConfig(_Strict):
    """How long the store keeps rows (``driftwarden store prune`` deletes older ones); null keeps them forever."""

    verdicts: str | None = "90d"  # window and segment results and window counts, by window start
    dead_letters: str | None = "14d"  # by when they were stored
    deliveries: str | None = "30d"  # finished webhook deliveries, resolved alerts, alert history, expired silences

    @field_validator("verdicts", "dead_letters", "deliveries", mode="before")
    @classmethod
    def _check_duration(cls, value: Any) -> Any:
        if value is not None and parse_duration_ms(value) < 3_600_000:
            raise ValueError(f"{value!r}: keep rows at least 1h (or null: forever)")
        return value

    def keep_ms(self, what: str) -> int | None:
        """Milliseconds rows of ``what`` (verdicts, dead_letters, deliveries) are kept; None: forever."""
        value = getattr(self, what)
        return None if value is None else parse_duration_ms(value)


class MonitorConfig(_Strict):
    """The whole monitor config."""

    source: SourceConfig = Field(default_factory=SourceConfig)
    window: WindowConfig = Field(default_factory=WindowConfig)
    reference: ReferenceConfig = Field(default_factory=ReferenceConfig)
    thresholds: ThresholdConfig = Field(default_factory=ThresholdConfig)
    models: list[ModelConfig] = Field(min_length=1)
    store_url: str | None = None
    dashboard_url: str | None = None
    alerting: dict[str, Any] = Field(default_factory=dict)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)

    @field_validator("reference")
    @classmethod
    def _season_fits_the_window(cls, reference: ReferenceConfig, info: ValidationInfo) -> ReferenceConfig:
        window = info.data.get("window")
        if window is not None:  # no window: that field's own error says so
            reference.check_season(window.size_ms)
        return reference

    @field_validator("models")
    @classmethod
    def _unique_models(cls, models: list[ModelConfig]) -> list[ModelConfig]:
        names = [m.name for m in models]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"model names must be unique; repeated: {', '.join(duplicates)}")
        return models

    @model_validator(mode="after")
    def _features_not_in_the_envelope(self) -> "MonitorConfig":
        envelope = self.source.envelope
        if not envelope.features.root:
            return self
        taken = envelope.top_level_fields()
        for index, model in enumerate(self.models):
            clash = sorted(name for name in model.features if name in taken)
            if clash:
                raise ValueError(f"models.{index}: feature(s) {', '.join(map(repr, clash))} of model {model.name!r} "
                                 "are fields of the envelope (event time, model, prediction) or excluded "
                                 "(features.exclude) under source.envelope: rename the feature or change the mapping")
        return self

    def model(self, name: str) -> ModelConfig | None:
        """The config of one model, or None when the model is not monitored."""
        return next((m for m in self.models if m.name == name), None)

    def with_bootstrap_servers(self, option: str | None) -> "MonitorConfig":
        """This config with Kafka at ``option`` (a command's ``--bootstrap-servers``) when given, else itself
        (driftwarden.core.endpoints.bootstrap_servers)."""
        from driftwarden.core.endpoints import bootstrap_servers

        servers = bootstrap_servers(option, self.source.bootstrap_servers)
        if servers == self.source.bootstrap_servers:
            return self
        return self.model_copy(update={"source": self.source.model_copy(update={"bootstrap_servers": servers})})


def feature_kinds_lookup(config: MonitorConfig) -> Callable[[str], Mapping[str, str] | None]:
    """model name -> its feature kinds, prediction column included (None for a model the config does not monitor)."""
    return {m.name: m.kinds for m in config.models}.get


def load_config(path: str | Path) -> MonitorConfig:
    """Read and validate a monitor config file; ConfigError names file, line and field."""
    path = Path(path)
    data, root = read_yaml(path)
    if root is None:
        raise ConfigError(f"{path}:1: the config is empty; it needs at least a models section")
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError(f"{path}:{root.start_mark.line + 1}: the config must be a mapping (key: value) "
                          "at the top level")
    try:  # relative file paths (source.security) are read from the config file's folder
        return MonitorConfig.model_validate(data, context={"config_dir": path.absolute().parent})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, root, exc)) from exc


def load_security(path: str | Path) -> KafkaSecurity:
    """Read a ``source.security`` section from a YAML file of its own (the demo's ``--kafka-security``);
    ConfigError names file, line and field; relative paths are read from the file's folder."""
    path = Path(path)
    data, root = read_yaml(path)
    try:
        return KafkaSecurity.model_validate(data or {}, context={"config_dir": path.absolute().parent})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, root, exc)) from exc


def config_store_url(path: str | Path | None) -> str | None:
    """The ``store_url`` of a monitor config file (None when it has none, or when ``path`` is None), read
    without validating the rest: the alert commands also take a file that holds only an ``alerting:``
    section. ConfigError naming the file and line when it is not a text."""
    if path is None:
        return None
    data, root = read_yaml(path)
    if not isinstance(data, dict) or data.get("store_url") is None:
        return None
    if not isinstance(data["store_url"], str):
        line = next((k.start_mark.line + 1 for k, _ in root.value if k.value == "store_url"), 1)
        raise ConfigError(f"{path}:{line}: store_url must be a text (a SQLAlchemy URL)")
    return data["store_url"]


def read_yaml(path: str | Path) -> tuple[Any, yaml.Node | None]:
    """A YAML file's data and node tree (None, None when empty), read as every config file is read.

    ConfigError naming the file and line for a missing, unreadable or non-UTF-8 file, invalid
    YAML, nesting deeper than MAX_DEPTH, or a key given twice in one mapping.
    """
    path = Path(path)
    root = _compose(path, _read_text(path))
    if root is None:
        return None, None
    _refuse_duplicate_keys(path, root, [])
    try:
        return yaml.SafeLoader("").construct_document(root), root
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_error(path, exc)) from exc


def _read_text(path: Path) -> str:
    """The file's text; ConfigError for a missing, unreadable or non-UTF-8 file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                          "save the config as UTF-8") from exc


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses nesting deeper than MAX_DEPTH (instead of a RecursionError)."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        """Compose one node, counting how deep it sits."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _compose(path: Path, text: str) -> yaml.Node | None:
    """The YAML node tree of ``text`` (no objects built yet); ConfigError on a YAML error."""
    try:
        loader = _BoundedLoader(text)  # the reader already refuses characters YAML does not allow
        try:
            return loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_error(path, exc, text)) from exc


def _yaml_error(path: Path, exc: yaml.YAMLError, text: str = "") -> str:
    """One line for a YAML error: file, line and what is wrong."""
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        what = " ".join(p for p in (getattr(exc, "context", None), getattr(exc, "problem", None)) if p)
        return f"{path}:{mark.line + 1}: not valid YAML: {what or exc}"
    position = getattr(exc, "position", None)  # a ReaderError: a character YAML does not allow
    line = text[:position].count("\n") + 1 if isinstance(position, int) else 1
    character = getattr(exc, "character", None)
    reason = f"character #x{character:04x} is not allowed" if isinstance(character, int) else str(exc).splitlines()[0]
    return f"{path}:{line}: not valid YAML: {reason}"


def _refuse_duplicate_keys(path: Path, node: yaml.Node, where: list[str]) -> None:
    """ConfigError for a key given twice in one mapping (YAML would silently keep the last)."""
    if isinstance(node, yaml.SequenceNode):
        for index, child in enumerate(node.value):
            _refuse_duplicate_keys(path, child, [*where, str(index)])
    if not isinstance(node, yaml.MappingNode):
        return
    first_line: dict[tuple[str, str], int] = {}
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        field = ".".join([*where, key.value])
        if (key.tag, key.value) in first_line:
            raise ConfigError(f"{path}:{key.start_mark.line + 1}: {field}: given twice "
                              f"(first on line {first_line[key.tag, key.value]}); keep one")
        first_line[key.tag, key.value] = key.start_mark.line + 1
        _refuse_duplicate_keys(path, value, [*where, key.value])


def describe_validation_error(path: Path, root: yaml.Node | None, exc: ValidationError,
                              under: tuple[str, ...] = ()) -> str:
    """One line per validation error: ``file:line: field: message`` (never the offending value).

    ``under``: where in the file the validated mapping sits (``("alerting",)`` for the alert rules).
    """
    lines = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = [*under, *(p for p in error["loc"] if not isinstance(p, str) or not p.startswith(("function-", "form-")))]
        field = ".".join(str(p) for p in loc) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        lines.append(f"{path}:{_line_of(root, loc)}: {field}: {message}")
    return "\n".join(lines)


def _line_of(node: yaml.Node | None, loc: list[Any]) -> int:
    """The 1-based line of the deepest YAML node along ``loc``."""
    line = node.start_mark.line + 1 if node is not None else 1
    for key in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if k.value == str(key)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            child = node.value[key]
        if child is None:
            break
        node, line = child, child.start_mark.line + 1
    return line
