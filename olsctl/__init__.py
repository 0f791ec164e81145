"""olsctl: trace-driven batch-scheduling simulation with an online-simulation controller."""

from __future__ import annotations

from pathlib import Path as _Path

__version__ = "0.1.0"

# An installed olsctl carries the top-level policies/ and traces/ folders of the source
# tree as olsctl.policies and olsctl.traces. Imported straight from a source checkout
# (the checkout's root on sys.path, e.g. `python -c ...` run in it), those folders sit
# beside this package instead, so let the package look there too.
_root = _Path(__file__).resolve().parent.parent
if not (_Path(__file__).resolve().parent / "policies").is_dir() \
        and (_root / "policies" / "__init__.py").is_file():
    __path__.append(str(_root))  # type: ignore[name-defined]
