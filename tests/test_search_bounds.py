"""Finding the closest candidate when none meets the SLA, and the congested synthetic log.

The search cuts what-ifs short on lower bounds and finishes only the ones that could
still be the closest (:func:`olsctl.controller.search._complete_closest`). The rule it
must agree with is the exhaustive one: run every candidate's what-if in full, then
:func:`choose`. These tests hold the two together on seeded random snapshots and on
snapshots of a congested log (:mod:`olsctl.synth`), tick by tick, and check that the
congested ticks are not decided by running every candidate in full.
"""

from __future__ import annotations

import random
from dataclasses import replace
from types import SimpleNamespace

import pytest

from conftest import make_main, starts_of, workload_from_rows
from olsctl.controller import Candidate, Controller, ControllerSettings, Trial, choose, what_if
from olsctl.controller.trials import SLA_METRICS
from olsctl.state import Snapshot
from olsctl.synth import CongestedSpec, congested_jobs, congested_swf

#: a small congested log: 300 jobs on 32 processors, offered 1.8 times what it can do
SMALL = CongestedSpec(jobs=300, procs=32, load=1.8)
#: Lawson & Smirni's candidates: 25% to 100% of the machine
FRACTIONS = (0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)


def _snapshot_at(w, t: float) -> Snapshot:
    sim = make_main(w)
    snaps = []
    sim.at(t, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    return snaps[0]


def _random_snapshot(rng: random.Random) -> tuple[Snapshot, int]:
    """A random small workload on 2..16 processors (in half of them no job is wider than
    a third of the machine, so most candidates can run every job), snapshot at a random
    time."""
    machine = rng.randint(2, 16)
    widest = machine if rng.random() < 0.5 else max(1, machine // 3)
    rows, t = [], 0
    for i in range(rng.randint(2, 40)):
        t += rng.choice([0, 0, 5, 30, 200])
        rows.append((i + 1, t, rng.randint(1, 900), rng.randint(1, widest)))
    return _snapshot_at(workload_from_rows(rows, machine), rng.randint(0, t)), machine


#: a tight limit for each SLA metric: most ticks miss it
_TIGHT = {"mean_bsld": (1.0, 5.0), "p95_bsld": (1.0, 10.0), "mean_wait_s": (0.0, 600.0),
          "max_wait_s": (0.0, 1800.0)}


def _congested_workload(seed: int, spec: CongestedSpec = SMALL):
    jobs = congested_jobs(spec, seed)
    rows = [(k + 1, submit, runtime, procs) for k, (submit, runtime, procs, _) in
            enumerate(jobs)]
    return workload_from_rows(rows, spec.procs), jobs[-1][0]


def _decide(settings: ControllerSettings, snap: Snapshot, limit: float):
    """What a tick decides on ``snap``: its trials, the chosen trial, the reason and
    whether the SLA was met (the tick's own search, choice and finishing of the closest)."""
    ctl = Controller(settings, {"name": "easy"})
    ctl._limit = limit
    out = ctl._search_and_choose(SimpleNamespace(wake_latency_s=0.0), snap,
                                 settings.candidates(snap.total_procs))
    assert out.failure is None, out.failure
    return out


def _exhaustive(settings: ControllerSettings, snap: Snapshot, limit: float,
                cands: list[Candidate] | None = None):
    """The exhaustive rule: every candidate's what-if run in full, then :func:`choose`."""
    ctl = Controller(settings, {"name": "easy"})
    ctl._limit = limit
    task = ctl._task(SimpleNamespace(wake_latency_s=0.0), snap)
    cands = settings.candidates(snap.total_procs) if cands is None else cands
    full = {c: what_if(replace(task, stop_above=None), c) for c in cands}
    return full, choose(list(full.values()), settings.sla_metric, limit)


def _same_decision(settings: ControllerSettings, snap: Snapshot, limit: float) -> dict:
    """Assert the tick decides as the exhaustive rule does: the same chosen candidate, the
    same logged reason and SLA flag, the chosen trial exactly the full what-if's; every
    trial left cut short holds a lower bound of its full metric that is above the chosen
    one's score. Returns what happened."""
    metric = settings.sla_metric
    out = _decide(settings, snap, limit)
    tried = [t.candidate for t in out.trials]
    # bisect tries only some candidates: the rule is then the exhaustive one over those
    cands = tried if settings.search == "bisect" else None
    full, (want, want_reason, want_met) = _exhaustive(settings, snap, limit, cands)
    assert (out.best.candidate.as_dict(), out.reason, out.sla_met) == (
        want.candidate.as_dict(), want_reason, want_met)
    assert out.best == full[out.best.candidate]
    cut = [t for t in out.trials if not t.complete]
    for t in cut:
        bound, exact = t.metric(metric), full[t.candidate].metric(metric)
        assert bound <= exact + 1e-9 * max(1.0, abs(exact))
        if not out.sla_met:
            assert bound > out.best.metric(metric)
    for t in out.trials:
        if t.complete:
            assert t == full[t.candidate]
    # what-ifs run in full besides the chosen one (a candidate too small for a waiting
    # job is not run at all: its trial is complete and infinite)
    others = [t for t in out.trials if not t.unstarted and t.candidate != out.best.candidate]
    return {"met": out.sla_met, "cut": len(cut), "others_run": len(others),
            "others_in_full": sum(1 for t in others if t.complete)}


def test_the_closest_is_the_exhaustive_rules_choice_on_random_snapshots():
    # 300 seeded random small workloads, a snapshot at a random time, every active count
    # of the machine as candidates, random SLA metric, search and a tight limit (most
    # ticks miss): the tick's choice and logged decision are the exhaustive rule's.
    rng = random.Random(20240611)
    seen = {"miss": 0, "cut": 0}
    for _ in range(300):
        snap, machine = _random_snapshot(rng)
        metric = rng.choice(SLA_METRICS)
        s = ControllerSettings(procs=tuple(range(1, machine + 1)), sla_metric=metric,
                               sla_max=max(1.0, rng.uniform(*_TIGHT[metric])),
                               search=rng.choice(["grid", "cheapest-first", "bisect"]))
        got = _same_decision(s, snap, s.sla_max)
        seen["miss"] += got["met"] is False
        seen["cut"] += got["cut"] > 0
    # the property checked something: ticks that missed, with what-ifs cut short
    assert seen["miss"] >= 100 and seen["cut"] >= 45, seen


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_closest_is_the_exhaustive_rules_choice_on_congested_snapshots(seed):
    # Snapshots of a congested log (its queue grows for weeks) taken every eighth of its
    # submission span, and an eighth past it; Lawson & Smirni's candidates; limits from the
    # tightest (1) to well above what the whole machine reaches. Where none meets the
    # SLA, the candidates that are not the closest are left cut short, not run in full.
    w, span_s = _congested_workload(seed)
    misses = in_full = others = 0
    for k in range(1, 10):
        snap = _snapshot_at(w, span_s * k / 8)
        if snap.n_running == 0 and snap.job_id.size == 0:
            continue
        for limit in (1.0, 20.0, 200.0, 5000.0):
            for search in ("cheapest-first", "grid"):
                s = ControllerSettings(fractions=FRACTIONS, sla_max=limit, search=search)
                got = _same_decision(s, snap, limit)
                if got["met"] is False:
                    misses += 1
                    others += got["others_run"]
                    in_full += got["others_in_full"]
    assert misses >= 20
    # most candidates other than the closest stay cut short at a miss
    assert in_full <= 0.25 * others, (in_full, others)


class _Exhaustive(Controller):
    """A controller deciding by the exhaustive rule: every what-if in full, then choose."""

    def _search(self, task, cands, waiting) -> list[Trial]:
        self.dispatcher.whatifs += len(cands)
        return [what_if(replace(task, stop_above=None), c) for c in cands]


@pytest.mark.parametrize("limit", [30.0, 100.0])
def test_a_congested_run_decides_every_tick_as_the_exhaustive_rule(limit):
    # A whole run of the small congested log under EASY/OLS (hourly, Lawson & Smirni's
    # candidates, cheapest-first): the decisions logged tick by tick (time, chosen
    # setting, reason, SLA met) and the jobs' starts are those of a controller that runs
    # every what-if in full, which runs far more what-ifs to the end.
    w, _ = _congested_workload(3)
    runs = {}
    for kind in (Controller, _Exhaustive):
        s = ControllerSettings(fractions=FRACTIONS, sla_max=limit, search="cheapest-first")
        sim = make_main(w)
        ctl = kind(s, {"name": "easy"})
        ctl.start(sim)
        starts = starts_of(sim.run())
        runs[kind] = (starts, ctl)
    (starts, ctl), (ex_starts, ex_ctl) = runs[Controller], runs[_Exhaustive]
    assert starts == ex_starts

    def logged(c: Controller) -> list[tuple]:
        return [(d["time_s"], d["chosen"], d["reason"], d["sla_met"]) for d in c.decisions]

    assert logged(ctl) == logged(ex_ctl)
    misses = [d for d in ctl.decisions if d["sla_met"] is False]
    assert len(misses) >= 100
    cut = sum(1 for d in misses for t in d["trials"] if "stopped_at_s" in t)
    assert cut >= 2 * len(misses)  # what-ifs left cut short: two a missed tick or more


def test_congested_log_is_seeded_deterministic_and_offers_the_load(tmp_path):
    from olsctl.workload import load_workload

    a = congested_swf(tmp_path / "a.swf", SMALL, seed=7)
    b = congested_swf(tmp_path / "b.swf", SMALL, seed=7)
    c = congested_swf(tmp_path / "c.swf", SMALL, seed=8)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    w = load_workload(a)
    assert len(w) == SMALL.jobs and w.machine_procs == SMALL.procs
    assert w.report.dropped_total == 0
    span = float(w.submit_s.max() - w.submit_s.min())
    offered = float((w.procs * w.runtime_s).sum()) / (SMALL.procs * span)
    assert offered == pytest.approx(SMALL.load, rel=0.01)
    assert (w.procs >= SMALL.procs // 8).mean() == pytest.approx(SMALL.wide_share, abs=0.1)
    # a bad setting is refused with its name
    with pytest.raises(ValueError, match="load"):
        congested_swf(tmp_path / "d.swf", CongestedSpec(load=0.0))


@pytest.mark.parametrize("policy", ["easy", "mqbf"])
def test_bench_congested_reports_cost_per_tick_on_both_logs(tmp_path, monkeypatch, policy):
    # olsctl.bench.bench_congested on a small congested log against a quiet one (the same
    # generator at a load of 0.15), under EASY or (olsctl bench --ols --congested --mqbf)
    # configs/mqbf-ols.yaml's policy: both rows count ticks and what-ifs; the
    # congested log misses the SLA at more ticks and runs more what-ifs a tick.
    import olsctl.bench.controller_cost as controller_cost
    from olsctl.bench import bench_congested
    from olsctl.bench.controller_cost import MQBF_POLICY

    ran = []  # each benched run's policy
    build = controller_cost.build_config
    monkeypatch.setattr(controller_cost, "build_config",
                        lambda raw, **kw: ran.append(raw["policy"]["name"]) or build(raw, **kw))
    quiet = congested_swf(tmp_path / "quiet.swf", replace(SMALL, load=0.15), seed=1)
    busy, calm = bench_congested(str(quiet), SMALL, seed=1,
                                 policy=MQBF_POLICY if policy == "mqbf" else None)
    assert ran == [policy, policy]
    assert busy.log.startswith("congested (seed 1") and calm.log == "quiet.swf"
    for row in (busy, calm):
        assert row.ticks > 0 and row.whatifs >= row.ticks and row.controller_s >= 0.0
        assert row.per_tick_ms == 1000.0 * row.controller_s / row.ticks
    assert busy.misses > calm.misses
    assert busy.whatifs_per_tick > calm.whatifs_per_tick
    assert busy.mean_waiting > 5 * calm.mean_waiting > 0  # (what makes it congested)


def test_trace_congested_writes_the_bench_log_whole_or_not_at_all(tmp_path, capsys, monkeypatch):
    # olsctl trace congested FILE: the log the bench draws (olsctl.synth.congested_swf with
    # the same settings and seed), its size and load as asked; an existing file is kept
    # unless --force; a bad setting or an interrupted write leaves nothing behind
    from olsctl.cli import main
    from olsctl.workload import load_workload

    out = tmp_path / "c.swf"
    args = ["trace", "congested", str(out), "--jobs", "300", "--procs", "32", "--seed", "7"]
    assert main(args) == 0
    assert "wrote" in capsys.readouterr().out
    assert out.read_bytes() == congested_swf(tmp_path / "ref.swf", SMALL, seed=7).read_bytes()
    w = load_workload(out)
    assert len(w) == 300 and w.machine_procs == 32
    offered = float((w.procs * w.runtime_s).sum()) / (32 * float(w.submit_s.max()))
    assert offered == pytest.approx(1.8, rel=0.01)

    before = out.read_bytes()
    assert main(args[:-1] + ["8"]) == 2  # another seed, no --force: refused, file kept
    assert capsys.readouterr().err.strip() == f"ConfigError: {out}: already exists (--force overwrites it)"
    assert out.read_bytes() == before
    assert main(args[:-1] + ["8", "--force"]) == 0
    assert out.read_bytes() != before

    for bad, key in ((["--jobs", "0"], "--jobs"), (["--procs", "8"], "--procs"),
                     (["--load", "0"], "--load"), (["--load", "inf"], "--load")):
        new = tmp_path / "bad.swf"
        assert main(["trace", "congested", str(new)] + bad) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"ConfigError: command line: {key}:") and "\n" not in err
        assert not new.exists()
    assert main(["trace", "congested", str(tmp_path / "no" / "x.swf")]) == 2
    assert "does not exist" in capsys.readouterr().err

    def interrupted(src, dst):  # Ctrl-C between writing and renaming
        raise KeyboardInterrupt

    monkeypatch.setattr("olsctl.synth.os.replace", interrupted)
    assert main(["trace", "congested", str(tmp_path / "cut.swf")]) == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.swf", "ref.swf"]
