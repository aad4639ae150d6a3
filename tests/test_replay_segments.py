"""The replay report's per-segment section: JSON (schema version 3) and HTML, names escaped."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from driftwarden.core.errors import ReplayError
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.replay.engine import ReplayOutcome, WindowResult
from driftwarden.replay.report import SCHEMA_VERSION, build_report, validate_report
from driftwarden.replay.report_html import render_html

T0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)
HOSTILE = "<script>alert(1)</script>"
SETUP = SimpleNamespace(config=SimpleNamespace(window=SimpleNamespace(size_ms=60_000, out_of_orderness_ms=0),
                                               thresholds=SimpleNamespace(bins=10)),
                        reference_label="file ref.jsonl", models=None, features=None)


def outcome() -> ReplayOutcome:
    plain = WindowResult(WindowReport("fraud", T0, T0 + MINUTE, [FeatureOutcome("amount", count=3000)]), 3000, 0, 0)
    segmented = WindowResult(WindowReport("fraud", T0 + MINUTE, T0 + 2 * MINUTE, [
        FeatureOutcome("amount", count=3000, gate_ks=0.01, gate_psi=0.002),
        FeatureOutcome("amount", count=300, gate_ks=0.2, gate_psi=0.3, alarm=True, ks_stat=0.21, ks_pvalue=1e-9,
                       p_adjusted=4.5e-8, drifted=True, severity="moderate", segment={"country": "FR"}),
        FeatureOutcome("amount", count=1800, missing=3, gate_ks=0.01, gate_psi=0.001, p_adjusted=None,
                       segment={"country": HOSTILE}),
        FeatureOutcome("amount", count=120, segment={"country": "(other)"}),
    ]), 3000, 0, 0)
    return ReplayOutcome(windows=[plain, segmented], counts=Counter(read=6000, valid=6000))


@pytest.fixture()
def doc() -> dict:
    return build_report(outcome(), SETUP, {"input": "events.jsonl"})


def test_segment_outcomes_are_listed_apart_per_window(doc: dict) -> None:
    validate_report(doc)
    plain, segmented = doc["windows"]
    assert doc["schema_version"] == SCHEMA_VERSION == 4
    assert "segments" not in plain and [f["name"] for f in segmented["features"]] == ["amount"]
    rows = {s["segment"]["country"]: s for s in segmented["segments"]}
    assert set(rows) == {"FR", HOSTILE, "(other)"}
    fr = rows["FR"]
    assert (fr["name"], fr["count"], fr["drifted"], fr["severity"], fr["p_adjusted"]) == (
        "amount", 300, True, "moderate", 4.5e-8)
    assert fr["deep"]["p_adjusted"] == 4.5e-8 and rows[HOSTILE]["missing"] == 3
    assert rows["(other)"]["p_adjusted"] is None
    assert doc["alerts"] == [{"model": "fraud", "window_start": segmented["window_start"],
                              "window_end": segmented["window_end"], "severity": "moderate", "features": ["amount"],
                              "segments": [{"feature": "amount", "segment": {"country": "FR"},
                                            "severity": "moderate"}]}]
    assert doc["first_drift"] == [{"model": "fraud", "feature": "amount", "window_start": segmented["window_start"],
                                   "severity": "moderate", "drifted_windows": 1, "segment": {"country": "FR"}}]


def test_the_schema_holds_segment_entries_to_their_shape(doc: dict) -> None:
    del doc["windows"][1]["segments"][0]["segment"]
    with pytest.raises(ReplayError, match="segments/0"):
        validate_report(doc)


def test_the_html_page_has_the_segment_table_with_names_escaped(doc: dict) -> None:
    page = render_html(doc, outcome())
    table = page[page.index("<h2>Segments</h2>"):]
    table = table[:table.index("</table>")]
    assert HOSTILE not in page and "country=&lt;script&gt;alert(1)&lt;/script&gt;" in table
    assert "<td>country=FR</td><td>300</td><td>0</td><td>drifted</td><td class='moderate'>moderate</td>" \
           "<td>4.5e-08</td>" in table
    assert "<td>country=(other)</td><td>120</td><td>0</td><td>not judged</td>" in table
    assert table.count("<tr>") == 4  # the header and three segments of the one window that has them
    assert "<h2>Segments</h2>" not in render_html({**doc, "windows": doc["windows"][:1]}, outcome())
