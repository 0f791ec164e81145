"""A binary min-heap of item numbers, written once for every heap a kernel keeps.

The heap is ``heap[:n]``, a row of item numbers (jobs, tree nodes); which of two items
comes first is the step ``before(x, y, a, b)``, reading the items' keys from the arrays
``a`` and ``b``. Each heap is an instance of :func:`heap_add` and :func:`heap_drop`
made by :func:`olsctl.policies.core.jit.specialize` with its ``before`` bound: the
what-if loop's heap of true ends (:mod:`olsctl.policies.core.loop`) and the heap of
subtrees in WFP order (:mod:`olsctl.policies.mqbf.wfp_trees`). ``before`` must be a
strict total order on the items held.
"""

from __future__ import annotations

import numpy as np


def heap_add(heap: np.ndarray, n: int, f: int, a: np.ndarray, b: np.ndarray) -> int:
    """Add item ``f`` to the heap ``heap[:n]``; returns the new size."""
    i = n
    while i > 0:
        up = (i - 1) >> 1
        h = heap[up]
        if not before(f, h, a, b):  # noqa: F821  (a step: see the module's text)
            break
        heap[i] = h
        i = up
    heap[i] = f
    return n + 1


def heap_drop(heap: np.ndarray, n: int, a: np.ndarray, b: np.ndarray) -> int:
    """Take the first item off the heap ``heap[:n]``; returns the new size."""
    n -= 1
    f = heap[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and before(heap[c + 1], heap[c], a, b):  # noqa: F821
            c += 1
        h = heap[c]
        if not before(h, f, a, b):  # noqa: F821
            break
        heap[i] = h
        i = c
    heap[i] = f
    return n
