"""Where a run's controller sends what-ifs besides this process: the backend names a config
may give and their checks, the cluster a run starts or joins (Dask, Ray) and closes, and
the ``joblib.Parallel`` of a joblib backend.

``processes`` is olsctl's own worker pool (:mod:`olsctl.workers`); every other name is a
joblib backend. ``dask`` and ``ray`` run on a cluster named by ``controller.cluster``:
``local`` (the default) starts one on this machine for the run, anything else is the
address of one already running. Either way the run connects before its first tick and
disconnects (closing a cluster it started) when it ends, also on an error or Ctrl-C.

What-ifs catch their own exceptions (a failed trial in the decision log), so whatever a
pool call raises comes from the backend: a worker that died, a cluster that went away.
The run goes on after one such call (the tick keeps its setting); a backend that cannot
start, or whose calls keep failing, stops the run with a :class:`BackendError`.
"""

from __future__ import annotations

import importlib.util
import re
import signal
import socket
import threading
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator

from olsctl.errors import ConfigError, OlsctlError

#: ``controller.backend`` values: olsctl's own worker processes, then joblib backends
BACKENDS = ("processes", "loky", "threading", "multiprocessing", "dask", "ray")
#: backends that run on a cluster: (the module they need, the olsctl extra installing it,
#: what an address looks like)
CLUSTER_BACKENDS = {
    "dask": ("distributed", "dask", "the scheduler's address, e.g. tcp://127.0.0.1:8786"),
    "ray": ("ray", "ray", "auto, or the cluster's address, e.g. ray://127.0.0.1:10001"),
}
#: ``controller.cluster`` value that starts a cluster on this machine for the run
LOCAL = "local"
#: pool calls in a row that may fail before the run stops: one failed call (a worker
#: that died) costs a tick its choice; a backend that keeps failing runs nothing
MAX_FAILED_CALLS = 3

_ADDRESS = {"dask": re.compile(r"[a-z][a-z0-9+.-]*://\S+:\d+"),
            "ray": re.compile(r"auto|(ray://)?\S+:\d+")}


class BackendError(OlsctlError):
    """The backend cannot run the what-ifs: a cluster out of reach, calls that keep
    failing (``file: controller.backend: ...``)."""

    kind = "BackendError"


class BackendDown(Exception):
    """Carries a :class:`BackendError` out of a controller tick up to the run, which
    raises the error. A tick keeps its setting when a what-if batch fails and the run
    goes on; this one it lets through (the pool cannot run what-ifs any more)."""

    def __init__(self, error: BackendError) -> None:
        super().__init__(error)
        self.error = error


def check(where: str, backend: Any, cluster: Any, n_jobs: int) -> None:
    """Check ``backend`` and ``cluster`` of a ``controller`` section (``where`` is
    ``file: controller``); raise :class:`ConfigError` naming the key. A backend other
    than the default needs ``n_jobs`` other than 1 (with one worker every what-if runs in
    this process, so a named backend would go unused); a cluster backend's package must
    be installed; ``cluster`` is only for ``dask`` and ``ray``."""
    if backend not in BACKENDS:
        raise ConfigError(f"{where}.backend: unknown joblib backend {backend!r} "
                          f"(known: {', '.join(BACKENDS)})")
    if n_jobs == 1 and backend != BACKENDS[0]:
        raise ConfigError(f"{where}.backend: {backend} is not used with n_jobs 1 (every "
                          f"what-if runs in this process): set controller.n_jobs to 2 or "
                          f"more (or -1), or leave backend out")
    if backend not in CLUSTER_BACKENDS:
        if cluster is not None:
            raise ConfigError(f"{where}.cluster: only used with backend dask or ray "
                              f"(backend is {backend})")
        return
    module, extra, address = CLUSTER_BACKENDS[backend]
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"{where}.backend: {backend} needs the {extra} extra: "
                          f"pip install 'olsctl[{extra}]'")
    if cluster is not None and cluster != LOCAL and not _ADDRESS[backend].fullmatch(cluster):
        raise ConfigError(f"{where}.cluster: must be {LOCAL} (a {backend} cluster on this "
                          f"machine, for the run) or {address} (got {cluster!r})")


