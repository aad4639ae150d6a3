"""Alert rules: config loading, defaults, durations, matchers, records, and the modules' doctests."""

from __future__ import annotations

import doctest
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from driftwarden.alerting import fingerprint
from driftwarden.core.records import FeatureOutcome, WindowReport, report_from_dict
from driftwarden.alerting.rules import AlertRules, Matcher, load_rules
from driftwarden.core.errors import ConfigError


def test_defaults_match_the_contract() -> None:
    rules = AlertRules()
    assert rules.group_wait == timedelta(seconds=30) and rules.group_interval == timedelta(minutes=5)
    assert rules.repeat_interval == timedelta(hours=4) and rules.group_by == ("model",)
    assert rules.min_severity == "moderate" and rules.routes == ()  # the false-alarm budget: minor is never routed
    assert rules.resolve_after_windows == 3 and rules.resolve_min_count == 30
    assert rules.no_data_after == timedelta(minutes=15) and rules.max_alerts == 100


def test_loads_the_alerting_key_of_a_monitor_config(tmp_path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump({"kafka": {"topic": "x"}, "alerting": {
        "group_wait": "45s", "repeat_interval": "1h", "min_severity": "moderate",
        "routes": [{"name": "pager", "url": "https://hooks.example.com/x", "format": "alertmanager",
                    "secret_env": "PAGER_SECRET PAGER_SECRET_OLD",
                    "matchers": [{"label": "severity", "op": ">=", "value": "major"}]}]}}))
    rules = load_rules(path)
    assert rules.group_wait == timedelta(seconds=45) and rules.repeat_interval == timedelta(hours=1)
    assert rules.routes_for({"model": "fraud", "severity": "major"})[0].name == "pager"
    assert rules.routes_for({"model": "fraud", "severity": "moderate"}) == []


@pytest.mark.parametrize("bad,needle", [
    ({"routes": [{"name": "a", "url": "u", "format": "teams"}]}, "native"),
    ({"routes": [{"name": "a", "url": "http://u"}, {"name": "a", "url": "http://v"}]}, "unique"),
    ({"routes": [{"name": "a", "url": "http://exa\x00mple.com/"}]}, "control character"),
    ({"routes": [{"name": "a", "url": "http://example.com/\r\nX-Injected: 1"}]}, "control character"),
    ({"routes": [{"name": "a", "url": "ftp://example.com/"}]}, "scheme"),
    ({"routes": [{"name": "a", "url": "http://x.example", "allow_networks": ["10.0.0.0/33"]}]}, "allow_networks"),
    ({"group_by": ["severity"]}, "group_by"),
    ({"min_severity": "huge"}, "minor"),
    ({"group_wait": "soon"}, "group_wait"),
    ({"routes": [{"name": "a", "url": "u", "matchers": [{"label": "model", "op": "=~", "value": "("}]}]}, "regular"),
    ({"routes": [{"name": "a", "url": "u", "matchers": [{"label": "severity", "op": ">=", "value": "big"}]}]}, "severity"),
    ({"surprise": 1}, "surprise"),
])
def test_invalid_config_is_a_config_error_that_says_why(tmp_path, bad: dict, needle: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"alerting": bad}))
    with pytest.raises(ConfigError, match=needle):
        load_rules(path)


@pytest.mark.parametrize("op,value,model,expected", [
    ("=", "fraud", "fraud", True), ("!=", "fraud", "fraud", False), ("=~", "fr.*", "fraud", True),
    ("!~", "fr.*", "churn", True), ("glob", "fraud-*", "fraud-v2", True), ("=~", "fr", "fraud", False),
])
def test_matchers(op: str, value: str, model: str, expected: bool) -> None:
    assert Matcher(label="model", op=op, value=value).matches({"model": model}) is expected


def test_report_from_the_replay_json_contract() -> None:
    entry = {"model": "fraud", "window_start": "2026-03-01T00:00:00Z", "window_end": "2026-03-01T00:01:00Z",
             "features": [{"name": "amount", "count": 10, "missing": 1, "gate": {"ks": 0.2, "psi": 0.3, "emd": 1.0,
                                                                                  "alarm": True},
                           "deep": {"ks_stat": 0.2, "ks_pvalue": 0.001, "psi": 0.31, "emd": 1.1, "p_adjusted": 0.004},
                           "drifted": True, "severity": "moderate"}]}
    report = report_from_dict(entry)
    assert report.window_start == datetime(2026, 3, 1, tzinfo=timezone.utc)
    assert report.features[0].p_adjusted == 0.004 and report.features[0].severity == "moderate"


def test_records_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="none, minor, moderate, major"):
        FeatureOutcome("x", severity="critical")
    t = datetime(2026, 3, 1, tzinfo=timezone.utc)
    with pytest.raises(ValueError, match="window_end"):
        WindowReport("m", t, t)


def test_docstring_examples() -> None:
    failures, tried = doctest.testmod(fingerprint)
    assert tried > 0 and failures == 0


def test_config_errors_do_not_echo_route_urls(tmp_path) -> None:
    secret_url = "https://hooks.slack.com/services/T000/B000/SUPERSECRETTOKEN"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"alerting": {"routes": [{"name": "a", "url": secret_url},
                                                            {"name": "a", "url": secret_url + "\x00"}]}}))
    with pytest.raises(ConfigError) as info:
        load_rules(path)
    assert "SUPERSECRETTOKEN" not in str(info.value) and "control character" in str(info.value)


def _yaml_blocks(path) -> list[dict]:
    """Every ```yaml block of a markdown file that has an ``alerting:`` key, loaded."""
    text = path.read_text()
    blocks = [yaml.safe_load(b.split("```", 1)[0]) for b in text.split("```yaml\n")[1:]]
    return [b for b in blocks if isinstance(b, dict) and "alerting" in b]


def test_the_readmes_and_the_demo_show_the_default_rules() -> None:
    """The sample configs of docs/configuration.md and alerting/README.md state the defaults (min_severity: the false-alarm
    budget, timers, hysteresis), and the demo's own config (`make demo`) leaves min_severity at its default."""
    from pathlib import Path

    from driftwarden.alerting.rules import parse_rules
    from driftwarden.demo.stack import monitor_config

    repo = Path(__file__).resolve().parent.parent
    defaults = AlertRules().model_dump()
    shown = [b["alerting"] for p in ("docs/configuration.md", "alerting/README.md") for b in _yaml_blocks(repo / p)]
    assert len(shown) == 2 and all("min_severity" in s for s in shown)
    for sample in shown:
        rules = parse_rules(sample).model_dump()
        for key in set(sample) - {"routes", "replay_topic", "dashboard_url"}:
            assert rules[key] == defaults[key], key
    demo = monitor_config("features", "localhost:9092", "credit-risk", 10, {"mode": "warmup", "warmup_windows": 3},
                          {"name": "r", "url": "http://127.0.0.1:9/", "allow_private": True})
    assert parse_rules(demo["alerting"]).min_severity == defaults["min_severity"] == "moderate"
