"""Rough edges a new user meets: a reused output directory, a killed study's workers,
tracebacks instead of one-line errors, console tables, settings that were dropped or
changed without a word, tune's infeasible settings, and a study legend cut off.

The runs replay small SWF logs written by the tests (a fraction of a second each), except
the killed study, which needs runs long enough to be killed while they go.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from test_report import write_swf as busy_log

from olsctl.cli import main
from olsctl.config import build_config, with_settings
from olsctl.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def write_swf(path: Path, jobs: int = 120, procs: int = 32, seed: int = 3) -> Path:
    """tests/test_report.py's busy little log over two calendar weeks, 120 jobs."""
    return busy_log(path, jobs, procs, seed)


def render(renderable, width: int = 160) -> str:
    console = Console(width=width, record=True, color_system=None, file=open(os.devnull, "w"))
    console.print(renderable)
    return console.export_text()


# --- 1. a reused output directory ------------------------------------------------------

POWER_OLS = """\
trace: tiny.swf
policy: {name: easy}
power: {cap: {fraction: 0.6}}
controller: {interval_s: 600, sla: {max: 20}}
"""


def test_a_run_removes_the_stale_run_files_of_an_earlier_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_swf(tmp_path / "tiny.swf")
    (tmp_path / "ols.yaml").write_text(POWER_OLS)
    out = tmp_path / "X"
    assert main(["run", "ols.yaml", "--out", "X", "--feed", "--quiet"]) == 0
    first = {p.name for p in out.iterdir()}
    assert {"power.csv", "decisions.jsonl", "live.jsonl"} <= first
    (out / "notes.txt").write_text("mine")  # not olsctl's: never touched
    (out / "report").mkdir()
    (out / "report" / "power.png").write_bytes(b"old plot")

    assert main(["run", "--trace", "tiny.swf", "--out", "X", "--quiet"]) == 0
    files = {p.name for p in out.iterdir()}
    assert files == {"jobs.csv", "timeseries.csv", "summary.json", "notes.txt", "report"}
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "report" / "power.png").read_bytes() == b"old plot"
    capsys.readouterr()
    # the report is this run's: no power table, no power plot from the earlier run
    assert main(["report", "X", "--out", "X/new-report"]) == 0
    text = capsys.readouterr().out
    assert "energy" not in text and "capping success rate" not in text
    if (out / "new-report").is_dir():
        assert "power.png" not in {p.name for p in (out / "new-report").iterdir()}
    # and monitor has no feed to replay
    assert main(["monitor", "X"]) == 2
    assert "no live.jsonl" in capsys.readouterr().err

    # a run that writes a feed keeps its own
    assert main(["run", "ols.yaml", "--out", "X", "--feed", "--quiet"]) == 0
    assert {"power.csv", "decisions.jsonl", "live.jsonl"} <= {p.name for p in out.iterdir()}
    head = json.loads((out / "live.jsonl").read_text().splitlines()[0])
    assert head["kind"] == "start" and head["power"] is True


# --- 2. a killed study takes its workers with it ---------------------------------------

def _children(pid: int) -> set[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    kids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == pid:
            kids.add(int(entry.name))
    return kids


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] not in ("Z", "X")


