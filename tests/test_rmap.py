"""RMAP's policies: the configuration each picks on hand-worked cases, power-aware EASY
reservations, Traditional against EASY, the budget kept on random workloads, what-if
fidelity, and bad settings."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import make_main, workload_from_rows
from olsctl.checker import StrictChecker
from olsctl.cli import main
from olsctl.perfmodel import (BudgetRun, Config, PerfSettings, budget_timeline, node_options,
                              power_factor, scale_factor)
from olsctl.policies import REGISTRY, make_policy
from olsctl.policies.core.backfill import Reservation, backfill_pass
from olsctl.policies.budget.overprovision import NO_WIDTH, BudgetResources
from olsctl.sim import MainSimulator
from olsctl.state import SimState
from olsctl.whatif import run_whatif
from olsctl.workload import load_workload

# Hand cases: nodes of 1600 W; caps at 620 W (a compute-bound job's clock halves: 2x as
# long), 952.5 W (clock 3/4: 4/3 as long) and 1600 W. Job J asks for 4 nodes, is fully
# compute-bound (kappa 1), has a serial fraction of 0.1 and may run on 2, 4, 6 or 8
# nodes. Its runtime factors (Amdahl x cap) and powers, fastest first:
#   8 x 1600: 0.6538 12800 W | 6 x 1600: 0.7692 9600 W | 8 x 952.5: 0.8718 7620 W
#   4 x 1600: 1      6400 W  | 6 x 952.5: 1.0256 5715 W | 8 x 620: 1.3077 4960 W
#   4 x 952.5: 1.3333 3810 W | 6 x 620: 1.5385 3720 W  | 2 x 1600: 1.6923 3200 W ...
# (Amdahl: (0.1 + 0.9/n) / (0.1 + 0.9/4): 8 nodes 0.6538, 6 nodes 0.7692, 2 nodes 1.6923)
LEVELS = [0.3875, 0.5953125, 1.0]
HAND = {"node_peak_w": 1600.0, "cap_levels": LEVELS}
J_SIZES = (0.5, 1.0, 1.5, 2.0)


def hand_state(req, kappa, serial, moldable, nodes=16, runtime_s=1000.0, sizes=J_SIZES):
    """Jobs 0.. waiting at t = 0 with the given model parameters."""
    n = len(req)
    state = SimState(nodes, list(range(1, n + 1)), [0.0] * n, req, [runtime_s] * n,
                     [runtime_s] * n, checker=StrictChecker())
    state.budget = BudgetRun(PerfSettings(sizes=sizes), nodes, list(req), list(kappa),
                            list(serial), list(moldable))
    for i in range(n):
        state.arrive(i)
    return state


def already_running(state, j: int, c: Config) -> None:
    """Job ``j`` runs in ``c`` since now (set up before the pass under test)."""
    state.budget.start(state, j, c)
    state.queue.remove(j)


def run_budget(workload, spec: dict, active=None):
    """A strict main-simulator run of a budget policy: (policy, state, records)."""
    policy = make_policy(spec)
    sim = MainSimulator(workload, policy, workload.estimate_s("exact"), active,
                        StrictChecker())
    assert policy.prepare(sim.state, workload) is None
    return policy, sim.state, sim.run()


def assert_budget_kept(policy, state, records, workload) -> None:
    """From the records alone and the cap each job got: the power held never exceeds
    the budget, each job ran on nodes it may run on, for exactly the model's time."""
    run = state.budget
    index = {jid: i for i, jid in enumerate(state.job_id)}
    logged = dict(zip(workload.job_id.tolist(), workload.runtime_s.tolist()))
    peak_mw = policy._peak_mw
    assert len(records.jobs) == len(workload) and not records.unstarted
    for r in records.jobs:
        i = index[r.job_id]
        level = run.level_mw[i]
        assert r.procs in node_options(run.req_nodes[i], run.moldable[i],
                                       run.settings.sizes, run.total_nodes)
        if policy.name in ("rmap-traditional", "rmap-naive"):
            assert r.procs == run.req_nodes[i]
        factor = (scale_factor(run.serial[i], run.req_nodes[i], r.procs)
                  * power_factor(run.kappa[i], level / peak_mw, run.settings))
        assert r.runtime_s == pytest.approx(logged[r.job_id] * factor, rel=1e-12)
        assert run.alloc_mw[i] == r.procs * level
    times, held = budget_timeline([r.start_s for r in records.jobs],
                                  [r.end_s for r in records.jobs],
                                  [r.procs * run.level_mw[index[r.job_id]] / 1000
                                   for r in records.jobs])
    assert held.max() <= policy.budget_mw(state) / 1000 + 1e-6
    report = policy.run_report(state, records)
    assert report["csr"] == 1.0 and report["forced_starts"] == 0
    assert run.in_use_mw == 0  # everything returned at the end


