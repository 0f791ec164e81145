"""EASY backfilling on tiny traces whose start times are worked out by hand.

Every case is checked on both engines: the SimPy main simulator and the what-if engine
(from an empty machine, every job an arrival). The rules (docs/internals.md,
Semantics): at one instant,
all completions, then all arrivals, then one pass; a pass starts jobs from the head while
the head fits, reserves for the blocked head at the shadow time with ``extra`` processors,
then backfills a job that fits now and ends by the shadow time or uses <= ``extra``.
Rows are (job_id, submit_s, runtime_s, procs[, requested_time_s]).
"""

from __future__ import annotations

import math

import pytest

from conftest import (
    easy_policy,
    job_table,
    make_main,
    run_main,
    run_whatif_all,
    starts_of,
    workload_from_rows,
)
from olsctl.checker import StrictChecker
from olsctl.errors import SimulationError
from olsctl.state import SimState
from olsctl.whatif import empty_snapshot, run_whatif
from olsctl.workload import load_workload

ENGINES = {"main": run_main, "whatif": run_whatif_all}

CASES = []


def case(name, machine, rows, estimates, expected):
    CASES.append(pytest.param(machine, rows, estimates, expected, id=name))


# (a) Backfill that ends before the shadow time. Machine 4.
# t=0: J1 (2p, 10s) starts, free 2. t=1: J2 needs 4 > 2: blocked head; shadow = J1's end
# 10, extra = 4 - 4 = 0. t=2, one pass: J3 (2p, 7s) fits and 2 + 7 = 9 <= 10: backfilled
# at 2, free 0; J4 (2p, 1s) no longer fits. t=9: J3 ends, free 2: J2 still blocked
# (shadow 10, extra 0); J4 fits and 9 + 1 = 10 <= 10: backfilled at 9.
# t=10: J1 and J4 end, J2 starts. (Without backfilling J3 would wait to 15.)
case("a-ends-by-shadow", 4,
     [(1, 0, 10, 2), (2, 1, 5, 4), (3, 2, 7, 2), (4, 2, 1, 2)], "exact",
     {1: 0, 2: 10, 3: 2, 4: 9})

# (b) Backfill by the extra processors, extra shrinking within one pass. Machine 8.
# t=0: J1 (4p, 10s) starts, free 4. t=1: J2 needs 5: blocked; shadow 10 (J1 ends: 8 free),
# extra = 8 - 5 = 3. t=2, one pass, queue J2 J3 J4 J5: J3 (2p, 100s) fits, ends 102 > 10
# but 2 <= extra 3: starts, extra 1, free 2. J4 (2p, 100s) fits but 2 > extra 1: refused.
# J5 (1p, 100s) fits, 1 <= extra 1: starts, extra 0, free 1.
# t=10: J1 ends; running J3+J5 = 3p, free 5: J2 (5p) starts, ends 15. J4 blocked, free 0.
# t=15: J2 ends, J4 starts.
case("b-extra-shrinks", 8,
     [(1, 0, 10, 4), (2, 1, 5, 5), (3, 2, 100, 2), (4, 2, 100, 2), (5, 2, 100, 1)], "exact",
     {1: 0, 2: 10, 3: 2, 4: 15, 5: 2})

# (c) Backfill refused: would delay the head. Machine 4.
# t=0: J1 (2p, 10s) starts. t=1: J2 (4p) blocked, shadow 10, extra 0. t=2: J3 (2p, 9s)
# fits now but 2 + 9 = 11 > 10 and 2 > extra 0: refused. t=10: J2 starts (to 15).
# t=15: J3 starts.
case("c-refused", 4,
     [(1, 0, 10, 2), (2, 1, 5, 4), (3, 2, 9, 2)], "exact",
     {1: 0, 2: 10, 3: 15})

# (d1) A completion and an arrival at the same instant. Machine 2.
# t=0: J1 (2p, 10s) starts. t=10: J1 completes first, then J2 (2p, 3s) and J3 (1p, 1s)
# arrive, then one pass: J2 fits and starts; J3 finds no free processor. t=13: J3 starts.
case("d-completion-and-arrival", 2,
     [(1, 0, 10, 2), (2, 10, 3, 2), (3, 10, 1, 1)], "exact",
     {1: 0, 2: 10, 3: 13})

