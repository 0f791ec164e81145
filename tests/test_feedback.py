"""SLA windows and the controller's SLA feedback (olsctl/feedback.py), on hand-worked
traces."""

from __future__ import annotations

import json
import math

import pytest

from olsctl.cli import main
from olsctl.config import build_config
from olsctl.errors import ConfigError
from olsctl.feedback import FeedbackSettings, SlaFeedback

WEEK = 604800


def _swf(path, rows, procs=4):
    lines = [f"; MaxProcs: {procs}"] + [
        f"{j} {s} -1 {r} {p} -1 -1 {p} {r} -1 1 -1 -1 -1 -1 -1 -1 -1" for j, s, r, p in rows]
    path.write_text("\n".join(lines) + "\n")


def _run(tmp_path, name, controller_sla, extra=""):
    cfg = ("trace: t.swf\ncontroller:\n  interval_s: 3600\n"
           "  candidates: {active_procs: {procs: [1, 4]}}\n"
           f"  sla: {controller_sla}\nout: {name}\n{extra}")
    (tmp_path / f"{name}.yaml").write_text(cfg)
    assert main(["run", f"{name}.yaml", "--quiet", "--strict"]) == 0
    out = tmp_path / name
    return (json.loads((out / "summary.json").read_text()),
            [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()])


def test_feedback_keeps_the_week_after_one_that_broke_the_sla(tmp_path, monkeypatch):
    """A 4-processor machine, candidates 1 or 4 processors, SLA mean bsld <= 50, ticks
    hourly from t = 0 (the first submission: weeks start there too).

    Week 0: A (1 proc, 100 s) at 0, B (2 procs, 10 s) at 10, E (1 proc, 700,000 s) at 20.
    The first tick sees only A: every candidate meets the SLA, the cheapest wins (1
    processor). B cannot start on it; E starts when A ends, at 100 (bsld 1 + 80/700000).
    The tick at 3600 finds B: on 1 processor it never starts, on 4 it starts now (bsld
    1 + 3590/10 = 360); neither meets, the closest wins (4). Week 0's mean: (1 + 360 +
    1 + 80/700000) / 3 = 120.67: broken, with or without feedback (nothing realized yet
    at the first tick: pressure 1/50, the SLA's own limit).

    Week 1: C (1 proc, 100 s) at W + 5 and D (2 procs, 10 s) at W + 10; E still runs. Open
    loop: at the tick at W nothing waits, every candidate meets the SLA, so 1 processor,
    held by E: C and D wait for the tick at W + 3600 (bsld 1 + 3595/100 = 36.95 and 360):
    broken again, mean 198.475. With feedback, the pressure at W is week 0's 120.67 / 50
    = 2.41, beyond full_above (0.5): the limit is 1, which no candidate meets (E's bsld is
    just above 1), so the closest, tied, goes to the larger machine: C and D start at
    once, week 1's mean is 1."""
    monkeypatch.chdir(tmp_path)
    _swf(tmp_path / "t.swf", [(1, 0, 100, 1), (2, 10, 10, 2), (3, 20, 700_000, 1),
                              (4, WEEK + 5, 100, 1), (5, WEEK + 10, 10, 2)])
    open_s, open_d = _run(tmp_path, "open", "{metric: mean_bsld, max: 50}")
    fb_s, fb_d = _run(tmp_path, "fb", "{metric: mean_bsld, max: 50, feedback: true}")

    week0 = (1 + 360 + 1 + 80 / 700_000) / 3
    assert [w["mean_bsld"] for w in open_s["weekly"]] == pytest.approx([week0, 198.475])
    assert [w["sla_kept"] for w in open_s["weekly"]] == [False, False]
    assert open_s["sla"]["kept_share"] == 0.0
    assert [w["mean_bsld"] for w in fb_s["weekly"]] == pytest.approx([week0, 1.0])
    assert [w["sla_kept"] for w in fb_s["weekly"]] == [False, True]
    assert fb_s["sla"] == {"metric": "mean_bsld", "max": 50.0, "window_s": float(WEEK),
                           "windows": 2, "windows_kept": 1, "kept_share": 0.5}

    open_at = {d["time_s"]: d for d in open_d}
    fb_at = {d["time_s"]: d for d in fb_d}
    assert open_at[0.0]["chosen"] == fb_at[0.0]["chosen"] == {"active_procs": 1}
    assert fb_at[0.0]["feedback"] == {"pressure": 1 / 50, "limit": 50.0}  # A: bsld 1
    assert open_at[WEEK]["chosen"] == {"active_procs": 1}
    assert fb_at[WEEK]["chosen"] == {"active_procs": 4}
    assert fb_at[WEEK]["feedback"]["pressure"] == pytest.approx(week0 / 50)
    assert fb_at[WEEK]["feedback"]["limit"] == 1.0
    assert "feedback" not in open_at[WEEK]
    c = fb_s["controller"]["feedback"]
    assert c["tightened_ticks"] == sum(1 for d in fb_d if d["feedback"]["limit"] < 50.0) > 0


