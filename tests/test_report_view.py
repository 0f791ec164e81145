"""What ``olsctl study`` and ``olsctl report`` show at any width, and what their plots
draw: the identifying columns of the tables whole at 200, 80 and 60 columns (fewer figure
columns, named in a note, or one block per row), a CSR below 1 never shown as 100% and
always with its sampling intervals over the cap, the cap line of power plots reduced to
the plot's resolution, and the weekly plot's SLA lines told apart.

Everything here is built from small hand-written files and summaries; nothing is
simulated.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from test_study import write_tiny_swf

from olsctl.config import build_config
from olsctl.report import RunEntry, Source, report_tables, study_table
from olsctl.report.reading import intervals_over_cap
from olsctl.report.tables import STUDY_FIGURES
from olsctl.study import load_study
from olsctl.study import study_table as run_table
from olsctl.terminal import csr_text

WIDTHS = (200, 80, 60)
LOGS = ("SDSC-BLUE-2000-4.2-cln", "KTH-SP2-1996-2.1-cln")
SCHEMES = ("EASY", "procs+feedback", "joint+feedback")


def _render(renderable, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def _tokens(text: str, value: str) -> int:
    """How often ``value`` stands whole in ``text`` (between spaces or line ends)."""
    return len(re.findall(rf"(?<!\S){re.escape(value)}(?!\S)", text))


def _left_out(text: str) -> str:
    """The note naming the figure columns left out, on one line."""
    flat = " ".join(text.split())
    found = re.search(r"not shown for want of width: (.*?) \(a terminal", flat)
    return found.group(1) if found else ""


def _check_whole(text: str, width: int, rows: list[tuple[tuple[str, ...], dict[str, str]]]
                 ) -> None:
    """Every identifying value whole, once per row that has it; no cell cut; every
    figure either whole in every row or its heading named as left out (none at 200)."""
    assert "…" not in text and max(len(x) for x in text.splitlines()) <= width, text
    blocks = "one block per row" in " ".join(text.split())
    for value in {v for keys, _ in rows for v in keys}:
        needed = sum(value in keys for keys, _ in rows)  # the log shows once per group
        assert _tokens(text, value) >= (needed if blocks or value not in LOGS else 1), \
            (value, text)
    left_out = _left_out(text)
    for _keys, figures in rows:
        for head, cell in figures.items():
            whole = f"{head} {cell}" if blocks else cell
            assert whole in text or head in left_out, (head, cell, text)
    if width == 200:
        assert not left_out and not blocks, text


# --- the report's study table -----------------------------------------------------------

def _power_csv(path: Path, samples: int, over: list[int], cap_w=lambda k: 30000.0) -> None:
    """A power.csv of ``samples`` 300 s intervals, those in ``over`` over the cap."""
    lines = ["time,mean_power_w,peak_power_w,cap_w,within_cap"]
    for k in range(samples):
        lines.append(f"{300 * k},20000,25000,{cap_w(k):g},{0 if k in over else 1}")
    path.write_text("\n".join(lines) + "\n")


def _report_source(tmp_path: Path) -> Source:
    """A study of 2 logs x 2 SLA bounds x 3 schemes; one run over the cap in 3 of 15,000
    sampling intervals (CSR 0.9998)."""
    keys = tuple(k for k, *_ in STUDY_FIGURES)
    runs = []
    for i, (log, sla, scheme) in enumerate((log, sla, scheme) for log in LOGS
                                           for sla in ("100", "400") for scheme in SCHEMES):
        path = tmp_path / f"run{i}"
        path.mkdir()
        csr = 1.0
        if i == 4:
            _power_csv(path / "power.csv", 15000, [10, 500, 9000])
            csr = 1 - 3 / 15000
        results = dict(zip(keys, (1.5 + i, 3600.0 * i, 0.6371 + i / 1000, 0.1 * (i % 3),
                                  3.6e9 * (20 + i), csr, 0.75)))
        summary = {"power": {"csr": csr, "cap": {"fraction": 1.0}}}
        runs.append(RunEntry(path, summary, log, f"{sla}, {scheme}", f"id{i}", results,
                             (sla, scheme)))
    return Source(tmp_path, "study", tuple(runs), ("trace", "sla.max", "scheme"), keys)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_report_study_table_keeps_its_identifying_columns_whole(tmp_path, width):
    source = _report_source(tmp_path)
    text = _render(study_table(source), width)
    heads = [head for _k, head, *_ in STUDY_FIGURES]
    rows = []
    for run in source.runs:
        rows.append(((run.log, *run.labels), dict(zip(heads, _report_cells(run)))))
    _check_whole(text, width, rows)
    if width == 200:
        assert "99.98% (3 over)" in text


def _report_cells(run: RunEntry) -> list[str]:
    """The texts the table should show for ``run`` (as results.csv holds them)."""
    r = run.results
    csr = "99.98% (3 over)" if r["csr"] < 1 else "100.0%"
    return [f"{r['mean_bsld']:,.2f}", f"{r['mean_wait_s'] / 3600:,.2f}",
            f"{r['utilization']:.3f}", f"{100 * r['processor_savings']:.1f}%",
            f"{r['energy_j'] / 3.6e9:,.2f}", csr, "75.0%"]


# --- olsctl study's table ---------------------------------------------------------------

STUDY = """\
base: {policy: {name: easy}, power: {cap: {fraction: 1.0}}}
grid:
  trace: [SDSC-BLUE-2000-4.2-cln.swf, KTH-SP2-1996-2.1-cln.swf]
  sla.max: [100, 400]
  scheme:
    EASY: {controller: null}
    procs+feedback: {controller: {interval_s: 3600, sla: {feedback: true}}}
    joint+feedback: {controller: {interval_s: 600, sla: {feedback: true}}}
