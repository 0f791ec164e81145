"""What the terminal shows of a run and a log: rich renderers, data in, renderables out
(the run summary table, the settings, SLA, power and budget rows, the trace and power
information views, the run's progress bar) and the number texts they share with
:mod:`olsctl.report`'s tables. The CLI prints them; tests render them to a fixed-width
console."""

from __future__ import annotations

from rich.console import Group
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from olsctl.metrics import WEEK_S


def _f(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def _pct(x: float | None) -> str:
    if x is None:
        return "-"
    text = f"{100 * x:.1f}%"
    return "0.0%" if text == "-0.0%" else text  # a tiny negative rounds to zero, unsigned


def csr_text(x: float | None) -> str:
    """A success rate (share of intervals within a cap) as a percentage that reads 100%
    only when every interval kept the cap: 0.9998 is ``99.98%``, 0.999996 ``>99.999%``."""
    if x is None or x >= 1.0:
        return _pct(x)
    for digits in (1, 2, 3):
        text = f"{100 * x:.{digits}f}%"
        if not text.startswith("100"):
            return text
    return ">99.999%"


#: the results.csv figures a narrow console's table of runs shows first (the others as
#: the width allows)
NARROW_FIRST = ("mean_bsld", "processor_savings", "energy_j", "sla_windows_kept_share", "csr",
                "utilization", "mean_wait_s")
#: what a table's CSR column means, for its caption
CSR_NOTE = "CSR: share of the power sampling intervals within the cap (n over: how many went over)"


def over_cap_text(over: int | None) -> str:
    """`` (25 over)``: the sampling intervals over the cap, after a table's CSR cell
    (nothing for none: its CSR reads 100%)."""
    return f" ({over:,} over)" if over else ""


def _plain(x: float | int) -> str:
    """A number as a setting is written: ``4``, ``0.45``, ``1`` for 1.0."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.10g}" if isinstance(x, float) else str(x)


#: words for settings left at None, by name (others read "none")
_NONE_WORDS = {"shares": "even"}


def setting_text(key: str, value: object) -> str:
    """A policy setting in words: ``4``, ``100, 1000, 10000 s``, ``even``, ``yes``,
    ``history (window 10, alpha 1)``; seconds (``_s``) and watts (``_w``) get a unit."""
    unit = " s" if key.endswith("_s") else " W" if key.endswith("_w") else ""
    if value is None:
        return _NONE_WORDS.get(key, "none")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        rest = ", ".join(f"{k} {setting_text(str(k), v)}" for k, v in value.items()
                         if k != "name")
        name = str(value.get("name", ""))
        return f"{name} ({rest})" if rest and name else name or rest
    if isinstance(value, (list, tuple)):
        items = [_plain(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                 else setting_text("", v) for v in value]
        return (", ".join(items) + unit) if items else "none"
    if isinstance(value, (int, float)):
        return _plain(value) + unit
    return str(value)


def policy_rows(policy: dict) -> list[tuple[str, str]]:
    """Table rows of a run's policy: its name, then each setting (indented) in words."""
    rows = [("policy", str(policy.get("name", "?")))]
    rows += [(f"  {key}", setting_text(key, value)) for key, value in policy.items()
             if key != "name"]
    return rows


def _days(seconds: float) -> str:
    return f"{seconds / 86400:,.1f} d"


def sla_window_text(window_s: float, dated: bool = True) -> str:
    """How long an SLA window is, in words: ``per calendar week`` (``per week`` when the
    weeks start at the first submission, ``dated`` False), ``per day``, ``per window of 3
    days``, ``per window of 6 hours``, ``per window of 900 s``."""
    if window_s == WEEK_S:
        return "per calendar week" if dated else "per week"
    for unit_s, unit in ((86400.0, "day"), (3600.0, "hour")):
        n = window_s / unit_s
        if n.is_integer():
            return f"per {unit}" if n == 1 else f"per window of {n:,.0f} {unit}s"
    return f"per window of {window_s:,.10g} s"


def sla_rows(summary: dict) -> list[tuple[str, str]]:
    """The table rows of a run's SLA (summary.json ``sla``): what it is, and how many of
    the windows with jobs kept it; none for a summary written before olsctl had them."""
    sla = summary.get("sla")
    if not isinstance(sla, dict):
        return []
    weekly = summary.get("weekly")
    dated = isinstance(weekly, list) and any(isinstance(r, dict) and r.get("week_start")
                                             for r in weekly)
    what = (f"{sla.get('metric', '?')} <= {float(sla['max']):g} "
            f"{sla_window_text(float(sla['window_s']), dated)}")
    n, kept = int(sla.get("windows") or 0), int(sla.get("windows_kept") or 0)
    share = sla.get("kept_share")
    count = f"{kept:,} of {n:,} ({_pct(share)})" if n else "- (no window with jobs)"
    return [("SLA", what), ("SLA windows kept", count)]


def run_summary_table(summary: dict, over_cap: int | None = None) -> Table:
    """The end-of-run table: load report, settings and whole-run metrics; ``over_cap``,
    when known, is the number of power sampling intervals over the cap."""
    m, load, cfg = summary["metrics"], summary["load"], summary["config"]
    table = Table(title=f"olsctl run: {summary['trace']}", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    for label, value in policy_rows(cfg["policy"]):
        table.add_row(label, value)
    table.add_row("estimates", cfg["estimates"])
    table.add_row("processors (active at start)",
                  f"{m['processors']} ({summary['active_procs_at_start']})")
    dropped = ", ".join(f"{n} {why}" for why, n in load["dropped"].items()) or "none"
    table.add_row("jobs kept / records", f"{load['kept']:,} / {load['records']:,}")
    table.add_row("dropped", dropped)
    table.add_row("mean bounded slowdown", _f(m["mean_bsld"]))
    table.add_row("p95 / max bounded slowdown", f"{_f(m['p95_bsld'], 2)} / {_f(m['max_bsld'], 2)}")
    table.add_row("mean wait", f"{_f(m['mean_wait_s'], 2)} s")
    table.add_row("max wait", f"{_f(m['max_wait_s'], 0)} s")
    table.add_row("mean turnaround", f"{_f(m['mean_turnaround_s'], 2)} s")
    for label, value in sla_rows(summary):
        table.add_row(label, value)
    table.add_row("utilization", _f(m["utilization"]))
    table.add_row("utilization of active processors", _f(m["utilization_active"]))
    table.add_row("processor savings", _pct(m["processor_savings"]))
    table.add_row("makespan", _days(m["makespan_s"]))
    controller = cfg.get("controller") or {}
    by_controller = "power_cap" in (controller.get("candidates") or {})
    for label, value in power_rows(summary.get("power"), by_controller, over_cap):
        table.add_row(label, value)
    for label, value in budget_rows(summary.get("budget")):
        table.add_row(label, value)
    return table


def capped(power: dict) -> bool:
    """Whether a power run had a cap (its own, or one the controller set)."""
    return power.get("cap") is not None or "mean_cap_w" in power


def cap_text(power: dict, by_controller: bool = False) -> str:
    """The cap of a power run in words: ``62.5% of peak``, ``80.0 kW``, ``a schedule of 3
    changes``, ``set by the controller`` or ``none``."""
    cap = power.get("cap")
    if by_controller:
        text = "set by the controller"
    elif cap is None:
        text = "none"
    elif isinstance(cap, dict) and "fraction" in cap:
        text = f"{_pct(cap['fraction'])} of peak"
    elif isinstance(cap, dict) and "schedule" in cap:
        n = len(cap["schedule"])
        text = f"a schedule of {n} change{'' if n == 1 else 's'}"
    elif isinstance(cap, (int, float)):
        text = f"{cap / 1e3:,.1f} kW"
    else:
        text = str(cap)
    return text


def power_rows(power: dict | None, by_controller: bool = False,
               over_cap: int | None = None) -> list[tuple[str, str]]:
    """Console rows of a run's power figures (none without a power section):
    energy, power, the cap, the capping success rate (with ``over_cap``, the number of
    sampling intervals over the cap) and the forced starts."""
    if not power:
        return []
    rows = [("energy", f"{power['energy_j'] / 3.6e9:,.2f} MWh"),
            ("mean / peak power", f"{power['mean_power_w'] / 1e3:,.1f} / "
                                  f"{power['peak_power_w'] / 1e3:,.1f} kW"),
            ("power cap", cap_text(power, by_controller))]
    if "mean_cap_w" in power:
        rows.append(("mean cap in force", f"{power['mean_cap_w'] / 1e3:,.1f} kW"))
    csr = "- (no cap)"
    if capped(power):
        over = "" if over_cap is None else \
            f" ({over_cap:,} sampling interval{'' if over_cap == 1 else 's'} over the cap)"
        csr = csr_text(power["csr"]) + over
    rows += [("capping success rate", csr),
             ("forced starts", f"{power.get('forced_starts', 0):,}")]
    if power.get("limit") == "throttle":
        rows += [("power limit", f"throttle ({power['share']}): "
                                 f"{'held' if power['limit_held'] else 'NOT held'}"),
                 ("scheduler's own CSR", csr_text(power["scheduler_csr"])),
                 ("time throttled", _pct(power["throttled_time_share"])),
                 ("jobs throttled", f"{power['jobs_throttled']:,}"),
                 ("work lost to throttling", f"{power['work_lost_proc_h']:,.1f} processor-h")]
    return rows


def budget_rows(budget: dict | None) -> list[tuple[str, str]]:
    """Console rows of the power budget RMAP and PARM keep (summary.json ``budget``)."""
    if not budget:
        return []
    rows = [("power bound (jobs' budget)", f"{budget['bound_w'] / 1e3:,.1f} kW "
                                           f"({budget['jobs_budget_w'] / 1e3:,.1f} kW)"),
            ("peak power held by jobs", f"{budget['peak_job_power_w'] / 1e3:,.1f} kW"),
            ("budget success rate", csr_text(budget["csr"])),
            ("forced starts", f"{budget['forced_starts']:,}"),
            ("jobs resized", f"{budget['jobs_resized']:,} of {budget['moldable_jobs']:,} "
                             f"moldable"),
            ("mean nodes / request", _f(budget["mean_nodes_over_request"], 3)),
            ("mean node cap", f"{budget['mean_node_cap_w']:,.1f} W")]
    if "exact_windows" in budget:
        rows.append(("knapsack windows", f"{budget['exact_windows']:,} exact, "
                                         f"{budget['greedy_windows']:,} greedy (largest "
                                         f"{budget['largest_greedy_window']:,})"))
    return rows


def trace_info_view(info: dict) -> Group:
    """Everything ``olsctl trace info`` shows."""
    return Group(_trace_head(info), _distributions(info), _size_runtime_buckets(info),
                 _estimate_accuracy(info))


def _trace_head(info: dict) -> Table:
    """The log at a glance: installation, machine, records kept and dropped, span, load."""
    load = info["load"]
    head = Table(title=f"{info['file']}", show_header=False, title_justify="left")
    head.add_column("what", style="bold")
    head.add_column("value")
    head.add_row("installation", info["installation"] or "-")
    head.add_row("machine processors", f"{info['machine_procs']:,}")
    head.add_row("records / kept", f"{load['records']:,} / {load['kept']:,}")
    dropped = ", ".join(f"{n} {why}" for why, n in load["dropped"].items()) or "none"
    head.add_row("dropped", dropped)
    if load["bad_lines_skipped"]:
        head.add_row("malformed lines skipped", f"{load['bad_lines_skipped']:,}")
    span = f"{info['span_days']:,.1f} days"
    if info["first_submit"]:
        span += f" ({info['first_submit']} to {info['last_submit']})"
    head.add_row("submit span", span)
    head.add_row("offered load", _f(info["offered_load"], 3))
    head.add_row("users", f"{info['users']:,}")
    return head


def _distributions(info: dict) -> Table:
    """Mean and quantiles of the jobs' processors and runtimes."""
    dist = Table(title="distributions", title_justify="left")
    dist.add_column("")
    for col in ("mean", "min", "p25", "median", "p75", "p95", "max"):
        dist.add_column(col, justify="right")
    for label, d, digits in (("processors", info["size"], 1),
                             ("runtime (s)", info["runtime_s"], 0)):
        dist.add_row(label, *(_f(d[k], digits)
                              for k in ("mean", "min", "p25", "median", "p75", "p95", "max")))
    return dist


def _size_runtime_buckets(info: dict) -> Table:
    """Jobs per range of processors and per range of runtime, side by side."""
    buckets = Table(title="jobs by size and runtime", title_justify="left")
    buckets.add_column("processors")
    buckets.add_column("jobs", justify="right")
    buckets.add_column("runtime")
    buckets.add_column("jobs", justify="right")
    sizes, runs = info["size"]["buckets"], info["runtime_s"]["buckets"]
    for i in range(max(len(sizes), len(runs))):
        s = sizes[i] if i < len(sizes) else {"range": "", "jobs": ""}
        r = runs[i] if i < len(runs) else {"range": "", "jobs": ""}
        buckets.add_row(s["range"], f"{s['jobs']:,}" if s["jobs"] != "" else "",
                        r["range"], f"{r['jobs']:,}" if r["jobs"] != "" else "")
    return buckets


def _estimate_accuracy(info: dict) -> Table:
    """How the users' requested times compare with the runtimes, and the sizes' shapes."""
    est = info["estimates"]
    acc = Table(title="user estimates (runtime / requested time)", show_header=False,
                title_justify="left")
    acc.add_column("what", style="bold")
    acc.add_column("value", justify="right")
    acc.add_row("jobs with an estimate", _pct(est["with_estimate"]))
    acc.add_row("mean accuracy", _f(est["mean_accuracy"], 3))
    acc.add_row("median accuracy", _f(est["median_accuracy"], 3))
    acc.add_row("ran longer than requested", _pct(est["under_estimated"]))
    acc.add_row("within 2x (accuracy 0.5-1)", _pct(est["within_2x"]))
    acc.add_row("serial jobs / power-of-two sizes",
                f"{_pct(info['size']['serial'])} / {_pct(info['size']['power_of_two'])}")
    return acc


def job_progress(console) -> Progress:
    """The progress bar of a long run (jobs started of the total)."""
    return Progress(TextColumn("[bold]simulating"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("jobs"), TimeRemainingColumn(), console=console, transient=True)


def power_info_view(info: dict) -> Table:
    """The ``--power`` part of ``olsctl trace info``."""
    table = Table(title=f"synthetic job power per processor (W): {info['projects']:,} projects, "
                        f"seed {info['seed']}", title_justify="left",
                  caption=f"levels kept within idle {info['idle_w']:g} W and peak "
                          f"{info['peak_w']:g} W; energy of all jobs "
                          f"{info['energy_j'] / 3.6e9:,.1f} MWh", caption_justify="left")
    table.add_column("")
    for col in ("mean", "min", "p25", "median", "p75", "p95", "max"):
        table.add_column(col, justify="right")
    for label, key, digits in (("job mean", "mean_w", 0), ("job max", "max_w", 0),
                               ("job std", "std_w", 1), ("phases", "phases", 1)):
        d = info[key]
        table.add_row(label, *(_f(d[k], digits) for k in ("mean", "min", "p25", "median",
                                                           "p75", "p95", "max")))
    return table
