"""Multiple-queue backfilling on hand-checked tiny traces (rules: docs/policies.md and
docs/mqbf.md).

Queues are numbered from 0 here (queue 0 = shortest estimates). With two queues and the
boundary 100 s, a job goes to queue 0 if its estimate is below 100 s, else to queue 1.
"""

from __future__ import annotations


import pytest

from conftest import run_main, run_whatif_all, workload_from_rows
from olsctl.checker import StrictChecker
from olsctl.config import build_config
from olsctl.errors import ConfigError
from olsctl.policies import make_policy
from olsctl.state import SimState


def mqbf2(**kw):
    return make_policy({"name": "mqbf", "queues": 2, "boundaries_s": [100], **kw})


def both(workload, policy, **kw) -> dict[int, float]:
    main = run_main(workload, policy=policy, **kw)
    assert run_whatif_all(workload, policy=policy, **kw) == main
    return main


def one_pass(rows, machine, policy, active=None):
    """A state at t = max submit with ``rows`` waiting (job, submit, estimate, procs);
    runs one pass under a strict checker and returns the state."""
    state = SimState(machine, [r[0] for r in rows], [r[1] for r in rows],
                     [r[3] for r in rows], [r[2] for r in rows], [r[2] for r in rows],
                     active, StrictChecker())
    state.now_s = max(r[1] for r in rows)
    for i in range(len(rows)):
        state.arrive(i)
    state.run_pass(policy)
    return state


def test_queue_assignment_at_the_boundaries():
    p = make_policy({"name": "mqbf"})  # 4 queues, 100 / 1,000 / 10,000 s
    got = [p.queue_index(e) for e in (1, 99, 99.999, 100, 999, 1000, 9999, 10000, 1e7)]
    assert got == [0, 0, 0, 1, 1, 2, 2, 3, 3]


def test_largest_remainder_shares():
    even = make_policy({"name": "mqbf"})  # 4 even shares
    assert even.owned(8) == (2, 2, 2, 2)
    assert even.owned(6) == (2, 2, 1, 1)  # remainders tie: lowest index
    assert even.owned(3) == (1, 1, 1, 0)  # an empty partition
    three = make_policy({"name": "mqbf", "queues": 3, "boundaries_s": [100, 1000],
                         "shares": [1, 1, 2]})
    assert three.owned(10) == (3, 2, 5)
    two = make_policy({"name": "mqbf", "queues": 2, "boundaries_s": [100],
                       "shares": [0.25, 0.75]})
    assert two.owned(7) == (2, 5)  # 1.75, 5.25


def test_borrowing_allowed_when_own_partition_is_too_small():
    # 8 processors, partitions 4 / 4. A (queue 1, 6 procs) starts at once: 4 of its own
    # and 2 borrowed from partition 0 (lowest index first).
    state = one_pass([(1, 0, 1000, 6)], 8, mqbf2())
    assert state.started == [0]
    assert state.alloc[0] == (2, 4)


def test_job_wider_than_its_partition_and_no_borrowing():
    rows = [(1, 0, 10, 6)]  # queue 0, wider than its 4 processors
    assert one_pass(rows, 8, mqbf2()).alloc[0] == (4, 2)
    assert one_pass(rows, 8, mqbf2(borrow=False)).started == []
    # and a run refuses such a job up front, naming the key and the job
    policy = mqbf2(borrow=False)
    problem = policy.check_jobs([17], [6], [10.0], 8)
    assert "job 17" in problem and "wider than its partition (4 processors)" in problem


def test_borrowing_refused_when_it_would_delay_another_queues_pivot():
    # 8 processors, partitions 4 / 4; exact estimates (runtime = estimate).
    # t=0: A (queue 1, 4 procs, 1000 s) fills partition 1; B (queue 0, 2 procs, 60 s)
    #      takes 2 of partition 0.
    # t=1: C (queue 0, 3 procs, 60 s) cannot start (2 free in partition 0, none to
    #      borrow): queue 0's pivot, reserved at 60 (B ends) with 3 of partition 0.
    #      D (queue 1, 2 procs, 200 s): partition 1 is full; partition 0 has 2 free now
    #      but only 1 over [60, 120) because of C, so borrowing would delay C: refused.
    #      D is queue 1's pivot; the earliest window with 2 free is from 120 (C ends) in
    #      partition 0, before A frees partition 1 at 1000, so it borrows then.
    #      E (queue 1, 2 procs, 50 s) ends at 51 <= 60: it borrows 2 of partition 0 now.
    # t=60: B ends, C starts; t=120: C ends, D starts.
    w = workload_from_rows([(1, 0, 1000, 4), (2, 0, 60, 2), (3, 1, 60, 3), (4, 1, 200, 2),
                            (5, 1, 50, 2)], machine_procs=8)
    assert both(w, mqbf2()) == {1: 0, 2: 0, 3: 60, 4: 120, 5: 1}
    # Without C, nothing is reserved in partition 0 and D borrows at once.
    w = workload_from_rows([(1, 0, 1000, 4), (2, 0, 60, 2), (4, 1, 200, 2)], machine_procs=8)
    assert both(w, mqbf2()) == {1: 0, 2: 0, 4: 1}


