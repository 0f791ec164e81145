"""``olsctl report``: tables against summary.json and results.csv, the plots written (valid
images, the same bytes twice), the reductions behind them, bad directories, and tables
without matplotlib.

Runs and studies here replay a tiny SWF log written by the test, with power and the
controller, so every plot has data; each run takes a fraction of a second.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from olsctl.cli import main
from olsctl.report import (MAX_POINTS, RunEntry, bin_means, change_points, ecdf_points,
                           load_source, reduce_chunks, reduce_steps, report_tables,
                           step_integral)
from olsctl.terminal import _f, _pct, run_summary_table, sla_window_text

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

RUN_CONFIG = """\
trace: tiny.swf
policy: {name: easy}
power: {cap: {fraction: 0.6}}
controller: {interval_s: 600, sla: {max: 20}}
"""

#: 2 logs x 2 schemes, with power: every plot of a study
STUDY = """\
base:
  policy: {name: easy}
  power: {cap: {fraction: 0.6}}
grid:
  trace: [tiny.swf, other.swf]
  scheme:
    EASY: {controller: null}
    EASY/OLS: {controller: {interval_s: 600, sla: {max: 20}}}
"""


def write_swf(path: Path, jobs: int = 150, procs: int = 32, seed: int = 3) -> Path:
    """A busy little log over two weeks: Poisson arrivals, log-normal runtimes, sizes of
    powers of two; a header with UnixStartTime so weeks are calendar weeks."""
    rng = np.random.default_rng(seed)
    lines = [f"; MaxProcs: {procs}", "; UnixStartTime: 820454400", "; TimeZone: 0"]
    t = 0
    for j in range(1, jobs + 1):
        t += int(rng.exponential(7000))
        run = int(rng.lognormal(7.5, 1.0)) + 1
        size = int(min(procs, 2 ** rng.integers(0, 6)))
        fields = [j, t, -1, run, size, -1, -1, size, int(run * 2), -1, 1,
                  int(rng.integers(1, 6)), int(rng.integers(1, 4)), -1, 1, -1, -1, -1]
        lines.append(" ".join(map(str, fields)))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    write_swf(folder / "tiny.swf")
    (folder / "run.yaml").write_text(RUN_CONFIG)
    out = folder / "out"
    assert main(["run", str(folder / "run.yaml"), "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("study")
    write_swf(folder / "tiny.swf")
    write_swf(folder / "other.swf", jobs=100, procs=16, seed=5)
    (folder / "study.yaml").write_text(STUDY)
    out = folder / "out"
    assert main(["study", str(folder / "study.yaml"), "--out", str(out), "--quiet"]) == 0
    return out


def _report(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["report", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _wide(monkeypatch) -> None:
    """Tables rendered wide enough that no number is cut."""
    monkeypatch.setenv("COLUMNS", "200")


def _check_png(path: Path, min_w: int = 600, min_h: int = 300) -> None:
    import matplotlib.image as mpimg

    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    assert len(data) < 400_000, f"{path}: {len(data)} bytes"
    img = mpimg.imread(path)
    h, w = img.shape[:2]
    assert w >= min_w and h >= min_h, (path, img.shape)
    assert img.std() > 0.01, f"{path} is blank"


def test_run_report_tables_and_plots(run_dir, capsys, monkeypatch):
    _wide(monkeypatch)
    pytest.importorskip("matplotlib")
    out = run_dir / "report"  # the default
    code, text, err = _report(capsys, str(run_dir))
    assert code == 0, err
    summary = json.loads((run_dir / "summary.json").read_text())
    m, p, c = summary["metrics"], summary["power"], summary["controller"]
    assert c["changes"] > 0  # the controller moved the active processors
    for cell in (_f(m["mean_bsld"]), _f(m["utilization"]), _pct(m["processor_savings"]),
                 f"{_f(p['energy_j'] / 3.6e9, 2)} MWh", _pct(p["csr"]),
                 f"{c['ticks']:,} / {c['sla_misses']:,}",
                 "mean_bsld <= 20 per calendar week",
                 f"{summary['sla']['windows_kept']} of {summary['sla']['windows']} ("):
        assert cell in text, cell
    names = sorted(f.name for f in out.iterdir())
    assert names == ["activity.png", "power.png", "sla.png", "weekly.png"]
    assert f"wrote 4 plots to {out}: " in text
    for name in names:
        _check_png(out / name)


def test_study_report_tables_match_results_csv(study_dir, tmp_path, capsys, monkeypatch):
    _wide(monkeypatch)
    pytest.importorskip("matplotlib")
    out = tmp_path / "plots"
    code, text, err = _report(capsys, str(study_dir), "--out", str(out))
    assert code == 0, err
    with open(study_dir / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4
    lines = text.splitlines()
    for row in rows:
        cells = [row["scheme"], f"{float(row['mean_bsld']):,.2f}",
                 f"{float(row['mean_wait_s']) / 3600:,.2f}", f"{float(row['utilization']):.3f}",
                 _pct(float(row["processor_savings"])),
                 f"{float(row['energy_j']) / 3.6e9:,.2f}", _pct(float(row["csr"])),
                 _pct(float(row["sla_windows_kept_share"]))]
        assert any(line.split() == ([] if row["scheme"] == "EASY/OLS" else [row["trace"][:-4]])
                   + cells for line in lines), (row, text)
    assert any(float(r["processor_savings"]) > 0 for r in rows)
    names = sorted(f.name for f in out.iterdir())
    power = sorted(f"power-{r['id']}.png" for r in rows)
    assert names == sorted(["aggregate.png", "tradeoff.png", "weekly.png",
                            "activity-tiny.png", "activity-other.png", *power])
    for name in names:
        _check_png(out / name)


def test_study_table_groups_rows_by_log(study_dir):
    source = load_source(study_dir)
    assert source.kind == "study" and source.logs == ["tiny", "other"]
    assert source.variants == ["EASY", "EASY/OLS"]
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(*report_tables(source))
    body = [line.split() for line in console.export_text().splitlines()]
    firsts = [cells[0] for cells in body if cells and cells[0] in ("tiny", "other",
                                                                    "EASY/OLS")]
    assert firsts == ["tiny", "EASY/OLS", "other", "EASY/OLS"]


def test_study_without_a_trace_axis_or_controller(run_dir, tmp_path):
    """Logs then come from the runs' summaries; no savings column, no savings bars."""
    pytest.importorskip("matplotlib")
    import shutil

    from olsctl.report import aggregate_figure, plot_data

    folder = tmp_path / "study"
    header = "id,estimates,jobs,mean_bsld,p95_bsld,max_bsld,mean_wait_s,max_wait_s," \
             "mean_turnaround_s,utilization"
    lines = [header]
    for rid, est, bsld in (("a", "exact", 1.5), ("b", "user", 2.25)):
        shutil.copytree(run_dir, folder / "runs" / rid, ignore=shutil.ignore_patterns("report"))
        lines.append(f"{rid},{est},10,{bsld},3,4,60,120,600,0.125")
    (folder / "results.csv").write_text("\n".join(lines) + "\n")
    source = load_source(folder)
    assert source.logs == ["tiny"] and source.variants == ["exact", "user"]
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(*report_tables(source))
    rows = [line.split() for line in console.export_text().splitlines()]
    assert ["tiny", "exact", "1.50", "0.02", "0.125"] in rows
    assert ["user", "2.25", "0.02", "0.125"] in rows
    assert not any("savings" in r for r in rows)
    fig = aggregate_figure(source, plot_data(source).mpl)
    assert [ax.get_title() for ax in fig.axes] == ["mean bounded slowdown", "utilization"]
    heights = [bar.get_height() for bar in fig.axes[0].patches]
    assert heights == [1.5, 2.25]


