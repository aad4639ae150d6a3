"""A seeded corpus of hostile records: what a broken or malicious producer can put on a topic.

:func:`malformed` makes records that every validation rejects (NUL bytes anywhere, bytes that are
not UTF-8, lone surrogates, names longer than the store's columns, deep nesting, numbers beyond
a double or a long, truncated JSON, ...), each with the event time of where it is inserted, so
that none is late. :func:`bad_values` makes events whose only faults are their values or fields no
model monitors (a NUL category on a numeric feature, a text prediction, hostile unmonitored names
holding lists or objects): the value is its feature's problem, the event is windowed.
:func:`hostile_valid` makes VALID events whose names or values are hostile (a NUL in an unmonitored
model's name, a 300-character model name, a NUL in a category value): they are windowed and stored
like any other. :func:`interleave` mixes them into a good stream.
"""

from __future__ import annotations

import numpy as np
import orjson

LONG = 300  # longer than the store's 200-character name columns


def _event(t: int, **fields: object) -> dict:
    return {"event_time": t, "model": "m", "features": {"f0": 0.5}, **fields}


def _kinds(t: int, rng: np.random.Generator) -> list[bytes]:
    """One record of each malformed kind, stamped ``t`` where an event time is readable."""
    junk = rng.bytes(int(rng.integers(1, 40)))
    dumps = orjson.dumps
    return [
        b"\x00" + junk,                                                   # raw NUL + random bytes
        junk.replace(b"{", b"") + b"\x00",                                # random bytes ending in NUL
        f'{{"event_time": {t}, "model": "m", "features": {{"f0": "'.encode() + b"\xff\xfe" + b'"}}',  # not UTF-8
        f'{{"event_time": {t}, "model": "m\\ud800", "features": {{}}}}'.encode(),  # lone surrogate
        dumps(_event(t, model="m\x00x", features=[1])),                    # NUL model, bad features
        dumps(_event(t, features=[{"f\x00" + "x" * int(rng.integers(0, 5)): [1]}])),  # NUL name inside bad features
        dumps(_event(t, model="m" * LONG, features="yes")),                # long model, bad features
        dumps(_event(t, features=[{"f" * (LONG + 200): {"x": 1}}])),       # long name inside bad features
        f'{{"event_time": {t}, "model": "m", "features": {{"f0": {"[" * 3000}{"]" * 3000}}}}}'.encode(),  # deep
        f'{{"event_time": 1e400, "model": "m", "features": {{"f0": 1}}}}'.encode(),  # beyond a double
        f'{{"event_time": {t}, "model": "m", "features": {{"f0": -1e999}}}}'.encode(),
        f'{{"event_time": {2**64 + t}, "model": "m", "features": {{"f0": 1}}}}'.encode(),  # beyond a long
        dumps(_event(f"2026-01-01T00:00:00\x00Z")),                       # NUL in the event time
        dumps(_event(t, model="")),
        dumps({"event_time": t, "model": "m"}),                            # no features
        dumps(_event(t))[: int(rng.integers(1, 30))],                      # truncated
        b"", b"null", b"[]", b'"m"',
    ]


def malformed(n: int, times: list[int], seed: int = 7) -> list[tuple[int, bytes]]:
    """``n`` (position, record) pairs: each record rejected by validation, at a random position in
    a stream whose event times are ``times``, stamped with the time of the event before it."""
    rng = np.random.default_rng(seed)
    positions = np.sort(rng.integers(1, len(times), size=n))
    out = []
    for i, pos in enumerate(positions.tolist()):
        kinds = _kinds(times[pos - 1], rng)
        out.append((pos, kinds[i % len(kinds)]))
    return out


def _bad_value_kinds(t: int, rng: np.random.Generator) -> list[tuple[bytes, str]]:
    """(record, model) of each kind of event kept with a bad value or a hostile unmonitored field, stamped ``t``."""
    dumps = orjson.dumps
    return [
        (dumps(_event(t, features={"f0": "a\x00b"})), "m"),                                 # NUL category on numeric f0
        (dumps(_event(t, prediction="yes")), "m"),                                          # a text prediction
        (dumps(_event(t, features={"f\x00" + "x" * int(rng.integers(0, 5)): [1]})), "m"),   # NUL unmonitored name, a list
        (dumps(_event(t, features={"f" * (LONG + 200): {"x": 1}})), "m"),                    # long unmonitored name, an object
        (dumps(_event(t, model="m" * LONG, prediction="yes")), "m" * LONG),                 # long unmonitored model
    ]


def bad_values(n: int, times: list[int], seed: int = 9) -> list[tuple[int, bytes, str]]:
    """``n`` (position, record, model) triples of events kept despite bad values or hostile unmonitored
    fields (:func:`_bad_value_kinds`), at random positions, stamped with the time of the event before."""
    rng = np.random.default_rng(seed)
    positions = np.sort(rng.integers(1, len(times), size=n))
    out = []
    for i, pos in enumerate(positions.tolist()):
        kinds = _bad_value_kinds(times[pos - 1], rng)
        record, model = kinds[i % len(kinds)]
        out.append((pos, record, model))
    return out


def hostile_valid(times: list[int], per_kind: int, seed: int = 8) -> list[tuple[int, bytes, str]]:
    """(position, record, model) of valid events with hostile names or values."""
    rng = np.random.default_rng(seed)
    out = []
    for k, model in enumerate(("n\x00m", "v" * LONG, "m")):
        for pos in np.sort(rng.integers(1, len(times), size=per_kind)).tolist():
            features = {"f0": 0.5, "c0": "a\x00b"} if model == "m" else {"x\x00": "y\x00"}
            out.append((pos, orjson.dumps({"event_time": times[pos - 1], "model": model, "features": features}),
                        model))
    return out


def interleave(good: list[bytes], extra: list[tuple]) -> list[bytes]:
    """The good records with each extra record inserted before the good record at its position."""
    by_position: dict[int, list[bytes]] = {}
    for pos, record, *_ in extra:
        by_position.setdefault(pos, []).append(record)
    out = []
    for i, record in enumerate(good):
        out.extend(by_position.get(i, ()))
        out.append(record)
    return out
