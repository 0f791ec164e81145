"""The contract every registered policy keeps: :func:`olsctl.contract.check_policy` over
every entry of the registry (each queue order it accepts, every event kind it allows;
see :mod:`olsctl.contract` for the checks), and the check itself catching policies that
break each part of the contract.

A policy gets all of this by being registered: the cases are built from ``REGISTRY``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pytest

from olsctl.config import build_config
from olsctl.contract import (CHECKS, ESTIMATES, ContractError, check_policy,
                             contract_specs, scenarios)
from olsctl.policies import REGISTRY, Param, PolicyBase, PolicyEntry

SEEDS = range(5)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_policy_keeps_the_contract(name):
    entry = REGISTRY[name]
    report = check_policy(name, seeds=SEEDS)
    assert report.policy == name and report.checks == CHECKS
    assert {s.get("order", "fcfs") for s in report.specs} == set(entry.orders)
    cases = len(report.specs) * len(ESTIMATES) * len(scenarios(entry)) * len(SEEDS)
    assert report.cases == cases and report.snapshots == 3 * cases
    assert report.starts_compared > 10 * report.snapshots
    # the throttling cases throttle (policies that keep their own budget have none)
    assert (report.throttled_jobs > 0) == (entry.needs != "budget")


@pytest.mark.parametrize("backfill", ["queue", "easy"])
def test_the_knapsack_keeps_the_contract_backfilling_past_its_window(backfill):
    """The knapsack's ``backfill`` settings, with a window of 2 so that windows fill and
    jobs are held in the small cases, keep the contract in every order."""
    report = check_policy("knapsack", {"backfill": backfill, "window": 2}, seeds=SEEDS)
    assert {s["order"] for s in report.specs} == set(REGISTRY["knapsack"].orders)
    assert report.starts_compared > 10 * report.snapshots and report.throttled_jobs > 0


def test_a_registered_entry_is_checked_under_its_name_and_settings():
    report = check_policy(REGISTRY["easy"], {"order": "sjf"}, seeds=range(1))
    assert report.policy == "easy" and report.specs == ({"name": "easy", "order": "sjf"},)
    with pytest.raises(ValueError, match="no policy named 'nope' is registered"):
        check_policy("nope")


@pytest.mark.parametrize("spec", [s for n in REGISTRY for s in contract_specs(n)],
                         ids=lambda s: "-".join(s.values()))
def test_config_defaults_are_copies(spec):
    """Changing one run's lists leaves the registry's defaults alone."""
    config = build_config({"policy": spec})
    for key, value in config.policy.items():
        if isinstance(value, list):
            value.append(-1)
            assert REGISTRY[spec["name"]].params[key].default != value


# -- policies that break the contract, each in one way ---------------------------------------

@dataclass(frozen=True)
class _Greedy(PolicyBase):
    """Starts waiting jobs in arrival order while they fit (or, with ``overfill``, every
    waiting job whatever is free)."""

    overfill: bool = False
    name: str = field(default="greedy", init=False)

    def schedule(self, state) -> None:
        free = state.free_procs
        for j in list(state.queue):
            if self.overfill or state.procs[j] <= free:
                state.start(j)
                free -= state.procs[j]

    def settings(self) -> dict:
        return {"name": self.name, "overfill": self.overfill}


@dataclass(frozen=True)
class _Forgetful(_Greedy):
    """Its settings leave ``overfill`` out."""

    def settings(self) -> dict:
        return {"name": self.name}


@dataclass(frozen=True)
class _PassCounter(_Greedy):
    """Starts jobs only at every other pass, counting passes in itself: the run's memory
    lives in the policy, not in the state (so snapshots miss it)."""

    passes: list = field(default_factory=list, compare=False)

    def schedule(self, state) -> None:
        self.passes.append(state.now_s)
        if len(self.passes) % 2:
            super().schedule(state)


@dataclass(frozen=True)
class _Unpicklable(_Greedy):
    """Holds a function made at run time, which pickle cannot find by name."""

    key: Callable = field(default_factory=lambda: lambda j: j, compare=False)


def _entry(factory) -> PolicyEntry:
    return PolicyEntry(factory=factory, params={"overfill": Param(bool, False)},
                       doc="a policy of the contract's tests")


def test_a_policy_keeping_the_contract_passes_unregistered():
    report = check_policy(_entry(_Greedy), seeds=range(2))
    assert report.policy == "greedy" and report.specs == ({"name": "greedy"},)
    assert report.cases == len(ESTIMATES) * len(scenarios(_entry(_Greedy))) * 2


@pytest.mark.parametrize("factory,settings,check,words", [
    (_Greedy, {"overfill": True}, "strict-decisions", "busy processors"),
    (_Forgetful, {"overfill": True}, "settings", "settings() gives overfill='(missing)'"),
    (_PassCounter, {}, "whatif-fidelity", "expected start"),
    (_Unpicklable, {}, "pickle", "cannot pickle"),
])
def test_a_broken_policy_fails_its_check(factory, settings, check, words):
    with pytest.raises(ContractError) as err:
        check_policy(_entry(factory), settings, seeds=range(3))
    assert err.value.check == check
    assert str(err.value).startswith(f"ContractError: {check}: greedy ")
    assert words in str(err.value)
    if check == "whatif-fidelity":  # the first difference: job, expected and got start
        e = err.value
        assert e.job_id is not None and e.expected_s != e.got_s
        assert f"job {e.job_id}: expected start {e.expected_s:g}" in str(e)



def test_registry_defaults_are_the_policies_own():
    """What the registry declares as a setting's default is what the policy takes when
    the setting is not given (a config and a Python caller get the same policy)."""
    for name, entry in REGISTRY.items():
        policy = entry.factory()
        for key, param in entry.params.items():
            value = getattr(policy, key)
            if isinstance(value, tuple):
                value = list(value)
            assert value == param.default, (name, key, value, param.default)
