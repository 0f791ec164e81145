"""The controller's tick, by hand: what it counts, when it stops, what it refuses."""

from __future__ import annotations

import json
import math

from conftest import make_main, workload_from_rows
from olsctl.cli import main
from olsctl.controller import Controller, ControllerSettings


def _controller(procs, interval_s=100.0) -> Controller:
    return Controller(ControllerSettings(interval_s=interval_s, procs=tuple(procs)),
                      {"name": "easy", "order": "fcfs"})


def test_the_first_change_is_counted():
    """8 processors; one short job. The first tick (t=0) can do with 2 (the job needs 2
    and meets the SLA at once): that is a change from the 8 in force, and it counts."""
    w = workload_from_rows([(1, 0, 50, 2)], machine_procs=8)
    sim = make_main(w)
    ctl = _controller([2, 8])
    ctl.start(sim)
    sim.run()
    assert ctl.decisions[0]["chosen"] == {"active_procs": 2}
    assert ctl.summary()["changes"] == 1
    assert sim.state.active_procs == 2


def test_a_run_that_can_change_nothing_ends_instead_of_ticking():
    """4 processors, 2 active; a 4-processor job; the only candidate is 2 processors. No
    tick can ever start the job. The first tick (t=0) comes before the instant's pass,
    which may still start it; the second (t=100) finds nothing that could move and
    nothing to change, and is the last: the run ends with the job unstarted."""
    w = workload_from_rows([(1, 0, 50, 4)], machine_procs=4)
    sim = make_main(w, active_procs=2)
    ctl = _controller([2])
    ctl.start(sim)
    for _ in range(1000):  # bounded, so a run that ticks for ever fails here
        if sim.env.peek() == math.inf:
            break  # nothing left to happen: the run is over
        sim.env.step()
    assert sim.env.peek() == math.inf
    assert sim.state.queue == [0] and sim.state.start_s[0] != sim.state.start_s[0]
    assert [d["time_s"] for d in ctl.decisions] == [0.0, 100.0]


def test_ticks_go_on_while_the_run_can_still_move():
    """A job runs 1000 s while another waits; ticks every 100 s go on until the run ends
    (nothing stalls while a job is running)."""
    w = workload_from_rows([(1, 0, 1000, 4), (2, 0, 10, 4)], machine_procs=4)
    sim = make_main(w)
    ctl = _controller([4])
    ctl.start(sim)
    records = sim.run()
    assert not records.unstarted
    # the last tick, at 1100, is the first after the run ended at 1010
    assert [d["time_s"] for d in ctl.decisions] == [100.0 * k for k in range(12)]


def test_a_candidate_set_that_can_never_start_a_job_is_refused(tmp_path, capsys):
    swf = tmp_path / "four.swf"
    swf.write_text("; MaxProcs: 4\n1 0 0 100 4 -1 -1 4 100 -1 1 1 1 1 1 1 -1 -1\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"trace": str(swf), "policy": {"name": "easy"},
                               "controller": {"candidates": {"active_procs": {"procs": [2]}}},
                               "out": str(tmp_path / "out")}))
    assert main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "controller.candidates.active_procs" in err[0] and "job 1" in err[0]
    assert not (tmp_path / "out").exists()


def test_the_decision_log_is_one_json_dumps_line_per_tick():
    """decisions.jsonl's text is each decision as json.dumps writes it, one per line,
    infinite scores and all: 4 processors, a 4-wide job holding them, a 4-wide job
    waiting behind it and one narrow job; the 2-processor candidate can never start
    the wide one (its scores are infinite: null)."""
    w = workload_from_rows([(1, 0, 300, 4), (2, 10, 100, 4), (3, 20, 50, 1)],
                           machine_procs=4)
    sim = make_main(w)
    ctl = _controller([2, 4])
    ctl.start(sim)
    sim.run()
    text = ctl.jsonl()
    assert text == "".join(json.dumps(d) + "\n" for d in ctl.decisions)
    lines = text.splitlines()
    assert len(lines) == len(ctl.decisions) >= 3
    assert [json.loads(line) for line in lines] == ctl.decisions
    assert any('"mean_bsld": null' in line for line in lines)


def test_a_run_pauses_the_cycle_collector_and_restores_it(monkeypatch, tmp_path):
    """While a run simulates, Python's cycle collector is off; after it (also after an
    error) as it was before: on, or off when the caller had it off."""
    import gc

    from olsctl import runner

    assert gc.isenabled()
    seen = []
    with runner.collector_paused():
        seen.append(gc.isenabled())
    assert seen == [False] and gc.isenabled()
    try:
        with runner.collector_paused():
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert gc.isenabled()
    gc.disable()
    try:
        with runner.collector_paused():
            pass
        assert not gc.isenabled()  # (off before: left off)
    finally:
        gc.enable()

    def spy_run(self):  # the main simulator's run, as execute calls it
        seen.append(gc.isenabled())
        return original(self)

    original = runner.MainSimulator.run
    monkeypatch.setattr(runner.MainSimulator, "run", spy_run)
    assert main(["run", "--trace", "KTH-SP2", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    assert seen[-1] is False and gc.isenabled()
