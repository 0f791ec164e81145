"""RMAP's comparison on olsctl: average turnaround of Traditional, Naive and Adaptive
(0% and 20% slowdown threshold), plus the PARM selector, on two setups.

- **Bounded machine** (:func:`bounded_machine_table`, Patki et al.'s setup): 64 nodes,
  jobs arriving as a Poisson process, every job moldable, power bounds from extremely
  constrained (less than every node at the lowest cap) to unconstrained (every node at
  peak); averaged over several seeded workloads, at a light and a moderate load.
- **Real log** (:func:`real_log_table`): a bundled log on an overprovisioned machine
  with ``overprovision`` x its nodes, a share of the jobs moldable, bounds given as
  fractions of the enlarged machine's peak (0.5 with ``overprovision: 2`` is the
  original machine at peak, where Traditional is EASY on the log).

Run ``python examples/rmap_experiments.py`` from the repository (olsctl installed);
``--quick`` runs a smaller version, and ``--seeds``, ``--jobs``, ``--log-jobs``,
``--bounds``, ``--loads`` and ``--traces`` size it further (``--seeds 1 --jobs 40
--log-jobs 300 --bounds 0.45 1 --loads 0.3 --traces KTH-SP2`` takes seconds). Same
arguments, same figures.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from olsctl.perfmodel import budget_run
from olsctl.policies import make_policy
from olsctl.sim import MainSimulator
from olsctl.swf import SwfHeader
from olsctl.workload import LoadReport, Workload, load_workload, resolve_trace

#: the compared policies: label -> policy spec (without the shared settings)
POLICIES: dict[str, dict] = {
    "Traditional": {"name": "rmap-traditional"},
    "Naive": {"name": "rmap-naive"},
    "Adaptive 0%": {"name": "rmap-adaptive", "threshold": 0.0},
    "Adaptive 20%": {"name": "rmap-adaptive", "threshold": 0.2},
    "PARM": {"name": "parm"},
}


#: RMAP's range of bounds on the 64-node machine, as fractions of every node at peak:
#: 0.35 cannot feed every node even at the lowest cap (0.45); 1 is unconstrained
BOUNDS = (0.35, 0.45, 0.55, 0.7, 0.85, 1.0)


def poisson_workload(n_jobs: int = 200, nodes: int = 64, load: float = 0.7, seed: int = 0,
                     sizes: Sequence[int] = (2, 4, 8, 16), runtime_s: tuple = (600, 7200),
                     projects: int = 8) -> Workload:
    """``n_jobs`` jobs arriving as a Poisson process whose rate offers ``load`` of the
    ``nodes`` at peak (requested nodes x runtime); sizes uniform among ``sizes``,
    runtimes log-uniform in ``runtime_s``, each job of one of ``projects`` applications
    (its model parameters are drawn per application)."""
    rng = np.random.default_rng(seed)
    procs = rng.choice(np.asarray(sizes), n_jobs)
    lo, hi = math.log(runtime_s[0]), math.log(runtime_s[1])
    runtime = np.round(np.exp(rng.uniform(lo, hi, n_jobs)))
    mean_area = float(np.mean(sizes)) * (runtime_s[1] - runtime_s[0]) / (hi - lo)
    rate = load * nodes / mean_area
    submit = np.round(np.cumsum(rng.exponential(1.0 / rate, n_jobs)))
    submit -= submit[0]
    project = rng.integers(0, projects, n_jobs)
    return Workload(
        name=f"poisson-{nodes}n-load{load:g}-seed{seed}", machine_procs=nodes,
        header=SwfHeader(), report=LoadReport(source="poisson", records=n_jobs, kept=n_jobs),
        job_id=np.arange(1, n_jobs + 1, dtype=np.int64), submit_s=submit.astype(float),
        runtime_s=runtime.astype(float), procs=procs.astype(np.int64),
        requested_time_s=np.full(n_jobs, -1.0), user_id=project.astype(np.int64),
        group_id=np.full(n_jobs, -1, dtype=np.int64))


@dataclass(frozen=True)
class Outcome:
    """One run: mean turnaround, wait and runtime (s), and the budget report."""

    turnaround_s: float
    wait_s: float
    runtime_s: float
    budget: dict


def run_policy(workload: Workload, spec: dict, estimates: str = "exact",
               model: dict | None = None) -> Outcome:
    """Run ``workload`` under the policy ``spec`` (its model prepared for the run);
    ``model`` overrides fields of :class:`olsctl.perfmodel.PerfSettings`."""
    policy = make_policy(spec)
    sim = MainSimulator(workload, policy, workload.estimate_s(estimates))
    problem = policy.prepare(sim.state, workload)
    if model:
        settings = replace(sim.state.budget.settings, **model)
        sim.state.budget = budget_run(workload, settings, sim.state.total_procs)
        problem = policy.infeasible(sim.state)
    if problem is not None:
        raise ValueError(problem)
    records = sim.run()
    if records.unstarted:
        raise RuntimeError(f"{len(records.unstarted)} jobs never started under {spec}")
    jobs = records.jobs
    wait = np.array([r.start_s - r.submit_s for r in jobs])
    run = np.array([r.runtime_s for r in jobs])
    return Outcome(float((wait + run).mean()), float(wait.mean()), float(run.mean()),
                   policy.run_report(sim.state, records))


def _row(label: str, workloads: list[Workload], shared: dict, policies: dict,
         model: dict | None = None) -> dict:
    row: dict = {"setting": label}
    for name, spec in policies.items():
        outs = [run_policy(w, {**spec, **shared}, model=model) for w in workloads]
        row[name] = float(np.mean([o.turnaround_s for o in outs]))
        row[f"{name} wait"] = float(np.mean([o.wait_s for o in outs]))
        row[f"{name} runtime"] = float(np.mean([o.runtime_s for o in outs]))
        row[f"{name} csr"] = min(o.budget["csr"] for o in outs)
        if name == "PARM":
            row["PARM greedy windows"] = sum(o.budget["greedy_windows"] for o in outs)
    return row


def bounded_machine_table(bounds: Sequence[float] = BOUNDS, seeds: Sequence[int] = range(5),
                          n_jobs: int = 200, load: float = 0.3,
                          policies: dict = POLICIES, model: dict | None = None) -> list[dict]:
    """Mean turnaround (s) per policy and bound on RMAP's 64-node bounded machine;
    ``model`` overrides fields of the performance model's settings."""
    workloads = [poisson_workload(n_jobs, 64, load, seed) for seed in seeds]
    return [_row(f"{b:g}", workloads, {"bound": b, "moldable": 1.0}, policies, model)
            for b in bounds]


