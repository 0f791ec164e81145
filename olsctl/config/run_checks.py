"""The checks across sections and against the loaded workload, made once every key is
in and before anything runs (a setting under which some job could never start is refused
as infeasible).
"""

from __future__ import annotations

import numpy as np

from olsctl.config.defaults import RunConfig
from olsctl.controller.settings import active_counts, cost_weights
from olsctl.errors import ConfigError, InfeasibleConfig
from olsctl.policies import REGISTRY, make_policy


def check_run(config: RunConfig, workload, estimates) -> None:
    """The checks across sections (policy, power, controller) and against the loaded
    workload, made once every key is in and before anything runs; raises
    :class:`ConfigError` naming the key. ``estimates`` are the ones the policy will see."""
    src, policy = config.source, config.policy
    entry = REGISTRY[policy["name"]]
    if config.power is None and entry.needs == "power":
        raise ConfigError(f"{src}: policy.name: {policy['name']} needs power: add a power "
                          f"section")
    if config.power is not None and entry.needs == "budget":
        raise ConfigError(f"{src}: power: policy {policy['name']} keeps its own power budget "
                          f"(policy.bound); remove the power section")
    machine = workload.machine_procs
    active = config.active_procs
    if active is not None and active > machine:
        raise ConfigError(f"{src}: active_procs: must be <= the machine's {machine} "
                          f"processors (got {active})")
    problem = make_policy(policy).check_jobs(workload.job_id.tolist(), workload.procs.tolist(),
                                             estimates.tolist(),
                                             machine if active is None else active)
    if problem is not None:  # a valid setting under which some job could never run
        raise InfeasibleConfig(f"{src}: policy.{problem}")
    if config.controller is not None:
        _check_controller_run(config, workload, entry)


def _check_controller_run(config: RunConfig, workload, entry) -> None:
    """The controller's candidates and cost against the policy, the power section and the
    workload (a candidate set under which some job could never start is refused)."""
    src, policy = f"{config.source}: controller", config.policy
    cands = config.controller["candidates"]
    if "power_cap" in cands and config.power is None:
        raise ConfigError(f"{src}.candidates.power_cap: needs a power section")
    if "window" in cands and "window" not in policy:
        raise ConfigError(f"{src}.candidates.window: policy {policy['name']} has no window")
    for name, values in cands.get("policy", {}).items():
        if name not in entry.tunable:
            raise ConfigError(f"{src}.candidates.policy.{name}: not a tunable setting of "
                              f"{policy['name']} (tunable: {', '.join(entry.tunable) or 'none'})")
        for i, value in enumerate(values):
            try:
                make_policy({**policy, name: value})
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"{src}.candidates.policy.{name}[{i}]: {exc}") from None
    names = list(cost_weights(config.controller["cost"]))
    for name in names:
        if name.startswith("policy.") and name[7:] not in cands.get("policy", {}):
            raise ConfigError(f"{src}.cost: {name} is not among candidates.policy")
    if config.power is None and any(n in ("energy", "idle_energy", "power_cap", "peak_power")
                                    for n in names):
        raise ConfigError(f"{src}.cost: {', '.join(names)} needs a power section")
    machine = workload.machine_procs
    above = [p for p in cands["active_procs"].get("procs", ()) if p > machine]
    if above:
        raise ConfigError(f"{src}.candidates.active_procs.procs: {above[0]} is above the "
                          f"machine's {machine} processors")
    if entry.needs != "budget":  # RMAP and PARM may resize a job to fit
        counts = active_counts(cands["active_procs"], workload.machine_procs)
        wide = np.flatnonzero(workload.procs > counts[-1])
        if wide.size:
            i = int(wide[0])
            raise InfeasibleConfig(f"{src}.candidates.active_procs: job "
                                   f"{int(workload.job_id[i])} needs {int(workload.procs[i])} "
                                   f"processors but the largest candidate has {counts[-1]}, "
                                   f"so it could never start ({wide.size} such job(s))")

