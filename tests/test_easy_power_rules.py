"""EASY with power checks (``easy-power``), worked out by hand: EASY's own rules still
hold under a cap that never binds (a backfilled job may not delay the head's
reservation), and the power verification lets a job start when the predicted power of
the machine comes exactly to the cap, not a watt above. The window and greedy knapsacks
hold the same boundary: a job whose predicted rise is exactly the headroom fits.

Every expected value below is worked out in the test's docstring.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import make_main, run_main, workload_from_rows
from olsctl.checker import StrictChecker
from olsctl.policies import make_policy
from olsctl.power.cap import CapSchedule
from olsctl.power.profiles import PowerProfiles
from olsctl.power.runtime import power_state
from olsctl.state import SimState

VERIFY_METHODS = ("naive", "mean", "max", "gaussian")


def _flat(levels: list[float]) -> PowerProfiles:
    """One phase per job at the given power per processor (mean = max, std 0)."""
    n = len(levels)
    return PowerProfiles(np.arange(n + 1), np.ones(n), np.asarray(levels, dtype=float), 0)


# -- EASY's reservation under a cap that never binds ---------------------------------------

#: 5 processors. Job 1 (2 procs, 100 s) starts at 0. Job 2 (4 procs, 10 s, submitted 1)
#: is the blocked head: at 100 job 1 ends and 5 are free, so the shadow time is 100 with
#: extra = 5 - 4 = 1. Job 3 (1 proc, 50 s, submitted 2) ends at 52 <= 100: backfilled
#: at 2. Job 4 (1 proc, 200 s, submitted 3) would end at 203 > 100 and uses the one
#: extra processor: backfilled at 3 (extra 0). Job 5 (1 proc, 200 s, submitted 4) fits
#: now (1 free) but would end at 204 > 100 and needs 1 > extra 0: it waits. At 100 job 1
#: ends: 4 free (job 4 holds one), job 2 starts and ends at 110, when job 5 starts.
#: (Were the shadow time ignored, job 5 would start at 4 and the head would wait for
#: job 4's end at 203.)
BACKFILL_ROWS = [(1, 0, 100, 2), (2, 1, 10, 4), (3, 2, 50, 1), (4, 3, 200, 1),
                 (5, 4, 200, 1)]
BACKFILL_STARTS = {1: 0.0, 2: 100.0, 3: 2.0, 4: 3.0, 5: 110.0}


@pytest.mark.parametrize("order", ["fcfs", "saf"])
@pytest.mark.parametrize("verify", VERIFY_METHODS)
def test_easy_power_does_not_backfill_past_the_heads_reservation(verify, order):
    """The workload of :data:`BACKFILL_ROWS`, 100 W per processor at peak, jobs at 60 to
    100 W per processor, the cap twice the machine's peak (1000 W over 500 W): no
    verification can refuse a start, so the starts are plain EASY's, worked out above.
    Under SAF the passes go the same way: job 2 (40 processor-seconds) heads the queue
    ahead of job 3 (50), job 4 and job 5 (200 each)."""
    w = workload_from_rows(BACKFILL_ROWS, machine_procs=5)
    policy = make_policy({"name": "easy-power", "verify": verify, "order": order,
                          "predictor": "oracle"})
    sim = make_main(w, policy=policy)
    sim.state.power = power_state(_flat([100.0, 80.0, 60.0, 70.0, 90.0]), [0] * 5, 10.0,
                                  2.0, 100.0, CapSchedule.constant(1000.0))
    records = sim.run()
    starts = {int(r.job_id): float(r.start_s) for r in records.jobs}
    assert starts == BACKFILL_STARTS
    assert sim.state.power.forced_starts == 0
    # plain EASY (the kernels' pass) agrees with the hand-worked starts
    assert run_main(w, policy=make_policy({"name": "easy", "order": order})) == \
        BACKFILL_STARTS


# -- the verification at exactly the cap ------------------------------------------------------


def _two_waiting(verify: str, cap_w: float) -> SimState:
    """4 processors, all active (none asleep), idle ones at 10 W; two 1-processor jobs
    waiting, each predicted at 70 W on its processor (flat profiles: mean = max = 70 W,
    std 0), the peak 70 W (so the naive method's prediction is 70 W too). After both
    start: 70 + 70 + 2 idle x 10 W = 160 W; after the first alone: 70 + 3 x 10 = 100 W."""
    st = SimState(4, [0, 1], [0.0, 0.0], [1, 1], [10.0, 10.0], [10.0, 10.0],
                  checker=StrictChecker())
    st.power = power_state(_flat([70.0, 70.0]), [0, 0], 10.0, 2.0, 70.0,
                           CapSchedule.constant(cap_w))
    st.arrive(0)
    st.arrive(1)
    st.run_pass(make_policy({"name": "easy-power", "verify": verify, "sigma": 3.0,
                             "predictor": "oracle"}))
    return st


@pytest.mark.parametrize("verify", VERIFY_METHODS)
def test_a_start_that_brings_the_machine_exactly_to_the_cap_is_allowed(verify):
    """Cap 160 W: the second job brings the predicted power to exactly 160 W (the
    Gaussian margin is 3 x 0 W), within the cap, so both start. A cap one representable
    step below 160 W refuses the second job."""
    st = _two_waiting(verify, 160.0)
    assert st.started == [0, 1] and st.power.forced_starts == 0
    st = _two_waiting(verify, float(np.nextafter(160.0, 0.0)))
    assert st.started == [0] and st.power.forced_starts == 0


def _knapsack_state(cap_w: float, now_s: float = 0.0) -> SimState:
    """4 processors, idle ones at 10 W; a 1-processor job (60 W) runs from 0, and two
    1-processor jobs wait (70 W and 50 W per processor, submitted 0). Measured power:
    60 + 3 x 10 = 90 W. Rises: job 1 60 W, job 2 40 W: both together 100 W."""
    st = SimState(4, [0, 1, 2], [0.0] * 3, [1, 1, 1], [100.0] * 3, [100.0] * 3,
                  checker=StrictChecker())
    st.power = power_state(_flat([60.0, 70.0, 50.0]), [0] * 3, 10.0, 2.0, 100.0,
                           CapSchedule.constant(cap_w))
    for i in range(3):
        st.arrive(i)
    st.start(0)
    st.queue.remove(0)
    st.now_s = now_s
    return st


@pytest.mark.parametrize("spec", [
    {"name": "knapsack", "window": 2, "predictor": "oracle"},
    {"name": "greedy-knapsack", "predictor": "oracle"},
])
def test_knapsacks_take_a_rise_exactly_equal_to_the_headroom(spec):
    """Cap 190 W over 90 W measured: 100 W of headroom, exactly the two waiting jobs'
    rises together, so both start (the knapsack: both fit, the most processors; the
    greedy one, at t=10: job 2 first, wait 10 over 40 W, then job 1 into the 60 W left).
    One step below 190 W only one fits: the knapsack takes job 2 (the same processors
    for less power), the greedy one its best ratio (job 2 again). (Job 0 started
    before the pass.)"""
    now = 10.0 if spec["name"] == "greedy-knapsack" else 0.0
    st = _knapsack_state(190.0, now)
    st.run_pass(make_policy(spec))
    assert sorted(st.started) == [1, 2] and st.power.forced_starts == 0
    st = _knapsack_state(float(np.nextafter(190.0, 0.0)), now)
    st.run_pass(make_policy(spec))
    assert st.started == [2] and st.power.forced_starts == 0
