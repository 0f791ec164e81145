"""The hardware power limit (``power.limit: throttle``): hand-worked clocks, ends and
energy, the two ways of sharing a reduction, forced starts held to the cap, and a limit
that never binds changing nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import make_main, make_workload, workload_from_rows
from olsctl.policies import make_policy
from olsctl.power import accounting
from olsctl.power.cap import CapSchedule
from olsctl.power.limit import Limit, LimitSettings
from olsctl.power.profiles import PowerProfiles, ProfileSettings, synthetic_profiles
from olsctl.power.runtime import power_state

PEAK_W, STATIC_W = 1000.0, 300.0  # per processor; static share 0.3, exponent 3
MACHINE = accounting.MachinePower(idle_w=0.0, peak_w=PEAK_W, sleep_w=0.0,
                                  wake_latency_s=0.0, wake_energy_j=0.0, sample_s=10.0)


def _profiles(phases: list[list[tuple[float, float]]]) -> PowerProfiles:
    """Per job, its phases as (fraction of the run, W per processor)."""
    offset = np.cumsum([0] + [len(p) for p in phases])
    frac = np.array([f for p in phases for f, _ in p], dtype=float)
    level = np.array([w for p in phases for _, w in p], dtype=float)
    return PowerProfiles(offset, frac, level, 0)


def _run(rows, machine, phases, kappa, cap: CapSchedule, share="clock", min_clock=0.2,
         policy=None, limit=True):
    w = workload_from_rows(rows, machine)
    sim = make_main(w, policy=policy)
    prof = _profiles(phases)
    sim.state.power = power_state(prof, [0] * len(rows), MACHINE.idle_w, MACHINE.sleep_w,
                                  PEAK_W, cap)
    sim.state.power.kappa = list(kappa)
    if limit:
        sim.state.limit = Limit(LimitSettings(share, min_clock, STATIC_W, 3.0), logging=True)
    records = sim.run()
    lim = sim.state.limit
    index_of = {j: i for i, j in enumerate(w.job_id.tolist())}
    tl = accounting.timeline(records, prof, index_of, MACHINE, sim.state.power.cap,
                             job_log=None if lim is None else (lim.log_t, lim.log_dw))
    return sim, records, tl


def _g(kappa: float, p: float, d: float) -> float:
    """The clock model by hand: time factor of a phase drawing ``d`` held to ``p``."""
    f = ((p - STATIC_W) / (d - STATIC_W)) ** (1.0 / 3.0)
    return 1.0 + kappa * (1.0 / f - 1.0)


def _power_at(tl, t: float) -> float:
    k = int(np.searchsorted(tl.times_s, t, side="right")) - 1
    return float(tl.power_w[k])


def test_a_job_throttled_at_a_cap_drop_ends_when_the_clock_model_says():
    # One 100 s job at 800 W on one processor, kappa 0.5; the cap drops from 1000 W to
    # 550 W at 40: 40% done, the rest runs at 550 W and takes 60 x g(550) seconds.
    cap = CapSchedule((-math.inf, 40.0), (1000.0, 550.0))
    sim, records, tl = _run([(1, 0, 100, 1)], 1, [[(1.0, 800.0)]], [0.5], cap)
    (rec,) = records.jobs
    g = _g(0.5, 550.0, 800.0)
    assert g > 1.1  # a stretch worth seeing
    assert rec.end_s == pytest.approx(40.0 + 60.0 * g, rel=1e-12)
    assert rec.runtime_s == pytest.approx(rec.end_s, rel=1e-12)
    assert records.stretch_s[1] == pytest.approx(60.0 * (g - 1.0), rel=1e-9)
    assert _power_at(tl, 39.0) == 800.0 and _power_at(tl, 40.0) == pytest.approx(550.0)
    assert sim.state.limit.hit == {0}


def test_a_cap_rise_restores_the_clock_and_energy_is_the_sum_of_its_segments():
    # As above, and the cap rises back to 1000 W at 70: from there the job runs at full
    # clock again. Work done by 70: 0.4 + 30 / (100 g); it ends at 70 + 100 x the rest.
    cap = CapSchedule((-math.inf, 40.0, 70.0), (1000.0, 550.0, 1000.0))
    sim, records, tl = _run([(1, 0, 100, 1)], 1, [[(1.0, 800.0)]], [0.5], cap)
    g = _g(0.5, 550.0, 800.0)
    end = 70.0 + 100.0 * (0.6 - 30.0 / (100.0 * g))
    (rec,) = records.jobs
    assert rec.end_s == pytest.approx(end, rel=1e-12)
    assert _power_at(tl, 69.0) == pytest.approx(550.0)
    assert _power_at(tl, 70.0) == pytest.approx(800.0)
    segments = 800.0 * 40.0 + 550.0 * 30.0 + 800.0 * (end - 70.0)
    assert tl.job_energy_j == pytest.approx(segments, rel=1e-9)
    assert tl.energy_j == pytest.approx(segments, rel=1e-9)  # idle and sleep draw 0 W
    assert sim.state.limit.energy[0] == pytest.approx(segments, rel=1e-9)
    assert not sim.state.limit.acting and sim.state.limit.acting_s == pytest.approx(30.0)


def test_a_phase_rising_over_the_cap_is_throttled_at_its_instant():
    # 100 s at 500 W then 100 s at 900 W (fractions 0.5 / 0.5), cap 700 W, kappa 1: the
    # second phase runs held to 700 W, taking 100 x g(700 of 900) seconds.
    cap = CapSchedule.constant(700.0)
    sim, records, tl = _run([(1, 0, 200, 1)], 1, [[(0.5, 500.0), (0.5, 900.0)]], [1.0], cap)
    (rec,) = records.jobs
    assert rec.end_s == pytest.approx(100.0 + 100.0 * _g(1.0, 700.0, 900.0), rel=1e-12)
    assert _power_at(tl, 99.0) == 500.0 and _power_at(tl, 100.0) == pytest.approx(700.0)
    assert float(tl.power_w.max()) <= 700.0 * (1 + 1e-12)


def test_the_reduction_is_shared_by_one_clock_or_largest_draw_first():
    # Two one-processor jobs at 900 W and 500 W under 1200 W (static 300 W each).
    # One clock: 300 + x (600 + 200) = 600 + 800 x = 1200 -> x = 0.75: 750 W and 450 W.
    # Largest first: one level L for both, never above a job's draw: L = 700, 500 W kept.
    rows = [(1, 0, 100, 1), (2, 0, 100, 1)]
    phases = [[(1.0, 900.0)], [(1.0, 500.0)]]
    cap = CapSchedule.constant(1200.0)
    for share, want in (("clock", (750.0, 450.0)), ("largest", (700.0, 500.0))):
        sim, _, tl = _run(rows, 2, phases, [0.5, 0.5], cap, share=share)
        assert _power_at(tl, 1.0) == pytest.approx(1200.0)
        lim = sim.state.limit
        assert sorted(lim.hit) == ([0, 1] if share == "clock" else [0])
        g = _g(0.5, want[0], 900.0)
        if share == "clock":  # one clock and one kappa: both end together, stretched by g
            assert lim.stretch[0] == pytest.approx(100.0 * (g - 1.0), rel=1e-9)
            assert lim.stretch[1] == pytest.approx(100.0 * (g - 1.0), rel=1e-9)
        else:  # the 500 W job ends at 100; then the other runs at full clock again
            assert 1 not in lim.stretch
            assert lim.stretch[0] == pytest.approx(100.0 * (1.0 - 1.0 / g), rel=1e-9)


def test_a_forced_start_under_throttle_never_exceeds_the_cap():
    # The knapsack forces a job that alone draws 1800 W (2 processors at 900 W) under a
    # 1200 W cap (Wallace's rule): the limit holds it to 1200 W from its first instant.
    rows = [(1, 0, 100, 2), (2, 5, 50, 1)]
    phases = [[(1.0, 900.0)], [(1.0, 400.0)]]
    cap = CapSchedule.constant(1200.0)
    policy = make_policy({"name": "knapsack", "window": 2, "predictor": "oracle"})
    sim, records, tl = _run(rows, 3, phases, [0.7, 0.7], cap, policy=policy)
    assert sim.state.power.forced_starts >= 1
    assert float(tl.power_w.max()) <= 1200.0 * (1 + 1e-12)
    smp = accounting.samples(tl, MACHINE.sample_s)
    assert smp.within_cap.all()
    figures = accounting.limit_summary(tl, smp, MACHINE.sample_s, sim.state.limit, records)
    assert figures["limit_held"] and figures["jobs_throttled"] >= 1
    assert figures["scheduler_csr"] < 1.0 and figures["work_lost_proc_h"] > 0
    # without the limit the same forced start passes the cap
    _, _, free = _run(rows, 3, phases, [0.7, 0.7], cap, policy=policy, limit=False)
    assert float(free.power_w.max()) > 1200.0


def test_a_limit_that_never_binds_changes_nothing():
    rng = np.random.default_rng(5)
    for seed in range(4):
        n = 40
        submit = np.cumsum(rng.choice([0, 1, 5, 20], size=n)).astype(float)
        runtime = rng.choice([3, 10, 40, 100], size=n).astype(float)
        procs = rng.integers(1, 9, size=n)
        w = make_workload(list(range(1, n + 1)), submit, runtime, procs, machine_procs=8)
        prof = synthetic_profiles(w, 250.0, PEAK_W, ProfileSettings(seed=seed, max_phases=4))
        ends = []
        for limit in (False, True):
            sim = make_main(w, policy=make_policy({"name": "knapsack", "window": 5}))
            sim.state.power = power_state(prof, [0] * n, 250.0, 0.0, PEAK_W,
                                          CapSchedule.constant(8 * PEAK_W))
            sim.state.power.kappa = [0.5] * n
            if limit:
                sim.state.limit = Limit(LimitSettings(), logging=True)
            records = sim.run()
            ends.append(sorted((r.job_id, r.start_s, r.end_s) for r in records.jobs))
            if limit:
                assert not sim.state.limit.hit and not records.stretch_s
                assert sim.state.limit.log_t  # the limit followed every phase
        assert ends[0] == ends[1]


def test_a_held_job_whose_phase_falls_below_its_level_draws_what_the_phase_asks():
    # 100 s at 900 W then 100 s at 400 W under 600 W: the first phase is held to 600 W
    # and takes 100 x g(600 of 900) s; the second asks less than the cap and runs at
    # full clock, drawing its own 400 W.
    cap = CapSchedule.constant(600.0)
    sim, records, tl = _run([(1, 0, 200, 1)], 1, [[(0.5, 900.0), (0.5, 400.0)]], [0.8], cap)
    boundary = 100.0 * _g(0.8, 600.0, 900.0)
    (rec,) = records.jobs
    assert rec.end_s == pytest.approx(boundary + 100.0, rel=1e-12)
    assert _power_at(tl, boundary - 1.0) == pytest.approx(600.0)
    assert _power_at(tl, boundary + 1.0) == pytest.approx(400.0)


def test_a_what_if_under_a_low_cap_counts_the_stretch_in_its_sla_metric():
    # Two processors, idle at 0 W. A (1 processor, 100 s, 800 W) starts at 0; B (2
    # processors, 10 s, 200 W: below the static share, never held) waits for it. At 1 the controller tries caps: at 550 W A is held
    # (1% done, the rest takes 99 g s), so B waits 1 + 99 g s and A's stretch is
    # 99 (g - 1) s; at 1000 W nothing is held: B waits 100 s.
    from olsctl.controller.trials import Candidate, WhatIfTask
    from olsctl.controller.scoring import what_if

    rows = [(1, 0, 100, 1), (2, 0, 10, 2)]
    w = workload_from_rows(rows, 2)
    sim = make_main(w)
    sim.state.power = power_state(_profiles([[(1.0, 800.0)], [(1.0, 200.0)]]), [0, 0],
                                  0.0, 0.0, PEAK_W, CapSchedule.constant(2000.0))
    sim.state.power.kappa = [0.5, 0.5]
    sim.state.limit = Limit(LimitSettings("clock", 0.2, STATIC_W, 3.0))
    snaps = []
    sim.at(1.0, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    task = WhatIfTask(snaps[0], {"name": "easy"})
    g = _g(0.5, 550.0, 800.0)
    low = what_if(task, Candidate(2, cap_w=550.0))
    want = ((1.0 + 99.0 * (g - 1.0) / 100.0) + (1.0 + (1.0 + 99.0 * g) / 10.0)) / 2.0
    assert low.mean_bsld == pytest.approx(want, rel=1e-12)
    assert not low.over_cap  # the limit holds the cap: its cost is the stretch
    high = what_if(task, Candidate(2, cap_w=1000.0))
    assert high.mean_bsld == pytest.approx((1.0 + (1.0 + 100.0 / 10.0)) / 2.0, rel=1e-12)


def _head_trace(repo_root, tmp_path, n: int):
    """KTH-SP2's header and first ``n`` jobs, as a file of its own."""
    import gzip

    text = gzip.open(repo_root / "traces" / "KTH-SP2-1996-2.1-cln.swf.gz", "rt").read()
    lines = text.splitlines()
    head = [x for x in lines if x.startswith(";")]
    jobs = [x for x in lines if x.strip() and not x.startswith(";")][:n]
    path = tmp_path / "kth-head.swf"
    path.write_text("\n".join(head + jobs) + "\n")
    return path


