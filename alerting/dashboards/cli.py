"""``driftwarden dashboards``: write the dashboard JSON and provisioning files, or push to Grafana."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from driftwarden.alerting.dashboards.provisioning import DEFAULT_DIR, write_importable, write_provisioning
from driftwarden.alerting.dashboards.push import grafana_settings, push_dashboards
from driftwarden.core.console import command_app

app = command_app("Grafana dashboards as code: build provisioning files, export them for Grafana's import, or push "
                  "them to a Grafana server.", no_args_is_help=True)
_console = Console()


@app.command()
def build(
    out: Path = typer.Option(DEFAULT_DIR, "--out", help="Provisioning folder to write.", show_default=True),
) -> None:
    """Write datasources, the dashboard provider and the dashboard JSON files (Grafana's file provisioning)."""
    for path in write_provisioning(out):
        _console.print(str(path), markup=False)


@app.command()
def export(
    out: Path = typer.Option(Path("dashboards"), "--out", help="Folder to write the dashboards' JSON to.",
                             show_default=True),
) -> None:
    """Write the dashboards for Grafana's "Import dashboard": it asks which datasource each of them reads."""
    for path in write_importable(out):
        _console.print(str(path), markup=False)


@app.command()
def push(
    folder_uid: Optional[str] = typer.Option(None, "--folder-uid", help="Grafana folder uid to put them in.",
                                             show_default="none: General"),
    timeout: float = typer.Option(10.0, help="HTTP timeout in seconds.", show_default=True),
    postgres_uid: Optional[str] = typer.Option(None, help="Uid of the Grafana datasource of the results store.",
                                               show_default="the only PostgreSQL datasource there"),
    prometheus_uid: Optional[str] = typer.Option(None, help="Uid of the Grafana datasource of Prometheus.",
                                                 show_default="the only Prometheus datasource there"),
) -> None:
    """Create or overwrite the dashboards on $GRAFANA_URL using $GRAFANA_TOKEN, through Grafana's import."""
    url, token = grafana_settings()
    chosen = {name: uid for name, uid in (("DS_DRIFTWARDEN_POSTGRES", postgres_uid),
                                          ("DS_DRIFTWARDEN_PROMETHEUS", prometheus_uid)) if uid}
    for uid in push_dashboards(url, token, folder_uid, timeout, chosen):
        _console.print(f"pushed {uid} to {url}", markup=False)