# -- the configuration chosen ---------------------------------------------------------------

def test_adaptive_takes_the_fastest_configuration_under_the_job_bound():
    # bound 0.8 of 16 x 1600 W: the jobs' budget is 20480 W and J's fair share is
    # 4 / 16 of it, 5120 W. Everything faster than 8 x 620 W (4960 W, factor 1.3077)
    # needs more: Adaptive runs J there, on twice the nodes it asked for.
    state = hand_state([4], [1.0], [0.1], [True])
    state.run_pass(make_policy({"name": "rmap-adaptive", "bound": 0.8, **HAND}))
    assert state.started == [0]
    assert state.procs[0] == 8 and state.budget.level_mw[0] == 620_000
    assert state.runtime_s[0] == pytest.approx(1000 * 0.85 / 0.65)  # 1307.69 s
    assert state.estimate_s[0] == state.runtime_s[0]
    assert state.budget.in_use_mw == 4_960_000
    # Naive: the 4 nodes at the highest cap within 0.8 x 1600 = 1280 W a node: 952.5 W
    state = hand_state([4], [1.0], [0.1], [True])
    state.run_pass(make_policy({"name": "rmap-naive", "bound": 0.8, **HAND}))
    assert (state.procs[0], state.budget.level_mw[0]) == (4, 952_500)
    assert state.runtime_s[0] == pytest.approx(1000 * 4 / 3)
    # Traditional: the 4 nodes uncapped, 6400 W held, the logged runtime
    state = hand_state([4], [1.0], [0.1], [True])
    state.run_pass(make_policy({"name": "rmap-traditional", "bound": 0.8, **HAND}))
    assert (state.procs[0], state.budget.held_mw[0], state.runtime_s[0]) == (4, 6_400_000,
                                                                           1000.0)


def test_adaptive_overprovisions_when_the_job_scales():
    # no serial part: Amdahl is 4 / n. Unconstrained (fair share 6400 W), 6 nodes at
    # 952.5 W take (4/6) x (4/3) = 0.889 of the logged time for 5715 W; the request at
    # peak (6400 W) and 8 x 620 W (4960 W) both take 1.0; 8 x 952.5 W would need 7620 W.
    state = hand_state([4], [1.0], [0.0], [True])
    state.run_pass(make_policy({"name": "rmap-adaptive", "bound": 1.0, **HAND}))
    assert (state.procs[0], state.budget.level_mw[0]) == (6, 952_500)
    assert state.runtime_s[0] == pytest.approx(1000 * 8 / 9)


