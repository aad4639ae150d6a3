"""The typed feature columns that Java reads for the job (``DW_FEATURES``), and taking them back.

The job's Kafka source already parses every record's envelope in Java (``jobs/java``). For the
stream's common, flat shape it also reads the configured features there, so the record reaches
the Python window aggregate as typed columns (a DOUBLE per numeric feature, a STRING per
categorical one) with a flag ``ok``, instead of as JSON bytes to parse again. Java sets ``ok`` only
where the Python validation (:func:`schemas.events.validate_event`) would accept the event and take
exactly these values from it; every other record keeps its bytes and Python validates it, so
valid, rejected and their reasons are decided as before (and as in replay).

The spec is JSON, passed to ``DW_FEATURES`` as a string literal::

    {"columns": ["numeric", "categorical", "numeric"], "models": {"m": {"x": 0, "c": 1}},
     "prediction": {"m": 2}}

Column ``ci`` of the result holds the values of kind ``columns[i]``; a feature name of that kind
shares its column across models. ``prediction`` names, per model that monitors it
(``monitor_prediction``), the numeric column of the event's top-level ``prediction``: Java puts
the prediction there for every record it vouches for, Python for every record it validates.

>>> from schemas.config import MonitorConfig
>>> cfg = MonitorConfig.model_validate({"models": [{"name": "m", "features": {"x": "numeric", "c": "categorical"}},
...                                               {"name": "n", "features": {"x": "numeric"}, "monitor_prediction": False}]})
>>> spec = FeatureColumnSpec.from_config(cfg)
>>> (spec.kinds, spec.columns_of["m"], spec.columns_of["n"], spec.names)
(('numeric', 'categorical', 'numeric'), {'x': 0, 'c': 1, 'prediction': 2}, {'x': 0}, ['c0', 'c1', 'c2'])
>>> spec.row_values("m", ((1, 0.5), ("a",)))
[1.0, 'a', 0.5]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from driftwarden.schemas.config import MonitorConfig
from driftwarden.schemas.events import NUMERIC, PREDICTION
from driftwarden.sketches.categorical import DEFAULT_MAX_EXACT as MAX_EXACT
from driftwarden.sketches.histogram import DEFAULT_PRECISION as HISTOGRAM_PRECISION


@dataclass(frozen=True)
class FeatureColumnSpec:
    """Which column of ``DW_FEATURES``'s row holds which model's monitored value (feature or prediction)."""

    kinds: tuple[str, ...]  # the kind of column c0, c1, ...
    columns_of: Mapping[str, Mapping[str, int]]  # model -> monitored name -> column (ModelConfig.monitored order)
    prediction_of: Mapping[str, int]  # model -> column of its prediction (models that monitor it)
    # model -> the columns of its values in configured_values' order (numeric columns, then categorical)
    order_of: Mapping[str, tuple[int, ...]]
    envelope: Mapping | None = None  # the config's source.envelope as Java reads it (EnvelopeConfig.to_java)
    python_only: tuple[str, ...] = ()  # models with vector features: Python validates (and projects) every event

    @classmethod
    def from_config(cls, config: MonitorConfig) -> "FeatureColumnSpec":
        """One column per (name, kind) over all configured models; the prediction is ("prediction", numeric)."""
        column_of: dict[tuple[str, str], int] = {}
        for model in config.models:
            for name, kind in model.monitored.items():
                column_of.setdefault((name, kind), len(column_of))
        columns_of = {m.name: {name: column_of[name, kind] for name, kind in m.monitored.items()}
                      for m in config.models}
        prediction_of = {m.name: column_of[PREDICTION, NUMERIC] for m in config.models if m.monitor_prediction}
        order_of = {m.name: tuple(column_of[name, NUMERIC] for name in m.kinds.numeric_columns)
                    + tuple(column_of[name, kind] for name, kind in m.monitored.items() if kind != NUMERIC)
                    for m in config.models}
        envelope = None if config.source.envelope.is_default else config.source.envelope.to_java()
        python_only = tuple(m.name for m in config.models if m.vectors)
        return cls(tuple(kind for _, kind in column_of), columns_of, prediction_of, order_of, envelope, python_only)

    @property
    def names(self) -> list[str]:
        """The row's column names after ``ok``: c0, c1, ..."""
        return [f"c{i}" for i in range(len(self.kinds))]

    def to_json(self) -> str:
        """The spec as ``DW_FEATURES`` reads it (``models``: the features in the event's ``features`` object)."""
        models = {model: {name: i for name, i in columns.items()
                          if not (name == PREDICTION and model in self.prediction_of)}
                  for model, columns in self.columns_of.items()}
        return json.dumps({"columns": list(self.kinds), "models": models, "prediction": self.prediction_of,
                           "envelope": self.envelope, "python_only": list(self.python_only)}, separators=(",", ":"))

    def aggregate_spec(self, config: MonitorConfig) -> str:
        """The spec of the Java window aggregate (``WindowSummaryAgg``): window, columns, per-model sketches."""
        models = {m.name: {"features": [[name, self.columns_of[m.name][name]] for name in m.monitored],
                           "sample_size": m.sample_size, "precision": HISTOGRAM_PRECISION,
                           "max_buckets": m.sketch_buckets, "max_exact": MAX_EXACT,
                           "groups": [[name, [list(m.monitored).index(f) for f in members]]
                                      for name, members in m.groups.items()]} for m in config.models}
        return json.dumps({"window_ms": config.window.size_ms, "columns": list(self.kinds), "models": models},
                          separators=(",", ":"))

    def invalid_json(self, model: str, invalid: Mapping | None) -> str | None:
        """An event's values of the wrong type as the Java aggregate takes them: ``[[column, reason, preview], ...]``."""
        if not invalid:
            return None
        columns = self.columns_of[model]
        return json.dumps([[columns[name], why.reason, why.value] for name, why in invalid.items() if name in columns],
                          separators=(",", ":"), ensure_ascii=False)

    def row_values(self, model: str, values: tuple[tuple, tuple] | None) -> list:
        """One record's values in column order (c0, c1, ...): its model's monitored values as
        :func:`pipeline.columns.configured_values` splits them (None: not monitored), None elsewhere."""
        row: list = [None] * len(self.kinds)
        if values is None:
            return row
        for i, value in zip(self.order_of[model], values[0] + values[1]):
            row[i] = float(value) if value is not None and self.kinds[i] == NUMERIC else value
        return row
