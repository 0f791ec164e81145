"""Wallace's learner: readings, the t-test rule, learning from running jobs, and its
learning curve on a log."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import make_main, workload_from_rows
from olsctl.checker import StrictChecker
from olsctl.cli import main
from olsctl.policies import make_policy
from olsctl.power.cap import CapSchedule
from olsctl.power.learn import EMPTY, Learner, catch_up, learn, reading_levels, readings
from olsctl.power.profiles import PowerProfiles, ProfileSettings, synthetic_profiles
from olsctl.power.runtime import Profiles, power_state
from olsctl.state import SimState
from olsctl.whatif import run_whatif


def test_readings_count_one_per_sample_interval_in_each_phase():
    # 1000 s at 300 s sampling: readings at 0, 300, 600, 900 -> 4. Phases of 0.5 / 0.5:
    # the first two in phase 0 (100 W), the last two in phase 1 (300 W).
    n, mean, m2 = readings([0.0, 0.5], [100.0, 300.0], 1000.0, 300.0)
    assert (n, mean) == (4, 200.0)
    assert m2 == pytest.approx(4 * 100.0 ** 2)
    assert readings([0.0], [50.0], 10.0, 300.0)[:2] == (1, 50.0)  # short job: one reading


def _add(profile, values):
    for v in values:
        learn(profile, 1, float(v), 0.0, 20, 0.01)


def test_profile_unknown_until_twenty_readings_then_moves_only_on_a_real_change():
    p = list(EMPTY)
    _add(p, [100, 102] * 9 + [100])  # 19 readings
    assert p[0] is None
    _add(p, [102])
    assert p[0] == pytest.approx(101.0)
    # 20 more readings from the same distribution: the t-test keeps the value
    _add(p, [101, 100, 102, 101] * 5)
    assert p[0] == pytest.approx(101.0)
    # 19 readings at 150 W are not enough to move it, the 20th is
    _add(p, [149, 151] * 9 + [150])
    assert p[0] == pytest.approx(101.0)
    _add(p, [150])
    assert p[0] == pytest.approx(150.0, abs=0.1)


def test_learning_curve_and_error_on_learned_jobs(capsys):
    assert main(["predict", "KTH-SP2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    weeks = report["weekly"]
    early = weeks[0]["learned_share"]
    late = sum(w["learned_share"] * w["jobs"] for w in weeks[-10:]) / sum(w["jobs"] for w in weeks[-10:])
    assert late > early + 0.1
    assert report["learned_jobs_mae_w"]["learner"] < report["learned_jobs_mae_w"]["naive"]


def _long_job_state() -> SimState:
    """Job 0 (10,000 s, 200 W per processor for its first half, then 400 W) runs from
    t = 0; job 1, "the same job" (same key and project), waits. Readings every 100 s."""
    prof = PowerProfiles(np.array([0, 2, 3]), np.array([0.5, 0.5, 1.0]),
                         np.array([200.0, 400.0, 300.0]), 0)
    state = SimState(4, [1, 2], [0.0, 0.0], [1, 1], [10000.0, 100.0], [10000.0, 100.0])
    state.power = power_state(prof, [7, 7], 50.0, 5.0, 500.0,
                              CapSchedule.constant(float("inf")), [3, 3], learning=True,
                              sample_s=100.0)
    state.start(0)
    state.queue = [1]
    return state


def _long_job_state_at(now_s: float) -> SimState:
    state = _long_job_state()
    _predict_at(state, now_s)
    return state


def _predict_at(state: SimState, now_s: float) -> tuple[str, float]:
    state.now_s = now_s
    learner = Learner()
    value = learner.predict(state, 1)
    return learner.source(state.power, 1), value


def test_a_running_job_teaches_the_learner_before_it_ends_and_not_before_its_readings():
    state = _long_job_state()
    # readings at 0, 100, ..., 1800 are 19: not enough; the 20th is taken at 1900 and
    # informs decisions after that instant, long before the job ends at 10,000 s
    assert _predict_at(state, 1900.0) == ("peak", 500.0)
    assert state.power.fed[0] == 19
    assert _predict_at(state, 1900.5) == ("job", 200.0)
    assert state.power.learned[("project", 7)][0] == 200.0
    # a snapshot carries what was fed: its state learns on exactly like the original
    copy = SimState.from_snapshot(state.snapshot())
    assert _predict_at(copy, 6000.0) == _predict_at(_long_job_state(), 6000.0)
    assert (copy.power.learned.as_dict()
            == _long_job_state_at(6000.0).power.learned.as_dict())
    # readings 20-39 (2,000-3,900 s) agree with the profile and join its base; readings
    # 40-59 (4,000-5,900 s; the 400 W phase starts at 5,000 s) differ: mean 300 W
    assert _predict_at(state, 5900.0) == ("job", 200.0)
    assert _predict_at(state, 5900.5) == ("job", 300.0)
    # readings 60-79 (6,000-7,900 s), all 400 W, differ again
    assert _predict_at(state, 7900.0) == ("job", 300.0)
    assert _predict_at(state, 7901.0) == ("job", 400.0)
    assert state.power.fed[0] == 80
    # the job ends: its last readings wait in ``pending`` (a snapshot keeps them) and
    # reach the learner at its next prediction
    state.now_s = 10000.0
    state.finish(0)
    assert state.power.fed[0] == 100 and len(state.power.pending) == 1
    assert len(state.snapshot().power.pending) == 1
    _predict_at(state, 10000.0)
    assert not state.power.pending
    assert state.power.learned[("job", 3)] == [400.0, 40, 400.0, 0.0, 0, 0.0, 0.0]


def test_reading_levels_agree_with_readings():
    for runtime in (1.0, 299.0, 300.0, 301.0, 1000.0, 7777.0):
        levels = reading_levels([0.0, 0.3, 0.35], [10.0, 20.0, 40.0], runtime, 100.0, 0, 10**6)
        assert [k for k, _ in levels] == list(range(len(levels)))
        n, mean, _ = readings([0.0, 0.3, 0.35], [10.0, 20.0, 40.0], runtime, 100.0)
        assert n == len(levels)
        assert mean == pytest.approx(sum(w for _, w in levels) / n)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_what_is_learned_does_not_depend_on_when_the_learner_catches_up(data):
    # EASY ignores power, so the runs are the same; catch-ups at random instants (as
    # predictions at passes would) must leave the very same profiles as one at the end,
    # and as feeding every reading in the order it was taken
    n = data.draw(st.integers(1, 12))
    rows, t = [], 0
    for i in range(n):
        t += data.draw(st.sampled_from([0, 0, 5, 20]))
        rows.append((i + 1, t, data.draw(st.integers(1, 120)), data.draw(st.integers(1, 4))))
    w = workload_from_rows(rows, 4)
    prof = synthetic_profiles(w, 100.0, 500.0, ProfileSettings(seed=data.draw(st.integers(0, 3))))
    ticks = data.draw(st.lists(st.integers(0, 400), max_size=12))
    settings_ = Learner(min_samples=3)
    learned = []
    for tick_times in ([], ticks):
        sim = make_main(w)
        sim.state.power = power_state(prof, [j % 2 for j in range(n)], 100.0, 10.0, 500.0,
                                      CapSchedule.constant(float("inf")),
                                      [j % 3 for j in range(n)], learning=True, sample_s=7.0)
        for tick in tick_times:
            sim.at(float(tick), lambda s: catch_up(s.state, s.state.now_s, settings_))
        records = sim.run()
        catch_up(sim.state, 10.0 ** 6, settings_)
        learned.append(sim.state.power.learned)
    assert learned[0].as_dict() == learned[1].as_dict()
    reference, p = {}, sim.state.power
    stream = sorted((r.start_s + k * 7.0, r.job_id, level, p.job_key[r.job_id - 1],
                     p.user[r.job_id - 1]) for r in records.jobs
                    for k, level in reading_levels(p.phase_start[r.job_id - 1],
                                                   p.phase_w[r.job_id - 1], r.runtime_s,
                                                   7.0, 0, 10 ** 6))
    for _, _, level, key, user in stream:
        for k in (("job", key), ("project", user)):
            learn(reference.setdefault(k, list(EMPTY)), 1, level, 0.0, 3, 0.01)
    assert reference == learned[0].as_dict()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_learner_whatif_fidelity_with_profiles_learned_from_running_jobs(data):
    # long jobs, frequent readings and a low min_samples: profiles learn and move while
    # jobs run; a what-if from a snapshot gives the main simulator's starts
    machine = data.draw(st.integers(2, 8))
    n = data.draw(st.integers(1, 16))
    rows, t = [], 0
    for i in range(n):
        t += data.draw(st.sampled_from([0, 2, 10, 30]))
        rows.append((i + 1, t, data.draw(st.integers(1, 100)),
                     data.draw(st.integers(1, machine))))
    w = workload_from_rows(rows, machine)
    spec = {"name": data.draw(st.sampled_from(["knapsack", "easy-power"])),
            "predictor": {"name": "learner", "min_samples": data.draw(st.integers(2, 5))}}
    cap_w = machine * data.draw(st.sampled_from([200.0, 300.0, 450.0]))
    seed = data.draw(st.integers(0, 3))
    cut = data.draw(st.sampled_from(sorted(set(w.submit_s.tolist()))))

    def power_sim(work):
        prof = synthetic_profiles(work, 100.0, 500.0, ProfileSettings(seed=seed))
        sim = make_main(work, policy=make_policy(spec))
        ids = work.job_id.tolist()
        sim.state.power = power_state(prof, [j % 2 for j in ids], 100.0, 10.0, 500.0,
                                      CapSchedule.constant(cap_w), [j % 3 for j in ids],
                                      learning=True, sample_s=2.0)
        return sim

    snaps = []
    sim = power_sim(w)
    sim.at(cut, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    truth_sim = power_sim(w.select(np.flatnonzero(w.submit_s <= cut)))
    truth_sim.at(cut, lambda s: None)
    truth = {r.job_id: r.start_s for r in truth_sim.run().jobs}
    res = run_whatif(snaps[0], make_policy(spec), checker=StrictChecker())
    assert not res.unstarted
    assert {j: truth[j] for j in res.job_id.tolist()} == dict(zip(res.job_id.tolist(),
                                                                  res.start_s.tolist()))


@pytest.mark.parametrize("fold_at", [0, 1, 32])
def test_profiles_a_snapshot_shares_never_change_under_it(monkeypatch, fold_at):
    # A run's profiles, a snapshot's copy and a what-if's copy of that: each side goes
    # on learning (the inlined rule of catch_up: own_profile, then change in place) and
    # sees only its own readings, whether the copies folded the changed profiles into a
    # shared base (fold_at 0 and 1) or copied them (32).
    monkeypatch.setattr(Profiles, "FOLD_AT", fold_at)

    def feed(store, key, x):
        learn(store.own_profile(key, EMPTY), 1, x, 0.0, 2, 0.01)

    run = Profiles()
    for k in range(3):
        feed(run, k, 100.0)
        feed(run, k, 100.0)
    snap = run.fork()
    whatif = snap.fork()
    # (a copy shares what is folded: it costs the profiles changed since, not all)
    assert whatif.base is snap.base is run.base
    assert len(snap.own) == (0 if fold_at < 3 else 3)
    feed(run, 0, 900.0)
    feed(run, 0, 900.0)
    feed(run, 3, 50.0)
    feed(snap, 1, 500.0)
    feed(whatif, 2, 7.0)
    feed(whatif, 2, 7.0)
    learned = {k: run.get(k)[0] for k in range(4)}
    assert learned == {0: 900.0, 1: 100.0, 2: 100.0, 3: None}
    assert [snap.get(k)[0] for k in range(3)] == [100.0, 100.0, 100.0]
    # (a learned profile keeps one new reading apart until min_samples of them)
    assert snap.get(1) == [100.0, 2, 100.0, 0.0, 1, 500.0, 0.0]
    assert run.get(1) == whatif.get(1) == [100.0, 2, 100.0, 0.0, 0, 0.0, 0.0]
    assert snap.get(3) is None and whatif.get(3) is None
    assert [whatif.get(k)[0] for k in range(3)] == [100.0, 100.0, 7.0]
    with pytest.raises(KeyError):
        whatif[("job", 99)]

