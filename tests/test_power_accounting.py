"""Power accounting: energy bookkeeping, samples and CSR against independent answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conftest import make_main, workload_from_rows
from olsctl.power.accounting import MachinePower, samples, summary, timeline
from olsctl.power.cap import CapSchedule
from olsctl.power.profiles import PowerProfiles, ProfileSettings, synthetic_profiles


def _index(w):
    return {j: i for i, j in enumerate(w.job_id.tolist())}


def _run(w, changes=()):
    sim = make_main(w)
    for t, n in changes:
        sim.at(t, lambda s, n=n: s.set_active_procs(n))
    return sim.run()


def _integral(t, v, t_end):
    """Integral of the step function v (value v[k] on [t[k], t[k+1])) up to t_end."""
    t = np.asarray(t, dtype=float)
    keep = t < t_end
    edges = np.append(t[keep], t_end)
    return float((np.asarray(v, dtype=float)[keep] * np.diff(edges)).sum())


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_energy_is_jobs_plus_idle_sleep_and_wakes(data):
    machine_procs = data.draw(st.integers(2, 12))
    n = data.draw(st.integers(1, 15))
    rows, t = [], 0
    for i in range(n):
        t += data.draw(st.integers(0, 30))
        rows.append((i + 1, t, data.draw(st.integers(1, 200)),
                     data.draw(st.integers(1, machine_procs))))
    w = workload_from_rows(rows, machine_procs)
    changes = data.draw(st.lists(st.tuples(st.integers(0, 300), st.integers(1, machine_procs)),
                                 max_size=4, unique_by=lambda c: c[0]))
    rec = _run(w, sorted(changes))
    assume(not rec.unstarted)  # a job wider than the active processors never runs
    machine = MachinePower(idle_w=100.0, peak_w=500.0, sleep_w=7.0,
                           wake_latency_s=data.draw(st.sampled_from([0.0, 13.0])),
                           wake_energy_j=900.0)
    prof = synthetic_profiles(w, machine.idle_w, machine.peak_w,
                              ProfileSettings(seed=data.draw(st.integers(0, 5))))
    tl = timeline(rec, prof, _index(w), machine, CapSchedule.constant(np.inf))
    # jobs: procs x sum over phases of power x phase length, job by job
    jobs_j = 0.0
    idx = _index(w)
    for r in rec.jobs:
        frac, pw = prof.phases(idx[r.job_id])
        jobs_j += r.procs * float((frac * pw).sum()) * r.runtime_s
    # idle and sleep from the run's own samples (busy and active after every pass)
    s = rec.samples
    t_end = max(r.end_s for r in rec.jobs)
    ts = np.asarray(s.time_s)
    busy = np.asarray(s.busy_procs, dtype=float)
    act = np.asarray(s.active_procs, dtype=float)
    idle_j = 100.0 * _integral(ts, np.maximum(act - busy, 0), t_end)
    sleep_j = 7.0 * _integral(ts, machine_procs - np.maximum(act, busy), t_end)
    # wakes: every raise of the active count wakes the sleepers it needs
    wakes = 0
    for k in range(1, len(ts)):
        if act[k] > act[k - 1] and ts[k] < t_end:
            released = sum(r.procs for r in rec.jobs if r.end_s == ts[k])
            wakes += max(0, act[k] - max(act[k - 1], busy[k - 1] - released))
    expected = jobs_j + idle_j + sleep_j + wakes * 900.0
    assert tl.wakes == wakes
    assert tl.energy_j == pytest.approx(expected, rel=1e-9)
    assert tl.job_energy_j == pytest.approx(jobs_j, rel=1e-9)


def test_hand_worked_timeline_samples_and_csr():
    # 4 processors, one job of 2 processors at 300 W from 0 to 600 s; the other two idle
    # at 100 W: machine power 800 W. Samples of 300 s: two intervals at 800 W.
    w = workload_from_rows([(1, 0, 600, 2)], 4)
    rec = _run(w)
    prof = PowerProfiles(np.array([0, 1]), np.array([1.0]), np.array([300.0]), 0)
    machine = MachinePower(idle_w=100.0, peak_w=500.0, sleep_w=10.0, wake_latency_s=0.0,
                           wake_energy_j=0.0, sample_s=300.0)
    cap = CapSchedule((float("-inf"), 300.0), (1000.0, 700.0))
    tl = timeline(rec, prof, {1: 0}, machine, cap)
    assert tl.energy_j == pytest.approx(800.0 * 600)
    smp = samples(tl, 300.0)
    assert smp.mean_w.tolist() == [800.0, 800.0]
    assert smp.cap_w.tolist() == [1000.0, 700.0]
    assert smp.within_cap.tolist() == [True, False]
    assert summary(tl, smp)["csr"] == 0.5
    assert summary(tl, smp)["mean_cap_w"] == pytest.approx((1000.0 + 700.0) / 2)  # 300 s each


def test_two_phase_job_and_sleep_after_shrinking():
    # 4 processors; job 1 (1 proc, 100 s) runs 60 s at 200 W then 40 s at 400 W.
    # At t=50 the active count drops to 2: two idle processors sleep at 10 W.
    w = workload_from_rows([(1, 0, 100, 1)], 4)
    rec = _run(w, [(50, 2)])
    prof = PowerProfiles(np.array([0, 2]), np.array([0.6, 0.4]), np.array([200.0, 400.0]), 0)
    machine = MachinePower(idle_w=100.0, peak_w=500.0, sleep_w=10.0, wake_latency_s=0.0,
                           wake_energy_j=0.0)
    tl = timeline(rec, prof, {1: 0}, machine, CapSchedule.constant(np.inf))
    # job: 200*60 + 400*40 = 28,000 J; idle: 3 procs x 50 s + 1 x 50 s at 100 W = 20,000 J
    # sleep: 2 procs x 50 s x 10 W = 1,000 J
    assert tl.job_energy_j == pytest.approx(28_000)
    assert tl.idle_energy_j == pytest.approx(20_000)
    assert tl.sleep_energy_j == pytest.approx(1_000)
    assert tl.energy_j == pytest.approx(49_000)
    assert tl.power_w.max() == pytest.approx(400 + 100 + 20)
