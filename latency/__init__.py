"""Inference latency benchmark of a baseline vs a candidate model on replayed inputs (``driftwarden bench``).

Answers "latency went up after the release: is it the new model or did the inputs change?"::

    driftwarden bench --baseline old.pt --candidate new.pt \\
        --reference-input ref.jsonl --incident-input incident.jsonl --adapter adapter.yaml \\
        --report-json bench.json --report-html bench.html --store-url sqlite:///driftwarden.db

Modules, one concern each: ``models`` (load TorchScript / torch.export archives, never a pickle),
``adapter`` (features -> tensors, bucketed padding), ``inputs`` (JSONL events, batch pools, timed
preprocessing), ``timing`` (CUDA events / perf_counter_ns, count-and-duration minimums, Poisson
arrivals), ``runner`` (2x2 arms interleaved in balanced rounds), ``cells`` (per-cell summaries),
``verdict`` (bootstrap ratios, regression / improvement / no significant change), ``memory``
(steady / cache growth / leak), ``telemetry`` (NVML), ``report`` (JSON + schema), ``html``,
``store`` (table ``latency_runs``), ``cli``; ``samples`` holds small real models for tests and bench/.
Exit code 3 means "regression".
"""
