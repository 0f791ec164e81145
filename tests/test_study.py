"""``olsctl study``: grid expansion and run ids, results.csv against the runs' own
summaries, bad study files, failed runs, resume after SIGKILL, and the same bytes on a
Dask cluster as with local processes.

Every study here runs on a tiny SWF log written by the test (a fixed seed), so a run
takes a fraction of a second.
"""

from __future__ import annotations

import csv
import filecmp
import hashlib
import json
import os
import re
import warnings
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from olsctl.cli import main
from olsctl.study import Study, StudyError, canonical, load_study, run_study, study_table
from olsctl.study.execution import longest_first, quiet_recycled_workers
from olsctl.study.storage import _locked

ROOT = Path(__file__).resolve().parent.parent

#: six runs: estimates x (EASY, EASY with the controller, knapsack under a power cap)
STUDY = """\
base:
  trace: tiny.swf
  policy: {name: easy}
grid:
  estimates: [exact, user]
  scheme:
    easy: {controller: null}
    easy-ols: {controller: {interval_s: 600, sla: {max: 50}}}
    knapsack: {policy: {name: knapsack, window: 8}, power: {cap: {fraction: 0.6}}}
"""


def write_tiny_swf(path: Path, jobs: int = 120, procs: int = 32, seed: int = 7) -> Path:
    """A busy little log: Poisson arrivals, log-normal runtimes, power-of-two sizes."""
    rng = np.random.default_rng(seed)
    lines = [f"; MaxProcs: {procs}"]
    t = 0
    for j in range(1, jobs + 1):
        t += int(rng.exponential(300))
        run = int(rng.lognormal(6.5, 1.2)) + 1
        size = int(min(procs, 2 ** rng.integers(0, 6)))
        req = int(run * rng.uniform(1, 4))
        fields = [j, t, -1, run, size, -1, -1, size, req, -1, 1, int(rng.integers(1, 6)),
                  int(rng.integers(1, 4)), -1, 1, -1, -1, -1]
        lines.append(" ".join(map(str, fields)))
    path.write_text("\n".join(lines) + "\n")
    return path


