"""Power set-up of one simulation, written once for ``olsctl run`` (:mod:`olsctl.runner`),
``olsctl predict`` (:mod:`olsctl.power.evaluate`) and ``olsctl bench --knapsack``
(:mod:`olsctl.bench`).

- :func:`power_inputs`: what a run config's ``power`` section stands for: the machine's
  power states, the jobs' profiles (synthetic, or read from a CSV) and the cap schedule,
  read and checked before anything runs;
- :func:`power_setup`: a workload's :class:`PowerState` (the jobs' profiles, their
  projects as history keys, their "same job" keys for the learner) and, under a hardware
  power limit (``power.limit: throttle``), every job's compute-boundness drawn as
  :mod:`olsctl.perfmodel` draws it (per project, seeded) with the limit itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from olsctl.perfmodel import PerfSettings, draw_params
from olsctl.power.accounting import MachinePower
from olsctl.power.cap import CapSchedule, parse_cap
from olsctl.power.limit import Limit, LimitSettings
from olsctl.power.profiles import (PowerProfiles, ProfileSettings, load_power_csv, project_of,
                                   synthetic_profiles)
from olsctl.power.runtime import PowerState, power_state

if TYPE_CHECKING:
    from olsctl.config import RunConfig
    from olsctl.workload import Workload


def power_inputs(config: RunConfig, workload: Workload
                 ) -> tuple[PowerProfiles, MachinePower, CapSchedule] | None:
    """Profiles, machine power states and cap of a run, or None without ``power``."""
    spec = config.power
    if spec is None:
        return None
    machine = MachinePower(
        idle_w=spec["idle_w"], peak_w=spec["peak_w"], sleep_w=spec["sleep_w"],
        wake_latency_s=spec["wake_latency_s"], wake_energy_j=spec["wake_energy_j"],
        sample_s=spec["sample_s"])
    settings = ProfileSettings(seed=spec["seed"], procs_per_node=spec["procs_per_node"])
    if spec["profiles"] == "synthetic":
        profiles = synthetic_profiles(workload, machine.idle_w, machine.peak_w, settings)
    else:
        path = Path(spec["profiles"])
        if not path.is_absolute() and config.base_dir is not None:
            path = config.base_dir / path
        profiles = load_power_csv(path, workload, machine.idle_w, machine.peak_w, settings)
    cap = parse_cap(spec["cap"], workload.machine_procs * machine.peak_w,
                    f"{config.source}: power.cap", float(workload.submit_s[0]))
    return profiles, machine, cap


def power_setup(workload: Workload, profiles: PowerProfiles, machine: MachinePower,
                cap: CapSchedule, *, learning: bool = False, job_keys: bool = True,
                throttle: bool = False, perf_seed: int = 0, share: str = "clock",
                min_clock: float = 0.4) -> tuple[PowerState, Limit | None]:
    """The :class:`PowerState` of ``workload`` (``profiles`` in its job order; the
    learner fed as the run goes with ``learning``; without ``job_keys`` the "same job"
    keys the learner reads are left out) and, with ``throttle``, the hardware power limit
    (``share``, ``min_clock``: :class:`olsctl.power.limit.LimitSettings`) after every
    job's compute-boundness is drawn into the state (``perf_seed``: the draws' seed)."""
    project = project_of(workload)
    power = power_state(profiles, project.tolist(), machine.idle_w, machine.sleep_w,
                        machine.peak_w, cap, workload.job_keys() if job_keys else None,
                        learning=learning, sample_s=machine.sample_s)
    if not throttle:
        return power, None
    perf = PerfSettings(seed=perf_seed)
    power.kappa, _, _ = draw_params(workload.job_id, project, workload.procs, perf)
    limit = Limit(LimitSettings(share=share, min_clock=min_clock,
                                static_w=perf.static * machine.peak_w,
                                exponent=perf.exponent), logging=True)
    return power, limit
