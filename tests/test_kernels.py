"""EASY's kernels (olsctl.policies.easy.kernels): the rules of a pass worked out by hand, the
queue orders against olsctl.policies.core.order, and the compiled what-if loop against the
what-if engine's own loop (both call the same pass, so this checks the loop, the wakes,
the horizon and the SLA bound with its resumption).

Every test here is also run with numba's JIT disabled (marker ``nojit``, see
conftest.py): :func:`test_the_nojit_subset_passes_uncompiled` runs that subset in a
subprocess with ``NUMBA_DISABLE_JIT=1``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import types

import numpy as np
import pytest
from numba.core import config as numba_config

from conftest import REPO_ROOT, make_workload
from olsctl.policies.core.order import FCFS, ORDER_CODES, WFP, ordered_queue
from olsctl.policies.core.bound import KNOWN
from olsctl.policies.core.backfill import admit, insert_running, shadow_extra
from olsctl.policies.easy.kernels import backfill_from
from olsctl.policies.easy import EasyBackfill
from olsctl.policies.core.jit import compiled
from olsctl.policies.core.order import ORDERS
from olsctl.sim import MainSimulator
from olsctl.state import SimState
from olsctl.policies import compiled_path
from olsctl.whatif import steps

INF = math.inf
I64 = np.int64


def test_the_jit_is_off_exactly_when_asked():
    """The kernels are plain Python functions; their compiled copies are compiled unless
    numba's JIT is disabled: then they are the same source, uncompiled."""
    assert isinstance(admit, types.FunctionType)
    copy = compiled().admit
    assert isinstance(copy, types.FunctionType) == bool(numba_config.DISABLE_JIT)
    assert getattr(copy, "py_func", copy).__code__ is admit.__code__


def test_kernel_modules_cannot_bind_one_name_to_two_values(monkeypatch):
    """The compiled kernels share one scope of module constants: a constant of one
    kernel module named like another's (as a pass's slot ``KNOWN = 3`` beside the SLA
    bound's ``KNOWN = 0``) would silently give one module's kernels the other's value.
    Such a pair is refused; equal values and shared imports are fine."""
    from olsctl.policies.core import jit
    import olsctl.feedback  # noqa: F401  (every kernel module, registered)
    import olsctl.policies.easy.forward  # noqa: F401
    import olsctl.policies.mqbf.forward  # noqa: F401
    assert jit._shared_scope()["KNOWN"] == KNOWN
    clash = types.FunctionType(compile("def clash():\n    return KNOWN\n", "x", "exec")
                               .co_consts[0], {"KNOWN": KNOWN + 3, "np": np,
                                               "INF": INF}, "clash")
    monkeypatch.setitem(jit._KERNELS, "clash", clash)
    with pytest.raises(ValueError, match="'KNOWN'"):
        jit._shared_scope()
    clash.__globals__["KNOWN"] = KNOWN  # the same value: one constant
    assert jit._shared_scope()["KNOWN"] == KNOWN


def test_per_event_steps_are_compiled_into_their_callers():
    """Kernels marked ``@kernel(inline=True)`` (the what-if loop's steps at every event)
    are compiled into the kernels that call them, the others called; the what-if loops
    marked ``@kernel(refcounts=False)`` (EASY's, MQBF's and the knapsack's) are compiled without
    reference counts, every other kernel with them. Uncompiled, every kernel is its
    plain function, which the other tests here run either way."""
    from olsctl.policies.core import jit
    import olsctl.feedback  # noqa: F401  (every kernel module, registered)
    import olsctl.policies.easy.forward  # noqa: F401
    import olsctl.policies.mqbf.forward  # noqa: F401
    import olsctl.policies.power.forward  # noqa: F401
    assert {"admit", "shadow_extra", "backfill_indexed", "heap_push",
            "phase_power", "knapsack_step"} <= jit._INLINE
    assert not {"run_forward", "easy_candidates", "backfill_from",
                "knapsack_pass"} & jit._INLINE
    assert jit._NO_REFCOUNTS == {"forward_loop", "mqbf_loop", "mqbf_wfp_pass",
                                 "wfp_trees_fill", "knapsack_loop"}
    k = compiled()
    for name, func in jit._KERNELS.items():
        copy = getattr(k, name)
        if numba_config.DISABLE_JIT:  # uncompiled, nothing is inlined: the plain code runs
            assert copy.__code__ is func.__code__, name
        else:
            want = "always" if name in jit._INLINE else "never"
            assert copy.targetoptions["inline"] == want, name
            assert copy.targetoptions["_nrt"] is (name not in jit._NO_REFCOUNTS), name


