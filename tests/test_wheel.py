"""The wheel works anywhere: built from this checkout, installed into a clean virtualenv in a temporary folder and
run from another folder, it holds one import name (``driftwarden``) and every jar the job needs, and its commands
run there: ``reference build``, ``replay``, ``run`` (embedded, and submitted to the standalone Flink cluster),
``alerts deliver``, ``status`` and ``dashboards build``.

The clean virtualenv sees this interpreter's site-packages through a ``.pth`` file (PyFlink and the other
dependencies are large: installing them again would take minutes and the network), never this checkout: the test
checks that ``driftwarden`` is imported from the virtualenv. Its run folder is ``$XDG_STATE_HOME/driftwarden``
in the temporary folder, and nothing is written into the checkout's ``.run``.

The monitor config holds ``store_url`` (a PostgreSQL schema) and the commands take no ``--store-url``: the
README's recipe, ``run`` then ``alerts deliver --config monitor.yaml``, delivers the alert the run raised.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from sqlalchemy import func, select

from driftwarden.alerting.signing import verify_webhook
from driftwarden.alerting.testing import WebhookReceiver
from driftwarden.core.paths import checkout_root
from driftwarden.core.store import make_engine
from driftwarden.jobs.flink_env import CONNECTOR_JAR, UDF_JAR, jar_dir
from driftwarden.jobs.flink_metrics import REPORTER_JAR
from driftwarden.schemas.tables import window_counts
from tests.conftest import REPO
from tests.kafka_helpers import create_topic, produce

#: What the build copies of the checkout leaves out: virtualenvs, run and cache folders, build outputs.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", ".run", ".cache", "build", "dist", "*.egg-info", "__pycache__",
                                     ".pytest_cache", ".hypothesis", "target", "out")
SECRET = "whsec_" + "d2hlZWwtdGVzdC1zZWNyZXQtd2hlZWwtdGVzdA=="
T0 = 1_790_000_040_000  # a window boundary (60 s windows)
EVENTS = 2000


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built (as ``pip wheel`` does) from a copy of this checkout's sources in a temporary folder."""
    work = tmp_path_factory.mktemp("wheel")
    shutil.copytree(REPO, work / "src", ignore=NOT_SOURCES)
    env = {**os.environ, "DRIFTWARDEN_CACHE_DIR": str(jar_dir().parent)}  # the jars bootstrap fetched and built
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                           str(work / "dist"), str(work / "src")], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (built,) = (work / "dist").glob("driftwarden-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A clean virtualenv with the wheel installed, seeing this interpreter's site-packages (the dependencies)."""
    folder = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    purelib = subprocess.run([str(folder / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "deps.pth").write_text("\n".join(dependency_folders()) + "\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(folder / "bin" / "python"), "install", "-q",
                           "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return folder


def dependency_folders() -> list[str]:
    """This interpreter's site-packages folders (those its own .pth files added too), also when the virtualenv
    lies inside the checkout (as `.venv` on CI); never the checkout's own folders (the .pth files of an added
    folder are not run, so the checkout's editable install does not follow)."""
    folders = [*site.getsitepackages(), *(p for p in sys.path if p.endswith("site-packages"))]
    return list(dict.fromkeys(p for p in folders if Path(p).is_dir() and Path(p).name == "site-packages"))


def test_the_wheel_holds_one_import_name_and_the_jobs_jars(wheel) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if "/" in n and not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"driftwarden"}, tops
    jars = {n.removeprefix("driftwarden/jobs/jars/") for n in names if n.endswith(".jar")}
    assert jars == {CONNECTOR_JAR, UDF_JAR, REPORTER_JAR}, jars
    for layer in ("core", "schemas", "sketches", "pipeline", "jobs", "replay", "latency", "alerting", "demo"):
        assert f"driftwarden/{layer}/__init__.py" in names, layer
    assert "driftwarden/schemas/replay_report.schema.json" in names


def test_the_wheels_udf_jar_is_built_from_these_sources(wheel) -> None:
    """The UDF jar in the wheel is the one built from this checkout's jobs/java (bootstrap's, when its stamp
    matches the sources), not an older one."""
    stamp = subprocess.run(["bash", str(REPO / "scripts" / "udf_hash.sh")], capture_output=True, text=True,
                           check=True).stdout.strip()
    cached = jar_dir() / UDF_JAR
    assert (cached.parent / (cached.name + ".sha")).read_text().strip() == stamp, "run scripts/bootstrap.sh"
    assert zipfile.ZipFile(wheel).read(f"driftwarden/jobs/jars/{UDF_JAR}") == cached.read_bytes()


def running_pids() -> set[int]:
    """The ids of the processes running now."""
    return {int(name) for name in os.listdir("/proc") if name.isdigit()}


def embedded_owner(path: Path, run: Path) -> int | None:
    """The process whose embedded-Flink folder ``path`` is in (``run/tmp/flink-embedded/<pid>/...``), else None.

    The test process's own in-process jobs (and other processes started before the test, from the checkout)
    may write there while the installed commands run: only folders of processes started since are theirs.

    >>> embedded_owner(Path("/r/tmp/flink-embedded/42/minicluster_x/tm_0"), Path("/r")), embedded_owner(Path("/r/x"), Path("/r"))
    (42, None)
    """
    parts = path.relative_to(run).parts
    if parts[:2] == ("tmp", "flink-embedded") and len(parts) > 2 and parts[2].isdigit():
        return int(parts[2])
    return None


def installed_env(home: Path) -> dict[str, str]:
    """The environment of the installed commands: no path into the checkout, the run folder under ``home``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DRIFTWARDEN_RUN_DIR", "DRIFTWARDEN_CACHE_DIR", "DRIFTWARDEN_STORE_URL",
                        "DRIFTWARDEN_BOOTSTRAP_SERVERS", "FLINK_CONF_DIR", "VIRTUAL_ENV")}
    return {**env, "XDG_STATE_HOME": str(home / "state"), "XDG_CACHE_HOME": str(home / "cache"),
            "DRIFTWARDEN_WEBHOOK_SECRET": SECRET, "DRIFTWARDEN_FLINK_METRICS_PORT": "off", "COLUMNS": "200"}


def write_inputs(folder: Path, topic: str, kafka: str, store_url: str, hook: str) -> None:
    """A reference file of x ~ N(0, 1), a topic (and a file) of x ~ N(2, 1): drift in both windows, and a monitor
    config whose store is ``store_url`` and whose one route posts to ``hook``."""
    rnd = random.Random(4)
    with (folder / "ref.jsonl").open("w") as fh:
        for i in range(6000):
            fh.write(json.dumps({"event_time": T0 - 3_600_000 + i * 500, "model": "m",
                                 "features": {"x": rnd.gauss(0, 1), "c": rnd.choice("ab")}}) + "\n")
    current = [{"event_time": T0 + i * 60, "model": "m", "features": {"x": rnd.gauss(2, 1), "c": rnd.choice("ab")}}
               for i in range(EVENTS)]
    (folder / "cur.jsonl").write_text("".join(json.dumps(e) + "\n" for e in current))
    create_topic(kafka, topic, partitions=1)
    produce(kafka, topic, current)
    (folder / "monitor.yaml").write_text(yaml.safe_dump({
        "source": {"topics": [topic], "bootstrap_servers": kafka, "group_id": f"g-{topic}", "start": "earliest"},
        "window": {"size": "60s", "idleness": "5s"},
        "reference": {"mode": "file", "path": "ref.dwref"},
        "models": [{"name": "m", "features": {"x": "numeric", "c": "categorical"}}],
        "store_url": store_url,
        "alerting": {"group_wait": "0s", "routes": [{"name": "hook", "url": hook, "allow_private": True,
                                                     "secret_env": "DRIFTWARDEN_WEBHOOK_SECRET"}]},
    }))


def events_stored(url: str) -> int:
    """Events the job put in windows, from the store."""
    with make_engine(url).connect() as conn:
        return conn.execute(select(func.coalesce(func.sum(window_counts.c.events), 0))).scalar_one()


@pytest.mark.services
@pytest.mark.slow
def test_installed_commands_work_from_any_folder(venv, tmp_path, kafka_bootstrap, flink_rest, pg_engine,
                                                 topic_name) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = installed_env(tmp_path)
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import driftwarden.jobs; print(driftwarden.jobs.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv), where  # the wheel's code, not the checkout's
    pg_url = pg_engine.url.render_as_string(hide_password=False)
    checkout_run = (checkout_root() or REPO) / ".run"
    before = set(checkout_run.rglob("*")) if checkout_run.is_dir() else set()
    running_before = running_pids()  # this test's commands start after: their pids are not among these

    def driftwarden(*args: str, expect: tuple[int, ...] = (0,)) -> str:
        done = subprocess.run([str(venv / "bin" / "driftwarden"), *args], cwd=elsewhere, env=env,
                              capture_output=True, text=True, timeout=600)
        output = done.stdout + done.stderr
        assert done.returncode in expect, f"driftwarden {' '.join(args)} exited {done.returncode}:\n{output[-4000:]}"
        return output

    with WebhookReceiver() as receiver:
        write_inputs(elsewhere, topic_name, kafka_bootstrap, pg_url, receiver.url + "/hook")
        driftwarden("reference", "build", "--input", "ref.jsonl", "--config", "monitor.yaml", "--out", "ref.dwref")
        driftwarden("replay", "--input", "cur.jsonl", "--reference", "ref.dwref", "--config", "monitor.yaml",
                    "--report-json", "report.json")
        report = json.loads((elsewhere / "report.json").read_text())
        assert sum(f["count"] for w in report["windows"] for f in w["features"] if f["name"] == "x") == EVENTS
        # embedded, the store from the config (PostgreSQL)
        driftwarden("run", "--config", "monitor.yaml", "--reference", "ref.dwref", "--bounded")
        assert events_stored(pg_url) == EVENTS
        # the standalone cluster, its Python workers running the virtualenv's interpreter; --store-url wins
        cluster_store = f"sqlite:///{elsewhere / 'cluster.db'}"
        driftwarden("run", "--config", "monitor.yaml", "--reference", "ref.dwref", "--bounded", "--jobmanager",
                    flink_rest, "--store-url", cluster_store, "--checkpoint-dir", str(elsewhere / "checkpoints"))
        assert events_stored(cluster_store) == EVENTS
        # the recipe: the worker finds the run's store through the config alone and delivers its alert
        driftwarden("alerts", "deliver", "--once", "--config", "monitor.yaml")
        posts = [r for r in receiver.received if r.path == "/hook"]
        assert posts, "no webhook delivered"
        verify_webhook(posts[0].headers, posts[0].body, [SECRET])
        assert b'"x"' in posts[0].body
        listed = driftwarden("alerts", "list", "--config", "monitor.yaml")
        assert "firing" in listed
    status = driftwarden("status", "--config", "monitor.yaml", "--prometheus", "", expect=(0, 3, 4))
    assert "outbox backlog" in status and "model m" in status
    driftwarden("dashboards", "build", "--out", "grafana")
    assert sorted(p.name for p in (elsewhere / "grafana" / "dashboards" / "json").iterdir())
    assert (tmp_path / "state" / "driftwarden" / "logs" / "flink-embedded").is_dir()  # the user's run folder
    after = set(checkout_run.rglob("*")) if checkout_run.is_dir() else set()
    written = {p for p in after - before if "flink-embedded" in str(p) or p.name == "python-worker"}
    assert not {p for p in written if embedded_owner(p, checkout_run) not in running_before}, \
        "the installed commands wrote into the checkout's run folder"
