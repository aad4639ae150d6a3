"""Tell a Python function of the job when PyFlink finishes a bundle.

A Python function of a Flink job gets its records in bundles (``python.fn-execution.bundle.size``
records or ``bundle.time`` ms, whichever comes first), and Flink finishes the open bundle before a
checkpoint barrier passes the operator (``prepareSnapshotPreBarrier``). So what a function writes
at the end of a bundle is written before the checkpoint that covers its records completes: at
least once, with one store transaction per bundle instead of one per record.

PyFlink's public UDF interface has ``open`` and ``close`` only; the end of a bundle reaches
``BaseOperation.finish`` of ``pyflink.fn_execution.table.operations`` (apache-flink 2.2). This
module wraps that method once per process so that it first calls ``finish_bundle()`` on each of
the operation's functions that has one. tests/test_hostile_job.py checks it end to end: a running
job keeps its late events (a handful, far fewer than any flush threshold) within seconds.
"""

from __future__ import annotations

_INSTALLED = False


def install_bundle_hook() -> None:
    """Make PyFlink call ``finish_bundle()`` on a table function or scalar function at each bundle's end."""
    global _INSTALLED
    if _INSTALLED:
        return
    from pyflink.fn_execution.table.operations import BaseOperation

    finish = BaseOperation.finish

    def finish_with_hook(operation) -> None:
        for function in operation.user_defined_funcs:
            if hasattr(function, "finish_bundle"):
                function.finish_bundle()
        finish(operation)

    BaseOperation.finish = finish_with_hook
    _INSTALLED = True
