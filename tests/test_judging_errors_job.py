"""A category rename in the live job and in replay; a statistic forced to raise inside the live job.

Real Kafka and the embedded Flink job (``run_drift_job``, as ``driftwarden run`` starts it). The
job's Python functions run in loopback mode, inside this test's process: that is how the forced
failure reaches the job's own judging (``sketches.analysis.gate_scores_many`` patched to raise for
feature f1, the one statistic replaced; everything else is the production code and defaults).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from typer.testing import CliRunner

from driftwarden.alerting.metrics import StoreCollector
from driftwarden.core.store import make_engine
from driftwarden.cli import app
from driftwarden.jobs.drift_job import run_drift_job
from driftwarden.schemas.config import load_config
from driftwarden.schemas.events import parse_event_time
from tests.job_helpers import T0, WINDOW_MS, stored_counts, stored_verdicts, stream, write_config
from tests.kafka_helpers import create_topic, produce

pytestmark = [pytest.mark.services, pytest.mark.slow]

N_WINDOWS = 6
RENAMED_FROM = 3  # c0's values "a".."d" arrive as "A".."D" from this window on
PER_WINDOW = 300


def _renamed(events: list[dict]) -> list[dict]:
    out = []
    for event in events:
        if (parse_event_time(event["event_time"]) - T0) // WINDOW_MS >= RENAMED_FROM:
            event = {**event, "features": {**event["features"], "c0": event["features"]["c0"].upper()}}
        out.append(event)
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A reference built by `driftwarden reference build`; the renamed stream as a file."""
    folder = tmp_path_factory.mktemp("rename")
    snapshot = folder / "train.jsonl"
    snapshot.write_bytes(b"\n".join(orjson.dumps(e) for e in stream(12, PER_WINDOW, seed=7, start_ms=T0 - 3_600_000)))
    config = write_config(folder / "config.yaml", "unused", "127.0.0.1:1")
    result = CliRunner().invoke(app, ["reference", "build", "-i", str(snapshot), "-o", str(folder / "reference.dwref"),
                                      "-c", str(config)])
    assert result.exit_code == 0, result.output
    events = _renamed(stream(N_WINDOWS, PER_WINDOW, seed=8))
    (folder / "stream.jsonl").write_bytes(b"\n".join(orjson.dumps(e) for e in events))
    return folder, events


def _force_f1_to_raise(monkeypatch) -> None:
    from driftwarden.sketches import analysis

    real = analysis.gate_scores_many

    def gate_scores_many(cells, bins):
        if any(cell.name == "f1" for cell in cells):
            raise RuntimeError("forced for f1")
        return real(cells, bins)

    monkeypatch.setattr(analysis, "gate_scores_many", gate_scores_many)


def _judging_errors(url: str) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(StoreCollector(make_engine(url)))
    lines = generate_latest(registry).decode().splitlines()
    return {line.split("{")[1].split("}")[0]: float(line.rsplit(" ", 1)[1])
            for line in lines if line.startswith("driftwarden_judging_errors_total{")}


def test_live_job_judges_the_rename_and_lives_through_a_raising_statistic(setup, kafka_bootstrap, topic_name,
                                                                          tmp_path, monkeypatch):
    folder, events = setup
    create_topic(kafka_bootstrap, topic_name, partitions=1)
    produce(kafka_bootstrap, topic_name, events)
    (tmp_path / "reference.dwref").write_bytes((folder / "reference.dwref").read_bytes())
    config = load_config(write_config(tmp_path / "config.yaml", topic_name, kafka_bootstrap))
    url = f"sqlite:///{tmp_path}/store.db"
    _force_f1_to_raise(monkeypatch)

    run_drift_job(config, url, str(tmp_path / "reference.dwref"), bounded=True, checkpoint_interval_ms=0)

    windows = [T0 + k * WINDOW_MS for k in range(N_WINDOWS)]
    assert stored_counts(url) == {("m", start): PER_WINDOW for start in windows}  # every window stored, whole
    verdicts = stored_verdicts(url)
    for k, start in enumerate(windows):
        f1, c0 = verdicts["m", start, "f1"], verdicts["m", start, "c0"]
        assert (f1["error"], f1["drifted"], f1["count"]) == ("not judged: RuntimeError", False, PER_WINDOW)
        assert verdicts["m", start, "f0"]["error"] is None and verdicts["m", start, "f2"]["error"] is None
        renamed = k >= RENAMED_FROM
        assert (c0["drifted"], c0["severity"], c0["error"]) == (renamed, "major" if renamed else "none", None), (k, c0)
        if renamed:
            assert c0["gate_new_share"] == 1.0
            moved = [m["category"] for m in json.loads(c0["evidence"])["moved"]]
            assert moved and set(moved) <= set("ABCD"), moved
    assert _judging_errors(url) == {'model="m"': float(N_WINDOWS)}


@pytest.mark.parametrize("forced", [False, True])
def test_replay_judges_the_rename_and_names_a_raising_statistic(setup, tmp_path, monkeypatch, forced):
    folder, _ = setup
    if forced:
        _force_f1_to_raise(monkeypatch)
    report = tmp_path / "r.json"
    config = write_config(tmp_path / "config.yaml", "unused", "127.0.0.1:1")
    result = CliRunner().invoke(app, ["replay", "--input", str(folder / "stream.jsonl"), "--reference",
                                      str(folder / "reference.dwref"), "--config", str(config),
                                      "--report-json", str(report)])
    assert result.exit_code == 0, result.output
    doc = json.loads(report.read_text())
    cells = {(w["window_start"], f["name"]): f for w in doc["windows"] for f in w["features"]}
    starts = sorted({start for start, _ in cells})
    assert len(starts) == N_WINDOWS
    assert [cells[s, "c0"]["drifted"] for s in starts] == [k >= RENAMED_FROM for k in range(N_WINDOWS)]
    assert all(cells[s, "c0"]["gate"]["new_share"] == 1.0 for s in starts[RENAMED_FROM:])
    errors = sorted(name for (_, name), f in cells.items() if "error" in f)
    assert errors == (["f1"] * N_WINDOWS if forced else [])
    if forced:
        assert {cells[s, "f1"]["error"] for s in starts} == {"not judged: RuntimeError"}
        assert f"{N_WINDOWS} feature(s) not judged" in result.output
