"""`driftwarden run` (the streaming job) and `driftwarden reference build`."""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Callable, Optional

import typer
from rich.console import Console
from rich.markup import escape

from driftwarden.core.console import command_app
from driftwarden.core.endpoints import (BOOTSTRAP_SERVERS_HELP_DEFAULT, DEFAULT_METRICS_HOST, STORE_URL_HELP_DEFAULT,
                                        store_url as resolve_store_url)
from driftwarden.core.errors import ConfigError, ServiceError
from driftwarden.core.paths import run_dir

console = Console(stderr=True, soft_wrap=True)  # paths and URLs stay whole on one line, to copy
RUN_DIR = run_dir()  # where scripts/services.sh keeps state in a checkout; the user's state folder when installed
DEFAULT_CHECKPOINTS = RUN_DIR / "checkpoints"

reference_app = command_app("Build reference sketches, samples and calibrated thresholds.", no_args_is_help=True)


def _check_jobmanager(value: Optional[str]) -> Optional[str]:
    if value is not None and (":" not in value or not value.rsplit(":", 1)[1].isdigit()):
        raise typer.BadParameter("expected HOST:PORT, e.g. 127.0.0.1:58081")
    return value


def run_command(
    config: Path = typer.Option(..., "--config", "-c", exists=True, dir_okay=False, help="Monitor config (YAML)."),
    store_url: Optional[str] = typer.Option(None, help=f"Results store URL [default: {STORE_URL_HELP_DEFAULT}]; a "
                                            "PostgreSQL password in it (user:pass@ or ?password=) moves to the run "
                                            "folder's pgpass; with --jobmanager name a password file instead: "
                                            "?passfile=PATH"),
    bootstrap_servers: Optional[str] = typer.Option(None, help="Kafka bootstrap servers [default: "
                                                    f"{BOOTSTRAP_SERVERS_HELP_DEFAULT}]"),
    reference: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                             help="Reference file from `driftwarden reference build` "
                                                  "(needed when the config's reference mode is 'file')."),
    jobmanager: Optional[str] = typer.Option(None, callback=_check_jobmanager,
                                             help="Submit to a standalone Flink cluster at HOST:PORT "
                                                  "instead of the embedded MiniCluster."),
    parallelism: int = typer.Option(1, min=1, help="Flink parallelism."),
    bounded: bool = typer.Option(False, help="Stop at the topics' current end (flushes the last windows)."),
    checkpoint_interval: int = typer.Option(10_000, help="Checkpoint interval in ms (0 disables)."),
    checkpoint_dir: Path = typer.Option(DEFAULT_CHECKPOINTS, help="Where checkpoints are retained."),
    resume: bool = typer.Option(False, help="Restore from the newest retained checkpoint (after a crash)."),
    metrics_port: int = typer.Option(0, help="Serve Prometheus /metrics on this port (0: off): the store's "
                                       "figures, the job's store retries and Kafka consumer lag. Flink's own "
                                       "metrics: $DRIFTWARDEN_FLINK_METRICS_PORT (docs/deploy.md)."),
    metrics_host: str = typer.Option(DEFAULT_METRICS_HOST, help="Address /metrics listens on (0.0.0.0: every "
                                     "interface, as in a container that Prometheus scrapes from outside)."),
) -> None:
    """Run the streaming drift job: Kafka in, sketches per window, gate, deep check, results out."""
    from driftwarden.core.store import make_engine, redact_url
    from driftwarden.jobs.flink_env import latest_checkpoint
    from driftwarden.jobs.job_secrets import move_env_secrets, secret_env_names, with_secret_files
    from driftwarden.schemas.config import load_config

    cfg = load_config(config).with_bootstrap_servers(bootstrap_servers)
    _scrub_environment(cfg, config)
    check_source(cfg)
    url = job_store_url(resolve_store_url(store_url, cfg.store_url), cluster=jobmanager is not None)
    ref = str(reference.resolve()) if reference else (cfg.reference.path if cfg.reference.mode == "file" else None)
    if cfg.reference.mode == "file" and not ref:
        raise ConfigError(f"{config}: reference mode 'file' needs --reference or reference.path")
    if ref and cfg.reference.season is not None:  # a file without the phases' windows: said now, not in a worker
        from driftwarden.pipeline.judging import drift_policy
        from driftwarden.pipeline.reference_set import ReferenceSet
        from driftwarden.pipeline.seasons import FileReferenceSource

        FileReferenceSource(ReferenceSet.load(ref), cfg, drift_policy(cfg.thresholds), f"{ref} (config {config})")
    make_engine(url).dispose()
    resume_from = latest_checkpoint(checkpoint_dir) if resume else None
    if resume and resume_from is None:
        console.print(f"[yellow]no retained checkpoint under {escape(str(checkpoint_dir))}; "
                      "starting from the source's start[/]")
    elif resume_from:
        console.print(f"resuming from {escape(resume_from)}", highlight=False)
    secrets = None if jobmanager else move_env_secrets(cfg.source.security, RUN_DIR)
    if secrets:
        cfg = with_secret_files(cfg, secrets)
    if metrics_port:
        _serve_metrics(url, metrics_host, metrics_port, cfg)
    args = ["--config", str(config.resolve()), "--store-url", url,
            "--bootstrap-servers", cfg.source.bootstrap_servers, "--parallelism", str(parallelism),
            "--checkpoint-interval-ms", str(checkpoint_interval), "--checkpoint-dir", str(checkpoint_dir)]
    args += ["--kafka-secrets", str(secrets)] if secrets else []
    args += ["--reference", ref] if ref else []
    args += ["--bounded"] if bounded else []
    args += ["--resume-from", resume_from] if resume_from else []
    console.print(f"driftwarden: job on {'cluster ' + jobmanager if jobmanager else 'embedded MiniCluster'}; "
                  f"results -> {redact_url(url)}")
    if jobmanager:
        _submit_to_cluster(jobmanager, args, secret_env_names(cfg.source.security))
    else:
        from driftwarden.jobs.drift_job import main as job_main

        # the embedded job runs its Python functions in this process: `kill -USR1 <pid>` prints every
        # thread's stack to stderr (a stuck sink shows where it waits), even while one holds the GIL
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        _run_embedded(job_main, args)


