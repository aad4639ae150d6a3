"""Console output that never cuts what it shows: tables, and the command line's ``--help``.

Rich fits a table to the console's width by cutting cells with "…", and renders at 80 columns
whenever the output is not a terminal (piped to a file, a CI log). A cut model, feature or segment
name, a cut timestamp or a cut alert fingerprint is information lost: the fingerprint is what
``driftwarden alerts ack`` needs next. :func:`data_table` folds a long cell onto more lines instead.

:func:`command_app` makes the typer apps of the ``driftwarden`` command with click's plain-text
``--help``: typer's rich help reads each help text as console markup (a ``[default: ...]`` written in
one vanished) and at 80 columns cut option names and defaults with "…" (``--checkpoint-in…``).
"""

from __future__ import annotations

from typing import Any, Sequence

import typer
from rich.table import Column, Table
from typer.core import TyperGroup

__all__ = ["CommandGroup", "command_app", "data_table"]


def data_table(*headers: str, title: str | None = None, whole: Sequence[str] = ()) -> Table:
    """A rich Table with these column headers whose cells fold onto more lines rather than being cut.

    ``whole``: headers of columns kept on one line (ids a user copies into the next command), which
    the other columns make room for.

    >>> from io import StringIO
    >>> from rich.console import Console
    >>> table = data_table("id", "feature", whole=("id",))
    >>> table.add_row("3f9a2c1b7e8d4f60", "a_rather_long_feature_name")
    >>> out = StringIO(); Console(file=out, width=30).print(table)
    >>> "3f9a2c1b7e8d4f60" in out.getvalue(), "…" in out.getvalue()
    (True, False)
    """
    unknown = set(whole) - set(headers)
    if unknown:
        raise ValueError(f"data_table: whole names columns it does not have: {sorted(unknown)}")
    return Table(*(Column(header, overflow="fold", no_wrap=header in whole) for header in headers), title=title)


class CommandGroup(TyperGroup):
    """A command group whose ``--help`` lists each command with the whole first paragraph of its help,
    wrapped (click's own list cuts it to one line with "...")."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Write the "Commands" section: each visible command's name and summary."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.short_help or " ".join((command.help or "").split("\n\n")[0].split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def command_app(help: str, **settings: Any) -> typer.Typer:  # noqa: A002 - typer's own name for it
    """A typer app (a command or a group of them) with plain-text ``--help`` that cuts nothing.

    >>> from typer.testing import CliRunner
    >>> app = command_app("Tools.")
    >>> @app.command()
    ... def hello(name: str = typer.Option("world", help="Whom to greet [default: the world].")) -> None:
    ...     \"\"\"Say hello to someone, loudly enough to be heard across a long room full of people.\"\"\"
    >>> @app.command()
    ... def bye() -> None:
    ...     \"\"\"Say goodbye.\"\"\"
    >>> out = " ".join(CliRunner().invoke(app, ["--help"], env={"COLUMNS": "60"}).output.split())
    >>> "hello Say hello to someone, loudly enough to be heard across a long room full of people." in out
    True
    >>> "..." in out.replace("[ARGS]...", "")
    False
    >>> "[default: the world]" in CliRunner().invoke(app, ["hello", "--help"]).output
    True
    """
    return typer.Typer(help=help, cls=CommandGroup, rich_markup_mode=None, **settings)