def test_less_power_free_gives_the_next_best_only_within_the_threshold():
    # J's best (8 x 620 W) needs 8 nodes and 4960 W, but job R runs on 8 nodes at
    # 1600 W and job Q on 4 at 952.5 W: 4 nodes and 20480 - 12800 - 3810 = 3870 W are
    # free. With threshold t, J may run in anything under its 5120 W share at most
    # (1 + t) x 1.3077 as long: 0% allows nothing else (J waits), 20% (1.569) allows
    # 4 x 952.5 W (1.3333, 3810 W: it fits) and 6 x 620 W (no: 6 nodes).
    for threshold, expect in ((0.0, None), (0.2, (4, 952_500, 4 / 3)),
                              (0.5, (4, 952_500, 4 / 3))):
        state = hand_state([4, 8, 4], [1.0, 1.0, 1.0], [0.1, 0.1, 0.1],
                           [True, False, False])
        already_running(state, 1, Config(1.0, 12_800_000, 8, 1_600_000))
        already_running(state, 2, Config(4 / 3, 3_810_000, 4, 952_500))
        state.run_pass(make_policy({"name": "rmap-adaptive", "bound": 0.8,
                                    "threshold": threshold, **HAND}))
        if expect is None:
            assert state.started == []
        else:
            assert state.started == [0]
            assert (state.procs[0], state.budget.level_mw[0]) == expect[:2]
            assert state.runtime_s[0] == pytest.approx(1000 * expect[2])
    # with Q at 4 x 1000 W only 3280 W are free: 4 x 952.5 W no longer fits; 50%
    # (1.96) still allows 2 x 1600 W (1.6923, 3200 W), 20% allows nothing that fits
    for threshold, expect in ((0.2, None), (0.5, (2, 1_600_000))):
        state = hand_state([4, 8, 4], [1.0, 1.0, 1.0], [0.1, 0.1, 0.1],
                           [True, False, False])
        already_running(state, 1, Config(1.0, 12_800_000, 8, 1_600_000))
        already_running(state, 2, Config(1.2, 4_400_000, 4, 1_100_000))
        state.run_pass(make_policy({"name": "rmap-adaptive", "bound": 0.8,
                                    "threshold": threshold, **HAND}))
        got = (state.procs[0], state.budget.level_mw[0]) if state.started else None
        assert got == expect


def test_a_fair_share_below_the_lowest_cap():
    # bound 0.3: 480 W a node, below the lowest cap (620 W). Naive runs the request at
    # 620 W anyway (2480 W, more than J's 1920 W share); Adaptive keeps to the share:
    # 2 x 952.5 W (1905 W, 1.6923 x 4/3 = 2.2564) beats 2 x 620 W and 4 x 620 W does
    # not fit (2480 W).
    state = hand_state([4], [1.0], [0.1], [True])
    state.run_pass(make_policy({"name": "rmap-naive", "bound": 0.3, **HAND}))
    assert (state.procs[0], state.budget.held_mw[0]) == (4, 2_480_000)
    state = hand_state([4], [1.0], [0.1], [True])
    state.run_pass(make_policy({"name": "rmap-adaptive", "bound": 0.3, **HAND}))
    assert (state.procs[0], state.budget.level_mw[0]) == (2, 952_500)
    assert state.runtime_s[0] == pytest.approx(1000 * 0.55 / 0.325 * 4 / 3)


# -- power-aware EASY --------------------------------------------------------------------

def test_power_reservation_holds_back_a_job_the_nodes_would_allow():
    # 16 nodes at 1600 W, bound 0.5: 12800 W for jobs, i.e. 8 nodes at peak under
    # Traditional. A (4 nodes, 6400 W) runs from 0; B (8 nodes, all the power) waits:
    # shadow time 100 (A ends), 8 nodes and 0 W spare then. C (2 nodes, ends at 52)
    # backfills at 2. D (2 nodes, 200 s) has the nodes at 3 but would hold power past
    # 100: it waits until B is done (B 100..200, D from 200). On nodes alone (EASY on
    # 16 processors) D would have started at 3.
    w = workload_from_rows([(1, 0, 100, 4), (2, 1, 100, 8), (3, 2, 50, 2), (4, 3, 200, 2)],
                           16)
    policy, state, records = run_budget(w, {"name": "rmap-traditional", "bound": 0.5, **HAND})
    starts = {r.job_id: r.start_s for r in records.jobs}
    assert starts == {1: 0.0, 2: 100.0, 3: 2.0, 4: 200.0}
    easy = {r.job_id: r.start_s for r in make_main(w).run().jobs}
    assert easy[4] == 3.0
    assert_budget_kept(policy, state, records, w)


