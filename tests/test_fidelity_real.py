"""What-if fidelity on a real log: from the main simulator's snapshot at T, the what-if
engine reproduces the starts of the main simulator run on the log cut after T."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from olsctl.checker import StrictChecker
from olsctl.policies import make_policy
from olsctl.sim import MainSimulator
from olsctl.whatif import run_whatif
from olsctl.workload import load_workload

KTH = Path(__file__).resolve().parent.parent / "traces" / "KTH-SP2-1996-2.1-cln.swf.gz"
N_CUTS = 24


def test_whatif_reproduces_main_simulator_after_cut_times():
    w = load_workload(KTH)
    est = w.estimate_s("user")
    policy = make_policy({"name": "easy", "order": "fcfs"})
    # cut times spread over the log, at submit times (so arrivals at T are included)
    cuts = np.unique(w.submit_s[np.linspace(500, len(w) - 500, N_CUTS).astype(int)])
    assert cuts.size >= 20
    snaps = {}
    sim = MainSimulator(w, policy, est, checker=StrictChecker())
    for t in cuts.tolist():
        sim.at(t, lambda s, t=t: snaps.__setitem__(t, s.state.snapshot()))
    sim.run()
    compared = 0
    for t in cuts.tolist():
        snap = snaps[t]
        cut = w.select(np.flatnonzero(w.submit_s <= t))
        truth = MainSimulator(cut, policy, cut.estimate_s("user"),
                              checker=StrictChecker()).run()
        truth_start = {r.job_id: r.start_s for r in truth.jobs}
        result = run_whatif(snap, policy, checker=StrictChecker())
        assert result.unstarted == 0
        waiting = slice(snap.n_running, None)
        for job, start in zip(result.job_id[waiting].tolist(), result.start_s[waiting].tolist()):
            assert start == truth_start[job], (t, job)
            compared += 1
        # running jobs keep their start times
        for job, start in zip(snap.job_id[:snap.n_running].tolist(),
                              snap.start_s[:snap.n_running].tolist()):
            assert truth_start[job] == start
    assert compared > 100  # the cuts found real queues to replay
