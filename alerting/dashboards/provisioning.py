"""Grafana provisioning files (datasources, dashboard provider, dashboard JSON) for docker-compose."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from driftwarden.alerting.dashboards.definitions import all_dashboards
from driftwarden.alerting.dashboards.model import POSTGRES, PROMETHEUS

DEFAULT_DIR = Path("deploy/grafana/provisioning")
GRAFANA_PROVISIONING = "/etc/grafana/provisioning"


def datasources(pg_host: str = "postgres:5432", prometheus_url: str = "http://prometheus:9090") -> dict:
    """Return the datasources provisioning document (password from $DRIFTWARDEN_PG_PASSWORD in Grafana's env)."""
    return {"apiVersion": 1, "datasources": [
        {"name": "driftwarden-postgres", "uid": POSTGRES["uid"], "type": POSTGRES["type"], "access": "proxy",
         "url": pg_host, "user": "driftwarden",
         "jsonData": {"database": "driftwarden", "sslmode": "disable", "postgresVersion": 1500, "timescaledb": False},
         "secureJsonData": {"password": "${DRIFTWARDEN_PG_PASSWORD}"}, "editable": False},
        {"name": "driftwarden-prometheus", "uid": PROMETHEUS["uid"], "type": PROMETHEUS["type"], "access": "proxy",
         "url": prometheus_url, "isDefault": True, "jsonData": {"timeInterval": "15s"}, "editable": False},
    ]}


def dashboard_provider() -> dict:
    """Return the dashboards provisioning document pointing Grafana at the JSON files."""
    return {"apiVersion": 1, "providers": [
        {"name": "driftwarden", "folder": "driftwarden", "type": "file", "disableDeletion": False,
         "allowUiUpdates": False, "options": {"path": f"{GRAFANA_PROVISIONING}/dashboards/json"}}]}


def write_provisioning(root: Path = DEFAULT_DIR) -> list[Path]:
    """Write datasources, the dashboard provider and every dashboard's JSON under ``root``; return the paths."""
    files = {
        root / "datasources" / "driftwarden.yaml": yaml.safe_dump(datasources(), sort_keys=False),
        root / "dashboards" / "driftwarden.yaml": yaml.safe_dump(dashboard_provider(), sort_keys=False),
    }
    for dashboard in all_dashboards():
        files[root / "dashboards" / "json" / f"{dashboard.uid}.json"] = json.dumps(dashboard.to_json(), indent=2) + "\n"
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return sorted(files)