def test_report_names_limit_misses_under_feedback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    _swf(tmp_path / "t.swf", [(1, 0, 100, 1), (2, 10, 10, 2), (3, 20, 700_000, 1)])
    _run(tmp_path, "fb", "{metric: mean_bsld, max: 50, feedback: true}")
    _run(tmp_path, "open", "{metric: mean_bsld, max: 50}")
    capsys.readouterr()
    assert main(["report", "fb", "--out", "rf"]) == 0
    out = capsys.readouterr().out
    assert "limit misses" in out and "SLA feedback: ticks tightened" in out
    assert main(["report", "open", "--out", "ro"]) == 0
    out = capsys.readouterr().out
    assert "SLA misses" in out and "SLA feedback" not in out


def _feedback(rows, metric="mean_bsld", limit=100.0, window_s=1000.0):
    """A feedback over jobs (submit, runtime, estimate), windows from t = 0."""
    submit, runtime, estimate = zip(*rows)
    return SlaFeedback(FeedbackSettings(), metric, limit, window_s, 0.0, list(submit),
                       list(runtime), list(estimate))


def test_realized_metric_counts_waits_so_far_and_divides_by_what_is_known():
    # job 0: submitted 0, started 50, runtime 100 (finished by t = 400): bsld 1 + 50/100
    # job 1: submitted 100, started 300, runtime 1000, estimate 400, still running at 400:
    #        bsld 1 + 200/400 (its estimate: the runtime is not known yet)
    # job 2: submitted 200, still waiting at 400: waited 200 so far, estimate 5 -> 1 + 200/10
    # job 3: submitted 500: not arrived at 400
    fb = _feedback([(0, 100, 100), (100, 1000, 400), (200, 20, 5), (500, 10, 10)])
    start = [50.0, 300.0, math.nan, math.nan]
    expect = ((1 + 0.5) + (1 + 0.5) + (1 + 20)) / 3
    assert fb.realized(start, 400.0, 0.0, 1000.0) == pytest.approx(expect)
    assert fb.realized(start, 400.0, 150.0, 1000.0) == pytest.approx(21.0)  # job 2 only
    assert fb.realized(start, 400.0, 1000.0, 2000.0) is None
    waits = _feedback([(0, 100, 100), (100, 1000, 400), (200, 20, 5), (500, 10, 10)],
                      metric="max_wait_s")
    assert waits.realized(start, 400.0, 0.0, 1000.0) == 200.0
    mean_wait = _feedback([(0, 100, 100), (100, 1000, 400), (200, 20, 5), (500, 10, 10)],
                          metric="mean_wait_s")
    assert mean_wait.realized(start, 400.0, 0.0, 1000.0) == pytest.approx((50 + 200 + 200) / 3)


def test_pressure_blends_the_previous_window_as_the_current_one_goes_by():
    # window 0: one job with bsld 1 + 900/100 = 10; window 1: one with bsld 1 + 0 = 1
    fb = _feedback([(0, 100, 100), (1100, 100, 100)], limit=10.0)
    start = [900.0, 1100.0]
    assert fb.pressure(start, 1000.0) == pytest.approx(10 / 10)  # window 1 starts: no job yet
    assert fb.pressure(start, 1100.0) == pytest.approx((0.1 * 1 + 0.9 * 10) / 10)
    assert fb.pressure(start, 1750.0) == pytest.approx((0.75 * 1 + 0.25 * 10) / 10)
    assert _feedback([(5000, 1, 1)]).pressure([math.nan], 10.0) == 0.0  # nothing yet


