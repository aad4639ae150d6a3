"""The typed feature columns that Java reads for the job (``DW_FEATURES``), and taking them back.

The job's Kafka source already parses every record's envelope in Java (``jobs/java``). For the
stream's common, flat shape it also reads the configured features there, so the record reaches
the Python window aggregate as typed columns (a DOUBLE per numeric feature, a STRING per
categorical one) with a flag ``ok``, instead of as JSON bytes to parse again. Java sets ``ok`` only
where the Python validation (:func:`schemas.events.validate_event`) would accept the event and take
exactly these values from it; every other record keeps its bytes and Python validates it, so
valid, rejected and their reasons are decided as before (and as in replay).

The spec is JSON, passed to ``DW_FEATURES`` as a string literal::

    {"columns": ["numeric", "categorical"], "models": {"m": {"x": 0, "c": 1}}}

Column ``ci`` of the result holds the features of kind ``columns[i]``; a feature name of that kind
shares its column across models.

>>> from schemas.config import MonitorConfig
>>> cfg = MonitorConfig.model_validate({"models": [{"name": "m", "features": {"x": "numeric", "c": "categorical"}},
...                                               {"name": "n", "features": {"x": "numeric"}}]})
>>> spec = FeatureColumnSpec.from_config(cfg)
>>> (spec.kinds, spec.columns_of["n"], spec.names)
(('numeric', 'categorical'), {'x': 0}, ['c0', 'c1'])
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping, Sequence

from schemas.config import MonitorConfig
from schemas.events import NUMERIC
from sketches.categorical import DEFAULT_MAX_EXACT as MAX_EXACT
from sketches.histogram import DEFAULT_PRECISION as HISTOGRAM_PRECISION


@dataclass(frozen=True)
class FeatureColumnSpec:
    """Which column of ``DW_FEATURES``'s row holds which model's feature."""

    kinds: tuple[str, ...]  # the kind of column c0, c1, ...
    columns_of: Mapping[str, Mapping[str, int]]  # model -> feature -> column

    @classmethod
    def from_config(cls, config: MonitorConfig) -> "FeatureColumnSpec":
        """One column per (feature name, kind) over all configured models."""
        column_of: dict[tuple[str, str], int] = {}
        for model in config.models:
            for name, kind in model.features.items():
                column_of.setdefault((name, kind), len(column_of))
        columns_of = {m.name: {name: column_of[name, kind] for name, kind in m.features.items()}
                      for m in config.models}
        return cls(tuple(kind for _, kind in column_of), columns_of)

    @property
    def names(self) -> list[str]:
        """The row's column names after ``ok``: c0, c1, ..."""
        return [f"c{i}" for i in range(len(self.kinds))]

    def to_json(self) -> str:
        """The spec as ``DW_FEATURES`` reads it."""
        return json.dumps({"columns": list(self.kinds), "models": self.columns_of}, separators=(",", ":"))

    def aggregate_spec(self, config: MonitorConfig) -> str:
        """The spec of the Java window aggregate (``WindowSummaryAgg``): window, columns, per-model sketches."""
        models = {m.name: {"features": [[name, self.columns_of[m.name][name]] for name in m.features],
                           "sample_size": m.sample_size, "precision": HISTOGRAM_PRECISION,
                           "max_buckets": m.sketch_buckets, "max_exact": MAX_EXACT} for m in config.models}
        return json.dumps({"window_ms": config.window.size_ms, "columns": list(self.kinds), "models": models},
                          separators=(",", ":"))

    def row_values(self, model: str, by_name: Mapping[str, object]) -> list:
        """One record's values in column order (c0, c1, ...): its model's features, None elsewhere."""
        row: list = [None] * len(self.kinds)
        for name, i in self.columns_of.get(model, {}).items():
            value = by_name.get(name)
            row[i] = float(value) if value is not None and self.kinds[i] == NUMERIC else value
        return row
