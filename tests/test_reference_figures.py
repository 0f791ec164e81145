"""Whole-log figures the issues give, and a cross-check against an independent EASY loop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from olsctl.bench import reference_easy
from olsctl.checker import StrictChecker
from olsctl.cli import main
from olsctl.policies import make_policy
from olsctl.sim import MainSimulator
from olsctl.workload import load_workload

TRACES = Path(__file__).resolve().parent.parent / "traces"
KTH = TRACES / "KTH-SP2-1996-2.1-cln.swf.gz"


def test_kth_easy_exact_figures(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--trace", str(KTH), "--policy", "easy", "--estimates", "exact",
                 "--out", str(out), "--strict", "--quiet"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    m = summary["metrics"]
    assert summary["load"]["kept"] == 28_467
    assert summary["strict_checks"] == 28_467
    assert round(m["mean_bsld"], 4) == 72.2771
    assert round(m["mean_wait_s"], 2) == 6380.39
    assert round(m["utilization"], 4) == 0.6992


def _starts(records) -> dict[int, float]:
    return {r.job_id: r.start_s for r in records.jobs}


def _assert_matches_plain_loop(w, estimates: str) -> None:
    """The main simulator (strict) gives the plain heapq EASY loop's start times."""
    est = w.estimate_s(estimates)
    records = MainSimulator(w, make_policy({"name": "easy"}), est,
                            checker=StrictChecker()).run()
    ref = reference_easy(w.submit_s.tolist(), w.runtime_s.tolist(), w.procs.tolist(),
                         est.tolist(), w.machine_procs)
    got = _starts(records)
    assert np.array_equal(np.asarray([got[j] for j in w.job_id.tolist()]), np.asarray(ref))


@pytest.mark.parametrize("estimates", ["exact", "user"])
def test_main_simulator_matches_plain_easy_loop_on_kth(estimates):
    _assert_matches_plain_loop(load_workload(KTH), estimates)


def test_main_simulator_matches_plain_easy_loop_on_blue_head():
    w = load_workload(TRACES / "SDSC-BLUE-2000-4.2-cln.swf.gz").head(15_000)
    assert w.machine_procs == 1152
    _assert_matches_plain_loop(w, "user")


@pytest.mark.slow
@pytest.mark.parametrize("name,kept", [("SDSC-SP2-1998-4.2-cln.swf.gz", 54_034),
                                       ("CTC-SP2-1996-3.1-cln.swf.gz", 77_205),
                                       ("SDSC-BLUE-2000-4.2-cln.swf.gz", 232_536)])
def test_other_logs_match_plain_loop(name, kept):
    w = load_workload(TRACES / name)
    assert len(w) == kept
    for estimates in ("exact", "user"):
        _assert_matches_plain_loop(w, estimates)


def test_kth_mqbf_reference_figure():
    # The published MQBF reference figure: KTH-SP2, exact estimates, K = 4, default boundaries, all
    # 100 processors: mean bounded slowdown 58.5090, mean wait 6665.60 s.
    from olsctl.metrics import summarize

    w = load_workload(KTH)
    m = summarize(MainSimulator(w, make_policy({"name": "mqbf"}), w.estimate_s("exact"),
                                checker=StrictChecker()).run())
    assert round(m["mean_bsld"], 4) == 58.5090
    assert round(m["mean_wait_s"], 2) == 6665.60


def _k1_equals_easy(w: "object", estimates: str) -> None:
    est = w.estimate_s(estimates)
    easy = _starts(MainSimulator(w, make_policy({"name": "easy"}), est,
                                 checker=StrictChecker()).run())
    k1 = _starts(MainSimulator(w, make_policy({"name": "mqbf", "queues": 1, "boundaries_s": []}),
                               est, checker=StrictChecker()).run())
    assert k1 == easy


def test_one_queue_mqbf_is_easy_on_kth():
    _k1_equals_easy(load_workload(KTH), "exact")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["SDSC-SP2-1998-4.2-cln.swf.gz", "CTC-SP2-1996-3.1-cln.swf.gz",
                                  "SDSC-BLUE-2000-4.2-cln.swf.gz"])
def test_one_queue_mqbf_is_easy_on_other_logs(name):
    _k1_equals_easy(load_workload(TRACES / name), "exact")