def test_limit_falls_linearly_between_the_two_pressures_to_the_least_value():
    fb = SlaFeedback(FeedbackSettings(relax_below=0.2, full_above=0.6), "mean_bsld", 200.0,
                     WEEK, 0.0, [0.0], [1.0], [1.0])
    assert [fb.limit_at(p) for p in (0.0, 0.2, 0.4, 0.55, 0.6, 5.0)] == pytest.approx(
        [200.0, 200.0, 100.0, 25.0, 1.0, 1.0])
    waits = SlaFeedback(FeedbackSettings(relax_below=0.1, full_above=0.5), "max_wait_s",
                        3600.0, WEEK, 0.0, [0.0], [1.0], [1.0])
    assert waits.limit_at(0.3) == pytest.approx(1800.0) and waits.limit_at(9.0) == 0.0


def test_feedback_decides_the_same_bytes_with_one_and_two_workers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [(i, 300 * i, 200 + (37 * i) % 900, 1 + (i * 7) % 5) for i in range(1, 80)]
    _swf(tmp_path / "t.swf", rows, procs=8)
    outs = []
    for n_jobs in (1, 2):
        cfg = ("trace: t.swf\nsla: {window_s: 3600}\n"
               f"out: out{n_jobs}\ncontroller:\n  interval_s: 600\n  n_jobs: {n_jobs}\n"
               "  sla: {metric: mean_bsld, max: 3, feedback: {relax_below: 0.2, "
               "full_above: 0.9}}\n"
               "  parallel_min_waiting: 0\n  pool_min_s: 0\n")
        (tmp_path / f"c{n_jobs}.yaml").write_text(cfg)
        assert main(["run", f"c{n_jobs}.yaml", "--quiet", "--strict"]) == 0
        outs.append(tmp_path / f"out{n_jobs}")
    for name in ("decisions.jsonl", "jobs.csv", "timeseries.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    one, two = (json.loads((o / "summary.json").read_text()) for o in outs)
    assert (one["weekly"], one["sla"]) == (two["weekly"], two["sla"])
    decisions = [json.loads(x) for x in (outs[0] / "decisions.jsonl").read_text().splitlines()]
    limits = {d["feedback"]["limit"] for d in decisions}
    assert len(limits) > 2  # the limit moved: the feedback did act


def test_load_scale_compresses_submit_times_from_the_first(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _swf(tmp_path / "t.swf", [(1, 100, 10, 1), (2, 400, 10, 1), (3, 1000, 10, 1)])
    assert main(["run", "--trace", "t.swf", "--set", "load_scale=1.5", "--out", "o",
                 "--quiet"]) == 0
    rows = (tmp_path / "o" / "jobs.csv").read_text().splitlines()[1:]
    assert [float(r.split(",")[1]) for r in rows] == [100.0, 300.0, 700.0]


@pytest.mark.parametrize("data,key", [
    ({"controller": {"sla": {"feedback": "yes"}}}, "controller.sla.feedback"),
    ({"controller": {"sla": {"feedback": {"gain": 1}}}}, "controller.sla.feedback.gain"),
    ({"controller": {"sla": {"feedback": {"relax_below": 0.5, "full_above": 0.5}}}},
     "controller.sla.feedback.full_above"),
    ({"controller": {"sla": {"feedback": {"relax_below": -1}}}},
     "controller.sla.feedback.relax_below"),
    ({"controller": {"sla": {"feedback": {"backlog": "yes"}}}},
     "controller.sla.feedback.backlog"),
    ({"controller": {"sla": {"feedback": {"backlog": 1}}}},
     "controller.sla.feedback.backlog"),
    ({"controller": {"sla": {"window_s": 5}}}, "controller.sla.window_s"),
    ({"sla": {"window_s": 0}}, "sla.window_s"),
    ({"sla": {"metric": "fun"}}, "sla.metric"),
    ({"sla": {"max": "high"}}, "sla.max"),
    ({"sla": {"weeks": 2}}, "sla.weeks"),
    ({"sla": [1]}, "sla"),
    ({"load_scale": 0}, "load_scale"),
    ({"load_scale": "fast"}, "load_scale"),
])
def test_bad_sla_and_load_settings_name_the_key(data, key):
    with pytest.raises(ConfigError) as err:
        build_config(data, source="x.yaml")
    assert f"x.yaml: {key}" in str(err.value)


def test_backlog_is_off_unless_set_and_named_only_when_on():
    """Configs written before ``backlog`` existed normalize as they did (so their study
    run ids stay); with it on, the setting is kept."""
    def fb(spec):
        return build_config({"controller": {"sla": {"feedback": spec}}}).controller[
            "sla"]["feedback"]

    assert fb(True) == {"relax_below": 0.05, "full_above": 0.3}
    assert fb({"backlog": False}) == fb(True)
    assert fb({"backlog": True}) == {"backlog": True, "relax_below": 0.05, "full_above": 0.3}


def test_run_sla_defaults_to_the_controllers_and_can_be_set_apart():
    cfg = build_config({"controller": {"sla": {"metric": "p95_bsld", "max": 50}}})
    assert (cfg.sla_spec().metric, cfg.sla_spec().max, cfg.sla_spec().window_s) == (
        "p95_bsld", 50.0, float(WEEK))
    cfg = build_config({"sla": {"max": 80, "window_s": 86400}})
    assert (cfg.sla_spec().metric, cfg.sla_spec().max, cfg.sla_spec().window_s) == (
        "mean_bsld", 80.0, 86400.0)


def test_the_controller_keeps_the_runs_sla_unless_it_has_its_own():
    cfg = build_config({"sla": {"max": 80}, "controller": {}})
    assert (cfg.controller_sla().metric, cfg.controller_sla().max) == ("mean_bsld", 80.0)
    cfg = build_config({"sla": {"max": 80}, "controller": {"sla": {"max": 120}}})
    assert (cfg.controller_sla().max, cfg.sla_spec().max) == (120.0, 80.0)


@pytest.mark.parametrize("metric", ["mean_bsld", "p95_bsld", "mean_wait_s", "max_wait_s"])
def test_following_the_start_order_reads_the_same_starts(metric):
    """Starts read through the state's start order (follow) give the very pressure that
    looking again at every job not started gives, tick after tick, while jobs start in
    an order of their own (not their submit order) and the list grows."""
    import random

    rng = random.Random(5)
    rows, t = [], 0.0
    for _ in range(300):
        t += rng.choice([0.0, 3.0, 40.0, 300.0])
        rows.append((t, rng.choice([5.0, 60.0, 900.0, 4000.0]), rng.choice([10.0, 1000.0])))
    followed, looked = _feedback(rows, metric, window_s=2000.0), _feedback(rows, metric,
                                                                           window_s=2000.0)
    start, order = [math.nan] * len(rows), []
    followed.follow(order)
    now, waiting, changed = 0.0, [], 0
    for now in [100.0 * k for k in range(1, 200)]:
        waiting += [j for j in range(len(rows)) if now - 100.0 < rows[j][0] <= now]
        for j in rng.sample(waiting, min(len(waiting), rng.randint(0, 4))):
            start[j] = now - rng.choice([0.0, 50.0])
            order.append(j)
            waiting.remove(j)
        got, want = followed.pressure(start, now), looked.pressure(start, now)
        assert got == want or (got != got and want != want)
        changed += got != 0.0
    assert changed > 100  # most ticks saw jobs


@pytest.mark.parametrize("seed", range(3))
def test_pairwise_sum_has_the_bits_of_numpys_sum(seed):
    """The feedback kernel's sum (olsctl.feedback.pairwise_sum) against numpy's, bit for
    bit: every length up to 300 (each block size and remainder), then long runs that
    split many times, and from an offset into the array."""
    import numpy as np

    from olsctl.policies.core.jit import compiled

    pairwise_sum = compiled().pairwise_sum
    rng = np.random.default_rng(seed)
    lengths = list(range(1, 301)) + rng.integers(301, 40000, 40).tolist()
    apart = 0
    for n in lengths:
        # bounded slowdowns: mostly near 1, a few in the thousands (order matters)
        values = 1.0 + rng.exponential(3.0, n + 5) ** 3
        want = float(np.add.reduce(values[5:]))
        got = pairwise_sum(values, 5, n)
        assert got == want, n
        apart += got != math.fsum(values[5:])  # a sum whose order shows
    assert apart > len(lengths) // 4


@pytest.mark.parametrize("metric", ["mean_bsld", "p95_bsld", "mean_wait_s", "max_wait_s"])
def test_window_metric_equals_its_definition_in_numpy(metric):
    """The realized metric of a window's jobs, compiled (olsctl.feedback.window_metric),
    against the definition written in numpy (waits so far for jobs not started, the
    estimate for jobs not finished): the same bits, and whether all have finished."""
    import numpy as np

    from olsctl.feedback import FEEDBACK_METRICS
    from olsctl.metrics import BSLD_BOUND_S, bounded_slowdown
    from olsctl.policies.core.jit import compiled

    rng = np.random.default_rng(11)
    finals = 0
    for n in [1, 2, 7, 8, 9, 64, 129, 257, 1000, 3001]:
        for state in range(3):
            submit = np.sort(rng.uniform(0.0, 5000.0, n))
            runtime = rng.choice([1.0, 5.0, 10.0, 60.0, 3000.0], n)
            estimate = runtime * rng.choice([1.0, 2.0, 7.5], n)
            start = submit + rng.uniform(0.0, 900.0, n)
            now = 9000.0 if state == 0 else 5500.0
            if state == 1:  # some end just now (finished)
                ends_now = rng.random(n) < 0.3
                start[ends_now] = now - runtime[ends_now]
            if state == 2:  # some not started yet
                start[rng.random(n) < 0.3] = np.nan
            wait = np.fmin(start, now) - submit
            done = start + runtime <= now
            bsld = bounded_slowdown(wait, np.where(done, runtime, estimate))
            want = {"mean_bsld": np.mean(bsld), "p95_bsld": np.percentile(bsld, 95),
                    "mean_wait_s": np.mean(wait), "max_wait_s": np.max(wait)}[metric]
            values = np.empty(n)
            got, final = compiled().window_metric(FEEDBACK_METRICS[metric], start, submit,
                                                  runtime, estimate, now, BSLD_BOUND_S,
                                                  values)
            if metric == "p95_bsld":
                got = np.percentile(values, 95)
            assert got == want, (n, state)
            assert final == bool(done.all()), (n, state)
            finals += final
    assert 0 < finals < 30


def test_backlog_presses_like_the_realized_slowdown(tmp_path, monkeypatch):
    """A 4-processor machine, candidates 2 or 4 processors, SLA mean bsld
    <= 50, feedback from 0.05 to 0.2. A (2 processors, 10,000 s) at 0; C (2 processors,
    300,000 s) at 20. The tick at 0 sees A alone: 2 processors. C waits behind A. At
    3600 the realized mean is (1 + 1 + 3580/300,000) / 2 = 1.006: pressure 0.0201, under
    0.05, so the SLA's own limit, which both candidates meet (C starts at 10,000 on 2
    processors: mean 1.017), and 2 processors stay. With ``backlog`` the waiting work,
    2 x 300,000 processor-seconds against 4 x 604,800 in a week, is a share of 0.248,
    beyond 0.2: the limit is 1, which neither candidate meets, and the closest (4
    processors: C starts at once) wins."""
    monkeypatch.chdir(tmp_path)
    _swf(tmp_path / "t.swf", [(1, 0, 10_000, 2), (3, 20, 300_000, 2)])
    base = "{metric: mean_bsld, max: 50, feedback: {relax_below: 0.05, full_above: 0.2%s}}"
    cands = "  candidates: {active_procs: {procs: [2, 4]}}\n"
    for name, extra in (("plain", ""), ("backlog", ", backlog: true")):
        cfg = ("trace: t.swf\ncontroller:\n  interval_s: 3600\n" + cands
               + f"  sla: {base % extra}\n  search: cheapest-first\nout: {name}\n")
        (tmp_path / f"{name}.yaml").write_text(cfg)
        assert main(["run", f"{name}.yaml", "--quiet", "--strict"]) == 0
    read = {name: {d["time_s"]: d for d in map(json.loads, (tmp_path / name / "decisions.jsonl")
                                                .read_text().splitlines())}
            for name in ("plain", "backlog")}
    plain, backlog = read["plain"][3600.0], read["backlog"][3600.0]
    realized = (1 + 1 + 3580 / 300_000) / 2 / 50
    assert plain["feedback"] == {"pressure": pytest.approx(realized), "limit": 50.0}
    assert plain["chosen"] == {"active_procs": 2} and plain["sla_met"] is True
    assert backlog["feedback"]["backlog"] == pytest.approx(2 * 300_000 / (4 * WEEK))
    assert backlog["feedback"]["limit"] == 1.0
    assert backlog["chosen"] == {"active_procs": 4} and backlog["sla_met"] is False