def _jobs_csv(path) -> list[dict]:
    import csv

    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_jobs_csv_keeps_the_logged_request_beside_what_rmap_gave(tmp_path, repo_root):
    # RMAP resizes moldable jobs and stretches capped ones: the request and the log's
    # runtime stay in their columns, what each job got beside them.
    from olsctl.cli import main
    from olsctl.workload import load_workload

    path = _head_trace(repo_root, tmp_path, 3000)
    out = tmp_path / "rmap"
    assert main(["run", str(repo_root / "configs" / "rmap.yaml"), "--trace", str(path),
                 "--set", f"out={out}", "--quiet"]) == 0
    w = load_workload(path, 200)
    logged = dict(zip(w.job_id.tolist(), zip(w.procs.tolist(), w.runtime_s.tolist())))
    rows = _jobs_csv(out / "jobs.csv")
    assert rows
    resized = stretched = 0
    for r in rows:
        procs, runtime = logged[int(r["job_id"])]
        assert int(r["requested_number_of_resources"]) == procs
        assert float(r["logged_execution_time"]) == runtime
        assert float(r["execution_time"]) == pytest.approx(
            float(r["finish_time"]) - float(r["starting_time"]))
        resized += int(r["allocated_number_of_resources"]) != procs
        stretched += float(r["execution_time"]) > runtime * (1 + 1e-9)
    assert resized > 0 and stretched > 0