def test_plots_are_the_same_bytes_twice_png_and_svg(run_dir, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    for fmt in ("png", "svg"):
        a, b = tmp_path / f"a-{fmt}", tmp_path / f"b-{fmt}"
        assert _report(capsys, str(run_dir), "--out", str(a), "--format", fmt)[0] == 0
        assert _report(capsys, str(run_dir), "--out", str(b), "--format", fmt)[0] == 0
        names = sorted(f.name for f in a.iterdir())
        assert names and all(n.endswith(f".{fmt}") for n in names)
        for name in names:
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    svg = (tmp_path / "a-svg" / "weekly.svg").read_text()
    assert "<svg" in svg and "<dc:date>" not in svg


def test_predict_out_is_reported(tmp_path, capsys, monkeypatch):
    _wide(monkeypatch)
    pytest.importorskip("matplotlib")
    swf = write_swf(tmp_path / "tiny.swf", jobs=400)
    folder = tmp_path / "pred"
    assert main(["predict", str(swf), "--out", str(folder)]) == 0
    capsys.readouterr()
    report = json.loads((folder / "predict.json").read_text())
    assert report["weekly"] and set(report["overall_mae_w"]) >= {"naive", "history"}
    code, text, err = _report(capsys, str(folder))
    assert code == 0, err
    for name, mae in report["overall_mae_w"].items():
        assert f"{mae:.1f}" in text, name
    assert (folder / "report" / "predictor-error.png").is_file()
    _check_png(folder / "report" / "predictor-error.png")


def test_without_matplotlib_tables_still_print(run_dir, study_dir, tmp_path, capsys,
                                               monkeypatch):
    _wide(monkeypatch)
    for name in [n for n in sys.modules if n == "matplotlib" or n.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    summary = json.loads((run_dir / "summary.json").read_text())
    with open(study_dir / "results.csv", newline="") as fh:
        last = list(csv.DictReader(fh))[-1]
    expected = {run_dir: _f(summary["metrics"]["mean_bsld"]),
                study_dir: f"{float(last['mean_bsld']):,.2f}"}
    for folder, figure in expected.items():
        out = tmp_path / folder.name
        code, text, err = _report(capsys, str(folder), "--out", str(out))
        assert code == 0 and err == ""
        assert figure in text
        hint = [line for line in text.splitlines() if "olsctl[plot]" in line]
        assert hint == ["no plots: they need matplotlib, which pip install 'olsctl[plot]' "
                        "adds"]
        assert not out.exists()


def _one_line_error(capsys, *args: str) -> str:
    code, text, err = _report(capsys, *args)
    assert code == 2 and text == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_bad_directories_exit_2_with_one_line(tmp_path, capsys):
    assert _one_line_error(capsys, str(tmp_path / "nope")) == \
        f"ReportError: {tmp_path / 'nope'}: no such directory"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("hello\n")
    line = _one_line_error(capsys, str(empty))
    assert line.startswith(f"ReportError: {empty}: neither a run directory")
    assert "Traceback" not in line


@pytest.mark.parametrize("damage, where", [
    (lambda d: (d / "summary.json").write_text('{"trace": "x", "config": {'), "summary.json:1"),
    (lambda d: (d / "summary.json").write_text('{"trace": "x"}'), "summary.json: config"),
    (lambda d: _replace_line(d / "jobs.csv", 3, "bounded_slowdown", "abc"), "jobs.csv:3"),
    (lambda d: _replace_line(d / "timeseries.csv", 5, None, "1,2"), "timeseries.csv:5"),
    (lambda d: (d / "power.csv").write_text("time,mean_power_w\n0,1\n"), "power.csv"),
    (lambda d: _edit_summary(d, lambda s: s.update(sla="yes")), "summary.json: sla: needs"),
    (lambda d: _edit_summary(d, lambda s: s["sla"].update(window_s=0)), "summary.json: sla"),
    (lambda d: _edit_summary(d, lambda s: s["sla"].update(windows_kept=9)), "summary.json: sla"),
    (lambda d: _edit_summary(d, lambda s: s["weekly"][0].update(p95_bsld="x")),
     "summary.json: weekly[0].p95_bsld: not a number"),
    (lambda d: _edit_summary(d, lambda s: s["weekly"][1].update(sla_kept="yes")),
     "summary.json: weekly[1].sla_kept"),
])
def test_malformed_run_files_name_the_file(run_dir, tmp_path, capsys, damage, where):
    pytest.importorskip("matplotlib")
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad, ignore=shutil.ignore_patterns("report"))
    damage(bad)
    line = _one_line_error(capsys, str(bad))
    assert line.startswith(f"ReportError: {bad / where}"), line


def _replace_line(path: Path, line_no: int, column: str | None, value: str) -> None:
    """Set ``column`` of line ``line_no`` (1-based) to ``value``, or the whole line."""
    lines = path.read_text().splitlines()
    if column is None:
        lines[line_no - 1] = value
    else:
        header = lines[0].split(",")
        cells = lines[line_no - 1].split(",")
        cells[header.index(column)] = value
        lines[line_no - 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


def test_malformed_study_files_name_the_file(study_dir, tmp_path, capsys):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(study_dir, bad, ignore=shutil.ignore_patterns("report"))
    _replace_line(bad / "results.csv", 2, "mean_bsld", "lots")
    assert _one_line_error(capsys, str(bad)).startswith(
        f"ReportError: {bad / 'results.csv'}:2: mean_bsld: not a number: 'lots'")
    shutil.copy(study_dir / "results.csv", bad / "results.csv")
    victim = next((bad / "runs").iterdir())
    shutil.rmtree(victim)
    line = _one_line_error(capsys, str(bad))
    assert line.startswith(f"ReportError: {victim / 'summary.json'}: missing"), line


def test_out_must_be_a_directory(run_dir, tmp_path, capsys):
    taken = tmp_path / "file"
    taken.write_text("x")
    assert _one_line_error(capsys, str(run_dir), "--out", str(taken)) == \
        f"ReportError: {taken}: exists and is not a directory"


# --- the reductions behind the plots ----------------------------------------------------

def test_bin_means_keep_the_integral_and_change_points_the_steps():
    rng = np.random.default_rng(1)
    t = np.cumsum(rng.exponential(10.0, 50_000))
    v = rng.integers(0, 100, t.size).astype(float)
    x, y = bin_means(t, v, 700)
    assert x.size == 701 and x[0] == t[0] and x[-1] == t[-1]
    total = step_integral(t, v, np.asarray([t[-1]]))[0]
    assert np.sum(y[:-1] * np.diff(x)) == pytest.approx(total, rel=1e-9)
    # a step function with few changes is drawn exactly
    t2 = np.arange(10.0)
    v2 = np.asarray([4, 4, 4, 2, 2, 8, 8, 8, 8, 8], dtype=float)
    x2, y2 = change_points(t2, v2)
    assert x2.tolist() == [0, 3, 5, 9] and y2.tolist() == [4, 2, 8, 8]
    assert reduce_steps(t2, v2)[2] is False
    rx, _ry, binned = reduce_steps(t, v)
    assert binned and rx.size == MAX_POINTS + 1


def test_ecdf_points_are_exact_at_their_ranks():
    rng = np.random.default_rng(2)
    values = 1 + rng.exponential(30.0, 100_000)
    x, y = ecdf_points(values)
    assert x.size <= MAX_POINTS + 1
    assert (x[0], y[0], x[-1], y[-1]) == (values.min(), 0.0, values.max(), 1.0)
    assert np.all(np.diff(x) >= 0) and np.all(np.diff(y) >= 0)
    for xi, yi in zip(x[1::97], y[1::97]):  # share of values at or below x
        assert abs(np.mean(values <= xi) - yi) < 1e-9
    small = np.asarray([3.0, 1.0, 2.0])
    assert [a.tolist() for a in ecdf_points(small)] == [[1, 1, 2, 3], [0, 1 / 3, 2 / 3, 1]]


def test_reduce_chunks_mean_and_max():
    values = np.arange(10.0)
    starts, means = reduce_chunks(values, 4)
    assert starts.tolist() == [0, 3, 6, 9] and means.tolist() == [1, 4, 7, 9]
    assert reduce_chunks(values, 4, how=np.maximum)[1].tolist() == [2, 5, 8, 9]


# --- SLA windows ------------------------------------------------------------------------

def _edit_summary(run: Path, change) -> dict:
    """Apply ``change`` to the summary.json of ``run`` in place; returns the new summary."""
    summary = json.loads((run / "summary.json").read_text())
    change(summary)
    (run / "summary.json").write_text(json.dumps(summary))
    return summary


def _text(*renderables, width: int = 80) -> str:
    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO())
    console.print(*renderables)
    return console.export_text()


@pytest.mark.parametrize("window_s, dated, words", [
    (604800.0, True, "per calendar week"), (604800.0, False, "per week"),
    (86400.0, True, "per day"), (3 * 86400.0, True, "per window of 3 days"),
    (3600.0, True, "per hour"), (6 * 3600.0, True, "per window of 6 hours"),
    (900.0, True, "per window of 900 s"), (1.5, True, "per window of 1.5 s"),
])
def test_sla_window_in_words(window_s, dated, words):
    assert sla_window_text(window_s, dated) == words


def test_run_summary_table_shows_the_sla_and_the_windows_kept(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["sla"].update(windows=48, windows_kept=45, kept_share=45 / 48)
    lines = _text(run_summary_table(summary)).splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(re.fullmatch(r"│ SLA +│ mean_bsld <= 20 per calendar week │", x) for x in lines)
    assert any(re.fullmatch(r"│ SLA windows kept +│ +45 of 48 \(93\.8%\) │", x) for x in lines)
    summary["sla"].update(window_s=2 * 86400.0, windows=0, windows_kept=0, kept_share=None)
    text = _text(run_summary_table(summary))
    assert "mean_bsld <= 20 per window of 2 days" in text and "- (no window with jobs)" in text
    del summary["sla"]  # a summary written before the SLA windows
    text = _text(run_summary_table(summary))
    assert "SLA" not in text and "mean bounded slowdown" in text


def test_olsctl_run_prints_the_sla_windows_kept(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(tmp_path)
    write_swf(tmp_path / "tiny.swf")
    assert main(["run", "--trace", "tiny.swf", "--out", "o", "--set", "sla.max=1.4"]) == 0
    sla = json.loads((tmp_path / "o" / "summary.json").read_text())["sla"]
    assert 0 < sla["windows_kept"] < sla["windows"] == 2
    out = capsys.readouterr().out
    assert re.search(r"│ SLA +│ mean_bsld <= 1\.4 per calendar week │", out), out
    assert re.search(r"│ SLA windows kept +│ +1 of 2 \(50\.0%\) │", out), out


def test_sla_plot_marks_the_windows_that_broke_the_sla(run_dir):
    pytest.importorskip("matplotlib")
    from olsctl.report import plot_data, sla_figure

    summary = json.loads((run_dir / "summary.json").read_text())
    rows = summary["weekly"]
    assert len(rows) == 2 and all(w["sla_kept"] for w in rows)
    rows[1].update(mean_bsld=31.5, sla_kept=False)  # as if the second week broke it
    summary["sla"].update(windows_kept=1, kept_share=0.5)
    mpl = plot_data(load_source(run_dir)).mpl
    fig = sla_figure(RunEntry(run_dir, summary, "tiny", "easy/OLS"), mpl)
    top, bottom = fig.axes[:2]
    lines = {line.get_label(): line for line in top.lines}
    assert list(lines["mean bounded slowdown of the window's jobs"].get_ydata()) == \
        [rows[0]["mean_bsld"], 31.5]
    assert list(lines["p95 bounded slowdown of the window's jobs"].get_ydata()) == \
        [w["p95_bsld"] for w in rows]
    assert list(lines["SLA: mean_bsld <= 20"].get_ydata()) == [20, 20]
    assert lines["SLA: mean_bsld <= 20"].get_linestyle() == "--"
    assert list(lines["mean_bsld of a window that broke it"].get_ydata()) == [31.5]
    assert len(top.patches) == len(bottom.patches) == 1  # the broken window, shaded
    assert top.get_yscale() == "log"
    below = {line.get_label(): line for line in bottom.lines}
    assert list(below["mean active processors"].get_ydata()) == \
        [w["mean_active_procs"] for w in rows]
    assert list(below["machine (32)"].get_ydata()) == [32, 32]
    assert "1 of 2 windows with jobs kept (50.0%)" in fig.get_suptitle()
    # a wait SLA: the waits in hours against its bound
    summary["sla"].update(metric="max_wait_s", max=7200.0)
    fig = sla_figure(RunEntry(run_dir, summary, "tiny", "easy/OLS"), mpl)
    lines = {line.get_label(): line for line in fig.axes[0].lines}
    assert list(lines["max wait of the window's jobs"].get_ydata()) == \
        pytest.approx([w["max_wait_s"] / 3600 for w in rows])
    assert list(lines["SLA: max_wait_s <= 7200"].get_ydata()) == [2.0, 2.0]


def test_an_older_summary_is_reported_without_the_sla(run_dir, tmp_path, capsys,
                                                      monkeypatch):
    """A summary.json written before the SLA windows (no sla, rows without the new
    figures): the tables and plots as before, no SLA rows, no sla plot, no traceback."""
    _wide(monkeypatch)
    pytest.importorskip("matplotlib")
    from olsctl.report import plot_data, weekly_figure
    from olsctl.report.figures import _plan

    from olsctl.report import has_sla_windows

    old = tmp_path / "old"
    shutil.copytree(run_dir, old, ignore=shutil.ignore_patterns("report"))

    def strip_rows(summary: dict) -> None:
        for row in summary["weekly"]:
            for key in ("start_s", "jobs", "p95_bsld", "mean_wait_s", "max_wait_s",
                        "mean_active_procs", "sla_kept"):
                del row[key]

    summary = json.loads((old / "summary.json").read_text())
    assert has_sla_windows(summary)
    strip_rows(summary)
    assert not has_sla_windows(summary)  # the sla plot needs the rows' figures too
    _edit_summary(old, lambda s: (strip_rows(s), s.pop("sla")))
    code, text, err = _report(capsys, str(old))
    assert code == 0, err
    assert "│ SLA" not in text and "mean bounded slowdown" in text
    assert sorted(f.name for f in (old / "report").iterdir()) == \
        ["activity.png", "power.png", "weekly.png"]
    source = load_source(old)
    top = weekly_figure(source, plot_data(source).mpl).axes[0]  # the controller's SLA
    assert [line.get_ydata()[0] for line in top.lines if line.get_linestyle() == "--"] == [20]
    study = tmp_path / "study"  # nor a trade-off plot for a study of such runs
    shutil.copytree(old, study / "runs" / "a", ignore=shutil.ignore_patterns("report"))
    (study / "results.csv").write_text("id,jobs,mean_bsld\na,150,1.5\n")
    names = [name for name, _ in _plan(plot_data(load_source(study)))]
    assert "tradeoff" not in names and "weekly" in names


def test_tradeoff_plot_places_each_run(study_dir):
    """One column per log (savings on top, energy below); each scheme one colour; a run
    sits at (share of windows kept, its savings) and (share, energy / the log's run that
    saves least, here EASY)."""
    pytest.importorskip("matplotlib")
    from olsctl.report import plot_data, tradeoff_figure

    source = load_source(study_dir)
    for k, run in enumerate(source.runs):  # distinct shares (the tiny logs keep every week)
        run.summary["sla"]["kept_share"] = 0.5 + 0.1 * k
    fig = tradeoff_figure(source, plot_data(source).mpl)
    logs = source.logs
    assert len(fig.axes) == 2 * len(logs)  # savings and energy rows (no cap moves here)

    def points(ax) -> set:
        return {(line.get_color(), round(float(x), 9), round(float(y), 9))
                for line in ax.lines for x, y in zip(line.get_xdata(), line.get_ydata())}

    schemes = list(dict.fromkeys(r.variant for r in source.runs))
    for k, run in enumerate(source.runs):
        col = logs.index(run.log)
        color = f"C{schemes.index(run.variant)}"
        share = round(100 * (0.5 + 0.1 * k), 9)
        savings = round(100 * run.summary["metrics"]["processor_savings"], 9)
        assert (color, share, savings) in points(fig.axes[col])
        easy = next(r for r in source.runs if r.log == run.log and r.variant == "EASY")
        ratio = round(100 * run.summary["power"]["energy_j"] / easy.summary["power"]["energy_j"],
                      9)
        assert (color, share, ratio) in points(fig.axes[len(logs) + col])
    assert fig.axes[0].get_title() == logs[0]
    assert "each run judged by its own SLA" in fig.get_suptitle()


def test_study_weekly_plot_draws_each_runs_sla(study_dir):
    """Runs without a controller are judged by mean_bsld <= 200, with it by its 20."""
    pytest.importorskip("matplotlib")
    from olsctl.report import plot_data, weekly_figure

    source = load_source(study_dir)
    fig = weekly_figure(source, plot_data(source).mpl)
    for ax in fig.axes[:2]:  # the slowdown panel of each log
        bounds = sorted(line.get_ydata()[0] for line in ax.lines
                        if line.get_label().startswith("SLA: mean_bsld <= "))
        assert bounds == [20, 200]


def test_weekly_plot_names_windows_that_are_not_weeks(run_dir, tmp_path):
    pytest.importorskip("matplotlib")
    from olsctl.report import plot_data, weekly_figure

    folder = tmp_path / "days"
    shutil.copytree(run_dir, folder, ignore=shutil.ignore_patterns("report"))
    source = load_source(folder)
    mpl = plot_data(source).mpl
    fig = weekly_figure(source, mpl)
    assert fig.get_suptitle().endswith(": weekly transient metrics")
    assert fig.axes[1].get_xlabel() == "calendar week (start date)"
    source.runs[0].summary["sla"]["window_s"] = 2 * 86400.0  # rows of two days
    fig = weekly_figure(source, mpl)
    assert fig.get_suptitle().endswith(": per SLA window transient metrics")
    assert fig.axes[0].get_title() == "tiny: mean bounded slowdown of the SLA window's jobs"
    assert fig.axes[1].get_xlabel() == "SLA window (start date)"


def test_power_budget_saved_is_one_minus_the_mean_cap_over_the_peak():
    from olsctl.report.drawing import _budget_saved

    summary = {"metrics": {"processors": 100},
               "config": {"power": {"peak_w": 1000.0},
                          "controller": {"candidates": {"power_cap": {"fraction": [0.5, 1]}}}},
               "power": {"mean_cap_w": 60_000.0}}
    assert _budget_saved(summary) == pytest.approx(40.0)  # 1 - 60 kW / 100 kW
    summary["config"]["controller"]["candidates"] = {"active_procs": {"fraction": [1.0]}}
    assert _budget_saved(summary) is None  # the cap does not move: nothing saved on it
