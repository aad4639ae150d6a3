"""Java's feature columns (``DW_FEATURES``) against the Python validation, on tricky and random events.

The live job takes the features of the records Java vouches for from Java's typed columns and
validates only the others in Python (jobs/feature_spec.py). That is right only if every record
Java vouches for is one the Python validation accepts, with exactly the same values. Runs the
real Java function in a local Flink job (batch mode) and compares record by record; the
prediction's column (``monitor_prediction``) is compared the same way, and with the live job's
Python validator (ValidateRecord) and replay's (validate_batch) on every valid record.
"""

from __future__ import annotations

import math
import random
import tempfile

import orjson
import pytest

from driftwarden.core.errors import InvalidEventError
from driftwarden.jobs.feature_spec import FeatureColumnSpec
from driftwarden.schemas.config import MonitorConfig, feature_kinds_lookup
from driftwarden.pipeline.columns import configured_values
from driftwarden.schemas.events import EventRules, validate_event

CONFIG = MonitorConfig.model_validate({"models": [
    {"name": "m", "features": {"x": "numeric", "y": "numeric", "c": "categorical"}},
    {"name": "n", "features": {"y": "numeric", "x": "categorical"}, "monitor_prediction": False},
]})
T = 1_767_225_600_000
PLAIN = b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1.5, "y": -2, "c": "a"}}'

TRICKY = [
    PLAIN,
    b'{"model": "m", "event_time": "2026-01-01T00:00:01.250Z", "features": {"c": null, "y": 1e5, "x": -0.0}}',
    b'{"event_time": "2026-01-01T00:00:01+02:00", "model": "m", "features": {"x": 0, "y": null, "c": "b"},'
    b' "prediction": 0.3, "request_id": "r1"}',
    b'  {"event_time": 1767225600000, "model": "n", "features": {"y": 12345678901234567, "x": "q"}}  \n',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": null}',
    b'{"event_time": 1767225600000, "model": "m", "prediction": 7, "features": {"x": 1, "y": 2, "c": "a"}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": -0.0}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": 12345678901234567}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": 1.7976931348623157e308}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": 5e-324}',
    b'{"event_time": 1767225600000, "model": "n", "features": {"y": 2, "x": "a"}, "prediction": 0.5}',
    # Python rejects these, or takes other values: Java must not vouch
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": true, "y": 1, "c": "a"}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": "1", "y": 1, "c": "a"}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 1, "c": 3}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 1, "c": ["a"]}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 1e400, "c": "a"}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 18446744073709551615, "c": "a"}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a", "x": 3}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a", "z": 1}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "caf\\u00e9"}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "\\ud800"}}',
    '{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "café"}}'.encode(),
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a\xff"}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": true}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": "1"}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": [1]}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": NaN}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": 1e400}',
    # valid in Python (an unsigned 64-bit integer, the last of two, beside a feature of that name):
    # Python fills the prediction's column
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": 18446744073709551615}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "prediction": 1, "prediction": 2}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a", "prediction": 3}, "prediction": 4}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "request_id": 7}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "extra": 1e999}',
    b'{"event_time": 1767225600000, "model": "m", "model": "n", "features": {"y": 2, "x": "a"}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}} x',
    b'{"event_time": 1767225600000.5, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}}',
    b'{"event_time": 1767225600, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}}',
    b'{"event_time": "2026-02-30T00:00:00Z", "model": "m", "features": {"x": 1, "y": 2, "c": "a"}}',
    b'{"event_time": "2026-01-01 00:00:00Z", "model": "m", "features": {"x": 1, "y": 2, "c": "a"}}',
    b'{"event_time": "2026-01-01T00:00:00", "model": "m", "features": {"x": 1, "y": 2, "c": "a"}}',
    b'{"event_time": 1767225600000, "model": "other", "features": {"x": 1, "y": 2, "c": "a"}}',
    b'{"event_time": 1767225600000, "model": "", "features": {"x": 1, "y": 2, "c": "a"}}',
    b'{"event_time": 1767225600000, "model": "m", "features": null}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 01, "y": 2, "c": "a"}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": NaN, "y": 2, "c": "a"}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a",}}',
    b'[1, 2]',
    b'not json',
]


PLAIN_SHAPES = 11  # TRICKY's first entries: Java vouches for these
#: Java vouches for these too: a monitored feature absent (a null), features and top-level fields no model
#: monitors (ignored whatever their type, their non-null features counted as unknown)
ALSO_VOUCHED = [
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a", "z": 1}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "request_id": 7}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a", "prediction": 3}, "prediction": 4}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a", "t": [1, {"u": null}]}, "o": {}}',
    b'{"event_time": 1767225600000.5, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}}',
]
TRICKY = [t for t in TRICKY if t not in ALSO_VOUCHED] + ALSO_VOUCHED + [
    # Java must not vouch: a number orjson reads otherwise hidden in an unmonitored field, a repeated name
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a", "t": [1e400]}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a", "t": 1, "t": null}}',
    b'{"event_time": 1767225600000, "model": "m", "features": {"x": 1, "y": 2, "c": "a"}, "o": [18446744073709551616]}',
]


