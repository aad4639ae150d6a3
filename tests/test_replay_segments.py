"""The replay report's per-segment verdicts: JSON (schema version 5: feature entries with their segment) and the
HTML page (ranking, segment x feature heat map, plots, each cell's detail, quiet cells folded), names escaped."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from driftwarden.core.errors import ReplayError
from driftwarden.core.records import FeatureOutcome, WindowReport, report_from_dict
from driftwarden.replay.engine import ReplayOutcome, WindowResult
from driftwarden.replay.html_cells import report_cells
from driftwarden.replay.report import SCHEMA_VERSION, build_report, global_entries, validate_report
from driftwarden.replay.report_html import render_html

T0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)
HOSTILE = "<script>alert(1)</script>"
QUOTED = "x' onmouseover='alert(2)"
SETUP = SimpleNamespace(config=SimpleNamespace(window=SimpleNamespace(size_ms=60_000, out_of_orderness_ms=0),
                                               thresholds=SimpleNamespace(bins=10)),
                        reference_label="file ref.jsonl", models=None, features=None)


def outcome() -> ReplayOutcome:
    plain = WindowResult(WindowReport("fraud", T0, T0 + MINUTE, [FeatureOutcome("amount", count=3000)]), 3000, 0, 0)
    segmented = WindowResult(WindowReport("fraud", T0 + MINUTE, T0 + 2 * MINUTE, [
        FeatureOutcome("amount", count=3000, gate_ks=0.01, gate_psi=0.002),
        FeatureOutcome(QUOTED, kind="categorical", count=3000, gate_new_share=0.0, invalid=2,
                       invalid_examples=({"reason": "wrong_type:number", "value": "<b>1</b>", "where": "line 7"},)),
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


def test_segment_verdicts_are_feature_entries_of_their_window(doc: dict) -> None:
    validate_report(doc)
    plain, segmented = doc["windows"]
    assert doc["schema_version"] == SCHEMA_VERSION == 6
    assert "segments" not in plain and "segments" not in segmented  # version 3's separate list is gone
    assert [(f["name"], f.get("segment")) for f in segmented["features"]] == [
        ("amount", None), (QUOTED, None), ("amount", {"country": "FR"}), ("amount", {"country": HOSTILE}),
        ("amount", {"country": "(other)"})]  # the global view first, then each (feature, segment)
    assert [f["name"] for f in global_entries(segmented)] == ["amount", QUOTED]
    rows = {f["segment"]["country"]: f for f in segmented["features"] if "segment" in f}
    fr = rows["FR"]
    assert (fr["name"], fr["count"], fr["drifted"], fr["severity"], fr["p_adjusted"]) == (
        "amount", 300, True, "moderate", 4.5e-8)
    assert fr["deep"]["p_adjusted"] == 4.5e-8 and rows[HOSTILE]["missing"] == 3
    assert rows["(other)"]["p_adjusted"] is None and all("p_adjusted" not in f for f in global_entries(segmented))
    assert doc["alerts"] == [{"model": "fraud", "window_start": segmented["window_start"],
                              "window_end": segmented["window_end"], "severity": "moderate", "features": ["amount"],
                              "segments": [{"feature": "amount", "segment": {"country": "FR"},
                                            "severity": "moderate"}]}]
    assert doc["first_drift"] == [{"model": "fraud", "feature": "amount", "window_start": segmented["window_start"],
                                   "severity": "moderate", "drifted_windows": 1, "segment": {"country": "FR"}}]


def test_the_contracts_reader_gets_every_verdict_back(doc: dict) -> None:
    """core.records.report_from_dict reads a window as DESIGN.md's contract says: segment verdicts included."""
    for result, window in zip(outcome().windows, doc["windows"]):
        back = report_from_dict(window)
        assert [(f.name, f.segment, f.count, f.missing, f.drifted, f.severity) for f in back.features] == [
            (f.name, f.segment, f.count, f.missing, f.drifted, f.severity) for f in
            sorted(result.report.features, key=lambda f: f.segment is not None)]


@pytest.mark.parametrize("breakage, where", [
    (lambda w: w["features"][2].pop("p_adjusted"), "features/2"),  # a segment entry without its hierarchical p
    (lambda w: w["features"][0].update(p_adjusted=0.5), "features/0"),  # ... or a global one with one
    (lambda w: w["features"][2].update(segment={}), "features/2/segment"),
    (lambda w: w.update(segments=[]), "windows/1"),  # version 3's list
])
def test_the_schema_holds_segment_entries_to_their_shape(doc: dict, breakage, where: str) -> None:
    breakage(doc["windows"][1])
    with pytest.raises(ReplayError, match=where):
        validate_report(doc)


