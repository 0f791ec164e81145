"""Compiling the policy kernels once per machine: the compile lock around
:func:`olsctl.policies.core.jit.compile_kernels`, what it says, and ``olsctl study``
compiling in its own process before its workers start.

The lock and the messages are checked on a one-line kernel of the test's own (compiled
in well under a second) in processes with their own numba cache folder
(``NUMBA_CACHE_DIR``), so the cache starts cold; only the last test compiles olsctl's own
kernels from a cold cache (a minute or more: marked ``slow``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from numba import config as numba_config

from olsctl.config import build_config
from olsctl.policies.core import jit
from olsctl.policies.core.jit import COMPILING, WAITING
from olsctl.runner import needs_kernels
from test_study import write_tiny_swf

ROOT = Path(__file__).resolve().parent.parent

jit_only = pytest.mark.skipif(numba_config.DISABLE_JIT, reason="nothing compiles without the JIT")

#: a kernel module of the test's own; with TINY_HOLD set, its warm-up (run under the
#: compile lock) writes that file and waits TINY_HOLD_S seconds before it compiles
TINY_MODULE = '''\
from olsctl.policies.core.jit import kernel, warm_up


@kernel
def tiny_square(x):
    return x * x


@warm_up
def tiny_warm_up(k):
    import os, pathlib, time
    hold = os.environ.get("TINY_HOLD")
    if hold:
        pathlib.Path(hold).write_text("held")
        time.sleep(float(os.environ["TINY_HOLD_S"]))
    k.tiny_square(3)
'''

#: compile_kernels() in a fresh process with the tiny module; prints how numba's cache
#: served the tiny kernel (messages go to stderr)
TINY_RUN = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import tiny_kernels
from olsctl.policies.core import jit
jit.compile_kernels()
stats = jit.compiled().tiny_square.stats
print(json.dumps({"hits": sum(stats.cache_hits.values()),
                  "misses": sum(stats.cache_misses.values()),
                  "lock": jit.lock_path()}))
'''


def _tiny_env(tmp_path: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINY_")}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONUNBUFFERED="1", **extra)
    return env


def _tiny(tmp_path: Path, **extra: str) -> subprocess.Popen:
    (tmp_path / "tiny_kernels.py").write_text(TINY_MODULE)
    return subprocess.Popen([sys.executable, "-c", TINY_RUN, str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, env=_tiny_env(tmp_path, **extra))


def _finish(proc: subprocess.Popen) -> tuple[dict, list[str]]:
    """What the process printed: its cache figures and its stderr lines."""
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.splitlines()[-1]), err.splitlines()


@jit_only
def test_compile_says_so_on_a_cold_cache_only(tmp_path):
    """A cold cache: the kernel is compiled, and compile_kernels says so (one line on
    stderr); the same again: the kernel loads from the cache, nothing is said. The lock
    file sits in numba's cache folder (under NUMBA_CACHE_DIR here)."""
    cold, cold_err = _finish(_tiny(tmp_path))
    assert cold["misses"] == 1 and cold["hits"] == 0
    assert cold_err.count(COMPILING) == 1, cold_err
    assert Path(cold["lock"]).is_file()
    assert Path(cold["lock"]).is_relative_to(tmp_path / "cache")
    warm, warm_err = _finish(_tiny(tmp_path))
    assert warm["misses"] == 0 and warm["hits"] == 1
    assert COMPILING not in warm_err and WAITING not in warm_err, warm_err


@jit_only
def test_second_process_waits_and_loads(tmp_path):
    """Two processes on one cold cache: the first holds the lock from before its compile
    until a while after; the second, started while the first holds it, says it waits,
    then loads the kernel the first compiled (a cache hit, no compile, nothing said of
    compiling)."""
    flag = tmp_path / "held"
    first = _tiny(tmp_path, TINY_HOLD=str(flag), TINY_HOLD_S="3")
    t0 = time.monotonic()
    while not flag.exists():
        assert first.poll() is None and time.monotonic() - t0 < 60, "no lock taken"
        time.sleep(0.05)
    second, second_err = _finish(_tiny(tmp_path))
    got, first_err = _finish(first)
    assert got["misses"] == 1 and first_err.count(COMPILING) == 1, first_err
    assert second_err.count(WAITING) == 1, second_err
    assert second["misses"] == 0 and second["hits"] == 1
    assert COMPILING not in second_err


