"""The replay validator gives the live job's verdict and reason for every record (jobs.udfs.reject_reason)."""

from __future__ import annotations

import orjson
import pytest

from replay.records import RawRecord
from replay.validate import Rejection, Validator
from schemas.config import MonitorConfig

CONFIG = MonitorConfig.model_validate({"models": [
    {"name": "a", "features": {"x": "numeric", "c": "categorical"}},
    {"name": "b", "features": {"x": "categorical"}},
]})
T = 1_767_225_600_000
VALUES = [
    {"event_time": T, "model": "a", "features": {"x": 1.0, "c": "u"}},
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
    from jobs.udfs import REASON_SEPARATOR, reject_reason

    validator = Validator(CONFIG)
    for value in VALUES[::order]:
        raw = orjson.dumps(value)
        expected = reject_reason(raw.decode(), CONFIG)
        got = validator.check(RawRecord(("f", 1), 0, raw))
        if expected is None:
            assert not isinstance(got, Rejection), value
        else:
            assert isinstance(got, Rejection), value
            assert f"{got.reason}{REASON_SEPARATOR}{got.detail}" == expected, value
