"""Wallace et al.'s dynamic power learner: job and project profiles learned online.

A profile (per job key: the same user's same application, see
:meth:`olsctl.workload.Workload.job_keys`; and per project) is the mean of the power
readings of jobs with that key. Readings are what a facility's monitor sees: one every
``sample_s`` (``PowerState.sample_s``) of a job's run from its start, its power per
processor then. A profile is unknown until it has ``min_samples`` readings; after that it
changes only when the readings gathered since its last change number ``min_samples`` too
and a two-sample (Welch) t-test finds them different from the readings behind it at
significance ``alpha`` (0.01: 99%); readings that do not differ join the profile's base
without moving it.

A job is predicted by its job profile when learned, else its project's, else the peak.

Readings reach the learner while jobs run, causally: before the learner predicts at time
``now`` it catches up (:func:`catch_up`) on every reading taken before ``now`` that it has
not seen, from running jobs and from jobs that ended since its last catch-up (an ending
job leaves its unseen readings in ``PowerState.pending``, see
:meth:`~olsctl.power.runtime.PowerState.on_finish`; they were all taken before its end). A reading taken at ``t`` therefore informs decisions after ``t``, a long job teaches
its profiles as it runs, and no new simulation events are needed.

The readings are fed one at a time in the order they were taken (time, then job id), so
the profiles at ``now`` are a function of the readings taken before ``now`` only: not of
when catch-ups happened, nor of which passes ran. The main simulator (passes at controller
ticks and cap changes) and a what-if of its snapshot (passes at completions) learn
exactly the same; the 20-reading rule is applied at exactly the 20th reading.

Profiles are kept as count, mean and sum of squared deviations (enough for the test),
as plain lists in ``PowerState.learned`` (a :class:`~olsctl.power.runtime.Profiles`,
which a snapshot shares until either side changes a profile); per-job counts of
readings fed are in ``PowerState.fed``: snapshots carry both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scipy.special import stdtr

from olsctl.power.runtime import PowerState, n_readings

if TYPE_CHECKING:
    from olsctl.state import SimState

#: a profile: [value or None, base n, base mean, base M2, new n, new mean, new M2]
EMPTY = (None, 0, 0.0, 0.0, 0, 0.0, 0.0)


def _phase_first(phase_start: list[float], runtime_s: float, sample_s: float,
                 total: int) -> list[int]:
    """Index of the first reading in each phase, then ``total``."""
    first = [math.ceil(f * runtime_s / sample_s - 1e-9) for f in phase_start[1:]]
    return [0] + [k if k < total else total for k in first] + [total]


def reading_levels(phase_start: list[float], phase_w: list[float], runtime_s: float,
                   sample_s: float, k0: int, k1: int) -> list[tuple[int, float]]:
    """(k, W per processor) of a job's readings ``k0 <= k < k1``; reading ``k`` is taken
    ``k x sample_s`` after the start, in the phase running then."""
    first = _phase_first(phase_start, runtime_s, sample_s, n_readings(runtime_s, sample_s))
    out = []
    for p, level in enumerate(phase_w):
        lo = first[p] if first[p] > k0 else k0
        hi = first[p + 1] if first[p + 1] < k1 else k1
        out.extend((k, level) for k in range(lo, hi))
    return out


def readings(phase_start: list[float], phase_w: list[float], runtime_s: float,
             sample_s: float) -> tuple[int, float, float]:
    """(count, mean, M2) of a job's readings, one every ``sample_s`` from its start."""
    total = n_readings(runtime_s, sample_s)
    first = _phase_first(phase_start, runtime_s, sample_s, total)
    n_all, mean, m2 = 0, 0.0, 0.0
    for p, level in enumerate(phase_w):
        n = max(0, first[p + 1] - first[p])
        if n:
            n_all, mean, m2 = _merge(n_all, mean, m2, n, level, 0.0)
    return n_all, mean, m2


def _merge(na: int, ma: float, m2a: float, nb: int, mb: float, m2b: float):
    n = na + nb
    if n == 0:
        return 0, 0.0, 0.0
    d = mb - ma
    return n, ma + d * nb / n, m2a + m2b + d * d * na * nb / n


def _welch_p(ma: float, va: float, na: int, mb: float, vb: float, nb: int) -> float:
    """Two-sided p-value of Welch's t-test from sample means, variances and counts (as
    ``scipy.stats.ttest_ind_from_stats(..., equal_var=False)``, without its overhead)."""
    a, b = va / na, vb / nb
    se2 = a + b
    df = se2 * se2 / (a * a / (na - 1) + b * b / (nb - 1))
    t = (ma - mb) / math.sqrt(se2)
    return float(2.0 * stdtr(df, -abs(t)))


def learn(profile: list, n: int, mean: float, m2: float, min_samples: int,
          alpha: float) -> None:
    """Add ``n`` readings (mean, M2) to ``profile`` in place, by the rules above."""
    value, bn, bm, b2, nn, nm, n2 = profile
    if value is None:
        bn, bm, b2 = _merge(bn, bm, b2, n, mean, m2)
        profile[:] = [bm if bn >= min_samples else None, bn, bm, b2, 0, 0.0, 0.0]
        return
    profile[4:] = _merge(nn, nm, n2, n, mean, m2)
    if profile[4] >= min_samples:
        _settle(profile, alpha)