def _run_embedded(job_main: Callable[[list[str]], None], args: list[str]) -> None:
    """Run the job in this process; a Java failure (the job could not start, or stopped) ends as a
    :class:`ServiceError` that names each exception of its chain, after the whole stack trace."""
    from driftwarden.jobs.flink_errors import java_failure

    try:
        job_main(args)
    except Exception as exc:
        failure = java_failure(exc)
        if failure is None:
            raise
        traceback.print_exc()  # every frame, for a bug report; the error below says what happened
        raise ServiceError(f"the streaming job failed:\n{failure}") from None


def check_source(cfg) -> None:
    """Connect to the source's brokers as the job will, before it starts: a refused connection ends `run`
    here, in one line that says why (the job's own client would retry, restart and fail after minutes);
    a client key that the job's Java client cannot read is refused here too."""
    from driftwarden.core.kafka_check import check_kafka
    from driftwarden.core.kafka_security import java_key_problem

    problem = java_key_problem(cfg.source.security)
    if problem:
        raise ConfigError(f"source.security: {problem}")
    check_kafka(cfg.source)


def _scrub_environment(cfg, config_path: Path) -> None:
    """Validate the alerting rules, then drop what the job must not see from its environment.

    Flink logs the whole environment of its Python workers, and the job never signs webhooks
    (the delivery worker does): the routes' signing secrets leave this process's environment.
    ``PYFLINK_GATEWAY_DISABLED`` is Flink's marker for code running inside a UDF worker; inherited
    by a CLI process it would stop the job from starting.
    """
    os.environ.pop("PYFLINK_GATEWAY_DISABLED", None)
    if not cfg.alerting:
        return
    from driftwarden.alerting.rules import load_rules

    # a bad alerting section fails here, before the job, naming the file, line and field
    for route in load_rules(config_path).routes:
        for name in route.env_names():
            os.environ.pop(name, None)


