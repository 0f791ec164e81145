"""Bundled traces, the SWF reader's header handling, and `olsctl trace info`."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from olsctl.cli import main
from olsctl.reporting import trace_info_view
from olsctl.traceinfo import trace_info
from olsctl.workload import BUNDLED, DEFAULT_TRACE, bundled_dir, load_workload, resolve_trace

ROOT = Path(__file__).resolve().parent.parent


def test_sha256sums_match_the_bundled_files():
    lines = (ROOT / "traces" / "SHA256SUMS").read_text().split("\n")
    sums = dict(reversed(line.split()) for line in lines if line.strip())
    assert {Path(p).name for p in sums} == set(BUNDLED.values())
    for rel, digest in sums.items():
        assert hashlib.sha256((ROOT / rel).read_bytes()).hexdigest() == digest


def test_installed_package_carries_the_traces():
    for file in BUNDLED.values():
        assert (bundled_dir() / file).read_bytes() == (ROOT / "traces" / file).read_bytes()
    assert resolve_trace(DEFAULT_TRACE).name == "KTH-SP2-1996-2.1-cln.swf.gz"


def test_header_metadata_of_ctc():
    w = load_workload(ROOT / "traces" / "CTC-SP2-1996-3.1-cln.swf.gz")
    h = w.header
    assert w.machine_procs == 338
    assert h.first_int("MaxNodes") == 338  # "338 (batch partition; 512 total)"
    assert h.get("Installation") == "Cornell Theory Center (CTC)"
    assert h.first_int("UnixStartTime") == 835823160
    assert h.get("TimeZoneString") == "US/Eastern"
    assert "http://www.cs.huji.ac.il" in h.get("Information")  # continuation line
    assert "DSI" in h.get("Queue") and "informix" in h.get("Queue")  # repeated key
    # CTC has no requested-processor field: allocated processors are used
    assert (w.procs > 0).all()


def test_plain_and_gzipped_files_read_the_same(tmp_path):
    src = ROOT / "traces" / "KTH-SP2-1996-2.1-cln.swf.gz"
    plain = tmp_path / "kth.swf"
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    a, b = load_workload(src), load_workload(plain)
    assert len(a) == len(b) == 28_467
    assert np.array_equal(a.submit_s, b.submit_s) and np.array_equal(a.procs, b.procs)


def test_trace_info_figures_of_kth():
    w = load_workload(ROOT / "traces" / "KTH-SP2-1996-2.1-cln.swf.gz")
    info = trace_info(w)
    assert info["load"]["records"] == 28_476 and info["load"]["kept"] == 28_467
    assert info["load"]["dropped"] == {"processors <= 0": 1, "runtime <= 0": 8}
    span = w.submit_s[-1] - w.submit_s[0]
    assert info["offered_load"] == pytest.approx((w.procs * w.runtime_s).sum() / (100 * span))
    assert sum(b["jobs"] for b in info["size"]["buckets"]) == 28_467
    assert sum(b["jobs"] for b in info["runtime_s"]["buckets"]) == 28_467
    req = w.requested_time_s
    ratio = w.runtime_s[req > 0] / req[req > 0]
    assert info["estimates"]["median_accuracy"] == pytest.approx(np.median(ratio))
    assert info["first_submit"].startswith("1996-09-30")


def test_trace_info_renders_in_80_columns():
    info = trace_info(load_workload(ROOT / "traces" / "KTH-SP2-1996-2.1-cln.swf.gz"))
    buf = io.StringIO()
    Console(file=buf, width=80, color_system=None).print(trace_info_view(info))
    text = buf.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    for expected in ("28,476 / 28,467", "1 processors <= 0, 8 runtime <= 0", "offered load",
                     "user estimates", "Swedish Royal Institute of Technology"):
        assert expected in text


def test_trace_info_command_json(capsys):
    assert main(["trace", "info", "KTH-SP2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["machine_procs"] == 100 and data["load"]["kept"] == 28_467
