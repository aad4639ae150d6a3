"""Metrics of the windows the job judges, reported through Flink's metric system (and its reporter).

The results sink runs in Flink's Python worker, a process of its own: its metrics go to Flink
through the UDF's metric group and leave through Flink's Prometheus reporter with every other
metric of the job (``flink_taskmanager_job_task_operator_model_...``, see the README). Per model:

* ``windows_judged``: windows judged and stored (a counter; ``rate() * 60`` is windows per minute);
* ``last_window_end_seconds``: end of the newest window stored (epoch seconds, a gauge);
* ``window_size_seconds``: the monitor's window size, whole seconds rounded up (a gauge, so alert rules count in windows);
* ``judging_errors``: features (and segment cells) of judged windows whose judging raised and that
  were stored "not judged" (a counter; the store's rows give ``driftwarden_judging_errors_total``);
* ``windows_kept_final``: summaries of an already stored window with other event counts, not kept
  (a counter; after a restart with ``window.idleness`` on, see jobs/udfs.py ``AnalyzeWindow``);
* ``window_freshness_seconds``: from a window's end to its verdict being stored, as a Prometheus
  histogram: one ``_bucket`` counter per upper bound ``le`` (PyFlink has no histogram metric),
  ``_count`` and ``_sum`` (the sum in milliseconds: Flink counters are integers).

Label cardinality is bounded: a model that is not in the config (a name taken from event data)
is counted under ``OTHER_MODEL``.
"""

from __future__ import annotations

import time
from typing import Callable

#: Upper bounds (seconds) of the freshness histogram's buckets; +Inf is added.
FRESHNESS_BUCKETS_S = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)
OTHER_MODEL = "_other"


def window_size_seconds(size_ms: int) -> int:
    """The ``window_size_seconds`` gauge of a window of ``size_ms``: whole seconds (PyFlink's gauges hold
    integers), rounded up, so a sub-second window is 1 s, not 0 (the stale rule's "3 windows" would be 0 s).

    >>> window_size_seconds(60_000), window_size_seconds(1_500), window_size_seconds(250)
    (60, 2, 1)
    """
    return -(-size_ms // 1000)


class _ModelMetrics:
    """The metrics of one model label."""

    def __init__(self, group, window_s: int) -> None:
        self.last_end_s = 0
        self.judged = group.counter("windows_judged")
        self.kept_final = group.counter("windows_kept_final")
        self.judging_errors = group.counter("judging_errors")
        group.gauge("last_window_end_seconds", lambda: self.last_end_s)
        group.gauge("window_size_seconds", lambda: window_s)
        self.count = group.counter("window_freshness_seconds_count")
        self.sum_ms = group.counter("window_freshness_seconds_sum")
        bounds = [str(b) for b in FRESHNESS_BUCKETS_S] + ["+Inf"]
        self.buckets = [(float(b), group.add_group("le", b).counter("window_freshness_seconds_bucket"))
                        for b in bounds]

    def observe(self, window_end_ms: int, now_ms: int) -> None:
        """Count one judged window and its freshness."""
        self.judged.inc()
        self.last_end_s = max(self.last_end_s, window_end_ms // 1000)
        fresh_ms = max(now_ms - window_end_ms, 0)
        self.count.inc()
        self.sum_ms.inc(fresh_ms)
        for bound, counter in self.buckets:
            if fresh_ms <= bound * 1000:
                counter.inc()


class WindowMetrics:
    """Per-model metrics of judged windows; a no-op when Flink gives no metric group."""

    def __init__(self, group, models: set[str], window_s: int, clock: Callable[[], float] = time.time) -> None:
        self.group = group
        self.models = models
        self.window_s = window_s
        self.clock = clock
        self._by_model: dict[str, _ModelMetrics] = {}

    @classmethod
    def open(cls, function_context, config) -> "WindowMetrics":
        """The metrics of a UDF opened with ``function_context``, for the models of ``config``."""
        return cls(function_context.get_metric_group(), {m.name for m in config.models},
                   window_size_seconds(config.window.size_ms))

    def judged(self, summary, judging_errors: int = 0) -> None:
        """Record that ``summary``'s window was judged and stored just now, ``judging_errors`` of its cells not judged."""
        if self.group is not None:
            metrics = self._of(summary.model)
            metrics.observe(summary.window_end_ms, int(self.clock() * 1000))
            if judging_errors:
                metrics.judging_errors.inc(judging_errors)

    def kept_final(self, summary) -> None:
        """Record that ``summary`` came for a window already stored with other counts (not kept)."""
        if self.group is not None:
            self._of(summary.model).kept_final.inc()

    def _of(self, model: str) -> _ModelMetrics:
        label = model if model in self.models else OTHER_MODEL
        metrics = self._by_model.get(label)
        if metrics is None:
            metrics = self._by_model[label] = _ModelMetrics(self.group.add_group("model", label), self.window_s)
        return metrics