def _settle(profile: list, alpha: float) -> None:
    """A learned profile's new readings are enough: move it to them if they differ
    (Welch's t-test at ``alpha``), else add them to its base."""
    value, bn, bm, b2, nn, nm, n2 = profile
    va = b2 / (bn - 1) if bn > 1 else 0.0
    vb = n2 / (nn - 1) if nn > 1 else 0.0
    if va == 0 and vb == 0:
        differs = bm != nm
    else:
        differs = _welch_p(bm, va, bn, nm, vb, nn) < alpha
    if differs:
        profile[:] = [nm, nn, nm, n2, 0, 0.0, 0.0]
    else:
        bn, bm, b2 = _merge(bn, bm, b2, nn, nm, n2)
        profile[:] = [value, bn, bm, b2, 0, 0.0, 0.0]


@dataclass(frozen=True)
class Learner:
    """The predictor side: job profile, else project profile, else peak. Predicting at
    time ``now`` first catches up on the readings taken before ``now``."""

    min_samples: int = 20
    alpha: float = 0.01
    sample_s: float = 300.0
    name: str = "learner"

    def __post_init__(self) -> None:
        if self.min_samples < 2:
            raise ValueError(f"min_samples: must be >= 2 (got {self.min_samples})")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha: must be in (0, 1) (got {self.alpha})")
        if self.sample_s <= 0:
            raise ValueError(f"sample_s: must be > 0 (got {self.sample_s})")

    def source(self, power: "PowerState", idx: int) -> str:
        """Where the prediction of job ``idx`` comes from: job, project or peak (as of the
        last catch-up)."""
        job = power.learned.get(("job", power.job_key[idx]))
        if job is not None and job[0] is not None:
            return "job"
        proj = power.learned.get(("project", power.user[idx]))
        if proj is not None and proj[0] is not None:
            return "project"
        return "peak"

    def predict(self, state: "SimState", idx: int, stat: str = "mean") -> float:
        p = state.power
        if p.learning and (state.now_s > p.fed_until_s or p.pending):
            catch_up(state, state.now_s, self)
        where = self.source(p, idx)
        if where == "peak":
            return 0.0 if stat == "std" else p.peak_w
        if stat == "std":
            return 0.0
        return p.learned[(where, p.job_key[idx] if where == "job" else p.user[idx])][0]


def catch_up(state: "SimState", now_s: float, settings: Learner = Learner()) -> None:
    """Feed the readings taken before ``now_s`` that the learner has not seen (running
    jobs' and pending ones), one at a time in the order (time taken, job id)."""
    p = state.power
    s = p.sample_s
    due = []  # (time, job id, W per processor, job profile key, project profile key)
    start_s, runtime_s, job_id, fed = state.start_s, state.runtime_s, state.job_id, p.fed
    for _, j in state.running:
        start, k0 = start_s[j], fed[j]
        if start + k0 * s >= now_s:
            continue
        runtime = runtime_s[j]
        total = n_readings(runtime, s)
        k1 = math.ceil((now_s - start) / s)
        if k1 > total:
            k1 = total
        elif k1 < k0:
            k1 = k0
        while k1 > k0 and start + (k1 - 1) * s >= now_s:
            k1 -= 1
        while k1 < total and start + k1 * s < now_s:
            k1 += 1
        fed[j] = k1
        _collect(due, start, s, job_id[j], p.job_key[j], p.user[j], k0, k1, total,
                 runtime, p.phase_start[j], p.phase_w[j])
    for start, jid, key, user, k0, total, runtime, phase_start, phase_w in p.pending:
        _collect(due, start, s, jid, key, user, k0, total, total, runtime, phase_start,
                 phase_w)
    p.pending.clear()
    if now_s > p.fed_until_s:
        p.fed_until_s = now_s
    if not due:
        return
    due.sort()
    learned = p.learned
    need, alpha = settings.min_samples, settings.alpha
    for item in due:
        x = item[2]
        for key in item[3:]:
            # learn(profile, 1, x, 0.0, need, alpha), inlined: this runs per reading
            profile = learned.own_profile(key, EMPTY)
            if profile[0] is None:
                n = profile[1] + 1
                d = x - profile[2]
                profile[2] += d / n
                profile[3] += d * d * (n - 1) / n
                profile[1] = n
                if n >= need:
                    profile[0] = profile[2]
            else:
                n = profile[4] + 1
                d = x - profile[5]
                profile[5] += d / n
                profile[6] += d * d * (n - 1) / n
                profile[4] = n
                if n >= need:
                    _settle(profile, alpha)


def _collect(due: list, start: float, s: float, jid: int, key: int, user: int, k0: int,
             k1: int, total: int, runtime: float, phase_start: list[float],
             phase_w: list[float]) -> None:
    """Append readings ``k0 <= k < k1`` of one job to ``due``."""
    jk, pk = ("job", key), ("project", user)
    if len(phase_w) == 1:
        w = phase_w[0]
        due.extend([(start + k * s, jid, w, jk, pk) for k in range(k0, k1)])
        return
    first = _phase_first(phase_start, runtime, s, total)
    for q, w in enumerate(phase_w):
        lo = first[q] if first[q] > k0 else k0
        hi = first[q + 1] if first[q + 1] < k1 else k1
        if lo < hi:
            due.extend([(start + k * s, jid, w, jk, pk) for k in range(lo, hi)])
