"""Where the controller's what-ifs run (olsctl/backends.py and the run's worker pool): every
backend a config names either works, with the bytes of one worker, or is refused at once
in one line; a pool that fails is seen, and one that keeps failing stops the run."""

from __future__ import annotations

import itertools
import multiprocessing
import socket
import sys
import time

import pytest

from olsctl import backends
from olsctl.cli import main

ROWS = [(i, 300 * i, 200 + (37 * i) % 900, 1 + (i * 7) % 5) for i in range(1, 80)]


@pytest.fixture
def trace(tmp_path, monkeypatch):
    """A small SWF log (79 jobs on 8 processors) in the working directory, ``t.swf``."""
    monkeypatch.chdir(tmp_path)
    lines = ["; MaxProcs: 8"] + [f"{j} {s} -1 {r} {p} -1 -1 {p} {r} -1 1 -1 -1 -1 -1 -1 -1 -1"
                                  for j, s, r, p in ROWS]
    (tmp_path / "t.swf").write_text("\n".join(lines) + "\n")
    return tmp_path


def config(tmp_path, name: str, **controller) -> str:
    """A run config of ``t.swf`` whose controller sends every tick to its pool (with
    ``n_jobs`` above 1), writing to ``out-NAME``."""
    keys = {"interval_s": 600, "sla": "{metric: mean_bsld, max: 3}",
            "parallel_min_waiting": 0, "pool_min_s": 0, **controller}
    body = "".join(f"  {k}: {v}\n" for k, v in keys.items())
    (tmp_path / f"{name}.yaml").write_text(f"trace: t.swf\nout: out-{name}\ncontroller:\n{body}")
    return f"{name}.yaml"


def one_line_error(capsys, kind: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"{kind}: "), err
    return err.strip()


# --- refused when the config is read ----------------------------------------------------

@pytest.mark.parametrize("settings,expected", [
    (["controller.backend=foo"],
     "controller.backend: unknown joblib backend 'foo' (known: processes, loky, threading, "
     "multiprocessing, dask, ray)"),
    (["controller.backend=loky", "controller.cluster=local"],
     "controller.cluster: only used with backend dask or ray (backend is loky)"),
    (["controller.backend=dask", "controller.cluster=scheduler"],
     "controller.cluster: must be local (a dask cluster on this machine, for the run) or the "
     "scheduler's address, e.g. tcp://127.0.0.1:8786 (got 'scheduler')"),
    (["controller.backend=dask", "controller.cluster=8786"],
     "controller.cluster: must be a string (got an integer 8786)"),
])
def test_a_bad_backend_or_cluster_is_refused_at_config_time(trace, capsys, settings, expected):
    args = ["run", config(trace, "bad", n_jobs=2)]
    for s in settings:
        args += ["--set", s]
    assert main(args) == 2
    assert one_line_error(capsys, "ConfigError") == f"ConfigError: command line: {expected}"
    assert not (trace / "out-bad").exists()


@pytest.mark.parametrize("backend,module", [("dask", "distributed"), ("ray", "ray")])
def test_a_cluster_backend_without_its_package_names_the_extra(trace, capsys, monkeypatch,
                                                               backend, module):
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    assert main(["run", config(trace, "missing", n_jobs=2, backend=backend)]) == 2
    assert one_line_error(capsys, "ConfigError") == (
        f"ConfigError: missing.yaml: controller.backend: {backend} needs the {backend} "
        f"extra: pip install 'olsctl[{backend}]'")


# --- a Dask cluster gives the bytes of one worker ------------------------------------------

