"""The online-simulation (OLS) controller: fork what-ifs of the main simulator, keep the
candidates that meet the slowdown SLA, apply the cheapest.

Every ``interval_s`` of simulated time the controller snapshots the main simulator and
runs :func:`what_if` for candidate settings (active processors x power caps x knapsack
windows), in this process, or split between it and worker processes kept for the whole
run (olsctl's own, or any joblib backend) when a tick's work pays for the trip. A
what-if runs the snapshot forward with the candidate applied (no new arrivals by
default, as Lawson & Smirni; or an arrivals model) until every job of the snapshot has
started, or until a horizon, and scores the snapshot's jobs: bounded slowdowns (known
for running jobs, predicted for waiting ones), waits, and with power the machine's
energy and power over the coming interval. Among the candidates meeting the SLA the
cheapest wins, ties to the larger machine; when none meets it, the one closest to it,
and the tick is an SLA miss. With SLA feedback (:mod:`olsctl.feedback`) the limit they
must meet is tightened from the slowdown the main simulator has realized in the current
and previous SLA windows. The choice is applied at once (that instant's pass uses it)
and logged in ``decisions.jsonl``.

:func:`what_if` is a pure top-level function of (task, candidate, seed), so results do
not depend on the number of workers or the backend.

The parts, one module each:

- :mod:`.scoring`: candidates, the what-if and its trial (SLA metrics, power forecast,
  cost);
- :mod:`.search`: the search strategies, registered by name, and the choice among trials;
- :mod:`.dispatch`: the dispatcher that runs what-ifs in this process or over the pool,
  and the timing that decides which;
- :mod:`.settings`: the validated ``controller:`` settings and what they stand for;
- :mod:`.tick`: the :class:`Controller` a run schedules (snapshot, limit, search, choose,
  apply, log).

This module only re-exports what the rest of olsctl uses.
"""

from __future__ import annotations

from olsctl.controller.dispatch import Dispatcher
from olsctl.controller.trials import COSTS, INF, SLA_METRICS, Candidate, Trial, WhatIfTask, known_costs, percentile, weighted_cost
from olsctl.controller.scoring import WhatIfRun, what_if, what_if_batch
from olsctl.controller.search import KNOWN_COSTS, STRATEGIES, SearchContext, choose
from olsctl.controller.settings import ARRIVAL_MODELS, ControllerSettings
from olsctl.controller.tick import Controller

__all__ = ["ARRIVAL_MODELS", "COSTS", "INF", "KNOWN_COSTS", "SLA_METRICS",
           "STRATEGIES", "Candidate", "Controller", "ControllerSettings", "Dispatcher",
           "SearchContext", "Trial", "WhatIfRun", "WhatIfTask", "choose", "known_costs",
           "percentile", "weighted_cost", "what_if", "what_if_batch"]
