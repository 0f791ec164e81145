"""The live monitor: the feed leaves a run's outputs unchanged, pacing only adds wall
time, the dashboard fits 80 x 24, plain lines off a terminal, and ``olsctl monitor``
replays a finished run and follows one written by another process."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from conftest import REPO_ROOT, make_workload
from olsctl.cli import main
from olsctl.live import (PLAIN_EVERY_S, Dashboard, Feed, FeedReader, LiveRun, PlainView,
                         SlaWindows, View, fmt_si, fmt_span, monitor, sparkline)
from olsctl.metrics import SlaSpec
from olsctl.policies import make_policy
from olsctl.sim import MainSimulator

CLI = [sys.executable, "-c", "from olsctl.cli import entry_point; entry_point()"]
OUTPUTS = ("jobs.csv", "timeseries.csv", "summary.json", "decisions.jsonl", "power.csv")


def _swf(path: Path, n: int, gap_s: int, procs: int = 8) -> None:
    """``n`` jobs every ``gap_s`` seconds, of 1-5 processors and mixed runtimes."""
    lines = [f"; MaxProcs: {procs}"]
    for j in range(1, n + 1):
        p, r = 1 + (j * 7) % 5, 4 * gap_s + (37 * j) % (20 * gap_s)
        lines.append(f"{j} {gap_s * j} -1 {r} {p} -1 -1 {p} {2 * r} -1 1 {j % 3} {j % 2} "
                     f"-1 -1 -1 -1 -1")
    path.write_text("\n".join(lines) + "\n")


def _full_config(tmp_path: Path, n: int = 60, gap_s: int = 30) -> Path:
    """A run with every panel: power under a cap, a controller over processors and caps."""
    _swf(tmp_path / "t.swf", n, gap_s)
    (tmp_path / "c.yaml").write_text(
        "trace: t.swf\nout: out\npolicy: {name: knapsack, window: 5}\n"
        "power:\n  cap: {fraction: 0.8}\n  sample_s: 60\n"
        "controller:\n  interval_s: 120\n  candidates:\n"
        "    active_procs: {fraction: [0.5, 0.75, 1.0]}\n"
        "    power_cap: {fraction: [0.6, 0.8, 1.0]}\n"
        "  sla: {metric: mean_bsld, max: 3}\n")
    return tmp_path / "c.yaml"


def _feed(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _outputs(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in OUTPUTS if (out / name).exists()}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """The full config run twice into the same directory: without, then with the feed."""
    tmp_path = tmp_path_factory.mktemp("full")
    config = _full_config(tmp_path)
    args = ["run", str(config), "--quiet", "--out", str(tmp_path / "out")]
    assert main(args) == 0
    plain = _outputs(tmp_path / "out")
    assert not (tmp_path / "out" / "live.jsonl").exists()
    assert main(args + ["--feed"]) == 0
    return tmp_path / "out", plain


def test_the_feed_leaves_every_output_byte_identical(full_run):
    out, plain = full_run
    assert set(plain) == set(OUTPUTS)
    assert _outputs(out) == plain


def test_feed_lines_parse_and_follow_the_run(full_run):
    out, _ = full_run
    records = _feed(out / "live.jsonl")
    head, samples, end = records[0], records[1:-1], records[-1]
    assert head["kind"] == "start" and head["jobs"] == 60 and head["total_procs"] == 8
    assert head["sla"] == {"metric": "mean_bsld", "max": 3.0} and head["power"] is True
    assert (head["pid"], head["host"]) == (os.getpid(), socket.gethostname())  # the writer
    assert end == {"kind": "end", "status": "finished"}
    assert len(samples) > 50 and all(s["kind"] == "sample" for s in samples)
    times = [s["time_s"] for s in samples]
    assert times == sorted(times) and len(set(times)) == len(times)
    for s in samples:
        assert 0 <= s["busy_procs"] <= s["total_procs"] == 8
        assert 0 <= s["active_procs"] <= s["total_procs"]
        assert s["done"] + s["running"] + s["queue_len"] <= 60
    assert [s["done"] for s in samples] == sorted(s["done"] for s in samples)
    last = samples[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert last["final"] and last["done"] == 60 and last["queue_len"] == last["running"] == 0
    assert last["mean_bsld"] == pytest.approx(summary["metrics"]["mean_bsld"])
    assert last["utilization"] == pytest.approx(summary["metrics"]["utilization"])
    # power against the cap in force, and the controller's choices, as they went
    assert all(s["power_w"] > 0 and s["cap_w"] > 0 for s in samples)
    decisions = [json.loads(x) for x in (out / "decisions.jsonl").read_text().splitlines()]
    seen = [s["decision"] for s in samples if s["decision"] is not None]
    assert seen and seen[-1]["n"] == len(decisions)
    d = seen[-1]
    assert d["chosen"] == decisions[-1]["chosen"] and d["reason"] == decisions[-1]["reason"]
    assert len(d["trials"]) == 9 and sum(1 for t in d["trials"] if t.get("chosen")) == 1
    assert [e[0] for e in d["recent"]] == [x["time_s"] for x in decisions[-6:-1]]


def test_busy_never_exceeds_active_without_a_controller(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _swf(tmp_path / "t.swf", 40, 20)
    assert main(["run", "--trace", "t.swf", "--out", "o", "--quiet", "--feed"]) == 0
    samples = [r for r in _feed(tmp_path / "o" / "live.jsonl") if r["kind"] == "sample"]
    assert all(s["busy_procs"] <= s["active_procs"] <= s["total_procs"] for s in samples)
    assert any(s["queue_len"] > 0 for s in samples)  # the trace keeps the machine busy
    assert all(s["power_w"] is None and s["decision"] is None for s in samples)


def test_pace_only_adds_wall_time(tmp_path, monkeypatch):
    # 12 jobs every 2 s: the run spans about 80 simulated seconds; at 80 s per wall
    # second it must take at least a second, with the same outputs as unpaced
    monkeypatch.chdir(tmp_path)
    _swf(tmp_path / "t.swf", 12, 2)
    args = ["run", "--trace", "t.swf", "--quiet"]
    assert main(args + ["--out", "fast"]) == 0
    t0 = time.perf_counter()
    assert main(args + ["--out", "paced", "--pace", "80"]) == 0
    wall = time.perf_counter() - t0
    summary = json.loads((tmp_path / "fast" / "summary.json").read_text())
    assert wall >= summary["metrics"]["makespan_s"] / 80 >= 0.9
    fast, paced = _outputs(tmp_path / "fast"), _outputs(tmp_path / "paced")
    summary_fast = fast.pop("summary.json").replace(b'"out": "fast"', b'"out": "paced"')
    assert paced.pop("summary.json") == summary_fast and paced == fast
    assert not (tmp_path / "paced" / "live.jsonl").exists()  # pacing alone writes no feed


def test_paced_samples_never_run_ahead_of_the_pace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _swf(tmp_path / "t.swf", 12, 2)
    assert main(["run", "--trace", "t.swf", "--quiet", "--out", "o", "--feed",
                 "--pace", "200"]) == 0
    records = _feed(tmp_path / "o" / "live.jsonl")
    head, samples = records[0], [r for r in records if r["kind"] == "sample"]
    assert head["pace"] == 200 and head["sample_s"] <= 200 / 5
    for s in samples:  # wall_s is rounded to the millisecond
        assert s["wall_s"] >= (s["time_s"] - head["start_s"]) / 200 - 0.001


def test_a_run_whose_jobs_can_never_start_still_ends():
    # 4 processors active of 8 and a job of 6: the run ends with it unstarted; the
    # sampler must stop when nothing is left to happen instead of ticking forever
    w = make_workload([1, 2], [0.0, 5.0], [50.0, 10.0], [2, 6], machine_procs=8)
    sim = MainSimulator(w, make_policy({"name": "easy"}), w.runtime_s, active_procs=4)
    live = LiveRun("stuck")
    with live.attach(sim):
        records = sim.run()
    assert records.unstarted == [2]
    assert live.dashboard.latest["done"] == 1 and live.dashboard.latest["queue_len"] == 1


def _dashboards(feed: list[dict]) -> list[Dashboard]:
    """The dashboard as it stood at several points of a feed."""
    out = []
    dash = Dashboard(feed[0])
    samples = [r for r in feed if r["kind"] == "sample"]
    for i, s in enumerate(samples):
        dash.add(s)
        if i in (0, 1, len(samples) // 3, len(samples) // 2, len(samples) - 1):
            copy = Dashboard(feed[0])
            for x in dash.samples:
                copy.add(x)
            out.append(copy)
    return out


def _render(dash: Dashboard, width: int = 80, height: int = 24) -> str:
    console = Console(width=width, height=height, record=True, force_terminal=True)
    console.print(dash)
    return console.export_text()


def test_the_dashboard_fits_an_80_by_24_terminal(full_run):
    out, _ = full_run
    for dash in _dashboards(_feed(out / "live.jsonl")):
        text = _render(dash)
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= 80
        assert len(lines) <= 23, text
        for label in ("time", "speed", "jobs", "procs", "power", "so far", "sla"):
            assert re.search(rf"│ {label} ", text), (label, text)
    final = _render(dash)
    assert "60/60 done (100.0%)" in final and "finished" in final
    s = dash.latest  # the run's one week, judged at its end: the controller's SLA
    assert s["windows_judged"] == 1 and 0 <= s["windows_kept"] <= 1
    assert re.search(rf"│ sla +mean bsld <= 3: {s['windows_kept']}/1 weeks kept "
                     rf"\({100.0 * s['windows_kept']:.1f}%\)  this week "
                     rf"{s['window_bsld']:,.2f} +│", final), final
    assert "controller · " in final and "SLA mean_bsld <= 3.0" in final
    assert re.search(r"│ >\s+\d+\s+[\d.]+ kW", final)  # the chosen candidate, marked
    assert "pred. mean_bsld" in final and "cost" in final


def test_the_dashboard_without_power_or_controller_shows_what_there_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _swf(tmp_path / "t.swf", 40, 20)
    assert main(["run", "--trace", "t.swf", "--out", "o", "--quiet", "--feed"]) == 0
    dash = _dashboards(_feed(tmp_path / "o" / "live.jsonl"))[-1]
    text = _render(dash)
    assert "40/40 done" in text and "controller" not in text and "│ power" not in text
    wide = _render(dash, 120, 40)
    assert max(len(x) for x in wide.splitlines()) == 120  # the panels take the width


def test_plain_lines_when_stdout_is_not_a_terminal(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _swf(tmp_path / "t.swf", 40, 20)
    assert main(["run", "--trace", "t.swf", "--out", "o", "--live"]) == 0
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if x.startswith("t.swf · easy: ")]
    assert lines and "\x1b[" not in out
    assert "done 40/40" in lines[-1] and "mean bsld" in lines[-1]
    assert "olsctl run: t.swf" in out  # the summary table still follows
    assert (tmp_path / "o" / "live.jsonl").exists()  # --live also writes the feed


def test_plain_view_prints_a_line_every_few_seconds():
    now = [0.0]
    console = Console(width=200, record=True, force_terminal=False)
    view = PlainView(console, clock=lambda: now[0])
    head = {"title": "x", "start_s": 0.0, "jobs": 100}
    dash = Dashboard(head)
    for i in range(101):  # a sample every 0.1 s of wall time for 10 s
        now[0] = i / 10
        dash.add({"time_s": 60.0 * i, "wall_s": now[0], "busy_procs": 1, "active_procs": 2,
                  "total_procs": 2, "queue_len": 0, "done": i, "mean_bsld": 1.0,
                  "utilization": 0.5})
        view.update(dash, final=i == 100)
    lines = console.export_text().splitlines()
    assert len(lines) == 3 and 10 / PLAIN_EVERY_S == 2  # at 0 s, 5 s and the last
    assert [re.search(r"done (\d+)/", x).group(1) for x in lines] == ["0", "50", "100"]


def test_monitor_replays_a_finished_run(full_run, capsys):
    out, _ = full_run
    assert main(["monitor", str(out), "--speed", "5000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "done 0/60" in lines[0] and "done 60/60" in lines[-1]


def test_monitor_replays_at_the_asked_speed(full_run):
    out, _ = full_run
    now = [0.0]
    slept = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    end = monitor(out, PlainView(Console(file=open(os.devnull, "w"))), speed=50.0,
                  clock=lambda: now[0], sleep=sleep)
    samples = sum(1 for r in _feed(out / "live.jsonl") if r["kind"] == "sample")
    assert end["status"] == "finished" and not any(s > 1 / 50 + 1e-9 for s in slept)
    assert now[0] == pytest.approx((samples - 1) / 50)


#: the CLI in a child process whose feed stops after its third line: it says "paused" on
#: stdout and waits for a line on stdin before it goes on (so a test, not the clock,
#: decides how far the run has got when it looks)
GATED_CLI = [sys.executable, "-c", """
import sys
from olsctl import live
from olsctl.cli import entry_point

