"""A private Prometheus and a private Alertmanager for tests that stop, restart or load rules into them.

Both are the real Debian programs, on free ports, with their data in the test's folder, so the
shared services of scripts/services.sh are never touched.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator

import httpx
import yaml

from driftwarden.jobs.flink_metrics import free_port

REPO = Path(__file__).resolve().parent.parent
AM_CONFIG = REPO / "deploy" / "alertmanager" / "alertmanager.yml"


def wait_until(predicate: Callable[[], object], timeout_s: float, every_s: float = 1.0):
    """Poll ``predicate`` until it is truthy or the time is up; return its last value (HTTP errors read as None)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = predicate()
        except (httpx.HTTPError, ValueError):
            value = None
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every_s)


def rules_without_waiting(source: Path, target: Path, for_: str = "2s") -> Path:
    """The production rules file with every rule's ``for`` shortened (the expressions unchanged)."""
    rules = yaml.safe_load(source.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = for_
    target.write_text(yaml.safe_dump(rules))
    return target


class PrivatePrometheus:
    """Prometheus scraping ``targets`` every second and evaluating ``rules``."""

    def __init__(self, folder: Path, targets: list[str], rules: Path) -> None:
        self.folder, self.port = folder, free_port()
        (folder / "targets").mkdir(parents=True, exist_ok=True)
        (folder / "targets" / "test.json").write_text(json.dumps([{"targets": targets}]))
        text = (REPO / "scripts" / "prometheus.yml").read_text()
        (folder / "prometheus.yml").write_text(text.replace("@TARGETS@", str(folder / "targets"))
                                               .replace("@RULES@", str(rules)))
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "PrivatePrometheus":
        self.process = subprocess.Popen(
            ["prometheus", f"--config.file={self.folder / 'prometheus.yml'}", f"--storage.tsdb.path={self.folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=(self.folder / "prometheus.log").open("wb"))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(30)

    def query(self, expr: str) -> list:
        """The series of an instant query."""
        return httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10).raise_for_status() \
            .json()["data"]["result"]

    def alerts(self, name: str, state: str = "firing") -> list[dict]:
        """The alerts named ``name`` in ``state`` now."""
        found = httpx.get(f"{self.url}/api/v1/alerts", timeout=10).raise_for_status().json()["data"]["alerts"]
        return [a for a in found if a["labels"]["alertname"] == name and a["state"] == state]


class PrivateAlertmanager:
    """Debian's Alertmanager with the project's config, its webhook receiver at ``receiver_url``.

    ``restart()`` stops it (SIGTERM: it snapshots silences and its notification log) and starts it
    again on the same port and data folder: alerts themselves live in memory, re-sent by clients.
    """

    def __init__(self, folder: Path, receiver_url: str) -> None:
        assert shutil.which("prometheus-alertmanager"), \
            "prometheus-alertmanager not found: scripts/services.sh start alertmanager installs it"
        self.folder, self.port = folder, free_port()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "alertmanager.yml").write_text(AM_CONFIG.read_text().replace("@RECEIVER@", receiver_url))
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "PrivateAlertmanager":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start it and wait for its API."""
        self.process = subprocess.Popen(
            ["prometheus-alertmanager", f"--config.file={self.folder / 'alertmanager.yml'}",
             f"--storage.path={self.folder / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--cluster.listen-address="],
            stdout=subprocess.DEVNULL, stderr=(self.folder / "alertmanager.log").open("ab"))
        assert wait_until(lambda: httpx.get(f"{self.url}/api/v2/status", timeout=2).status_code == 200, 60), \
            (self.folder / "alertmanager.log").read_text()[-2000:]

    def stop(self) -> None:
        """Stop it the way an orderly shutdown does."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)
            self.process = None

    def restart(self) -> None:
        """Stop and start again (same port, same data folder)."""
        self.stop()
        self.start()

    def alerts(self, **labels: str) -> list[dict]:
        """The alerts Alertmanager holds now whose labels include ``labels``."""
        found = httpx.get(f"{self.url}/api/v2/alerts", timeout=10).raise_for_status().json()
        return [a for a in found if all(a["labels"].get(k) == v for k, v in labels.items())]


@contextlib.contextmanager
def worker_process(config: Path, store_url: str, metrics_port: int, log: Path) -> Iterator[subprocess.Popen]:
    """``driftwarden alerts deliver`` (the real command) serving /metrics on ``metrics_port``."""
    import os
    import sys

    env = {**os.environ, "DRIFTWARDEN_STORE_URL": store_url}
    process = subprocess.Popen([sys.executable, "-m", "driftwarden.cli", "alerts", "deliver", "--config", str(config),
                                "--metrics-port", str(metrics_port), "--poll", "0.5"],
                               env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)
