"""Edges of the command line a new user meets: output folders that cannot be written,
duplicate keys in a YAML file, a controller backend that one worker leaves unused, and
the wording of counts, hints and help.

Every run replays the tiny log of :func:`conftest.write_burst_trace` (36 jobs, a fraction
of a second).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import write_burst_trace

from olsctl.cli import main

NREL_CSV = ("submit,start,end,nodes,runtime_s,wait_time,avg_power_per_node\n"
            "2024-08-30 10:00:10,2024-08-30 10:01:00,2024-08-30 10:11:00,2,600,50,400.5\n")


@pytest.fixture
def tiny(tmp_path, monkeypatch) -> Path:
    """The working directory, holding ``tiny.swf``, a study file ``study.yaml`` and a
    tune file ``tune.yaml`` of one run each, and an NREL log ``gt.csv``."""
    monkeypatch.chdir(tmp_path)
    write_burst_trace(tmp_path / "tiny.swf")
    grid = "base: {trace: tiny.swf, policy: {name: easy}}\ngrid: {estimates: [exact]}\n"
    (tmp_path / "study.yaml").write_text(grid)
    (tmp_path / "tune.yaml").write_text(grid + "sla: {metric: mean_bsld, max: 1000}\n")
    (tmp_path / "gt.csv").write_text(NREL_CSV)
    return tmp_path


def one_line(capsys) -> str:
    """The one line of stderr (no traceback)."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


# --- output folders that cannot be written ----------------------------------------------

def blocked_folder(tmp_path: Path, how: str) -> Path:
    """A folder olsctl cannot write into: one to be made under a regular file, or an
    existing read-only one (the test is skipped where chmod does not stop this user)."""
    if how == "under a file":
        (tmp_path / "afile").write_text("not a folder\n")
        return tmp_path / "afile" / "out"
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    if os.access(folder, os.W_OK):
        pytest.skip("this user writes into a read-only folder (root)")
    return folder


def command(name: str, tiny: Path, out: Path) -> list[str]:
    """The arguments of command ``name`` writing into the folder ``out``."""
    if name == "run":
        return ["run", "--trace", "tiny.swf", "--out", str(out), "--quiet"]
    if name in ("study", "tune"):
        return [name, f"{name}.yaml", "--out", str(out), "--quiet"]
    if name == "report":
        pytest.importorskip("matplotlib")  # without it, report draws and writes nothing
        assert main(["run", "--trace", "tiny.swf", "--out", "done", "--quiet"]) == 0
        return ["report", "done", "--out", str(out)]
    return ["convert", "nrel", "gt.csv", "--swf", str(out / "n.swf"), "--power", "n.csv"]


@pytest.mark.parametrize("how", ["under a file", "read-only"])
@pytest.mark.parametrize("name", ["run", "study", "tune", "report", "convert"])
def test_an_output_folder_that_cannot_be_written_is_one_line(tiny, capsys, name, how):
    out = blocked_folder(tiny, how)
    assert main(command(name, tiny, out)) == 2
    err = one_line(capsys)
    assert err.startswith("ConfigError: ") and str(out) in err, err
    assert not (tiny / "n.csv").exists()  # convert writes both files or neither


def test_a_tune_winner_that_cannot_be_written_is_one_line(tiny, capsys):
    (tiny / "afile").write_text("not a folder\n")
    with open(tiny / "tune.yaml", "a") as fh:
        fh.write("write: afile/tuned.yaml\n")
    assert main(["tune", "tune.yaml", "--out", "t", "--quiet"]) == 2
    assert one_line(capsys) == ("ConfigError: tune.yaml: write: cannot write afile/tuned.yaml: "
                                "afile is a file")


# --- duplicate keys in YAML files -------------------------------------------------------

@pytest.mark.parametrize("text,line,key,first", [
    ("trace: tiny.swf\ncontroller:\n  interval_s: 600\n  sla: {max: 20}\n  interval_s: 3600\n",
     5, "controller.interval_s", 3),
    ("trace: tiny.swf\nestimates: user\nestimates: exact\n", 3, "estimates", 2),
    ("trace: tiny.swf\npolicy: {name: easy, order: fcfs, order: sjf}\n", 2, "policy.order", 2),
])
def test_a_duplicate_key_in_a_run_config_is_refused(tiny, capsys, text, line, key, first):
    (tiny / "dup.yaml").write_text(text)
    assert main(["run", "dup.yaml", "--quiet"]) == 2
    assert one_line(capsys) == (f"ConfigError: dup.yaml:{line}: {key}: duplicate key (first "
                                f"on line {first}; YAML would keep only the last)")
    assert not (tiny / "olsctl-out").exists()


def test_a_duplicate_label_in_a_study_grid_is_refused(tiny, capsys):
    (tiny / "dup.yaml").write_text("base: {trace: tiny.swf}\ngrid:\n  scheme:\n"
                                   "    A: {controller: null}\n"
                                   "    A: {controller: {interval_s: 600}}\n")
    assert main(["study", "dup.yaml", "--list"]) == 2
    assert one_line(capsys) == ("ConfigError: dup.yaml:5: grid.scheme.A: duplicate key (first "
                                "on line 4; YAML would keep only the last)")


def test_a_key_repeated_through_an_alias_or_in_other_mappings_is_no_duplicate(tiny, capsys):
    (tiny / "ok.yaml").write_text("trace: tiny.swf\nout: o\npolicy: &p {name: easy}\n"
                                  "sla: {max: 20, window_s: 604800}\n"
                                  "controller: {interval_s: 600, sla: {max: 20}}\n")
    assert main(["run", "ok.yaml", "--quiet"]) == 0
    (tiny / "loop.yaml").write_text("trace: &t [*t]\n")  # a list that holds itself
    assert main(["run", "loop.yaml", "--quiet"]) == 2
    assert "trace: must be" in one_line(capsys)