write, written = live.Feed.write, [0]

def gated(self, record):
    write(self, record)
    written[0] += 1
    if written[0] == 3:
        print("paused", flush=True)
        sys.stdin.readline()

live.Feed.write = gated
entry_point()
"""]


def test_monitor_follows_a_run_in_another_process(tmp_path, capsys, monkeypatch):
    # The run (paced, in another process) is held after three feed lines: it has not
    # finished, so no summary.json yet, and the monitor, started then, shows the run
    # part-way. The monitor's first wait lets the run go on; it follows it to its end.
    config = _full_config(tmp_path, n=24, gap_s=30)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(GATED_CLI + ["run", str(config), "--quiet", "--feed", "--pace",
                                         "1500"],
                            cwd=tmp_path, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    released = []

    def release() -> None:
        if not released:
            released.append(True)
            try:
                proc.stdin.write("go\n")
                proc.stdin.close()
            except BrokenPipeError:  # the run has already ended
                pass

    from olsctl import live

    real_monitor = live.monitor

    def monitor(*args, **kwargs):
        def sleep(s: float) -> None:  # the monitor waits for more lines: let the run go on
            release()
            time.sleep(s)
        return real_monitor(*args, sleep=sleep, **kwargs)

    monkeypatch.setattr(live, "monitor", monitor)
    try:
        for line in proc.stdout:  # EOF (the run ended early) ends the loop
            if line.strip() == "paused":
                break
        else:
            release()
            raise AssertionError(f"the run never paused: {proc.stderr.read()}")
        assert (tmp_path / "out" / "live.jsonl").read_text().count("\n") == 3
        assert not (tmp_path / "out" / "summary.json").exists()
        assert main(["monitor", str(tmp_path / "out")]) == 0
        assert released  # the monitor did wait for the run
    finally:
        release()
        proc.wait(timeout=300)  # a safety net against a hang only
        err = proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == 0, err
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 2
    assert "done 24/24" not in lines[0] and "done 24/24" in lines[-1]
    assert (tmp_path / "out" / "summary.json").exists()


def test_monitor_reports_a_failed_run_with_exit_1(full_run, tmp_path, capsys):
    out = tmp_path / "failed"
    out.mkdir()
    lines = (full_run[0] / "live.jsonl").read_text().splitlines()
    lines[-1] = json.dumps({"kind": "end", "status": "failed", "error": "SimulationError: x"})
    (out / "live.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["monitor", str(out), "--speed", "5000"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{out}: the run failed: SimulationError: x"]


@pytest.mark.parametrize("setup,args,message", [
    (None, ["monitor", "nowhere"], "FeedError: nowhere: no such directory"),
    ("empty", ["monitor", "d"], "FeedError: d: no live.jsonl"),
    ("junk", ["monitor", "d"], "FeedError: d/live.jsonl: not an olsctl feed"),
    ("empty", ["monitor", "d", "--speed", "0"], "ConfigError: command line: --speed"),
    (None, ["run", "--trace", "t.swf", "--out", "o", "--live", "--pace", "0"],
     "ConfigError: command line: --pace: must be a number > 0 (got 0)"),
])
def test_bad_monitor_and_pace_input_is_one_line_exit_2(tmp_path, monkeypatch, capsys, setup,
                                                       args, message):
    monkeypatch.chdir(tmp_path)
    _swf(tmp_path / "t.swf", 5, 10)
    if setup is not None:
        (tmp_path / "d").mkdir()
        if setup == "junk":
            (tmp_path / "d" / "live.jsonl").write_text("hello\n")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith(message)
    assert not (tmp_path / "o").exists()  # nothing written


def test_feed_reader_waits_for_whole_lines_and_restarts_on_a_new_feed(tmp_path):
    path = tmp_path / "live.jsonl"
    path.write_text('{"kind":"start","n":1}\n{"kind":"sample","time_s":1')
    reader = FeedReader(path)
    assert reader.poll() == [{"kind": "start", "n": 1}]
    with open(path, "a") as fh:
        fh.write('}\nnot json\n')
    assert reader.poll() == [{"kind": "sample", "time_s": 1}] and not reader.reset
    feed = Feed(path)  # a new run replaces the file
    feed.open()
    feed.write({"kind": "start", "n": 2})
    assert reader.poll() == [{"kind": "start", "n": 2}] and reader.reset
    feed.close()


def test_formatting_helpers():
    assert fmt_span(0) == "00:00:00" and fmt_span(90061) == "1d 01:01:01"
    assert fmt_si(412_300, "W") == "412 kW" and fmt_si(1250, "W") == "1.25 kW"
    assert fmt_si(None) == "-" and fmt_si(float("inf"), "W") == "-" and fmt_si(3) == "3.00"
    assert sparkline([0, 50, 100, 200, None], 100) == "▁▄██ "


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_the_dashboard_in_a_pseudo_terminal_shows_its_panels_and_moves(tmp_path):
    import fcntl
    import pty
    import struct
    import termios

    config = _full_config(tmp_path, n=24, gap_s=30)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TERM": "xterm-256color",
           "COLUMNS": "80", "LINES": "24"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(CLI + ["run", str(config), "--live", "--pace", "1000"],
                            cwd=tmp_path, env=env, stdin=slave, stdout=slave, stderr=slave,
                            close_fds=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the other side closed
                break
            if not data:
                break
            chunks.append(data)
    finally:
        proc.wait(timeout=60)
        os.close(master)
    assert proc.returncode == 0
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", b"".join(chunks)
                    .decode("utf-8", "replace"))
    frames = re.findall(r"(\d+)/24 done", screen)
    assert len(frames) >= 4 and frames[-1] == "24"
    done = [int(x) for x in frames]
    assert done == sorted(done) and len(set(done)) >= 3  # the numbers move
    for text in ("t.swf · knapsack/OLS · capped", "controller · ", "│ power ", "│ procs ",
                 "pred. mean_bsld", "sim-s/s"):
        assert text in screen, text
    assert "olsctl run: t.swf" in screen  # then the summary table


# --- SLA windows as the run goes -------------------------------------------------------

def _expected_windows(jobs: list[dict], origin: float, window_s: float, limit: float,
                      now: float, final: bool) -> tuple[float | None, int, int]:
    """``window_bsld``, ``windows_kept``, ``windows_judged`` at a sample, as the module
    docstring defines them, recomputed from jobs.csv rows (a sample sees the jobs that
    started before its time)."""
    def window(t: float) -> int:
        return int((t - origin) // window_s)

    def mean_bsld(group: list[dict]) -> float:
        return sum(1 + (j["start"] - j["submit"]) / max(10.0, j["runtime"])
                   for j in group) / len(group)

    by_window: dict[int, list[dict]] = {}
    for j in jobs:
        by_window.setdefault(window(j["submit"]), []).append(j)
    kept = judged = 0
    for w, group in by_window.items():
        over = origin + (w + 1) * window_s <= now and all(j["start"] < now for j in group)
        if over or final:
            judged += 1
            kept += mean_bsld(group) <= limit
    current = [j for j in by_window.get(window(now), []) if final or j["start"] < now]
    return (mean_bsld(current) if current else None), kept, judged


def test_feed_samples_judge_the_sla_windows_as_the_run_goes(tmp_path, monkeypatch):
    """Windows of 5 minutes (the run spans about 40), mean bsld <= 2, a backlog: every
    sample's counts are those recomputed from jobs.csv, they move, and the last sample's
    are summary.json's."""
    monkeypatch.chdir(tmp_path)
    _swf(tmp_path / "t.swf", 60, 30, procs=24)
    assert main(["run", "--trace", "t.swf", "--quiet", "--feed", "--out", "o",
                 "--set", "sla.window_s=300", "--set", "sla.max=2"]) == 0
    records = _feed(tmp_path / "o" / "live.jsonl")
    head, samples = records[0], [r for r in records if r["kind"] == "sample"]
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    origin = head["start_s"]  # no UnixStartTime: windows start at the first submission
    assert head["sla"] is None  # no controller
    assert head["sla_windows"] == {"metric": "mean_bsld", "max": 2.0, "window_s": 300.0,
                                   "origin_s": origin, "origin_date": None}
    with open(tmp_path / "o" / "jobs.csv", newline="") as fh:
        jobs = [{"submit": float(r["submission_time"]), "start": float(r["starting_time"]),
                 "runtime": float(r["execution_time"])} for r in csv.DictReader(fh)]
    for s in samples:
        bsld, kept, judged = _expected_windows(jobs, origin, 300.0, 2.0, s["time_s"],
                                               s.get("final", False))
        assert (s["windows_kept"], s["windows_judged"]) == (kept, judged), s["time_s"]
        assert s["window_bsld"] == (None if bsld is None else pytest.approx(bsld)), s
    judged = [s["windows_judged"] for s in samples]
    assert judged == sorted(judged) and len(set(judged)) >= 4
    kept = [s["windows_kept"] for s in samples]
    assert kept == sorted(kept) and [judged[i] - kept[i] for i in (0, -1)] == [0, 3]
    last = samples[-1]
    assert (last["windows_kept"], last["windows_judged"]) == \
        (summary["sla"]["windows_kept"], summary["sla"]["windows"]) == (3, 6)