def _random_number(rng: random.Random) -> str:
    choice = rng.randrange(7)
    if choice == 0:
        return repr(rng.gauss(0, 1e3))
    if choice == 1:
        return str(rng.randrange(-10**18, 10**18))
    if choice == 2:
        return f"{rng.uniform(-1, 1):.{rng.randrange(1, 20)}e}"
    if choice == 3:
        return f"{rng.random():.{rng.randrange(1, 25)}f}"
    if choice == 4:
        return rng.choice(["-0", "0", "-0.0", "5e-324", "1.7976931348623157e308", "2.2250738585072011e-308",
                           "9007199254740993", "0.1e1", "1E+2", "123456789012345678901234567890e-10"])
    if choice == 5:
        return repr(rng.random() * 10 ** rng.randrange(-300, 300))
    return str(rng.randrange(-10**6, 10**6))


def _random_events(n: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    events = []
    for _ in range(n):
        model = rng.choice(["m", "n"])
        if model == "m":
            fields = {"x": _random_number(rng), "y": _random_number(rng), "c": f'"{rng.choice("abc")}"'}
        else:
            fields = {"y": _random_number(rng), "x": f'"{rng.choice(["p", "q", ""])}"'}
        for name in fields:
            if rng.random() < 0.05:
                fields[name] = "null"
        names = list(fields)
        rng.shuffle(names)
        body = ", ".join(f'"{name}": {fields[name]}' for name in names)
        event_time = rng.choice([str(T + rng.randrange(10**6)), '"2026-01-01T00:00:00.123456Z"', '"2026-01-01T00:00:00.1Z"'])
        prediction = rng.choice(["", ', "prediction": null', f', "prediction": {_random_number(rng)}',
                                 f', "prediction": {_random_number(rng)}'])
        events.append(f'{{"event_time": {event_time}, "model": "{model}", "features": {{{body}}}{prediction}}}'.encode())
    return events


@pytest.fixture(scope="module")
def java_rows():
    """Run DW_FEATURES over the tricky and random events; (payload, row) pairs in input order."""
    return _java_rows(CONFIG, TRICKY + _random_events(3000))


@pytest.fixture(autouse=True, scope="module")
def _from_elements_folders(tmp_path_factory: pytest.TempPathFactory):
    """PyFlink's ``from_elements`` leaves an empty ``tempfile.mkdtemp()`` folder behind each call: make them in
    pytest's folder for this module, not in /tmp."""
    saved = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("from_elements"))
    yield
    tempfile.tempdir = saved


def _java_rows(config: MonitorConfig, payloads: list[bytes]):
    """Run DW_FEATURES with ``config``'s spec (its envelope mapping included) over ``payloads``."""
    from pyflink.table import DataTypes

    from driftwarden.jobs.flink_env import make_table_env

    spec = FeatureColumnSpec.from_config(config)
    _, t_env = make_table_env(checkpoint_interval_ms=0, streaming=False)
    table = t_env.from_elements([(i, p) for i, p in enumerate(payloads)],
                                DataTypes.ROW([DataTypes.FIELD("i", DataTypes.INT()),
                                               DataTypes.FIELD("v", DataTypes.BYTES())]), verify_schema=False)
    t_env.create_temporary_view("payloads", table)
    columns = ", ".join(f"f.`{name}`" for name in ["ok"] + spec.names)
    literal = spec.to_json().replace("'", "''")
    sql = f"SELECT i, {columns} FROM (SELECT i, DW_FEATURES(v, '{literal}') AS f FROM payloads)"
    with t_env.execute_sql(sql).collect() as results:
        rows = {row[0]: tuple(row)[1:] for row in results}
    return spec, [(p, rows[i]) for i, p in enumerate(payloads)]


def _python_values(payload: bytes, spec: FeatureColumnSpec, config: MonitorConfig = CONFIG):
    """The values Python validation takes from the payload, by column; None when it rejects it."""
    kinds_of = feature_kinds_lookup(config)
    try:
        event = validate_event(payload, kinds_of, EventRules.of(config.source))
    except InvalidEventError:
        return None
    if event.model not in spec.columns_of:
        return "not monitored"
    if event.invalid:
        return "has invalid values"  # counted by Python, never vouched for by Java
    values, _ = configured_values(event.features, kinds_of(event.model), event.by_kind, event.prediction)
    return spec.row_values(event.model, values)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