# (d2) Same tie where the order matters: user estimates. Machine 4.
# t=0: J1 (2p, runs 10s, estimate 50) starts. t=10: J1 really completes; J2 (4p, 5s) and
# J3 (2p, 5s) arrive. Completions first, so the one pass sees 4 free: J2 starts (to 15),
# J3 waits, starts at 15. (Had a pass run on the arrivals before the completion, J2
# would be blocked with shadow 50 and J3 (10 + 5 <= 50) backfilled at 10, J2 at 15.)
case("d-completion-before-arrival-user", 4,
     [(1, 0, 10, 2, 50), (2, 10, 5, 4, 5), (3, 10, 5, 2, 5)], "user",
     {1: 0, 2: 10, 3: 15})

# (d3) Jobs ending exactly at the shadow time all count as ended. Machine 8.
# t=0: J1 (2p, 10s), J2 (2p, 10s), J3 (2p, 20s) start, free 2. t=1: J4 needs 4: blocked.
# Shadow: J1's end 10 gives 2 + 2 = 4 >= 4 -> shadow 10; J2 also ends at 10 and counts:
# 6 free at 10, extra = 6 - 4 = 2 (it would be 0 if only J1 counted).
# t=2, one pass: J5 (1p, 8s) ends at 10 = shadow: allowed, extra stays 2, free 1.
# J6 (1p, 100s) ends after the shadow but 1 <= extra 2: starts, free 0.
# t=10: J1, J2, J5 end; running J3 (2p) + J6 (1p), free 5: J4 starts at 10 as reserved.
case("d-ends-exactly-at-shadow", 8,
     [(1, 0, 10, 2), (2, 0, 10, 2), (3, 0, 20, 2), (4, 1, 5, 4), (5, 2, 8, 1),
      (6, 2, 100, 1)], "exact",
     {1: 0, 2: 0, 3: 0, 4: 10, 5: 2, 6: 2})

# (e) Jobs as wide as the machine. Machine 4.
# t=0: J1 (4p, 5s) starts on the whole machine. t=1..4: J2..J5 arrive, nothing free.
# t=5: J1 ends; J2 (1p, 9s) starts (to 14), free 3. J3 (4p) blocked: shadow 14, extra 0.
# J4 (1p, 9s): 5 + 9 = 14 <= 14: backfilled (to 14), free 2. J5 (2p, 10s): fits, but
# 15 > 14 and 2 > 0: refused. t=14: J2 and J4 end, J3 starts on all 4 (to 19).
# t=19: J5 starts.
case("e-machine-wide", 4,
     [(1, 0, 5, 4), (2, 1, 9, 1), (3, 2, 5, 4), (4, 3, 9, 1), (5, 4, 10, 2)], "exact",
     {1: 0, 2: 5, 3: 14, 4: 5, 5: 19})

# (f1) User estimates refuse a backfill that exact estimates allow. Machine 4.
# J1 (2p, 10s, req 10), J2 (4p, 5s, req 5) at 1, J3 (2p, runs 7s, requested 20) at 2.
# Exact: J2 blocked, shadow 10, extra 0; J3 ends 2 + 7 = 9 <= 10: backfilled at 2.
# User: J3's estimate = max(20, 7) = 20: 2 + 20 = 22 > 10 and 2 > 0: refused;
# J2 starts at 10 (to 15), J3 at 15.
F_ROWS = [(1, 0, 10, 2, 10), (2, 1, 5, 4, 5), (3, 2, 7, 2, 20)]
case("f-exact-allows", 4, F_ROWS, "exact", {1: 0, 2: 10, 3: 2})
case("f-user-refuses", 4, F_ROWS, "user", {1: 0, 2: 10, 3: 15})

