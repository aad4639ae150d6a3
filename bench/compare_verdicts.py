"""Behaviour unchanged? The verdicts of two checkouts, compared field by field on the same inputs.

    .venv/bin/python bench/compare_verdicts.py --before /tmp/dw-before --after . [--quick] [--bootstrap-servers HOST:PORT]

Two inputs, each judged by both checkouts' own code (each in a process of its own, its checkout first
on ``PYTHONPATH``; a checkout from before the ``driftwarden.<folder>`` namespace imports as ``jobs``,
``replay`` ... and works the same way):

1. the detection bench (``bench/bench_detection.py``, ``--quick`` or its defaults): every verdict of
   every window it judges (each ``analyze_window`` call's FeatureVerdicts, all fields);
2. a replay of the demo's topic: the demo's own generator (``driftwarden.demo.scenario``, its
   defaults: 60 windows of 10 s, 4,000 events a window, 3 partitions, the six changes, a reference of
   20 drift-free windows) written once to a new Kafka topic, then ``driftwarden replay --topic ...
   --store-url sqlite:///...`` by each checkout, with the raw training events as the reference (each
   checkout builds it); the stored rows compared: ``window_results``, ``segment_results``,
   ``window_counts``, ``dead_letters`` (times of writing left out).

Floats are compared exactly (NaN equal to NaN). Prints, per input, how many verdicts were compared
and each differing field with its count and first examples; exits 1 when anything differs. The
topic is deleted at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve()
#: What a field added on one side may hold and still say nothing (a new column's empty values).
EMPTY = {"None", "0", "[]", "{}", "''", ""}
#: Written by the writing process, never compared.
UNCOMPARED = {"computed_at", "seen_at"}
TABLES = {"window_results": ("model", "feature", "window_start"),
          "segment_results": ("model", "feature", "segment", "window_start"),
          "window_counts": ("model", "window_start"), "dead_letters": ("topic", "partition", "offset")}
#: The development rig's Kafka (scripts/services.sh).
RIG_KAFKA = "127.0.0.1:59092"
DEMO = {"model": "credit-risk", "window_s": 10, "windows": 60, "per_window": 4000, "partitions": 3,
        "reference_windows": 20}


# ---- in the checkout's own process
def plain(value):
    """A verdict's field as JSON can hold it, exactly (floats by repr, NaN as text)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, BaseException):
        return type(value).__name__
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)):
        value = value.item()
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return f"<{type(value).__name__}>"


def collect_bench(checkout: Path, quick: bool) -> list[dict]:
    """Every verdict the checkout's detection bench judges, in order."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_detection", checkout / "bench" / "bench_detection.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls: list[dict] = []
    real = module.analyze_window

    def recorded(*args, **kwargs):
        verdicts = real(*args, **kwargs)
        calls.extend({"key": [len(calls), v.name], "row": plain(v)} for v in verdicts)
        return verdicts

    module.analyze_window = recorded
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            module.main(["--quick"] if quick else [])
        finally:
            sys.stdout = stdout
    return calls


def collect_replay(checkout: Path, args: argparse.Namespace, workdir: Path) -> list[dict]:
    """The rows the checkout's ``driftwarden replay --store`` writes for the demo's topic."""
    from sqlalchemy import create_engine, inspect, text

    store = workdir / "store.db"
    store.unlink(missing_ok=True)
    # Kafka: the config's bootstrap servers (both checkouts read them from there)
    argv = ["driftwarden", "replay", "--topic", args.topic, "--from", args.start, "--to", args.end,
            "--config", str(args.config), "--reference", str(args.reference),
            _store_option(checkout), f"sqlite:///{store}", "--no-progress"]
    done = subprocess.run([sys.executable, "-c", "import sys; from driftwarden.cli import main; sys.argv = "
                           f"{argv!r}; sys.exit(main())"], cwd=checkout, env=_env(checkout), capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"replay in {checkout} failed ({done.returncode}): {done.stderr[-3000:]}")
    engine = create_engine(f"sqlite:///{store}")
    rows = []
    with engine.connect() as conn:
        present = set(inspect(conn).get_table_names())
        for table, key in TABLES.items():
            if table not in present:
                continue
            for row in conn.execute(text(f"SELECT * FROM {table}")).mappings():
                row = {k: v for k, v in row.items() if k not in UNCOMPARED}
                rows.append({"key": [table, *[str(row[k]) for k in key]], "row": plain(row)})
    engine.dispose()
    return rows


def _store_option(checkout: Path) -> str:
    """Replay's store option in that checkout, as its own ``replay --help`` names it: ``--store-url``
    since every command's store option has that one name, ``--store`` before."""
    shown = subprocess.run([sys.executable, "-c", "import sys; from driftwarden.cli import main; "
                            "sys.argv = ['driftwarden', 'replay', '--help']; sys.exit(main())"],
                           cwd=checkout, env={**_env(checkout), "COLUMNS": "200"}, capture_output=True, text=True,
                           check=False).stdout
    return "--store-url" if "--store-url" in shown else "--store"