def test_every_vouched_record_is_valid_in_python_with_the_same_values(java_rows):
    spec, pairs = java_rows
    vouched = 0
    for payload, (ok, *java_values) in pairs:
        if not ok:
            continue
        vouched += 1
        python_values = _python_values(payload, spec)
        assert isinstance(python_values, list), (payload, python_values)
        assert all(_same(j, p) for j, p in zip(java_values, python_values)), (payload, java_values, python_values)
    assert vouched > 0.6 * len(pairs)  # the common shape is the common case (the rest is meant to be odd)


def test_java_vouches_for_the_plain_shapes_and_nothing_python_rejects(java_rows):
    spec, pairs = java_rows
    verdicts = {payload: ok for payload, (ok, *_) in pairs}
    assert all(verdicts[p] for p in TRICKY[:PLAIN_SHAPES] + ALSO_VOUCHED)
    for payload in TRICKY[PLAIN_SHAPES:]:
        assert verdicts[payload] == (payload in ALSO_VOUCHED), payload
    rejected_by_python = [p for p, _ in pairs if _python_values(p, spec) is None]
    assert rejected_by_python and not any(verdicts[p] for p in rejected_by_python)


def test_spec_gives_each_feature_name_and_kind_its_own_column():
    spec = FeatureColumnSpec.from_config(CONFIG)
    assert spec.kinds == ("numeric", "numeric", "categorical", "numeric", "categorical")
    assert spec.columns_of == {"m": {"x": 0, "y": 1, "c": 2, "prediction": 3}, "n": {"y": 1, "x": 4}}
    assert orjson.loads(spec.to_json())["models"] == {"m": {"x": 0, "y": 1, "c": 2}, "n": {"y": 1, "x": 4}}
    assert orjson.loads(spec.to_json())["prediction"] == {"m": 3}


def _prediction_of(payload: bytes):
    """The payload's prediction as the contract reads it: a float, None when absent or null."""
    value = orjson.loads(payload).get("prediction")
    return float(value) if type(value) in (int, float) else None  # another type: invalid (or rejected)


def test_the_prediction_takes_its_column_alike_in_java_the_live_validator_and_replay(java_rows, tmp_path):
    """Record for record: Java's column for the records it vouches for, ValidateRecord's (the live
    job's Python path) and replay's (validate_batch) for every valid one, hold the event's prediction
    for a model that monitors it and nothing for one that does not."""
    from driftwarden.jobs.udfs import ValidateRecord
    from driftwarden.replay.validate import validate_batch

    spec, pairs = java_rows
    column = spec.prediction_of["m"]
    payloads = [p for p, _ in pairs]
    replay = validate_batch(payloads, CONFIG)
    live = ValidateRecord(CONFIG, f"sqlite:///{tmp_path}/store.db")
    live.open(None)
    checked = {"vouched": 0, "validated": 0, "with a prediction": 0}
    try:
        for i, (payload, (ok, *java_values)) in enumerate(pairs):
            if replay.reasons[i] is not None:  # rejected: no row anywhere (the dead letters keep it)
                assert not ok, payload
                continue
            [(unknown, invalid, *python_values)] = live.eval("t", 0, i, None, None, T, payload)
            model = replay.models[i]
            if model not in spec.columns_of:
                assert all(v is None for v in python_values), payload
                continue
            columns = replay.columns[model]
            replayed = [None] * len(spec.kinds)
            for name, j in spec.columns_of[model].items():
                replayed[j] = columns[name][replay.rows[i]].as_py()
            assert all(_same(a, b) for a, b in zip(python_values, replayed)), (payload, python_values, replayed)
            if ok:
                checked["vouched"] += 1
                assert all(_same(a, b) for a, b in zip(java_values, python_values)), (payload, java_values, python_values)
            checked["validated"] += 1
            expected = _prediction_of(payload) if model == "m" else None
            checked["with a prediction"] += expected is not None
            assert _same(python_values[column], expected), (payload, python_values[column], expected)
    finally:
        live.close()
    assert min(checked.values()) > 500, checked


#: event_time values for DW_EVENT_MILLIS: integers of every length up to beyond 64 bits (one whose low 64
#: bits are an in-range time), decimals, exponents, signs, RFC 3339 texts, and things that are no time.
EVENT_TIMES = [str(T), str(T + 999), "-" + str(T), "0", "-0", str(T) + "1", "946684800000", "946684799999",
               "4102444799999", "4102444800000", "999999999999999999", "9223372036854775807",
               "9223372036854775808", str(2**64 + T), str(-(2**64) + T), str(2**65 + T), str(T) + ".9",
               str(T) + ".5", "1.7672256e12", "1.7672256E+12", "17672256000000e-1", "1e400", '"2026-01-01T00:00:01Z"',
               '"2026-01-01T00:00:01.999+01:00"', '"2026-01-01"', '"' + str(T) + '"', "null", "true", '"x"']