# (f2) A request below the runtime does not shorten the estimate. Machine 4, user.
# J1 (2p, runs 10s, requested 3) has estimate max(3, 10) = 10. J2 (4p, 5s, no request:
# estimate 5) blocked at 1: shadow 10, extra 0. J3 (2p, runs 9s, requested 1): estimate
# 9, 2 + 9 = 11 > 10: refused. (Using the raw requests would give shadow 3 and
# 2 + 1 <= 3, a backfill at 2.) t=10: J2 starts (to 15); t=15: J3.
case("f-request-below-runtime", 4,
     [(1, 0, 10, 2, 3), (2, 1, 5, 4, -1), (3, 2, 9, 2, 1)], "user",
     {1: 0, 2: 10, 3: 15})


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("machine, rows, estimates, expected", CASES)
def test_hand_computed_starts(engine, machine, rows, estimates, expected):
    workload = workload_from_rows(rows, machine)
    got = ENGINES[engine](workload, estimates)
    assert got == {j: float(s) for j, s in expected.items()}


def test_user_estimate_rule():
    # estimate = max(requested, runtime); missing request (-1) -> runtime.
    wl = workload_from_rows([(1, 0, 10, 1, 3), (2, 0, 10, 1, 30), (3, 0, 10, 1, -1)], 4)
    assert wl.estimate_s("user").tolist() == [10.0, 30.0, 10.0]
    assert wl.estimate_s("exact").tolist() == [10.0, 10.0, 10.0]


# (d4) Several arrivals at one instant, read from an SWF file listed out of id order.
# Lines: J5, J3, J4 at t=0, then J1 at t=1. Queue order = (submit, id): J3, J4, J5, J1.
# Machine 4. t=0: J3 (3p, 10s) starts, J4 (1p, 20s) starts, free 0; J5 (2p) blocked:
# shadow 10 (J3 ends: 3 free), extra 1. t=1: J1 (1p, 2s) arrives, no free processor.
# t=10: J3 ends, free 3: J5 starts (to 15), then J1 fits and starts.
# (In file order J5 would start at 0 and J1 be backfilled at 1.)
SWF_TIES = """\
; MaxProcs: 4
5 0 -1 5 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1
3 0 -1 10 3 -1 -1 3 -1 -1 1 1 1 -1 -1 -1 -1 -1
4 0 -1 20 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1
1 1 -1 2 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1
"""


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_simultaneous_arrivals_queue_by_submit_then_id(tmp_path, engine):
    path = tmp_path / "ties.swf"
    path.write_text(SWF_TIES)
    workload = load_workload(path)
    assert workload.job_id.tolist() == [3, 4, 5, 1]
    got = ENGINES[engine](workload, "exact")
    assert got == {3: 0.0, 4: 0.0, 5: 10.0, 1: 10.0}


# (g) Lowering the active processors mid-run. Machine 4.
# t=0: J1 (3p, 10s) starts. t=5: active -> 2; J1 keeps running (busy 3 > active 2).
# t=6: J2 (1p, 5s) arrives: 4 - 3 = 1 processor is idle but only 2 are active: waits.
# t=7, 8, 9: J3 (2p, 1s), J4 (3p, 2s), J5 (1p, 1s) arrive, nothing can start.
# t=10: J1 ends, free 2: J2 starts (to 15), free 1; J3 (2p) blocked: shadow 15, extra 0;
# J4 (3p) does not fit; J5 (1p): 10 + 1 <= 15: backfilled (to 11).
# t=15: J2 ends, J3 starts (to 16). J4 (3p) > 2 active: no shadow, it waits.
# t=30: active -> 4: J4 starts.
G_ROWS = [(1, 0, 10, 3), (2, 6, 5, 1), (3, 7, 1, 2), (4, 8, 2, 3), (5, 9, 1, 1)]


def test_lowering_active_procs_main():
    workload = workload_from_rows(G_ROWS, 4)
    checker = StrictChecker()
    sim = make_main(workload, checker=checker)
    sim.at(5, lambda s: s.set_active_procs(2))
    sim.at(30, lambda s: s.set_active_procs(4))
    records = sim.run()
    assert starts_of(records) == {1: 0.0, 2: 10.0, 3: 15.0, 4: 30.0, 5: 10.0}
    ends = {r.job_id: r.end_s for r in records.jobs}
    assert ends[1] == 10.0  # not killed when the active count dropped below its width
    assert checker.starts_checked == 5
    samples = list(zip(records.samples.time_s, records.samples.busy_procs,
                       records.samples.active_procs))
    assert (5.0, 3, 2) in samples  # running job kept although busy > active
    for t, busy, active in samples:
        if 10 <= t < 30:
            assert active == 2 and busy <= 2, (t, busy, active)


