"""The optional parts of the policy protocol, as do-nothing defaults.

Every built-in policy derives from :class:`PolicyBase`, so the runner and the controller
call these parts without probing for them; a policy overrides the ones it offers (and
its registry entry declares what it needs, see :class:`olsctl.policies.PolicyEntry`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from olsctl.records import RunRecords
    from olsctl.state import SimState
    from olsctl.workload import Workload


class PolicyBase:
    """Defaults: every job acceptable, no model of its own, no report, one queue."""

    def check_jobs(self, job_id: Sequence[int], procs: Sequence[int],
                   estimate_s: Sequence[float], active_procs: int) -> str | None:
        """Why this policy cannot run these jobs (``key: reason``), or None."""
        return None

    def prepare(self, state: "SimState", workload: "Workload") -> str | None:
        """Set up what the policy keeps on the state for a run of ``workload`` (its
        job model); why the run cannot go (``key: reason``), or None."""
        return None

    def run_report(self, state: "SimState", records: "RunRecords") -> dict | None:
        """Figures of the policy's own for ``summary.json`` (None: nothing to add), under
        the key :attr:`report_key`."""
        return None

    #: the key of :meth:`run_report`'s figures in ``summary.json``
    report_key: str = "budget"

    #: queues the controller scores separately (0: none, the policy has one queue)
    n_queues: int = 0

    def queue_index(self, estimate_s: float) -> int:
        """The queue a job with this estimate belongs to (0 for single-queue policies)."""
        return 0
