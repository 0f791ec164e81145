"""Worker processes on this machine for the controller's what-ifs (``backend: processes``).

Each worker is a Python process started once per run and fed through a pipe of its own:
this process pickles a call and writes it to the pipe itself, the worker runs it and
writes back the result. Nothing else runs in between, so a round trip costs little more
than the pickling (about 0.15 ms for an SDSC-BLUE snapshot). Pools that dispatch through
helper threads wait for those threads to get the interpreter, up to 5 ms each time while
this process runs what-ifs of its own, which is what a tick's what-ifs take in all.
"""

from __future__ import annotations

import os
import signal
from typing import Any, Iterator


def processes_for(n_jobs: int) -> int:
    """The processes ``n_jobs`` stands for, as joblib counts them (-1: all cores, -2:
    all but one, ...)."""
    if n_jobs > 0:
        return n_jobs
    return max(1, (os.cpu_count() or 1) + 1 + n_jobs)


class WorkerDied(RuntimeError):
    """A worker process ended while it had a call to answer."""


def _serve(conn) -> None:
    """A worker's loop: answer calls until the pipe closes (this process ended)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the main process
    while True:
        try:
            f, args, kwargs = conn.recv()
        except EOFError:
            return
        try:
            answer: tuple[bool, Any] = (True, f(*args, **kwargs))
        except BaseException as exc:  # handed back, raised there
            answer = (False, exc)
        try:
            conn.send(answer)
        except (OSError, EOFError):
            return  # nobody listens any more
        except Exception as exc:  # the answer does not pickle (nothing was written)
            try:
                conn.send((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
            except (OSError, EOFError):
                return


class Workers:
    """``n`` worker processes, started by :meth:`start` or at the first call (``spawn``:
    the same on every platform). :meth:`submit` sends calls off at once and returns an iterator over their
    answers in order; when a worker dies, reading its answer raises :class:`WorkerDied`
    and every worker is stopped, so that the next call starts afresh."""

    def __init__(self, n: int) -> None:
        self.n = max(1, n)
        self._procs: list = []
        self._conns: list = []

    def start(self) -> None:
        """Start the workers now, without waiting for them: each imports what it needs
        on a core of its own while this process goes on (a call waits only if it
        comes before a worker is ready)."""
        if self._procs:
            return
        import multiprocessing  # (here: a run without workers never loads it)

        ctx = multiprocessing.get_context("spawn")
        for _ in range(self.n):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(there,), daemon=True,
                               name="olsctl-worker")
            proc.start()
            there.close()
            self._procs.append(proc)
            self._conns.append(here)

    def submit(self, calls) -> Iterator:
        """Send ``calls`` (``(function, args, kwargs)``, as joblib's ``delayed`` makes
        them) off, one to each worker at a time (the rest go as answers come back)."""
        self.start()
        calls = list(calls)
        first = min(len(calls), self.n)
        try:
            for k in range(first):
                self._conns[k].send(calls[k])
        except (OSError, EOFError) as exc:
            self.close()
            raise WorkerDied(f"a worker process died: {exc}") from None
        return self._answers(calls, first)

    def _answers(self, calls: list, sent: int) -> Iterator:
        try:
            for k in range(len(calls)):
                conn = self._conns[k % self.n]
                try:
                    ok, value = conn.recv()
                except (EOFError, OSError):
                    proc = self._procs[k % self.n]
                    proc.join(1.0)
                    raise WorkerDied(f"a worker process died (exit code {proc.exitcode})") \
                        from None
                if sent < len(calls):  # the next call for this worker
                    conn.send(calls[sent])
                    sent += 1
                if not ok:
                    raise value
                yield value
        except BaseException:
            # a worker may still be busy with a call whose answer nobody will read
            self.close()
            raise

    def close(self) -> None:
        """Stop the workers (they end when their pipe closes; stragglers are killed)."""
        for conn in self._conns:
            conn.close()
        for proc in self._procs:
            proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self._procs, self._conns = [], []
