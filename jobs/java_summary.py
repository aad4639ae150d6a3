"""Run the Java window summary (jobs/java ``SummaryDump``) on records, for the cross-language tests.

The Java side is the live job's per-event path (``dev.driftwarden.flink.WindowSummaryAgg``); this
runs it outside Flink on the same records the Python implementation gets, so that both can be
compared byte for byte (sketches/FORMAT.md).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import subprocess
import tempfile
from pathlib import Path

from driftwarden.core.errors import ConfigError
from driftwarden.jobs.flink_env import UDF_JAR, jar_dir

SUMMARY_DUMP = "dev.driftwarden.flink.SummaryDump"
#: the pyflink jars that hold the Flink classes the harness needs: flink-core (TypeSerializer,
#: DataOutputSerializer) and the shaded Jackson in flink-dist; flink-table-common
#: (AggregateFunction, DataTypes) in the table API uber jar.
FLINK_JARS = ("flink-dist-*.jar", "flink-table-api-java-uber-*.jar")


def udf_jar() -> Path:
    """The UDF jar: ``$DRIFTWARDEN_UDF_JAR`` when set, else the job's (:func:`driftwarden.jobs.flink_env.jar_dir`)."""
    jar = Path(os.environ.get("DRIFTWARDEN_UDF_JAR") or jar_dir() / UDF_JAR)
    if not jar.is_file():
        raise ConfigError(f"missing UDF jar {jar}: run scripts/bootstrap.sh (or set DRIFTWARDEN_UDF_JAR)")
    return jar


def flink_classpath() -> list[Path]:
    """The jars of the installed pyflink that the harness needs at run time."""
    spec = importlib.util.find_spec("pyflink")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("pyflink is not installed: run scripts/bootstrap.sh")
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    jars = [jar for pattern in FLINK_JARS for jar in sorted(lib.glob(pattern))]
    if len(jars) != len(FLINK_JARS):
        raise ConfigError(f"pyflink's lib folder {lib} lacks one of {FLINK_JARS}")
    return jars


def java_summaries(spec_json: str, records: list[dict], partials: int, jar: Path | None = None,
                   segments_json: str | None = None) -> list[tuple[str, int, bytes]]:
    """(model, window start, summary bytes) per window, sorted, as Java builds them from ``partials`` merged partials.

    ``records``: dicts with model, event_ms, topic, partition, offset, unknown and ``values`` (one per
    spec column, None for null; NaN and infinities travel as Python's json writes them); with
    ``segments_json`` (``jobs.drift_job.segments_json``) also ``segment``, the record's index among its
    model's segment keys, and each window is merged per segment as the job merges (kind 18 bytes).
    Raises RuntimeError with Java's message when the harness fails.
    """
    classpath = os.pathsep.join(str(p) for p in [jar or udf_jar(), *flink_classpath()])
    with tempfile.TemporaryDirectory(prefix="summary-dump-") as folder:
        spec_file, segments_file = Path(folder) / "spec.json", Path(folder) / "segments.json"
        spec_file.write_text(spec_json, encoding="utf-8")
        segments = ["--segments", str(segments_file)] if segments_json is not None else []
        if segments_json is not None:
            segments_file.write_text(segments_json, encoding="utf-8")
        done = subprocess.run(
            ["java", "-cp", classpath, SUMMARY_DUMP, str(spec_file), "--partials", str(partials), *segments],
            input="".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), capture_output=True, text=True,
            encoding="utf-8", check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{SUMMARY_DUMP} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    rows = []
    for line in done.stdout.splitlines():
        model, start, data = line.split("\t")
        rows.append((json.loads(model), int(start), base64.b64decode(data)))
    return sorted(rows, key=lambda row: (row[0], row[1]))