def _serve_metrics(url: str, host: str, port: int, cfg) -> None:
    from prometheus_client import CollectorRegistry

    from driftwarden.alerting.metrics import StoreCollector, segment_caps, serve_metrics
    from driftwarden.core.store import make_engine
    from driftwarden.jobs.consumer_lag import ConsumerLagCollector
    from driftwarden.jobs.store_retry import register_metrics

    registry = CollectorRegistry()
    # a scrape reads the store; segment labels: at most each model's top + other
    registry.register(StoreCollector(make_engine(url), min_interval_s=5, segment_caps=segment_caps(cfg)))
    registry.register(ConsumerLagCollector(cfg.source))  # and Kafka: the job's consumer lag per partition
    register_metrics(registry)  # the embedded job's sinks run in this process (loopback mode)
    serve_metrics(port, registry, host)
    console.print(f"metrics on http://{host}:{port}/metrics", highlight=False)


#: The module ``flink run -pym`` starts on the client: the job's own command line (jobs/drift_job.py).
JOB_MODULE = "driftwarden.jobs.drift_job"


def cluster_submit_command(jobmanager: str, args: list[str], python: str = sys.executable) -> list[str]:
    """The ``flink run`` command line that submits the drift job to the cluster at ``jobmanager``.

    The job is named by its module (``-pym``), not by a file of a checkout, so an installed driftwarden
    submits it too; its Python workers on the TaskManagers run ``python`` (``-pyexec``), which must have
    driftwarden installed where they run.
    """
    import pyflink

    flink = Path(pyflink.__file__).parent / "bin" / "flink"
    return [str(flink), "run", "-m", jobmanager, "-pyexec", python, "-pyclientexec", python,
            "-pym", JOB_MODULE, *args]


def _submit_to_cluster(jobmanager: str, args: list[str], secret_names: list[str]) -> None:
    """``flink run`` the job on the cluster; its client logs its whole environment, so it gets none of the
    ``secret_names`` (the TaskManagers' own environment holds them: jobs/job_secrets.py)."""
    env = {name: value for name, value in os.environ.items() if name not in secret_names}
    local_conf = RUN_DIR / "flink" / "conf"  # scripts/services.sh's cluster (a checkout); else PyFlink's own conf
    if local_conf.is_dir():
        env.setdefault("FLINK_CONF_DIR", str(local_conf))
    done = subprocess.run(cluster_submit_command(jobmanager, args), env=env)
    if done.returncode != 0:
        raise ServiceError(f"flink run against {jobmanager} failed (exit {done.returncode}); "
                           "see the output above and the cluster's logs")


#: Why a password in the store URL cannot go to a cluster, and what to do instead.
CLUSTER_PASSWORD_HELP = (
    "the store URL holds a password, which a Flink cluster's TaskManagers could only get through the job's "
    "arguments (shown by Flink's REST API and logs): give the TaskManagers (and this client) a libpq password "
    "file of mode 600 and name it in the URL instead, e.g. postgresql://driftwarden@db:5432/driftwarden"
    "?passfile=/run/secrets/pgpass (docs/store.md)")