def test_a_throttled_run_from_the_command_line_holds_the_cap(tmp_path, repo_root):
    from olsctl.cli import main

    path = _head_trace(repo_root, tmp_path, 5000)
    cfg = tmp_path / "cap.yaml"
    cfg.write_text(f"trace: {path}\n"
                   "policy: {name: knapsack, window: 20, predictor: history}\n"
                   "power: {cap: {schedule: [{at_s: 0, fraction: 0.417}, "
                   "{at_s: 500000, fraction: 0.625}]}, limit: throttle}\n"
                   f"out: {tmp_path / 'out'}\n")
    assert main(["run", str(cfg), "--strict", "--quiet"]) == 0
    import json

    power = json.loads((tmp_path / "out" / "summary.json").read_text())["power"]
    assert power["limit"] == "throttle" and power["limit_held"]
    assert power["csr"] == 1.0 and power["jobs_throttled"] > 0
    assert 0 < power["throttled_time_share"] < 1 and power["work_lost_proc_h"] > 0
    assert power["scheduler_csr"] < 1.0
    rows = _jobs_csv(tmp_path / "out" / "jobs.csv")
    energy = sum(float(r["energy_j"]) for r in rows)
    assert energy == pytest.approx(power["job_energy_j"], rel=1e-9)
    stretched = [r for r in rows
                 if float(r["execution_time"]) > float(r["logged_execution_time"]) + 1e-6]
    assert stretched
    assert power["work_lost_proc_h"] == pytest.approx(
        sum(int(r["allocated_number_of_resources"]) * (float(r["execution_time"])
            - float(r["logged_execution_time"])) for r in stretched) / 3600, rel=1e-6)


