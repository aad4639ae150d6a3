"""Dashboards as code: structure, provisioning files in sync, Grafana macros, push through grafana-client."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from driftwarden.alerting.dashboards.definitions import all_dashboards, model_dashboard
from driftwarden.alerting.dashboards.macros import expand_promql, expand_sql, leftover_macros, sql_values
from driftwarden.alerting.dashboards.model import PromQuery, SqlQuery
from driftwarden.alerting.dashboards.provisioning import write_provisioning
from driftwarden.alerting.dashboards.push import grafana_settings, push_dashboards
from driftwarden.alerting.testing import Reply, WebhookReceiver
from driftwarden.core.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("dashboard", all_dashboards(), ids=lambda d: d.uid)
def test_dashboard_json_is_well_formed(dashboard) -> None:
    doc = json.loads(json.dumps(dashboard.to_json()))
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for panel in doc["panels"]:
        pos = panel["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] in ("driftwarden-postgres", "driftwarden-prometheus")
            assert ("rawSql" in target) != ("expr" in target)


def test_model_dashboard_covers_what_on_call_needs() -> None:
    doc = model_dashboard().to_json()
    titles = " | ".join(p["title"].lower() for p in doc["panels"])
    for topic in ("event rate", "rejected", "late", "drift score per feature", "gate alarms", "deep", "deliveries",
                  "segment drift score", "drifted segments"):
        assert topic in titles, topic
    assert any(p["type"] == "heatmap" for p in doc["panels"])
    model, segment = doc["templating"]["list"]
    assert (model["name"], model["multi"], model["includeAll"]) == ("model", False, False)
    assert (segment["name"], segment["multi"], segment["includeAll"], segment["allValue"]) == (
        "segment", True, True, "segment")  # All: "segment IN (segment)", true on every row
    assert "segment_results" in segment["query"] and "'$model'" in segment["query"]
    queries = [q for _, q in model_dashboard().queries()]
    assert any(isinstance(q, SqlQuery) for q in queries) and any(isinstance(q, PromQuery) for q in queries)


def test_committed_provisioning_matches_the_code(tmp_path) -> None:
    generated = write_provisioning(tmp_path)
    for path in generated:
        committed = REPO / "deploy" / "grafana" / "provisioning" / path.relative_to(tmp_path)
        assert committed.read_text() == path.read_text(), f"{committed} is stale: run `driftwarden dashboards build`"
    sources = yaml.safe_load((tmp_path / "datasources" / "driftwarden.yaml").read_text())
    assert {d["uid"] for d in sources["datasources"]} == {"driftwarden-postgres", "driftwarden-prometheus"}


def test_sql_macros_expand_like_grafana() -> None:
    t0, t1 = datetime(2026, 3, 1, tzinfo=timezone.utc), datetime(2026, 3, 1, 6, tzinfo=timezone.utc)
    sql = expand_sql("SELECT $__timeGroupAlias(ts, '5m'), x FROM t WHERE m = '$model' AND $__timeFilter(ts)",
                     {"model": "fraud"}, t0, t1)
    assert sql == ("SELECT floor(extract(epoch from ts)/300)*300 AS \"time\", x FROM t WHERE m = 'fraud' "
                   "AND ts BETWEEN '2026-03-01T00:00:00Z' AND '2026-03-01T06:00:00Z'")
    assert leftover_macros(expand_sql("SELECT $__unknownMacro(x)", {}, t0, t1)) == ["$__unknownMacro"]
    assert expand_promql('rate(a{model="${model}"}[$__rate_interval])', {"model": "m"}) == 'rate(a{model="m"}[1m])'
    assert sql_values(["country=FR", "o'brien"]) == "'country=FR','o''brien'"  # Grafana's quoteLiteral


def test_push_needs_url_and_token() -> None:
    with pytest.raises(ConfigError, match="GRAFANA_URL and GRAFANA_TOKEN"):
        grafana_settings({})
    with pytest.raises(ConfigError, match="GRAFANA_TOKEN"):
        grafana_settings({"GRAFANA_URL": "http://grafana:3000"})
    assert grafana_settings({"GRAFANA_URL": "u", "GRAFANA_TOKEN": "t"}) == ("u", "t")


def test_push_posts_every_dashboard_with_the_token() -> None:
    ok = Reply(200, {"content-type": "application/json"}, body=b'{"status": "success", "version": 1}')
    with WebhookReceiver(lambda _r: ok) as grafana:
        assert push_dashboards(grafana.url, "glsa_test_token", folder_uid="drift") == [d.uid for d in all_dashboards()]
    assert [r.path for r in grafana.received] == ["/api/dashboards/db"] * len(all_dashboards())
    first = json.loads(grafana.received[0].body)
    assert first["overwrite"] is True and first["folderUid"] == "drift"
    assert first["dashboard"]["uid"] == "driftwarden-model"
    assert grafana.received[0].headers["authorization"] == "Bearer glsa_test_token"


def test_push_refused_by_grafana_is_a_service_error() -> None:
    from driftwarden.core.errors import ServiceError

    denied = Reply(401, {"content-type": "application/json"}, body=b'{"message": "invalid API key"}')
    with WebhookReceiver(lambda _r: denied) as grafana:
        with pytest.raises(ServiceError, match="refused dashboard driftwarden-model"):
            push_dashboards(grafana.url, "wrong")
