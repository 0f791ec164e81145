"""The PARM selector: exact against greedy on a hand-worked knapsack, the exact solver
against brute force, the choice made in a pass, and the budget kept on a real log."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from olsctl.perfmodel import Config
from olsctl.policies import make_policy
from olsctl.policies.budget.parm import pareto_configs, solve_exact, solve_greedy
from olsctl.workload import load_workload
from test_rmap import already_running, assert_budget_kept, hand_state, run_budget


def _c(nodes: int, power_mw: int, factor: float = 1.0) -> Config:
    return Config(factor, power_mw, nodes, power_mw // nodes)


def test_exact_finds_the_optimum_greedy_misses():
    # 10 nodes and 1000 mW free. A: one choice worth 2 (2 nodes, 200 mW). B: worth 1.5
    # (4 nodes, 400 mW) or 8 (9 nodes, 900 mW). Greedy takes the best value per share
    # of the free resources first: A (2 / (0.2 + 0.2) = 5, against 4.44 for B's 8),
    # after which B's big choice no longer fits: A + B small, worth 3.5. The optimum
    # is B's big choice alone, worth 8 (A + B big needs 11 nodes).
    jobs = [[(2.0, _c(2, 200))], [(1.5, _c(4, 400)), (8.0, _c(9, 900))]]
    assert solve_greedy(jobs, 10, 1000) == [0, 0]
    assert solve_exact(jobs, 10, 1000) == [None, 1]
    # with room for both, both solvers take A and B's big choice
    assert solve_exact(jobs, 11, 1100) == solve_greedy(jobs, 11, 1100) == [0, 1]


def _brute(jobs, free_n, free_mw) -> float:
    best = 0.0
    for picks in itertools.product(*[[None] + list(range(len(ch))) for ch in jobs]):
        chosen = [jobs[i][k] for i, k in enumerate(picks) if k is not None]
        if (sum(c.nodes for _, c in chosen) <= free_n
                and sum(c.power_mw for _, c in chosen) <= free_mw):
            best = max(best, sum(v for v, _ in chosen))
    return best


choice = st.tuples(st.floats(0.1, 10.0), st.integers(1, 8), st.integers(1, 40))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(st.lists(choice, min_size=1, max_size=4), min_size=1, max_size=5),
       free_n=st.integers(0, 20), free_mw=st.integers(0, 100))
def test_exact_matches_brute_force_and_greedy_stays_feasible(jobs, free_n, free_mw):
    jobs = [[(v, Config(1.0, m, n, 1)) for v, n, m in ch] for ch in jobs]
    value = {}
    for name, solve in (("exact", solve_exact), ("greedy", solve_greedy)):
        picks = solve(jobs, free_n, free_mw)
        chosen = [jobs[i][k] for i, k in enumerate(picks) if k is not None]
        assert sum(c.nodes for _, c in chosen) <= free_n
        assert sum(c.power_mw for _, c in chosen) <= free_mw
        value[name] = sum(v for v, _ in chosen)
    assert value["exact"] == pytest.approx(_brute(jobs, free_n, free_mw), rel=1e-9)
    assert value["greedy"] <= value["exact"] + 1e-9


def test_pareto_configs_drop_what_another_beats_everywhere():
    a = Config(1.0, 400, 4, 100)
    b = Config(1.2, 400, 4, 100)   # as much as a, slower: out
    c = Config(0.9, 500, 4, 125)   # more power but faster: kept
    d = Config(2.0, 300, 6, 50)    # least power: kept
    e = Config(1.1, 600, 8, 75)    # more of everything than a, slower: out
    assert pareto_configs([e, d, c, b, a]) == [d, a, c]


def test_a_pass_starts_the_optimal_configurations_and_counts_how_it_solved():
    # 10 nodes of 100 W, one cap level (peak): a configuration's power is its nodes x
    # 100 W; the jobs' budget is 1000 W. A asks for 2 nodes (rigid): speedup 1. B asks
    # for 8, is moldable onto 4 or 9 nodes and has no serial part: 8/4 = 2 or 8/9 of
    # its logged time, speedups 1 (4 nodes) and 2.25 (9 nodes) over its slowest. The
    # exact knapsack starts B alone on 9 nodes (2.25 > A + B on 4 nodes = 2); greedy
    # (exact_max 1) takes A first (1 / 0.4 = 2.5 per share against 1.25) and then B on
    # 4 nodes.
    spec = {"name": "parm", "node_peak_w": 100.0, "cap_levels": [1.0], "fairness": 0.0,
            "window": 2}
    for exact_max, started, b_nodes in ((2, [1], 9), (1, [0, 1], 4)):
        state = hand_state([2, 8], [0.5, 0.0], [0.1, 0.0], [False, True], nodes=10,
                           sizes=(0.5, 1.125))
        policy = make_policy({**spec, "exact_max": exact_max})
        state.run_pass(policy)
        assert sorted(state.started) == started
        assert state.procs[1] == b_nodes
        assert state.runtime_s[1] == pytest.approx(1000 * 8 / b_nodes)
        run = state.budget
        assert (run.exact_windows, run.greedy_windows) == ((1, 0) if exact_max == 2 else (0, 1))


def test_fairness_weight_favours_the_job_waiting_longer():
    # two rigid one-configuration jobs that cannot run together (6 nodes each of 10);
    # without weights the tie goes to the first; a weight (1 + wait / estimate) makes
    # the second, waiting 1000 s longer, worth more.
    for fairness, first in ((0.0, 0), (1.0, 1)):
        state = hand_state([6, 6], [0.5, 0.5], [0.1, 0.1], [False, False], nodes=10)
        state.submit_s[0] = 1000.0
        state.now_s = 1000.0
        state.run_pass(make_policy({"name": "parm", "node_peak_w": 100.0,
                                    "cap_levels": [1.0], "fairness": fairness}))
        assert state.started == [first]


def test_later_windows_take_only_what_ends_by_the_heads_shadow_time():
    # 10 nodes of 100 W, one cap level (peak): a configuration's power is its nodes x
    # 100 W, of 1000 W. X (4 nodes) runs until 50, Y (3 nodes) until 70: 3 nodes free.
    # Windows of one job. The head H asks for 8 nodes and is moldable onto 4, 8 or 10:
    # none fits now, so it reserves its least-power configuration, 4 nodes, at 50 (X
    # ends; its 8 nodes would only be free at 70). A (2 nodes, ends at 50) then starts;
    # B (1 node, ends at 51) fits the node and 100 W left but ends after 50: it waits
    # (EASY would have started it on the 3 nodes spare at 50; PARM's later windows
    # take none).
    state = hand_state([4, 3, 8, 2, 1], [0.5] * 5, [0.1] * 5,
                       [False, False, True, False, False], nodes=10)
    state.estimate_s[:] = [50.0, 70.0, 100.0, 50.0, 51.0]
    already_running(state, 0, Config(1.0, 400_000, 4, 100_000))
    already_running(state, 1, Config(1.0, 300_000, 3, 100_000))
    state.run_pass(make_policy({"name": "parm", "node_peak_w": 100.0, "cap_levels": [1.0],
                                "window": 1}))
    assert state.started == [3]
    assert state.budget.in_use_mw == 900_000


def test_parm_on_a_real_log_keeps_the_budget_and_says_when_it_was_greedy(repo_root):
    w = load_workload(repo_root / "traces" / "KTH-SP2-1996-2.1-cln.swf.gz", 200).head(1500)
    spec = {"name": "parm", "bound": 0.5, "moldable": 0.5, "window": 12, "exact_max": 3}
    policy, state, records = run_budget(w, spec)
    assert_budget_kept(policy, state, records, w)
    report = policy.run_report(state, records)
    assert report["greedy_windows"] > 0 and report["exact_windows"] > 0
    assert 3 < report["largest_greedy_window"] <= 12