def test_lock_waits_for_its_holder(tmp_path, monkeypatch):
    """In one process: while a descriptor of the lock file holds it, the lock is not
    had; the waiter says so once and goes on when the holder lets go."""
    import fcntl

    lock = tmp_path / "k.lock"
    monkeypatch.setattr(jit, "lock_path", lambda: str(lock))
    holder = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    said: list[str] = []
    inside = threading.Event()

    def waiter() -> None:
        with jit._compile_lock(said.append):
            inside.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert not inside.wait(0.5)
    assert said == [WAITING]
    os.close(holder)
    assert inside.wait(10)
    thread.join()


def test_lock_cannot_be_had(tmp_path, monkeypatch):
    """A lock file that cannot be made (its folder is a file) or no lock file at all (the
    JIT disabled): the block runs unlocked, nothing said."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    said: list[str] = []
    ran = []
    for where in (str(blocker / "k.lock"), None):
        monkeypatch.setattr(jit, "lock_path", lambda where=where: where)
        with jit._compile_lock(said.append):
            ran.append(where)
    assert len(ran) == 2 and said == []


@pytest.mark.parametrize("raw, needs", [
    ({"policy": {"name": "easy"}}, False),
    ({"policy": {"name": "greedy-knapsack"}, "power": {"cap": {"fraction": 0.6}}}, False),
    ({"policy": {"name": "knapsack"}, "power": {"cap": {"fraction": 0.6}}}, True),
    ({"policy": {"name": "mqbf"}}, True),
    ({"policy": {"name": "easy"}, "controller": {"interval_s": 600}}, True),
])
def test_which_runs_need_kernels(raw, needs):
    """A run needs the compiled kernels when its main pass is one (MQBF) or it has a
    controller (the what-ifs and their scoring)."""
    assert needs_kernels(build_config({"trace": "KTH-SP2", **raw})) is needs


CLI = "from olsctl.cli import entry_point; entry_point()"

STUDY = """\
base:
  trace: tiny.swf
  policy: {name: mqbf, queues: 2, boundaries_s: [1000]}
  controller: {interval_s: 3600, sla: {max: 50}}
grid:
  estimates: [exact, user]