def test_empty_partition_jobs_borrow():
    # 4 processors, 4 queues (boundaries 10 / 20 / 30 s) but only 3 active: partitions
    # own 1 / 1 / 1 / 0. A queue-3 job (estimate 40 s) borrows from partition 0.
    policy = make_policy({"name": "mqbf", "queues": 4, "boundaries_s": [10, 20, 30]})
    assert policy.owned(3) == (1, 1, 1, 0)
    state = one_pass([(1, 0, 40, 1)], 4, policy, active=3)
    assert state.alloc[0] == (1, 0, 0, 0)
    # a second, 3-wide queue-3 job takes what is left, lowest index first
    state = one_pass([(1, 0, 40, 1), (2, 0, 40, 2)], 4, policy, active=3)
    assert state.alloc[1] == (0, 1, 1, 0)


def test_shares_follow_the_active_processor_count():
    # 8 processors, 2 queues: 4 / 4 with all active; after shrinking to 6 active,
    # 3 / 3, so a 4-wide queue-0 job borrows 1.
    policy = mqbf2()
    assert policy.owned(8) == (4, 4) and policy.owned(6) == (3, 3)
    state = one_pass([(1, 0, 10, 4)], 8, policy, active=6)
    assert state.alloc[0] == (3, 1)
    # custom shares 1:3 of 8 -> 2 / 6, rescaled to 5 active -> 1.25 / 3.75 -> 1 / 4
    weighted = mqbf2(shares=[1, 3])
    assert weighted.owned(8) == (2, 6) and weighted.owned(5) == (1, 4)


def test_shrinking_mid_run_under_mqbf_never_oversubscribes():
    # Run with the active count halved at t=5: running jobs keep going, later starts
    # respect the 4 active processors (the strict checker raises otherwise).
    w = workload_from_rows([(i, i, 30 + 10 * (i % 3), 1 + i % 4) for i in range(1, 25)],
                           machine_procs=8)
    from conftest import make_main
    sim = make_main(w, policy=mqbf2())
    sim.at(5, lambda s: s.set_active_procs(4))
    records = sim.run()
    assert len(records.jobs) == 24
    late = [r for r in records.jobs if r.start_s >= 5]
    assert late
    assert max(b for t, b in zip(records.samples.time_s, records.samples.busy_procs)
               if t >= 5) <= 8


def test_k1_mqbf_equals_easy_on_a_tiny_trace():
    w = workload_from_rows([(1, 0, 100, 3), (2, 1, 50, 2), (3, 2, 10, 1), (4, 2, 200, 1),
                            (5, 3, 20, 2), (6, 30, 5, 4)], machine_procs=4)
    k1 = make_policy({"name": "mqbf", "queues": 1, "boundaries_s": []})
    assert both(w, k1) == run_main(w)


@pytest.mark.parametrize("policy,key", [
    ({"name": "mqbf", "queues": 2, "boundaries_s": [10, 20]}, "policy.boundaries_s"),
    ({"name": "mqbf", "boundaries_s": [100, 50, 1000]}, "policy.boundaries_s"),
    ({"name": "mqbf", "queues": 0, "boundaries_s": []}, "policy.queues"),
    ({"name": "mqbf", "shares": [1, 1]}, "policy.shares"),
    ({"name": "mqbf", "shares": [1, "a", 1, 1]}, "policy.shares[1]"),
    ({"name": "mqbf", "borrow": "yes"}, "policy.borrow"),
    ({"name": "mqbf", "order": "lifo"}, "policy.order"),
])
def test_bad_mqbf_settings_name_the_key(policy, key):
    with pytest.raises(ConfigError) as err:
        build_config({"policy": policy}, source="x.yaml")
    assert f"x.yaml: {key}" in str(err.value)