def test_java_event_time_is_pythons_for_every_event_it_keeps():
    """DW_EVENT_MILLIS (Java's event time, which places every record's window and moves its partition's
    watermark) gives Python's ``parse_event_time`` value for each valid one, and nothing where Python
    rejects the event time: a huge integer is not read as its low 64 bits (2**64 + T is not T)."""
    from pyflink.table import DataTypes

    from driftwarden.jobs.flink_env import make_table_env
    from driftwarden.schemas.events import parse_event_time

    payloads = [f'{{"event_time": {t}, "model": "m", "features": {{}}}}'.encode() for t in EVENT_TIMES]
    _, t_env = make_table_env(checkpoint_interval_ms=0, streaming=False)
    table = t_env.from_elements(list(enumerate(payloads)), DataTypes.ROW([DataTypes.FIELD("i", DataTypes.INT()),
                                                                         DataTypes.FIELD("v", DataTypes.BYTES())]),
                                verify_schema=False)
    t_env.create_temporary_view("times", table)
    with t_env.execute_sql("SELECT i, DW_EVENT_MILLIS(v) FROM times").collect() as results:
        java = {row[0]: row[1] for row in results}
    for i, payload in enumerate(payloads):
        try:
            python = parse_event_time(orjson.loads(payload)["event_time"])
        except (InvalidEventError, orjson.JSONDecodeError):
            python = None
        if python is not None:
            assert java[i] == python, payload
        else:
            assert java[i] is None, (payload, java[i])


MAPPED = MonitorConfig.model_validate({
    "source": {"envelope": {"event_time": {"field": "ts", "unit": "s"}, "model": {"field": "meta.model"},
                            "features": {"root": True, "exclude": ["request_id"]}, "prediction": {"field": "out.score"}}},
    "models": [{"name": "m", "features": {"x": "numeric", "c": "categorical", "flag": "boolean"}}]})


def _mapped_events(n: int, seed: int = 3) -> list[bytes]:
    """Flat records (time in seconds, the model nested, features at the top level) with unmonitored lists,
    objects and booleans, some monitored values of the wrong type, some odd times and duplicate fields."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        fields = {"ts": rng.choice([f"{1767225600 + rng.random() * 1000:.3f}", str(1767225600 + i), "1767225600.5",
                                    '"2026-01-01T00:00:01Z"', "null", '"x"']),
                  "meta": rng.choice(['{"model": "m"}', '{"model": "m", "k": [1, 2]}', '{"model": 3}', '{}']),
                  "x": rng.choice([_random_number(rng), "null", '"1.5"', "true", "[1]"]),
                  "c": rng.choice(['"a"', '"b"', "null", "7", "false"]),
                  "flag": rng.choice(["true", "false", "null", '"true"', "1"]),
                  "request_id": f'"r{i}"', "debug": rng.choice(["[1, 2]", '{"k": {"j": null}}', "true", '"s"'])}
        if rng.random() < 0.5:
            fields["out"] = rng.choice(['{"score": 0.25}', '{"score": null}', '{"score": "hi"}', "{}"])
        names = list(fields)
        rng.shuffle(names)
        body = ", ".join(f'"{name}": {fields[name]}' for name in names)
        if rng.random() < 0.03:
            body += ', "x": 2'
        events.append(("{" + body + "}").encode())
    return events


def test_java_and_python_agree_record_by_record_under_a_mapped_envelope():
    """With ``source.envelope`` (time in seconds, a nested model, features at the top level, a nested
    prediction) and a boolean feature, every record Java vouches for is valid in Python with the same values
    by column (the boolean as "true"/"false"), and Java vouches for none with a value Python counts invalid;
    the common flat record, unmonitored lists and objects beside it, is vouched for."""
    spec, pairs = _java_rows(MAPPED, _mapped_events(3000))
    verdicts = {"vouched": 0, "python only": 0}
    for payload, (ok, *java_values) in pairs:
        python_values = _python_values(payload, spec, MAPPED)
        if not ok:
            verdicts["python only"] += 1
            continue
        verdicts["vouched"] += 1
        assert isinstance(python_values, list), (payload, python_values)
        assert all(_same(j, p) for j, p in zip(java_values, python_values)), (payload, java_values, python_values)
    assert min(verdicts.values()) > 100, verdicts  # most records here are meant to be odd
    flat = b'{"ts": 1767225600.25, "meta": {"model": "m"}, "x": 1.5, "c": "a", "flag": true, "debug": [1, 2], "o": {}}'
    [(_, (ok, *values))] = _java_rows(MAPPED, [flat])[1]
    assert ok and values == [1.5, "a", "true", None]
