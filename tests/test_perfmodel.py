"""The job performance model: hand-worked runtimes under caps and node counts, the
per-project draws, and the job power budget timeline."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import make_workload
from olsctl.perfmodel import (BudgetRun, PerfSettings, budget_csr, budget_run,
                              budget_timeline, clock_ratio, draw_params, node_options,
                              power_factor, scale_factor)

S = PerfSettings()  # static 0.3, exponent 3, memory draw 0.5


def test_compute_bound_job_follows_the_clock():
    # kappa 1 draws the whole peak uncapped (demand 0.3 + 0.7 x 1 = 1). At a cap of
    # 0.3 + 0.7 / 8 = 0.3875 the dynamic power is 1/8 of its top, the clock 1/2, and
    # all of the time runs at the clock: twice as long.
    assert clock_ratio(1.0, 0.3875, S) == pytest.approx(0.5)
    assert power_factor(1.0, 0.3875, S) == pytest.approx(2.0)
    # at 0.3 + 0.7 x 27/64 the clock is 3/4: 4/3 as long
    assert power_factor(1.0, 0.3 + 0.7 * 27 / 64, S) == pytest.approx(4 / 3)


def test_memory_bound_job_barely_slows():
    # kappa 0.2 draws 0.3 + 0.7 x (0.5 + 0.5 x 0.2) = 0.72 uncapped. At 0.3875 its
    # clock is (0.0875 / 0.42)^(1/3) = 0.59281 and only a fifth of its time follows
    # it: 1 + 0.2 x (1 / 0.59281 - 1) = 1.1374, against 2 for the compute-bound job.
    assert clock_ratio(0.2, 0.3875, S) == pytest.approx(0.59281, abs=1e-5)
    assert power_factor(0.2, 0.3875, S) == pytest.approx(1.13738, abs=1e-5)
    # a purely memory-bound job never slows; uncapped, nothing does (exactly 1)
    assert power_factor(0.0, 0.3875, S) == 1.0
    assert power_factor(0.2, 0.72, S) == 1.0
    for kappa in (0.0, 0.37, 1.0):
        assert power_factor(kappa, 1.0, S) == 1.0


def test_amdahl_strong_scaling_relative_to_the_request():
    # serial 0.1, asked for 4, run on 8: (0.1 + 0.9/8) / (0.1 + 0.9/4) = 0.2125 / 0.325
    assert scale_factor(0.1, 4, 8) == pytest.approx(0.2125 / 0.325)
    assert scale_factor(0.1, 4, 4) == 1.0
    assert scale_factor(0.0, 4, 2) == pytest.approx(2.0)


def test_node_options_of_moldable_and_rigid_jobs():
    sizes = PerfSettings().sizes  # 0.5 ... 2 of the request, rounded half up
    assert node_options(8, True, sizes, 100) == (4, 5, 6, 7, 8, 9, 10, 12, 14, 16)
    assert node_options(8, True, sizes, 10) == (4, 5, 6, 7, 8, 9, 10)  # the machine
    assert node_options(2, True, sizes, 100) == (1, 2, 3, 4)
    assert node_options(8, False, sizes, 100) == (8,)


def test_logged_runtime_is_the_request_at_full_power():
    run = BudgetRun(PerfSettings(), 64, [8], [0.8], [0.05], [True])
    levels = (100_000, 160_000, 230_000)
    at_request = [c for c in run.configs(0, levels, 230_000) if c.nodes == 8
                  and c.level_mw == 230_000]
    assert at_request[0].factor == 1.0
    factors = [c.factor for c in run.configs(0, levels, 230_000)]
    assert factors == sorted(factors)  # fastest first
    least = run.least_power(0, levels, 230_000)
    assert (least.nodes, least.level_mw, least.power_mw) == (4, 100_000, 400_000)


def test_draws_are_per_project_seeded_and_order_free():
    n = 4000
    ids = np.arange(1, n + 1)
    project = ids % 7
    procs = np.where(ids % 5 == 0, 1, 8)
    s = PerfSettings(seed=3, moldable=0.4)
    kappa, serial, moldable = draw_params(ids, project, procs, s)
    # one serial fraction per project, within its range; kappa near its project's
    for p in range(7):
        sel = np.flatnonzero(project == p)
        assert len({serial[i] for i in sel}) == 1
        assert 0.001 <= serial[sel[0]] <= 0.1
        assert np.std([kappa[i] for i in sel]) < 0.06
    assert all(0 <= k <= 1 for k in kappa)
    # single-node jobs stay rigid; about 40% of the others are moldable
    assert not any(moldable[i] for i in np.flatnonzero(procs == 1))
    share = np.mean([moldable[i] for i in np.flatnonzero(procs > 1)])
    assert 0.37 < share < 0.43
    # the same job gets the same values in any workload holding it, and with the seed
    sub = np.arange(100, 200)
    k2, s2, m2 = draw_params(ids[sub][::-1], project[sub][::-1], procs[sub][::-1], s)
    assert k2[::-1] == [kappa[i] for i in sub] and m2[::-1] == [moldable[i] for i in sub]
    assert draw_params(ids, project, procs, PerfSettings(seed=4))[0] != kappa


def test_budget_run_from_a_workload_uses_groups_else_users():
    w = make_workload([1, 2, 3], [0, 0, 0], [10, 10, 10], [4, 4, 1], machine_procs=8)
    run = budget_run(w, PerfSettings(moldable=1.0))
    assert run.req_nodes == [4, 4, 1] and run.total_nodes == 8
    assert run.serial[0] == run.serial[1] == run.serial[2]  # all of project -1
    assert run.moldable == [True, True, False]


def test_budget_timeline_and_csr_from_records():
    # jobs (start, end, W): (0, 10, 300), (5, 20, 200), (10, 30, 500): the power held is
    # 300 on [0, 5), 500 on [5, 10), 700 on [10, 20) (one ends as one starts), 500 to 30
    times, held = budget_timeline([0, 5, 10], [10, 20, 30], [300, 200, 500])
    assert times.tolist() == [0, 5, 10, 20, 30]
    assert held.tolist() == [300, 500, 700, 500, 0]
    assert budget_csr(times, held, 700, t0=0, sample_s=10) == 1.0
    # under a budget of 600 the interval [10, 20) is over: 1 of 3 intervals
    assert budget_csr(times, held, 600, t0=0, sample_s=10) == pytest.approx(2 / 3)
