"""Power during a run: what power-aware policies may know, kept as plain data.

:class:`PowerState` rides on :class:`olsctl.state.SimState` (``state.power``) and goes
into snapshots with it. It holds the machine's power states, the cap schedule, every
job's true phases (the drivers' and the oracle's business: policies read the machine's
*measured* power now, never a waiting job's true profile), the history of finished jobs
that history-based predictors learn from, and the count of forced starts.

Measured machine power at the current time: busy processors at their job's current
phase, idle active processors at ``idle_w``, processors beyond the active count at
``sleep_w`` (the same model as :mod:`olsctl.power.accounting`). Starting a job of ``n``
processors predicted at ``p`` W each adds ``n x (p - idle_w)``: a policy keeps the cap by
keeping the sum of those increments within ``cap - measured``.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING

import numpy as np

from olsctl.power.cap import CapSchedule

if TYPE_CHECKING:
    from olsctl.state import SimState

#: finished jobs remembered per user for history-based prediction
HISTORY_LEN = 64


def flat_phases(p: "PowerState", n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The phases of the first ``n`` jobs of the power state ``p`` as the compiled
    kernels read them: (offsets, starts, levels), job ``j``'s phases at
    ``offsets[j]:offsets[j + 1]``; a snapshot's are taken from its source's (see
    :attr:`PowerState.flat_from`)."""
    if p.flat_from is not None and len(p.flat_from[1]) == n:
        from olsctl.policies.core.jit import compiled
        from olsctl.policies.power import kernels  # noqa: F401  (the kernel's module)

        (off, starts, levels), rows = p.flat_from
        return compiled().pick_phases(off, starts, levels, rows)
    sizes = np.fromiter(map(len, p.phase_start), np.int64, n)
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    total = int(off[-1])
    return (off, np.fromiter(chain.from_iterable(p.phase_start), float, total),
            np.fromiter(chain.from_iterable(p.phase_w), float, total))


def n_readings(runtime_s: float, sample_s: float) -> int:
    """Readings a facility's monitor takes of a whole run: at 0, ``sample_s``, ... before
    its end (at least one)."""
    return max(1, math.ceil(runtime_s / sample_s))


#: the per-job columns a job keeps as made (lists only appended to): a snapshot picks them
#: from its source's only when first read (:meth:`PowerState.subset`)
FIXED_COLUMNS = ("phase_start", "phase_w", "user", "true_mean_w", "true_max_w",
                 "true_std_w", "job_key", "kappa")


def _picker(idx: list[int]):
    """A function giving the items ``idx`` of a list as a new list (at C speed)."""
    if len(idx) > 1:
        get = itemgetter(*idx)
        return lambda values: list(get(values))
    return lambda values: [values[j] for j in idx]


class Profiles:
    """The learner's profiles by key (:mod:`olsctl.power.learn`), in a form snapshots
    share: ``base``, never changed once it may be shared, and ``own``, the profiles this
    state changed since, its own lists. A writer takes a profile into ``own`` before it
    changes it (:meth:`own_profile`). A snapshot's copy (:meth:`fork`) shares ``base``
    and copies ``own``, folding ``own`` into a new ``base`` first once it holds more
    than :attr:`FOLD_AT` profiles: a tick's snapshot and its what-ifs then cost what the
    profiles changed since the last fold cost, not every profile the run has learned."""

    __slots__ = ("base", "own")

    FOLD_AT = 32

    def __init__(self, base: dict | None = None, own: dict | None = None) -> None:
        self.base = {} if base is None else base
        self.own = {} if own is None else own

    def get(self, key):
        v = self.own.get(key)
        return self.base.get(key) if v is None else v

    def __getitem__(self, key):
        v = self.get(key)
        if v is None:
            raise KeyError(key)
        return v

    def as_dict(self) -> dict:
        """Every profile by key, as one dict (for reading, not for changing)."""
        return {**self.base, **self.own}

    def own_profile(self, key, empty: tuple) -> list:
        """The profile of ``key`` as this state's own list, to change in place (a copy
        of the shared one, or ``empty`` as a list)."""
        v = self.own.get(key)
        if v is None:
            b = self.base.get(key)
            v = self.own[key] = list(empty if b is None else b)
        return v

    def fork(self) -> "Profiles":
        if len(self.own) > self.FOLD_AT:
            self.base = {**self.base, **self.own}
            self.own = {}
        return Profiles(self.base, {k: list(v) for k, v in self.own.items()})