def test_cells_fold_every_window_of_a_segment_and_feature(doc: dict) -> None:
    cells = {(c.segment_text, c.feature): c for c in report_cells(doc)}
    assert list(cells)[:2] == [("all traffic", "amount"), ("all traffic", QUOTED)]  # global view first
    assert list(cells)[-1] == ("country=(other)", "amount")  # the other segment last
    assert (cells["all traffic", "amount"].windows, cells["all traffic", "amount"].state) == (2, "quiet")
    fr = cells["country=FR", "amount"]
    assert (fr.state, fr.severity, fr.drifted, fr.first_drifted, fr.min_p_adjusted) == (
        "drifted", "moderate", 1, doc["windows"][1]["window_start"], 4.5e-8)
    assert cells["country=(other)", "amount"].state == "not judged"
    assert cells["all traffic", QUOTED].state == "quiet"  # a categorical feature is judged by its new share


def _section(page: str, start: str, end: str) -> str:
    return page[page.index(start):page.index(end, page.index(start))]


def test_the_page_leads_with_the_ranking_then_the_heat_map_and_folds_the_quiet_cells(doc: dict) -> None:
    page = render_html(doc, outcome())
    order = [page.index(marker) for marker in ("Features ranked by effect size", "<table class='heat'>",
                                               "<h2>Drifted cells</h2>", "quiet cell(s)")]
    assert order == sorted(order)
    assert "1 of 5 (segment, feature) cells drifted: 0 feature(s) in all traffic, 1 only inside a segment (amount)" \
           in page
    heat = _section(page, "<table class='heat'>", "</table>")
    rows = re.findall(r"<tr><th class='row'>(.*?)</th>(.*?)</tr>", heat)
    assert [r[0] for r in rows] == ["all traffic", "country=&lt;script&gt;alert(1)&lt;/script&gt;", "country=FR",
                                    "country=(other)"]  # by segment text, the other segment last
    classes = [re.findall(r"<a class='(c-[a-z-]+)'", r[1]) for r in rows]
    assert classes == [["c-quiet", "c-quiet"], ["c-quiet"], ["c-moderate"], ["c-not-judged"]]
    assert re.search(r"<a class='c-moderate' href='#cell-\d+' title='[^']*'>1</a>", heat)  # drifted in one window
    folded = _section(page, "<details><summary>3 quiet cell(s) (judged, no gate alarm in any window) and 1 not judged",
                      "</details>")
    assert folded.count("<tr id='cell-") == 4


def test_every_heat_map_cell_links_to_its_detail_and_names_are_never_ids(doc: dict) -> None:
    page = render_html(doc, outcome())
    links = re.findall(r"href='#([^']*)'", page)
    ids = re.findall(r"id='([^']*)'", page)
    assert len(links) >= 6 and set(links) <= set(ids) and len(ids) == len(set(ids))
    assert all(re.fullmatch(r"cell-\d+", target) for target in links + ids)
    detail = _section(page, "<h2>Drifted cells</h2>", "</details>")
    assert "fraud / amount [country=FR]" in detail and "moderate</span>, drifted in 1 of 1 windows" in detail


def test_names_from_events_are_escaped_everywhere(doc: dict) -> None:
    page = render_html(doc, outcome())
    assert HOSTILE not in page and QUOTED not in page and "<script" not in page and "<b>1</b>" not in page
    assert "values of the wrong type (their events kept): fraud / x&#x27; onmouseover=&#x27;alert(2) 2" in page
    assert "x&#x27; onmouseover=&#x27;alert(2)" in page  # a feature name in an attribute (the cell's title) too
    assert "country=&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_report_without_segments_has_one_row_of_cells(doc: dict) -> None:
    page = render_html({**doc, "windows": doc["windows"][:1]}, outcome())
    heat = _section(page, "<table class='heat'>", "</table>")
    assert heat.count("<th class='row'>") == 1 and "all traffic" in heat and "country" not in heat


def test_a_cells_colour_is_its_worst_window_and_its_first_drift_the_earliest(doc: dict) -> None:
    fr = next(f for f in doc["windows"][1]["features"] if f.get("segment") == {"country": "FR"})
    later = [{"model": "fraud", "window_start": f"2026-03-01T12:0{m}:00.000Z", "features": [
        {**fr, "severity": severity}]} for m, severity in ((2, "minor"), (3, "major"), (4, "moderate"))]
    cells = report_cells({"windows": [*later[::-1], doc["windows"][1]]})
    cell = next(c for c in cells if c.segment == {"country": "FR"})
    assert (cell.severity, cell.drifted, cell.first_drifted) == ("major", 4, doc["windows"][1]["window_start"])
    page = render_html({**doc, "windows": [doc["windows"][1], *later]}, outcome())
    assert "<a class='c-major'" in page and "<a class='c-moderate'" not in page
    assert "drifted from 2026-03-01T12:01:00.000Z to 2026-03-01T12:04:00.000Z (4 windows)" in page
