"""`olsctl bench` pieces: the plain reference reading a file itself, a whole run in a
process of its own, and the large log of ``--big``. Speed is reported, never asserted."""

from __future__ import annotations

import pytest

from conftest import make_main
from olsctl.bench import make_big_log, plain_load, plain_run, whole_run
from olsctl.cli import main
from olsctl.workload import load_workload

HEADER = "; Version: 2.2\n; MaxProcs: 8\n"
JOBS = [  # id submit runtime procs requested; jobs 5 and 6 are dropped, 7 is too wide
    (1, 0, 100, 4, 200), (2, 5, 50, 6, -1), (3, 5, 20, 2, 10), (4, 30, 10, 8, 100),
    (5, 31, 0, 2, -1), (6, 32, 10, -1, -1), (7, 33, 10, 16, -1), (8, 40, 5, 1, 30),
]


def _trace(tmp_path):
    lines = [f"{i} {s} -1 {r} {p} -1 -1 {p} {q} -1 1 1 1 -1 -1 -1 -1 -1"
             for i, s, r, p, q in JOBS]
    path = tmp_path / "t.swf"
    path.write_text(HEADER + "\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("estimates", ["exact", "user"])
def test_the_plain_reference_reads_and_schedules_as_olsctl(tmp_path, estimates):
    path = _trace(tmp_path)
    w = load_workload(path)
    submit, runtime, procs, est, machine = plain_load(path, estimates)
    assert machine == 8 and submit == w.submit_s.tolist() and procs == w.procs.tolist()
    assert est == w.estimate_s(estimates).tolist()
    starts = {r.job_id: r.start_s for r in make_main(w, estimates).run().jobs}
    assert plain_run(path, estimates) == [starts[j] for j in w.job_id.tolist()]


def test_a_whole_run_reports_its_time_and_memory_or_its_error(tmp_path):
    wall_s, peak_mb = whole_run(_trace(tmp_path))
    assert wall_s > 0 and peak_mb > 0
    (tmp_path / "bad.swf").write_text(HEADER + "1 0 -1 x 1\n")
    with pytest.raises(RuntimeError, match="bad.swf:3"):
        whole_run(tmp_path / "bad.swf")


def test_the_big_log_is_replicas_side_by_side_and_the_same_every_time(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = make_big_log(tmp_path / "a", n_jobs=50, copies=4)
    b = make_big_log(tmp_path / "b", n_jobs=50, copies=4)
    assert a.read_bytes() == b.read_bytes()
    w = load_workload(a)
    assert len(w) == 50 and w.machine_procs == 4 * 1152  # SDSC-BLUE: 1,152 processors
    assert w.job_id.tolist() == list(range(1, 51))  # job k of replica c: k x copies + c + 1
    for col in (w.submit_s, w.runtime_s, w.procs):  # replicas of one job, side by side
        assert (col[:48].reshape(12, 4) == col[:48:4, None]).all()


def test_bench_prints_the_whole_run_beside_the_plain_reference(tmp_path, capsys):
    assert main(["bench", str(_trace(tmp_path)), "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for figure in ("whole run s", "plain + read s", "whole / plain", "peak MB",
                   "main jobs/s", "same starts: True"):
        assert figure in out


def test_configs_run_in_turns_after_a_warm_up_and_keep_each_ones_fastest(tmp_path):
    from olsctl.bench.configs import bench_configs

    times = iter([99.0, 99.0,             # the warm-ups: not counted
                  3.0, 9.0, 2.0, 7.0,     # log x: a, b, a, b
                  4.0, 6.0, 5.0, 8.0])    # log y
    calls = []

    def run(args):
        calls.append((args[0], args[2]))
        return next(times), 1.0

    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    rows = bench_configs([a, b], ["x", "y"], repeat=2, run=run)
    assert calls == [(str(a), "x"), (str(b), "x"),
                     (str(a), "x"), (str(b), "x"), (str(a), "x"), (str(b), "x"),
                     (str(a), "y"), (str(b), "y"), (str(a), "y"), (str(b), "y")]
    assert [(r.log, r.best_s) for r in rows] == [("x", [2.0, 7.0]), ("y", [4.0, 6.0])]
    assert rows[0].ratios() == [1.0, 3.5] and rows[1].ratios() == [1.0, 1.5]


def test_bench_configs_times_whole_runs_of_each_config(tmp_path, capsys):
    trace = _trace(tmp_path)
    exact, user = tmp_path / "exact.yaml", tmp_path / "user.yaml"
    exact.write_text("policy: {name: easy}\nestimates: exact\n")
    user.write_text("policy: {name: easy}\nestimates: user\n")
    assert main(["bench", str(trace), "--configs", str(exact), str(user)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("t:"))
    assert line.startswith(f"t: {exact} ") and "s (1.00x)" in line and f", {user} " in line


def test_bench_configs_refuses_what_it_cannot_run_before_any_run(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("policy: {name: easy}\nwindw: 3\n")
    good = tmp_path / "good.yaml"
    good.write_text("policy: {name: easy}\n")
    cases = [
        (["bench", "--configs", str(good), str(bad)], "windw"),
        (["bench", "--configs", str(good), "KTH-SP2"], "KTH-SP2 is a log"),
        (["bench", "--configs", str(good), "--ols"], "not with --ols"),
        (["bench", "--configs", str(tmp_path / "none.yaml")], "none.yaml"),
        (["bench", str(tmp_path / "bad.swf"), "--configs", str(good)], "bad.swf:3"),
    ]
    (tmp_path / "bad.swf").write_text(HEADER + "1 0 -1 x 1\n")  # loads, fails in the run
    for argv, said in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1
