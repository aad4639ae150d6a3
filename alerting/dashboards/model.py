"""Small typed builders for Grafana dashboard JSON (schema version 39).

grafana-foundation-sdk has no PostgreSQL/SQL query builder, so dashboards are built from these
frozen records instead: a :class:`Dashboard` of :class:`Panel` s, each holding :class:`SqlQuery`
or :class:`PromQuery` targets, and template :class:`Variable` s; ``to_json`` gives what Grafana
imports. Every query stays reachable (:meth:`Dashboard.queries`) so tests can run it for real.

Datasources are template inputs, as Grafana's "export for sharing externally" writes them: each panel,
target and variable names its datasource ``${DS_DRIFTWARDEN_POSTGRES}`` or ``${DS_DRIFTWARDEN_PROMETHEUS}``,
and the dashboard lists them under ``__inputs``. Grafana's import (its UI, or ``/api/dashboards/import``
as ``driftwarden dashboards push`` calls it) asks which datasource each input is; file provisioning does
not, so ``dashboards build`` writes them resolved (:func:`resolve_inputs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Union

#: The dashboards' datasource inputs: name -> (plugin id, label shown on import).
INPUTS: dict[str, tuple[str, str]] = {
    "DS_DRIFTWARDEN_POSTGRES": ("grafana-postgresql-datasource", "driftwarden results store (PostgreSQL)"),
    "DS_DRIFTWARDEN_PROMETHEUS": ("prometheus", "Prometheus scraping driftwarden and Flink"),
}
POSTGRES = {"type": "grafana-postgresql-datasource", "uid": "${DS_DRIFTWARDEN_POSTGRES}"}
PROMETHEUS = {"type": "prometheus", "uid": "${DS_DRIFTWARDEN_PROMETHEUS}"}
MIXED = {"type": "datasource", "uid": "-- Mixed --"}
#: Grafana version the dashboards are written for (schema version 39), stated in ``__requires``.
GRAFANA_VERSION = "11.3.0"
PanelType = Literal["timeseries", "heatmap", "barchart", "table", "stat", "state-timeline"]


@dataclass(frozen=True)
class SqlQuery:
    """A raw SQL target on the PostgreSQL datasource (``time_series`` or ``table`` format)."""

    sql: str
    format: Literal["time_series", "table"] = "time_series"

    def to_json(self, ref: str) -> dict[str, Any]:
        """Return the Grafana target object."""
        return {"refId": ref, "datasource": POSTGRES, "editorMode": "code", "rawQuery": True,
                "rawSql": self.sql, "format": self.format}


@dataclass(frozen=True)
class PromQuery:
    """A PromQL target on the Prometheus datasource."""

    expr: str
    legend: str = "__auto"

    def to_json(self, ref: str) -> dict[str, Any]:
        """Return the Grafana target object."""
        return {"refId": ref, "datasource": PROMETHEUS, "editorMode": "code", "expr": self.expr,
                "legendFormat": self.legend, "range": True}


Query = Union[SqlQuery, PromQuery]


@dataclass(frozen=True)
class Panel:
    """One panel: a type, a title, its targets, a unit, and its place on the 24-column grid."""

    title: str
    type: PanelType
    targets: tuple[Query, ...]
    width: int = 12
    height: int = 8
    unit: str = "short"
    description: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    mappings: tuple[dict[str, Any], ...] = ()  # Grafana value mappings (value -> text and colour)

    def to_json(self, panel_id: int, x: int, y: int) -> dict[str, Any]:
        """Return the Grafana panel object at grid position (x, y)."""
        kinds = {type(t) for t in self.targets}
        datasource = MIXED if len(kinds) > 1 else (PROMETHEUS if kinds == {PromQuery} else POSTGRES)
        return {
            "id": panel_id, "type": self.type, "title": self.title, "description": self.description,
            "datasource": datasource,
            "gridPos": {"x": x, "y": y, "w": self.width, "h": self.height},
            "fieldConfig": {"defaults": {"unit": self.unit, **({"mappings": list(self.mappings)} if self.mappings else {})},
                            "overrides": []},
            "options": dict(self.options),
            "targets": [t.to_json(chr(ord("A") + i)) for i, t in enumerate(self.targets)],
        }


@dataclass(frozen=True)
class Variable:
    """A query template variable filled from a SQL query: one value, or several with an "All" choice.

    A multi-value variable goes into SQL as ``column IN ($name)``: Grafana sends the chosen values
    quoted and comma-separated (``macros.sql_values``), and "All" as ``all_value`` unquoted.
    """

    name: str
    label: str
    sql: str
    multi: bool = False
    all_value: str | None = None  # set: the variable offers "All", sent as this text

    def to_json(self) -> dict[str, Any]:
        """Return the Grafana templating entry."""
        doc = {"name": self.name, "label": self.label, "type": "query", "datasource": POSTGRES,
               "query": self.sql, "definition": self.sql, "refresh": 2, "multi": self.multi,
               "includeAll": self.all_value is not None, "sort": 1}
        if self.all_value is not None:
            doc["allValue"] = self.all_value
            doc["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
        return doc


@dataclass(frozen=True)
class Dashboard:
    """A dashboard: uid, title, variables and panels laid out left to right, top to bottom."""

    uid: str
    title: str
    panels: tuple[Panel, ...]
    variables: tuple[Variable, ...] = ()
    tags: tuple[str, ...] = ("driftwarden",)
    time_from: str = "now-6h"
    refresh: str = "30s"

    def queries(self) -> Iterator[tuple[str, Query]]:
        """Yield (panel title, query) for every target of every panel."""
        for panel in self.panels:
            for target in panel.targets:
                yield panel.title, target

    def to_json(self) -> dict[str, Any]:
        """Return the dashboard model Grafana imports, its datasources as inputs (``__inputs``)."""
        used = self.datasource_inputs()
        return {
            "__inputs": [{"name": name, "label": INPUTS[name][1], "description": "", "type": "datasource",
                          "pluginId": INPUTS[name][0], "pluginName": INPUTS[name][0]} for name in used],
            "__requires": [{"type": "grafana", "id": "grafana", "name": "Grafana", "version": GRAFANA_VERSION},
                           *({"type": "datasource", "id": INPUTS[name][0], "name": INPUTS[name][0], "version": ""}
                             for name in used)],
            "uid": self.uid, "title": self.title, "tags": list(self.tags), "timezone": "utc",
            "schemaVersion": 39, "version": 1, "editable": True, "refresh": self.refresh,
            "time": {"from": self.time_from, "to": "now"},
            "templating": {"list": [v.to_json() for v in self.variables]},
            "annotations": {"list": []}, "panels": list(self._layout()),
        }

    def datasource_inputs(self) -> list[str]:
        """The names of the datasource inputs the panels and variables use, in :data:`INPUTS` order."""
        kinds = {type(q) for _, q in self.queries()} | ({SqlQuery} if self.variables else set())
        return [name for name, kind in (("DS_DRIFTWARDEN_POSTGRES", SqlQuery), ("DS_DRIFTWARDEN_PROMETHEUS", PromQuery))
                if kind in kinds]

    def _layout(self) -> Iterator[dict[str, Any]]:
        """Place panels row by row on Grafana's 24-column grid."""
        x = y = row_height = 0
        for panel_id, panel in enumerate(self.panels, start=1):
            if x + panel.width > 24:
                x, y, row_height = 0, y + row_height, 0
            yield panel.to_json(panel_id, x, y)
            x, row_height = x + panel.width, max(row_height, panel.height)


def resolve_inputs(doc: Any, values: dict[str, str]) -> Any:
    """``doc`` with every text ``${NAME}`` of an input in ``values`` replaced by its value (a datasource uid), and
    without ``__inputs``: what Grafana's import does, for the file provisioning that does not.

    >>> resolve_inputs({"__inputs": [], "panels": [{"datasource": {"uid": "${DS_A}"}}]}, {"DS_A": "pg"})
    {'panels': [{'datasource': {'uid': 'pg'}}]}
    """
    if isinstance(doc, dict):
        return {k: resolve_inputs(v, values) for k, v in doc.items() if k != "__inputs"}
    if isinstance(doc, list):
        return [resolve_inputs(v, values) for v in doc]
    if isinstance(doc, str) and doc.startswith("${") and doc.endswith("}") and doc[2:-1] in values:
        return values[doc[2:-1]]
    return doc
