"""Grafana's query interpolation, reproduced so that every panel query can be run for real in tests.

Covers what the driftwarden dashboards use: template variables (``$model``, ``${model}``; a
multi-value one as :func:`sql_values` formats it) and,
for PostgreSQL, ``$__timeFilter``, ``$__timeFrom``/``$__timeTo``, ``$__time`` and
``$__timeGroupAlias`` as Grafana's PostgreSQL datasource expands them; for Prometheus,
``$__rate_interval``, ``$__interval`` and ``$__range``.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Mapping

_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def expand_sql(sql: str, variables: Mapping[str, str], time_from: datetime, time_to: datetime) -> str:
    """Return ``sql`` as Grafana's PostgreSQL datasource would send it."""
    start, end = _iso(time_from), _iso(time_to)
    sql = re.sub(r"\$__timeFilter\(\s*([^)]+?)\s*\)", lambda m: f"{m.group(1)} BETWEEN '{start}' AND '{end}'", sql)
    sql = re.sub(r"\$__timeGroupAlias\(\s*([^,]+?)\s*,\s*'?(\d+)([smhd])'?\s*\)",
                 lambda m: _group(m.group(1), int(m.group(2)) * _UNIT_S[m.group(3)]), sql)
    sql = re.sub(r"\$__time\(\s*([^)]+?)\s*\)", lambda m: f'{m.group(1)} AS "time"', sql)
    sql = sql.replace("$__timeFrom()", f"'{start}'").replace("$__timeTo()", f"'{end}'")
    return substitute(sql, variables)


def expand_promql(expr: str, variables: Mapping[str, str], rate_interval: str = "1m") -> str:
    """Return ``expr`` as Grafana's Prometheus datasource would send it."""
    for name in ("$__rate_interval", "$__interval", "$__range"):
        expr = expr.replace(name, rate_interval)
    return substitute(expr, variables)


def substitute(text: str, variables: Mapping[str, str]) -> str:
    """Replace ``$name`` and ``${name}`` with the variable's single value; unknown names stay."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), text)


def sql_values(values: list[str]) -> str:
    """Return a multi-value variable's values as Grafana's SQL datasources send them: quoted, comma-separated."""
    return ",".join("'" + v.replace("'", "''") + "'" for v in values)


def leftover_macros(text: str) -> list[str]:
    """Return any ``$...`` still present (an unexpanded macro or variable)."""
    return re.findall(r"\$\{?\w+", text)


def _group(column: str, seconds: int) -> str:
    return f'floor(extract(epoch from {column})/{seconds})*{seconds} AS "time"'


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