def make_study(folder: Path, text: str = STUDY, name: str = "study.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "tiny.swf").exists():
        write_tiny_swf(folder / "tiny.swf")
    path = folder / name
    path.write_text(text)
    return path


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def same_tree(a: Path, b: Path) -> None:
    """Same files with the same bytes under ``a`` and ``b`` (study outputs only)."""
    names_a = [n for n in listing(a) if not n.startswith(".")]
    assert names_a == [n for n in listing(b) if not n.startswith(".")]
    for name in names_a:
        if (a / name).is_file():
            assert filecmp.cmp(a / name, b / name, shallow=False), name


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The six-run study, uninterrupted, two worker processes (loky)."""
    folder = tmp_path_factory.mktemp("reference")
    path = make_study(folder)
    assert main(["study", str(path), "--out", str(folder / "out"), "--n-jobs", "2",
                 "--quiet"]) == 0
    return folder / "out"


# --- grid and ids ----------------------------------------------------------------------

def test_grid_is_the_product_in_grid_order(tmp_path):
    path = make_study(tmp_path, STUDY + "  policy.order: [fcfs, wfp]\n")
    study = load_study(path)
    assert study.columns == ("estimates", "scheme", "policy.order")
    assert len(study.points) == 12
    assert [p.labels for p in study.points[:4]] == [
        ("exact", "easy", "fcfs"), ("exact", "easy", "wfp"),
        ("exact", "easy-ols", "fcfs"), ("exact", "easy-ols", "wfp")]
    by_labels = {p.labels: p.config for p in study.points}
    easy = by_labels[("user", "easy", "wfp")]
    assert easy.estimates == "user" and easy.controller is None and easy.power is None
    assert easy.policy["name"] == "easy" and easy.policy["order"] == "wfp"
    ols = by_labels[("exact", "easy-ols", "fcfs")]
    assert ols.controller["interval_s"] == 600 and ols.controller["sla"]["max"] == 50
    assert ols.controller_sla().metric == "mean_bsld"  # defaults filled around it
    knap = by_labels[("exact", "knapsack", "wfp")]  # the order goes into the named axis's policy
    assert knap.policy["name"] == "knapsack" and knap.policy["window"] == 8
    assert knap.policy["order"] == "wfp" and knap.power["cap"] == {"fraction": 0.6}
    assert study.out_dir == Path("study")  # from the file name
    assert [p.config.out for p in study.points] == [f"runs/{p.run_id}" for p in study.points]


def test_the_heaviest_runs_start_first(tmp_path):
    # a controller's runs before those without one (seven candidates a tick: 8x), a
    # larger log before a smaller one, ties in grid order
    study = load_study(make_study(tmp_path))
    order = [p.index for p in longest_first(study.points)]
    assert [study.points[i].labels for i in order[:2]] == [("exact", "easy-ols"),
                                                           ("user", "easy-ols")]
    assert order == [1, 4, 0, 2, 3, 5]
    write_tiny_swf(tmp_path / "big.swf", jobs=480)
    two = load_study(make_study(tmp_path, "base: {policy: {name: easy}}\n"
                                          "grid:\n  trace: [tiny.swf, big.swf]\n"
                                          "  load_scale: [1.0, 2.0]\n", name="two.yaml"))
    assert [p.labels for p in longest_first(two.points)] == [
        ("big.swf", "2"), ("big.swf", "1"), ("tiny.swf", "2"), ("tiny.swf", "1")]


def test_ids_are_readable_hashes_of_the_resolved_config(tmp_path):
    study = load_study(make_study(tmp_path))
    ids = [p.run_id for p in study.points]
    assert len(set(ids)) == len(ids) == 6
    for p in study.points:
        digest = hashlib.sha256(canonical(p.config).encode()).hexdigest()[:10]
        prefix = {"easy": "tiny-easy", "easy-ols": "tiny-easy-ols",
                  "knapsack": "tiny-knapsack"}[p.labels[1]]
        assert p.run_id == f"{prefix}-{digest}"
    # the same runs written another way (grid reordered, defaults spelled out, a
    # dotted key instead of a mapping) keep their ids
    other = make_study(tmp_path, """\
base: {trace: tiny.swf, policy: {name: easy, order: fcfs}, out: elsewhere}
grid:
  scheme:
    knapsack: {policy: {name: knapsack, window: 8}, power.cap: {fraction: 0.6}}
    easy-ols: {controller.interval_s: 600, controller.sla.max: 50}
    easy: {}
  estimates: [user, exact]
""", "other.yaml")
    assert sorted(p.run_id for p in load_study(other).points) == sorted(ids)


def test_ids_do_not_depend_on_the_process(tmp_path):
    path = make_study(tmp_path)
    code = ("import sys; from olsctl.study import load_study; "
            "print(' '.join(p.run_id for p in load_study(sys.argv[1]).points))")
    runs = [subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                           text=True, env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
            for seed in ("1", "2")]
    assert runs[0].stdout == runs[1].stdout
    assert runs[0].stdout.split() == [p.run_id for p in load_study(path).points]


def test_base_file_paths_stay_relative_to_the_base_file(tmp_path):
    make_study(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "base.yaml").write_text(
        "trace: ../tiny.swf\npolicy: {name: easy}\nout: somewhere\n")
    via_file = make_study(tmp_path / "studies", "base: ../configs/base.yaml\n"
                          "grid: {estimates: [exact, user]}\n")
    inline = make_study(tmp_path / "studies", "base: {trace: ../tiny.swf}\n"
                        "grid: {estimates: [exact, user]}\n", "inline.yaml")
    a, b = load_study(via_file), load_study(inline)
    assert [p.config.trace for p in a.points] == ["../tiny.swf"] * 2
    assert [p.run_id for p in a.points] == [p.run_id for p in b.points]


def test_shipped_studies_expand_to_the_papers_grids():
    lawson = load_study(ROOT / "configs" / "study-lawson.yaml")
    assert len(lawson.points) == 24 and len({p.run_id for p in lawson.points}) == 24
    schemes = {(p.labels[2], p.config.policy["name"], p.config.controller is not None)
               for p in lawson.points}
    assert schemes == {("EASY", "easy", False), ("EASY/OLS", "easy", True),
                       ("MQBF/OLS", "mqbf", True)}
    assert {p.config.trace for p in lawson.points} == {"KTH-SP2", "SDSC-SP2", "CTC-SP2",
                                                       "SDSC-BLUE"}
    ols = next(p.config.controller for p in lawson.points if p.config.controller)
    assert ols["interval_s"] == 3600 and ols["sla"] == {"metric": "mean_bsld", "max": 200.0,
                                                        "feedback": None}
    wallace = load_study(ROOT / "configs" / "study-wallace.yaml")
    assert len(wallace.points) == 24 and len({p.run_id for p in wallace.points}) == 24
    combos = {(p.config.trace, p.config.power["cap"]["fraction"], p.config.policy["name"],
               p.config.policy["order"]) for p in wallace.points}
    assert len(combos) == 24
    assert {c[1] for c in combos} == {0.417, 0.625, 0.833}
    assert {c[2] for c in combos} == {"naive-cap", "knapsack"}
    assert {c[3] for c in combos} == {"fcfs", "wfp"}


def test_list_shows_ids_and_writes_nothing(tmp_path, capsys):
    path = make_study(tmp_path)
    before = listing(tmp_path)
    assert main(["study", str(path), "--list"]) == 0
    out = capsys.readouterr().out
    assert listing(tmp_path) == before
    for p in load_study(path).points:
        assert p.run_id in out
    assert "6 runs, 0 finished" in out


# --- results ---------------------------------------------------------------------------

def test_results_csv_is_the_runs_summaries_in_grid_order(reference):
    study = load_study(reference.parent / "study.yaml", out=str(reference))
    rows = read_rows(reference / "results.csv")
    assert [r["id"] for r in rows] == [p.run_id for p in study.points]
    assert list(rows[0])[:3] == ["id", "estimates", "scheme"]
    for point, row in zip(study.points, rows):
        assert (row["estimates"], row["scheme"]) == point.labels
        summary = json.loads((reference / "runs" / point.run_id / "summary.json").read_text())
        assert summary["config"]["out"] == f"runs/{point.run_id}"
        m = summary["metrics"]
        for key in ("jobs", "mean_bsld", "p95_bsld", "max_bsld", "mean_wait_s", "max_wait_s",
                    "utilization", "utilization_active", "processor_savings"):
            assert float(row[key]) == m[key], key  # written exactly
        if point.config.controller is None:
            assert row["ticks"] == row["sla_misses"] == ""
        else:
            assert int(row["ticks"]) == summary["controller"]["ticks"] > 0
            assert int(row["sla_misses"]) == summary["controller"]["sla_misses"]
            assert float(row["processor_savings"]) > 0
        if point.config.power is None:
            assert row["energy_j"] == row["csr"] == ""
        else:
            assert float(row["energy_j"]) == summary["power"]["energy_j"] > 0
            assert float(row["csr"]) == summary["power"]["csr"]
        files = {p.name for p in (reference / "runs" / point.run_id).iterdir()}
        assert files >= {"jobs.csv", "timeseries.csv", "summary.json"}
        assert ("decisions.jsonl" in files) == (point.config.controller is not None)
        assert ("power.csv" in files) == (point.config.power is not None)
    assert not (reference / "failed.csv").exists()
    assert not (reference / ".partial").exists()


def test_the_summary_table_shows_every_run(reference):
    from rich.console import Console

    study = load_study(reference.parent / "study.yaml", out=str(reference))
    console = Console(width=100, record=True, file=open(os.devnull, "w"))
    done = {p.run_id: json.loads((reference / "runs" / p.run_id / "summary.json").read_text())
            for p in study.points}
    console.print(study_table(study, done, {}))
    text = console.export_text()
    assert text.count(" done") == 6 and "missing" not in text
    first = done[study.points[0].run_id]["metrics"]["mean_bsld"]
    assert f"{first:,.2f}" in text


def test_results_csv_ends_with_the_share_of_sla_windows_kept(tmp_path, capsys, monkeypatch):
    """The last column is each run's summary.json sla.kept_share (empty for a run stored
    before olsctl wrote it); the study table shows it as a percentage."""
    from olsctl.study import results_csv

    path = make_study(tmp_path, "base: {trace: tiny.swf}\ngrid:\n  sla:\n"
                                "    - {window_s: 3600, max: 15}\n"
                                "    - {window_s: 3600, max: 40}\n")
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["study", str(path), "--out", str(tmp_path / "out")]) == 0
    study = load_study(path, out=str(tmp_path / "out"))
    rows = read_rows(tmp_path / "out" / "results.csv")
    assert list(rows[0])[-1] == "sla_windows_kept_share"
    done = {p.run_id: json.loads((tmp_path / "out" / "runs" / p.run_id / "summary.json")
                                 .read_text()) for p in study.points}
    shares = []
    for point, row in zip(study.points, rows):
        sla = done[point.run_id]["sla"]
        assert sla["windows"] >= 10  # hourly windows over the tiny log's 16 hours
        assert float(row["sla_windows_kept_share"]) == sla["kept_share"]
        shares.append(sla["kept_share"])
    assert 0 < shares[0] < shares[1] < 1
    lines = capsys.readouterr().out.splitlines()
    head = next(x.split() for x in lines if x.split()[:1] == ["#"])
    assert head[-3:] == ["SLA", "%", "status"]
    assert any(x.strip().endswith("SLA %: share of the SLA windows kept") for x in lines)
    for point, share in zip(study.points, shares):
        cells = next(x.split() for x in lines if x.split()[:1] == [str(point.index + 1)])
        assert cells[-2:] == [f"{100 * share:.1f}", "done"]
    old = {rid: {k: v for k, v in summary.items() if k != "sla"} for rid, summary in done.items()}
    assert [line.rsplit(",", 1)[1] for line in results_csv(study, old).splitlines()[1:]] == \
        ["", ""]


def test_a_changed_grid_runs_only_what_is_missing(reference, tmp_path, capsys):
    path = make_study(tmp_path)
    out = tmp_path / "out"
    shutil.copytree(reference, out)  # start from the finished study
    old = load_study(path, out=str(out))
    inode = {p.run_id: (out / "runs" / p.run_id).stat().st_ino for p in old.points}
    # one estimate mode dropped, one scheme added
    path.write_text(STUDY.replace("[exact, user]", "[exact]")
                    + "    tight: {controller: {interval_s: 600, sla: {max: 5}}}\n")
    new = load_study(path, out=str(out))
    assert len(new.points) == 4
    assert main(["study", str(path), "--out", str(out)]) == 0
    assert "(1 computed now, 0 failed)" in capsys.readouterr().out
    rows = read_rows(out / "results.csv")
    assert [r["id"] for r in rows] == [p.run_id for p in new.points]
    assert [r["scheme"] for r in rows] == ["easy", "easy-ols", "knapsack", "tight"]
    kept = {p.run_id for p in old.points} & {p.run_id for p in new.points}
    assert len(kept) == 3
    for rid in kept:
        assert (out / "runs" / rid).stat().st_ino == inode[rid]  # not recomputed
    dropped = {p.run_id for p in old.points} - {p.run_id for p in new.points}
    assert len(dropped) == 3
    assert all((out / "runs" / rid).is_dir() for rid in dropped)  # left alone, not listed


def test_failed_runs_are_recorded_and_do_not_stop_the_study(tmp_path, capsys):
    path = make_study(tmp_path, "base: {trace: tiny.swf}\ngrid:\n  active_procs: [64, 32]\n")
    out = tmp_path / "out"
    assert main(["study", str(path), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "1 failed" in captured.out and "Traceback" not in captured.out + captured.err
    failed = read_rows(out / "failed.csv")
    assert [r["active_procs"] for r in failed] == ["64"]
    assert failed[0]["error"].startswith("ConfigError: ")
    assert "active_procs: must be <= the machine's 32 processors" in failed[0]["error"]
    assert [r["active_procs"] for r in read_rows(out / "results.csv")] == ["32"]
    good = read_rows(out / "results.csv")[0]["id"]
    inode = (out / "runs" / good).stat().st_ino
    assert main(["study", str(path), "--out", str(out), "--quiet"]) == 1  # retried, fails again
    assert (out / "runs" / good).stat().st_ino == inode
    assert sorted(p.name for p in (out / "runs").iterdir()) == [good]


def test_an_incomplete_run_directory_is_redone(reference, tmp_path):
    path = make_study(tmp_path, "base: {trace: tiny.swf}\ngrid: {estimates: [exact]}\n")
    out = tmp_path / "out"
    assert main(["study", str(path), "--out", str(out), "--quiet"]) == 0
    (run,) = (out / "runs").iterdir()
    summary = (run / "summary.json").read_bytes()
    (run / "summary.json").unlink()  # as if someone deleted it by hand
    (out / "results.csv").unlink()
    assert main(["study", str(path), "--out", str(out), "--quiet"]) == 0
    assert (run / "summary.json").read_bytes() == summary
    assert len(read_rows(out / "results.csv")) == 1


def test_one_study_per_directory_at_a_time(tmp_path, capsys):
    path = make_study(tmp_path)
    study = load_study(path, out=str(tmp_path / "out"))
    with _locked(study.out_dir):
        with pytest.raises(StudyError, match="another olsctl study is running"):
            run_study(study)
        assert main(["study", str(path), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_plain_progress_lines_off_a_terminal(tmp_path, capsys):
    path = make_study(tmp_path, "base: {trace: tiny.swf}\ngrid: {estimates: [exact, user]}\n")
    assert main(["study", str(path), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "2 runs, 0 already finished, 2 to compute" in err
    assert "[1/2] tiny-easy-" in err and "[2/2] tiny-easy-" in err and "0 failed" in err


# --- bad study files -------------------------------------------------------------------

BAD = {
    "unknown key": ("base: {trace: tiny.swf}\ngrid: {estimates: [exact]}\nworkers: 4\n",
                    "workers: unknown key"),
    "missing base": ("grid: {estimates: [exact]}\n", "base: missing"),
    "missing base file": ("base: nothere.yaml\ngrid: {estimates: [exact]}\n",
                          "base: no such config file: nothere.yaml"),
    "bad key in base": ("base: {trace: tiny.swf, polcy: {name: easy}}\n"
                        "grid: {estimates: [exact]}\n", "base: polcy: unknown key"),
    "empty grid": ("base: {trace: tiny.swf}\ngrid: {}\n", "grid: must be a non-empty mapping"),
    "no grid": ("base: {trace: tiny.swf}\n", "grid: must be a non-empty mapping"),
    "bad grid value": ("base: {trace: tiny.swf}\ngrid: {policy.order: [fcfs, lifo]}\n",
                       "grid point 2 (policy.order=lifo): policy.order: must be one of"),
    "unknown policy": ("base: {trace: tiny.swf}\ngrid: {policy.name: [easy, fifo]}\n",
                       "policy.name: must be one of"),
    "bad dotted key": ("base: {trace: tiny.swf}\ngrid: {polcy.name: [easy]}\n",
                       "grid.polcy.name: 'polcy' is not a run config key"),
    "dotted into a scalar": ("base: {trace: tiny.swf}\ngrid: {trace.name: [x]}\n",
                             "grid.trace.name: trace has no keys inside it"),
    "unknown key in a section": ("base: {trace: tiny.swf}\n"
                                 "grid: {controller.intervals: [60]}\n",
                                 "controller.intervals: unknown key"),
    "not a list": ("base: {trace: tiny.swf}\ngrid: {estimates: exact}\n",
                   "grid.estimates: must be a non-empty list of values"),
    "empty list": ("base: {trace: tiny.swf}\ngrid: {estimates: []}\n",
                   "grid.estimates: must be a non-empty list of values (got an empty list)"),
    "bad named axis": ("base: {trace: tiny.swf}\ngrid: {scheme: {a: easy}}\n",
                       "grid.scheme.a: must be a mapping of config keys to values"),
    "missing log": ("base: {trace: tiny.swf}\ngrid: {trace: [tiny.swf, gone.swf]}\n",
                    "grid point 2 (trace=gone.swf): trace: gone.swf: no such file"),
    "power policy without power": ("base: {trace: tiny.swf}\n"
                                   "grid: {policy.name: [easy, knapsack]}\n",
                                   "policy.name: knapsack needs power"),
    "same run twice": ("base: {trace: tiny.swf}\ngrid:\n  policy.order: [fcfs]\n"
                       "  s: {a: {estimates: exact}, b: {}}\n",
                       "the same run as grid point 1"),
    "varying out": ("base: {trace: tiny.swf}\ngrid: {out: [a, b]}\n",
                    "grid.out: the study gives every run its own directory"),
    "bad n_jobs": ("base: {trace: tiny.swf}\ngrid: {estimates: [exact]}\nn_jobs: 0\n",
                   "n_jobs: must be an integer >= 1 or -1"),
    "bad backend": ("base: {trace: tiny.swf}\ngrid: {estimates: [exact]}\nbackend: ray\n",
                    "backend: must be one of loky, dask"),
    "dask without scheduler": ("base: {trace: tiny.swf}\ngrid: {estimates: [exact]}\n"
                               "backend: dask\n", "scheduler: backend dask needs"),
    "column name taken": ("base: {trace: tiny.swf}\ngrid: {mean_bsld: {a: {}}}\n",
                          "grid.mean_bsld: the name of a results.csv column"),
    "not yaml": ("base: [\n", "study.yaml:2:"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_study_files_exit_2_with_one_line_and_write_nothing(case, tmp_path, capsys,
                                                                monkeypatch):
    text, expected = BAD[case]
    path = make_study(tmp_path, text)
    monkeypatch.chdir(tmp_path)
    before = listing(tmp_path)
    assert main(["study", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.err.startswith(("ConfigError: ", "TraceError: "))
    assert str(path) in captured.err and expected in captured.err, captured.err
    assert listing(tmp_path) == before


def test_bad_n_jobs_on_the_command_line(tmp_path, capsys):
    path = make_study(tmp_path)
    assert main(["study", str(path), "--n-jobs", "-3"]) == 2
    assert "--n-jobs: must be >= 1 or -1" in capsys.readouterr().err


def test_unreachable_scheduler_fails_cleanly(tmp_path, capsys, monkeypatch):
    """Said first, and refused at once: Dask alone retries a refused connection until
    its connect timeout (set to 20 s here) before it gives up."""
    pytest.importorskip("distributed")
    import socket

    import dask
    import dask.distributed  # its config defaults must be there before they are overridden

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = make_study(tmp_path, STUDY + f"backend: dask\nscheduler: tcp://127.0.0.1:{port}\n")
    monkeypatch.chdir(tmp_path)
    before = listing(tmp_path)
    t0 = time.monotonic()
    with dask.config.set({"distributed.comm.timeouts.connect": "20s"}):
        assert main(["study", str(path)]) == 2
    assert time.monotonic() - t0 < 5
    said, err = capsys.readouterr().err.splitlines()
    assert said == f"connecting to the dask scheduler at tcp://127.0.0.1:{port}"
    assert err.startswith(f"StudyError: {path}: scheduler: cannot connect to "
                          f"tcp://127.0.0.1:{port}: ")
    assert "refused" in err
    assert listing(tmp_path) == before


# --- interrupted, and elsewhere --------------------------------------------------------

def test_resume_after_sigkill_gives_the_uninterrupted_results(reference, tmp_path):
    path = make_study(tmp_path)
    out = tmp_path / "out"
    runs = out / "runs"
    cmd = [sys.executable, "-c", "from olsctl.cli import entry_point; entry_point()",
           "study", str(path), "--out", str(out), "--n-jobs", "1", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if runs.is_dir() and any(runs.iterdir()):
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    assert proc.wait(timeout=30) == -signal.SIGKILL, proc.stderr.read().decode()
    study = load_study(path, out=str(out))
    finished = sorted(p.name for p in runs.iterdir())
    assert 1 <= len(finished) < len(study.points)
    for name in finished:  # whatever is in runs/ is a whole run
        assert {"jobs.csv", "timeseries.csv", "summary.json"} <= {
            f.name for f in (runs / name).iterdir()}
    listed = [r["id"] for r in read_rows(out / "results.csv")]  # maybe one behind
    assert listed == [p.run_id for p in study.points if p.run_id in listed]
    assert set(listed) <= set(finished)
    inode = {name: (runs / name).stat().st_ino for name in finished}

    restart = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert restart.returncode == 0, restart.stderr
    assert sorted(p.name for p in runs.iterdir()) == sorted(p.run_id for p in study.points)
    assert {name: (runs / name).stat().st_ino for name in finished} == inode  # kept, not redone
    assert (out / "results.csv").read_bytes() == (reference / "results.csv").read_bytes()
    assert not (out / ".partial").exists()
    same_tree(out, reference)


def test_a_dask_cluster_gives_the_same_bytes_as_loky(reference, tmp_path):
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        assert len(cluster.workers) == 2
        path = make_study(tmp_path, STUDY + f"backend: dask\nscheduler: "
                                            f"{cluster.scheduler_address}\n")
        assert main(["study", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert (tmp_path / "out" / "results.csv").read_bytes() == \
        (reference / "results.csv").read_bytes()
    same_tree(tmp_path / "out", reference)


def _is_plain(value) -> bool:
    """Whether ``value`` is made of JSON's types only (str-keyed dicts, lists, str, int,
    float, bool, None; no tuples, paths or numpy numbers)."""
    if isinstance(value, dict):
        return all(type(k) is str and _is_plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_is_plain(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


def test_study_type_is_plain_data():
    """A Study and its points pickle (they go to worker processes and cluster nodes) and
    come back equal: the 24 points (2 logs x 3 caps x 2 policies x 2 orders) in grid
    order, each with its index, labels, id and config. A config's settings are plain
    data, so a point's id is computed again from the config that came back."""
    import pickle

    from olsctl.study.grid import GridPoint, run_id

    study = load_study(ROOT / "configs" / "study-wallace.yaml")
    back = pickle.loads(pickle.dumps(study))
    assert type(back) is Study and back == study
    assert (back.n_jobs, back.backend, back.scheduler) == (-1, "loky", None)
    assert isinstance(back.out_dir, Path) and back.out_dir == Path("studies/wallace")
    assert back.columns == ("trace", "power.cap.fraction", "capping", "policy.order")
    assert type(back.points) is tuple and len(back.points) == 24
    for i, (p, q) in enumerate(zip(study.points, back.points)):
        assert type(q) is GridPoint and q.index == i
        assert type(q.labels) is tuple and all(type(label) is str for label in q.labels)
        assert len(q.labels) == len(back.columns)
        data = q.config.as_dict()
        assert _is_plain(data), data
        assert q.run_id == p.run_id == run_id(q.config)
        assert canonical(q.config) == canonical(p.config)
        assert data["out"] == f"runs/{q.run_id}"
    assert back.points[0].labels == ("SDSC-SP2", "0.417", "naive", "fcfs")
    assert back.points[-1].labels == ("CTC-SP2", "0.833", "knapsack", "wfp")


def test_progress_bar_on_a_terminal(tmp_path):
    import io

    from rich.console import Console

    from olsctl.study import RichStudyProgress, study_progress

    path = make_study(tmp_path, "base: {trace: tiny.swf}\ngrid:\n  active_procs: [64, 32]\n")
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    progress = study_progress(console)
    assert isinstance(progress, RichStudyProgress)
    result = run_study(load_study(path, out=str(tmp_path / "out")), progress)
    assert len(result.done) == len(result.failed) == 1
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())  # colours off
    assert "0/2 runs, 0 failed," in text and "2/2 runs, 1 failed," in text and " left" in text


def test_a_recycled_worker_is_not_reported_as_a_failure(recwarn):
    """loky replaces a worker whose memory grew past its limit with a warning that reads
    like a failure; a study does not show it, and shows every other warning."""
    quiet_recycled_workers()
    warnings.warn("A worker stopped while some jobs were given to the executor. This can be "
                  "caused by a too short worker timeout or by a memory leak.", UserWarning)
    warnings.warn("something else", UserWarning)
    assert [str(w.message) for w in recwarn] == ["something else"]
