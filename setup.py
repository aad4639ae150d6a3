"""Build hook of the wheel: the jars the streaming job needs travel inside it (``driftwarden/jobs/jars``).

pyproject.toml holds the project's metadata; this file only adds the jars, in the layout of the cache's
``jars/`` folder (driftwarden.jobs.flink_env.jar_dir reads them from there when installed):

* ``udf/driftwarden-flink-udf.jar``: the Java side of the job (jobs/java), taken from the cache when it was
  built from the same sources (scripts/udf_hash.sh), else built with Maven;
* ``flink/flink-sql-connector-kafka-5.0.0-2.2.jar`` and Flink's Prometheus reporter
  ``plugins/metrics-prometheus/flink-metrics-prometheus-2.2.1.jar``: from Maven Central (scripts/jars/pom.xml),
  taken from the cache that scripts/bootstrap.sh fills, else fetched with Maven.

The cache is ``$DRIFTWARDEN_CACHE_DIR`` or ``.cache`` of the checkout. Building without a cache needs Maven and
a JDK 17. An editable install (``pip install -e .``) adds nothing: a checkout reads the cache itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
UDF_JAR = "udf/driftwarden-flink-udf.jar"
#: jar (path under jars/) -> the profile of scripts/jars/pom.xml that fetches it
MAVEN_CENTRAL_JARS = {
    "flink/flink-sql-connector-kafka-5.0.0-2.2.jar": "flink",
    "plugins/metrics-prometheus/flink-metrics-prometheus-2.2.1.jar": "flink-metrics",
}


def _cache_jars() -> Path:
    return Path(os.environ.get("DRIFTWARDEN_CACHE_DIR") or ROOT / ".cache") / "jars"


def _maven(*args: str) -> None:
    if shutil.which("mvn") is None:
        raise SystemExit("building the wheel needs the job's jars: run scripts/bootstrap.sh first, or install Maven "
                         "(and a JDK 17) so that the build can fetch and build them")
    subprocess.run(["mvn", "-q", "-B", *args], check=True)


def udf_jar() -> Path:
    """The UDF jar built from this tree's jobs/java: the cache's when its stamp matches, else built now."""
    cached = _cache_jars() / UDF_JAR
    wanted = subprocess.run(["bash", str(ROOT / "scripts" / "udf_hash.sh"), str(ROOT / "jobs" / "java")],
                            check=True, capture_output=True, text=True).stdout.strip()
    stamp = cached.with_name(cached.name + ".sha")
    if cached.is_file() and stamp.is_file() and stamp.read_text().strip() == wanted:
        return cached
    _maven("-f", str(ROOT / "jobs" / "java" / "pom.xml"), "-DskipTests", "package")
    built = sorted((ROOT / "jobs" / "java" / "target").glob("driftwarden-flink-udf-*.jar"))
    if not built:
        raise SystemExit("Maven built no driftwarden-flink-udf jar in jobs/java/target")
    return built[-1]


def maven_central_jar(name: str, profile: str, scratch: Path) -> Path:
    """A jar of scripts/jars/pom.xml: the cache's, else fetched now into ``scratch``."""
    cached = _cache_jars() / name
    if cached.is_file():
        return cached
    folder = scratch / profile
    _maven("-f", str(ROOT / "scripts" / "jars" / "pom.xml"), f"-P{profile}", "dependency:copy-dependencies",
           f"-DoutputDirectory={folder}", "-DincludeScope=runtime")
    return folder / Path(name).name


class BuildWithJars(build_py):
    """build_py that also copies the job's jars into the built package (not for an editable install)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "driftwarden" / "jobs" / "jars"
        with tempfile.TemporaryDirectory(prefix="driftwarden-jars-") as scratch:
            jars = {UDF_JAR: udf_jar()}
            jars.update({name: maven_central_jar(name, profile, Path(scratch))
                         for name, profile in MAVEN_CENTRAL_JARS.items()})
            for name, source in jars.items():
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target / name)


setup(cmdclass={"build_py": BuildWithJars})