@pytest.mark.parametrize("cluster", ["local", None])
def test_dask_on_a_local_cluster_gives_the_bytes_of_one_worker(trace, monkeypatch, cluster):
    """A real LocalCluster (worker processes, about a second to start); ``None`` leaves
    ``cluster`` out, which means ``local``. Before backends.py, every split tick failed
    ("Invalid backend: dask") and kept its setting, so the choices parted."""
    from distributed import Client

    submitted = []  # what joblib's dask backend handed to the cluster
    submit = Client.submit
    monkeypatch.setattr(Client, "submit", lambda self, *a, **k: submitted.append(1) or
                        submit(self, *a, **k))
    children = set(multiprocessing.active_children())
    extra = {} if cluster is None else {"cluster": cluster}
    assert main(["run", config(trace, "one", n_jobs=1), "--quiet"]) == 0
    assert main(["run", config(trace, "dask", n_jobs=2, backend="dask", **extra),
                 "--quiet"]) == 0
    import json

    summary = json.loads((trace / "out-dask" / "summary.json").read_text())
    assert summary["controller"]["failures"] == 0
    assert len(submitted) > 10  # the shares did run on the cluster
    for name in ("decisions.jsonl", "jobs.csv", "timeseries.csv"):
        assert (trace / "out-one" / name).read_bytes() == (trace / "out-dask" / name).read_bytes()
    assert len((trace / "out-dask" / "decisions.jsonl").read_text().splitlines()) > 10
    assert set(multiprocessing.active_children()) <= children  # the cluster was closed


def test_an_unreachable_cluster_stops_the_run_before_its_first_tick(trace, capsys):
    """Said first, and refused at once: Dask alone retries a refused connection until
    its connect timeout (set to 20 s here) before it gives up."""
    pytest.importorskip("distributed")
    import dask
    import distributed  # noqa: F401  (its config defaults, before they are overridden)

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = config(trace, "away", n_jobs=2, backend="dask", cluster=f"tcp://127.0.0.1:{port}")
    t0 = time.monotonic()
    with dask.config.set({"distributed.comm.timeouts.connect": "20s"}):
        assert main(["run", path]) == 2
    assert time.monotonic() - t0 < 5
    said, err = capsys.readouterr().err.splitlines()
    assert said == f"connecting to the dask scheduler at tcp://127.0.0.1:{port}"
    assert err.startswith(f"BackendError: away.yaml: controller.cluster: cannot connect to "
                          f"tcp://127.0.0.1:{port}: ConnectionRefusedError: ")
    assert not (trace / "out-away").exists()


# --- a pool that fails ----------------------------------------------------------------------

def flaky(monkeypatch, fail) -> None:
    """Make the run's joblib pool raise on the calls (counted from 1) that ``fail(k)``
    says; the others run as usual."""
    real = backends.parallel
    calls = itertools.count(1)

    class Flaky:
        def __init__(self, inner):
            self.inner = inner
            self.n_jobs = inner.n_jobs
            self.return_generator = inner.return_generator

        def __call__(self, tasks):
            if fail(next(calls)):
                raise RuntimeError("the pool broke")
            return self.inner(tasks)

        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)

    monkeypatch.setattr(backends, "parallel", lambda *args: Flaky(real(*args)))


def test_a_failed_pool_call_is_shown_and_the_run_goes_on(trace, capsys, monkeypatch):
    flaky(monkeypatch, lambda k: k == 3)
    assert main(["run", config(trace, "flaky", n_jobs=2, backend="threading")]) == 0
    out = capsys.readouterr().out
    assert "controller: 1 tick failed (a what-if or the worker pool raised; each kept the " \
           "setting in force): see \"failure\" in out-flaky/decisions.jsonl" in out
    failed = [line for line in (trace / "out-flaky" / "decisions.jsonl").read_text().splitlines()
              if '"failure"' in line]
    assert len(failed) == 1 and "RuntimeError: the pool broke" in failed[0]


def test_a_pool_that_keeps_failing_stops_the_run_in_one_line(trace, capsys, monkeypatch):
    flaky(monkeypatch, lambda k: k >= 3)
    assert main(["run", config(trace, "broken", n_jobs=2, backend="threading")]) == 2
    assert one_line_error(capsys, "BackendError") == (
        "BackendError: broken.yaml: controller.backend: threading failed 3 calls of "
        "what-ifs in a row, so the run stopped (last: RuntimeError: the pool broke)")
    assert not (trace / "out-broken").exists()
