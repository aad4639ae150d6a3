"""`driftwarden store`: upgrade the results store's schema, prune rows older than the retention."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from driftwarden.core.console import command_app
from driftwarden.core.endpoints import STORE_URL_HELP_DEFAULT

console = Console(stderr=True, soft_wrap=True)
store_app = command_app("The results store: upgrade its schema, prune rows older than the retention.",
                        no_args_is_help=True)

ConfigOpt = typer.Option(None, "--config", "-c", exists=True, dir_okay=False,
                         help="Monitor config (YAML): its store_url and retention.")
StoreUrlOpt = typer.Option(None, "--store-url", help=f"Results store URL [default: {STORE_URL_HELP_DEFAULT}]")


def _keep_option(what: str, default: str) -> typer.Option:
    return typer.Option(None, f"--{what.replace('_', '-')}", help=f"Keep {what.replace('_', ' ')} this long, e.g. "
                        f"{default} ('forever': never prune) [default: the config's retention.{what}, else {default}]")


@store_app.command("upgrade")
def upgrade_command(config: Optional[Path] = ConfigOpt, store_url: Optional[str] = StoreUrlOpt) -> None:
    """Create the store's tables, or upgrade an older store's schema in place (Alembic migrations); idempotent."""
    from driftwarden.core.migrate import head_revision
    from driftwarden.core.store import create_schema, make_engine, redact_url

    url = _store_url(config, store_url)
    engine = make_engine(url, create=False)
    try:
        done = create_schema(engine)
    finally:
        engine.dispose()
    console.print(f"store {escape(redact_url(url))}: {done} (schema {head_revision()})", highlight=False)


@store_app.command("prune")
def prune_command(
    config: Optional[Path] = ConfigOpt,
    store_url: Optional[str] = StoreUrlOpt,
    verdicts: Optional[str] = _keep_option("verdicts", "90d"),
    dead_letters: Optional[str] = _keep_option("dead_letters", "14d"),
    deliveries: Optional[str] = _keep_option("deliveries", "30d"),
) -> None:
    """Delete rows older than the retention: window results and counts (by window start), dead letters (by when
    they were stored), finished webhook deliveries with resolved alerts, alert history and expired silences.
    The /metrics counters keep what the deleted rows counted. Run it daily (cron, a Kubernetes CronJob)."""
    from driftwarden.alerting.outbox import prune as prune_alerting
    from driftwarden.core.store import make_engine, redact_url
    from driftwarden.pipeline.retention import prune_dead_letters, prune_verdicts

    retention = _retention(config, {"verdicts": verdicts, "dead_letters": dead_letters, "deliveries": deliveries})
    url = _store_url(config, store_url)
    now = datetime.now(timezone.utc)
    engine = make_engine(url)
    deleted: dict[str, int] = {}
    try:
        if (keep := retention.keep_ms("verdicts")) is not None:
            deleted.update(prune_verdicts(engine, now - timedelta(milliseconds=keep)))
        if (keep := retention.keep_ms("dead_letters")) is not None:
            deleted["dead_letters"] = prune_dead_letters(engine, now - timedelta(milliseconds=keep))
        if (keep := retention.keep_ms("deliveries")) is not None:
            with engine.begin() as conn:
                deleted.update({f"alert {what}": n for what, n in
                                prune_alerting(conn, now - timedelta(milliseconds=keep)).items()})
    finally:
        engine.dispose()
    kept = ", ".join(f"{what} {getattr(retention, what) or 'forever'}" for what in ("verdicts", "dead_letters",
                                                                                     "deliveries"))
    console.print(f"store {escape(redact_url(url))}: kept {kept}; deleted "
                  + (", ".join(f"{n} {what}" for what, n in deleted.items()) or "nothing"), highlight=False)


def _store_url(config: Optional[Path], store_url: Optional[str]) -> str:
    """The store URL by the one rule (driftwarden.core.endpoints.store_url): the option, else the config's, else
    $DRIFTWARDEN_STORE_URL, else local SQLite."""
    from driftwarden.core.endpoints import store_url as resolve

    return resolve(store_url, _load(config).store_url if config else None)


def _retention(config: Optional[Path], options: dict[str, Optional[str]]):
    """The retention: each option given, else the config's, else the default; 'forever' keeps rows."""
    from pydantic import ValidationError

    from driftwarden.schemas.config import RetentionConfig

    base = _load(config).retention.model_dump() if config else {}
    given = {k: (None if v.strip().lower() == "forever" else v) for k, v in options.items() if v is not None}
    try:
        return RetentionConfig.model_validate({**base, **given})
    except ValidationError as exc:
        error = exc.errors()[0]
        raise typer.BadParameter(error["msg"], param_hint=f"--{str(error['loc'][0]).replace('_', '-')}") from None


def _load(config: Path):
    from driftwarden.schemas.config import load_config

    return load_config(config)