n_jobs: 2
"""


@pytest.mark.slow
@jit_only
def test_study_compiles_once_before_its_workers(tmp_path):
    """``olsctl study`` with two MQBF/OLS runs on two workers and a cold cache: the study
    process says it compiles, and fills numba's cache before its workers start (every
    cache write numba reports comes before the study's first line); the same study
    again compiles nothing and says nothing of it."""
    write_tiny_swf(tmp_path / "tiny.swf")
    (tmp_path / "study.yaml").write_text(STUDY)
    env = _tiny_env(tmp_path, NUMBA_DEBUG_CACHE="1")

    def study(out: str) -> list[str]:
        proc = subprocess.run([sys.executable, "-c", CLI, "study", "study.yaml", "--out", out],
                              cwd=tmp_path, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:]
        return proc.stdout.splitlines()

    lines = study("cold")
    start = next(i for i, line in enumerate(lines) if line.startswith("study study.yaml"))
    saved = [i for i, line in enumerate(lines) if "data saved to" in line]
    assert lines.count(COMPILING) == 1 and lines.index(COMPILING) < start
    assert saved and max(saved) < start, lines[start:start + 20]
    again = study("warm")
    assert COMPILING not in again and not any("data saved to" in line for line in again)


@pytest.mark.parametrize("n_jobs, controller", [(1, True), (2, True), (1, False)])
def test_a_run_readies_its_what_if_kernels_first(tmp_path, monkeypatch, n_jobs, controller):
    """A run with a controller readies its family's kernels before it starts (under the
    compile lock, saying so when it compiles), with one worker as with several; a run
    without what-ifs does not."""
    import olsctl.runner as runner

    asked = []
    monkeypatch.setattr(runner, "compile_kernels",
                        lambda say, policies=None: asked.append(list(policies)) or 0.0)
    write_tiny_swf(tmp_path / "tiny.swf", jobs=30)
    raw = {"trace": str(tmp_path / "tiny.swf"), "out": str(tmp_path / "out"),
           "policy": {"name": "easy"}}
    if controller:
        raw["controller"] = {"interval_s": 3600, "n_jobs": n_jobs}
    runner.execute(build_config(raw), say=jit.silent)
    assert asked == ([["easy"]] if controller else [])


#: two kernel modules of the test's own, one calling the other (numba compiles the
#: callee into the caller's cached code); the script prints the caller's result, the
#: fingerprint counting the callee's source only
STALE_CALLEE = "from olsctl.policies.core.jit import kernel\n\n\n@kernel\n" \
               "def tiny_base(x):\n    return x * x{extra}\n"
STALE_CALLER = '''\
from olsctl.policies.core.jit import kernel
from tiny_callee import tiny_base  # noqa: F401


@kernel
def tiny_twice(x):
    return 2 * tiny_base(x)
'''
STALE_RUN = r'''
import sys
sys.path.insert(0, sys.argv[1])
import tiny_callee, tiny_caller
from olsctl.policies.core import jit
jit.kernel_sources = lambda: [tiny_callee.__file__]
print(jit.compiled().tiny_twice(3))
'''


@jit_only
def test_an_edited_kernel_is_not_loaded_compiled_into_its_callers(tmp_path):
    """numba checks only the source of the kernel it loads from its cache; a caller
    cached before its callee was edited would still run the old callee. olsctl empties
    the cache when any kernel source changed: the edited callee counts at once."""
    def run(extra: str) -> str:
        (tmp_path / "tiny_callee.py").write_text(STALE_CALLEE.format(extra=extra))
        (tmp_path / "tiny_caller.py").write_text(STALE_CALLER)
        out = subprocess.run([sys.executable, "-c", STALE_RUN, str(tmp_path)],
                             capture_output=True, text=True, cwd=tmp_path,
                             env=_tiny_env(tmp_path), timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout.split()[-1]

    assert run("") == "18"
    assert run(" + 1") == "20"
    assert run("") == "18"


def test_stale_compiled_code_is_dropped_once(tmp_path):
    """:func:`jit.drop_stale`: with no record, or another fingerprint in it, numba's
    compiled files (.nbi, .nbc) go and the record gets the fingerprint; with the same
    one nothing goes. Only files of olsctl that hold kernels count (not the CLI)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    record = str(tmp_path / "sources")

    def fill() -> None:
        for name in ("k.f-1.py311.nbi", "k.f-1.py311.1.nbc", "olsctl-kernels.lock"):
            (cache / name).write_text("x")

    fill()
    assert jit.drop_stale([str(cache)], record, "one")
    assert sorted(p.name for p in cache.iterdir()) == ["olsctl-kernels.lock"]
    assert Path(record).read_text() == "one"
    fill()
    assert not jit.drop_stale([str(cache)], record, "one")
    assert len(list(cache.iterdir())) == 3
    assert jit.drop_stale([str(cache), str(cache)], record, "two")
    assert len(list(cache.iterdir())) == 1
    sources = [Path(p).as_posix() for p in jit.kernel_sources()]  # (installed or not)
    assert len(sources) == len(set(sources))
    for name in ("policies/power/choose.py", "policies/core/jit.py", "olsctl/feedback.py"):
        assert sum(p.endswith("/" + name) for p in sources) == 1, name
    assert not [p for p in sources if p.endswith("/olsctl/cli.py")]
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("1")
    b.write_text("2")
    before = jit.sources_fingerprint([str(a), str(b)])
    b.write_text("3")
    assert jit.sources_fingerprint([str(a), str(b)]) != before
