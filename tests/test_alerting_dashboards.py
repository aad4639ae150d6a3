"""Dashboards as code: structure, datasources as import inputs, provisioning files in sync, Grafana macros, push
through grafana-client. Grafana has no package these machines can reach: the push tests answer as its HTTP API
does (a real HTTP server, alerting.testing.WebhookReceiver), and Grafana's own resolution of ``${DS_...}`` on
import is stood in for by :func:`resolve_inputs`."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from driftwarden.alerting.dashboards.definitions import all_dashboards, model_dashboard
from driftwarden.alerting.dashboards.macros import expand_promql, expand_sql, leftover_macros, sql_values
from driftwarden.alerting.dashboards.model import INPUTS, PromQuery, SqlQuery, resolve_inputs
from driftwarden.alerting.dashboards.provisioning import PROVISIONED_UIDS, write_importable, write_provisioning
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
            assert target["datasource"]["uid"] in ("${DS_DRIFTWARDEN_POSTGRES}", "${DS_DRIFTWARDEN_PROMETHEUS}")
            assert ("rawSql" in target) != ("expr" in target)


def datasource_refs(doc) -> set[str]:
    """Every datasource uid named anywhere in a dashboard document."""
    if isinstance(doc, dict):
        own = {doc["datasource"]["uid"]} if isinstance(doc.get("datasource"), dict) else set()
        return own.union(*(datasource_refs(v) for v in doc.values()))
    if isinstance(doc, list):
        return set().union(*(datasource_refs(v) for v in doc))
    return set()


@pytest.mark.parametrize("dashboard", all_dashboards(), ids=lambda d: d.uid)
def test_datasources_are_import_inputs(dashboard) -> None:
    """Every datasource is a ${DS_...} input declared in __inputs (and each declared one is used), as Grafana's
    export for sharing writes them: a manual import asks for each, and no fixed uid of ours is left."""
    doc = dashboard.to_json()
    declared = {i["name"]: i for i in doc["__inputs"]}
    used = datasource_refs(doc) - {"-- Mixed --"}
    assert used == {f"${{{name}}}" for name in declared}, (used, declared)
    for name, entry in declared.items():
        assert entry["type"] == "datasource" and entry["pluginId"] == INPUTS[name][0]
    assert "driftwarden-postgres" not in json.dumps(doc) and "driftwarden-prometheus" not in json.dumps(doc)
    resolved = resolve_inputs(doc, {"DS_DRIFTWARDEN_POSTGRES": "pg1", "DS_DRIFTWARDEN_PROMETHEUS": "prom1"})
    assert datasource_refs(resolved) - {"-- Mixed --"} <= {"pg1", "prom1"} and "${DS_" not in json.dumps(resolved)


def test_model_dashboard_covers_what_on_call_needs() -> None:
    doc = model_dashboard().to_json()
    titles = " | ".join(p["title"].lower() for p in doc["panels"])
    for topic in ("event rate", "rejected", "late", "drift score per feature", "gate alarms", "deep", "deliveries",
                  "segment drift score", "drifted segments", "invalid values per feature",
                  "boolean features: share of true"):
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
    assert {d["uid"] for d in sources["datasources"]} == set(PROVISIONED_UIDS.values())
    postgres = next(d for d in sources["datasources"] if d["type"] == "grafana-postgresql-datasource")
    assert postgres["user"] == "driftwarden_grafana"  # the read-only role (tests/test_grafana_readonly.py)
    assert postgres["secureJsonData"]["password"] == "${DRIFTWARDEN_GRAFANA_PG_PASSWORD}"  # from Grafana's environment
    for path in (tmp_path / "dashboards" / "json").iterdir():  # file provisioning resolves no ${DS_...}: resolved here
        doc = json.loads(path.read_text())
        assert "__inputs" not in doc and "${DS_" not in path.read_text(), path
        assert datasource_refs(doc) - {"-- Mixed --"} <= set(PROVISIONED_UIDS.values()), path


def test_export_writes_the_dashboards_for_grafanas_import(tmp_path) -> None:
    written = write_importable(tmp_path)
    assert [p.name for p in written] == sorted(f"{d.uid}.json" for d in all_dashboards())
    for path in written:
        doc = json.loads(path.read_text())
        assert doc["__inputs"] and all(f"${{{i['name']}}}" in path.read_text() for i in doc["__inputs"])


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


def grafana_api(datasources: list[dict]):
    """Answers as Grafana's HTTP API does: the datasource list, and success for every import."""
    def answer(request) -> Reply:
        body = json.dumps(datasources if request.path == "/api/datasources" else
                          {"status": "success", "imported": True}).encode()
        return Reply(200, {"content-type": "application/json"}, body=body)
    return answer


GRAFANA_DATASOURCES = [{"uid": "pg7", "name": "drift store", "type": "grafana-postgresql-datasource"},
                       {"uid": "prom3", "name": "prom", "type": "prometheus"},
                       {"uid": "loki1", "name": "logs", "type": "loki"}]


def test_push_imports_every_dashboard_with_the_servers_datasources() -> None:
    with WebhookReceiver(grafana_api(GRAFANA_DATASOURCES)) as grafana:
        assert push_dashboards(grafana.url, "glsa_test_token", folder_uid="drift") == [d.uid for d in all_dashboards()]
    imports = [r for r in grafana.received if r.path == "/api/dashboards/import"]
    assert len(imports) == len(all_dashboards())
    first = json.loads(imports[0].body)
    assert first["overwrite"] is True and first["folderUid"] == "drift"
    assert first["dashboard"]["uid"] == "driftwarden-model" and first["dashboard"]["__inputs"]
    assert {i["name"]: i["value"] for i in first["inputs"]} == {"DS_DRIFTWARDEN_POSTGRES": "pg7",
                                                                "DS_DRIFTWARDEN_PROMETHEUS": "prom3"}
    assert all(i["type"] == "datasource" for i in first["inputs"])
    assert imports[0].headers["authorization"] == "Bearer glsa_test_token"


def test_push_takes_the_datasources_named_and_asks_when_the_server_has_several() -> None:
    two = [*GRAFANA_DATASOURCES, {"uid": "prom9", "name": "other prom", "type": "prometheus"}]
    with WebhookReceiver(grafana_api(two)) as grafana:
        with pytest.raises(ConfigError, match=r"2 datasource\(s\) of type prometheus .*prom3.*prom9.*--prometheus-uid"):
            push_dashboards(grafana.url, "t")
        push_dashboards(grafana.url, "t", datasources={"DS_DRIFTWARDEN_PROMETHEUS": "prom9"})
    first = json.loads(next(r for r in grafana.received if r.path == "/api/dashboards/import").body)
    assert {i["name"]: i["value"] for i in first["inputs"]}["DS_DRIFTWARDEN_PROMETHEUS"] == "prom9"


def test_push_refused_by_grafana_is_a_service_error() -> None:
    from driftwarden.core.errors import ServiceError

    denied = Reply(401, {"content-type": "application/json"}, body=b'{"message": "invalid API key"}')
    with WebhookReceiver(lambda _r: denied) as grafana:
        with pytest.raises(ServiceError, match="refused dashboard driftwarden-model"):
            push_dashboards(grafana.url, "wrong", datasources={"DS_DRIFTWARDEN_POSTGRES": "a",
                                                               "DS_DRIFTWARDEN_PROMETHEUS": "b"})
        with pytest.raises(ServiceError, match="GrafanaUnauthorizedError"):  # the datasource lookup, refused
            push_dashboards(grafana.url, "wrong")