KILLED_STUDY = """\
base: {policy: {name: easy}, estimates: user}
grid:
  trace: [KTH-SP2, SDSC-SP2, CTC-SP2, SDSC-BLUE]
  scheme:
    A: {controller: {interval_s: 600, sla: {max: 20}}}
    B: {controller: {interval_s: 900, sla: {max: 20}}}
n_jobs: 2
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_killing_a_study_kills_its_worker_processes(tmp_path):
    (tmp_path / "study.yaml").write_text(KILLED_STUDY)
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", "from olsctl.cli import entry_point; entry_point()",
           "study", str(tmp_path / "study.yaml"), "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        partial = out / ".partial"
        # both workers are in the middle of a run (each has its run directory)
        while time.monotonic() < deadline and proc.poll() is None:
            if partial.is_dir() and len(list(partial.iterdir())) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()
        workers = {p for p in _children(proc.pid) if _alive(p)}
        assert len(workers) >= 2
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in workers):
            time.sleep(0.1)
        left = sorted(p for p in workers if _alive(p))
        assert not left, f"worker processes {left} outlived the study"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in workers:  # never leave a stray process behind
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


# --- 3. one-line errors, exit code 2 ---------------------------------------------------

def test_run_into_an_existing_file_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_swf(tmp_path / "tiny.swf")
    (tmp_path / "afile").write_text("not a directory")
    # checked before the run: the message says what is in the way
    for out, why in (("afile", "afile exists and is not a directory"),
                     ("afile/sub", "afile/sub cannot be made: afile is a file")):
        assert main(["run", "--trace", "tiny.swf", "--out", out, "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err == f"ConfigError: command line: out: {why}\n", err
    # with no config and no --trace too (the built-in defaults): still the command line
    assert main(["run", "--out", "afile", "--quiet"]) == 2
    assert capsys.readouterr().err == ("ConfigError: command line: out: afile exists and is "
                                       "not a directory\n")
    assert (tmp_path / "afile").read_text() == "not a directory"


START = {"kind": "start", "title": "t", "start_s": 0.0, "span_s": 100.0, "jobs": 3,
         "total_procs": 4, "sample_s": 10.0, "pace": None, "power": False, "sla": None}
SAMPLE = {"kind": "sample", "time_s": 10.0, "wall_s": 0.1, "busy_procs": 2, "active_procs": 4,
          "total_procs": 4, "queue_len": 1, "running": 1, "done": 1, "mean_bsld": 1.5,
          "utilization": 0.5, "power_w": None, "cap_w": None, "decision": None}
DECISION = {"n": 1, "time_s": 5.0, "chosen": {"active_procs": 4}, "reason": "r",
            "sla_met": True, "trials": [{"active_procs": 4, "metric": 1.0, "cost": 4.0}],
            "recent": []}


def _without(record: dict, key: str) -> dict:
    return {k: v for k, v in record.items() if k != key}


@pytest.mark.parametrize("lines, where", [
    ([_without(START, "start_s"), SAMPLE], ":1: start record: start_s: missing"),
    ([START, _without(SAMPLE, "time_s")], ":2: sample record: time_s: missing"),
    ([START, SAMPLE, {**SAMPLE, "done": "many"}], ":3: sample record: done: "),
    ([START, {**SAMPLE, "decision": _without(DECISION, "chosen")}],
     ":2: sample record: decision.chosen: missing"),
    ([START, {**SAMPLE, "decision": {**DECISION, "chosen": {}}}],
     ":2: sample record: decision.chosen.active_procs: missing"),
    ([START, {**SAMPLE, "decision": {**DECISION, "trials": [{"metric": 1}]}}],
     ":2: sample record: decision.trials[0].active_procs: missing"),
])
def test_monitor_on_a_feed_lacking_fields_is_a_one_line_error(tmp_path, capsys, lines, where):
    run = tmp_path / "run"
    run.mkdir()
    text = "\n".join(json.dumps(r) for r in lines + [{"kind": "end", "status": "finished"}])
    (run / "live.jsonl").write_text(text + "\n")
    assert main(["monitor", str(run), "--speed", "1000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"FeedError: {run / 'live.jsonl'}{where}"), err


def test_monitor_still_shows_a_whole_feed(tmp_path, capsys):
    """A feed with every field shows: off a terminal, a plain line for the first sample
    and one for the last (with the tick's choice); on a terminal, the dashboard of the
    last sample and the tick's candidates. Every figure is the feed's: 1 of 3 jobs
    done, 2 busy of 4 active of 4, 1 queued, mean bsld 1.5, utilization 0.5, and the
    tick at 5 s that chose 4 processors (SLA met, reason "r") from one trial (4
    processors, predicted 1.0, cost 4)."""
    from olsctl.live import monitor, view_for

    run = tmp_path / "run"
    run.mkdir()
    lines = [START, SAMPLE, {**SAMPLE, "time_s": 20.0, "decision": DECISION},
             {"kind": "end", "status": "finished"}]
    (run / "live.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    assert main(["monitor", str(run), "--speed", "1000"]) == 0
    out, err = capsys.readouterr()
    figures = "done 1/3  busy 2/4/4  queue 1  mean bsld 1.50  util 50.0%"
    assert out.splitlines() == [f"t: t+00:00:10  {figures}",
                                f"t: t+00:00:20  {figures}  chose 4 procs"]
    assert err == ""
    console = Console(width=100, height=30, force_terminal=True, color_system=None,
                      record=True, file=open(os.devnull, "w"))
    assert monitor(run, view_for(console), False, 1000.0) == lines[-1]
    frame = console.export_text().split("╭─ t ─")[-1]  # the last frame drawn
    shown = [" ".join(line.strip("│╭╮╰╯─ ").split()) for line in frame.splitlines()]
    for want in ("time t+00:00:20 of >=00:01:40 wall 00:00:00",
                 "jobs ████████░░░░░░░░░░░░░░░░ 1/3 done (33.3%)",
                 "procs ████████████▒▒▒▒▒▒▒▒▒▒▒▒ busy 2 active 4 of 4 queue 1",
                 "so far mean bsld 1.50 utilization 50.0%",
                 "t+00:00:05: 4 procs, SLA met: r",
                 "procs pred. mean_bsld cost", "4 1.00 4.00"):
        assert want in shown, (want, shown)


# --- 4. console tables in words ----------------------------------------------------------

REPR = re.compile(r"None|True|False|\{'|\['|=")


@pytest.mark.parametrize("policy, words", [
    ({"name": "mqbf"}, ["queues", "4", "boundaries_s", "100, 1000, 10000 s", "shares", "even",
                        "borrow", "yes", "order", "fcfs"]),
    ({"name": "knapsack", "predictor": {"name": "history", "window": 10, "alpha": 1.0}},
     ["predictor", "history (window 10, alpha 1)", "force", "reserve", "order", "wfp"]),
    ({"name": "rmap-adaptive", "threshold": 0.2}, ["cap_levels", "0.45, 0.5,", "threshold",
                                                   "0.2"]),
])
def test_the_summary_table_shows_policy_settings_in_words(policy, words):
    from olsctl.terminal import policy_rows

    rows = policy_rows(build_config({"policy": policy}).policy)
    text = "\n".join(f"{label} {value}" for label, value in rows)
    assert not REPR.search(text), text
    for word in words:
        assert word in text, (word, text)
    assert rows[0] == ("policy", policy["name"])


def _power_summary(**power) -> dict:
    """A summary.json as a power run writes it (only what the table reads)."""
    base = {"energy_j": 3.6e9, "job_energy_j": 3e9, "mean_power_w": 5e4, "peak_power_w": 9e4,
            "csr": 0.982, "forced_starts": 3, "cap": None, "limit": "none",
            "scheduler_csr": 0.982, "synthetic_profiles": 10, "profiles": "synthetic"}
    return {**base, **power}


def _table_text(**sections) -> str:
    from olsctl.terminal import run_summary_table

    summary = {"trace": "t.swf", "config": build_config({}).as_dict(), "active_procs_at_start": 4,
               "load": {"kept": 3, "records": 3, "dropped": {}},
               "metrics": {"processors": 4, "mean_bsld": 1.0, "p95_bsld": 1.0, "max_bsld": 1.0,
                           "mean_wait_s": 0.0, "max_wait_s": 0.0, "mean_turnaround_s": 1.0,
                           "utilization": 0.5, "utilization_active": 0.5,
                           "processor_savings": -1e-17, "makespan_s": 86400.0},
               **sections}
    return render(run_summary_table(summary))


def test_the_summary_table_of_a_power_run_shows_energy_csr_and_forced_starts():
    capped = _table_text(power=_power_summary(cap={"fraction": 0.625}, mean_cap_w=7e4))
    for cell in ("energy", "1.00 MWh", "capping success rate", "98.2%", "forced starts",
                 "power cap", "62.5% of peak"):
        assert cell in capped, cell
    uncapped = _table_text(power=_power_summary())
    for cell in ("energy", "capping success rate", "no cap", "forced starts"):
        assert cell in uncapped, cell
    assert "-0.0%" not in uncapped  # a savings of -1e-17 reads 0.0%


def test_the_summary_table_of_rmap_and_parm_shows_the_budget():
    budget = {"bound_w": 23000.0, "jobs_budget_w": 23000.0, "peak_job_power_w": 22000.0,
              "csr": 1.0, "forced_starts": 2, "moldable_jobs": 9510, "jobs_resized": 1196,
              "mean_nodes_over_request": 0.997, "mean_node_cap_w": 115.25}
    text = _table_text(budget=budget)
    for cell in ("power bound", "23.0 kW", "peak power held by jobs", "22.0 kW",
                 "budget success rate", "100.0%", "forced starts", "jobs resized",
                 "1,196 of 9,510 moldable", "mean node cap", "115.2 W"):
        assert cell in text, cell
    parm = _table_text(budget={**budget, "exact_windows": 25104, "greedy_windows": 245,
                               "largest_greedy_window": 10})
    assert "knapsack windows" in parm and "25,104 exact, 245 greedy" in parm


def test_strict_says_what_it_checked_on_every_kind_of_run():
    from olsctl.commands.run import _strict_text

    base = {"strict_checks": 1234}
    plain = _strict_text(base)
    assert plain.startswith("strict: 1,234 starts checked")
    capped = _strict_text({**base, "power": _power_summary(cap={"fraction": 0.6})})
    assert "cap" in capped and "not enforced" in capped and "98.2%" in capped
    held = _strict_text({**base, "power": _power_summary(cap={"fraction": 0.6},
                                                         limit="throttle")})
    assert "the limit held" in held
    ols = _strict_text({**base, "controller": {"ticks": 10, "changes": 3}})
    assert "controller" in ols and "3 changes" in ols
    budget = _strict_text({**base, "budget": {"csr": 1.0, "forced_starts": 0}})
    assert "budget" in budget


def test_olsctl_run_prints_the_power_and_budget_figures_and_what_strict_checked(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")
    write_swf(tmp_path / "tiny.swf")
    (tmp_path / "ols.yaml").write_text(POWER_OLS)
    assert main(["run", "ols.yaml", "--out", "p", "--strict"]) == 0
    text = capsys.readouterr().out
    for cell in ("energy", "power cap", "60.0% of peak", "capping success rate",
                 "forced starts", "strict: ", "under the settings the controller applied",
                 "the power cap not checked"):
        assert cell in text, cell
    assert not re.search(r"\w=\w|None|\{'", text), text
    assert main(["run", "--trace", "tiny.swf", "--procs", "64", "--policy", "rmap-adaptive",
                 "--set", "policy.bound=0.5", "--out", "r", "--strict"]) == 0
    text = capsys.readouterr().out
    for cell in ("power bound (jobs' budget)", "budget success rate", "jobs resized",
                 "the power budget is the policy's own"):
        assert cell in text, cell


# --- 5. settings dropped or changed without a word -----------------------------------

def test_set_policy_name_and_order_in_any_order():
    base = build_config({})
    for sets in (["policy.order=sjf", "policy.name=mqbf"],
                 ["policy.name=mqbf", "policy.order=sjf"]):
        cfg = with_settings(base, sets)
        assert (cfg.policy["name"], cfg.policy["order"]) == ("mqbf", "sjf"), sets
    cfg = with_settings(base, ["policy.queues=2", "policy.name=mqbf", "policy.order=wfp"])
    assert (cfg.policy["queues"], cfg.policy["order"]) == (2, "wfp")


def test_empty_candidates_are_refused():
    with pytest.raises(ConfigError, match=r"x.yaml: controller.candidates: "):
        build_config({"controller": {"candidates": {}}}, source="x.yaml")


def test_candidate_processors_above_the_machine_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_swf(tmp_path / "tiny.swf")
    (tmp_path / "c.yaml").write_text(
        "trace: tiny.swf\ncontroller: {candidates: {active_procs: {procs: [8, 16, 64]}}}\n")
    assert main(["run", "c.yaml", "--quiet", "--out", "o"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("ConfigError: c.yaml: controller.candidates.active_procs.procs: "
                          "64 is above the machine's 32 processors"), err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("k, bounds", [
    (1, []), (2, [1000]), (3, [100, 10000]), (4, [100, 1000, 10000]),
    (5, [100, 464, 2154, 10000]),
])
def test_mqbf_default_boundaries_fit_the_number_of_queues(k, bounds):
    cfg = build_config({"policy": {"name": "mqbf", "queues": k}})
    assert cfg.policy["boundaries_s"] == bounds
    assert all(type(b) is int for b in cfg.policy["boundaries_s"])


def test_mqbf_default_boundaries_for_four_queues_keep_run_ids():
    from olsctl.study import canonical

    given = build_config({"policy": {"name": "mqbf", "queues": 4,
                                     "boundaries_s": [100, 1000, 10000]}})
    default = build_config({"policy": {"name": "mqbf"}})
    assert canonical(given) == canonical(default)


def test_mqbf_with_two_queues_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_swf(tmp_path / "tiny.swf")
    assert main(["run", "--trace", "tiny.swf", "--set", "policy.name=mqbf", "--set",
                 "policy.queues=2", "--quiet", "--out", "o"]) == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["config"]["policy"]["boundaries_s"] == [1000]
    # --policy is policy.name: the queues set beside it keep their value
    assert main(["run", "--trace", "tiny.swf", "--set", "policy.queues=3", "--policy", "mqbf",
                 "--set", "policy.order=sjf", "--quiet", "--out", "o"]) == 0
    policy = json.loads((tmp_path / "o" / "summary.json").read_text())["config"]["policy"]
    assert (policy["queues"], policy["boundaries_s"], policy["order"]) == (3, [100, 10000], "sjf")


# --- 6. tune: infeasible settings ----------------------------------------------------

def _tune_file(tmp_path: Path) -> Path:
    write_swf(tmp_path / "tiny.swf", procs=16)
    spec = {"base": {"trace": "tiny.swf", "policy": {"name": "easy"}},
            "grid": {"active_procs": [4, 8, 16]},
            "sla": {"metric": "mean_bsld", "max": 1000}, "n_jobs": 1, "out": "t"}
    (tmp_path / "tune.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return tmp_path / "tune.yaml"


def test_tune_says_infeasible_and_does_not_recompute_it(tmp_path, monkeypatch, capsys):
    import olsctl.study.execution

    monkeypatch.chdir(tmp_path)
    path = _tune_file(tmp_path)
    assert main(["tune", str(path)]) == 0
    cap = capsys.readouterr()
    text = cap.out + cap.err
    assert "failed" not in text.replace("0 failed", ""), text
    lines = [line for line in text.splitlines() if "infeasible" in line]
    assert any("could never start" in line for line in lines), text
    stored = (tmp_path / "t" / "infeasible.csv").read_text()
    assert "could never start" in stored and not (tmp_path / "t" / "failed.csv").exists()

    calls = []
    real = olsctl.study.execution.run_point
    monkeypatch.setattr(olsctl.study.execution, "run_point",
                        lambda *a: calls.append(a) or real(*a))
    assert main(["tune", str(path)]) == 0
    text = "".join(capsys.readouterr())
    assert calls == [], "a rerun computed a setting again"
    assert "infeasible" in text and "could never start" in text
    assert (tmp_path / "t" / "infeasible.csv").read_text() == stored


# --- 7. the study legend fits its figure -------------------------------------------

SIX_SCHEMES = """\
base: {policy: {name: easy}, trace: tiny.swf}
grid:
  sla.max: [200]
  scheme:
    EASY, all processors: {controller: null}
    EASY/OLS, open loop, every hour: {controller: {interval_s: 3600}}
    EASY/OLS, SLA feedback, every hour: {controller: {interval_s: 3600, sla: {feedback: true}}}
    MQBF, all processors: {policy: {name: mqbf}, controller: null}
    MQBF/OLS, open loop, every hour: {policy: {name: mqbf}, controller: {interval_s: 3600}}
    MQBF/OLS, SLA feedback, every hour: {policy: {name: mqbf},
                                         controller: {interval_s: 3600, sla: {feedback: true}}}
"""


@pytest.mark.parametrize("fonts", ["olsctl's", "matplotlib's defaults"])
def test_the_weekly_legend_of_a_six_scheme_study_fits_the_figure(tmp_path, fonts):
    """Drawn as ``olsctl report`` draws it (its font sizes) and as a script calling
    ``weekly_figure`` gets it (matplotlib's default sizes, larger)."""
    pytest.importorskip("matplotlib")
    from olsctl.report import RC, load_source, plot_data, weekly_figure, write_plots

    write_swf(tmp_path / "tiny.swf")
    (tmp_path / "six.yaml").write_text(SIX_SCHEMES)
    out = tmp_path / "out"
    assert main(["study", str(tmp_path / "six.yaml"), "--out", str(out), "--quiet"]) == 0
    source = load_source(out)
    assert len(source.variants) == 6
    data = plot_data(source)
    with data.mpl.matplotlib.rc_context(RC if fonts == "olsctl's" else {}):
        fig = weekly_figure(source, data.mpl)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        (legend,) = fig.legends
        box = legend.get_window_extent(renderer)
        page = fig.bbox
        assert box.x0 >= page.x0 - 0.5 and box.x1 <= page.x1 + 0.5, (box, page)
        assert box.y0 >= page.y0 - 0.5 and box.y1 <= page.y1 + 0.5, (box, page)
        texts = [t.get_text() for t in legend.get_texts()]
        assert set(source.variants) <= set(texts)
        for ax in fig.axes:  # the legend covers no panel
            assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_title()
    write_plots(data, tmp_path / "plots")
    assert (tmp_path / "plots" / "weekly.png").is_file()
