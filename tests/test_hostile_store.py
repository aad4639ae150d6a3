"""Whatever a producer sends can be stored: NUL, bad UTF-8, over-long names, on PostgreSQL and SQLite.

PostgreSQL refuses NUL in text and text longer than a VARCHAR; SQLite takes both, so every case
runs on both stores (a suite on SQLite alone hid a record that stopped the job on PostgreSQL).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from sqlalchemy import select, text

from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.alerting.rules import parse_rules
from driftwarden.core.store import ALTERED_MARKER, make_engine, store_text
from driftwarden.pipeline.dead_letters import UNSTORABLE, Rejected, dead_letter_row, payload_text, store_dead_letters
from driftwarden.pipeline.results import store_window
from driftwarden.schemas.alert_tables import alert_outbox, alerts
from driftwarden.schemas.tables import dead_letters, window_counts, window_results

NUL_MODEL = "m\x00odel"
LONG_MODEL = "m" * 300
HOSTILE_PAYLOADS = [b"\x00x", b"\xff\xfe\x00", b'{"model": "a\\u0000b"}', "é\x00".encode(), b"\\x00", b""]


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    """A fresh store on SQLite or on the real PostgreSQL (a schema of its own)."""
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path}/store.db")
        yield engine
        engine.dispose()
    else:
        yield request.getfixturevalue("pg_engine")


def test_store_text_keeps_what_fits_and_marks_what_it_changes():
    assert store_text("fraud-v3", 200) == "fraud-v3"
    cut = store_text(LONG_MODEL, 200)
    assert len(cut) == 200 and ALTERED_MARKER in cut and cut.startswith("m" * 100)
    assert store_text(LONG_MODEL, 200) != store_text(LONG_MODEL + "x", 200)  # the hash keeps them apart
    assert "\x00" not in store_text(NUL_MODEL) and store_text(NUL_MODEL).startswith("m\\x00odel" + ALTERED_MARKER)
    assert store_text("a\ud800b").encode("utf-8")  # a lone surrogate is escaped, not refused
    assert payload_text(b"\x00\xff{") == "\\x00\\xff{"


def _dead_letter(offset: int, payload: bytes, model: str | None = None, reason: str = "not_json | x") -> dict:
    return dead_letter_row(Rejected("t", 0, offset, reason, payload), model, 1_767_225_600_000)


def test_hostile_dead_letters_are_all_stored(engine):
    rows = [_dead_letter(i, p) for i, p in enumerate(HOSTILE_PAYLOADS)]
    rows += [_dead_letter(100, b"{}", NUL_MODEL, "bad_feature_type:f\x00 | d\x00"),
             _dead_letter(101, b"{}", LONG_MODEL, "type_mismatch:" + "f" * 400 + " | x"),
             _dead_letter(102, b"{}", "lone\ud800", "bad_model | \ud800")]
    with engine.begin() as conn:
        store_dead_letters(conn, rows)
    with engine.connect() as conn:
        stored = {r.offset: r for r in conn.execute(select(dead_letters))}
    assert sorted(stored) == sorted(r["offset"] for r in rows)
    assert stored[0].payload == "\\x00x" and stored[1].payload == "\\xff\\xfe\\x00"
    assert stored[100].model == store_text(NUL_MODEL) and stored[100].reason.startswith("bad_feature_type:f\\x00")
    assert len(stored[101].model) == 200 and len(stored[101].reason) == 200


def test_a_valid_event_with_a_hostile_model_name_stores_results_and_alerts(engine):
    """Names from events are data: results, counts and the alert outbox take the stored form."""
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rules = parse_rules({"routes": [{"name": "r", "url": "https://example.invalid/hook"}], "group_wait": "0s"})
    drifted = FeatureOutcome("f0", count=50, alarm=True, drifted=True, severity="major", ks_stat=0.9)
    for model in (NUL_MODEL, LONG_MODEL, LONG_MODEL + "x"):
        report = WindowReport(model, start, start.replace(second=10), (drifted,))
        with engine.begin() as conn:
            store_window(conn, report, 50, 0, rules)
    with engine.connect() as conn:
        counts = sorted(m for (m,) in conn.execute(select(window_counts.c.model)))
        assert counts == sorted(store_text(m, 200) for m in (NUL_MODEL, LONG_MODEL, LONG_MODEL + "x"))
        assert conn.execute(select(window_results.c.model)).scalars().all().__len__() == 3
        assert len(conn.execute(select(alerts.c.model)).all()) == 3
        assert len(conn.execute(select(alert_outbox.c.model)).all()) == 3


def test_a_row_the_store_refuses_does_not_fail_the_window(pg_engine):
    """PostgreSQL with a stricter rule of its own: the refused row is kept reduced, the rest commits."""
    with pg_engine.begin() as conn:
        conn.execute(text("ALTER TABLE dead_letters ADD CONSTRAINT no_refused CHECK (model IS NULL OR model <> 'refused')"))
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with pg_engine.begin() as conn:
        store_window(conn, WindowReport("m", start, start.replace(second=10), (FeatureOutcome("f0", count=5),)), 5, 0, None)
        store_dead_letters(conn, [_dead_letter(1, b"a"), _dead_letter(2, b"b", "refused"), _dead_letter(3, b"c")])
    with pg_engine.connect() as conn:
        reasons = dict(conn.execute(select(dead_letters.c.offset, dead_letters.c.reason)).all())
        assert conn.execute(select(window_counts.c.events)).scalar_one() == 5
    assert reasons == {1: "not_json", 2: UNSTORABLE, 3: "not_json"}
