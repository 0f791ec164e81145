"""Compiling the policy kernels, only where it pays.

A kernel is a plain Python function marked with :func:`kernel`; its module stays free of
numba, so a run that needs no compiled code (a main simulation without what-ifs) never
imports it. :func:`compiled` makes numba-compiled copies of every kernel on first use
(numba is imported then): each copy's global names resolve to the other compiled
kernels, so a compiled kernel calls compiled kernels. Compiled code is cached next to
the kernels' source files (numba's ``cache=True``). With ``NUMBA_DISABLE_JIT=1`` the
"compiled" copies are the same plain functions.

So each rule is written once: the main simulator calls EASY's plain functions over its
lists and MQBF's compiled pass over arrays; the what-if loops call the compiled ones.
Kernels outside the policies (SLA feedback's realized metric, which a controller takes
every tick) are compiled the same way: a kernel module imported after the first
:func:`compiled` joins the compiled kernels at the next call. A module registers what
compiles its kernels on a tiny case with :func:`warm_up`, which
:func:`compile_kernels` runs.

Compiling takes a minute or two, so it happens once per machine: :func:`compile_kernels`
holds a lock (``flock`` on a file in numba's cache folder of ``policies/core``) while it
compiles and fills the cache, and says so when it compiles; another process that wants
the kernels meanwhile says it waits, then loads them from the cache. A change to any
kernel source empties the cache first (:func:`drop_stale`).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import time
import types
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

_KERNELS: dict[str, Callable] = {}

_COMPILED: "types.SimpleNamespace | None" = None

#: the names the compiled kernels see (:func:`_shared_scope`), and the kernels registered
#: since the compiled ones were made, to join them at the next :func:`compiled`
_SCOPE: dict = {}
_PENDING: list[str] = []

#: the kernels made by :func:`specialize`: for each, its step names and the kernels bound
#: to them
_STEPS: dict[str, dict[str, str]] = {}
#: the scopes of their compiled copies (the shared scope, with the steps bound)
_STEP_SCOPES: list[dict] = []

#: what compiles each kernel module's kernels on a tiny case (see :func:`warm_up`)
_WARM_UPS: list[Callable] = []

#: the kernels compiled into their callers (see :func:`kernel`)
_INLINE: set[str] = set()

#: the kernels compiled without reference counts (see :func:`kernel`)
_NO_REFCOUNTS: set[str] = set()


def kernel(func: Callable | None = None, *, inline: bool = False,
           refcounts: bool = True) -> Callable:
    """Mark ``func`` as a kernel (returned unchanged). Kernel names are unique across
    modules: a compiled kernel finds the others by name.

    ``@kernel(inline=True)`` marks a small step that a what-if loop takes at every event
    (a heap push, an admit test): its compiled copy is compiled into each kernel that
    calls it (numba's ``inline='always'``) rather than called, because there a call
    costs more than the step, chiefly in its array arguments' reference counts. The
    plain function, and what it computes, are the same.

    ``@kernel(refcounts=False)`` marks a what-if loop that allocates nothing: it works
    on arrays its caller made, and takes no array from a call. Its compiled copy keeps
    no reference counts (numba's ``_nrt=False``): the steps compiled into it would
    otherwise count up and down, atomically, each array they are given, at every event
    (about a seventh of a congested what-if's time). The kernels it calls keep theirs:
    every other kernel is compiled with ``_nrt=True`` said outright, because numba
    compiles a kernel that does not say it under the setting of its first caller, and
    a kernel that allocates, compiled so for a loop, would leak whatever it allocates
    for every caller."""
    if func is None:
        return lambda f: kernel(f, inline=inline, refcounts=refcounts)
    name = func.__name__
    if _KERNELS.get(name, func) is not func:
        raise ValueError(f"two kernels named {name!r}")
    _KERNELS[name] = func
    if inline:
        _INLINE.add(name)
    if not refcounts:
        _NO_REFCOUNTS.add(name)
    if _COMPILED is not None:
        _PENDING.append(name)
    return func


def specialize(template: Callable, name: str, *, inline: bool = False,
               refcounts: bool = True, **steps: Callable) -> Callable:
    """A kernel named ``name`` that runs ``template``'s code with its global names
    ``steps`` bound to the given kernels: one loop written once, each policy family's
    instance calling that family's steps (compiled into it where they are marked
    ``inline``). The plain function runs the same way uncompiled; it sees the names of
    ``template``'s module as they are when it is made (make it once they are all
    defined). ``inline`` and ``refcounts`` as for :func:`kernel`."""
    scope = dict(template.__globals__)
    scope.update(steps)
    func = types.FunctionType(template.__code__, scope, name, template.__defaults__,
                              template.__closure__)
    func.__qualname__ = name
    func.__doc__ = template.__doc__
    _STEPS[name] = {step: bound.__name__ for step, bound in steps.items()}
    return kernel(func, inline=inline, refcounts=refcounts)


def warm_up(func: Callable) -> Callable:
    """Register ``func(k)``, which runs a kernel module's kernels ``k``
    (:func:`compiled`) on a tiny case, for :func:`compile_kernels` (returned
    unchanged)."""
    _WARM_UPS.append(func)
    return func


def compiled_if_loaded() -> "types.SimpleNamespace | None":
    """The compiled kernels if :func:`compiled` has made them already (a run with
    what-ifs), else None: for callers that have a plain way as well and should not
    import numba for themselves."""
    return _COMPILED


def plain() -> types.SimpleNamespace:
    """Every kernel as the plain Python function it is, by name (what :func:`compiled`
    gives with the JIT disabled): those of the kernel modules imported so far."""
    return types.SimpleNamespace(**_KERNELS)


def compiled() -> types.SimpleNamespace:
    """The compiled kernels, by name (compiled lazily, at each one's first call, or
    loaded from the cache): those of the kernel modules imported so far. A module that
    calls a kernel through it imports the kernel's module."""
    global _COMPILED
    if _COMPILED is None:
        _skip_blas_probe()
        _SCOPE.update(_shared_scope(_KERNELS.values()))
        _COMPILED = types.SimpleNamespace()
        for name in sorted(_KERNELS, key=_STEPS.__contains__):  # (the steps first)
            _compile(name)
        _complete_step_scopes()
        _drop_stale_cache()
    elif _PENDING:  # kernel modules imported since: their names join the scope
        late = [_KERNELS[name] for name in _PENDING]
        for name, value in _shared_scope(late).items():
            _bind(_SCOPE, name, value, late[0])
        for name in sorted(_PENDING, key=_STEPS.__contains__):
            _compile(name)
        _PENDING.clear()
        _complete_step_scopes()
    return _COMPILED


def _compile(name: str) -> None:
    """The compiled copy of kernel ``name``, its global names resolved in the scope."""
    from numba import njit

    func = _KERNELS[name]
    scope = _SCOPE
    if name in _STEPS:  # its steps bound to the compiled kernels
        scope = dict(_SCOPE)
        scope.update({step: _SCOPE[bound] for step, bound in _STEPS[name].items()})
        _STEP_SCOPES.append(scope)
    copy = types.FunctionType(func.__code__, scope, name, func.__defaults__,
                              func.__closure__)
    copy.__qualname__ = func.__qualname__
    copy.__module__ = func.__module__
    # (every kernel says whether it counts references: one that did not would inherit
    # the setting of the first kernel compiling a call to it)
    _SCOPE[name] = njit(cache=True, inline="always" if name in _INLINE else "never",
                        _nrt=name not in _NO_REFCOUNTS)(copy)
    setattr(_COMPILED, name, _SCOPE[name])


def _complete_step_scopes() -> None:
    """Every name of the shared scope in each specialized kernel's scope too (numba
    resolves a kernel's names at its first call: by then every kernel made so far is
    there, including those made after it), its steps kept."""
    for scope in _STEP_SCOPES:
        for name, value in _SCOPE.items():
            scope.setdefault(name, value)


def _shared_scope(funcs: "Iterable[Callable] | None" = None) -> dict:
    """The names the compiled kernels (``funcs``, default all) see besides one another:
    every kernel module's constants and imports (and the first one's module
    attributes, ``__builtins__`` among them), in one scope. A name bound to different
    values in two modules is refused (ValueError): one module's kernels would see the
    other's."""
    scope: dict = {}
    for func in _KERNELS.values() if funcs is None else funcs:
        steps = _STEPS.get(func.__name__, ())
        for name, value in func.__globals__.items():
            if name not in _KERNELS and name not in steps:
                _bind(scope, name, value, func)
    return scope


def _bind(scope: dict, name: str, value, func: Callable) -> None:
    """Bind ``name`` in ``scope`` to ``func``'s module's ``value``, unless bound to
    another value already (ValueError)."""
    had = scope.setdefault(name, value)
    if had is not value and not name.startswith("__") and not _same_constant(had, value):
        raise ValueError(f"kernel modules bind {name!r} to different values "
                         f"({func.__module__}: {value!r}, elsewhere: {had!r})")


def _same_constant(a, b) -> bool:
    """Whether two module constants are the same number, string or tuple of them."""
    if type(a) is not type(b) or not isinstance(a, (int, float, str, tuple)):
        return False
    return a == b


def _skip_blas_probe() -> None:
    """Load numba's array functions without their BLAS probe.

    When it first compiles or loads a function, numba imports ``scipy.linalg`` (about
    0.25 s, a third of its start-up here) only to learn whether ``np.convolve`` and
    ``np.correlate`` may call BLAS. No kernel uses those two, nor any linear algebra
    (which looks for BLAS itself, when compiled), so the probe is told there is none:
    those two would take numba's own loop. Later imports of ``scipy.linalg`` are not
    affected; nothing is done when it is already imported."""
    probe, blas = "numba.np.arraymath", "scipy.linalg.cython_blas"
    if probe in sys.modules or blas in sys.modules:
        return
    sys.modules[blas] = None  # type: ignore[assignment]  # (import fails at once)
    try:
        importlib.import_module(probe)
    finally:
        if sys.modules.get(blas, False) is None:
            del sys.modules[blas]


#: the file, beside the compile lock, naming the kernels' sources the cache was filled from
SOURCES_NAME = "olsctl-kernels.sources"


def kernel_sources() -> list[str]:
    """Every source file of olsctl that holds kernels (or makes them: :func:`specialize`),
    whether imported yet or not, in path order."""
    import olsctl

    found = set()  # (installed, the policies are inside the olsctl folder)
    for top in (os.path.dirname(os.path.abspath(olsctl.__file__)),
                os.path.dirname(os.path.dirname(os.path.abspath(__file__)))):
        for folder, _dirs, files in os.walk(top):
            for name in files:
                path = os.path.join(folder, name)
                if name.endswith(".py") and path not in found:
                    with open(path, "rb") as f:
                        text = f.read()
                    if b"@kernel" in text or b"specialize(" in text:
                        found.add(path)
    return sorted(found)


def sources_fingerprint(paths: list[str]) -> str:
    """A digest of the files ``paths`` (their names and contents)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            digest.update(path.encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()


def drop_stale(folders: "Iterable[str]", record: str, fingerprint: str) -> bool:
    """Empty numba's cache ``folders`` of compiled code (``.nbi``, ``.nbc``) unless the
    file ``record`` holds ``fingerprint`` (the sources the cache was filled from), then
    write it there; returns whether it emptied them.

    [choice] numba checks only the file of the kernel it loads: a kernel that calls
    another one, edited or upgraded since, would load with the old callee compiled in.
    So any change to any kernel source makes every kernel compile again, once."""
    try:
        with open(record) as f:
            if f.read() == fingerprint:
                return False
    except OSError:
        pass
    for folder in set(folders):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith((".nbi", ".nbc")):
                try:
                    os.remove(os.path.join(folder, name))
                except OSError:
                    pass
    try:
        with open(record + ".new", "w") as f:
            f.write(fingerprint)
        os.replace(record + ".new", record)
    except OSError:
        pass
    return True


def _drop_stale_cache() -> None:
    """:func:`drop_stale` over the compiled kernels' cache folders, under the compile
    lock when it has to empty them (nothing to do with the JIT disabled)."""
    path = lock_path()
    if path is None:
        return
    record = os.path.join(os.path.dirname(path), SOURCES_NAME)
    fingerprint = sources_fingerprint(kernel_sources())
    try:
        with open(record) as f:
            if f.read() == fingerprint:
                return  # (the usual case: nothing to lock)
    except OSError:
        pass
    folders = [_SCOPE[name].stats.cache_path for name in _KERNELS
               if hasattr(_SCOPE.get(name), "stats")]
    with _compile_lock(silent):
        drop_stale(folders, record, fingerprint)


#: what :func:`compile_kernels` says when it compiles, and when it waits for another
#: process's compile
COMPILING = ("compiling olsctl's policy kernels once for this machine (a minute or two; "
             "later runs load them)")
WAITING = "waiting for another olsctl process to finish compiling the policy kernels"
#: the lock file's name, in numba's cache folder of this package
LOCK_NAME = "olsctl-kernels.lock"


def on_stderr(text: str) -> None:
    """Say ``text`` on one line of stderr."""
    print(text, file=sys.stderr, flush=True)


def silent(text: str) -> None:
    """Say nothing."""


def compile_kernels(say: Callable[[str], None] = on_stderr,
                    skip: tuple[str, ...] = ()) -> float:
    """Compile every kernel (or load it from the cache) by running each registered warm-up
    (:func:`warm_up`: the what-if loops on a tiny case, and those of kernel modules
    imported so far); returns the seconds it took (the first run's compile time when
    the cache is empty).

    The warm-ups run under the machine's compile lock (:func:`_compile_lock`), so that
    one process compiles and fills numba's cache while others wait for it and then load.
    ``say`` is told :data:`COMPILING` when a kernel is compiled rather than loaded (once),
    and :data:`WAITING` when another process holds the lock. The warm-ups of modules
    whose names start with one of ``skip`` are not run (their kernels compile at first
    use)."""
    t0 = time.perf_counter()
    k = compiled()
    with _compile_lock(say), _saying_on_compile(say):
        for func in list(_WARM_UPS):
            if not skip or not func.__module__.startswith(skip):
                func(k)
    return time.perf_counter() - t0


def lock_path() -> str | None:
    """The compile lock's file: in numba's cache folder of the kernels of this package
    (``policies/core/__pycache__``, or its place under ``NUMBA_CACHE_DIR`` or the user's
    cache when numba puts it there), or None with the JIT disabled."""
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(_KERNELS):
        stats = getattr(_SCOPE.get(name), "stats", None)  # (a numba dispatcher's)
        source = os.path.abspath(_KERNELS[name].__code__.co_filename)
        if stats is not None and os.path.dirname(source) == here:
            return os.path.join(stats.cache_path, LOCK_NAME)
    return None


@contextmanager
def _compile_lock(say: Callable[[str], None]) -> Iterator[None]:
    """Hold the compile lock (:func:`lock_path`) for the block, telling ``say`` when it
    has to wait for it. Where no lock can be had (no ``fcntl``, a folder that cannot be
    written, a file system without locks) the block runs unlocked: the process may then
    compile what another one compiles too, as without the lock."""
    fd = _open_lock(lock_path())
    if fd is None:
        yield
        return
    import fcntl

    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process compiles: wait for its cache
            say(WAITING)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # no locks here
            pass
        yield
    finally:
        os.close(fd)  # (releases the lock)


def _open_lock(path: str | None) -> int | None:
    """A descriptor of the lock file ``path`` (made if missing), or None when there is
    no such file or ``flock`` to be had."""
    if path is None:
        return None
    try:
        import fcntl  # noqa: F401  (POSIX only)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except (ImportError, OSError):
        return None


@contextmanager
def _saying_on_compile(say: Callable[[str], None]) -> Iterator[None]:
    """Tell ``say`` :data:`COMPILING` when numba first compiles a kernel in the block
    (numba's ``numba:compile`` event, which a kernel loaded from the cache does not
    raise)."""
    from numba.core import event

    class FirstCompile(event.Listener):
        said = False

        def on_start(self, ev: event.Event) -> None:
            if not self.said:
                self.said = True
                say(COMPILING)

        def on_end(self, ev: event.Event) -> None:
            pass

    with event.install_listener("numba:compile", FirstCompile()):
        yield
