"""The best fixed setting in hindsight: for each run of a study that has a controller
(an *adaptive* run), the runs of the same study without one (*fixed* runs) it is
compared with, the fixed run that saves the most while keeping at least as large a share
of SLA windows, and the table that shows them side by side.

The matching rule (docs/studies.md, "The best fixed setting in hindsight"):

- the *setting axes* of a grid are the entries along which a run's machine setting
  changes: two runs whose labels differ on that entry alone differ in having a
  controller or not, or in their ``procs``, ``active_procs`` or ``power.cap``;
- a fixed run is compared with an adaptive run when both replay the same log at the same
  ``load_scale``, are judged by the same SLA (metric, bound and window), and carry the
  same label on every grid entry that is not a setting axis;
- an adaptive run whose controller moves only the power cap is compared on the power
  budget with the fixed runs on all the log's processors; any other adaptive run on
  processors with the fixed runs that are not capped below their machine's peak;
- savings are counted against the largest machine the study runs the log on: a fixed
  run on ``procs: N`` saves ``1 - N / P``, whatever its own summary says;
- the best fixed run keeps at least the adaptive run's share of windows and saves the
  most; ties go to the larger share kept, then to fewer jobs too wide, then to grid order.

A fixed machine narrower than some of the log's jobs (``procs`` below their width) runs
without them: the loader drops and counts them (summary.json ``load.dropped``, "wider
than the machine"). The comparison shows that count, as "jobs too wide", beside the
setting; its windows are judged without those jobs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from olsctl.fitted_table import Column, FittedTable
from olsctl.metrics import WEEK_S
from olsctl.terminal import _pct

#: summary.json ``load.dropped`` reason of the jobs wider than the machine
TOO_WIDE = "wider than the machine"
#: what an adaptive run's savings are counted in
PROCESSORS, BUDGET = "processors", "power budget"
#: shares and savings closer than this are equal (they are ratios of counts)
_EPS = 1e-12


@dataclass(frozen=True)
class HindsightRun:
    """A run of a study as the comparison sees it: its place in grid order, its grid
    labels (one per column, the ``trace`` column left out), its log and summary.json."""

    index: int
    labels: tuple[str, ...]
    log: str
    summary: dict

    @property
    def adaptive(self) -> bool:
        return isinstance(self.summary["config"].get("controller"), dict)

    @property
    def kept(self) -> float | None:
        """The share of the run's SLA windows (with jobs) that kept its SLA."""
        sla = self.summary.get("sla")
        share = sla.get("kept_share") if isinstance(sla, dict) else None
        return float(share) if isinstance(share, (int, float)) else None


@dataclass(frozen=True)
class Fixed:
    """A fixed run compared with an adaptive one: what it saves (shares of the log's
    largest machine and of its peak power; budget None without power), how many of the
    log's jobs its machine was too narrow to run, and its setting in words."""

    run: HindsightRun
    kept: float
    procs_saved: float
    budget_saved: float | None
    too_wide: int
    setting: str


@dataclass(frozen=True)
class Comparison:
    """An adaptive run, what it saves (``measure``: processors or power budget), the
    fixed runs it is compared with and the best of them (None: none keeps as many
    windows, or there is no fixed run to compare)."""

    adaptive: HindsightRun
    measure: str
    kept: float
    saved: float
    candidates: tuple[Fixed, ...]
    best: Fixed | None


def setting_axes(runs: Sequence[HindsightRun]) -> set[int]:
    """The grid columns along which the machine setting changes: some two runs whose
    labels differ there alone differ in controller, procs, active_procs or power.cap."""
    width = len(runs[0].labels) if runs else 0
    axes = set()
    for axis in range(width):
        seen: dict[tuple, str] = {}
        for run in runs:
            rest = (run.log, run.labels[:axis] + run.labels[axis + 1:])
            machine = _machine_key(run.summary["config"])
            if seen.setdefault(rest, machine) != machine:
                axes.add(axis)
                break
    return axes


def _machine_key(config: dict) -> str:
    power = config.get("power")
    cap = power.get("cap") if isinstance(power, dict) else None
    return json.dumps([isinstance(config.get("controller"), dict), config.get("procs"),
                       config.get("active_procs"), cap], sort_keys=True, default=str)


