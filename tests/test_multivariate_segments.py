"""Multivariate groups judged per segment: a correlation flip confined to one segment is found there alone.

A segmented model (``segments: {by: [country], top: 3}``) with three numeric features has the default
group ``(numeric)``. Each segment's kind 17 frame already carries its group moments (the live job's Java
source task keeps one partial per (model, segment, window), and Python summarizes each segment with its
groups), and ``reference build`` calibrates each segment's groups from that segment's windows. In the
stream, from window ``FLIP_FROM`` on, ``a`` and ``b`` correlate -0.8 instead of 0.8 in segment FR only;
every marginal stays N(0, 1). The flip must be found in FR's group cell from its first window, in no other
segment's group, and in no feature's cell, through replay and through the live job's results sink
(``jobs.udfs.AnalyzeWindow`` on the Java aggregate's bytes), which store the same decisions in SQLite and
PostgreSQL. Drift-free segmented windows stay within the false-alarm budget (binomial bound).
"""

from __future__ import annotations

import dataclasses

import logging

import numpy as np
import orjson
import pyarrow as pa
import pytest
import yaml
from scipy import stats
from sqlalchemy import select
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.core.store import make_engine
from driftwarden.jobs.drift_job import segments_json
from driftwarden.jobs.feature_spec import FeatureColumnSpec
from driftwarden.jobs.java_summary import java_summaries
from driftwarden.jobs.udfs import AnalyzeWindow
from driftwarden.pipeline.columns import configured_values
from driftwarden.pipeline.event_time import window_start
from driftwarden.pipeline.judging import analyze_summary, drift_policy
from driftwarden.pipeline.reference_set import ReferenceSet
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.pipeline.segments import fold_to_top, other_key, segment_keys
from driftwarden.pipeline.summary import WindowRows, WindowSummary
from driftwarden.schemas.alert_tables import alerts
from driftwarden.schemas.config import MonitorConfig
from driftwarden.schemas.tables import segment_results, window_results
from driftwarden.sketches import Reference

WINDOW_MS = 60_000
T0 = 1_767_225_600_000
GROUP = "(numeric)"
COUNTRIES = np.array(["US", "FR", "DE", "JP"])
SHARES = [0.4, 0.25, 0.2, 0.15]
#: each country's correlation of a and b in the reference (the flip turns FR's to -0.8)
RHO = {"US": 0.8, "FR": 0.8, "DE": 0.3, "JP": -0.5}
FLIP_FROM, STREAM_WINDOWS, PER_WINDOW = 3, 6, 1200
CONFIG = {"window": {"size": "60s", "out_of_orderness": "0s"},
          "reference": {"mode": "file", "path": "unused.dwref"},
          "alerting": {"group_wait": "0s"},
          "models": [{"name": "m", "features": {"a": "numeric", "b": "numeric", "c": "numeric",
                                                "country": "categorical"},
                      "segments": {"by": ["country"], "top": 3, "min_count": 100}}]}


