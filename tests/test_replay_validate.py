"""The replay validator gives the one validator's verdict and reason for every record (pipeline.validation)."""

from __future__ import annotations

import orjson
import pytest

from driftwarden.replay.validate import ValidatedBatch, validate_batch
from driftwarden.schemas.config import MonitorConfig

CONFIG = MonitorConfig.model_validate({"models": [
    {"name": "a", "features": {"x": "numeric", "c": "categorical"}},
    {"name": "b", "features": {"x": "categorical"}},
]})
T = 1_767_225_600_000
VALUES = [
    {"event_time": T, "model": "a", "features": {"x": 1.0, "c": "u"}, "prediction": 7},
    {"event_time": T, "model": "b", "features": {"x": "s"}},          # valid for b, a mismatch under a's kinds
    {"event_time": T, "model": "a", "features": {"x": "s"}},          # mismatch for a
    {"event_time": T, "model": "b", "features": {"x": 2.0}},          # mismatch for b
    {"event_time": T, "model": "z", "features": {"x": [1]}},          # unmonitored, bad type anyway
    {"event_time": T, "model": "z", "features": {"x": "s", "c": 1}},  # unmonitored: any kinds
    {"event_time": T, "model": "a", "features": {"x": "s"}, "prediction": "no"},  # two faults: the same one named
    {"event_time": "nope", "model": "a", "features": {}},
    {"model": "a", "features": {}},
    [1, 2],
]


@pytest.mark.parametrize("order", [1, -1])
def test_verdicts_and_reasons_match_the_live_jobs(order):
    from driftwarden.pipeline.validation import REASON_SEPARATOR, reject_reason
    from driftwarden.schemas.config import feature_kinds_lookup

    raws = [orjson.dumps(value) for value in VALUES[::order]]
    batch = validate_batch(raws, CONFIG)
    for i, raw in enumerate(raws):
        expected = reject_reason(raw.decode(), feature_kinds_lookup(CONFIG))
        if expected is None:
            assert batch.reasons[i] is None and batch.event_ms[i] == T, raw
        else:
            assert f"{batch.reasons[i]}{REASON_SEPARATOR}{batch.details[i]}" == expected, raw
            assert (batch.event_ms[i], batch.models[i], batch.rows[i]) == (None, None, -1)


def test_each_monitored_models_features_are_gathered_as_columns():
    raws = [orjson.dumps(value) for value in VALUES]
    batch = ValidatedBatch.from_ipc(validate_batch(raws, CONFIG).to_ipc())  # as a worker hands it over
    # a value of the wrong type is a null in its column, counted invalid (its event is valid)
    assert {m: {n: c.to_pylist() for n, c in cols.items()} for m, cols in batch.columns.items()} == {
        "a": {"x": [1.0, None, None], "prediction": [7.0, None, None], "c": ["u", None, None]},
        "b": {"prediction": [None, None], "x": ["s", None]}}
    assert batch.rows[:2] == [0, 0] and batch.models[5] == "z" and batch.rows[5] == -1
    assert [(i, name, why.reason) for i, name, why in batch.invalid] == [
        (2, "x", "wrong_type:string"), (3, "x", "wrong_type:number"), (6, "x", "wrong_type:string"),
        (6, "prediction", "wrong_type:string")]


def test_the_live_jobs_python_validation_counts_unknown_features_as_replay_does(tmp_path):
    """ValidateRecord (the live job's validator for what Java cannot vouch for) and validate_batch
    agree on every valid record's unknown-feature count: an unmonitored model's features are
    counted, not judged unknown."""
    from driftwarden.jobs.udfs import ValidateRecord

    raws = [orjson.dumps(v) for v in VALUES + [{"event_time": T, "model": "a", "features": {"x": 1.0, "q": 3, "r": None}}]]
    batch = validate_batch(raws, CONFIG)
    valid = [i for i, reason in enumerate(batch.reasons) if reason is None]  # rejects would go to a DLQ topic
    live = ValidateRecord(CONFIG, f"sqlite:///{tmp_path}/store.db")
    live.open(None)
    try:
        rows = {i: list(live.eval("t", 0, i, None, None, T, raws[i])) for i in valid}
    finally:
        live.close()
    assert [rows[i][0][0] for i in valid] == [batch.unknown[i] for i in valid]
    assert [batch.unknown[i] for i in valid][-1] == 1 and sum(batch.unknown[i] for i in valid) == 1
