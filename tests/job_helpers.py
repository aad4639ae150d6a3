"""Event streams and store readers shared by the streaming-job tests."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import yaml
from sqlalchemy import select

from driftwarden.core.store import make_engine
from driftwarden.schemas.events import parse_event_time, rfc3339
from driftwarden.schemas.tables import dead_letters, window_counts, window_results

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
WINDOW_MS = 10_000
FEATURES = {"f0": "numeric", "f1": "numeric", "f2": "numeric", "c0": "categorical"}


def stream(n_windows: int, per_window: int, shift_from: int | None = None, seed: int = 1,
           start_ms: int = T0, model: str = "m") -> list[dict]:
    """Events in event-time order; from window ``shift_from`` on, f0's mean moves by 1.5 sd. Every fifth
    event carries a feature the config does not know (``extra``, counted as unknown) and a text for the
    numeric f2 (``"n/a"``, counted invalid for f2): the job's source task leaves such an event to Python's
    validation, so both ways into a window run (jobs/drift_job.py)."""
    rng = np.random.default_rng(seed)
    events = []
    step = WINDOW_MS / per_window
    for w in range(n_windows):
        shift = 1.5 if shift_from is not None and w >= shift_from else 0.0
        for i in range(per_window):
            t = int(start_ms + w * WINDOW_MS + i * step)
            events.append({
                "event_time": rfc3339(t) if i % 2 else t, "model": model, "request_id": f"{w}-{i}",
                "features": {"f0": float(rng.normal(shift, 1)), "f1": float(rng.gamma(2.0, 1.0)),
                             "f2": None if i % 50 == 0 else float(rng.uniform()), "c0": str(rng.choice(list("abcd"))),
                             **({"extra": 1, "f2": "n/a"} if i % 5 == 0 else {})},
            })
    return events


def with_late_records(records: list, n_windows: int, at_end: int = 5) -> tuple[list, list[dict]]:
    """``records`` (one partition's, in order) with late events of model m: one right behind the first
    event that makes window k late (its event time - 2 s, the partition's watermark, passes the
    window's end: no timing can save it), for each window k < ``n_windows - 1``, and ``at_end`` more
    for the first window at the end. Returns the records and the late events among them."""
    out, late, next_window = [], [], 1
    for record in records:
        out.append(record)
        event_ms = parse_event_time(record["event_time"]) if isinstance(record, dict) else None
        if event_ms is not None and event_ms - 2_000 >= T0 + next_window * WINDOW_MS and next_window < n_windows:
            late.append({"event_time": T0 + next_window * WINDOW_MS - 1, "model": "m", "features": {"f0": 0.0}})
            out.append(late[-1])
            next_window += 1
    tail = [{"event_time": T0 + 1_000 + i, "model": "m", "features": {"f0": 0.0}} for i in range(at_end)]
    return out + tail, late + tail


def late_partitions(events: list[dict], n_windows: int, seed: int = 3) -> tuple[list[list[dict]], int]:
    """The events dealt over two partitions, each out of order within 0.48 s (12 events; the test
    configs allow 2 s) and with late events (:func:`with_late_records`, none at the end).
    Returns each partition's records and the number of late events."""
    rng = np.random.default_rng(seed)
    partitions, late = [], 0
    for partition in (0, 1):
        own = events[partition::2]
        blocks = [own[i:i + 12] for i in range(0, len(own), 12)]
        shuffled = [e for block in blocks for e in rng.permutation(np.array(block, dtype=object)).tolist()]
        records, late_events = with_late_records(shuffled, n_windows, at_end=0)
        partitions.append(records)
        late += len(late_events)
    return partitions, late


def write_config(path: Path, topic: str, bootstrap: str, **window: object) -> Path:
    """A monitor config for the test streams, written as YAML."""
    config = {
        "source": {"topics": [topic], "bootstrap_servers": bootstrap, "group_id": f"g-{topic}"},
        "window": {"size": "10s", "out_of_orderness": "2s", **window},
        "reference": {"mode": "file"},
        "thresholds": {"min_count": 30},
        "models": [{"name": "m", "features": FEATURES}],
    }
    config["reference"]["path"] = str(path.parent / "reference.dwref")
    path.write_text(yaml.safe_dump(config))
    return path


def write_warmup_config(path: Path, topic: str, bootstrap: str) -> Path:
    """Production defaults but for 10 s windows; a warm-up reference from the stream itself (2 windows)."""
    path.write_text(yaml.safe_dump({
        "source": {"topics": [topic], "bootstrap_servers": bootstrap, "group_id": f"g-{topic}"},
        "window": {"size": "10s", "out_of_orderness": "2s"},
        "reference": {"mode": "warmup", "warmup_windows": 2},
        "models": [{"name": "m", "features": FEATURES}],
    }))
    return path


def stored_counts(url: str) -> Counter:
    """(model, window start ms) -> events windowed, from the store."""
    with make_engine(url).connect() as conn:
        rows = conn.execute(select(window_counts.c.model, window_counts.c.window_start, window_counts.c.events))
        return Counter({(m, int(ws.timestamp() * 1000)): n for m, ws, n in rows})


#: Every stored result column but the row id and the time it was computed.
RESULT_COLUMNS = [c.name for c in window_results.columns if c.name not in ("id", "computed_at")]


def stored_verdicts(url: str) -> dict[tuple[str, int, str], dict]:
    """(model, window start ms, feature) -> every stored result column (counts, scores, tests, verdict)."""
    with make_engine(url).connect() as conn:
        rows = conn.execute(select(window_results)).mappings()
        return {(r["model"], int(r["window_start"].timestamp() * 1000), r["feature"]):
                {c: r[c] for c in RESULT_COLUMNS} for r in rows}


def stored_late(url: str) -> Counter:
    """(model, window start ms) -> late events, as the store counts them per window."""
    with make_engine(url).connect() as conn:
        rows = conn.execute(select(window_counts.c.model, window_counts.c.window_start, window_counts.c.late))
        return Counter({(m, int(ws.timestamp() * 1000)): n for m, ws, n in rows})


def stored_dead_letter_keys(url: str) -> set[tuple[int, int, str]]:
    """(partition, offset, reason) of every dead letter."""
    with make_engine(url).connect() as conn:
        rows = conn.execute(select(dead_letters.c.partition, dead_letters.c.offset, dead_letters.c.reason))
        return {tuple(r) for r in rows}


def stored_dead_letters(url: str) -> Counter:
    """reason -> number of dead letters."""
    with make_engine(url).connect() as conn:
        return Counter(r for (r,) in conn.execute(select(dead_letters.c.reason)))


def assert_same_results(got: dict, expected: dict, where_differs: bool = False) -> None:
    """Two runs over the same input stored the same results: every column, bit for bit.

    Window summaries depend only on the set of their records (sketches/FORMAT.md), so counts,
    gate scores, deep tests and verdicts are identical at any parallelism, after a restart and
    in replay. ``where_differs``: the runs read the records from different places (a topic and a file
    of it), whose coordinates name and choose the invalid values' examples: that column is left out.
    """
    assert got.keys() == expected.keys()
    skip = {"invalid_examples"} if where_differs else set()
    differing = {key: (got[key], expected[key]) for key in expected
                 if {c: v for c, v in got[key].items() if c not in skip} != {c: v for c, v in expected[key].items() if c not in skip}}
    assert not differing, differing
