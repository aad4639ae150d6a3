"""scripts/services.sh stops only what it started: the process of its own PID file, and only while that PID
still runs a command line naming its run folder. A program that merely looks like a service (the same name, the
same main class) is never touched, nor one that took over a PID after the service ended. No service is started:
the processes are stand-ins (``sleep`` under another name), and the private run folder's ports (offset 7000)
have nothing listening."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "services.sh"


def named(argv0: str) -> int:
    """The PID of a process whose command line reads ``argv0`` (a stand-in for a service), started in the
    background of a shell that exits (so that it is not this process's child, as a service is not)."""
    out = subprocess.run(["bash", "-c", f'(exec -a "{argv0}" sleep 120) >/dev/null 2>&1 & echo $!'],
                         capture_output=True, text=True, check=True).stdout
    return int(out)


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").is_dir() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def end(pid: int) -> None:
    """Kill a stand-in this test started, by its PID."""
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


def test_stop_ends_its_own_processes_and_nothing_that_looks_like_them(tmp_path) -> None:
    run = tmp_path / "run"
    (run / "pids").mkdir(parents=True)
    own = named(f"java -cp x kafka.Kafka {run}/kafka/server.properties")
    lookalike = named("java -cp x kafka.Kafka /elsewhere/.run/kafka/server.properties")
    reused = named("prometheus --config.file=/etc/prometheus/prometheus.yml")  # took a stale PID file's PID
    try:
        time.sleep(0.5)
        (run / "pids" / "kafka.pid").write_text(f"{own}\n")
        (run / "pids" / "prometheus.pid").write_text(f"{reused}\n")
        env = {**os.environ, "DRIFTWARDEN_RUN_DIR": str(run), "DRIFTWARDEN_PORT_OFFSET": "7000"}
        done = subprocess.run([str(SCRIPT), "stop", "kafka", "prometheus"], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert not alive(own), "its own process was not stopped"
        assert alive(lookalike) and alive(reused), "stopped a process it did not start"
        assert not (run / "pids" / "kafka.pid").exists() and not (run / "pids" / "prometheus.pid").exists()
    finally:
        for pid in (own, lookalike, reused):
            end(pid)


def test_no_script_stops_processes_by_name() -> None:
    for script in (REPO / "scripts").glob("*.sh"):
        text = "\n".join(line for line in script.read_text().splitlines() if not line.lstrip().startswith("#"))
        assert not re.search(r"\b(pkill|killall|pgrep)\b", text), f"{script.name} finds processes by name"


def test_clean_stops_its_services_and_removes_postgresqls_folder_kept_outside_the_run_folder(tmp_path) -> None:
    """As root, PostgreSQL's data lies in /var/tmp when its user cannot reach the run folder: ``make clean`` removed
    the run folder and left that one (65 MB a checkout) behind. Only such a folder, and only this run folder's, goes."""
    if os.geteuid() != 0 or subprocess.run(["id", "postgres"], capture_output=True).returncode != 0:
        pytest.skip("PostgreSQL's folder lies outside the run folder only as root, with a postgres user")
    run = tmp_path / "run"  # pytest's folders are the owner's alone (0700): the postgres user cannot reach it
    (run / "pids").mkdir(parents=True)
    cksum = subprocess.run(["cksum"], input=str(run), capture_output=True, text=True, check=True).stdout.split()[0]
    outside, other = Path(f"/var/tmp/driftwarden-postgres-{cksum}"), Path(f"/var/tmp/driftwarden-postgres-{cksum}0")
    own = named(f"prometheus --config.file={run}/prometheus/prometheus.yml")
    try:
        for folder in (outside, other):
            (folder / "data").mkdir(parents=True)
            (folder / "data" / "PG_VERSION").write_text("17\n")
        (run / "pids" / "prometheus.pid").write_text(f"{own}\n")
        env = {**os.environ, "DRIFTWARDEN_RUN_DIR": str(run), "DRIFTWARDEN_PORT_OFFSET": "7000"}
        done = subprocess.run([str(SCRIPT), "clean"], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert not alive(own), "a service was not stopped"
        assert not outside.exists(), done.stderr
        assert other.is_dir(), "removed another checkout's PostgreSQL folder"
        assert f"removed PostgreSQL's folder {outside}" in done.stderr
    finally:
        end(own)
        for folder in (outside, other):
            shutil.rmtree(folder, ignore_errors=True)