def test_sla_windows_judge_a_window_once_all_its_jobs_have_started():
    win = SlaWindows(SlaSpec("mean_bsld", 1.5, 100.0), 0.0, [10.0, 50.0, 120.0])
    win.add(10.0, 20.0, 100.0)  # window 0: bsld 1.1
    assert win.mean_bsld(50.0) == pytest.approx(1.1) and win.mean_bsld(150.0) is None
    win.close_until(99.0)
    assert (win.kept, win.judged) == (0, 0)  # not over yet
    win.close_until(140.0)
    assert (win.kept, win.judged) == (0, 0)  # over, but a job still waits
    win.add(50.0, 150.0, 100.0)  # bsld 2: the window's mean 1.55
    assert (win.kept, win.judged) == (0, 0)  # judged at the next sample
    win.close_until(150.0)
    assert (win.kept, win.judged) == (0, 1)
    win.add(120.0, 121.0, 10.0)  # window 1: bsld 1.1, all started, not over
    win.close_until(199.0)
    assert (win.kept, win.judged) == (0, 1)
    win.close_until(200.0)
    assert (win.kept, win.judged) == (1, 2)
    win.close_until(math.inf)
    assert (win.kept, win.judged) == (1, 2)  # once
    # the other metrics, as summary.json computes them
    for metric, limit, kept in (("p95_bsld", 1.9, 0), ("p95_bsld", 1.91, 1),
                                ("max_wait_s", 100.0, 1), ("max_wait_s", 99.0, 0),
                                ("mean_wait_s", 40.0, 1), ("mean_wait_s", 39.0, 0)):
        w = SlaWindows(SlaSpec(metric, limit, 1000.0), 0.0, [0.0, 1.0, 2.0, 3.0])
        # waits 0, 20, 40, 100 s of 100 s jobs: bsld 1, 1.2, 1.4, 2 (p95 1.91, linear)
        for submit, wait in ((0.0, 0.0), (2.0, 20.0), (3.0, 40.0), (1.0, 100.0)):
            w.add(submit, submit + wait, 100.0)
        w.close_until(1000.0)
        assert (w.kept, w.judged) == (kept, 1), (metric, limit)


