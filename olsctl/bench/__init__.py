"""Speed benchmark: the main simulator and the what-if engine against a plain heapq EASY
loop, run in the same process on the same jobs (simulation only; parsing timed apart),
and a whole ``olsctl run`` (a process of its own: start, parse, simulate, write) against
the plain loop reading the file itself.

The reference loop below is deliberately independent of olsctl's state and policy code:
one heap of arrivals and completions, a list queue, and the EASY rules written inline.
It also serves as a cross-check: the benchmark verifies all three give the same starts.
"""

from __future__ import annotations

from olsctl.bench.controller_cost import (EASY_OLS_CONTROLLER, LAWSON_CONTROLLER, OlsRow,
                                          TickCostRow, bench_congested, bench_feedback_turns,
                                          bench_ols, bench_ols_turns, tick_cost)
from olsctl.bench.reference import (BIG_COPIES, BIG_JOBS, bench_whole, make_big_log,
                                    plain_load, plain_run, reference_easy, whole_run)
from olsctl.bench.simulators import BenchRow, bench_workload, compile_times

__all__ = ["BIG_COPIES", "BIG_JOBS", "BenchRow", "EASY_OLS_CONTROLLER", "LAWSON_CONTROLLER",
           "OlsRow", "TickCostRow", "bench_congested", "bench_feedback_turns", "bench_ols",
           "bench_ols_turns", "bench_whole", "bench_workload", "compile_times", "make_big_log",
           "plain_load", "plain_run", "reference_easy", "tick_cost", "whole_run"]