def job_store_url(url: Optional[str], cluster: bool = False) -> str:
    """The store URL to hand to a job: resolved, SQLite made absolute, no password anywhere.

    A PostgreSQL password moves to a private PGPASSFILE (:func:`password_to_pgpass`), and a
    ``$DRIFTWARDEN_STORE_URL`` holding one leaves this process's environment: Flink logs the
    command line and the environment of its Python workers. For a job on a Flink ``cluster``
    a password is refused (:data:`CLUSTER_PASSWORD_HELP`): the TaskManagers never see this
    process's files or environment, so they read a password file the URL names (``?passfile=``).
    """
    from driftwarden.core.endpoints import STORE_URL_ENV

    resolved = resolve_store_url(url)
    if cluster and _password_of(resolved):
        raise ConfigError(CLUSTER_PASSWORD_HELP)
    private = password_to_pgpass(resolved)
    if _password_of(os.environ.get(STORE_URL_ENV, "")):
        os.environ.pop(STORE_URL_ENV)  # the job gets its URL explicitly, without the password
    return private


def password_to_pgpass(url: str) -> str:
    """Move a PostgreSQL password (``user:pass@`` or ``?password=``) into a private PGPASSFILE.

    The URL travels on the job's command line and Flink logs it; libpq (psycopg) reads the
    password from the file instead. Returns the URL without its password.
    """
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    password = _password_of(url)
    if not parsed.get_backend_name().startswith("postgresql") or not password:
        return url
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    pgpass = RUN_DIR / "pgpass"
    user = parsed.username or parsed.query.get("user") or "*"
    line = ":".join(_pgpass_escape(str(v)) for v in (parsed.host or "localhost", parsed.port or 5432,
                                                     parsed.database or "*", user, password))
    pgpass.touch(mode=0o600)
    pgpass.chmod(0o600)
    pgpass.write_text(line + "\n")
    os.environ["PGPASSFILE"] = str(pgpass)
    return parsed._replace(password=None).difference_update_query(["password"]).render_as_string(hide_password=False)