def real_log_table(trace: str = "KTH-SP2", overprovision: float = 2.0,
                   bounds: Sequence[float] = (0.5, 0.6, 0.75), moldable: float = 0.5,
                   n_jobs: int | None = None, policies: dict = POLICIES,
                   model: dict | None = None) -> list[dict]:
    """Mean turnaround (s) per policy and bound on a bundled log replayed on a machine
    of ``overprovision`` x its nodes, ``moldable`` of its jobs moldable."""
    base = load_workload(resolve_trace(trace))
    w = load_workload(resolve_trace(trace), int(round(base.machine_procs * overprovision)))
    if n_jobs is not None:
        w = w.head(n_jobs)
    return [_row(f"{b:g}", [w], {"bound": b, "moldable": moldable}, policies, model)
            for b in bounds]


def markdown(rows: list[dict], policies: Sequence[str], title: str) -> str:
    """Mean turnaround (s) per policy, Adaptive's gains over the baselines (positive:
    Adaptive faster), then mean wait / mean runtime (s) per policy."""
    head = ["bound"] + list(policies) + ["A0 vs Trad", "A0 vs Naive", "A20 vs Trad",
                                         "A20 vs Naive"]
    lines = [f"**{title}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def gain(a: str, b: str, r: dict) -> float:
        return 1.0 - r[a] / r[b]

    pairs = (("Adaptive 0%", "Traditional"), ("Adaptive 0%", "Naive"),
             ("Adaptive 20%", "Traditional"), ("Adaptive 20%", "Naive"))
    for r in rows:
        cells = [r["setting"]] + [f"{r[p]:,.0f}" for p in policies]
        cells += [f"{100 * gain(a, b, r):+.1f}%" for a, b in pairs]
        lines.append("| " + " | ".join(cells) + " |")
    means = [float(np.mean([gain(a, b, r) for r in rows])) for a, b in pairs]
    lines.append("| mean | " + " | ".join([""] * len(policies))
                 + " | " + " | ".join(f"{100 * m:+.1f}%" for m in means) + " |")
    lines += ["", "mean wait / mean runtime (s):", "",
              "| bound | " + " | ".join(policies) + " |", "|" + "---|" * (len(policies) + 1)]
    for r in rows:
        lines.append(f"| {r['setting']} | " + " | ".join(
            f"{r[p + ' wait']:,.0f} / {r[p + ' runtime']:,.0f}" for p in policies) + " |")
    csr = min(r[f"{p} csr"] for r in rows for p in policies)
    greedy = sum(r.get("PARM greedy windows", 0) for r in rows)
    lines += ["", f"lowest CSR over the job power budget in any run: {csr:.3f}; PARM "
              f"windows solved greedily: {greedy}"]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python examples/rmap_experiments.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="fewer jobs and seeds, log heads (2 seeds, 100 jobs, 3000 log jobs)")
    p.add_argument("--seeds", type=int, help="workloads per load of the bounded machine "
                                             "(default 5)")
    p.add_argument("--jobs", type=int, help="jobs per bounded-machine workload (default 200)")
    p.add_argument("--log-jobs", type=int, help="jobs from the head of each real log "
                                                "(default: all)")
    p.add_argument("--bounds", nargs="*", type=float, default=list(BOUNDS),
                   help="bounded machine's power bounds, as fractions of every node at peak")
    p.add_argument("--traces", nargs="*", default=["KTH-SP2", "SDSC-SP2"],
                   help="bundled logs of the real-log tables")
    p.add_argument("--loads", nargs="*", type=float, default=[0.3, 0.6],
                   help="offered loads of the bounded machine")
    p.add_argument("--exponent", type=float, help="model: dynamic power ~ clock^EXPONENT")
    p.add_argument("--kappa", nargs=2, type=float, metavar=("LO", "HI"),
                   help="model: range of the projects' compute-boundness")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    model = {}
    if args.exponent is not None:
        model["exponent"] = args.exponent
    if args.kappa is not None:
        model["kappa_range"] = tuple(args.kappa)
    shown = "".join(f", {k} {v}" for k, v in model.items())
    names = list(POLICIES)
    seeds = range(args.seeds or (2 if args.quick else 5))
    n_jobs = args.jobs or (100 if args.quick else 200)
    log_jobs = args.log_jobs or (3000 if args.quick else None)
    for load in args.loads:
        rows = bounded_machine_table(args.bounds, seeds, n_jobs, load, model=model)
        print(markdown(rows, names, f"64 nodes of 230 W, Poisson arrivals offering {load:g} "
                                    f"of the machine at peak, {n_jobs} jobs x {len(seeds)} "
                                    f"seeds, every job moldable{shown}: mean turnaround (s)"))
        print(flush=True)
    for trace in args.traces:
        rows = real_log_table(trace, n_jobs=log_jobs, model=model)
        print(markdown(rows, names, f"{trace} on twice its nodes (bound 0.5 = its own nodes at "
                                    f"peak), half the jobs moldable{shown}: mean turnaround (s)"))
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
