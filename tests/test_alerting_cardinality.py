"""Alerts on a high-cardinality categorical feature carry its evidence, in every webhook format (issue 20).

The stream: a merchant id drawn from a Zipf-like law over 100,000 ids; its most frequent id has a
hostile name (a Slack mention, a link, quotes, a newline). The reference is built as ``driftwarden
reference build`` builds it; one window moves 5% of its traffic to 2,000 new ids. That window goes
the live job's way: ``summarize_window`` then ``analyze_summary`` (the job's and replay's decisions),
``store_window`` (results and alert outbox in one transaction), then the delivery worker seals and
POSTs one notification per route (native, Alertmanager, Slack): on SQLite to MockTransport handlers
that verify the signature, and on the real PostgreSQL to a real HTTP receiver. Each body must say
the window's unseen-value share against the reference's baseline and the head values that moved,
with the hostile name kept as data.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import httpx
import jsonschema
import numpy as np
import pytest

from driftwarden.alerting.delivery import WebhookSink
from driftwarden.alerting.rules import AlertRules
from driftwarden.alerting.signing import verify_webhook
from driftwarden.alerting.testing import WebhookReceiver
from driftwarden.alerting.worker import Dispatcher, build_sinks, make_client
from driftwarden.core.store import make_engine
from driftwarden.pipeline.judging import analyze_summary, drift_policy
from driftwarden.pipeline.summary import summarize_window
from driftwarden.pipeline.reference_build import build_reference_set
from driftwarden.pipeline.results import store_window
from driftwarden.replay.synthetic import zipf_ids
from driftwarden.schemas.config import MonitorConfig
from driftwarden.schemas.events import Event
from driftwarden.sketches.reference import baseline_unseen_share

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "schemas" / "webhook_payload.schema.json").read_text())
HOSTILE = '<!channel> "m0" & <https://evil.example|click>\n*now*'
PER_WINDOW, WINDOW_MS, REF_WINDOWS = 3000, 60_000, 24
CONFIG = MonitorConfig.model_validate({"models": [{"name": "m", "features": {"merchant": "categorical"}}]})
POLICY = drift_policy(CONFIG.thresholds)
KEY = b"cardinality-test-secret-cardinality"
FORMATS = ("native", "alertmanager", "slack")


def merchants(rng: np.random.Generator, size: int, **kw) -> list[str]:
    """Zipf ids over 100,000 merchants; the most frequent one ("m0", rank 1) carries the hostile name."""
    return [HOSTILE if v == "m0" else v for v in zipf_ids(rng, size, **kw)]


@pytest.fixture(scope="module")
def drifted():
    """(reference, the drifted window's report): 5% of the window's traffic on ids the reference never saw."""
    rng = np.random.default_rng(20)
    events = [Event("m", w * WINDOW_MS + i, {"merchant": v})
              for w in range(REF_WINDOWS) for i, v in enumerate(merchants(rng, PER_WINDOW))]
    reference = build_reference_set(events, CONFIG, POLICY).models["m"]
    values = merchants(rng, PER_WINDOW, new_share=0.05)
    summary = summarize_window("m", 100 * WINDOW_MS, WINDOW_MS, [{"merchant": v} for v in values], CONFIG.model("m"))
    return reference, analyze_summary(summary, reference, POLICY)


def rules_for(base_url: str) -> AlertRules:
    """One route per webhook format, each on its own path of ``base_url``."""
    return AlertRules(min_severity="minor", group_wait="0s", group_interval="0s",
                      routes=[{"name": fmt, "url": f"{base_url}/{fmt}", "format": fmt, "allow_private": True}
                              for fmt in FORMATS])


def deliver(report, engine, rules: AlertRules, sinks) -> None:
    """Store the window as the job does (results and outbox in one transaction), then run one delivery round."""
    with engine.begin() as conn:
        store_window(conn, report, PER_WINDOW, 0, rules, report.window_end)
    Dispatcher(engine, rules, sinks, clock=lambda: report.window_end + timedelta(seconds=1)).run_once()


def mock_delivery(report, db: Path) -> dict[str, dict]:
    """SQLite, and MockTransport handlers that check the signature: the verified body POSTed to each route."""
    rules = rules_for("https://hooks.example.com")
    posted: dict[str, dict] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        assert verify_webhook(request.headers, request.content, [KEY])
        posted[request.url.path.strip("/")] = json.loads(request.content)
        return httpx.Response(204)

    def public(_host: str, _port: int) -> list[str]:
        return ["93.184.216.34"]

    engine = make_engine(f"sqlite:///{db}")
    try:
        client = httpx.Client(transport=httpx.MockTransport(handler))
        deliver(report, engine, rules, {r.name: WebhookSink(r, client, [KEY], public) for r in rules.routes})
    finally:
        engine.dispose()
    return posted


def test_the_window_outcome_carries_the_evidence(drifted) -> None:
    reference, report = drifted
    [merchant] = report.features
    assert merchant.drifted, merchant
    assert merchant.unseen_baseline == baseline_unseen_share(reference.features["merchant"])
    assert merchant.gate_new_share > merchant.unseen_baseline > 0  # the long tail: some unseen in every window
    values = [v for v, _, _ in merchant.moved_values]
    assert len(values) == 5 and None in values and HOSTILE in values  # "other" grew, the top id shrank
    moves = [abs(w - r) for _, r, w in merchant.moved_values]
    assert moves == sorted(moves, reverse=True)


def test_every_webhook_format_tells_the_unseen_share_and_the_values_that_moved(drifted, tmp_path) -> None:
    _, report = drifted
    check_bodies(mock_delivery(report, tmp_path / "store.db"), report)


@pytest.mark.services
def test_on_postgresql_through_a_real_receiver(drifted, pg_engine) -> None:
    _, report = drifted
    with WebhookReceiver() as receiver, make_client() as client:
        rules = rules_for(receiver.url)
        deliver(report, pg_engine, rules, build_sinks(rules, client))
        bodies = {r.path.strip("/"): json.loads(r.body) for r in receiver.received}
    check_bodies(bodies, report)


def check_bodies(bodies: dict[str, dict], report) -> None:
    """Each format's body tells the merchant's unseen share against its baseline and the values that moved."""
    [merchant] = report.features
    assert set(bodies) == set(FORMATS)

    native = bodies["native"]
    jsonschema.validate(native, SCHEMA, format_checker=jsonschema.FormatChecker())
    latest = native["alerts"][0]["latest"]
    assert native["version"] == "4" and latest["name"] == "merchant"
    assert latest["unseen_share"] == {"window": merchant.gate_new_share, "baseline": merchant.unseen_baseline}
    assert latest["moved_values"] == [{"value": v, "reference": r, "window": w} for v, r, w in merchant.moved_values]

    annotations = bodies["alertmanager"]["alerts"][0]["annotations"]
    window, baseline = (f"{share * 100:.2f}%" for share in (merchant.gate_new_share, merchant.unseen_baseline))
    assert annotations["unseen_share"] == (f"{window} of the window's values were never seen in the reference "
                                           f"(reference baseline {baseline})")
    _, ref_share, win_share = next(m for m in merchant.moved_values if m[0] == HOSTILE)
    quoted = json.dumps(HOSTILE, ensure_ascii=False)  # quoted: its quotes and newline escaped
    assert f"{quoted} {ref_share * 100:.2f}% → {win_share * 100:.2f}%" in annotations["moved_values"]
    assert "(all other values)" in annotations["moved_values"]
    assert annotations["unseen_share"] in annotations["description"]

    text = bodies["slack"]["blocks"][1]["text"]["text"]
    assert f"{window} of the window's values were never seen in the reference (reference baseline {baseline})" in text
    assert "&lt;!channel&gt; \\\"m0\\\" &amp; &lt;https://evil.example|click&gt;\\n*now*" in text
    data = re.sub(r"<https://[^<>|]*\|dashboard>", "", text)  # our own link stays a link
    assert "<" not in data and ">" not in data and re.search(r"&(?!amp;|lt;|gt;)", data) is None, text


def test_a_low_cardinality_feature_keeps_the_version_2_shape() -> None:
    """No profile, no evidence: the feature document has no unseen_share or moved_values keys."""
    from driftwarden.alerting.payloads import feature_document
    from driftwarden.core.records import FeatureOutcome

    plain = feature_document(FeatureOutcome("country", "categorical", 500, drifted=True, severity="major"))
    assert "unseen_share" not in plain and "moved_values" not in plain
    stored = FeatureOutcome(**json.loads(json.dumps({"name": "merchant", "kind": "categorical", "unseen_baseline": 0.01,
                                                     "moved_values": [[None, 0.5, 0.6], ["a", 0.1, 0.0]]})))
    assert stored.moved_values == ((None, 0.5, 0.6), ("a", 0.1, 0.0))  # as alert_of reads an alert row back
