"""The notebook front door (``driftwarden.judge``, ``judge_stream``) gives the job's verdicts, as a table and a page.

The oracle for "the job's verdicts" is replay (``driftwarden replay``), which the project's own
tests hold bit-identical to the live job: the same rows judged through the front door and replayed
from a file must give equal window reports, feature by feature.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest

import driftwarden as dw
from driftwarden.core.errors import ConfigError
from driftwarden.replay.progress import ReplayProgress
from driftwarden.replay.run import replay_file
from driftwarden.replay.setup import load_setup

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTE = 60_000
CONFIG = {"window": {"size": "60s", "out_of_orderness": "5s"},
          "models": [{"name": "m", "features": {"x": "numeric", "c": "categorical"}}]}


def _events(n: int, start_ms: int, span_ms: int, shift: float = 0.0, seed: int = 0, new: float = 0.0) -> list[dict]:
    """``n`` events spread over ``[start, start + span)`` in time order; ``new``: share of a category never seen."""
    rng = np.random.default_rng(seed)
    times = start_ms + np.sort(rng.integers(0, span_ms, n))
    labels = np.where(rng.random(n) < new, "zz", rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2]))
    return [{"event_time": int(t), "model": "m", "features": {"x": float(x), "c": str(c)}, "prediction": float(p)}
            for t, x, c, p in zip(times, rng.normal(shift, 1, n), labels, rng.random(n))]


def _write(path: Path, events: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


@pytest.fixture()
def files(tmp_path):
    """A reference snapshot over 20 minutes, a config file, and a current window with x shifted."""
    config = tmp_path / "monitor.yaml"
    config.write_text(orjson.dumps(CONFIG).decode())  # JSON is YAML
    reference = _write(tmp_path / "reference.jsonl", _events(12_000, T0, 20 * MINUTE))
    current = _write(tmp_path / "current.jsonl", _events(2_500, T0 + 30 * MINUTE, MINUTE, shift=0.3, seed=1, new=0.1))
    return config, reference, current


def _replayed(config: Path, reference: Path, current: Path):
    setup = load_setup(config, reference, None, None)
    outcome, _ = replay_file(current, setup, ReplayProgress(enabled=False), workers=0)
    return outcome


def test_judge_gives_replays_verdicts_for_the_window(files):
    config, reference, current = files
    result = dw.judge(reference=reference, current=current, config=config)
    [window] = _replayed(config, reference, current).windows
    assert result.reports == [window.report]  # every field of every feature: the same
    drifted = set(result.verdicts.loc[result.verdicts["drifted"], "feature"])
    assert drifted == {"x", "c"} and result.counts == {"read": 2500, "valid": 2500, "rejected": 0, "late": 0}
    assert result.notes == []  # a config was given: nothing inferred


def test_a_dataframe_and_its_file_give_the_same_verdicts(files, tmp_path):
    """Below the sample's size (2,000) the rows' coordinates do not matter: a DataFrame of the same
    events judges as the file does; a built reference file judges as the snapshot it was built from."""
    config, reference, _ = files
    events = _events(1_500, T0 + 30 * MINUTE, MINUTE, shift=0.3, seed=2)
    frame = pd.DataFrame([{"event_time": pd.Timestamp(e["event_time"], unit="ms", tz="UTC"), **e["features"],
                           "prediction": e["prediction"]} for e in events])
    from_frame = dw.judge(reference=reference, current=frame, config=config, model="m")
    from_file = dw.judge(reference=reference, current=_write(tmp_path / "c.jsonl", events), config=config)
    assert from_frame.reports == from_file.reports
    built = tmp_path / "reference.dwref"
    subprocess.run([str(Path(sys.executable).with_name("driftwarden")), "reference", "build", "--input", str(reference),
                    "--config", str(config), "--out", str(built)], check=True, capture_output=True)
    assert dw.judge(reference=built, current=frame, config=config, model="m").reports == from_frame.reports


def test_judge_stream_gives_replays_windows(files, tmp_path):
    config, reference, _ = files
    stream = _events(4_000, T0 + 30 * MINUTE, 4 * MINUTE, seed=3) + _events(1_000, T0 + 34 * MINUTE, MINUTE, 0.5, 4)
    stream.insert(2_000, {**stream[0], "features": {"x": 1.0, "c": "a"}})  # late: its window fired long before
    stream.insert(10, {"event_time": T0, "features": {"x": 1.0}})  # rejected: no model
    current = _write(tmp_path / "stream.jsonl", stream)
    result = dw.judge_stream(reference=reference, current=current, config=config)
    outcome = _replayed(config, reference, current)
    assert result.reports == [w.report for w in outcome.windows] and len(result.reports) == 5
    assert result.counts == {"read": 5002, "valid": 5001, "rejected": 1, "late": 1}
    assert [c for c, _, _ in result.rejections] == [(str(current), 11)]
    by_window = result.verdicts.groupby("window_start")["drifted"].any()
    assert list(by_window) == [False, False, False, False, True]  # only the shifted last minute


def test_judge_stream_with_a_warmup_reference_needs_no_reference(tmp_path):
    config = {**CONFIG, "reference": {"mode": "warmup", "warmup_windows": 3}}
    frame = pd.DataFrame([{"event_time": e["event_time"], **e["features"]}
                          for e in _events(3_000, T0, 6 * MINUTE, seed=5)])
    result = dw.judge_stream(reference=None, current=frame, config=config, model="m")
    judged = result.verdicts[result.verdicts["gate_ks"].notna()]
    assert sorted(set(judged["window_start"])) == [pd.Timestamp(T0 + w * MINUTE, unit="ms", tz="UTC")
                                                   for w in (3, 4, 5)]  # the warm-up windows: counted only


def test_without_a_config_the_kinds_are_inferred_and_said():
    rng = np.random.default_rng(1)
    reference = pd.DataFrame({"x": rng.normal(0, 1, 5000), "y": rng.choice(list("abc"), 5000)})
    current = pd.DataFrame({"x": rng.normal(0.5, 1, 1500), "y": rng.choice(list("abc"), 1500)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = dw.judge(reference=reference, current=current)
    [note] = result.notes
    assert "x numeric, y categorical" in note and "pass config=" in note
    assert [str(w.message) for w in caught] == [note]
    assert dict(zip(result.verdicts["feature"], result.verdicts["drifted"])) == {"x": True, "y": False}
    assert result.config.window.size_ms == 60_000 and result.config.models[0].features == {"x": "numeric",
                                                                                            "y": "categorical"}


def test_rows_the_job_would_reject_are_counted_and_named_and_the_rest_judged(files):
    """A row without a readable time is rejected (counted, named, left out); a value of the wrong type is
    that value's problem: counted invalid for its feature, the rest of the row judged (as the job does)."""
    config, reference, _ = files
    times = [T0 + 30 * MINUTE, "soon", T0 + 30 * MINUTE + 1] * 200
    frame = pd.DataFrame({"event_time": times, "x": [0.1, 0.2, "high"] * 200, "c": ["a", "b", "c"] * 200})
    result = dw.judge(reference=reference, current=frame, config=config, model="m")
    assert result.counts == {"read": 600, "valid": 400, "rejected": 200, "late": 0}
    assert {reason for _, reason, _ in result.rejections} == {"bad_event_time"}
    assert "200 of 600 current rows rejected" in result.notes[-1] and "row 2: bad_event_time" in result.notes[-1]
    x = result.verdicts.set_index("feature").loc["x"]
    assert (x["count"], x["invalid"]) == (200, 200)  # the 200 "high" are invalid values, not rows lost


