"""The event-time rules live (Java ``EventTimeRules`` with the Python validator) and in replay, record by record.

The live job's source task applies the window, future-clock and late rules in Java before any Python
sees a record (``jobs/java`` ``EventTimeRules``); the records it turns away or cannot vouch for then
go through the one Python validator (``jobs/udfs.py`` ``ValidateRecord``). Replay (and the notebook
front door) apply the same rules in Python (``pipeline/event_time.py``, ``pipeline/windowing.py``).
Both are run here over the same random and tricky records, two partitions interleaved, and every
record must end the same way: windowed, late, or rejected with the same reason. The Java side is the
class the operator runs, through its command-line harness (``EventTimeDump``).
"""

from __future__ import annotations

import base64
import json
import random
import subprocess

import orjson
import pytest

from driftwarden.pipeline.judging import drift_policy
from driftwarden.pipeline.references import References
from driftwarden.replay.engine import Replayer
from driftwarden.replay.records import RawRecord
from driftwarden.replay.setup import ReplaySetup
from driftwarden.schemas.config import MonitorConfig

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
S = 1000
CONFIG = MonitorConfig.model_validate({
    "window": {"size": "10s", "out_of_orderness": "2s", "max_future_skew": "1m"},
    "models": [{"name": "m", "features": {"x": "numeric", "c": "categorical"}}],
})
#: The same with a wrong-typed value rejecting its whole event (``source.on_invalid_value``).
STRICT = CONFIG.model_copy(update={"source": CONFIG.source.model_copy(update={"on_invalid_value": "reject_event"})})


def _record(rng: random.Random, event_ms: int) -> tuple[bytes, int]:
    """One record around ``event_ms`` and its Kafka timestamp: mostly valid, some broken in every way."""
    ts = event_ms + rng.randrange(0, 3 * S)
    valid = {"event_time": event_ms, "model": "m", "features": {"x": rng.gauss(0, 1), "c": rng.choice("ab")}}
    kind = rng.choices(["valid", "ahead", "bad_type", "bad_features", "no_model", "not_json", "bad_time", "future",
                        "future_bad", "no_ts", "unmonitored"], [60, 4, 4, 3, 3, 3, 3, 3, 2, 3, 3])[0]
    if kind == "ahead":  # a valid event far ahead of the stream: it makes the partition's next events late
        valid["event_time"] = event_ms + rng.randrange(20, 60) * S
        return orjson.dumps(valid), valid["event_time"]
    if kind == "bad_type":  # a wrong-typed value (rejects the event when strict), ahead or not
        valid["event_time"] = event_ms + rng.choice([0, rng.randrange(20, 60) * S])
        valid["features"]["x"] = "not a number"
    elif kind == "bad_features":  # invalid, but its time can be read: live, it moves its partition's mark
        valid["event_time"] = event_ms + rng.choice([0, rng.randrange(20, 60) * S])
        valid["features"] = "not an object"
    elif kind == "no_model":
        valid["event_time"] = event_ms + rng.choice([0, rng.randrange(20, 60) * S])
        del valid["model"]
    elif kind == "not_json":
        return b'{"event_time": ' + str(event_ms + 50 * S).encode() + b', "model": "m"', ts
    elif kind == "bad_time":
        valid["event_time"] = "soon"
    elif kind == "future":  # a bad clock: more than a minute ahead of its record's timestamp
        ts = event_ms - rng.randrange(2, 5) * 60 * S
    elif kind == "future_bad":
        ts = event_ms - rng.randrange(2, 5) * 60 * S
        valid["features"] = [7]
    elif kind == "no_ts":
        ts = rng.choice([0, -1])
    elif kind == "unmonitored":
        valid["model"] = "other"
    return orjson.dumps(valid), ts


def _stream(seed: int, n: int) -> list[RawRecord]:
    """Two partitions, each in its own rough event-time order, interleaved at random."""
    rng = random.Random(seed)
    clocks, offsets, records = [T0, T0], [0, 0], []
    for _ in range(n):
        p = rng.randrange(2)
        clocks[p] += rng.randrange(0, 700)
        event_ms = clocks[p] - rng.choice([0, 0, 0, rng.randrange(0, 15 * S)])  # some arrive out of order
        value, ts = _record(rng, event_ms)
        records.append(RawRecord(("t", p, offsets[p]), p, value, ts if ts > 0 else None))
        offsets[p] += 1
    return records