def test_jobs_sharing_an_end_time_when_one_is_throttled_end_apart():
    # Two 100 s jobs end together at 100 (one completion event holds both). At 40 the cap
    # drops below their draw; largest-first throttles only the 800 W job: its end moves
    # on and its place in the event at 100 lapses; the other still ends at 100, and the
    # draw stays at the cap until the throttled job ends.
    cap = CapSchedule((-math.inf, 40.0), (2000.0, 1100.0))
    sim, records, tl = _run([(1, 0, 100, 1), (2, 0, 100, 1)], 2,
                            [[(1.0, 800.0)], [(1.0, 400.0)]], [0.5, 0.5], cap,
                            share="largest")
    ends = {r.job_id: r.end_s for r in records.jobs}
    assert ends[2] == 100.0
    assert ends[1] > 100.0
    assert records.stretch_s == {1: pytest.approx(ends[1] - 100.0, rel=1e-9)}
    assert sim.state.limit.hit == {0}
    assert _power_at(tl, 39.0) == 1200.0
    assert _power_at(tl, 50.0) == pytest.approx(1100.0)
    assert _power_at(tl, 100.0) == 800.0  # job 2 has ended: job 1 back at full clock


@pytest.mark.parametrize("order, share", [("fcfs", "clock"), ("wfp", "largest")])
def test_boundaries_let_pass_while_the_limit_is_calm_change_nothing(tmp_path, repo_root,
                                                                     monkeypatch, order,
                                                                     share):
    """While no phase boundary before the next event could make the limit act, the main
    simulator lets boundaries pass without events and applies them at the next event,
    each at its own time: the same jobs.csv, power.csv and summary as with an event at
    every boundary, on 4,000 jobs of KTH-SP2 under a cap schedule that throttles; and
    it does let many pass."""
    import olsctl.sim
    from olsctl.cli import main

    path = _head_trace(repo_root, tmp_path, 4000)
    cfg = tmp_path / "cap.yaml"
    cfg.write_text(f"trace: {path}\n"
                   f"policy: {{name: knapsack, window: 20, order: {order}, "
                   "predictor: history}\n"
                   "power: {cap: {schedule: [{at_s: 0, fraction: 0.417}, "
                   "{at_s: 400000, fraction: 0.625}, {at_s: 900000, fraction: 0.5}]}, "
                   f"limit: throttle, share: {share}}}\n")
    passed = []
    apply_due = Limit.apply_due

    def counting(self, state, before=None):
        if before is not None:
            passed.append(before)
        apply_due(self, state, before)

    monkeypatch.setattr(Limit, "apply_due", counting)
    out = {}
    for skip in (True, False):
        monkeypatch.setattr(olsctl.sim, "SKIP_CALM_BOUNDARIES", skip)
        out[skip] = tmp_path / f"out-{skip}"
        assert main(["run", str(cfg), "--set", f"out={out[skip]}", "--quiet", "--feed"]) == 0
        if skip:
            assert len(passed) > 1000
            passed.clear()
    assert not passed
    for name in ("jobs.csv", "power.csv", "timeseries.csv"):
        assert (out[True] / name).read_bytes() == (out[False] / name).read_bytes(), name
    summary = [(out[s] / "summary.json").read_text().replace(str(out[s]), "OUT")
               for s in (True, False)]
    assert summary[0] == summary[1]
    import json

    assert json.loads(summary[0])["power"]["jobs_throttled"] > 50
    # the live feed's samples read the power as it is at their time
    feeds = [[(r["time_s"], r["power_w"]) for r in map(json.loads, (out[s] / "live.jsonl")
                                                      .read_text().splitlines())
              if r["kind"] == "sample"] for s in (True, False)]
    assert len(feeds[0]) > 100 and feeds[0] == feeds[1]


