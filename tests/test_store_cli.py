"""`driftwarden store prune` applies the monitor config's retention (options win); `store upgrade` migrates."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import yaml
from sqlalchemy import func, select
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.core.store import make_engine
from driftwarden.pipeline.dead_letters import store_dead_letters
from driftwarden.pipeline.results import store_window
from driftwarden.schemas.tables import dead_letters, window_counts, window_results
from tests.test_store_migrations import empty_store_url, release_v5_store  # noqa: F401  (fixture)

NOW = datetime.now(timezone.utc).replace(microsecond=0)
MINUTE = timedelta(minutes=1)


def _store(url: str, ages_days: list[int]) -> None:
    """A window and a dead letter stored ``age`` days ago, for each age."""
    engine = make_engine(url)
    with engine.begin() as conn:
        for n, age in enumerate(ages_days):
            start = NOW - timedelta(days=age)
            store_window(conn, WindowReport("fraud", start, start + MINUTE, [FeatureOutcome("amount", count=10)]),
                         10, 0, None, start)
            store_dead_letters(conn, [{"topic": "t", "partition": 0, "offset": n, "reason": "not_json", "detail": None,
                                       "model": None, "event_time": None, "payload": "x", "seen_at": start}])
    engine.dispose()


def _rows(url: str) -> tuple[int, int, int]:
    engine = make_engine(url)
    with engine.connect() as conn:
        found = tuple(conn.execute(select(func.count()).select_from(t)).scalar_one()
                      for t in (window_results, window_counts, dead_letters))
    engine.dispose()
    return found


def _config(tmp_path, **retention) -> str:
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump({"models": [{"name": "fraud", "features": {"amount": "numeric"}}],
                                    "retention": retention}))
    return str(path)


def test_prune_keeps_what_the_config_retention_says_and_options_override_it(store_url: str, tmp_path) -> None:
    _store(store_url, [100, 40, 20, 1])
    runner = CliRunner()
    config = _config(tmp_path, verdicts="90d", dead_letters="30d")
    done = runner.invoke(app, ["store", "prune", "-c", config, "--store-url", store_url])
    assert done.exit_code == 0, done.output
    assert "kept verdicts 90d, dead_letters 30d, deliveries 30d" in done.output
    assert "1 window_results, 0 segment_results, 1 window_counts, 2 dead_letters" in done.output
    assert _rows(store_url) == (3, 3, 2)
    done = runner.invoke(app, ["store", "prune", "-c", config, "--store-url", store_url, "--verdicts", "30d",
                               "--dead-letters", "forever"])
    assert done.exit_code == 0, done.output
    assert "dead_letters forever" in done.output and _rows(store_url) == (2, 2, 2)
    refused = runner.invoke(app, ["store", "prune", "--store-url", store_url, "--verdicts", "5m"])
    assert refused.exit_code == 2 and "--verdicts" in refused.output and "at least 1h" in refused.output
    assert _rows(store_url) == (2, 2, 2)


def test_upgrade_migrates_the_release_store_once(empty_store_url: str) -> None:  # noqa: F811
    release_v5_store(empty_store_url)
    runner = CliRunner()
    first = runner.invoke(app, ["store", "upgrade", "--store-url", empty_store_url])
    second = runner.invoke(app, ["store", "upgrade", "--store-url", empty_store_url])
    assert first.exit_code == second.exit_code == 0, first.output + second.output
    assert "upgraded from v5 (schema v8)" in first.output and "up to date (schema v8)" in second.output