@dataclass
class PowerState:
    """Power data of one simulation (indexed like the state's jobs)."""

    idle_w: float
    sleep_w: float
    peak_w: float
    cap: CapSchedule
    #: per job: phase start fractions (cumulative, first 0) and levels, W per processor
    phase_start: list[list[float]]
    phase_w: list[list[float]]
    #: per job: the user (history key) and true mean/max/std W per processor
    user: list[int]
    true_mean_w: list[float]
    true_max_w: list[float]
    true_std_w: list[float]
    #: per user: (mean, max, std) of finished jobs, most recent last (a tuple, replaced
    #: at each finish, so a snapshot shares it)
    history: dict[int, tuple[tuple[float, float, float], ...]] = field(default_factory=dict)
    forced_starts: int = 0
    #: per job: when it entered a knapsack window (NaN: not yet)
    window_entry: list[float] = field(default_factory=list)
    #: per job: key of "the same job" (olsctl.workload.Workload.job_keys), for the learner
    job_key: list[int] = field(default_factory=list)
    #: learned profiles (olsctl.power.learn), fed when ``learning``
    learned: Profiles = field(default_factory=Profiles)
    learning: bool = False
    sample_s: float = 300.0
    #: the learner's bookkeeping: per job, readings fed so far; the time of its last
    #: catch-up; readings of ended jobs not yet fed (see :meth:`on_finish`)
    fed: list[int] = field(default_factory=list)
    fed_until_s: float = float("-inf")
    pending: list = field(default_factory=list)
    #: per job: compute-boundness (olsctl.perfmodel's kappa), under a power limit
    kappa: list[float] = field(default_factory=list)
    #: per user: predictions made from its history as it is now, by what a predictor
    #: asked (see :class:`olsctl.power.predict.History`); dropped when the history grows
    predicted: dict[int, dict] = field(default_factory=dict)
    #: a snapshot's: its source's phases as flat arrays and the source's rows of its
    #: jobs, so :func:`flat_phases` picks them rather than reading the lists (a job's
    #: phases never change once made)
    flat_from: tuple | None = field(default=None, repr=False, compare=False)
    #: this state's own phases as flat arrays (:meth:`flat`)
    _flat: tuple | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.user)
        if len(self.window_entry) < n:
            self.window_entry.extend([float("nan")] * (n - len(self.window_entry)))
        if len(self.job_key) < n:
            self.job_key.extend(range(-n, -n + (n - len(self.job_key))))
        if len(self.fed) < n:
            self.fed.extend([0] * (n - len(self.fed)))

    def __getstate__(self) -> dict:
        """Pickled (to a worker) with its own columns, without the flat phases or its
        source: a snapshot's would carry its source's whole workload."""
        for name in FIXED_COLUMNS:
            getattr(self, name)
        state = dict(self.__dict__)
        state["flat_from"] = state["_flat"] = None
        state.pop("_source", None)
        state.pop("_arrays", None)
        return state

    def __getattr__(self, name: str):
        # (only names not set come here: a snapshot's fixed columns, picked from its
        # source's lists when first read, which hold its jobs as they were made)
        source = self.__dict__.get("_source")
        if source is None or name not in FIXED_COLUMNS:
            raise AttributeError(name)
        values = getattr(source[0], name)
        picked = _picker(source[1])(values) if values else []
        self.__dict__[name] = picked
        return picked

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
        """The jobs' true mean and maximum power per processor as arrays, their users as
        codes (0, 1, ... by first appearance in this state's source, or in this state),
        and the user of each code: a snapshot's picked from its source's arrays, made
        once per run (again only when jobs were appended since)."""
        got = self.__dict__.get("_arrays")
        source = self.__dict__.get("_source")
        if source is not None:  # (its jobs stay as they are: extend drops the source)
            if got is None:
                rows = self.flat_from[1]
                mean_w, max_w, codes, users = source[0].columns()
                got = self.__dict__["_arrays"] = (mean_w[rows], max_w[rows], codes[rows],
                                                  users)
            return got
        n = len(self.user)
        if got is None or got[2].size != n:
            code: dict = {}
            got = self.__dict__["_arrays"] = (
                np.asarray(self.true_mean_w, dtype=float),
                np.asarray(self.true_max_w, dtype=float),
                np.fromiter((code.setdefault(u, len(code)) for u in self.user), np.int64, n),
                list(code))
        return got

    def next_change_s(self, now_s: float) -> float:
        """When the cap schedule next moves to a new cap after ``now_s`` (inf: never)."""
        return self.cap.next_change_s(now_s)

    def cap_now(self, state: "SimState") -> float:
        return self.cap.cap_at(state.now_s)

    def job_power_now(self, state: "SimState", idx: int) -> float:
        """True power per processor of running job ``idx`` at the current time (under a
        power limit, what it draws as throttled)."""
        if state.limit is not None:
            return state.limit.level[idx]
        run = state.runtime_s[idx]
        x = (state.now_s - state.start_s[idx]) / run if run > 0 else 0.0
        starts = self.phase_start[idx]
        return self.phase_w[idx][max(bisect_right(starts, x) - 1, 0)]

    def measured_w(self, state: "SimState", predictor=None, stat: str = "mean") -> float:
        """Machine power now (what the facility's meters would read). With a
        ``predictor``, each running job counts at the larger of its measured power and
        its predicted ``stat`` (a cautious view of jobs that may draw more later)."""
        procs = state.procs
        busy_w = 0.0
        for _, j in state.running:
            now = self.job_power_now(state, j)
            if predictor is not None:
                later = predictor.predict(state, j, stat)
                now = later if later > now else now
            busy_w += procs[j] * now
        busy, active = state.busy_procs, state.active_procs
        idle = active - busy if active > busy else 0
        sleeping = state.total_procs - (active if active > busy else busy)
        return busy_w + self.idle_w * idle + self.sleep_w * sleeping

    def headroom_w(self, state: "SimState", predictor=None, stat: str = "mean") -> float:
        """Cap in force minus measured power (what new starts may add); see
        :meth:`measured_w` for ``predictor``."""
        return self.cap_now(state) - self.measured_w(state, predictor, stat)

    def on_finish(self, state: "SimState", idx: int) -> None:
        """Remember the finished job's measured profile for history predictors; when
        ``learning``, leave its readings not yet fed to the learner in ``pending`` (plain
        data, so a snapshot, which drops finished jobs, keeps them) for its next catch-up
        (:func:`olsctl.power.learn.catch_up`)."""
        user = self.user[idx]
        past = self.history.get(user, ())
        if len(past) >= HISTORY_LEN:
            past = past[len(past) - HISTORY_LEN + 1:]
        self.history[user] = past + ((self.true_mean_w[idx], self.true_max_w[idx],
                                      self.true_std_w[idx]),)
        self.predicted.pop(user, None)
        if not self.learning:
            return
        runtime = state.runtime_s[idx]
        total = n_readings(runtime, self.sample_s)
        k0 = self.fed[idx]
        if k0 < total:
            self.pending.append((state.start_s[idx], state.job_id[idx], self.job_key[idx],
                                 self.user[idx], k0, total, runtime, self.phase_start[idx],
                                 self.phase_w[idx]))
            self.fed[idx] = total

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every job's phases as flat arrays (:func:`flat_phases`), made once (again only
        when jobs were appended since)."""
        n = len(self.phase_start)
        if self._flat is None or len(self._flat[0]) != n + 1:
            self._flat = flat_phases(self, n)
        return self._flat

    def subset(self, idx: list[int], rows: np.ndarray | None = None) -> "PowerState":
        """The power data of jobs ``idx`` (re-indexed 0..; ``rows``: the same as an int64
        array, if the caller has it), for a snapshot: the columns
        that change copied now, the fixed ones (:data:`FIXED_COLUMNS`) picked from this
        state's when first read (made without ``__init__``, which would read them)."""
        pick = _picker(idx)
        out = object.__new__(PowerState)
        out.__dict__.update(
            idle_w=self.idle_w, sleep_w=self.sleep_w, peak_w=self.peak_w, cap=self.cap,
            history=dict(self.history), forced_starts=self.forced_starts,
            window_entry=pick(self.window_entry),
            learned=self.learned.fork(), learning=self.learning,
            sample_s=self.sample_s, fed=pick(self.fed), fed_until_s=self.fed_until_s,
            pending=list(self.pending), predicted={}, _flat=None,
            flat_from=(self.flat(), np.array(idx, dtype=np.int64) if rows is None else rows),
            _source=(self, idx))
        return out

    def extend(self, other: "PowerState") -> None:
        """Append ``other``'s jobs (arrivals fed to a what-if)."""
        for name in FIXED_COLUMNS:  # (its own lists from now on)
            getattr(self, name)
        self.__dict__.pop("_source", None)
        self.__dict__.pop("_arrays", None)
        for name in ("phase_start", "phase_w", "user", "true_mean_w", "true_max_w",
                     "true_std_w", "window_entry", "job_key", "fed", "kappa"):
            getattr(self, name).extend(getattr(other, name))


def power_state(profiles, user, idle_w: float, sleep_w: float, peak_w: float,
                cap: CapSchedule, job_key: list[int] | None = None, learning: bool = False,
                sample_s: float = 300.0) -> PowerState:
    """A :class:`PowerState` from :class:`olsctl.power.profiles.PowerProfiles` (rows in
    job order) and the users (history keys) of the jobs."""
    offsets = profiles.offset.tolist()
    frac = profiles.fraction.tolist()
    level = profiles.power_w.tolist()
    starts, levels = [], []
    for a, b in zip(offsets[:-1], offsets[1:]):
        cum, acc = [], 0.0
        for f in frac[a:b]:
            cum.append(acc)
            acc += f
        starts.append(cum)
        levels.append(level[a:b])
    return PowerState(idle_w, sleep_w, peak_w, cap, starts, levels, list(user),
                      profiles.mean_w.tolist(), profiles.max_w.tolist(),
                      profiles.std_w.tolist(), job_key=list(job_key or []),
                      learning=learning, sample_s=sample_s)
