"""Store sinks of the Flink jobs, as Python scalar functions feeding a blackhole table.

PyFlink's Table API has no Python sink; a scalar function whose ``open`` holds a SQLAlchemy
engine and whose ``eval`` upserts one row per window is the thinnest seam. Rows are written
at least once (a restart from a checkpoint replays the windows after it) and every write is
an idempotent upsert keyed by (model, window) or (model, feature, window), so the store ends
exactly as after an uninterrupted run.
"""

from __future__ import annotations

from datetime import datetime, timezone

from pyflink.table import DataTypes
from pyflink.table.udf import FunctionContext, ScalarFunction, udf

from driftwarden.core.store import make_engine
from driftwarden.pipeline.event_time import window_bounds
from driftwarden.pipeline.results import store_counts


class StoreWindowCounts(ScalarFunction):
    """Upsert one (model, window) event count into ``window_counts`` (and the running totals); returns 1."""

    def __init__(self, store_url: str, window_ms: int) -> None:
        self.store_url = store_url
        self.window_ms = window_ms
        self.engine = None

    def open(self, function_context: FunctionContext) -> None:
        self.engine = make_engine(self.store_url, create=False)

    def eval(self, model: str, any_event_ms: int, events: int) -> int:
        start, end = window_bounds(any_event_ms, self.window_ms)
        row = {"model": model, "window_start": start, "window_end": end, "events": events,
               "late": 0, "unknown_features": 0, "deep_checked": False,
               "computed_at": datetime.now(timezone.utc)}
        with self.engine.begin() as conn:
            store_counts(conn, row)
        return 1

    def is_deterministic(self) -> bool:
        return False

    def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()


def store_window_counts(store_url: str, window_ms: int):
    """The StoreWindowCounts sink wrapped as a (non-deterministic) Flink UDF."""
    return udf(StoreWindowCounts(store_url, window_ms), result_type=DataTypes.INT())
