"""``--store-url URL``: write a replay's results with the live job's own writer, idempotently.

Each window goes through :func:`pipeline.results.store_window` (upserts keyed by (model, feature,
window) and (model, window)); rejected and late records go to ``dead_letters`` with
insert-or-ignore keyed by (topic, partition, offset), a file's records as (path, 0, line).
Storing the same replay twice leaves the same rows. No alerts are enqueued: a replay reports.
"""

from __future__ import annotations


from sqlalchemy.exc import SQLAlchemyError

from driftwarden.core.errors import ServiceError
from driftwarden.core.store import make_engine
from driftwarden.pipeline.dead_letters import Rejected, dead_letter_row, store_dead_letters
from driftwarden.pipeline.results import store_window
from driftwarden.pipeline.validation import LATE, REASON_SEPARATOR
from driftwarden.replay.engine import ReplayOutcome
from driftwarden.replay.records import RawRecord

CHUNK = 500


def store_outcome(url: str, outcome: ReplayOutcome) -> int:
    """Write dead letters, then every window; return the number of windows written."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            rows = [_dead_letter(r.record, r.reason, r.detail, None, None) for r in outcome.rejections]
            rows += [_dead_letter(r, LATE, "", e.model, e.event_ms) for r, e in outcome.late]
            for i in range(0, len(rows), CHUNK):
                store_dead_letters(conn, rows[i:i + CHUNK])
            for w in outcome.windows:
                store_window(conn, w.report, w.events, w.unknown_features, None)
    except SQLAlchemyError as exc:
        raise ServiceError(f"cannot write results to the store: {exc.__class__.__name__}: {exc}") from exc
    finally:
        engine.dispose()
    return len(outcome.windows)


def _dead_letter(record: RawRecord, reason: str, detail: str, model: str | None, event_ms: int | None) -> dict:
    c = record.coordinates
    topic, partition, offset = (c if len(c) == 3 else (c[0], 0, c[1]))
    rejected = Rejected(str(topic)[:250], partition, offset, f"{reason}{REASON_SEPARATOR}{detail}", record.value)
    return dead_letter_row(rejected, model, event_ms)
