"""The run config's keys, their types, defaults and meanings (docs/configuration.md's
reference mirrors them), and :class:`RunConfig`, a validated config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from olsctl import backends
from olsctl.metrics import WEEK_S, SlaSpec
from olsctl.workload import DEFAULT_TRACE

#: Top-level keys: (type, default, help). docs/configuration.md mirrors this.
TOP_LEVEL: dict[str, tuple[Any, Any, str]] = {
    "trace": (str, DEFAULT_TRACE, "bundled log name (KTH-SP2, SDSC-SP2, CTC-SP2, SDSC-BLUE) "
                                  "or SWF path, relative to the config file"),
    "procs": (int, None, "machine size; default: the trace header's MaxProcs, else MaxNodes"),
    "active_procs": (int, None, "processors active at the start; default: all"),
    "estimates": (str, "exact", "runtime estimates the policy sees: exact or user"),
    "load_scale": (float, 1.0, "offered load factor: submit times, counted from the first "
                               "submission, are divided by it (1.5: the same jobs arriving "
                               "1.5 times as fast)"),
    "policy": (dict, {"name": "easy"}, "policy name and parameters"),
    "out": (str, "olsctl-out", "output directory"),
    "strict": (bool, False, "check every scheduling decision"),
    "skip_bad_lines": (bool, False, "count and skip malformed SWF lines instead of failing"),
    "sla": (dict, None, "the SLA runs are measured against, window by window: {metric, max, "
                        "window_s}; default: the controller's metric and max, else mean_bsld "
                        "<= 200, over calendar weeks"),
    "power": (dict, None, "job power profiles, machine power states and a power cap "
                          "(omit for no power accounting)"),
    "controller": (dict, None, "the online-simulation controller (omit to keep the "
                               "active processors fixed)"),
}
#: ``controller:`` keys: (type, default, help).
CONTROLLER_KEYS: dict[str, tuple[Any, Any, str]] = {
    "interval_s": (float, 3600.0, "simulated seconds between ticks"),
    "candidates": (dict, {"active_procs": {"fraction": [0.25, 0.375, 0.5, 0.625, 0.75, 0.875,
                                                         1.0]}},
                   "settings to try, combined: active_procs ({fraction: L} or {procs: L}), "
                   "power_cap ({fraction: L} or {watts: L}), window (L); L is a list or "
                   "{from, to, step}"),
    "sla": (dict, {},
            "{metric: mean_bsld | p95_bsld | mean_wait_s | max_wait_s, max: number, "
            "feedback: false | true | {relax_below, full_above, backlog}}; metric and max "
            "default to the run's sla"),
    "cost": (object, "active_procs", "what makes a candidate cheaper: active_procs, energy, "
                                     "idle_energy, power_cap, peak_power, or {weights: "
                                     "{name: w, ...}}"),
    "search": (str, "grid", "grid (every candidate), bisect (fewer what-ifs; assumes more "
                            "processors never raise slowdown), cheapest-first (grid's "
                            "choice, stopping at the first candidate meeting the SLA) or "
                            "bound-first (grid's choice for any cost, from the lowest "
                            "cost floor up)"),
    "arrivals": (str, "none", "arrivals in the what-ifs: none, recent (the last interval's, "
                              "replayed) or oracle (the log's next interval, for studies)"),
    "horizon": (object, "drain", "drain (until every job of the snapshot has started) or "
                                 "seconds"),
    "min_dwell_s": (float, 0.0, "keep a new setting at least this long"),
    "max_step": (int, None, "move at most this many places in the active-processor list "
                            "per tick"),
    "n_jobs": (int, 1, "what-ifs run in parallel, this process included (-1: all cores)"),
    "backend": (str, "processes", "processes (olsctl's worker processes), or a joblib "
                                  "backend (loky, threading, multiprocessing, dask, ray)"),
    "cluster": (str, None, "with backend dask or ray: local (default: a cluster on this "
                           "machine for the run) or the address of a running one"),
    "parallel_min_waiting": (int, 100, "ticks with fewer waiting jobs run their what-ifs in "
                                       "process (too small to pay for a worker)"),
    "pool_min_s": (object, "auto", "auto, or the expected in-process seconds of a tick's "
                                   "what-ifs from which they go to the worker pool"),
    "seed": (int, 0, "seed passed to every what-if"),
}
#: where a controller's what-ifs may run besides this process: olsctl's own worker
#: processes, or a joblib backend (dask and ray once their packages are installed)
BACKENDS = backends.BACKENDS
#: ``power:`` keys: (type, default, help). Watts and seconds per processor.
POWER_KEYS: dict[str, tuple[Any, Any, str]] = {
    "profiles": (str, "synthetic", "synthetic, or a CSV of job_id,mean_w[,max_w,std_w] "
                                   "(relative to the config file)"),
    "seed": (int, 0, "seed of the synthetic profiles"),
    "procs_per_node": (int, 1, "processors per node (NREL powers are per node)"),
    "idle_w": (float, 250.0, "idle processor power"),
    "peak_w": (float, 1150.0, "processor peak power (the cap's 100%)"),
    "sleep_w": (float, 20.0, "power of a processor beyond the active count, once idle"),
    "wake_latency_s": (float, 60.0, "time a wake takes"),
    "wake_energy_j": (float, 30000.0, "energy of one wake"),
    "sample_s": (float, 300.0, "power sampling interval"),
    "cap": (object, None, "watts, {fraction: f} of peak, or {schedule: [{at_s, fraction|watts}]}"),
    "limit": (str, "none", "none, or throttle: a hardware limit lowers running jobs' clocks "
                           "so the draw never passes the cap"),
    "share": (str, "clock", "how throttle shares a reduction: clock (one clock for all) "
                            "or largest (largest draw per processor first)"),
    "min_clock": (float, 0.4, "lowest clock throttle may set, a fraction of the top clock"),
}


@dataclass(frozen=True)
class RunConfig:
    """A validated run configuration; ``trace`` is resolved relative to ``base_dir``."""

    trace: str = DEFAULT_TRACE
    procs: int | None = None
    active_procs: int | None = None
    estimates: str = "exact"
    load_scale: float = 1.0
    policy: dict = field(default_factory=lambda: {"name": "easy", "order": "fcfs"})
    out: str = "olsctl-out"
    strict: bool = False
    skip_bad_lines: bool = False
    sla: dict | None = None
    power: dict | None = None
    controller: dict | None = None
    base_dir: Path | None = None
    source: str = "<defaults>"

    def as_dict(self) -> dict:
        """The settings as plain data (what summary.json records)."""
        return {key: getattr(self, key) for key in TOP_LEVEL}

    def sla_spec(self) -> SlaSpec:
        """The SLA the run's windows are judged by: ``sla`` as given, its metric and max
        defaulting to the controller's, then to mean_bsld <= 200."""
        return self._sla_from(self.sla, None if self.controller is None
                              else self.controller["sla"], self.sla)

    def controller_sla(self) -> SlaSpec:
        """The SLA the controller keeps: its own metric and max, defaulting to the run's
        ``sla``, then to mean_bsld <= 200 (the window is the run's)."""
        return self._sla_from(self.controller["sla"], self.sla, self.sla)

    @staticmethod
    def _sla_from(first: dict | None, then: dict | None, window: dict | None) -> SlaSpec:
        first, then = first or {}, then or {}
        pick = {k: first.get(k, then.get(k)) for k in ("metric", "max")}  # key by key
        return SlaSpec(pick["metric"] or "mean_bsld",
                       float(200.0 if pick["max"] is None else pick["max"]),
                       float((window or {}).get("window_s", WEEK_S)))
