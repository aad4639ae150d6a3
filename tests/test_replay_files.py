"""driftwarden replay on archived files: formats, report contract, filters, store, bad input."""

from __future__ import annotations

import gzip
import time

import orjson
import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.replay.report import validate_report
from driftwarden.replay.synthetic import incident_events
from driftwarden.schemas.tables import dead_letters, window_counts, window_results

NOW_MIN = int(time.time() * 1000) // 60_000 * 60_000
T0 = NOW_MIN - 3 * 3_600_000
DRIFT = T0 + 5 * 60_000
BAD_LINES = [b'{"event_time": "nope", "model": "fraud-v3", "features": {}}', b"not json at all",
             b'{"event_time": 1767225600000, "model": "fraud-v3", "features": {"x0": "text"}}']


def _write_jsonl(path, events, extra=()):
    with open(path, "wb") as handle:
        for e in events:
            handle.write(orjson.dumps(e) + b"\n")
        for line in extra:
            handle.write(line + b"\n")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Reference events (raw and built) and a 10-minute stream drifting after 5 minutes, in two formats.

    150 events per window keep the window sketches exact (KLL k=200 compacts, at random, only
    above 200 values) and one built reference is shared: reports of the same events are then equal.
    """
    folder = tmp_path_factory.mktemp("replay")
    raw_reference = _write_jsonl(folder / "ref.jsonl", incident_events(6000, T0 - 3_600_000, 100, None, seed=1))
    reference = _built(raw_reference, folder / "ref.dwref")
    events = list(incident_events(1500, T0, 400, DRIFT, seed=2))
    stream = _write_jsonl(folder / "stream.jsonl", events[:750], BAD_LINES)
    with open(stream, "ab") as handle:
        for e in events[750:]:
            handle.write(orjson.dumps(e) + b"\n")
    gz = folder / "stream.jsonl.gz"
    gz.write_bytes(gzip.compress(stream.read_bytes()))
    return {"folder": folder, "reference": reference, "raw_reference": raw_reference, "jsonl": stream, "gz": gz,
            "events": events}


def _built(raw, path):
    """Build a reference file from raw events, as `driftwarden reference build` does."""
    from driftwarden.core.event_files import load_events
    from driftwarden.pipeline.judging import drift_policy
    from driftwarden.pipeline.reference_build import build_reference_set, infer_feature_kinds
    from driftwarden.replay.setup import default_config

    events, _ = load_events(raw)
    config = default_config(infer_feature_kinds(events))
    build_reference_set(events, config, drift_policy(config.thresholds)).save(path)
    return path


def replay(*args):
    """Run ``driftwarden replay`` in-process; the CliRunner result."""
    return CliRunner().invoke(app, ["replay", "--no-progress", *map(str, args)])


def report_of(files, source, *extra):
    out = files["folder"] / f"out-{abs(hash((str(source), extra)))}.json"
    result = replay("--input", source, "--reference", files["reference"], "--report-json", out, *extra)
    assert result.exit_code == 0, result.output
    return orjson.loads(out.read_bytes())


def _verdicts(doc):
    return {(w["model"], w["window_start"], f["name"]): (f["count"], f["drifted"], f["severity"], f["gate"]["alarm"],
                                                         f["deep"]) for w in doc["windows"] for f in w["features"]}


def test_report_follows_the_schema_and_finds_the_drift(files):
    doc = report_of(files, files["jsonl"])
    validate_report(doc)
    # the bad line with a text for numeric x0 is a valid event (its x0 counted invalid), late for its window
    assert doc["counts"] == {"read": 1503, "valid": 1501, "rejected": 2, "late": 1, "windowed": 1500,
                             "filtered_out": 0}
    assert len(doc["windows"]) == 10 and all(w["events"] == 150 for w in doc["windows"])
    first = {(e["feature"]): e["window_start"] for e in doc["first_drift"]}
    drift_start = doc["windows"][5]["window_start"]
    assert first == {"x0": drift_start, "c0": drift_start}, first
    before = [f for w in doc["windows"][:5] for f in w["features"]]
    assert not any(f["drifted"] for f in before)
    assert {a["window_start"] for a in doc["alerts"]} == {w["window_start"] for w in doc["windows"][5:]}


def test_schema_rejects_a_broken_report(files):
    doc = report_of(files, files["jsonl"])
    del doc["windows"][0]["features"][0]["gate"]["alarm"]
    with pytest.raises(Exception, match="alarm"):
        validate_report(doc)


def test_malformed_records_are_listed_with_file_and_line(files):
    doc = report_of(files, files["jsonl"])
    listed = [(r["line"], r["reason"]) for r in doc["rejected"]]
    assert listed == [(751, "bad_event_time"), (752, "not_json")]  # 753: x0 of the wrong type, the event kept
    assert all(r["file"] == str(files["jsonl"]) for r in doc["rejected"])


def test_jsonl_gzip_and_parquet_give_the_same_report(files, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"event_time": e["event_time"], "model": e["model"], **e["features"]} for e in files["events"]]
    parquet = tmp_path / "stream.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    plain = _verdicts(report_of(files, files["jsonl"]))
    assert _verdicts(report_of(files, files["gz"])) == plain
    assert _verdicts(report_of(files, parquet)) == plain  # same events, without the 3 malformed lines


def test_worker_processes_give_the_report_of_an_in_process_replay(files, tmp_path):
    """--workers 2 (validation in spawned processes, results as Arrow IPC) changes nothing but speed."""
    mixed = _write_jsonl(tmp_path / "mixed.jsonl", [{**e, "model": "other"} if i % 7 == 0 else e
                                                    for i, e in enumerate(files["events"])], BAD_LINES)
    for source in (files["jsonl"], mixed):
        in_process = report_of(files, source, "--workers", "0")
        workers = report_of(files, source, "--workers", "2")
        for doc in (in_process, workers):
            del doc["generated_at"]
        assert workers == in_process
    assert in_process["counts"]["rejected"] == 2 and {w["model"] for w in in_process["windows"]} == {"fraud-v3", "other"}


def test_auto_workers_only_for_large_inputs():
    import os

    from driftwarden.replay.workers import AUTO_MIN_RECORDS, auto_workers

    cores = len(os.sched_getaffinity(0))
    assert auto_workers(AUTO_MIN_RECORDS - 1) == 0
    assert auto_workers(AUTO_MIN_RECORDS) == (cores if cores > 1 else 0)  # one per core; none on a single core


def test_without_config_kinds_come_from_the_reference_and_defaults_apply(files):
    doc = report_of(files, files["jsonl"])
    assert doc["settings"]["window_ms"] == 60_000 and doc["settings"]["out_of_orderness_ms"] == 5_000
    kinds = {f["name"]: f["kind"] for f in doc["windows"][0]["features"]}
    # no prediction in the events: none reported; x0 and x1 make the default multivariate group
    assert kinds == {"x0": "numeric", "x1": "numeric", "c0": "categorical", "(numeric)": "group"}


def test_raw_reference_events_give_the_same_drift_as_the_built_reference_file(files, tmp_path):
    out = tmp_path / "raw.json"
    result = replay("--input", files["jsonl"], "--reference", files["raw_reference"], "--report-json", out)
    assert result.exit_code == 0, result.output
    raw = orjson.loads(out.read_bytes())
    built = report_of(files, files["jsonl"])

    def drifted(doc):
        return {(w["window_start"], f["name"]) for w in doc["windows"] for f in w["features"] if f["drifted"]}

    assert drifted(raw) == drifted(built) and len(drifted(built)) == 10


def test_feature_filter_keeps_only_the_named_features(files):
    doc = report_of(files, files["jsonl"], "--features", "x1,c0")
    assert {f["name"] for w in doc["windows"] for f in w["features"]} == {"x1", "c0"}
    assert doc["settings"]["features"] == ["c0", "x1"]


def test_model_filter_counts_other_models_apart(files, tmp_path):
    other = [{**e, "model": "other"} for e in files["events"][:100]]  # events of a model not monitored
    stream = _write_jsonl(tmp_path / "two-models.jsonl", files["events"] + other)
    out = tmp_path / "m.json"
    result = replay("--input", stream, "--reference", files["reference"], "--model", "fraud-v3", "--report-json", out)
    assert result.exit_code == 0, result.output
    doc = orjson.loads(out.read_bytes())
    assert {w["model"] for w in doc["windows"]} == {"fraud-v3"}
    assert doc["counts"]["filtered_out"] == 100 and doc["counts"]["read"] == 1500
    assert doc["counts"]["read"] == doc["counts"]["valid"] + doc["counts"]["rejected"]


def _report_with_config(files, tmp_path, head: str) -> dict:
    """Replay the stream with a config (``head`` + the three features), no reference file; the report."""
    config = tmp_path / "monitor.yaml"
    config.write_text(head + "models:\n  - name: fraud-v3\n    features: {x0: numeric, x1: numeric, c0: categorical}\n")
    out = tmp_path / "report.json"
    result = replay("--input", files["jsonl"], "--config", config, "--report-json", out)
    assert result.exit_code == 0, result.output
    return orjson.loads(out.read_bytes())


def test_warmup_config_without_reference_judges_after_the_first_windows(files, tmp_path):
    doc = _report_with_config(files, tmp_path, "window: {size: 60s}\nreference: {mode: warmup, warmup_windows: 3}\n")
    warm = [f for w in doc["windows"][:3] for f in w["features"]]
    assert sorted(f["name"] for f in warm) == sorted(["x0", "x1", "c0"] * 3)  # counted ...
    assert all(f["count"] == 150 for f in warm)
    for f in warm:  # ... and judged against nothing
        assert set(f["gate"].values()) <= {None, False} and f["deep"] is None and not f["drifted"], f
    judged = doc["windows"][3]["features"]  # the first window after the warm-up has a reference
    assert all(f["gate"]["psi"] is not None for f in judged if f["kind"] == "numeric")
    drifted = {w["window_start"] for w in doc["windows"] for f in w["features"] if f["drifted"]}
    assert drifted and min(drifted) == doc["windows"][5]["window_start"]


def test_html_report_is_self_contained_with_plots_per_drifted_feature(files, tmp_path):
    page = tmp_path / "r.html"
    result = replay("--input", files["jsonl"], "--reference", files["reference"], "--report-html", page)
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert text.count("data:image/png;base64,") == 6  # x0 and c0: distribution, PSI bins, timeline
    assert "ranked by effect size" in text
    assert "<script" not in text and "http://" not in text and "https://" not in text  # nothing fetched
    table = text.split("ranked by effect size")[1]
    assert table.index(">x0<") < table.index(">x1<") and table.index(">c0<") < table.index(">x1<")


def test_store_twice_leaves_no_duplicate_rows(files, tmp_path):
    url = f"sqlite:///{tmp_path}/replay.db"
    for _ in range(2):
        result = replay("--input", files["jsonl"], "--reference", files["reference"], "--store-url", url)
        assert result.exit_code == 0, result.output
    from driftwarden.core.store import make_engine

    engine = make_engine(url)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(window_results)).scalar_one() == 10 * 4  # 3 and the group
        assert conn.execute(select(func.count()).select_from(window_counts)).scalar_one() == 10
        assert conn.execute(select(func.count()).select_from(dead_letters)).scalar_one() == 3
        drifted = conn.execute(select(func.count()).select_from(window_results)
                               .where(window_results.c.drifted)).scalar_one()
    engine.dispose()
    assert drifted == 10  # x0 and c0 in each of the 5 drifted windows


def test_read_only_by_default(files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = replay("--input", files["jsonl"], "--reference", files["reference"])
    assert result.exit_code == 0, result.output
    assert list(tmp_path.iterdir()) == []  # no driftwarden.db, no report


@pytest.mark.parametrize("name, content, message", [
    ("fake.parquet", b'{"event_time": 1}\n', "named like Parquet but its content is JSONL text"),
    ("fake.jsonl.gz", b'{"event_time": 1}\n', "named like gzip but its content is JSONL text"),
    ("fake.jsonl", gzip.compress(b"{}\n"), "named like JSONL text but its content is gzip"),
    ("events.csv", b"a,b\n", "unknown file type .csv"),
    ("empty.jsonl", b"", "is empty"),
])
def test_a_file_that_is_not_what_its_name_says_is_refused(files, tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    result = replay("--input", path, "--reference", files["reference"])
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("args, message", [
    (["--input", "missing.jsonl"], "does not exist"),
    (["--topic", "t", "--from", "2026-01-01T00:00:00Z"], "needs both --from and --to"),
    (["--topic", "t", "--from", "yesterday", "--to", "2026-01-01T00:00:00Z"], "--from 'yesterday' is not a time"),
    (["--topic", "t", "--from", "2026-01-02T00:00:00Z", "--to", "2026-01-01T00:00:00Z"], "is not before --to"),
    (["--topic", "t", "--from", "2026-01-01T00:00:00Z", "--to", "2099-01-01T00:00:00Z"], "in the future"),
    ([], "give exactly one source"),
    (["--input", "x.jsonl", "--pace", "fast"], "--pace 'fast'"),
])
def test_bad_options_give_a_message_and_exit_1(files, args, message):
    result = replay(*args, "--reference", files["reference"])
    assert result.exit_code == 1, result.output
    assert message in result.output and "Traceback" not in result.output


def test_a_directory_given_as_a_file_is_named_as_one(files, tmp_path):
    """Not 'does not exist' (issue 18: a directory given as a file)."""
    result = replay("--input", tmp_path, "--reference", files["reference"])
    assert result.exit_code == 1 and f"input file {tmp_path} is a directory, not a file" in result.output, result.output
    result = replay("--input", files["jsonl"], "--reference", tmp_path)
    assert result.exit_code == 1 and f"reference file {tmp_path} is a directory, not a file" in result.output, \
        result.output


def test_no_reference_and_no_config_says_what_to_pass(files):
    result = replay("--input", files["jsonl"])
    assert result.exit_code == 1
    assert "pass --reference FILE" in result.output


def test_rolling_config_judges_each_window_against_earlier_lagged_windows(files, tmp_path):
    doc = _report_with_config(files, tmp_path, "reference: {mode: rolling, rolling_windows: 2, lag_windows: 1}\n")
    scored = [any(f["gate"]["psi"] is not None for f in w["features"]) for w in doc["windows"]]
    assert scored == [False] * 3 + [True] * 7  # window i needs windows i-3 and i-2 (one window of lag)


def test_a_worker_that_dies_ends_the_replay_with_a_clear_error(files):
    import os
    import signal

    from driftwarden.core.errors import ReplayError
    from driftwarden.replay.records import RawRecord
    from driftwarden.replay.workers import ValidationPool
    from driftwarden.schemas.config import MonitorConfig

    config = MonitorConfig.model_validate({"models": [{"name": "m", "features": {"x": "numeric"}}]})
    record = RawRecord(("f", 1), 0, b'{"event_time": 1767225600000, "model": "m", "features": {"x": 2}}')
    with pytest.raises(ReplayError, match="--workers 0"):
        with ValidationPool(config, workers=1) as pool:
            batches = pool.validated([[record]] * 50)
            next(batches)
            for pid in list(pool._pool._processes):  # a worker is killed (OOM killer, operator)
                os.kill(pid, signal.SIGKILL)
            list(batches)