def collect(args: argparse.Namespace) -> None:
    """Collect both inputs' verdicts with this process's checkout; write them as JSON."""
    checkout = Path(args.checkout).resolve()
    with tempfile.TemporaryDirectory(prefix="dw-compare-") as folder:
        out = {"bench": collect_bench(checkout, args.quick), "replay": collect_replay(checkout, args, Path(folder))}
    Path(args.out).write_text(json.dumps(out))


# ---- in the driver's process
def _env(checkout: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(checkout)}


def prepare_demo_topic(args: argparse.Namespace, workdir: Path) -> None:
    """Write the demo's events to a new topic, the config and the training events; set the range on ``args``."""
    import orjson
    import yaml
    from confluent_kafka import Producer

    from confluent_kafka.admin import AdminClient, NewTopic

    from driftwarden.demo.scenario import StreamGenerator, make_schedule, training_snapshot
    from driftwarden.demo.stack import monitor_config

    window_ms = DEMO["window_s"] * 1000
    now = int(time.time() * 1000)
    base_ms = (now - DEMO["windows"] * window_ms) // window_ms * window_ms  # as the demo: recent, in the past
    generator = StreamGenerator(DEMO["model"], base_ms, window_ms, DEMO["per_window"], make_schedule(DEMO["windows"]))
    args.topic = f"dw-compare-{now}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap_servers})
    for future in admin.create_topics([NewTopic(args.topic, DEMO["partitions"], 1)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": args.bootstrap_servers, "linger.ms": 20})
    total = DEMO["windows"] * DEMO["per_window"]
    for start in range(0, total, 10_000):
        for i, event in enumerate(generator.events(start, min(10_000, total - start)), start=start):
            while True:
                try:
                    producer.produce(args.topic, orjson.dumps(event), partition=i % DEMO["partitions"],
                                     timestamp=generator.event_ms(i))
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.poll(0)
    if producer.flush(60):
        raise SystemExit("the demo's events could not all be written to Kafka")
    args.reference = workdir / "training.jsonl"
    args.reference.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in training_snapshot(
        DEMO["model"], base_ms, window_ms, DEMO["per_window"], DEMO["reference_windows"])))
    config = monitor_config(args.topic, args.bootstrap_servers, DEMO["model"], DEMO["window_s"],
                            {"mode": "file", "path": str(args.reference)}, None)
    args.config = workdir / "monitor.yaml"
    args.config.write_text(yaml.safe_dump(config))
    # --to is exclusive and must not lie in the future: the last record's timestamp is below it, and it is now or earlier
    args.start, args.end = str(base_ms), str(base_ms + DEMO["windows"] * window_ms)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Remove the topic this run made."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the deletion is done
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=30)


def run_checkout(checkout: Path, args: argparse.Namespace, out: Path) -> dict:
    """Collect one checkout's verdicts in a process of its own."""
    command = [sys.executable, str(HERE), "collect", "--checkout", str(checkout), "--out", str(out),
               "--topic", args.topic, "--bootstrap-servers", args.bootstrap_servers,
               "--from", args.start, "--to", args.end,
               "--config", str(args.config), "--reference", str(args.reference)] + (["--quick"] if args.quick else [])
    started = time.monotonic()
    subprocess.run(command, cwd=checkout, env=_env(checkout), check=True)
    print(f"{checkout}: collected in {time.monotonic() - started:.0f} s")
    return json.loads(out.read_text())