def _events(windows: int, start_ms: int, seed: int, flip_from: int | None = None) -> list[dict]:
    """PER_WINDOW events a window: a, b N(0, 1) with their country's correlation (FR's -0.8 from ``flip_from``),
    c N(0, 1) independent."""
    rng = np.random.default_rng(seed)
    events = []
    for w in range(windows):
        country = rng.choice(COUNTRIES, size=PER_WINDOW, p=SHARES)
        z = rng.normal(size=(PER_WINDOW, 3))
        rho = np.array([-0.8 if c == "FR" and flip_from is not None and w >= flip_from else RHO[c] for c in country])
        b = rho * z[:, 0] + np.sqrt(1 - rho ** 2) * z[:, 1]
        for i in range(PER_WINDOW):
            events.append({"event_time": start_ms + w * WINDOW_MS + i * (WINDOW_MS // PER_WINDOW), "model": "m",
                           "features": {"a": float(z[i, 0]), "b": float(b[i]), "c": float(z[i, 2]),
                                        "country": str(country[i])}})
    return events


def _write(path, events):
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """The reference built from 30 drift-free windows (a segment's group is judged from 30 calibration windows,
    ``DriftPolicy.segment_group_min_windows``), and replay's JSON and HTML reports of the stream."""
    folder = tmp_path_factory.mktemp("mvseg")
    config = folder / "monitor.yaml"
    config.write_text(yaml.safe_dump({**CONFIG, "reference": {"mode": "file", "path": str(folder / "ref.dwref")}}))
    reference_events = _write(folder / "ref.jsonl", _events(30, T0 - 3_600_000, seed=1))
    events = _events(STREAM_WINDOWS, T0, seed=2, flip_from=FLIP_FROM)
    stream = _write(folder / "stream.jsonl", events)
    runner = CliRunner()
    built = runner.invoke(app, ["reference", "build", "-i", str(reference_events), "-o", str(folder / "ref.dwref"),
                                "-c", str(config)])
    assert built.exit_code == 0, built.output
    result = runner.invoke(app, ["replay", "--no-progress", "--input", str(stream), "--config", str(config),
                                 "--reference", str(folder / "ref.dwref"), "--report-json", str(folder / "r.json"),
                                 "--report-html", str(folder / "r.html")])
    assert result.exit_code == 0, result.output
    return {"folder": folder, "config": config, "events": events, "reference": folder / "ref.dwref",
            "doc": orjson.loads((folder / "r.json").read_bytes()), "html": (folder / "r.html").read_text()}


def _p_adjusted(entry: dict) -> float | None:
    """An entry's adjusted p-value (a segment entry carries it beside its keys, a global one in ``deep``)."""
    return entry["p_adjusted"] if "p_adjusted" in entry else (entry["deep"] or {}).get("p_adjusted")


def _cells(doc: dict) -> dict[tuple[str, str | None], list[dict]]:
    """Each (entry name, segment's country or None)'s entries, window by window."""
    cells: dict[tuple[str, str | None], list[dict]] = {}
    for window in doc["windows"]:
        for entry in window["features"]:
            segment = (entry.get("segment") or {}).get("country")
            cells.setdefault((entry["name"], segment), []).append(entry)
    return cells


def test_each_segment_reference_calibrates_its_group_from_that_segments_windows(replayed):
    references = ReferenceSet.load(replayed["reference"])
    events = _events(30, T0 - 3_600_000, seed=1)
    for key in [*references.segment_keys("m"), other_key(("country",))]:
        group = references.segment_reference("m", key).groups[GROUP]
        top = [k[0] for k in references.segment_keys("m")]
        chosen = [e for e in events if e["features"]["country"] == key[0]
                  or (key == other_key(("country",)) and e["features"]["country"] not in top)]
        rows = np.array([[e["features"][f] for f in "abc"] for e in chosen])
        assert group.moments.n == len(chosen) and group.null_scores.shape == (30, 3), key
        assert group.parts().cov == pytest.approx(np.cov(rows.T), rel=1e-7, abs=1e-8), key  # its rows (31-bit values)


def test_replay_finds_the_flip_in_its_segments_group_alone(replayed):
    from driftwarden.replay.report import validate_report

    doc = replayed["doc"]
    validate_report(doc)
    cells = _cells(doc)
    flipped = cells[(GROUP, "FR")]
    assert [e["drifted"] for e in flipped] == [False] * FLIP_FROM + [True] * (STREAM_WINDOWS - FLIP_FROM)
    assert all(e["kind"] == "group" and e["segment"] == {"country": "FR"} for e in flipped)
    pair = flipped[FLIP_FROM]["evidence"]["pairs"][0]
    assert pair["features"] == ["a", "b"] and pair["reference"] == pytest.approx(0.8, abs=0.05)
    assert pair["window"] == pytest.approx(-0.8, abs=0.1)
    for country in ("US", "DE", "(other)"):
        group = cells[(GROUP, country)]
        assert len(group) == STREAM_WINDOWS and not any(e["drifted"] for e in group), country
        assert all(_p_adjusted(e) is not None for e in group), country  # judged, not merely counted
    assert not any(e["drifted"] for (name, _), entries in cells.items() if name != GROUP for e in entries)


def test_the_page_shows_the_segments_group_with_its_pairs(replayed):
    """The FR group's cell is in the page; drifted only inside a segment, its section has the group's evidence
    (the pairs that moved) and its correlation-difference plot beside the segment's timeline."""
    from driftwarden.replay.html_cells import report_cells
    from driftwarden.replay.report_html import _segment_section

    assert f"m / {GROUP} [country=FR]" in replayed["html"]
    [cell] = [c for c in report_cells(replayed["doc"]) if c.feature == GROUP and c.segment == {"country": "FR"}]
    section = _segment_section(replayed["doc"], cell)
    assert "a / b" in section and "share of variance the reference" in section
    assert section.count("<img ") == 2


def _java_windows(replayed) -> list[bytes]:
    """The stream's windows as the live job's Java aggregate and MergeSegments make them (two partials)."""
    config = MonitorConfig.model_validate(CONFIG)
    model, spec = config.model("m"), FeatureColumnSpec.from_config(config)
    top = ReferenceSet.load(replayed["reference"]).segment_keys("m")
    keys = (*top, other_key(("country",)))
    events = replayed["events"]
    folded = fold_to_top(segment_keys({"country": pa.array([e["features"]["country"] for e in events])},
                                      ("country",)), top)
    records = [{"model": "m", "event_ms": e["event_time"], "topic": "t", "partition": i % 2, "offset": i,
                "unknown": 0, "values": spec.row_values("m", configured_values(e["features"], model.kinds)[0]),
                "segment": keys.index(key)} for i, (e, key) in enumerate(zip(events, folded))]
    java = [data for _, _, data in java_summaries(spec.aggregate_spec(config), records, 2,
                                                  segments_json=segments_json({"m": (("country",), keys)}))]
    for data in java:  # the Python summary of the same records is the same bytes
        summary = WindowSummary.deserialize(data)
        rows = WindowRows(model)
        for i, e in enumerate(events):
            if window_start(e["event_time"], WINDOW_MS) == summary.window_start_ms:
                rows.add(e["features"], ("t", i % 2, i))
        assert rows.summarize("m", summary.window_start_ms, WINDOW_MS, top).serialize() == data
        assert all(segment.groups[GROUP].n == segment.events for segment in summary.segments.values())
    return java


class _NoMetrics:
    def get_metric_group(self):
        return None


def test_the_live_jobs_sink_stores_replays_decisions_for_segment_groups(replayed, store_url):
    """The Java aggregate's segmented bytes judged by the live job's results sink: the group's cells (global and
    per segment) are stored with replay's decisions, FR's in segment_results, and FR's group fires its own alert."""
    config = MonitorConfig.model_validate({**CONFIG, "reference": {"mode": "file",
                                                                   "path": str(replayed["reference"])}})
    make_engine(store_url).dispose()
    sink = AnalyzeWindow(config, store_url, str(replayed["reference"]))
    sink.open(_NoMetrics())
    try:
        for data in _java_windows(replayed):
            sink.eval(data)
    finally:
        sink.close()
    columns = ("window_start", "feature", "drifted", "severity", "p_adjusted", "count", "missing")
    with make_engine(store_url).connect() as conn:
        overall = conn.execute(select(*(window_results.c[c] for c in columns)).where(
            window_results.c.feature == GROUP).order_by(window_results.c.window_start)).all()
        inside = conn.execute(select(segment_results.c.segment, *(segment_results.c[c] for c in columns)).where(
            segment_results.c.feature == GROUP).order_by(segment_results.c.segment,
                                                         segment_results.c.window_start)).all()
        fired = {(r.model, r.feature, r.segment) for r in conn.execute(select(alerts))}
    cells = _cells(replayed["doc"])
    assert [(r.drifted, r.severity, r.p_adjusted, r.count, r.missing) for r in overall] == \
        [(e["drifted"], e["severity"], _p_adjusted(e), e["count"], e["missing"]) for e in cells[(GROUP, None)]]
    by_segment: dict[str, list] = {}
    for r in inside:
        by_segment.setdefault(r.segment, []).append((r.drifted, r.severity, r.p_adjusted, r.count, r.missing))
    assert by_segment == {f"country={c}": [(e["drifted"], e["severity"], _p_adjusted(e), e["count"], e["missing"])
                                           for e in cells[(GROUP, c)]] for c in ("US", "FR", "DE", "(other)")}
    assert [d for d, *_ in by_segment["country=FR"]] == [False] * FLIP_FROM + [True] * (STREAM_WINDOWS - FLIP_FROM)
    assert ("m", GROUP, "country=FR") in fired
    assert not {f for f in fired if f[1] == GROUP and f[2] not in ("", "country=FR")}


# -- drift-free segmented windows within the budget -------------------------------------------------------------

def _summaries(config: MonitorConfig, windows: int, seed: int, top) -> list[WindowSummary]:
    model, out = config.model("m"), []
    events = _events(windows, T0, seed)
    for w in range(windows):
        rows = WindowRows(model)
        for i, e in enumerate(events[w * PER_WINDOW:(w + 1) * PER_WINDOW]):
            rows.add(e["features"], (w, i))
        out.append(rows.summarize("m", T0 + w * WINDOW_MS, WINDOW_MS, top))
    return out


def test_drift_free_segment_groups_stay_within_the_false_alarm_budget():
    """300 drift-free windows against a 30-window reference, judged at the production budget (alpha 5e-5 for
    60 s windows) and at alpha 0.05 (false alarms frequent enough to count): the share of windows with a drifted
    group cell (global or segment) stays within the binomial 99.9% bound of alpha, the FDR step's guarantee,
    while every segment's group is judged in every window against its own reference (the segments' correlations
    differ: against the global reference they would all drift)."""
    config = MonitorConfig.model_validate(CONFIG)
    policies = {"production": drift_policy(config.thresholds, WINDOW_MS),
                "0.05": drift_policy(MonitorConfig.model_validate({**CONFIG, "thresholds": {"alpha": 0.05}}).thresholds,
                                     WINDOW_MS)}
    assert policies["production"].alpha < 1e-4
    top = (("US",), ("FR",), ("DE",))
    kinds = config.model("m").sketch_kinds
    reference_windows = _summaries(config, 30, 3, top)
    reference = reference_from_summaries(reference_windows, kinds, policies["production"])
    segments = {key: reference_from_summaries([s.segments[key] for s in reference_windows], kinds,
                                              policies["production"]) for key in (*top, other_key(("country",)))}
    windows = 300
    flagged, judged = dict.fromkeys(policies, 0), dict.fromkeys(policies, 0)
    for summary in _summaries(config, windows, 4, top):
        for name, policy in policies.items():
            groups = [f for f in analyze_summary(summary, reference, policy, None, segments, 100).features
                      if f.kind == "group"]
            flagged[name] += any(f.drifted for f in groups)
            judged[name] += sum(f.segment is not None and f.p_adjusted is not None for f in groups)
    assert judged == dict.fromkeys(policies, 4 * windows)
    for name, policy in policies.items():
        bound = stats.binom.ppf(0.999, windows, policy.alpha) / windows
        assert flagged[name] / windows <= bound, (name, flagged[name], bound)


def test_a_segment_group_calibrated_on_fewer_windows_than_the_policys_minimum_is_counted_not_tested():
    """Under the production policy a segment's group whose reference was calibrated on 12 windows (fewer than
    ``segment_group_min_windows``, 30) is reported with its counts and no test, so no false alarm comes from its
    noisy null; the global group (calibrated on the same 12 windows) is tested; with the minimum at 12 the
    segments' groups are tested too."""
    config = MonitorConfig.model_validate(CONFIG)
    policy = drift_policy(config.thresholds, WINDOW_MS)
    assert policy.segment_group_min_windows == 30
    top = (("US",), ("FR",), ("DE",))
    kinds = config.model("m").sketch_kinds
    reference_windows = _summaries(config, 12, 5, top)
    reference = reference_from_summaries(reference_windows, kinds, policy)
    segments = {key: reference_from_summaries([s.segments[key] for s in reference_windows], kinds, policy)
                for key in (*top, other_key(("country",)))}
    summary = _summaries(config, 1, 6, top)[0]
    for minimum, segment_tested in ((30, False), (12, True)):
        judged_policy = dataclasses.replace(policy, segment_group_min_windows=minimum)
        groups = [f for f in analyze_summary(summary, reference, judged_policy, None, segments, 100).features
                  if f.kind == "group"]
        assert {f.segment is None for f in groups} == {True, False}
        assert all(f.count > 0 for f in groups)
        assert [f.p_adjusted is not None for f in groups if f.segment is None] == [True]
        assert {f.p_adjusted is not None for f in groups if f.segment is not None} == {segment_tested}, minimum


def test_a_segment_reference_without_groups_still_judges_and_says_so_once(caplog, monkeypatch):
    """A segment reference made before groups were calibrated per segment: its features are judged as before,
    its group is not (no cell), and the log says so once per model."""
    from driftwarden.pipeline import judging

    monkeypatch.setattr(judging, "_SEGMENT_GROUPS_SKIPPED", set())  # said once per model and process
    config = MonitorConfig.model_validate(CONFIG)
    policy = drift_policy(config.thresholds, WINDOW_MS)
    top = (("US",), ("FR",), ("DE",))
    kinds = config.model("m").sketch_kinds
    reference_windows = _summaries(config, 12, 5, top)
    reference = reference_from_summaries(reference_windows, kinds, policy)
    old = {key: Reference(reference_from_summaries([s.segments[key] for s in reference_windows], kinds,
                                                   policy).features) for key in (*top, other_key(("country",)))}
    with caplog.at_level(logging.WARNING, logger="driftwarden.pipeline.judging"):
        reports = [analyze_summary(s, reference, policy, None, old, 100) for s in _summaries(config, 2, 6, top)]
    for report in reports:
        assert {(f.name, f.segment is None) for f in report.features if f.kind == "group"} == {(GROUP, True)}
        assert {f.name for f in report.features if f.segment is not None} >= {"a", "b", "c", "country"}
        assert all(f.gate_ks is not None for f in report.features if f.segment is not None and f.name in "abc")
    messages = [r.getMessage() for r in caplog.records if "multivariate groups" in r.getMessage()]
    assert len(messages) == 1 and "'m'" in messages[0] and "rebuild" in messages[0], messages