def test_lowering_active_procs_whatif_from_snapshot():
    # Snapshot at t=5 right after the change: J1 running, nothing waiting, 2 active.
    # Forward with J2..J5 as arrivals and no setting change: same starts as the main run
    # up to t=30, and J4 (3p > 2 active, nothing left running) never starts.
    workload = workload_from_rows(G_ROWS, 4)
    sim = make_main(workload)
    snaps = []
    sim.at(5, lambda s: s.set_active_procs(2))
    sim.at(5, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    (snap,) = snaps
    assert (snap.now_s, snap.active_procs, snap.n_running, snap.n_waiting) == (5.0, 2, 1, 0)
    later = workload.select(workload.submit_s > 5)
    res = run_whatif(snap, easy_policy(), arrivals=job_table(later), checker=StrictChecker())
    got = dict(zip(res.job_id.tolist(), res.start_s.tolist()))
    assert got[1] == 0.0 and got[2] == 10.0 and got[3] == 15.0 and got[5] == 10.0
    assert math.isnan(got[4]) and res.unstarted == 1


# -- the strict checker catches broken decisions --------------------------------------------

def _state(active_procs=None):
    # three jobs: (id 1, submit 0, 2p), (id 2, submit 10, 1p), (id 3, submit 0, 3p); 4 procs
    return SimState(4, [1, 2, 3], [0.0, 10.0, 0.0], [2, 1, 3], [5.0, 5.0, 5.0],
                    [5.0, 5.0, 5.0], active_procs=active_procs, checker=StrictChecker())


def test_checker_accepts_valid_starts():
    st = _state()
    st.arrive(0)
    st.start(0)
    st.now_s = 10.0
    st.arrive(1)
    st.start(1)
    st.finish(0)
    assert st.busy_procs == 1 and st.checker.starts_checked == 2


def test_checker_rejects_second_start():
    st = _state()
    st.arrive(0)
    st.start(0)
    with pytest.raises(SimulationError, match="second time"):
        st.start(0)


def test_checker_rejects_second_start_after_finish():
    st = _state()
    st.arrive(0)
    st.start(0)
    st.now_s = 5.0
    st.finish(0)
    with pytest.raises(SimulationError):
        st.start(0)


def test_checker_rejects_start_before_submit():
    st = _state()
    st.now_s = 9.0
    st.arrive(1)
    with pytest.raises(SimulationError, match="before its submission"):
        st.start(1)


def test_checker_rejects_start_beyond_active_procs():
    st = _state(active_procs=3)
    st.arrive(0)
    st.arrive(2)
    st.start(0)  # 2 of 3 active busy
    with pytest.raises(SimulationError, match="active"):
        st.start(2)  # 2 + 3 > 3


def test_checker_rejects_start_of_job_not_waiting():
    # checker.py's docstring promises to catch a job "started ... while not waiting":
    # job 1 (submit 0) is due but never joined the queue, so it must not start.
    st = _state()
    assert st.queue == []
    with pytest.raises(SimulationError):
        st.start(0)


def test_checker_rejects_finish_of_job_not_running():
    st = _state()
    st.arrive(0)
    st.start(0)
    with pytest.raises(SimulationError):
        st.checker.on_finish(st, 2)


def test_checker_catches_policy_starting_too_much_in_main_sim():
    # A broken policy that starts every waiting job must be stopped by the checker.
    class Greedy:
        name = "greedy"

        def schedule(self, state):
            for j in state.queue:
                state.start(j)

    workload = workload_from_rows([(1, 0, 10, 3), (2, 0, 10, 3)], 4)
    with pytest.raises(SimulationError):
        make_main(workload, policy=Greedy()).run()
    # and the what-if engine, with a strict checker, too
    with pytest.raises(SimulationError):
        run_whatif(empty_snapshot(0.0, 4), Greedy(), arrivals=job_table(workload),
                   checker=StrictChecker())
