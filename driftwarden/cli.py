"""The ``driftwarden`` console command: one typer app, one sub-app per concern.

Each concern owns its commands in its own folder (``jobs/cli.py``, ``replay/cli.py`` ...);
this module only assembles them and turns :class:`DriftwardenError` into a red line and exit 1.
Names in messages and tables come from events and configs: they are printed literally
(``rich.markup.escape`` or ``rich.text.Text``), never read as console markup.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape

from driftwarden.core.console import command_app
from driftwarden.core.errors import EXIT_ERROR, DriftwardenError

app = command_app(
    "Streaming drift monitoring for ML model features on Apache Flink.",
    name="driftwarden",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _register() -> None:
    """Attach each concern's commands to the root app."""
    # Each line below belongs to the folder it names; keep imports of heavy libraries
    # (pyflink, torch) inside the command functions so that --help stays fast.
    from driftwarden.jobs.cli import reference_app, run_command; app.command("run")(run_command)  # noqa: E702
    from driftwarden.jobs.cli import status_command; app.command("status")(status_command)  # noqa: E702
    app.add_typer(reference_app, name="reference")
    from driftwarden.alerting.cli import app as alerts_app; app.add_typer(alerts_app, name="alerts")  # noqa: E702
    from driftwarden.alerting.dashboards.cli import app as dashboards_app; app.add_typer(dashboards_app, name="dashboards")  # noqa: E702,E501
    from driftwarden.latency.cli import bench_command; app.command("bench")(bench_command)  # noqa: E702
    from driftwarden.replay.cli import replay_command; app.command("replay")(replay_command)  # noqa: E702
    from driftwarden.demo.cli import app as demo_app; app.add_typer(demo_app, name="demo")  # noqa: E702
    from driftwarden.store_cli import store_app; app.add_typer(store_app, name="store")  # noqa: E702


_register()


def main() -> None:
    """Entry point: run the CLI, printing driftwarden errors without a traceback."""
    try:
        app()
    except DriftwardenError as exc:
        Console(stderr=True).print(f"[bold red]{type(exc).__name__}[/]: {escape(str(exc))}", highlight=False,
                                   soft_wrap=True)
        sys.exit(EXIT_ERROR)


if __name__ == "__main__":
    main()