"""


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("ids", [False, True])
def test_the_study_table_keeps_its_identifying_columns_whole(tmp_path, width, ids):
    for log in LOGS:
        write_tiny_swf(tmp_path / f"{log}.swf", jobs=5)
    (tmp_path / "study.yaml").write_text(STUDY)
    study = load_study(tmp_path / "study.yaml", out=str(tmp_path / "out"))
    done = {}
    for k, p in enumerate(study.points[:-1]):  # the last one missing
        csr = 1 - 2 / 15000 if k == 1 else 1.0
        if k == 1:
            (study.out_dir / "runs" / p.run_id).mkdir(parents=True)
            _power_csv(study.out_dir / "runs" / p.run_id / "power.csv", 15000, [3, 4])
        done[p.run_id] = {"metrics": {"mean_bsld": 1.25 + k, "mean_wait_s": 7200.0,
                                      "utilization": 0.6371, "processor_savings": 0.25},
                          "power": {"energy_j": 3.6e9, "csr": csr, "cap": {"fraction": 1.0}},
                          "sla": {"kept_share": 0.5}}
    text = _render(run_table(study, done, {}, ids=ids), width)
    rows = []
    for k, p in enumerate(study.points):
        keys = (*p.labels, p.run_id) if ids else (str(k + 1), *p.labels)
        status = "done" if p.run_id in done else "missing"
        figures = {} if ids or status == "missing" else {
            "bsld": f"{1.25 + k:.2f}", "wait h": "2.0", "util": "0.637", "saved": "25.0%",
            "MWh": "1.00", "CSR": "99.99% (2 over)" if k == 1 else "100.0%", "SLA %": "50.0"}
        rows.append(((*keys, status), figures))
    _check_whole(text, width, rows)
    if width == 200 and not ids:
        assert "99.99% (2 over)" in text


# --- CSR: never 100% below 1, with its intervals over the cap --------------------------

@pytest.mark.parametrize("csr, text", [(0.9998, "99.98%"), (0.99999, "99.999%"),
                                       (0.9999999, ">99.999%"), (1.0, "100.0%"),
                                       (0.982, "98.2%"), (0.99949, "99.9%")])
def test_a_csr_below_one_never_reads_100_percent(csr, text):
    assert csr_text(csr) == text


def _run_summary(csr: float) -> dict:
    """A capped power run's summary.json (only what the summary table reads)."""
    return {"trace": "t.swf", "config": build_config({}).as_dict(), "active_procs_at_start": 4,
            "load": {"kept": 3, "records": 3, "dropped": {}},
            "metrics": {"processors": 4, "mean_bsld": 1.0, "p95_bsld": 1.0, "max_bsld": 1.0,
                        "mean_wait_s": 0.0, "max_wait_s": 0.0, "mean_turnaround_s": 1.0,
                        "utilization": 0.5, "utilization_active": 0.5,
                        "processor_savings": 0.0, "makespan_s": 86400.0},
            "power": {"energy_j": 3.6e9, "mean_power_w": 5e4, "peak_power_w": 9e4,
                      "csr": csr, "forced_starts": 25, "cap": {"fraction": 0.6},
                      "limit": "none", "scheduler_csr": csr}}


