"""Push the dashboards to a Grafana server through grafana-client (URL and token from the environment)."""

from __future__ import annotations

import os
from typing import Mapping

from driftwarden.alerting.dashboards.definitions import all_dashboards
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


def push_dashboards(url: str, token: str, folder_uid: str | None = None, timeout: float = 10.0) -> list[str]:
    """Create or overwrite every driftwarden dashboard on the Grafana at ``url``; return their uids."""
    from grafana_client import GrafanaApi
    from grafana_client.client import GrafanaException

    api = GrafanaApi.from_url(url, credential=token, timeout=timeout)
    pushed = []
    for dashboard in all_dashboards():
        payload = {"dashboard": dashboard.to_json(), "overwrite": True, "message": "driftwarden dashboards push"}
        if folder_uid:
            payload["folderUid"] = folder_uid
        try:
            api.dashboard.update_dashboard(payload)
        except (GrafanaException, OSError) as exc:
            raise ServiceError(f"Grafana at {url} refused dashboard {dashboard.uid}: {type(exc).__name__}: "
                               f"{getattr(exc, 'message', exc)}") from exc
        pushed.append(dashboard.uid)
    return pushed
