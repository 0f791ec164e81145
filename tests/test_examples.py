"""The example scripts in ``examples/`` run as their docstrings say, and what they print
holds together."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO_ROOT
from olsctl.contract import CHECKS, ESTIMATES, SCENARIOS

POLICIES = ["Traditional", "Naive", "Adaptive 0%", "Adaptive 20%", "PARM"]
#: the gain columns: (faster policy, baseline), in the tables' order
GAINS = [("Adaptive 0%", "Traditional"), ("Adaptive 0%", "Naive"),
         ("Adaptive 20%", "Traditional"), ("Adaptive 20%", "Naive")]


def _number(text: str) -> float:
    return float(text.replace(",", "").rstrip("%"))


def _rows(table: str) -> list[list[str]]:
    """The body rows of a markdown table, as cells (header and rule left out)."""
    lines = [line for line in table.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]


def test_rmap_experiments_small_run_prints_consistent_tables(tmp_path):
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "rmap_experiments.py"), "--seeds", "1",
         "--jobs", "40", "--log-jobs", "300", "--bounds", "0.45", "1", "--loads", "0.3",
         "--traces", "KTH-SP2"], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    setups = out.stdout.split("\n**")
    assert len(setups) == 2
    assert "Poisson arrivals offering 0.3" in setups[0] and "40 jobs x 1 seeds" in setups[0]
    assert setups[1].startswith("KTH-SP2 on twice its nodes")
    for setup, bounds in zip(setups, (["0.45", "1"], ["0.5", "0.6", "0.75"])):
        turnaround, split = setup.split("mean wait / mean runtime (s):")
        rows = _rows(turnaround)
        assert [r[0] for r in rows] == bounds + ["mean"]
        gains = []
        for row, parts in zip(rows, _rows(split)):
            assert parts[0] == row[0]
            means = dict(zip(POLICIES, map(_number, row[1:6])))
            for name, cell in zip(POLICIES, parts[1:]):
                wait_s, run_s = map(_number, cell.split(" / "))
                assert wait_s >= 0 and run_s > 0
                # turnaround = wait + runtime, each rounded to a second when printed
                assert abs(means[name] - (wait_s + run_s)) <= 1.5, (row[0], name)
            for (fast, base), cell in zip(GAINS, row[6:]):
                gain = 100 * (1 - means[fast] / means[base])
                assert abs(_number(cell) - gain) <= 0.1 + 100 * 1.0 / means[base], (row[0], cell)
            gains.append([_number(cell) for cell in row[6:]])
        for cell, column in zip(rows[-1][6:], zip(*gains)):  # the mean row
            assert abs(_number(cell) - sum(column) / len(column)) <= 0.1
        csr = re.search(r"lowest CSR over the job power budget in any run: ([0-9.]+)", setup)
        assert csr is not None and float(csr.group(1)) == 1.0  # the bound is never exceeded



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
