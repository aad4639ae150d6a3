"""Names from events are data: markup, math text and HTML in them are printed literally, everywhere.

A model named like console markup, a feature named like HTML and a category value that is
matplotlib math text go through ``driftwarden replay`` (terminal table, JSON and HTML report)
and through the CLI's error line.
"""

from __future__ import annotations

import html
import time

import orjson
import pytest
from typer.testing import CliRunner

from driftwarden.cli import app, main
from driftwarden.core.errors import ConfigError
from driftwarden.replay.synthetic import incident_events

MODEL = "[/x][link=https://evil.example]fraud[/link][bold]"
FEATURE = "<script>alert(1)</script>$x$"
CATEGORY = "$\\bogus$"
T0 = int(time.time() * 1000) // 60_000 * 60_000 - 3 * 3_600_000


def _renamed(events):
    """The synthetic incident with odd names: model, the drifting numeric feature, a category value."""
    for e in events:
        features = e["features"]
        features[FEATURE] = features.pop("x0")
        features["c0"] = CATEGORY if features["c0"] == "e" else features["c0"]
        yield {**e, "model": MODEL}


def _write(path, events):
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """Replay of the renamed incident: (CLI result, JSON report, HTML page)."""
    d = tmp_path_factory.mktemp("names")
    reference = _write(d / "ref.jsonl", _renamed(incident_events(3000, T0 - 3_600_000, 200, None, seed=1)))
    stream = _write(d / "stream.jsonl", _renamed(incident_events(1500, T0, 400, T0 + 5 * 60_000, seed=2)))
    result = CliRunner().invoke(app, ["replay", "--no-progress", "--input", str(stream), "--reference", str(reference),
                                      "--report-json", str(d / "r.json"), "--report-html", str(d / "r.html")],
                                env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result, orjson.loads((d / "r.json").read_bytes()), (d / "r.html").read_text(encoding="utf-8")


def test_the_summary_table_prints_names_literally(replayed):
    result, doc, _ = replayed
    drifted = {(e["model"], e["feature"]) for e in doc["first_drift"]}
    assert (MODEL, FEATURE) in drifted and (MODEL, "c0") in drifted
    assert MODEL in result.output and FEATURE in result.output
    assert "\x1b]8;" not in result.output  # no terminal hyperlink was injected


def test_the_html_report_escapes_names_and_plots_math_text_categories(replayed):
    _, doc, page = replayed
    assert "<script>" not in page and html.escape(FEATURE) in page and html.escape(MODEL) in page
    assert page.count("data:image/png;base64,") >= 4  # both drifted features got their plots
    assert {w["model"] for w in doc["windows"]} == {MODEL}


def test_an_error_message_with_markup_is_printed_literally(monkeypatch, capsys):
    def fail(*_args, **_kwargs):
        raise ConfigError(f"no model {MODEL}")

    monkeypatch.setattr("driftwarden.cli.app", fail)
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 1
    assert capsys.readouterr().err == f"ConfigError: no model {MODEL}\n"