#: in a fresh process: compile_kernels() timed from outside, which kernels then hold
#: compiled code (numba's signatures; none uncompiled), and a what-if and a tick's
#: batch run afterwards, with the kernels they added
_COMPILE_KERNELS = r"""
import json, time
import numpy as np
import olsctl.feedback  # (a controller's process: SLA feedback's kernel registered too)
from olsctl.policies import compile_kernels
from olsctl.policies.core.jit import _KERNELS, compiled

def signatures():
    k = compiled()
    return {n: len(getattr(getattr(k, n), "signatures", ())) for n in _KERNELS}

before = signatures()
t0 = time.perf_counter()
seconds = compile_kernels()
elapsed = time.perf_counter() - t0
after = signatures()
from olsctl.controller import Candidate, WhatIfTask, what_if, what_if_batch
from olsctl.state import Snapshot
one = np.asarray
snap = Snapshot(10.0, 4, 4, 1, one([1, 2]), one([0.0, 5.0]), one([2, 2]), one([100.0, 10.0]),
                one([100.0, 10.0]), one([0.0, np.nan]), running_alloc=(None,), pass_due=True)
task = WhatIfTask(snap, {"name": "easy", "order": "wfp"})
alone = what_if(task, Candidate(4)).mean_bsld
batch = [t.mean_bsld for t in what_if_batch(task, [Candidate(2), Candidate(4)])]
added = sorted(n for n, c in signatures().items() if c != after[n])
print(json.dumps({"type": type(seconds).__name__, "seconds": seconds, "elapsed": elapsed,
                  "before": sum(before.values()),
                  "compiled": sorted(n for n, c in after.items() if c),
                  "alone": alone, "batch": batch, "added": added}))
"""

#: kernels the what-if loops enter by (the other kernels are compiled into their callers
#: and hold no code of their own): compile_kernels() must leave each compiled
ENTRY_KERNELS = ["closest", "easy_candidates", "easy_forward", "easy_go_on", "forward_open",
                 "settle_row", "template_open", "window_metric"]


