"""Window-knapsack what-ifs run by the compiled loop
(:func:`olsctl.policies.power.forward.knapsack_forward`).

:class:`KnapsackTemplate` turns a snapshot with power into the loop's arrays once per
tick; :class:`KnapsackRun` is one what-if from copies of them under a candidate's
setting (active processors, a wake under way, the cap, the knapsack's window, order and
``force``). For snapshots whose power the loop models: no power limit, no job model, a
cap schedule with no change to come, and a predictor that is the oracle, the naive one
or the history (the learner's profiles stay in Python).
"""

from __future__ import annotations

import math
from itertools import islice

import numpy as np

from olsctl.metrics import BSLD_BOUND_S
from olsctl.policies.core.jit import compiled
from olsctl.policies.core.order import ORDER_CODES
from olsctl.policies.core.run import LoopRun, copied_for, loop_arrays
from olsctl.policies.power import forward  # noqa: F401  (the loop, called compiled)
from olsctl.policies.power.held import BACKFILL_CODES
from olsctl.policies.power.kernels import (F_CAP, F_IDLE, F_SLEEP, FORCE_CODES, K_BACKFILL,
                                           K_FORCE, K_PREDICTED, K_TOTAL, K_WINDOW, N_KFLT,
                                           N_KINT, recent_mean)
from olsctl.power.predict import STATS, History, Naive, Oracle
from olsctl.power.runtime import HISTORY_LEN, flat_phases

INF = math.inf


def steps(policy, state, until_s: float, stop_above, raise_at):
    """None: the what-if of a live state runs the knapsack's pass from Python (the same
    kernel); a tick's template runs the compiled loop."""
    return None


def template_key(policy) -> tuple:
    """What the arrays depend on besides the snapshot: the predictor, its statistic and
    whether running jobs count at their prediction (window, order and ``force`` are set
    per what-if)."""
    return (policy._predictor, policy.stat, policy.headroom)


def template(snap, policy, until_s: float,
             stop_above: "tuple[str, float] | None") -> "KnapsackTemplate | None":
    """The tick's template of ``snap`` under the window knapsack ``policy`` (None when
    the loop does not model its power: see the module's note)."""
    return KnapsackTemplate(snap, policy, until_s, stop_above) \
        if KnapsackTemplate.fits(snap, policy) else None


