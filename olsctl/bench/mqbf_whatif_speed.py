"""The speed of MQBF what-ifs: the policy's Python pass against the compiled loop
(:mod:`olsctl.policies.mqbf.template`), on the what-ifs a real MQBF/OLS run asks for
(``configs/mqbf-ols.yaml`` on a bundled log).

``python -m olsctl.bench.mqbf_whatif_speed [--trace SDSC-SP2] [--every 10] [--turns 5]``
runs the config and collects the what-ifs of every tenth controller tick (snapshot and
machine setting of each), then times them run by the policy's Python pass and by the
compiled loop, in turns in the same process, and prints what-ifs per second and the
ratio; both must give the same starts. ``--check`` instead runs the whole config once,
checking every what-if the controller runs against the compiled loop, and prints how many
it compared.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from olsctl.config import load_config, with_overrides
from olsctl.controller import batches
from olsctl.controller.scoring import WhatIfRun
from olsctl.controller.tick import Controller
from olsctl.controller.trials import setting_of
from olsctl.errors import OlsctlError
from olsctl.policies.mqbf.template import MqbfRun, MqbfTemplate
from olsctl.policies import make_policy
from olsctl.policies.core.jit import compiled
from olsctl.policies.mqbf.forward import mqbf_warm_up
from olsctl.runner import execute
from olsctl.state import SimState, Snapshot
from olsctl.whatif import steps

#: the config run: configs/mqbf-ols.yaml of the source tree (``--config`` names another,
#: as from an install, where the configs are not beside the package)
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "mqbf-ols.yaml"
INF = math.inf


@dataclass(frozen=True)
class Case:
    """One what-if the controller ran: the snapshot, the policy spec and what the
    candidate made of the machine (active processors, a wake under way, pass due), the
    horizon and the SLA bound."""

    snap: Snapshot
    spec: dict
    active: int
    wake: "tuple[float, int] | None"
    pass_due: bool
    until_s: float
    stop_above: "tuple[str, float] | None"


def python_whatif(case: Case, policy) -> tuple[np.ndarray, float, float | None]:
    """The what-if run by the policy's Python pass, as :class:`WhatIfRun` runs one:
    (start times of the snapshot's jobs, the instant it stopped, the bound that cut it
    short or None)."""
    st = SimState.from_snapshot(case.snap)
    st.active_procs, st.wake, st.pass_due = case.active, case.wake, case.pass_due
    stopped = next(steps(st, policy, watch_snapshot=True, until_s=case.until_s,
                         stop_above=case.stop_above), None)
    return np.array(st.start_s, dtype=float), st.now_s, stopped


#: the last snapshot's arrays (:class:`MqbfTemplate`), made once for a tick's what-ifs
_TEMPLATE: list = [None, None]


def compiled_whatif(case: Case, policy) -> tuple[np.ndarray, float, float | None]:
    """The same what-if run by the compiled loop, from the arrays of its snapshot (made
    once for all the what-ifs of a tick, as EASY's what-ifs are)."""
    key, template = _TEMPLATE
    if (key is None or key[0] is not case.snap or key[1] is not policy
            or key[2:] != (case.until_s, case.stop_above)):
        template = MqbfTemplate(case.snap, policy, case.until_s, case.stop_above)
        _TEMPLATE[:] = [(case.snap, policy, case.until_s, case.stop_above), template]
    run = template.run(case.active, case.wake, case.pass_due)
    cut = run.forward()
    return run.start, run.now_s, run.bound if cut else None


def same(a: tuple, b: tuple) -> bool:
    """Two what-ifs' outcomes agree exactly (starts, NaN for none; stop; bound)."""
    return (np.array_equal(a[0], b[0], equal_nan=True) and a[1] == b[1]
            and a[2] == b[2])


def _config(trace: str, out: str, config: Path = CONFIG):
    return with_overrides(load_config(config), {"trace": trace, "out": out})


def _run_with(trace: str, hook, ticks: int | None = None, config: Path = CONFIG) -> None:
    """Run ``configs/mqbf-ols.yaml`` on ``trace`` calling ``hook(run, tick)`` after every
    :class:`WhatIfRun` made on the Python path, ``tick`` counting the controller's ticks
    from 1 (``ticks``: stop after that many). The controller's what-ifs, which it would
    run compiled, run by the policy's Python pass here (no template), so that each can be
    compared with the compiled loop."""
    class Enough(Exception):
        pass

    init, tick = WhatIfRun.__init__, Controller._tick
    done = [0]

    def watched_init(self, task, candidate):
        init(self, task, candidate)
        if getattr(self, "state", None) is not None:
            hook(self, done[0])

    def counted_tick(self, sim):
        if ticks is not None and done[0] >= ticks:
            raise Enough
        done[0] += 1
        tick(self, sim)

    template = batches.tick_template
    WhatIfRun.__init__, Controller._tick = watched_init, counted_tick
    batches.tick_template = lambda *args: None
    try:
        with tempfile.TemporaryDirectory() as out:
            try:
                execute(_config(trace, out, config))
            except Enough:
                pass
    finally:
        WhatIfRun.__init__, Controller._tick = init, tick
        batches.tick_template = template


def collect(trace: str, ticks: int | None = None, every: int = 1,
            config: Path = CONFIG) -> list[Case]:
    """The what-ifs of every ``every``-th controller tick of the run (of the first
    ``ticks``; None: all)."""
    cases: list[Case] = []

    def keep(run: WhatIfRun, tick: int) -> None:
        if tick % every:
            return
        task, cand = run.task, run.candidate
        active, wake, due = setting_of(task.snapshot, cand, task.current,
                                       task.wake_latency_s)
        cases.append(Case(task.snapshot, cand.policy_spec(task.policy), active, wake, due,
                          run.until, task.stop_above))

    _run_with(trace, keep, ticks, config)
    return cases


def check(trace: str, config: Path = CONFIG) -> dict:
    """Run the whole config on ``trace``; every what-if the controller runs (and each
    one going on after a cut) is also run compiled and must give the same outcome.
    Returns counts: what-ifs, resumed ones, jobs compared."""
    counts = {"whatifs": 0, "resumed": 0, "jobs": 0}
    resume = WhatIfRun.resume

    def compare(run: WhatIfRun, tick: int) -> None:
        task, cand = run.task, run.candidate
        snap = task.snapshot
        active, wake, due = setting_of(snap, cand, task.current, task.wake_latency_s)
        twin = MqbfRun.of(snap, run.policy, active, wake, due, run.until, task.stop_above)
        cut = twin.forward()
        got = (twin.start, twin.now_s, twin.bound if cut else None)
        want = (np.array(run.state.start_s, dtype=float), run.state.now_s,
                None if run.trial.complete else run.trial.metric(task.stop_above[0]))
        assert same(got, want), (snap.now_s, cand)
        run._twin = twin
        counts["whatifs"] += 1
        counts["jobs"] += snap.n_waiting

    def checked_resume(self, stop_above):
        trial = resume(self, stop_above)
        twin = getattr(self, "_twin", None)
        if twin is not None:
            twin.go_on(None if stop_above is None else stop_above[1])
            cut = twin.forward()
            got = (twin.start, twin.now_s, twin.bound if cut else None)
            want = (np.array(self.state.start_s, dtype=float), self.state.now_s,
                    None if trial.complete else trial.metric(self.task.stop_above[0]))
            assert same(got, want), (self.task.snapshot.now_s, self.candidate)
            counts["resumed"] += 1
        return trial

    WhatIfRun.resume = checked_resume
    try:
        _run_with(trace, compare, config=config)
    finally:
        WhatIfRun.resume = resume
    return counts


def bench(cases: list[Case], turns: int) -> tuple[float, float]:
    """What-ifs per second over ``cases``, Python pass and compiled loop, timed in
    alternating turns (the best turn of each); checks that both agree."""
    policies = {}
    for c in cases:
        key = repr(sorted(c.spec.items()))
        if key not in policies:
            policies[key] = make_policy(c.spec)
    pairs = [(c, policies[repr(sorted(c.spec.items()))]) for c in cases]
    for c, p in pairs:
        assert same(python_whatif(c, p), compiled_whatif(c, p))
    best = {"python": INF, "compiled": INF}
    for _ in range(turns):
        for name, fn in (("python", python_whatif), ("compiled", compiled_whatif)):
            t0 = time.perf_counter()
            for c, p in pairs:
                fn(c, p)
            best[name] = min(best[name], time.perf_counter() - t0)
    return len(cases) / best["python"], len(cases) / best["compiled"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m olsctl.bench.mqbf_whatif_speed")
    parser.add_argument("--trace", default="SDSC-SP2")
    parser.add_argument("--ticks", type=int, default=None, help="only the first ticks")
    parser.add_argument("--every", type=int, default=10, help="the what-ifs of every n-th tick")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--config", type=Path, default=CONFIG,
                        help="the MQBF/OLS config to run (default: configs/mqbf-ols.yaml "
                             "of the source tree)")
    args = parser.parse_args(argv)
    if args.check:
        t0 = time.perf_counter()
        counts = check(args.trace, args.config)
        print(f"{args.trace}: {counts['whatifs']} what-ifs ({counts['resumed']} going on "
              f"after a cut, {counts['jobs']} waiting jobs) identical, compiled and Python "
              f"({time.perf_counter() - t0:.1f} s)")
        return 0
    t0 = time.perf_counter()
    cases = collect(args.trace, args.ticks, args.every, args.config)
    jobs = sum(c.snap.job_id.size for c in cases) / max(1, len(cases))
    print(f"{args.trace}: {len(cases)} what-ifs of every {args.every}th tick, {jobs:.1f} "
          f"jobs each on average (collected in {time.perf_counter() - t0:.1f} s)")
    t0 = time.perf_counter()
    mqbf_warm_up(compiled())
    print(f"compiled kernels ready in {time.perf_counter() - t0:.1f} s")
    py, jit = bench(cases, args.turns)
    print(f"what-ifs per second: Python {py:,.0f}, compiled {jit:,.0f}, "
          f"ratio {jit / py:.1f}x (best of {args.turns} turns each, alternating)")
    return 0


def _main() -> int:
    """:func:`main`, with a known input error (a config or trace that cannot be read) as
    one line and exit code 2."""
    import sys

    try:
        return main()
    except OlsctlError as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(_main())