def compare(runs: Sequence[HindsightRun]) -> list[Comparison]:
    """Every adaptive run with a share of windows kept, in grid order, with its fixed
    runs and the best of them; empty when the study has no fixed run to compare with."""
    axes = setting_axes(runs)
    full = _largest_machines(runs)
    out = []
    for run in runs:
        if not run.adaptive or run.kept is None:
            continue
        measure = _measure(run.summary)
        fixed = [_fixed(f, *full[f.log]) for f in runs
                 if not f.adaptive and f.kept is not None and _matches(run, f, axes)]
        fixed = [f for f in fixed if _in_family(f, measure)]
        saved = _adaptive_saved(run.summary, measure, full[run.log][0])
        if saved is None:
            continue
        out.append(Comparison(run, measure, run.kept, saved, tuple(fixed),
                              best_fixed(run.kept, measure, fixed)))
    return out if any(c.candidates for c in out) else []


def best_fixed(kept: float, measure: str, fixed: Sequence[Fixed]) -> Fixed | None:
    """The fixed run that keeps at least ``kept`` of the windows and saves the most on
    ``measure``; ties: the larger share kept, then fewer jobs too wide, then the first
    in grid order. None when no fixed run keeps as many windows."""
    keeping = [f for f in fixed if f.kept >= kept - _EPS]
    if not keeping:
        return None
    return min(keeping, key=lambda f: (-round(saved_on(f, measure), 12), -round(f.kept, 12),
                                       f.too_wide, f.run.index))


def saved_on(fixed: Fixed, measure: str) -> float:
    """What a fixed run saves on ``measure`` (a share; 0 for a budget it cannot know)."""
    if measure == BUDGET:
        return fixed.budget_saved or 0.0
    return fixed.procs_saved


def _matches(adaptive: HindsightRun, fixed: HindsightRun, axes: set[int]) -> bool:
    a, f = adaptive.summary, fixed.summary
    same = adaptive.log == fixed.log and \
        a["config"].get("load_scale") == f["config"].get("load_scale") and \
        _sla_key(a) == _sla_key(f)
    return same and all(x == y for i, (x, y) in enumerate(zip(adaptive.labels, fixed.labels))
                        if i not in axes)


def _sla_key(summary: dict) -> tuple:
    sla = summary.get("sla") or {}
    return sla.get("metric"), sla.get("max"), sla.get("window_s")


def _largest_machines(runs: Sequence[HindsightRun]) -> dict[str, tuple[float, int]]:
    """Per log, the largest machine (processors) the study runs it on, and how many of
    the log's jobs are wider than even that one (no fixed setting's doing)."""
    full: dict[str, tuple[float, int]] = {}
    for run in runs:
        procs, wide = float(run.summary["metrics"]["processors"]), _too_wide(run.summary)
        known = full.get(run.log)
        if known is None or procs > known[0] or (procs == known[0] and wide < known[1]):
            full[run.log] = (procs, wide)
    return full


def _too_wide(summary: dict) -> int:
    """The jobs the loader dropped as wider than the run's machine."""
    return int((summary["load"].get("dropped") or {}).get(TOO_WIDE, 0))


def _measure(summary: dict) -> str:
    """Power budget for a controller that moves only the cap, else processors."""
    cands = summary["config"]["controller"].get("candidates") or {}
    procs = (cands.get("active_procs") or {}).get("fraction", [0.0])
    return BUDGET if "power_cap" in cands and procs == [1.0] else PROCESSORS


def _peak_w(summary: dict) -> float | None:
    power = summary["config"].get("power")
    peak = power.get("peak_w") if isinstance(power, dict) else None
    return float(peak) if isinstance(peak, (int, float)) else None


def _mean_cap_w(summary: dict) -> float | None:
    power = summary.get("power")
    cap = power.get("mean_cap_w") if isinstance(power, dict) else None
    return float(cap) if isinstance(cap, (int, float)) else None


def _adaptive_saved(summary: dict, measure: str, full: float) -> float | None:
    """An adaptive run's savings as a share of the log's largest machine (or its peak)."""
    if measure == PROCESSORS:
        return 1.0 - _mean_active(summary) / full
    peak, cap = _peak_w(summary), _mean_cap_w(summary)
    return None if peak is None or cap is None else 1.0 - cap / (full * peak)


def _mean_active(summary: dict) -> float:
    """Time-mean active processors (from the savings in a summary without the figure)."""
    m = summary["metrics"]
    value = m.get("mean_active_procs")
    if isinstance(value, (int, float)):
        return float(value)
    return float(m["processors"]) * (1.0 - float(m.get("processor_savings") or 0.0))


