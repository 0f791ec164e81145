"""The examples in examples/ run as a user runs them, from another directory."""

from __future__ import annotations

import subprocess
import sys

from olsctl.contract import CHECKS, ESTIMATES, SCENARIOS

from conftest import REPO_ROOT


def test_smallest_first_registers_and_keeps_the_contract(tmp_path):
    """The example registers its policy and checks it under both sizes (every event
    kind: it needs nothing, so it runs with and without power)."""
    out = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "smallest_first.py")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    cases = len(ESTIMATES) * len(SCENARIOS) * 5
    lines = out.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line.startswith(f"smallest-first: contract kept ({', '.join(CHECKS)}) under "
                               f"1 setting(s), {cases} cases, {3 * cases} snapshots, "), line