def test_a_feed_without_sla_windows_still_shows(tmp_path):
    """A feed written before the SLA windows: no sla row, no SLA in the plain line."""
    head = {"kind": "start", "title": "old", "start_s": 0.0, "span_s": 100.0, "jobs": 2,
            "total_procs": 4, "sample_s": 1.0, "pace": None, "power": False, "sla": None}
    dash = Dashboard(head)
    dash.add({"kind": "sample", "time_s": 10.0, "wall_s": 0.1, "busy_procs": 1,
              "active_procs": 4, "total_procs": 4, "queue_len": 0, "running": 1, "done": 1,
              "mean_bsld": 1.0, "utilization": 0.25, "power_w": None, "cap_w": None,
              "decision": None})
    text = _render(dash)
    assert "1/2 done" in text and "│ sla" not in text
    assert "SLA" not in dash.line() and "window bsld" not in dash.line()


# -- a run killed outright: its feed has no end record -----------------------------------

_START = {"kind": "start", "title": "t", "start_s": 0.0, "span_s": 600.0, "jobs": 3,
          "total_procs": 4, "sample_s": 60.0, "pace": None, "power": False, "sla": None}


def _killed_feed(run: Path, start: dict, walls: tuple[float, ...], age_s: float) -> Path:
    """A feed cut short (no end record): ``start``, a sample at each wall second of
    ``walls``, its file last written ``age_s`` ago."""
    run.mkdir()
    samples = [{"kind": "sample", "time_s": 60.0 * i, "wall_s": w, "busy_procs": 1,
                "active_procs": 4, "total_procs": 4, "queue_len": 0, "running": 1,
                "done": i, "mean_bsld": 1.0, "utilization": 0.25}
               for i, w in enumerate(walls)]
    path = run / "live.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [start, *samples]))
    os.utime(path, (time.time() - age_s, time.time() - age_s))
    return path