def test_the_table_and_the_page(files, tmp_path):
    config, reference, current = files
    result = dw.judge(reference=reference, current=current, config=config)
    assert list(result.verdicts.columns)[:6] == ["model", "window_start", "window_end", "feature", "segment", "kind"]
    assert list(result.verdicts["feature"]) == ["x", "c", "prediction"]
    page = result.to_html(tmp_path / "verdicts.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "2 of 3 verdicts drifted" in page
    assert page.index(">x<") < page.index("1 quiet verdicts") < page.index(">prediction<")  # drifted first, quiet folded
    assert result._repr_html_() in page
    assert repr(result) == "<Judgement: 1 window(s), 3 verdicts, 2 drifted: c, x>"


def test_names_from_the_data_are_escaped_in_the_page(tmp_path):
    rng = np.random.default_rng(2)
    reference = pd.DataFrame({"<script>alert(1)</script>": rng.normal(0, 1, 3000)})
    current = pd.DataFrame({"<script>alert(1)</script>": rng.normal(2, 1, 500)})
    page = dw.judge(reference=reference, current=current, model="<b>m</b>")._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<b>m" not in page


def test_segmented_models_get_a_verdict_per_segment(tmp_path):
    config = {**CONFIG, "models": [{**CONFIG["models"][0], "segments": {"by": ["c"], "top": 2, "min_count": 100}}]}
    reference = pd.DataFrame([{"event_time": e["event_time"], **e["features"]} for e in _events(8_000, T0, 20 * MINUTE)])
    current = pd.DataFrame({"x": np.r_[np.random.default_rng(6).normal(0, 1, 700), np.random.default_rng(7).normal(
        1.0, 1, 300)], "c": ["a"] * 700 + ["b"] * 300})
    verdicts = dw.judge(reference=reference, current=current, config=config, model="m").verdicts
    by_segment = verdicts[verdicts["feature"] == "x"].set_index("segment")["drifted"]
    assert by_segment.to_dict() == {None: True, "c=a": False, "c=b": True}


def test_judge_stream_needs_event_times_and_judge_a_reference():
    frame = pd.DataFrame({"x": [1.0, 2.0]})
    with pytest.raises(ConfigError, match="add an event_time column"):
        dw.judge_stream(reference=frame, current=frame)
    with pytest.raises(ConfigError, match="nothing to compare with"):
        dw.judge(reference=None, current=frame)


def test_importing_the_package_stays_light():
    """``driftwarden/__init__.py`` exports the front door lazily: the bottom layer imports no numpy,
    scipy or pandas, and ``dw.judge`` brings them in when first used."""
    code = ("import sys, driftwarden, driftwarden.core.errors; heavy = {'numpy', 'scipy', 'pandas'} & set(sys.modules); "
            "print(sorted(heavy)); driftwarden.judge; print(sorted({'numpy', 'pandas'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["[]", "['numpy', 'pandas']"]
    assert {"judge", "judge_stream", "Judgement"} <= set(dir(dw))
    with pytest.raises(AttributeError, match="no attribute 'judgee'"):
        dw.judgee


def test_rows_without_a_model_take_the_configs_one_model_and_a_model_without_reference_is_said():
    rng = np.random.default_rng(3)
    reference = pd.DataFrame({"x": rng.normal(0, 1, 5000)})
    current = pd.DataFrame({"x": rng.normal(1, 1, 800)})
    one = {"models": [{"name": "payments", "features": {"x": "numeric"}}]}
    judged = dw.judge(reference=reference, current=current, config=one)
    assert list(judged.verdicts["model"]) == ["payments"] and judged.verdicts["drifted"].all()
    two = {"models": [{"name": "a", "features": {"x": "numeric"}}, {"name": "b", "features": {"x": "numeric"}}]}
    current_b = current.assign(model="b")
    unjudged = dw.judge(reference=reference.assign(model="a"), current=current_b, config=two)
    assert unjudged.verdicts["gate_ks"].isna().all() and not unjudged.verdicts["drifted"].any()
    assert unjudged.notes == ["model 'b' has no reference (the reference's rows are of a): its rows are counted, "
                              "not judged"]


def test_a_config_whose_topic_has_a_mapped_envelope_judges_the_contracts_rows_alike(files):
    """``source.envelope`` maps the config's topic; the front door's rows are in the contract's shape,
    so a config with a mapping (time in seconds under ``ts``, the model a constant, features at the
    root) must give the verdicts of the same config without one."""
    config, reference, current = files
    plain = dw.judge(reference=reference, current=current, config=config).verdicts
    envelope = {"event_time": {"field": "ts", "unit": "s"}, "model": {"value": "m"},
                "features": {"root": True, "exclude": ["request_id"]}}
    mapped = dw.judge(reference=reference, current=current, config={**CONFIG, "source": {"envelope": envelope}})
    pd.testing.assert_frame_equal(mapped.verdicts, plain)
    assert mapped.counts["rejected"] == 0 and bool(plain["drifted"].any())


def test_a_parquet_file_and_a_flat_jsonl_table_judge_as_their_dataframe(files, tmp_path):
    """The two table files (a row per event, a column per feature, no ``features`` object) read as
    the DataFrame they were written from: datetimes, nulls and the model column included."""
    config, reference, _ = files
    events = _events(1_200, T0 + 30 * MINUTE, MINUTE, shift=0.4, seed=8)
    frame = pd.DataFrame([{"event_time": pd.Timestamp(e["event_time"], unit="ms", tz="UTC"), "model": "m",
                           **e["features"], "prediction": e["prediction"]} for e in events])
    frame.loc[::7, "x"] = np.nan  # nulls: counted missing, the same way from every input
    frame["c"] = frame["c"].map({"a": "1", "b": "2", "c": "3", "zz": "zz"})  # labels that look like numbers stay text
    frame.to_parquet(tmp_path / "current.parquet")
    _write(tmp_path / "current.jsonl", [{**row, "x": None if np.isnan(row["x"]) else row["x"],
                                         "event_time": row["event_time"].value // 1_000_000}
                                        for row in frame.to_dict("records")])
    from_frame = dw.judge(reference=reference, current=frame, config=config)
    assert from_frame.verdicts.set_index("feature").loc["x", "missing"] == len(frame.loc[::7])
    for path in (tmp_path / "current.parquet", tmp_path / "current.jsonl"):
        assert dw.judge(reference=reference, current=path, config=config).reports == from_frame.reports, path