def _fixed(run: HindsightRun, full: float, base_wide: int) -> Fixed:
    """A fixed run's setting and savings against the log's largest machine ``full``
    (processors), and the jobs it drops beyond that machine's ``base_wide``."""
    sm = run.summary
    active = _mean_active(sm)
    peak = _peak_w(sm)
    budget = None
    if peak is not None:
        own = float(sm["metrics"]["processors"]) * peak
        cap = min(_mean_cap_w(sm) or own, own)
        budget = 1.0 - cap / (full * peak)
    too_wide = _too_wide(sm) - base_wide
    capped = budget is not None and budget > 1.0 - active / full + _EPS
    setting = (f"{active:,.0f} procs ({_pct(active / full)})" if not capped
               else f"cap {_pct(1.0 - budget)} of peak"
               + ("" if active >= full else f", {active:,.0f} procs"))
    return Fixed(run, run.kept, 1.0 - active / full, budget, max(too_wide, 0), setting)


def _in_family(fixed: Fixed, measure: str) -> bool:
    """Fixed machines for a processors comparison (no cap below their peak), fixed caps
    on every processor for a power budget one."""
    if measure == BUDGET:
        return fixed.budget_saved is not None and fixed.procs_saved <= _EPS
    return fixed.budget_saved is None or fixed.budget_saved <= fixed.procs_saved + _EPS


def hindsight_table(columns: Sequence[str], runs: Sequence[HindsightRun],
                    title: str = "best fixed setting in hindsight") -> FittedTable | None:
    """Per adaptive run: what it kept and saved, and the best fixed setting's; None when
    the study compares no adaptive run with a fixed one. ``columns`` name the runs'
    labels."""
    comparisons = compare(runs)
    if not comparisons:
        return None
    axes = setting_axes(runs)
    others = [i for i in range(len(columns)) if i not in axes]
    windows = _windows_word(runs)
    heads = ("log", *(columns[i] for i in others), "adaptive", "on", f"{windows} kept",
             "saved", "best fixed", f"{windows} kept", "saved", "jobs too wide")
    right = {f"{windows} kept", "saved", "jobs too wide"}
    cols = tuple(Column(h, key=True, justify="right" if h in right else "left")
                 for h in heads)
    caption = (f"fixed runs of the same log, load and SLA with the same {_words(columns, others)}"
               f"; savings against the log's largest machine; jobs too wide: the log's jobs "
               f"the fixed machine is too narrow for, left out of its run; on: what is saved, "
               f"processors or the power budget")
    table = FittedTable(title, caption, cols, grouped=1)
    for k, c in enumerate(comparisons):
        run = c.adaptive
        adaptive = ", ".join(run.labels[i] for i in sorted(axes)) or "-"
        head = [run.log, *(run.labels[i] or "-" for i in others), adaptive,
                "procs" if c.measure == PROCESSORS else "budget",
                _pct(c.kept), _pct(c.saved)]
        if c.best is None:
            why = "none keeps as many" if c.candidates else "no fixed run"
            tail = [f"{why} {windows}" if c.candidates else why, "-", "-", "-"]
        else:
            b = c.best
            tail = [b.setting, _pct(b.kept), _pct(saved_on(b, c.measure)), f"{b.too_wide:,}"]
        last = k == len(comparisons) - 1 or comparisons[k + 1].adaptive.log != run.log
        table.add_row(*head, *tail, end_section=last and k < len(comparisons) - 1)
    return table


def _windows_word(runs: Sequence[HindsightRun]) -> str:
    """``weeks`` when every run's SLA window is a week, else ``windows``."""
    lengths = {(r.summary.get("sla") or {}).get("window_s") for r in runs}
    return "weeks" if lengths == {float(WEEK_S)} or lengths == {WEEK_S} else "windows"


def _words(columns: Sequence[str], others: list[int]) -> str:
    return "grid labels" if not others else ", ".join(columns[i] for i in others)


def runs_of(columns: Sequence[str], rows: Sequence[tuple[tuple[str, ...], str, dict]]
            ) -> tuple[list[str], list[HindsightRun]]:
    """``(labels, log, summary)`` rows in grid order as :class:`HindsightRun` entries,
    the ``trace`` column taken out of the labels (the log stands for it); summaries
    without what the comparison reads are left out."""
    keep = [i for i, c in enumerate(columns) if c != "trace"]
    runs = [HindsightRun(n, tuple(labels[i] for i in keep), log, summary)
            for n, (labels, log, summary) in enumerate(rows) if _readable(summary)]
    return [columns[i] for i in keep], runs


def _readable(summary: dict) -> bool:
    """Whether a summary holds what the comparison reads (a whole run's does)."""
    return all(isinstance(summary.get(k), dict) for k in ("config", "metrics", "load")) \
        and isinstance(summary["metrics"].get("processors"), (int, float))

