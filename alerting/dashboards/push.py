"""Push the dashboards to a Grafana server through grafana-client (URL and token from the environment).

The dashboards go through Grafana's import (``/api/dashboards/import``), as a manual import does: each of
their datasource inputs (``__inputs``) is filled with a datasource of that Grafana, the one named on the
command line, else the only one of its type there (an error lists them when there are several).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from driftwarden.alerting.dashboards.definitions import all_dashboards
from driftwarden.alerting.dashboards.model import INPUTS
from driftwarden.core.errors import ConfigError, ServiceError

URL_ENV = "GRAFANA_URL"
TOKEN_ENV = "GRAFANA_TOKEN"


def grafana_settings(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Return (url, token) from $GRAFANA_URL and $GRAFANA_TOKEN; ConfigError naming what is missing."""
    env = os.environ if environ is None else environ
    missing = [name for name in (URL_ENV, TOKEN_ENV) if not env.get(name)]
    if missing:
        raise ConfigError(f"set {' and '.join(missing)} to push dashboards (a service-account token with "
                          "dashboard write access)")
    return env[URL_ENV], env[TOKEN_ENV]


def push_dashboards(url: str, token: str, folder_uid: str | None = None, timeout: float = 10.0,
                    datasources: Mapping[str, str] | None = None) -> list[str]:
    """Create or overwrite every driftwarden dashboard on the Grafana at ``url``; return their uids.

    ``datasources``: input name (``DS_DRIFTWARDEN_POSTGRES``, ``DS_DRIFTWARDEN_PROMETHEUS``) -> the uid of the
    Grafana datasource to use; an input not given takes the only datasource of its type on that Grafana.
    """
    from grafana_client import GrafanaApi
    from grafana_client.client import GrafanaException

    api = GrafanaApi.from_url(url, credential=token, timeout=timeout)
    try:
        chosen = _fill_inputs(api, dict(datasources or {}))
        pushed = []
        for dashboard in all_dashboards():
            doc = dashboard.to_json()
            payload: dict[str, Any] = {
                "dashboard": doc, "overwrite": True, "message": "driftwarden dashboards push",
                "inputs": [{"name": i["name"], "type": "datasource", "pluginId": i["pluginId"], "value": chosen[i["name"]]}
                           for i in doc["__inputs"]]}
            if folder_uid:
                payload["folderUid"] = folder_uid
            try:
                api.client.POST("/dashboards/import", json=payload)
            except GrafanaException as exc:
                raise ServiceError(f"Grafana at {url} refused dashboard {dashboard.uid}: {type(exc).__name__}: "
                                   f"{getattr(exc, 'message', exc)}") from exc
            pushed.append(dashboard.uid)
        return pushed
    except (GrafanaException, OSError) as exc:
        raise ServiceError(f"Grafana at {url}: {type(exc).__name__}: {getattr(exc, 'message', exc)}") from exc


def _fill_inputs(api, given: dict[str, str]) -> dict[str, str]:
    """Every input's datasource uid: the given one, else the only datasource of its plugin type on the server."""
    unknown = sorted(set(given) - set(INPUTS))
    if unknown:
        raise ConfigError(f"unknown dashboard input(s) {', '.join(unknown)}: the inputs are {', '.join(INPUTS)}")
    missing = [name for name in INPUTS if name not in given]
    if not missing:
        return given
    existing = api.datasource.list_datasources()
    for name in missing:
        plugin = INPUTS[name][0]
        candidates = [d for d in existing if d.get("type") == plugin]
        if len(candidates) != 1:
            found = ", ".join(f"{d.get('name')} (uid {d.get('uid')})" for d in candidates) or "none"
            option = "--postgres-uid" if "POSTGRES" in name else "--prometheus-uid"
            raise ConfigError(f"Grafana has {len(candidates)} datasource(s) of type {plugin} ({found}): name the one "
                              f"for the dashboards with {option}")
        given[name] = candidates[0]["uid"]
    return given
