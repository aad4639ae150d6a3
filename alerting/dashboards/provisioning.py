"""Grafana provisioning files (datasources, dashboard provider, dashboard JSON) for docker-compose, and the
dashboards as Grafana's import takes them (their datasources as ``__inputs``).

The provisioned PostgreSQL datasource logs in as the read-only role of deploy/postgres/grafana-readonly.sql
(``driftwarden_grafana``), its password from ``$DRIFTWARDEN_GRAFANA_PG_PASSWORD`` in Grafana's environment.
File provisioning does not resolve ``${DS_...}`` inputs, so the provisioned dashboards name the provisioned
datasources' uids (:data:`PROVISIONED_UIDS`).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from driftwarden.alerting.dashboards.definitions import all_dashboards
from driftwarden.alerting.dashboards.model import POSTGRES, PROMETHEUS, resolve_inputs

DEFAULT_DIR = Path("deploy/grafana/provisioning")
GRAFANA_PROVISIONING = "/etc/grafana/provisioning"
#: The uids of the provisioned datasources, by the dashboards' input each one fills.
PROVISIONED_UIDS = {"DS_DRIFTWARDEN_POSTGRES": "driftwarden-postgres", "DS_DRIFTWARDEN_PROMETHEUS": "driftwarden-prometheus"}
#: The read-only role Grafana logs in as (deploy/postgres/grafana-readonly.sql).
GRAFANA_ROLE = "driftwarden_grafana"


def datasources(pg_host: str = "postgres:5432", prometheus_url: str = "http://prometheus:9090") -> dict:
    """Return the datasources provisioning document: PostgreSQL as the read-only role (password from
    $DRIFTWARDEN_GRAFANA_PG_PASSWORD in Grafana's environment), and Prometheus."""
    return {"apiVersion": 1, "datasources": [
        {"name": "driftwarden-postgres", "uid": PROVISIONED_UIDS["DS_DRIFTWARDEN_POSTGRES"], "type": POSTGRES["type"],
         "access": "proxy", "url": pg_host, "user": GRAFANA_ROLE,
         "jsonData": {"database": "driftwarden", "sslmode": "disable", "postgresVersion": 1500, "timescaledb": False},
         "secureJsonData": {"password": "${DRIFTWARDEN_GRAFANA_PG_PASSWORD}"}, "editable": False},
        {"name": "driftwarden-prometheus", "uid": PROVISIONED_UIDS["DS_DRIFTWARDEN_PROMETHEUS"], "type": PROMETHEUS["type"],
         "access": "proxy",
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
        doc = resolve_inputs(dashboard.to_json(), PROVISIONED_UIDS)
        files[root / "dashboards" / "json" / f"{dashboard.uid}.json"] = json.dumps(doc, indent=2) + "\n"
    return _write(files)


def write_importable(folder: Path) -> list[Path]:
    """Write every dashboard as Grafana's import takes it (``__inputs``, ``${DS_...}``) into ``folder``."""
    return _write({folder / f"{d.uid}.json": json.dumps(d.to_json(), indent=2) + "\n" for d in all_dashboards()})


def _write(files: dict[Path, str]) -> list[Path]:
    """Write each text to its path (folders made); return the paths, sorted."""
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return sorted(files)