class KnapsackTemplate:
    """A snapshot's window-knapsack what-if arrays, made once and copied for each
    candidate (:meth:`start`). Jobs are indexed as in the snapshot."""

    #: the arrays a run changes (the others are read only, or scratch of one pass)
    OWN = ("start", "queue", "running", "heap_t", "heap_j", "count", "clock", "seen",
           "gpred", "ring", "ring_n", "entry", "kint", "kflt")

    def __init__(self, snap, policy, until_s: float = INF,
                 stop_above: "tuple[str, float] | None" = None) -> None:
        nr = snap.n_running
        p = snap.power
        self.snap = snap
        self.kernels = k = compiled()
        n = self.n = int(snap.job_id.size)
        a = self.arrays = loop_arrays(snap, until_s, stop_above)
        count, clock = a["count"], a["clock"]
        k.running_open(nr, a["procs"], a["est"], a["runtime"], a["submit"], a["start"],
                       a["running"], a["heap_t"], a["heap_j"], count, clock, a["seen"],
                       BSLD_BOUND_S)
        a["ph_off"], a["ph_start"], a["ph_w"] = flat_phases(p, n)
        a["run_w"] = np.zeros(n)
        a["entry"] = np.array(p.window_entry[:n], dtype=float)
        self._predictions(a, p, policy)
        kint = a["kint"] = np.zeros(N_KINT, dtype=np.int64)
        kint[K_PREDICTED] = policy.headroom == "predicted"
        kint[K_TOTAL] = snap.total_procs
        kflt = a["kflt"] = np.zeros(N_KFLT)
        kflt[F_IDLE], kflt[F_SLEEP] = p.idle_w, p.sleep_w
        self.cap_w = p.cap.cap_at(snap.now_s)

    @staticmethod
    def _predictions(a: dict, p, policy) -> None:
        """Each job's prediction group and each group's prediction (and, under the
        history predictor, each user's last jobs as the history holds them)."""
        stat = policy.stat
        pred = policy._predictor
        mean_w, max_w, codes, named = p.columns()
        n = codes.size
        a["jstat"] = mean_w if stat == "mean" else max_w  # (read only)
        a["learn"] = np.zeros(2, dtype=np.int64)
        a["alpha"] = 1.0
        a["ring"], a["ring_n"] = np.zeros((1, 1)), np.zeros(1, dtype=np.int64)
        if isinstance(pred, Oracle):
            a["juser"] = np.arange(n, dtype=np.int64)
            a["gpred"] = a["jstat"].copy()
        elif isinstance(pred, Naive):
            a["juser"] = np.zeros(n, dtype=np.int64)
            a["gpred"] = np.full(1, p.peak_w)
        else:  # the history
            # (users numbered by first appearance)
            if _SLOT[0].size < len(named):
                _SLOT[0] = np.full(len(named), -1, dtype=np.int64)
            found = np.empty(n, dtype=np.int64)
            a["juser"] = np.empty(n, dtype=np.int64)
            m = compiled().first_seen(codes, _SLOT[0], found, a["juser"])
            users = [named[c] for c in found[:m].tolist()]
            width = min(pred.window, HISTORY_LEN)
            k = STATS.index(stat)
            rows, counts, means = [], [], []
            none = (np.zeros(width), 0, p.peak_w)  # (a user with no history yet)
            history = p.history
            kept = _USER_ROWS.setdefault((k, width, pred.window, pred.alpha), {})
            for user in users:
                past = history.get(user)
                if not past:
                    row, m, mean = none
                else:
                    got = kept.get(user)
                    if got is None or got[0] is not past:
                        got = kept[user] = (past, *_user_row(past, k, width, pred.window,
                                                             pred.alpha))
                    row, m, mean = got[1:]
                rows.append(row)
                counts.append(m)
                means.append(mean)
            if not users:
                rows, counts, means = [none[0]], [0], [p.peak_w]
            a["ring"] = np.array(rows)
            a["ring_n"] = np.array(counts, dtype=np.int64)
            a["gpred"] = np.array(means, dtype=float)
            a["learn"][:] = (1, pred.window)
            a["alpha"] = float(pred.alpha)

    @staticmethod
    def fits(snap, policy) -> bool:
        """Whether a template can stand for this snapshot's what-ifs under ``policy``."""
        p = snap.power
        return (p is not None and snap.limit is None and snap.budget is None
                and not p.learning and policy.order in ORDER_CODES
                and isinstance(policy._predictor, (History, Oracle, Naive))
                and p.cap.next_change_s(snap.now_s) == INF
                and snap.running_alloc.count(None) == len(snap.running_alloc))

    def start(self, policy, active: int, wake: "tuple[float, int] | None",
              pass_due: bool, cap_w: float | None = None) -> "KnapsackRun":
        """A what-if from copies of the arrays under ``policy``'s window, order and
        ``force``, ``active`` processors, a wake under way, whether the snapshot
        instant's pass is due, and the cap ``cap_w`` (None: the snapshot's)."""
        arrays = copied_for(self.arrays, self.OWN, active, wake, pass_due)
        kint = arrays["kint"]
        kint[K_WINDOW] = policy.window
        kint[K_FORCE] = FORCE_CODES[policy.force]
        kint[K_BACKFILL] = BACKFILL_CODES[policy.backfill]
        arrays["kflt"][F_CAP] = self.cap_w if cap_w is None else cap_w
        return KnapsackRun(self, ORDER_CODES[policy.order], arrays)


#: an entry per user code, all -1 (:func:`olsctl.policies.power.kernels.first_seen`'s
#: scratch, as long as the most users a run has had)
_SLOT = [np.empty(0, dtype=np.int64)]

#: each user's last jobs as a template's history row, their count and their prediction,
#: by (statistic, row width, history window, weight), then by user, with the history
#: they were made of (an immutable tuple, replaced when a job of the user's ends: made
#: again when it is another)
_USER_ROWS: dict = {}


def _user_row(past: tuple, k: int, width: int, window: int,
              alpha: float) -> tuple[np.ndarray, int, float]:
    """The last ``width`` values of statistic ``k`` in ``past`` (a user's history, oldest
    first) as a template's history row (``width`` long, zeros after them), how many
    there are, and their weighted mean (:func:`recent_mean`, the last ``window``,
    weights ``alpha`` ** age)."""
    values = [rec[k] for rec in islice(past, max(len(past) - width, 0), None)]
    row = np.zeros(width)
    row[:len(values)] = values
    return row, len(values), recent_mean(values, len(values), window, alpha)


class KnapsackRun(LoopRun):
    """A window-knapsack what-if as the arrays of the compiled loop
    (:meth:`KnapsackTemplate.start`)."""

    def __init__(self, template: KnapsackTemplate, code: int, arrays: dict) -> None:
        self.template = template
        a = arrays
        args = (code, a["procs"], a["est"], a["runtime"], a["submit"], a["start"], a["queue"],
                a["running"], a["heap_t"], a["heap_j"], a["started"], a["clock"], a["count"],
                a["seen"], BSLD_BOUND_S, a["juser"], a["gpred"], a["ring"], a["ring_n"],
                a["jstat"], a["ph_off"], a["ph_start"], a["ph_w"], a["run_w"], a["entry"],
                a["kint"], a["kflt"], a["learn"], a["alpha"])
        super().__init__(arrays, template.kernels.knapsack_forward, args)