# --- a controller backend that one worker leaves unused --------------------------------

@pytest.mark.parametrize("installed", [True, False])
@pytest.mark.parametrize("backend", ["loky", "dask"])
def test_a_backend_with_one_worker_is_refused(tiny, capsys, monkeypatch, backend, installed):
    if not installed:
        monkeypatch.setitem(__import__("sys").modules, "distributed", None)
    args = ["run", "--trace", "tiny.swf", "--quiet", "--set", "controller.interval_s=600",
            "--set", f"controller.backend={backend}"]
    assert main(args) == 2
    assert one_line(capsys) == (f"ConfigError: command line: controller.backend: {backend} is "
                                f"not used with n_jobs 1 (every what-if runs in this process): "
                                f"set controller.n_jobs to 2 or more (or -1), or leave backend "
                                f"out")
    if backend == "loky" and installed:  # with two workers it runs
        assert main(args + ["--set", "controller.n_jobs=2"]) == 0


# --- counts, hints and help ---------------------------------------------------------------

def test_counts_of_one_are_singular(tiny, capsys):
    assert main(["convert", "nrel", "gt.csv", "--swf", "n.swf", "--power", "n.csv"]) == 0
    assert capsys.readouterr().out.strip() == ("wrote n.swf (1 job, 2 processors) and n.csv "
                                               "(1 measured power)")
    assert main(["study", "study.yaml", "--list"]) == 0
    assert capsys.readouterr().out.strip().endswith("\n1 run, 0 finished in study")
    assert main(["study", "study.yaml"]) == 0
    assert "study study.yaml: 1 run, 0 already finished" in capsys.readouterr().err


def test_a_tune_rerun_says_its_settings_came_from_the_earlier_run(tiny, capsys):
    assert main(["tune", "tune.yaml"]) == 0
    first = capsys.readouterr().out.strip().splitlines()[-1]
    assert "(1 setting run; 0 infeasible; in " in first, first
    assert main(["tune", "tune.yaml"]) == 0
    again = capsys.readouterr().out.strip().splitlines()[-1]
    assert "(1 setting: 0 run now, 1 taken from the earlier run; 0 infeasible; in " in again


@pytest.mark.parametrize("setting,expected", [
    ("estimates=", "estimates: is empty (must be one of exact, user)"),
    ("controller.interval_s=", "controller.interval_s: is empty (must be a number)"),
    ("estimates=3", "estimates: must be one of exact, user (got 3)"),
    ("policy.order=3", "policy.order: must be one of fcfs, saf, sjf, wfp (got 3)"),
    ("power.limit=yes", "power.limit: must be one of none, throttle (got True)"),
])
def test_an_empty_or_mistyped_setting_says_what_it_may_be(tiny, capsys, setting, expected):
    assert main(["run", "--trace", "tiny.swf", "--quiet", "--set", setting]) == 2
    assert one_line(capsys) == f"ConfigError: command line: {expected}"


def test_an_unknown_option_shows_the_usage_of_its_command(capsys):
    with pytest.raises(SystemExit) as end:
        main(["run", "--bogus"])
    assert end.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: olsctl run ") and \
        err.strip().endswith("olsctl run: error: unrecognized arguments: --bogus"), err
    with pytest.raises(SystemExit):
        main(["trace", "info", "KTH-SP2", "--bogus"])
    assert capsys.readouterr().err.startswith("usage: olsctl trace info ")


def help_of(capsys, args: list[str]) -> str:
    with pytest.raises(SystemExit) as end:
        main([*args, "--help"])
    assert end.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_help_says_trace_info_reads_sacct_dumps_and_what_bench_estimates_are(
        tiny, capsys, repo_root):
    assert "Slurm sacct dump" in help_of(capsys, ["trace", "info"])
    assert main(["trace", "info", str(repo_root / "tests/data/slurm/sample.sacct"),
                 "--json"]) == 0  # as the help says
    capsys.readouterr()
    text = help_of(capsys, ["bench"])
    assert "--estimates {exact,user} runtime estimates the policies see" in text


def test_study_shows_savings_and_csr_as_percentages_as_report_does(tiny, capsys):
    (tiny / "power.yaml").write_text(
        "base: {trace: tiny.swf, power: {cap: {fraction: 0.6}},\n"
        "       controller: {interval_s: 3600, sla: {max: 20}}}\n"
        "grid: {estimates: [exact]}\n")
    assert main(["study", "power.yaml", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["study", "power.yaml"]) == 0  # nothing left to run: the table
    study_row = capsys.readouterr().out.splitlines()
    assert main(["report", "power", "--out", "plots"]) == 0
    report_row = capsys.readouterr().out.splitlines()
    row = next(line for line in report_row if line.lstrip().startswith("tiny"))
    savings, csr, _kept = [cell for cell in row.split() if cell.endswith("%")]  # report's
    row = next(line for line in study_row if line.lstrip().startswith("1 "))
    assert f" {savings} " in row and f" {csr} " in row, row


@pytest.mark.parametrize("flag", ["--live", "--feed"])
def test_the_wrote_line_of_a_run_with_a_feed_names_it(tiny, capsys, flag):
    assert main(["run", "--trace", "tiny.swf", "--out", "x", flag]) == 0
    wrote = next(line for line in capsys.readouterr().out.splitlines()
                 if line.startswith("wrote "))
    assert wrote.startswith("wrote jobs.csv, timeseries.csv, summary.json, live.jsonl to x ")
    assert (tiny / "x" / "live.jsonl").is_file()
