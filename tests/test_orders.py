"""Queue orders (FCFS, SAF, SJF, WFP) pinned on a hand-worked trace, under EASY and MQBF.

The trace serialises the waiting jobs, so that each scheduling pass starts exactly the
first job of the order and nothing else; the start times are then the order itself, and
a wrong sort key (e.g. one reversed) moves them.

Machine of 4 processors, exact estimates (estimate = runtime):

    job  submit  procs  runtime  area (procs x runtime)
     1      0      4      100      400   the blocker: holds the whole machine 0-100
     2      5      3       60      180
     3     10      4       50      200
     4     45      3       40      120
     5     90      4       20       80

Job 1 arrives alone and starts at 0; jobs 2-5 arrive while no processor is free (those
passes start nothing). Every waiting job needs 3 or 4 processors, so no two of them fit
together and no job can backfill beside a running one (at most 1 processor is idle).
So at 100 the first job of the order starts, and at each of its ends the first of the
rest (the order recomputed then), back to back.
"""

from __future__ import annotations

import pytest

from conftest import run_main, run_whatif_all, workload_from_rows
from olsctl.policies import make_policy

ROWS = [(1, 0, 100, 4), (2, 5, 60, 3), (3, 10, 50, 4), (4, 45, 40, 3), (5, 90, 20, 4)]

#: start times per order, worked out by hand (see each comment)
EXPECTED = {
    # arrival order 2, 3, 4, 5: 2 at 100 (ends 160), 3 at 160 (ends 210), 4 at 210
    # (ends 250), 5 at 250
    "fcfs": {1: 0.0, 2: 100.0, 3: 160.0, 4: 210.0, 5: 250.0},
    # runtime ascending 5 (20), 4 (40), 3 (50), 2 (60): 5 at 100 (ends 120), 4 at 120
    # (ends 160), 3 at 160 (ends 210), 2 at 210
    "sjf": {1: 0.0, 5: 100.0, 4: 120.0, 3: 160.0, 2: 210.0},
    # area ascending 5 (80), 4 (120), 2 (180), 3 (200): 5 at 100 (ends 120), 4 at 120
    # (ends 160), 2 at 160 (ends 220), 3 at 220; differs from SJF in jobs 2 and 3
    "saf": {1: 0.0, 5: 100.0, 4: 120.0, 2: 160.0, 3: 220.0},
    # utility (wait / estimate)^3 x procs, highest first, recomputed at each pass:
    # t=100: 2: (95/60)^3 x 3 = 11.9; 3: (90/50)^3 x 4 = 23.3; 4: (55/40)^3 x 3 = 7.8;
    #        5: (10/20)^3 x 4 = 0.5                     -> 3 starts (ends 150)
    # t=150: 2: (145/60)^3 x 3 = 42.3; 4: (105/40)^3 x 3 = 54.3; 5: (60/20)^3 x 4 = 108
    #                                                   -> 5 starts (ends 170)
    # t=170: 2: (165/60)^3 x 3 = 62.4; 4: (125/40)^3 x 3 = 91.6 -> 4 starts (ends 210)
    # t=210: 2 starts. (Neither arrival order, SJF nor SAF: the wait counts.)
    "wfp": {1: 0.0, 3: 100.0, 5: 150.0, 4: 170.0, 2: 210.0},
}


def _workload():
    return workload_from_rows(ROWS, machine_procs=4)


def test_the_expected_schedules_are_four_different_ones():
    # the trace tells every order apart (else a wrong order could pass unnoticed)
    firsts = {order: sorted(starts, key=starts.get)[1:] for order, starts in EXPECTED.items()}
    assert len({tuple(v) for v in firsts.values()}) == 4


@pytest.mark.parametrize("order", sorted(EXPECTED))
def test_easy_starts_the_jobs_in_queue_order(order):
    policy = make_policy({"name": "easy", "order": order})
    w = _workload()
    assert run_main(w, policy=policy) == EXPECTED[order]
    assert run_whatif_all(w, policy=policy) == EXPECTED[order]


@pytest.mark.parametrize("order", sorted(EXPECTED))
def test_mqbf_starts_the_jobs_in_queue_order(order):
    # Two queues split at 45 s: queue 1 holds jobs 4 and 5 (estimates 40 and 20), queue 2
    # jobs 1, 2 and 3; each partition owns 2 processors, so every job borrows. At each
    # pass the queue whose head comes first in the order goes first (Phase A) and its
    # head starts, borrowing the other partition; the other heads and Phase B find at
    # most 1 idle processor. So MQBF starts the jobs as EASY does, in the same order,
    # switching between the queues (FCFS and WFP begin with queue 2, SJF and SAF with
    # queue 1).
    policy = make_policy({"name": "mqbf", "queues": 2, "boundaries_s": [45],
                          "order": order})
    w = _workload()
    assert run_main(w, policy=policy) == EXPECTED[order]
    assert run_whatif_all(w, policy=policy) == EXPECTED[order]


#: MQBF with two queues whose partitions run side by side (6 processors, 3 each,
#: boundary 100 s). Job 1 (queue 2, 3 procs, 400 s) holds partition 2 for the whole
#: time, so queue 1's jobs (2 or 3 procs: no two fit in 3) run one at a time in
#: partition 1 and cannot borrow.
#:
#:     job  submit  procs  runtime  area
#:      1      0      3      400     1200   queue 2
#:      2      0      3       50      150   queue 1, holds partition 1 0-50
#:      3      1      2       80      160
#:      4      3      2       70      140
#:      5     40      3       60      180
PARTITION_ROWS = [(1, 0, 400, 3), (2, 0, 50, 3), (3, 1, 80, 2), (4, 3, 70, 2), (5, 40, 60, 3)]

PARTITION_EXPECTED = {
    # 3 at 50 (ends 130), 4 at 130 (ends 200), 5 at 200
    "fcfs": {1: 0.0, 2: 0.0, 3: 50.0, 4: 130.0, 5: 200.0},
    # 5 (60) at 50 (ends 110), 4 (70) at 110 (ends 180), 3 (80) at 180
    "sjf": {1: 0.0, 2: 0.0, 5: 50.0, 4: 110.0, 3: 180.0},
    # areas 4: 140, 3: 160, 5: 180: 4 at 50 (ends 120), 3 at 120 (ends 200), 5 at 200
    "saf": {1: 0.0, 2: 0.0, 4: 50.0, 3: 120.0, 5: 200.0},
    # t=50: 3: (49/80)^3 x 2 = 0.46; 4: (47/70)^3 x 2 = 0.61; 5: (10/60)^3 x 3 = 0.01
    #       -> 4 (ends 120)
    # t=120: 3: (119/80)^3 x 2 = 6.58; 5: (80/60)^3 x 3 = 7.11 -> 5 (ends 180); 3 at 180
    "wfp": {1: 0.0, 2: 0.0, 4: 50.0, 5: 120.0, 3: 180.0},
}


@pytest.mark.parametrize("order", sorted(PARTITION_EXPECTED))
def test_mqbf_orders_a_queue_within_its_partition_while_another_is_busy(order):
    # at t=0 jobs 1 and 2 start in their own partitions whatever the order
    policy = make_policy({"name": "mqbf", "queues": 2, "boundaries_s": [100],
                          "order": order})
    w = workload_from_rows(PARTITION_ROWS, machine_procs=6)
    assert run_main(w, policy=policy) == PARTITION_EXPECTED[order]
    assert run_whatif_all(w, policy=policy) == PARTITION_EXPECTED[order]