def test_monitor_stops_when_the_run_on_this_host_is_gone(tmp_path, capsys, monkeypatch):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(done.stdout)  # a process that has ended
    host = socket.gethostname()
    _killed_feed(tmp_path / "run", {**_START, "pid": pid, "host": host}, (0.1, 0.2), 200)
    from olsctl import live

    real_monitor, polls = live.monitor, []

    def sleep(s: float) -> None:  # it stops at its first look, not after waiting
        polls.append(s)
        assert len(polls) < 3, "the monitor still waits for a run that is gone"

    monkeypatch.setattr(live, "monitor", lambda *a, **k: real_monitor(*a, sleep=sleep, **k))
    assert main(["monitor", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [f"{tmp_path / 'run'}: the run is gone: process {pid} on "
                                f"{host} ended without finishing its feed (killed?); its last "
                                f"line is 3 min old"]


@pytest.mark.parametrize("where, walls, said", [
    ("elsewhere", (0.0, 10.0, 20.0), True),   # another host: cannot be checked
    ("here", (0.0, 10.0, 20.0), True),         # alive here (this process), yet silent
    ("elsewhere", (0.0, 150.0, 300.0), False),  # 10 min is under 5 gaps of 150 s
    ("unnamed", (0.0, 10.0), True),            # a feed written before pid and host
])
def test_monitor_says_once_that_a_silent_feed_looks_stale(tmp_path, where, walls, said):
    start = dict(_START)
    if where != "unnamed":
        start.update(pid=os.getpid() if where == "here" else 1,
                     host=socket.gethostname() if where == "here" else "elsewhere.invalid")
    path = _killed_feed(tmp_path / "run", start, walls, 600)
    lines: list[str] = []
    polls = []

    def sleep(s: float) -> None:  # the run comes back after five silent polls
        polls.append(s)
        if len(polls) == 5:
            with open(path, "a") as fh:
                fh.write(json.dumps({"kind": "end", "status": "finished"}) + "\n")

    end = monitor(tmp_path / "run", View(), sleep=sleep, say=lines.append)
    assert end["status"] == "finished" and len(polls) == 5
    stale = (f"{path}: no new line for 10 min: the run looks stale ("
             + ("its writer" if where == "unnamed" else
                f"process {start['pid']} on {start['host']}")
             + " cannot be checked from here); still waiting, Ctrl-C stops")
    assert lines == ([stale] if said else [])
