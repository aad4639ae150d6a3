"""``--help`` of every driftwarden command at 80 columns (any output that is not a terminal): nothing
cut, every option's name whole, help texts shown as written (core.console.command_app)."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from driftwarden.cli import app


def _commands(group, path=()):
    """Every command path under ``group`` (groups included), the root first."""
    yield path, group
    for name in getattr(group, "commands", {}):
        yield from _commands(group.commands[name], (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_and_group_has_help():
    assert len(COMMANDS) >= 20 and ("alerts", "ack") in [path for path, _ in COMMANDS]


@pytest.mark.parametrize("path", [path for path, _ in COMMANDS], ids=lambda path: " ".join(path) or "driftwarden")
def test_help_at_80_columns_cuts_nothing(path):
    command = dict(COMMANDS)[path]
    text = _help(path)
    body = "\n".join(line for line in text.splitlines() if not line.startswith("Usage:"))
    assert "…" not in body and "..." not in body, body
    assert max(len(line) for line in text.splitlines()) <= 80
    flat = " ".join(text.split())
    for param in command.params:
        for name in (*param.opts, *param.secondary_opts):
            if name.startswith("--"):
                assert re.search(rf"(^|[\s,/]){re.escape(name)}([\s,=]|$)", flat), (path, name)
    for name, sub in getattr(command, "commands", {}).items():
        summary = " ".join((sub.help or "").split("\n\n")[0].split())
        assert f"{name} {summary}" in flat, (path, name)


def test_help_texts_are_not_read_as_markup():
    """A help text that says its default in brackets shows it (typer's rich help dropped it as a style tag)."""
    flat = " ".join(_help(("run",)).split())
    assert "--store-url <str> Results store URL [default: the config's store_url, else $DRIFTWARDEN_STORE_URL," in flat
    assert "[default: the config's store_url, else $DRIFTWARDEN_STORE_URL," in " ".join(_help(("status",)).split())