def _cfg(nodes: int, power_mw: int, factor: float = 1.0) -> Config:
    return Config(factor, power_mw, nodes, power_mw // nodes)


def test_shadow_time_over_nodes_and_power():
    # running: X (2 nodes, 3000 W, ends 50), Y (6 nodes, 1000 W, ends 80); 10 nodes and
    # 5000 W in all, so 2 nodes and 1000 W free. A head needing 4 nodes and 3500 W:
    # at 50, 4 nodes and 4000 W are free -> shadow 50, 0 nodes and 500 W spare.
    # Needing 9 nodes and 1000 W: only at 80 (10 nodes, 5000 W): 1 node, 4000 W spare.
    # It reserves its first configuration: a second one that would fit sooner is not it.
    state = hand_state([2, 6, 4], [0, 0, 0], [0, 0, 0], [False] * 3, nodes=10)
    state.estimate_s[:2] = [50.0, 80.0]
    already_running(state, 0, Config(1.0, 3_000_000, 2, 1_500_000))
    already_running(state, 1, Config(1.0, 1_000_000, 6, 166_667))
    for configs, expect in (([_cfg(4, 3_500_000)], (50.0, 0, 500_000)),
                            ([_cfg(9, 1_000_000), _cfg(1, 100_000)], (80.0, 1, 4_000_000)),
                            ([_cfg(4, 6_000_000)], (float("inf"), 0, 0)),
                            ([], (float("inf"), 0, 0))):  # never fits the active nodes
        res = BudgetResources(state, state.budget, 5_000_000, lambda j: configs)
        assert (res.free, res.free_n, res.free_mw) == (2, 2, 1_000_000)
        res.reserve(2)
        assert (res.shadow_s, res.extra_n, res.extra_mw) == expect
        assert res.settle() == ([Reservation(2, expect[0], (configs[0].nodes,))]
                                if expect[0] < float("inf") else [])


def test_budget_pass_first_fit_configuration_and_shadow_by_scaled_estimate():
    # 10 nodes, 5000 W for jobs. X (2 nodes, 3000 W) ends at 50 and Y (5 nodes, 1000 W)
    # at 80: 3 nodes and 1000 W free. The head H needs 9 nodes, 1000 W: shadow 80,
    # 1 node and 4000 W spare then. A (estimate 60) would first run on 2 nodes 1.5 x as
    # long: it would end at 90, past the shadow, and needs 2 nodes of the 1 spare; its
    # next configuration (1 node, 400 W, x 1.25) ends at 75: it starts in that one (on
    # its logged estimate alone, 60, the first would have passed). B (estimate 100,
    # 1 node, 600 W) ends past the shadow but fits what is spare then: it starts, and
    # takes the last 600 W. With 1 node but no power free the pass stops: C, which
    # would fit the node, is not even asked.
    state = hand_state([2, 5, 9, 2, 1, 1], [0] * 6, [0] * 6, [False] * 6, nodes=10)
    state.estimate_s[:] = [50.0, 80.0, 100.0, 60.0, 100.0, 10.0]
    already_running(state, 0, _cfg(2, 3_000_000))
    already_running(state, 1, _cfg(5, 1_000_000))
    table = {2: [_cfg(9, 1_000_000)], 3: [_cfg(2, 600_000, 1.5), _cfg(1, 400_000, 1.25)],
             4: [_cfg(1, 600_000)], 5: [_cfg(1, 1_000)]}
    asked = []

    def options(j):
        asked.append(j)
        return table[j]

    res = BudgetResources(state, state.budget, 5_000_000, options)
    backfill_pass(state, state.queue, res, width=NO_WIDTH)
    assert state.started == [0, 1, 3, 4]  # X and Y set up before the pass
    assert (state.procs[3], state.estimate_s[3]) == (1, 75.0)
    assert res.settle() == [Reservation(2, 80.0, (9,))]
    assert (res.extra_n, res.extra_mw) == (0, 3_400_000)
    assert (res.free, res.free_n, res.free_mw) == (0, 1, 0)
    assert asked == [2, 2, 3, 4]  # the head is tried, then reserves; C never


def test_traditional_with_the_power_of_the_original_machine_is_easy(repo_root):
    # KTH-SP2's first 3000 jobs on twice its nodes, with power for its 100 nodes at
    # peak: Traditional starts every job when EASY on the 100 nodes does; with the
    # original machine unconstrained too.
    path = repo_root / "traces" / "KTH-SP2-1996-2.1-cln.swf.gz"
    w100 = load_workload(path).head(3000)
    easy = {r.job_id: r.start_s for r in make_main(w100).run().jobs}
    for w, bound in ((load_workload(path, 200).head(3000), 0.5), (w100, 1.0)):
        policy, state, records = run_budget(w, {"name": "rmap-traditional", "bound": bound})
        assert {r.job_id: r.start_s for r in records.jobs} == easy
        assert_budget_kept(policy, state, records, w)


# -- invariants on random workloads ----------------------------------------------------------

POLICY_SPECS = [{"name": "rmap-traditional"}, {"name": "rmap-naive"},
                {"name": "rmap-adaptive"}, {"name": "rmap-adaptive", "threshold": 0.2},
                {"name": "parm", "window": 4, "exact_max": 2}, {"name": "parm"}]
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def budget_cases(draw, max_jobs: int = 18):
    machine = draw(st.integers(2, 16))
    n = draw(st.integers(1, max_jobs))
    rows, t = [], 0
    for i in range(n):
        t += draw(st.sampled_from([0, 0, 3, 10, 40]))
        rows.append((i + 1, t, draw(st.integers(1, 100)), draw(st.integers(1, machine))))
    w = workload_from_rows(rows, machine)
    w = dataclasses.replace(w, user_id=np.asarray([draw(st.integers(0, 3)) for _ in range(n)]))
    widest = int(w.procs.max()) / machine
    spec = dict(draw(st.sampled_from(POLICY_SPECS)))
    spec["share"] = draw(st.sampled_from([1.0, 0.8]))
    spec["bound"] = draw(st.sampled_from([widest / spec["share"], 0.5, 0.8, 1.0, 1.3]))
    spec["moldable"] = draw(st.sampled_from([0.0, 0.5, 1.0]))
    spec["seed"] = draw(st.integers(0, 3))
    return w, spec


@SETTINGS
@given(case=budget_cases())
def test_budget_is_never_exceeded_and_runtimes_follow_the_model(case):
    w, spec = case
    policy = make_policy(spec)
    probe = MainSimulator(w, policy, w.estimate_s("exact"))
    assume(policy.prepare(probe.state, w) is None)  # a bound some job can never fit
    policy, state, records = run_budget(w, spec)
    assert_budget_kept(policy, state, records, w)


@SETTINGS
@given(case=budget_cases(), data=st.data())
def test_whatif_from_a_snapshot_reproduces_the_main_run(case, data):
    w, spec = case
    policy = make_policy(spec)
    probe = MainSimulator(w, policy, w.estimate_s("exact"))
    assume(policy.prepare(probe.state, w) is None)
    cut = data.draw(st.sampled_from(sorted(set(w.submit_s.tolist()))))
    snaps = []
    sim = MainSimulator(w, policy, w.estimate_s("exact"), checker=StrictChecker())
    policy.prepare(sim.state, w)
    sim.at(cut, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    part = w.select(np.flatnonzero(w.submit_s <= cut))
    truth_sim = MainSimulator(part, policy, part.estimate_s("exact"))
    policy.prepare(truth_sim.state, part)
    truth_sim.at(cut, lambda s: None)
    truth = {r.job_id: r.start_s for r in truth_sim.run().jobs}
    res = run_whatif(snaps[0], policy, checker=StrictChecker())
    assert res.unstarted == 0
    for job, start in zip(res.job_id.tolist(), res.start_s.tolist()):
        assert start == truth[job]  # the snapshot's jobs: running or waiting at the cut


def test_same_settings_same_schedule():
    rows = [(i, 7 * i, 30 + (13 * i) % 90, 1 + (5 * i) % 8) for i in range(1, 60)]
    w = workload_from_rows(rows, 8)
    for spec in POLICY_SPECS:
        spec = {**spec, "bound": 1.0, "moldable": 0.7}
        a = [tuple(r) for r in run_budget(w, spec)[2].jobs]
        b = [tuple(r) for r in run_budget(w, spec)[2].jobs]
        assert a == b


# -- settings and bad input -------------------------------------------------------------------

def test_tunable_settings_are_plain_parameters():
    for name in ("rmap-traditional", "rmap-naive", "rmap-adaptive", "parm"):
        policy = make_policy({"name": name})
        tunable = REGISTRY[name].tunable
        assert "share" in tunable
        for key in tunable:
            assert key in policy.settings() and key in REGISTRY[name].params
        again = make_policy({**policy.settings(), "share": 0.9})
        assert again.share == 0.9 and again.name == name
    assert "threshold" in REGISTRY["rmap-adaptive"].tunable
    assert "cap_levels" in REGISTRY["parm"].tunable


@pytest.mark.parametrize("body,key", [
    ("policy: {name: rmap-adaptive, threshold: -0.1}", "policy.threshold: must be >= 0"),
    ("policy: {name: rmap-naive, cap_levels: [0.5, 0.4]}", "policy.cap_levels: must be increasing"),
    ("policy: {name: parm, cap_levels: [0.2, 1.0]}", "policy.cap_levels: must be increasing"),
    ("policy: {name: rmap-traditional, bound: 0}", "policy.bound: must be > 0"),
    ("policy: {name: parm, share: 1.5}", "policy.share: must be in (0, 1]"),
    ("policy: {name: parm, window: 0}", "policy.window: must be >= 1"),
    ("policy: {name: rmap-adaptive, sizes: [1, -2]}", "policy.sizes: must be factors > 0"),
    ("policy: {name: rmap-adaptive, moldable: 2}", "policy.moldable: must be in [0, 1]"),
    ("policy: {name: rmap-traditional, bound: 0.5}", "policy.bound: job "),
    ("policy: {name: rmap-adaptive}\npower: {cap: {fraction: 0.5}}", "power: policy rmap-adaptive"),
    ("policy: {name: rmap-adaptive}\ncontroller: {candidates: {policy: {bound: [0.5]}}}",
     "controller.candidates.policy.bound: not a tunable setting of rmap-adaptive"),
    ("policy: {name: rmap-adaptive}\ncontroller: {candidates: {policy: {share: [0.8, -1]}}}",
     "controller.candidates.policy.share[1]: "),
    ("policy: {name: rmap-adaptive}\ncontroller: {cost: policy.share}",
     "controller.cost: policy.share is not among candidates.policy"),
])
def test_bad_settings_give_one_line_errors(tmp_path, capsys, body, key):
    # KTH-SP2 has jobs of all 100 processors: at a bound of 0.5 Traditional could never
    # power one of them
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(f"trace: KTH-SP2\nout: {tmp_path / 'out'}\n{body}\n")
    assert main(["run", str(cfg), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert key in err and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_policies_need_their_model():
    state = hand_state([1], [0.5], [0.1], [False])
    state.budget = None
    with pytest.raises(ValueError, match="prepare"):
        state.run_pass(make_policy({"name": "rmap-adaptive"}))
