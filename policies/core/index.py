"""The index of a queue kept by position: each waiting job's width and estimate, in a tree
of narrowest widths and shortest estimates, so that a pass passes over every run of
jobs none of which could start (kernels, see :mod:`olsctl.policies.core.jit`).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.bound import INF
from olsctl.policies.core.jit import kernel

#: the width the index gives a position with no job waiting (wider than any machine)
NO_JOB = 1 << 62


@kernel
def index_open(queue: np.ndarray, nq: int, procs: np.ndarray, est: np.ndarray) -> tuple:
    """The index over the waiting jobs ``queue[:nq]``, by position: (``size``, ``wide``,
    ``short``). ``size`` leaves, the least power of two >= nq (and >= 1); the arrays are
    twice as long: node 1 is the root, node i's children are 2i and 2i + 1, leaf
    ``size + pos`` is position ``pos``; ``wide`` holds each node's narrowest width and
    ``short`` its shortest estimate (an empty leaf: NO_JOB and inf)."""
    size = 1
    while size < nq:
        size *= 2
    wide = np.empty(2 * size, dtype=np.int64)
    short = np.empty(2 * size)
    for i in range(size):
        if i < nq:
            j = queue[i]
            wide[size + i] = procs[j]
            short[size + i] = est[j]
        else:
            wide[size + i] = NO_JOB
            short[size + i] = INF
    for i in range(size - 1, 0, -1):
        index_up(wide, short, i)
    return size, wide, short


@kernel(inline=True)
def index_up(wide: np.ndarray, short: np.ndarray, i: int) -> None:
    """Node ``i`` of the index from its two children."""
    a = 2 * i
    b = a + 1
    wide[i] = wide[a] if wide[a] < wide[b] else wide[b]
    short[i] = short[a] if short[a] < short[b] else short[b]


@kernel(inline=True)
def index_drop(wide: np.ndarray, short: np.ndarray, size: int, pos: int) -> None:
    """The job at position ``pos`` no longer waits: its leaf empties, and the nodes
    above it are taken again from their children."""
    i = size + pos
    wide[i] = NO_JOB
    short[i] = INF
    i >>= 1
    while i:
        index_up(wide, short, i)
        i >>= 1
