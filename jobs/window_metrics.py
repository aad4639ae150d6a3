"""Metrics of the windows the job judges, reported through Flink's metric system (and its reporter).

The results sink runs in Flink's Python worker, a process of its own: its metrics go to Flink
through the UDF's metric group and leave through Flink's Prometheus reporter with every other
metric of the job (``flink_taskmanager_job_task_operator_model_...``, see the README). Per model:

* ``windows_judged``: windows judged and stored (a counter; ``rate() * 60`` is windows per minute);
* ``last_window_end_timestamp_seconds``: end of the newest window stored (Unix time, a gauge);
* ``window_size_seconds``: the monitor's window size, whole seconds rounded up (a gauge, so alert rules count in windows);
* ``judging_errors``: features (and segment cells) of judged windows whose judging raised and that
  were stored "not judged" (a counter; the store's rows give ``driftwarden_judging_errors_total``);
* ``windows_kept_final``: summaries of an already stored window with other event counts, not kept
  (a counter; see jobs/udfs.py ``AnalyzeWindow`` and docs/faults.md);
* ``last_window_freshness_seconds``: from the newest stored window's end to its verdict being
  stored, whole seconds (a gauge; ``max_over_time`` gives the worst of a period).

Names follow Prometheus's conventions as far as Flink's reporter lets them: base units, times as
``_timestamp_seconds``. Flink's reporter exports every metric as a gauge (its counters too, since a
Flink counter may go down), and PyFlink's metrics hold integers, so a counter cannot carry
``_total`` (promtool refuses it on a gauge) and a histogram cannot be made of them: a histogram's
``_bucket`` / ``_sum`` / ``_count`` series and its ``le`` label are refused on gauges, and a key/value
group puts its key into the metric's name (the former freshness histogram was exported as
``..._model_le_window_freshness_seconds_bucket{le="_Inf"}`` with its sum in milliseconds).

Label cardinality is bounded: a model that is not in the config (a name taken from event data)
is counted under ``OTHER_MODEL``.
"""

from __future__ import annotations

import time
from typing import Callable

OTHER_MODEL = "_other"


def window_size_seconds(size_ms: int) -> int:
    """The ``window_size_seconds`` gauge of a window of ``size_ms``: whole seconds (PyFlink's gauges hold
    integers), rounded up, so a sub-second window is 1 s, not 0 (the stale rule's "3 windows" would be 0 s).

    >>> window_size_seconds(60_000), window_size_seconds(1_500), window_size_seconds(250)
    (60, 2, 1)
    """
    return -(-size_ms // 1000)


def freshness_seconds(window_end_ms: int, now_ms: int) -> int:
    """Whole seconds from a window's end to now, rounded to the nearest (PyFlink's gauges hold integers).

    >>> freshness_seconds(10_000, 12_499), freshness_seconds(10_000, 12_500), freshness_seconds(10_000, 9_000)
    (2, 3, 0)
    """
    return max(now_ms - window_end_ms + 500, 0) // 1000


class _ModelMetrics:
    """The metrics of one model label."""

    def __init__(self, group, window_s: int) -> None:
        self.last_end_s = 0
        self.freshness_s = 0
        self.judged = group.counter("windows_judged")
        self.kept_final = group.counter("windows_kept_final")
        self.judging_errors = group.counter("judging_errors")
        group.gauge("last_window_end_timestamp_seconds", lambda: self.last_end_s)
        group.gauge("window_size_seconds", lambda: window_s)
        group.gauge("last_window_freshness_seconds", lambda: self.freshness_s)

    def observe(self, window_end_ms: int, now_ms: int) -> None:
        """Count one judged window; the newest window's end and freshness."""
        self.judged.inc()
        if window_end_ms // 1000 >= self.last_end_s:
            self.last_end_s = window_end_ms // 1000
            self.freshness_s = freshness_seconds(window_end_ms, now_ms)


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