def one_line(exc: BaseException) -> str:
    """``Kind: message`` of ``exc`` on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def connect(stack: ExitStack, backend: str, cluster: str | None, workers: int,
            where: str, say: Callable[[str], None] = lambda text: None) -> dict:
    """Start or join the cluster of a cluster backend (``cluster`` None: ``local``, with
    ``workers`` single-threaded worker processes: joblib runs a call in this process when
    the cluster has a single core), to be left when ``stack`` closes; the
    ``joblib.parallel_config`` parameters that run on it. Other backends need nothing.
    Joining a running cluster is said with ``say`` first (it may take a while)."""
    if backend == "dask":
        return _dask(stack, cluster or LOCAL, workers, where, say)
    if backend == "ray":
        return _ray(stack, cluster or LOCAL, workers, where)
    return {}


def reach_dask(address: str) -> None:
    """Open and close a TCP connection to the Dask scheduler at ``address``
    (``tcp://host:port`` or ``tls://``; other schemes are left to Dask), so that an
    address where nothing listens fails at once (``ConnectionRefusedError``) instead of
    after the retries of Dask's connect timeout (``distributed.comm.timeouts.connect``,
    30 s by default), which bounds this attempt too (``TimeoutError``). Without a port,
    Dask's scheduler port, 8786."""
    import dask
    from dask.utils import parse_timedelta
    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(address)
    if scheme not in ("tcp", "tls"):
        return
    timeout_s = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
    with socket.create_connection(parse_host_port(location, 8786), timeout=timeout_s):
        pass


def _dask(stack: ExitStack, cluster: str, workers: int, where: str,
          say: Callable[[str], None]) -> dict:
    from distributed import Client, LocalCluster

    try:
        if cluster == LOCAL:
            with _sigint_ignored():  # Ctrl-C is for this process, which closes the cluster
                local = stack.enter_context(LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True,
                    host="127.0.0.1", dashboard_address=None))
            client = stack.enter_context(Client(local, set_as_default=False))
        else:
            say(f"connecting to the dask scheduler at {cluster}")
            reach_dask(cluster)
            client = stack.enter_context(Client(cluster, set_as_default=False))
    except Exception as exc:  # unreachable, refused, cannot start: all the same to the user
        what = "cannot start a local dask cluster" if cluster == LOCAL else \
            f"cannot connect to {cluster}"
        raise BackendError(f"{where}.cluster: {what}: {one_line(exc)}") from None
    return {"client": client}


def _ray(stack: ExitStack, cluster: str, workers: int, where: str) -> dict:
    import ray
    from ray.util.joblib import register_ray

    register_ray()
    try:
        if cluster == LOCAL:
            ray.init(num_cpus=workers)
        else:
            ray.init(address=cluster)
    except Exception as exc:
        what = "cannot start a local ray cluster" if cluster == LOCAL else \
            f"cannot connect to {cluster}"
        raise BackendError(f"{where}.cluster: {what}: {one_line(exc)}") from None
    stack.callback(ray.shutdown)
    return {}


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore Ctrl-C while worker processes start, so that they inherit that (as olsctl's
    own workers do), and stop with the run instead of printing a traceback each."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def parallel(backend: str, n_jobs: int, params: dict, where: str):
    """A ``joblib.Parallel`` of ``n_jobs`` on ``backend`` (set up with ``params``, from
    :func:`connect`), entered (its workers kept between calls until its ``__exit__``),
    that hands results back as they come in, or all at once when the backend cannot;
    :class:`BackendError` when the backend cannot be set up."""
    from joblib import Parallel, parallel_config

    try:
        with parallel_config(backend=backend, **params):  # only while it is built
            try:
                pool = Parallel(n_jobs=n_jobs, return_as="generator")
            except ValueError:  # this backend returns all results at once
                pool = Parallel(n_jobs=n_jobs)
        return pool.__enter__()
    except Exception as exc:
        raise BackendError(f"{where}.backend: {backend} cannot run the what-ifs: "
                           f"{one_line(exc)}") from None


def failed_calls_error(where: str, backend: str, calls: int, exc: BaseException) -> BackendError:
    """The error that stops a run after ``calls`` failed pool calls in a row."""
    return BackendError(f"{where}.backend: {backend} failed {calls} calls of what-ifs in a "
                        f"row, so the run stopped (last: {one_line(exc)})")