def _java_verdicts(records: list[RawRecord], config: MonitorConfig) -> list[str]:
    """EventTimeRules' verdict per record: '-' (to its window), 'envelope', 'future' or 'late'."""
    from driftwarden.jobs.java_summary import flink_classpath, udf_jar

    window = config.window
    lines = "".join(json.dumps({"value": base64.b64encode(r.value).decode(), "topic": r.coordinates[0],
                                "partition": r.partition, "offset": r.coordinates[2],
                                "timestamp": r.timestamp_ms if r.timestamp_ms is not None else -1}) + "\n"
                    for r in records)
    classpath = ":".join(str(p) for p in [udf_jar(), *flink_classpath()])
    done = subprocess.run(["java", "-cp", classpath, "dev.driftwarden.flink.EventTimeDump", str(window.size_ms),
                           str(window.out_of_orderness_ms), str(window.max_future_skew_ms)],
                          input=lines, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def _live(records: list[RawRecord], tmp_path, config: MonitorConfig = CONFIG) -> list[str]:
    """Each record's end in the live job: Java's verdict, then the Python side (ValidateRecord) with it."""
    from driftwarden.jobs.udfs import ValidateRecord

    verdicts = _java_verdicts(records, config)
    live = ValidateRecord(config, f"sqlite:///{tmp_path}/store.db")
    live.open(None)
    ends = []
    try:
        for record, verdict in zip(records, verdicts):
            rows = list(live.eval(*record.coordinates, None if verdict == "-" else verdict, None, 0, record.value))
            ends.append("windowed" if rows else live.rows[-1]["reason"])
            live.rows, live.payloads = [], []  # the dead letters are not written here
    finally:
        live.close()
    return ends


def _replayed(records: list[RawRecord], config: MonitorConfig = CONFIG) -> list[str]:
    """Each record's end in replay."""
    policy = drift_policy(config.thresholds, config.window.size_ms)
    replayer = Replayer(ReplaySetup(config, policy, References(config, policy), "warmup"), [0, 1])
    replayer.feed(records)
    outcome = replayer.finish()
    ends = {r.record.coordinates: r.reason for r in outcome.rejections}
    ends.update({record.coordinates: "late" for record, _ in outcome.late})
    return [ends.get(r.coordinates, "windowed") for r in records]


@pytest.mark.parametrize("seed, config", [(1, CONFIG), (2, CONFIG), (3, STRICT)])
def test_every_record_ends_alike_live_and_in_replay(seed, config, tmp_path):
    records = _stream(seed, 1500)
    live, replayed = _live(records, tmp_path, config), _replayed(records, config)
    differ = [(r.coordinates, r.value[:120], a, b) for r, a, b in zip(records, live, replayed) if a != b]
    assert not differ, differ[:10]
    ends = {end.split(":")[0] for end in live}
    assert {"windowed", "late", "future", "bad_features", "missing_model", "not_json", "bad_event_time"} <= ends
    assert ("type_mismatch" in ends) == (config is STRICT)
    assert live.count("late") > 20, live.count("late")


def test_a_rejected_record_with_a_readable_time_moves_its_partitions_mark(tmp_path):
    """Live, the source task reads a record's time before anything validates it: a bad record far
    ahead makes the partition's next on-time-looking event late, in replay as well."""
    def event(t: int, x) -> bytes:
        return orjson.dumps({"event_time": T0 + t * S, "model": "m", "features": {"x": x, "c": "a"}})

    bad = orjson.dumps({"event_time": T0 + 40 * S, "model": "m", "features": "none"})
    values = [event(1, 1.0), bad, event(2, 2.0), event(41, 3.0)]
    records = [RawRecord(("t", 0, i), 0, v, T0 + 60 * S) for i, v in enumerate(values)]
    assert _live(records, tmp_path) == _replayed(records) == ["windowed", "bad_features", "late", "windowed"]


def test_the_boundaries_of_each_rule_alike(tmp_path):
    """Each rule at its edge, to the millisecond: a window's last millisecond at the mark is late, one
    below it is not; a clock exactly max_future_skew ahead is not future, one millisecond more is; no
    timestamp is never future; each partition keeps its own mark."""
    skew = CONFIG.window.max_future_skew_ms

    def record(i: int, partition: int, t_ms: int, ts: int | None = None) -> RawRecord:
        value = orjson.dumps({"event_time": T0 + t_ms, "model": "m", "features": {"x": 1.0, "c": "a"}})
        return RawRecord(("t", partition, i), partition, value, T0 + t_ms if ts is None else ts)

    cases = [(0, 1_000), (0, 11_999), (0, 5_000),          # mark 9,999: the last ms of [0, 10 s): late
             (1, 1_000), (1, 11_998), (1, 5_000),          # mark 9,998: on time
             (0, 20_000, T0 + 20_000 - skew),              # exactly the skew ahead: not future
             (0, 20_001, T0 + 20_000 - skew),              # one ms more: future
             (1, 400_000, 0), (1, 12_000, -1)]             # no timestamp: never future
    records = [record(i, *case) for i, case in enumerate(cases)]
    expected = ["windowed", "windowed", "late", "windowed", "windowed", "windowed", "windowed", "future",
                "windowed", "late"]
    assert _live(records, tmp_path) == _replayed(records) == expected