def _password_of(url: str) -> str | None:
    """The password a database URL carries (``user:pass@`` or ``?password=``), or None."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url) if url else None
    except ArgumentError:
        return None
    if parsed is None:
        return None
    query = parsed.query.get("password")
    if isinstance(query, tuple):
        raise ConfigError("the store URL gives ?password= more than once; give it once (or use PGPASSFILE)")
    return parsed.password or query or None


def _pgpass_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(":", "\\:")


def status_command(
    config: Path = typer.Option(..., "--config", "-c", exists=True, dir_okay=False, help="Monitor config (YAML)."),
    store_url: Optional[str] = typer.Option(None, help=f"Results store URL [default: {STORE_URL_HELP_DEFAULT}]"),
    bootstrap_servers: Optional[str] = typer.Option(None, help="Kafka bootstrap servers, for the consumer lag "
                                                    f"[default: {BOOTSTRAP_SERVERS_HELP_DEFAULT}]"),
    prometheus: str = typer.Option("http://localhost:9090", help="Prometheus that scrapes Flink's reporter "
                                   "(empty: skip watermark and checkpoint checks)."),
    max_lag: float = typer.Option(300.0, help="Seconds of consumer lag, watermark lag or outbox age that count "
                                  "as behind."),
    max_windows: float = typer.Option(3.0, help="Window lengths without a judged window that count as behind."),
    max_checkpoint_age: float = typer.Option(60.0, help="Seconds since the last completed checkpoint that count "
                                             "as behind."),
) -> None:
    """Print the running job's lag, last window per model, checkpoints and outbox.

    Exit code: 0 all ok; 3 something behind; 4 nothing behind but something unknown
    (a signal could not be read, or Kafka refused the connection as source.security makes it:
    credentials, TLS, printed in one line); 1 an error (bad config, store unreachable); 2 a usage error.
    """
    from driftwarden.core.console import data_table
    from driftwarden.core.errors import EXIT_UNKNOWN, KafkaSecurityError
    from driftwarden.core.store import make_engine
    from driftwarden.jobs.status import Limits, collect_status
    from driftwarden.schemas.config import load_config

    cfg = load_config(config).with_bootstrap_servers(bootstrap_servers)
    engine = make_engine(resolve_store_url(store_url, cfg.store_url))
    try:
        report = collect_status(cfg, engine, prometheus or None, Limits(max_lag, max_windows, max_checkpoint_age))
    except KafkaSecurityError as exc:
        console.print(f"[bold red]{type(exc).__name__}[/]: {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_UNKNOWN) from None
    table = data_table("scope", "signal", "value", "state")
    colour = {"ok": "green", "behind": "red", "unknown": "yellow"}
    for c in report.checks:  # names come from events and topics: escaped, never read as markup
        table.add_row(escape(c.scope), c.signal, escape(c.value), f"[{colour[c.state]}]{c.state}[/]")
    Console().print(table)
    raise typer.Exit(report.exit_code)


@reference_app.command("build")
def reference_build_command(
    input: Path = typer.Option(..., "--input", "-i", exists=True, dir_okay=False,
                               help="Training snapshot: events as JSONL, gzip JSONL, Parquet or Avro (.avro)."),
    out: Path = typer.Option(..., "--out", "-o", help="Reference file to write."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", exists=True, dir_okay=False,
                                          help="Monitor config; without it feature kinds are inferred "
                                               "(numbers numeric, strings categorical) and the events' "
                                               "prediction is monitored as feature 'prediction'."),
) -> None:
    """Turn a training snapshot into reference sketches, samples and calibrated gate thresholds.

    The file is read in batches, never whole, and each record parsed once: memory stays bounded whatever
    its size. The scan keeps each batch's columns (with a config) or its valid events (without one: the
    scan infers the kinds) in a temporary file for the build. A progress bar shows the records scanned,
    then the events built.
    """
    from driftwarden.pipeline.judging import drift_policy
    from driftwarden.pipeline.reference_build import build_reference_file
    from driftwarden.schemas.config import load_config

    with _BuildProgress(console) as progress:
        built = build_reference_file(input, load_config(config) if config else None, _inferred_config,
                                     lambda cfg: drift_policy(cfg.thresholds), progress.update,
                                     f"{input} (config {config})" if config else str(input))
    references, events, rejected = built.references, built.read - built.rejected, built.rejected
    references.save(out)
    for model, ref in references.models.items():
        sources = {f.thresholds.source for f in ref.features.values()}
        console.print(f"{escape(model)}: {len(ref.features)} features, thresholds {'/'.join(sorted(sources))}")
        if model in references.segments:
            console.print(f"{escape(model)}: segments by {escape(', '.join(references.segment_by[model]))}: "
                          f"{len(references.segment_keys(model))} top segments, "
                          f"{len(references.segments[model])} references (with the other segment)")
        if model in references.windows:
            console.print(f"{escape(model)}: season {escape(str(built.config.reference.season))}: "
                          f"{len(references.windows[model])} reference windows kept for its phases")
    console.print(f"wrote {escape(str(out))} from {events} events ({rejected} rejected)")


def _inferred_config(kinds: dict[str, dict[str, str]]):
    """The config of a snapshot read without one: each model's inferred kinds, its events' prediction
    monitored (a feature named "prediction" in the events is then monitored as a feature instead)."""
    from driftwarden.schemas.config import MonitorConfig

    return MonitorConfig.model_validate({"models": [
        {"name": m, "features": k, "monitor_prediction": "prediction" not in k} for m, k in kinds.items()]})


class _BuildProgress:
    """A progress bar of ``reference build``'s two passes over the snapshot (records read)."""

    def __init__(self, out: Console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=out)
        self._tasks: dict[str, int] = {}

    def __enter__(self) -> "_BuildProgress":
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def update(self, phase: str, read: int, total: int | None) -> None:
        """Records read so far in ``phase`` ("scan" or "build") of ``total`` (None: unknown)."""
        if phase not in self._tasks:
            self._tasks[phase] = self._progress.add_task(f"reference {phase}", total=total)
        self._progress.update(self._tasks[phase], completed=read, total=total)