def test_a_snapshot_carries_the_limit_data_of_its_own_jobs_only():
    # Two processors, cap 1100 W, kappa 0.5. A (100 s) and B (300 s), one processor at
    # 800 W each, start at 0: one clock holds both to 550 W. A ends at 100 g; B then runs
    # at full clock. C (two processors) waits for B. A snapshot at 250 holds B running
    # and C waiting: B's clock, work, energy and throttled mark, renumbered; nothing of
    # A, which has ended (its energy, stretch and mark stay with the run).
    rows = [(1, 0, 100, 1), (2, 0, 300, 1), (3, 0, 10, 2)]
    w = workload_from_rows(rows, 2)
    sim = make_main(w)
    sim.state.power = power_state(
        _profiles([[(1.0, 800.0)], [(1.0, 800.0)], [(1.0, 200.0)]]), [0, 1, 2],
        0.0, 0.0, PEAK_W, CapSchedule.constant(1100.0))
    sim.state.power.kappa = [0.5, 0.5, 0.5]
    sim.state.limit = Limit(LimitSettings("clock", 0.2, STATIC_W, 3.0))
    snaps = []
    sim.at(250.0, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    g = _g(0.5, 550.0, 800.0)
    lim = sim.state.limit
    assert lim.hit == {0, 1} and lim.stretch[0] == pytest.approx(100.0 * (g - 1.0))
    (snap,) = snaps
    assert snap.job_id.tolist() == [2, 3]  # B running, then C waiting
    sub = snap.limit
    assert sub.hit == {0} and sub.stretch == {}
    assert set(sub.energy) == set(sub.level) == {0}
    a_end = 100.0 * g
    b_work = a_end / (300.0 * g)  # B's share done by A's end, at A's clock
    assert sub.work[0] == pytest.approx(b_work, rel=1e-12)
    assert sub.t_ref[0] == pytest.approx(a_end, rel=1e-12)
    assert sub.energy[0] == pytest.approx(550.0 * a_end, rel=1e-12)
    assert sub.level[0] == sub.demand[0] == 800.0
    assert sub.end[0] == pytest.approx(a_end + 300.0 * (1.0 - b_work), rel=1e-12)
