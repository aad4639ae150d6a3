"""The printout of `bench/bench_job.py --multivariate-cost`: a run that cannot be told from its start-up has no
rate (``n/a``), where the start-up's median subtracted from it used to leave a rate of 10^13 events/s."""

from __future__ import annotations

import math

from tests.conftest import load_bench

BENCH = load_bench("bench_job")


def test_a_run_no_longer_than_the_start_ups_spread_has_no_rate():
    startups = [9.0, 10.0, 10.5]  # median 10.0 s, spread 1.5 s
    assert BENCH.net_rate(20_000, 12.0, startups) == 10_000.0
    assert math.isnan(BENCH.net_rate(20_000, 11.4, startups))  # 1.4 s over the median: within the spread
    assert math.isnan(BENCH.net_rate(20_000, 9.5, startups))


def test_the_printout_says_n_a_for_such_runs_and_its_medians_skip_them(capsys):
    figures = {"on": [(150_000.0, 9.9), (140_000.0, 10.1)], "off": [(170_000.0, 7.9), (175_000.0, 8.0)],
               "vector": [(float("nan"), 150.0), (8_000.0, 149.0)]}
    BENCH.print_multivariate_cost(1_000_000, 20_000, 2, (10.0, 3.0), figures)
    out = capsys.readouterr().out
    vector = next(line for line in out.splitlines() if "one vector of" in line)
    assert vector.split(": ")[1].strip().startswith("8,000 events/s")  # the median of the rounds with a rate
    assert "rounds: n/a, 8,000 events/s" in vector
    assert ("vector model / 25-feature model (group on): events/s 0.055 (1 vector run(s) n/a: no longer than the "
            "start-up runs' spread)") in out  # 8,000 / 145,000
