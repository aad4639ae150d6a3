"""``driftwarden dashboards``: write the dashboard JSON and provisioning files, or push to Grafana."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from driftwarden.alerting.dashboards.provisioning import DEFAULT_DIR, write_provisioning
from driftwarden.alerting.dashboards.push import grafana_settings, push_dashboards
from driftwarden.core.console import command_app

app = command_app("Grafana dashboards as code: build provisioning files or push to a Grafana server.",
                  no_args_is_help=True)
_console = Console()


@app.command()
def build(
    out: Path = typer.Option(DEFAULT_DIR, "--out", help="Provisioning folder to write.", show_default=True),
) -> None:
    """Write datasources, the dashboard provider and the dashboard JSON files."""
    for path in write_provisioning(out):
        _console.print(str(path), markup=False)


@app.command()
def push(
    folder_uid: Optional[str] = typer.Option(None, "--folder-uid", help="Grafana folder uid to put them in.",
                                             show_default="none: General"),
    timeout: float = typer.Option(10.0, help="HTTP timeout in seconds.", show_default=True),
) -> None:
    """Create or overwrite the dashboards on $GRAFANA_URL using $GRAFANA_TOKEN."""
    url, token = grafana_settings()
    for uid in push_dashboards(url, token, folder_uid, timeout):
        _console.print(f"pushed {uid} to {url}", markup=False)
