"""The console's tables show every value whole at 80 columns: the width rich renders at in a terminal of
80 columns and whenever the output is piped (a file, a CI log). Before ``core.console.data_table`` the
fingerprint that ``alerts ack`` needs, model, feature and segment names and timestamps were cut to "…"."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from rich.console import Console
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.replay.cli import _summary
from tests.test_alerting_cli import store_with_alert

runner = CliRunner()
NARROW = {"COLUMNS": "80"}
MODEL = "fraud-detector-eu-west-1-candidate"
FEATURE = "transaction_amount_usd_normalised"
SEGMENT = {"country": "DE", "device": "android-tablet"}


def table_cells(output: str) -> list[str]:
    """The cells of a one-row rich table, each with its folded lines joined and its spaces dropped."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┡")) + 1
    body = lines[start:next(i for i in range(start, len(lines)) if lines[i].startswith("└"))]
    columns = [line.strip("│").split("│") for line in body]
    return ["".join(row[c].strip() for row in columns).replace(" ", "") for c in range(len(columns[0]))]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_alerts_list_at_80_columns_shows_the_fingerprint_to_ack_and_every_name_whole(tmp_path, request,
                                                                                    dialect: str) -> None:
    pg = request.getfixturevalue("pg_engine").url.render_as_string(hide_password=False) if dialect == "postgresql" else None
    store, _ = store_with_alert(tmp_path, model=MODEL, feature=FEATURE, segment=SEGMENT, store=pg)
    listed = runner.invoke(app, ["alerts", "list", "--store-url", store], env=NARROW)
    assert listed.exit_code == 0, listed.output
    assert "…" not in listed.output
    fingerprint, model, feature, segment, severity, status, since, _ = table_cells(listed.output)
    assert (model, feature, segment, severity, status) == (MODEL, FEATURE, "country=DE,device=android-tablet",
                                                          "major", "firing")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d\d\d:\d\d:\d\d(\.\d+)?(\+00:00)?", since), since
    assert re.search(rf"\b{fingerprint}\b", listed.output)  # on one line: copied as it is shown
    acked = runner.invoke(app, ["alerts", "ack", fingerprint, "--by", "alice", "--store-url", store])
    assert acked.exit_code == 0, acked.output


def test_the_replay_summary_at_80_columns_names_each_drifted_feature_whole() -> None:
    out = StringIO()
    doc = {"counts": {"read": 10}, "windows": [{"features": []}], "first_drift": [
        {"model": MODEL, "feature": FEATURE, "segment": SEGMENT, "window_start": "2026-12-04T00:42:50Z",
         "severity": "major", "drifted_windows": 42}]}
    _summary(Console(file=out, width=80), doc)
    assert "…" not in out.getvalue()
    assert table_cells(out.getvalue()) == [MODEL, FEATURE, "country=DE,device=android-tablet", "2026-12-04T00:42:50Z",
                                           "major", "42"]