def test_compile_kernels_reports_seconds():
    """In a fresh process, compile_kernels() compiles (or loads from the cache) every
    kernel a what-if enters by, none before, and returns the seconds that took: a
    positive float, nearly all of the call's time seen from outside. A what-if and a
    tick's batch afterwards compile nothing more, and give the hand-worked slowdowns:
    4 processors at t=10, job 1 (2 procs) running until 100, job 2 (2 procs, 10 s,
    waiting since 5): with 4 active job 2 starts at 10, slowdowns 1 and 1 + 5/10,
    mean 1.25; with 2 it waits until 100: 1 + 95/10 = 10.5, mean 5.75."""
    out = subprocess.run([sys.executable, "-c", _COMPILE_KERNELS], capture_output=True,
                         text=True, cwd=REPO_ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["type"] == "float"
    assert 0.0 < got["seconds"] <= got["elapsed"]
    assert got["seconds"] > 0.5 * got["elapsed"], got
    assert got["alone"] == 1.25 and got["batch"] == [5.75, 1.25]
    assert got["before"] == 0 and got["added"] == []
    if not numba_config.DISABLE_JIT:
        assert set(ENTRY_KERNELS) <= set(got["compiled"]), got["compiled"]


#: a small congested run under EASY/OLS or MQBF/OLS, twice, then the compiled code's
#: allocations still alive (numba's own counts: NUMBA_NRT_STATS)
_LEAK_RUNS = r"""
import gc, json, sys
from pathlib import Path
import yaml
from numba.core.runtime import rtsys
from olsctl.config import build_config
from olsctl.runner import execute
from olsctl.synth import CongestedSpec, congested_swf

tmp = Path(sys.argv[1])
trace = congested_swf(tmp / "c.swf", CongestedSpec(jobs=300, procs=32), seed=3)
alive = {}
for conf in ("easy-ols.yaml", "mqbf-ols.yaml"):
    for order in ("fcfs", "wfp"):
        raw = yaml.safe_load((Path("configs") / conf).read_text())
        raw["policy"]["order"] = order
        raw["trace"] = str(trace)
        counts = []
        for rep in range(2):
            raw["out"] = str(tmp / f"{conf}-{order}-{rep}")
            execute(build_config(raw, source="leak"))
            gc.collect()
            stats = rtsys.get_allocation_stats()
            counts.append(stats.alloc - stats.free)
        alive[f"{conf} {order}"] = counts
print(json.dumps(alive))
"""


def test_no_compiled_allocation_outlives_a_run():
    """EASY/OLS and MQBF/OLS runs, in FCFS and WFP order, leave no allocation of the
    compiled code behind: a second run leaves as many alive as the first (what later
    runs reuse). The what-if loops keep no reference counts (``@kernel(refcounts=False)``)
    and call kernels that allocate (WFP's ordering, MQBF's pass, which the main simulator
    also calls): compiled under the loop's setting, those would leak at every pass."""
    if numba_config.DISABLE_JIT:
        pytest.skip("uncompiled: numpy allocates, not the compiled code")
    env = {**os.environ, "NUMBA_NRT_STATS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", _LEAK_RUNS, tmp], capture_output=True,
                             text=True, cwd=REPO_ROOT, timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    alive = json.loads(out.stdout.splitlines()[-1])
    assert len(alive) == 4
    for run, (first, second) in alive.items():
        assert second == first, (run, alive)


def test_a_plain_run_does_not_import_numba():
    """A main simulation without what-ifs runs the kernels uncompiled: numba, its import
    time and its memory stay out of it."""
    code = ("import sys; from olsctl.cli import main; "
            "main(['run', '--trace', 'KTH-SP2', '--out', sys.argv[1], '--quiet']); "
            "print('numba' in sys.modules)")
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", code, tmp], capture_output=True,
                             text=True, cwd=REPO_ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "False"


# -- the rules, by hand --------------------------------------------------------------------

@pytest.mark.parametrize("p,now,est,free,shadow_s,extra,want", [
    (3, 0.0, 5.0, 2, INF, 0, -1),     # wider than the free processors
    (2, 0.0, 5.0, 2, INF, 0, 0),      # no reservation yet: fitting is enough
    (2, 2.0, 8.0, 4, 10.0, 1, 1),     # ends exactly at the shadow time: extra untouched
    (2, 2.0, 7.0, 4, 10.0, 0, 0),     # ends before it
    (2, 2.0, 9.0, 4, 10.0, 3, 1),     # ends after it: takes 2 of the 3 extra
    (2, 2.0, 9.0, 4, 10.0, 1, -1),    # ends after it and the extra is too small
    (1, 2.0, 9.0, 4, 10.0, 1, 0),     # uses the last extra processor
])
def test_admit(p, now, est, free, shadow_s, extra, want):
    assert admit(p, now, est, free, shadow_s, extra) == want
    assert compiled().admit(p, now, est, free, shadow_s, extra) == want


@pytest.mark.parametrize("now,avail,need,ends,procs,want", [
    # 2 free after the first end at 10, but the second job ending at 10 counts too:
    # 4 free, extra 2
    (0.0, 0, 2, [10.0, 10.0, 20.0], [2, 2, 4], (10.0, 2)),
    # the first end that frees enough is the second: 1 + 2 + 3 = 6 >= 5, extra 1
    (0.0, 1, 5, [10.0, 15.0, 20.0], [2, 3, 4], (15.0, 1)),
    # an expected end already past (a job running over its estimate): never before now
    (8.0, 1, 3, [5.0, 30.0], [2, 4], (8.0, 0)),
    # not enough processors even with everything ended: no reservation
    (0.0, 1, 9, [10.0, 20.0], [2, 4], (INF, 0)),
    # enough free already (a head held back by another test): no reservation either
    (0.0, 4, 3, [10.0], [2], (INF, 1)),
])
def test_shadow_extra(now, avail, need, ends, procs, want):
    """Over a float array of (end, job) rows (compiled) and over the state's list of
    tuples (as Python), the same answer."""
    rows = np.array([(end, j) for j, end in enumerate(ends)], dtype=float).reshape(-1, 2)
    got = compiled().shadow_extra(now, avail, need, rows, len(ends),
                                  np.asarray(procs, dtype=I64))
    assert (float(got[0]), int(got[1])) == want
    assert shadow_extra(now, avail, need, list(zip(ends, range(len(ends)))), len(ends),
                     procs) == want


def _pass(code, now, free, queue, procs, est, submit, running):
    """The compiled easy_pass, given plain lists as arrays; running = [(end, job)];
    returns (started, shadow, extra, head, running after)."""
    procs = np.asarray(procs, dtype=I64)
    n = procs.size
    rows = np.zeros((n, 2))
    for k, (end, j) in enumerate(running):
        rows[k] = end, j
    started = np.zeros(n, dtype=I64)
    ns, n_run, shadow_s, extra, head = compiled().easy_pass(
        code, now, free, np.asarray(queue, dtype=I64), procs, np.asarray(est, dtype=float),
        np.asarray(submit, dtype=float), rows, len(running), started)
    after = [(float(e), int(j)) for e, j in rows[:n_run]]
    return started[:ns].tolist(), float(shadow_s), int(extra), int(head), after


def test_a_pass_by_hand():
    """8 processors, now 2. Job 0 (4 procs) runs until 10; jobs 1-5 wait in this order.
    Job 1 (5 procs) is the blocked head: at 10 job 0 ends and 8 are free, so shadow 10,
    extra 3. Job 2 (2 procs, ends 102) starts on the extra: extra 1, free 2. Job 3 (2,
    ends 102) fits but 2 > extra 1: refused. Job 4 (1, ends 102) takes the last extra
    processor: free 1. Job 5 (1, ends 2 + 8 = 10, exactly the shadow time) needs no
    extra: it starts, and with no processor left the pass ends."""
    procs = [4, 5, 2, 2, 1, 1]
    est = [8.0, 5.0, 100.0, 100.0, 100.0, 8.0]
    started, shadow_s, extra, head, after = _pass(
        FCFS, 2.0, 4, [1, 2, 3, 4, 5], procs, est, [0.0] * 6, [(10.0, 0)])
    assert (started, shadow_s, extra, head) == ([2, 4, 5], 10.0, 0, 1)
    assert after == [(10.0, 0), (10.0, 5), (102.0, 2), (102.0, 4)]  # (end, job) order


def test_heads_start_while_they_fit_and_a_full_machine_skips_the_pass():
    """Jobs 0 and 1 fit one after the other; job 2 (3 procs) is blocked with 1 free and
    nothing running ends in time for it to matter: shadow at job 0's end, 2 + 2 = 4 >= 3,
    extra 1. With no processor free the pass does nothing, not even reserve."""
    procs, est = [2, 1, 3], [10.0, 20.0, 5.0]
    started, shadow_s, extra, head, _ = _pass(FCFS, 0.0, 4, [0, 1, 2], procs, est,
                                              [0.0] * 3, [])
    assert (started, shadow_s, extra, head) == ([0, 1], 10.0, 0, 2)
    assert _pass(FCFS, 0.0, 0, [0, 1, 2], procs, est, [0.0] * 3, [])[:4] == \
        ([], INF, 0, -1)


# -- queue orders --------------------------------------------------------------------------

def test_orders_match_olsctl_policies_order():
    """Each order over arrays gives the list olsctl.policies.core.order gives, ties kept in
    arrival order (few distinct sizes and estimates make many ties)."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        n = int(rng.integers(1, 40))
        procs = rng.choice([1, 2, 4, 8], size=n)
        est = rng.choice([60.0, 100.0, 250.0, 3600.0], size=n)
        submit = np.sort(rng.choice([0.0, 10.0, 500.0, 777.0], size=n))
        state = SimState(64, list(range(n)), submit, procs, est, est)
        state.now_s = 1000.0 + float(rng.integers(0, 5000))
        queue = sorted(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False).tolist())
        for name, code in ORDER_CODES.items():
            got = compiled().ordered_queue(code, state.now_s, np.asarray(queue, dtype=I64),
                                           procs.astype(I64), est, submit)
            assert got.tolist() == list(ORDERS[name](state, queue)), name
            as_lists = ordered_queue(code, state.now_s, queue, procs.tolist(),
                                             est.tolist(), submit.tolist())
            assert as_lists.tolist() == got.tolist(), name


def test_wfp_keys_are_python_floats_to_the_bit():
    """WFP's key, compiled, equals the Python expression of olsctl.policies.core.order to the
    last bit (a cube by repeated multiplication would round differently)."""
    rng = np.random.default_rng(3)
    now = 9.0e7
    submit = rng.uniform(0.0, now, size=3000)
    est = rng.integers(1, 200000, size=3000).astype(float)
    procs = rng.integers(1, 1024, size=3000)
    for s, e, p in zip(submit.tolist(), est.tolist(), procs.tolist()):
        want = -(((now - s) / e) ** 3) * p
        assert compiled().order_key(WFP, now, s, p, e) == want


# -- the compiled what-if loop against the engine's loop -----------------------------------

class PlainEasy(EasyBackfill):
    """EASY under another type: the what-if engine runs its own loop for it (calling the
    same kernels, uncompiled), which the compiled loop must match."""


def _snapshot(seed: int, order: str, estimates: str):
    """A main-simulator snapshot of a random workload, taken while jobs wait."""
    rng = np.random.default_rng(seed)
    machine = int(rng.integers(4, 17))
    n = int(rng.integers(10, 40))
    submit = np.cumsum(rng.choice([0, 0, 1, 5, 20], size=n)).astype(float)
    runtime = rng.choice([1, 5, 10, 30, 60, 100, 400], size=n).astype(float)
    procs = rng.integers(1, machine + 1, size=n)
    factor = rng.choice([1, 2, 5], size=n)
    requested = np.where(rng.random(n) < 0.3, -1.0, np.ceil(runtime * factor))
    w = make_workload(list(range(1, n + 1)), submit, runtime, procs, requested,
                      machine_procs=machine)
    sim = MainSimulator(w, EasyBackfill(order), w.estimate_s(estimates))
    snaps = []
    cut = float(submit[len(submit) // 2]) + float(rng.integers(0, 3))
    sim.at(cut, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    return snaps[0], rng


def _drive(snap, policy, change, until_s, stop_above, limits):
    """Run ``steps`` from ``snap`` with ``change`` applied to the state first; send the
    ``limits`` in turn while the run is cut short. Returns the bounds yielded and the
    state afterwards."""
    state = SimState.from_snapshot(snap)
    change(state)
    gen = steps(state, policy, watch_snapshot=True, until_s=until_s, stop_above=stop_above)
    bounds = [next(gen, None)]
    for limit in limits:
        if bounds[-1] is None:
            break
        try:
            bounds.append(gen.send(limit))
        except StopIteration:
            bounds.append(None)
    return bounds, state


def _state_of(state: SimState) -> tuple:
    return (state.now_s, [s if s == s else "nan" for s in state.start_s], state.queue,
            state.running, state.busy_procs, state.active_procs, state.wake,
            state.pass_due, state.finishes)


CHANGES = {
    "none": lambda st: None,
    "fewer": lambda st: st.set_active(max(1, st.active_procs - 3)),
    "wake": lambda st: (st.set_active(max(1, st.active_procs // 2)),
                        st.request_active(st.total_procs, 17.0)),
}


@pytest.mark.parametrize("order", list(ORDER_CODES))
@pytest.mark.parametrize("estimates", ["exact", "user"])
def test_compiled_loop_matches_the_engine_loop(order, estimates):
    checked = cut_short = 0
    for seed in range(12):
        snap, rng = _snapshot(seed, order, estimates)
        for name, change in CHANGES.items():
            metric = ["mean_bsld", "mean_wait_s", "max_wait_s", "p95_bsld"][seed % 4]
            low = {"mean_bsld": 1.2, "mean_wait_s": 5.0, "max_wait_s": 20.0,
                   "p95_bsld": 1.0}[metric]
            for stop_above, until_s in ((None, INF), ((metric, low), INF),
                                        (None, snap.now_s + float(rng.integers(5, 60)))):
                limits = [low * 2.0, low * 4.0, None]
                runs = []
                for policy in (EasyBackfill(order), PlainEasy(order)):
                    # the registry gives EASY its compiled path, not a look-alike
                    assert (compiled_path(policy) is not None) == (type(policy) is EasyBackfill)
                    bounds, state = _drive(snap, policy, change, until_s, stop_above, limits)
                    runs.append((bounds, _state_of(state)))
                assert runs[0] == runs[1], (seed, name, stop_above, until_s)
                checked += 1
                cut_short += runs[0][0][0] is not None
    assert checked == 12 * len(CHANGES) * 3
    assert cut_short >= 6  # the bound and its resumption were exercised


# -- what-ifs in a fixed order: the queue by position and its index ---------------------

def _indexed_queue(rng, n_pos: int):
    """A what-if's queue of ``n_pos`` positions (job j at position j) with holes (jobs
    started already) and its index: (procs, est, start, size, wide, short). Widths mix
    narrow and wide jobs as a congested queue does."""
    procs = np.where(rng.random(n_pos) < 0.5, rng.integers(1, 9, size=n_pos),
                     rng.integers(16, 65, size=n_pos)).astype(I64)
    est = rng.choice([60.0, 300.0, 3600.0, 7200.0, 36000.0], size=n_pos)
    start = np.full(n_pos, np.nan)
    holes = rng.random(n_pos) < rng.choice([0.0, 0.3, 0.8])
    start[holes] = 0.0
    size, wide, short = compiled().index_open(np.arange(n_pos, dtype=I64), n_pos, procs, est)
    for pos in np.flatnonzero(holes):
        compiled().index_drop(wide, short, size, int(pos))
    return procs, est, start, size, wide, short


def test_the_index_skips_only_jobs_admit_refuses():
    """Behind a blocked head, the indexed pass starts exactly the jobs backfill_from
    starts over the waiting ones, in the same order, with the same extra processors
    left, and those leave the index: it only skips subtrees none of whose jobs could
    pass admit."""
    rng = np.random.default_rng(11)
    now = 1000.0
    tally = {"started": 0, "refused_late": 0}
    for _ in range(400):
        n_pos = int(rng.integers(1, 300))
        procs, est, start, size, wide, short = _indexed_queue(rng, n_pos)
        first = int(rng.integers(0, n_pos + 1))
        free = int(rng.integers(0, 70))
        shadow_s = float(rng.choice([INF, now, now + 300.0, now + 3600.0, now + 9000.0]))
        extra = int(rng.integers(0, 20))
        queue = np.arange(n_pos, dtype=I64)
        waiting = [j for j in range(first, n_pos) if start[j] != start[j]]
        want = np.zeros(n_pos + 1, dtype=I64)
        ns_want, extra_want = backfill_from(now, free, waiting, 0, shadow_s, extra,
                                                    procs, est, want)
        got, at = np.zeros(n_pos + 1, dtype=I64), np.zeros(n_pos + 1, dtype=I64)
        wide_want, short_want = wide.copy(), short.copy()
        for j in want[:ns_want]:  # the jobs started leave the index
            compiled().index_drop(wide_want, short_want, size, int(j))
        ns, extra_got = compiled().backfill_indexed(now, free, queue, first, shadow_s,
                                                    extra, procs, est, size, wide, short,
                                                    got, at)
        assert (got[:ns].tolist(), extra_got) == (want[:ns_want].tolist(), extra_want)
        assert at[:ns].tolist() == got[:ns].tolist()  # job j sits at position j
        assert np.array_equal(wide[1:], wide_want[1:])  # (node 0 is not used)
        assert np.array_equal(short[1:], short_want[1:])
        tally["started"] += ns > 0
        tally["refused_late"] += any(p <= free and now + e > shadow_s and p > extra
                                     for p, e in zip(procs[waiting], est[waiting]))
    assert tally["started"] >= 100 and tally["refused_late"] >= 100, tally


def test_the_indexed_pass_by_position_is_easy_pass():
    """A pass over the queue by position (holes where jobs started) starts what
    easy_pass starts over the same jobs moved up, in order, leaves the same running
    jobs, and reports a position with no waiting job before it (the blocked head's,
    unless fewer processors are free than any waiting job needs)."""
    from olsctl.policies.core.backfill import insert_running
    rng = np.random.default_rng(5)
    blocked = 0
    for _ in range(300):
        n_pos = int(rng.integers(1, 200))
        procs, est, start, size, wide, short = _indexed_queue(rng, n_pos)
        machine = 128
        n_run = int(rng.integers(0, 6))
        running = np.zeros((n_pos + 6, 2))
        run_procs = np.concatenate([procs, rng.integers(1, 30, size=n_run)]).astype(I64)
        for k in range(n_run):
            insert_running(running, k, 1000.0 + float(rng.integers(1, 5)) * 600.0,
                                   n_pos + k)
        busy = int(run_procs[n_pos:].sum())
        free = machine - busy - int(rng.integers(0, 100))
        waiting = np.array([j for j in range(n_pos) if start[j] != start[j]], dtype=I64)
        h = int(waiting[0]) if waiting.size else n_pos
        h = int(rng.integers(0, h + 1))  # the head pointer may lag behind holes
        rows_want = running.copy()
        want = np.zeros(n_pos + 1, dtype=I64)
        ns_want, n_run_want, _, _, head = compiled().easy_pass(
            FCFS, 1000.0, free, waiting, run_procs, np.concatenate([est, [1.0] * 6]),
            np.zeros(n_pos + 6), rows_want, n_run, want)
        got, at = np.zeros(n_pos + 1, dtype=I64), np.zeros(n_pos + 1, dtype=I64)
        ns, n_run_got, h_got = compiled().indexed_pass(
            1000.0, free, np.arange(n_pos, dtype=I64), n_pos, waiting.size, h, run_procs,
            np.concatenate([est, [1.0] * 6]), start, running, n_run, size, wide, short,
            got, at)
        assert got[:ns].tolist() == want[:ns_want].tolist()
        assert n_run_got == n_run_want
        assert running[:n_run_got].tolist() == rows_want[:n_run_want].tolist()
        if head >= 0:  # (job j sits at position j) nothing waits before h_got
            assert h_got <= head and not np.isnan(start[h_got:head]).any()
            blocked += h_got == head
    assert blocked >= 100, blocked


def _near_wfp_ties(rng, n: int) -> tuple:
    """``n`` waiting jobs (procs, est, submit) whose WFP keys at t = 1e5 nearly tie:
    (wait / est)^3 x procs is the same real number for an estimate three times as long
    and 27 times as many processors (but not the same float: a third is not exact), and
    the waits are the same or a few units in the last place apart, so that cubes by
    multiplication and by ``** 3.0`` often order them differently; some exact ties (the
    same job twice) and some ordinary keys besides."""
    scale = rng.integers(0, 3, size=n)
    procs = (27 ** scale).astype(I64)
    est = 3600.0 * 3.0 ** scale
    wait = rng.uniform(1e3, 9e4, size=4)[rng.integers(0, 4, size=n)]
    submit = 1e5 - wait + rng.integers(-2, 3, size=n) * np.spacing(1e5 - wait)
    loose = rng.random(n) < 0.2
    submit[loose] = rng.uniform(0.0, 9e4, size=int(loose.sum()))
    twin = rng.random(n) < 0.1
    for i in np.flatnonzero(twin)[1:]:
        procs[i], est[i], submit[i] = procs[i - 1], est[i - 1], submit[i - 1]
    return procs, est, submit


def test_wfp_order_from_the_last_order_is_ordered_queue():
    """rank_queue (a what-if's WFP pass: the queue sorted again from the last pass's
    order, by keys without a power, the exact keys deciding where those nearly tie)
    puts the waiting jobs in the order ordered_queue gives them (the exact keys, a
    stable sort of the queue in arrival order), from any last order: a shuffled one,
    the exact order an instant earlier, or the queue far out of order; also with keys
    that are not finite (-inf: the cube overflows)."""
    rng = np.random.default_rng(11)
    k = compiled()
    now = 1e5
    tally = {"quick order wrong": 0, "infinite": 0}
    for case in range(400):
        n = int(rng.integers(1, 120))
        procs, est, submit = _near_wfp_ties(rng, n)
        if case % 10 == 0:  # estimates so small that the cube overflows: keys -inf
            tiny = rng.random(n) < 0.3
            est[tiny] = 1e-300
            tally["infinite"] += bool(tiny.any())
        queue = np.arange(n, dtype=I64)  # arrival order: job j at position j
        want = k.ordered_queue(WFP, now, queue, procs, est, submit).tolist()
        x = (now - submit) / est
        with np.errstate(all="ignore"):
            quick = np.argsort(-(x * x * x) * procs, kind="stable").tolist()
        tally["quick order wrong"] += quick != want
        last = [rng.permutation(n),
                k.ordered_queue(WFP, now - 600.0, queue, procs, est, submit),
                queue[::-1].copy()][case % 3].astype(I64)
        rank, key = np.arange(n, dtype=I64), np.empty(n)
        k.rank_queue(WFP, now, last, n, rank, key, queue, procs, est, submit)
        assert last.tolist() == want, case
    assert tally["quick order wrong"] >= 50 and tally["infinite"] >= 20, tally


def test_the_wfp_pass_from_the_last_order_is_easy_pass():
    """ranked_pass starts what easy_pass starts in WFP order, over the same jobs, and
    leaves the same running jobs (and, with no waiting job narrow enough for the free
    processors, starts nothing without ordering the queue)."""
    rng = np.random.default_rng(12)
    k = compiled()
    now = 1e5
    started_some = idle = 0
    for case in range(300):
        n = int(rng.integers(1, 150))
        procs, est, submit = _near_wfp_ties(rng, n)
        procs = np.where(rng.random(n) < 0.5, procs, rng.integers(9, 64, size=n)).astype(I64)
        if case % 10 == 0:
            procs += 40  # (wider than the free processors, mostly)
        n_run = int(rng.integers(0, 6))
        run_procs = np.concatenate([procs, rng.integers(1, 30, size=n_run)]).astype(I64)
        est_all = np.concatenate([est, [1.0] * n_run])
        rows = np.zeros((n + n_run, 2))
        for r in range(n_run):
            insert_running(rows, r, now + float(rng.integers(1, 5)) * 600.0, n + r)
        free = int(rng.integers(-2, 40))
        queue = np.arange(n, dtype=I64)
        rows_want, want = rows.copy(), np.zeros(n, dtype=I64)
        ns_want, n_run_want, _, _, _ = k.easy_pass(
            WFP, now, free, queue, run_procs, est_all,
            np.concatenate([submit, [0.0] * n_run]), rows_want, n_run, want)
        got, order = np.zeros(n, dtype=I64), rng.permutation(n).astype(I64)
        ns, n_run_got = k.ranked_pass(
            WFP, now, free, order, n, np.arange(n + n_run, dtype=I64),
            np.empty(n + n_run), queue, run_procs, est_all,
            np.concatenate([submit, [0.0] * n_run]), rows, n_run, got)
        assert got[:ns].tolist() == want[:ns_want].tolist()
        assert n_run_got == n_run_want
        assert rows[:n_run_got].tolist() == rows_want[:n_run_want].tolist()
        started_some += ns > 0
        idle += free > 0 and procs.min() > free
    assert started_some >= 100 and idle >= 10, (started_some, idle)


@pytest.mark.parametrize("order", ["saf", "sjf", "wfp"])
def test_the_main_simulators_pass_in_order_is_the_same_compiled_or_plain(order, monkeypatch):
    """In an order other than FCFS, the main simulator's EASY pass runs the compiled
    kernels once a run has them (its what-ifs compiled them): on a congested workload,
    with WFP keys that nearly tie, the jobs start in the same order, at the same
    times, with the same reservations, as with the plain pass."""
    from olsctl.policies.easy import passes as backfill
    rng = np.random.default_rng(21)
    n, machine = 600, 32
    procs, est, _ = _near_wfp_ties(rng, n)
    procs = np.where(rng.random(n) < 0.6, procs % 5 + 1, rng.integers(6, machine + 1, n))
    runtime = rng.choice([30.0, 100.0, 400.0, 1000.0], size=n)
    submit = np.cumsum(rng.choice([0.0, 1.0, 5.0, 20.0], size=n))
    requested = np.where(rng.random(n) < 0.5, est, -1.0)
    w = make_workload(list(range(1, n + 1)), submit, runtime, procs, requested,
                      machine_procs=machine)
    runs = {}
    for way, kernels_loaded in (("plain", lambda: None), ("compiled", compiled)):
        monkeypatch.setattr(backfill, "compiled_if_loaded", kernels_loaded)
        policy, passes = EasyBackfill(order), []
        sim = MainSimulator(w, policy, w.estimate_s("user"))
        real = policy.backfill
        object.__setattr__(policy, "backfill", lambda state: passes.append(
            (state.now_s, len(state.queue), real(state), list(state.started))))
        records = sim.run()
        runs[way] = ([(r.job_id, r.start_s) for r in records.jobs], passes)
    assert runs["compiled"] == runs["plain"]
    passes = runs["plain"][1]
    assert sum(q >= 50 for _, q, _, _ in passes) >= 100  # long queues, often
    assert sum(res is not None for _, _, res, _ in passes) >= 100  # heads reserved


def _congested_snapshot(seed: int, order: str, estimates: str):
    """A snapshot with hundreds of jobs waiting: more work offered than the machine
    does, narrow and wide jobs mixed."""
    rng = np.random.default_rng(seed)
    machine, n = 32, 500
    submit = np.cumsum(rng.choice([0, 1, 3, 10], size=n)).astype(float)
    runtime = rng.choice([5, 30, 60, 100, 400, 1000], size=n).astype(float)
    procs = np.where(rng.random(n) < 0.5, rng.integers(1, 5, size=n),
                     rng.integers(8, machine + 1, size=n))
    requested = np.where(rng.random(n) < 0.3, -1.0, np.ceil(runtime * rng.choice([1, 3], n)))
    w = make_workload(list(range(1, n + 1)), submit, runtime, procs, requested,
                      machine_procs=machine)
    sim = MainSimulator(w, EasyBackfill(order), w.estimate_s(estimates))
    snaps = []
    sim.at(float(submit[-1]), lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    return snaps[0]


@pytest.mark.parametrize("order", ["fcfs", "saf", "sjf"])
@pytest.mark.parametrize("estimates", ["exact", "user"])
def test_compiled_loop_in_a_fixed_order_matches_the_engine_loop_on_a_congested_queue(
        order, estimates):
    """With hundreds waiting (the queue by position in its order, holes, the index
    deep), the compiled loop ends in the state the engine's loop (easy_pass over the
    queue moved up, ordered at every pass) ends in, run to the end, cut short by the
    bound and gone on, and with a horizon."""
    for seed in range(3):
        snap = _congested_snapshot(seed, order, estimates)
        assert snap.n_waiting >= 200, snap.n_waiting
        for name, change in CHANGES.items():
            for stop_above, until_s in ((None, INF), (("mean_bsld", 1.5), INF),
                                        (None, snap.now_s + 2000.0)):
                runs = []
                for policy in (EasyBackfill(order), PlainEasy(order)):
                    bounds, state = _drive(snap, policy, change, until_s, stop_above,
                                           [3.0, 30.0, None])
                    runs.append((bounds, _state_of(state)))
                assert runs[0] == runs[1], (seed, name, stop_above, until_s)


# -- the uncompiled subset -----------------------------------------------------------------

def test_the_nojit_subset_passes_uncompiled(request):
    """The tests marked ``nojit`` (conftest.py: these, EASY's rules and oracle, the
    contract suites' EASY and knapsack cases, ...) pass with numba's JIT disabled: the
    kernels' source is the policy, compiled or not. The subset runs in a subprocess
    that the session started once it had collected this test (conftest.NojitRun)."""
    if numba_config.DISABLE_JIT:
        pytest.skip("already running uncompiled")
    code, tail = request.getfixturevalue("nojit_run").outcome(timeout_s=1800)
    assert code == 0, tail
    assert " passed" in tail and " failed" not in tail, tail


def test_the_kernels_load_without_scipy_linalg():
    """Loading the compiled kernels skips numba's BLAS probe, which would import
    scipy.linalg: the what-ifs still run, and scipy.linalg can still be imported later
    (with numba's own BLAS calls working, which look for it when compiled)."""
    code = ("import sys; import numpy as np\n"
            "from olsctl.policies.core.jit import compiled\n"
            "from olsctl.policies.easy.forward import easy_warm_up\n"
            "easy_warm_up(compiled())\n"
            "print('scipy.linalg' in sys.modules)\n"
            "import scipy.linalg.cython_blas\n"
            "from numba import njit\n"
            "print(njit(lambda a, b: np.dot(a, b))(np.ones(3), np.arange(3.0)))\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "3.0"]