def test_the_run_report_shows_the_csr_with_its_intervals_over_the_cap(tmp_path):
    _power_csv(tmp_path / "power.csv", 15000, [7, 70, 700])
    summary = _run_summary(1 - 3 / 15000)
    assert intervals_over_cap(tmp_path, summary) == 3
    source = Source(tmp_path, "run", (RunEntry(tmp_path, summary, "t", "easy"),))
    text = _render(report_tables(source)[0], 100)
    assert re.search(r"│ capping success rate +│ +99\.98% \(3 sampling intervals over the "
                     r"cap\) │", text), text


# --- plots ------------------------------------------------------------------------------

def _power_run(folder: Path, cap_w) -> RunEntry:
    """A run directory with 15,000 power samples under the cap ``cap_w(k)`` of sample k,
    3 of them over it, and the other files a report reads."""
    folder.mkdir()
    _power_csv(folder / "power.csv", 15000, [5, 50, 5000], cap_w)
    (folder / "timeseries.csv").write_text("time,queue_length,busy_procs,active_procs\n"
                                           "0,0,2,8\n4500000,0,0,8\n")
    (folder / "jobs.csv").write_text("job_id,bounded_slowdown\n1,1.0\n2,3.5\n")
    summary = _run_summary(1 - 3 / 15000)
    summary["metrics"].update(first_submit_s=0.0, processors=8)
    summary["config"]["power"] = {"sample_s": 300.0, "peak_w": 5000.0}
    return RunEntry(folder, summary, "t", "knapsack/OLS")


def _power_axes(entry: RunEntry):
    pytest.importorskip("matplotlib")
    from olsctl.report import power_figure, run_series
    from olsctl.report.drawing import _matplotlib

    source = Source(entry.path, "run", (entry,))
    fig = power_figure(source, run_series(entry), _matplotlib())
    return fig.axes[0]


def test_the_cap_line_of_a_power_plot_is_reduced_to_the_plots_resolution(tmp_path):
    """A cap that changes 3,000 times is drawn as at most a few hundred steps (the lowest
    cap per chunk of samples), its range shaded; a cap with few changes exactly."""
    ax = _power_axes(_power_run(tmp_path / "busy", lambda k: 15000.0 + 5000.0 * (k // 5 % 2)))
    (line,) = [x for x in ax.lines if x.get_label().startswith("cap")]
    assert len(line.get_xdata()) <= 400
    assert set(np.asarray(line.get_ydata()).tolist()) == {15.0}  # the lowest cap, kW
    (band,) = [c for c in ax.collections if c.get_label().startswith("cap")]
    ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
    assert ys.max() == 20.0  # up to the highest cap in force
    assert "capping success rate 99.98%, 3 sampling intervals over the cap" in ax.get_title()
    steps = {0: 30000.0, 4000: 20000.0, 9000: 25000.0}
    ax = _power_axes(_power_run(tmp_path / "few", lambda k: steps[max(s for s in steps
                                                                      if s <= k)]))
    (line,) = [x for x in ax.lines if x.get_label().startswith("cap")]
    assert np.asarray(line.get_ydata()).tolist() == [30.0, 20.0, 25.0, 25.0]
    assert not [c for c in ax.collections if c.get_label().startswith("cap")]


def test_the_sla_lines_of_the_weekly_plot_are_told_apart(tmp_path):
    """Three SLA bounds in a study: three lines, each its own style, named in the legend
    by metric and bound."""
    pytest.importorskip("matplotlib")
    from olsctl.report import weekly_figure
    from olsctl.report.drawing import _matplotlib

    runs = []
    for i, bound in enumerate((100, 200, 400)):
        weekly = [{"week": w, "week_start": f"1996-01-{1 + 7 * w:02d}", "mean_bsld": 2.0 + w,
                   "utilization": 0.5} for w in range(3)]
        summary = {"weekly": weekly, "config": {},
                   "sla": {"metric": "mean_bsld", "max": bound, "window_s": 604800.0}}
        runs.append(RunEntry(tmp_path, summary, "t", f"{bound}, EASY", f"id{i}"))
    source = Source(tmp_path, "study", tuple(runs), ("sla.max",))
    fig = weekly_figure(source, _matplotlib())
    lines = [x for x in fig.axes[0].lines if x.get_label().startswith("SLA")]
    assert sorted(x.get_label() for x in lines) == [
        "SLA: mean_bsld <= 100", "SLA: mean_bsld <= 200", "SLA: mean_bsld <= 400"]
    styles = {(x.get_linestyle(), x.get_color()) for x in lines}
    assert len(styles) == 3, styles
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert {"SLA: mean_bsld <= 100", "SLA: mean_bsld <= 200", "SLA: mean_bsld <= 400"} \
        <= set(texts)
