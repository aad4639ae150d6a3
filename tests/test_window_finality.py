"""A stored window is final: the results sink never stores a second summary of it over the first.

After a restart Flink fires again the windows whose results were written after the last checkpoint;
lateness is per partition, so those summaries are the same, but one with other counts (a job with
``window.idleness``) must not replace a complete window nor enter a rolling reference. The sink
runs here outside Flink: its function context is a stand-in whose metric group is None (metrics
off), the one part of Flink it uses.
"""

from __future__ import annotations

from sqlalchemy import select

from driftwarden.core.store import make_engine
from driftwarden.pipeline.summary import summarize_window
from driftwarden.jobs.udfs import AnalyzeWindow
from driftwarden.schemas.config import ModelConfig, MonitorConfig
from driftwarden.schemas.tables import window_counts, window_results

T0 = 1_767_225_600_000
MODEL = ModelConfig(name="m", features={"x": "numeric", "c": "categorical"})


class _NoMetrics:
    def get_metric_group(self):
        return None


def _summary(n: int) -> bytes:
    events = [{"x": float(i), "c": "ab"[i % 2]} for i in range(n)]
    return summarize_window("m", T0, 60_000, events, MODEL).serialize()


def _stored(url: str) -> tuple[list, list]:
    with make_engine(url).connect() as conn:
        counts = conn.execute(select(window_counts.c.events)).scalars().all()
        results = conn.execute(select(window_results.c.feature, window_results.c.count)
                               .order_by(window_results.c.feature)).all()
    return counts, [tuple(r) for r in results]


def test_a_second_summary_of_a_stored_window_is_not_stored_over_it(store_url):
    config = MonitorConfig(models=[MODEL], window={"size": "60s"})
    make_engine(store_url).dispose()
    sink = AnalyzeWindow(config, store_url, None)
    sink.open(_NoMetrics())
    try:
        assert sink.eval(_summary(50)) == 1
        first = _stored(store_url)
        assert first == ([50], [("c", 50), ("x", 50)])
        sink.eval(_summary(3))  # a partial of the same window
        assert _stored(store_url) == first
        sink.eval(_summary(50))  # the same window again
        assert _stored(store_url) == first
    finally:
        sink.close()