def differences(before: list[dict], after: list[dict]) -> tuple[int, Counter, dict, list, dict]:
    """(rows compared, differing fields and their counts, first examples per field, keys on one side
    only, fields on one side only with the values they hold there)."""
    old = {tuple(r["key"]): r["row"] for r in before}
    new = {tuple(r["key"]): r["row"] for r in after}
    common = sorted(old.keys() & new.keys(), key=str)
    old_fields = set().union(*(old[k] for k in common)) if common else set()
    new_fields = set().union(*(new[k] for k in common)) if common else set()
    added = {f"{name} (after only)": Counter(str(new[k].get(name)) for k in common) for name in new_fields - old_fields}
    added |= {f"{name} (before only)": Counter(str(old[k].get(name)) for k in common)
              for name in old_fields - new_fields}
    fields: Counter = Counter()
    examples: dict[str, list] = {}
    for key in common:
        for name in sorted(old_fields & new_fields):
            a, b = old[key].get(name, "<absent>"), new[key].get(name, "<absent>")
            if a != b and not _both_nan(a, b):
                fields[name] += 1
                examples.setdefault(name, [])
                if len(examples[name]) < 3:
                    examples[name].append((key, a, b))
    return len(common), fields, examples, sorted(old.keys() ^ new.keys(), key=str), added


def _both_nan(a, b) -> bool:
    return isinstance(a, str) and isinstance(b, str) and a == b == "nan"


def report(name: str, before: list[dict], after: list[dict]) -> bool:
    """Print one input's comparison; True when no verdict differs (a field one side lacks counts as a
    difference unless it holds nothing where it is present: None, 0 or empty, a column added since)."""
    compared, fields, examples, one_side, added = differences(before, after)
    print(f"\n{name}: {compared} verdicts/rows compared ({len(before)} before, {len(after)} after)")
    for key in one_side[:5]:
        print(f"  only on one side: {key}")
    for field, values in sorted(added.items()):
        print(f"  field {field}: {dict(values.most_common(3))}")
    for field, count in fields.most_common():
        print(f"  {field}: differs in {count}")
        for key, a, b in examples[field]:
            print(f"    {key}: before {str(a)[:120]}  after {str(b)[:120]}")
    meaningful = [f for f, values in added.items() if not set(values) <= EMPTY]
    same = not fields and not one_side and not meaningful
    print("  every verdict identical" if same else "  DIFFERENT")
    return same


def main(argv: list[str] | None = None) -> int:
    """Compare the two checkouts (or, with ``collect``, collect one)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="compare", choices=["compare", "collect", "report"],
                        help="compare: collect both checkouts and compare; report: compare the JSON that --keep wrote")
    parser.add_argument("--before", type=Path, help="the checkout before the change")
    parser.add_argument("--after", type=Path, default=HERE.parent.parent, help="the checkout after it (default: this one)")
    parser.add_argument("--quick", action="store_true", help="the detection bench's --quick run")
    parser.add_argument("--bootstrap-servers", default=os.environ.get("DRIFTWARDEN_BOOTSTRAP_SERVERS", RIG_KAFKA),
                        help=f"Kafka for the demo's topic ($DRIFTWARDEN_BOOTSTRAP_SERVERS, else the rig's {RIG_KAFKA})")
    parser.add_argument("--keep", type=Path, help="also write each checkout's verdicts (JSON) into this folder")
    for name in ("--checkout", "--out", "--topic", "--from", "--to", "--config", "--reference"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.start, args.end = getattr(args, "from"), args.to
    if args.mode == "collect":
        collect(args)
        return 0
    if args.mode == "report":
        if args.keep is None:
            parser.error("report needs --keep FOLDER (where a compare run kept before.json and after.json)")
        return _report_all(json.loads((args.keep / "before.json").read_text()),
                           json.loads((args.keep / "after.json").read_text()), args.quick)
    if args.before is None:
        parser.error("--before CHECKOUT is needed")
    with tempfile.TemporaryDirectory(prefix="dw-compare-") as folder:
        workdir = Path(folder)
        prepare_demo_topic(args, workdir)
        try:
            out = args.keep or workdir
            out.mkdir(parents=True, exist_ok=True)
            before = run_checkout(args.before.resolve(), args, out / "before.json")
            after = run_checkout(args.after.resolve(), args, out / "after.json")
        finally:
            delete_topic(args.bootstrap_servers, args.topic)
    return _report_all(before, after, args.quick)


def _report_all(before: dict, after: dict, quick: bool) -> int:
    """Print both inputs' comparisons; the exit status (1: a verdict differs)."""
    same = [report("detection bench" + (" (--quick)" if quick else ""), before["bench"], after["bench"]),
            report(f"replay of the demo's topic ({DEMO['windows']} windows, {DEMO['partitions']} partitions)",
                   before["replay"], after["replay"])]
    return 0 if all(same) else 1


if __name__ == "__main__":
    raise SystemExit(main())
