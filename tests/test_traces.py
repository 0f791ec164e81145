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
from olsctl.terminal import trace_info_view
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


# ------------------------------------------------ byte-order mark, bulk and line readers


def _swf(*jobs: str, header: str = "; MaxProcs: 8\n") -> str:
    return header + "".join(job + "\n" for job in jobs)


JOB_1 = "1 0 -1 100 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1"
JOB_2 = "2 10 -1 50 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1"


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzipped"])
def test_utf8_byte_order_mark_is_skipped(tmp_path, capsys, monkeypatch, packed):
    """A file saved with a UTF-8 byte-order mark reads as the same file without it: its
    first line is the header it shows, not a job line of 3 fields."""
    data = b"\xef\xbb\xbf" + _swf(JOB_1, JOB_2, header="; Version: 2.2\n; MaxProcs: 8\n").encode()
    path = tmp_path / ("bom.swf.gz" if packed else "bom.swf")
    path.write_bytes(gzip.compress(data) if packed else data)
    w = load_workload(path)
    assert w.job_id.tolist() == [1, 2] and w.machine_procs == 8
    assert w.header.get("Version") == "2.2"
    assert w.report.bad_lines == 0
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "info", path.name, "--json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["load"]["kept"] == 2
    # the line-by-line reader (malformed files take it) skips the mark too
    monkeypatch.setattr("olsctl.swf.SwfReader.table", lambda self: None)
    assert load_workload(path).job_id.tolist() == [1, 2]


def _job(job_id, submit, runtime, procs, **fields) -> str:
    values = [job_id, submit, -1, runtime, procs, -1, -1, procs, -1, -1, 1, 3, 1, -1, -1, -1,
              -1, -1]
    for number, value in fields.items():  # f9=..., 1-based SWF field numbers
        values[int(number[1:]) - 1] = value
    return " ".join(str(v) for v in values)


#: files the bulk reader takes as clean (each must load the same as line by line)
CLEAN_FILES = {
    "comments-between-jobs": _swf(JOB_1, "; MaxNodes: 4", ";   continued", JOB_2, ";"),
    "indented-comments": ("  ; MaxProcs: 8\n\t;Note: x\n\u00a0; Odd: nbsp\n"
                          + _swf(JOB_1, header="")),
    "crlf": _swf(JOB_1, JOB_2).replace("\n", "\r\n"),
    "cr": _swf(JOB_1, JOB_2).replace("\n", "\r"),
    "blank-lines": _swf("", JOB_1, "   ", "\t", JOB_2, ""),
    "tabs-and-spaces": _swf("  " + JOB_1.replace(" ", "\t"), JOB_2.replace(" ", "   ") + "  "),
    "no-final-newline": _swf(JOB_1, JOB_2).rstrip("\n"),
    "non-ascii-comment": "; Acknowledge: Jos\u00e9 M\u00fcller\n" + _swf(JOB_1, JOB_2),
    "floats-in-integer-fields": _swf(_job(1, "0.0", "1e2", "2.0"),
                                     _job(2, "1E1", 50.5, 4, f12="7.25")),
    "signs-and-negative-zero": _swf(_job(1, "-0", 100, "+2", f9="-0"),
                                    _job(2, 10, 50, 4, f13="-0")),
    "huge-integers": _swf(_job(1, 0, 100, 2, f11="99999999999999999999"),
                          _job(2, 10, 50, 4, f9="12345678901234567", f12="12345678901234567")),
    "drops-in-order": _swf(_job(1, 0, 100, 0), _job(2, 1, 0, 2), _job(3, 2, 10, 2),
                           _job(4, 3, 10, 16)),
    "header-only": "; MaxProcs: 8\n; Note: no jobs\n",
    "repeated-key": _swf(JOB_1, header="; Queue: a\n; Queue: b\n; MaxProcs: 8\n"),
}

#: LLNL-Thunder's placeholder records (submit time, runtime and processors all -1), out of
#: submit order: before, between and after jobs that ran
PLACEHOLDERS = _swf(_job(5, -1, -1, -1), JOB_1, _job(7, -1, -1, -1, f13=2), JOB_2,
                    _job(3, 20, 0, 2), _job(9, -1, -1, -1))
CLEAN_FILES["unknown-submit-times"] = PLACEHOLDERS

#: files the bulk reader declines (each must give the line reader's error, or skip)
DECLINED_FILES = {
    "semicolon-in-job": _swf(JOB_1, JOB_2 + " ; x"),
    "nan": _swf(JOB_1, _job(2, 10, "nan", 4)),
    "overflow-to-inf": _swf(JOB_1, _job(2, 10, 50, 4, f6="1e400")),
    "underscore-digits": _swf(JOB_1, _job(2, 10, "5_0", 4)),
    "17-fields": _swf(JOB_1, " ".join(JOB_2.split()[:17])),
    "19-fields": _swf(JOB_1, JOB_2 + " 7"),
    "non-ascii-in-job": _swf(JOB_1, JOB_2.replace("4", "\u0664", 1)),
    "form-feed-in-job": _swf(JOB_1, JOB_2.replace(" ", "\x0c", 1)),
}

#: files clean to read whose records break a rule (the loader goes line by line for them)
OUT_OF_ORDER_FILES = {
    "submit-goes-back": _swf(_job(1, 10, 100, 2), _job(2, 5, 50, 4), _job(3, 20, 5, 1)),
    "negative-submit": _swf(_job(1, -5, 100, 2), _job(2, 5, 50, 4)),
    "repeated-id": _swf(_job(1, 0, 100, 2), _job(1, 5, 50, 4), _job(3, 20, 5, 1)),
    "unknown-submit-repeats-id": _swf(JOB_1, _job(1, -1, -1, -1), JOB_2),
}


def _loaded(path: Path, skip: bool):
    """What loading gives (columns, report, header), or the error line."""
    from olsctl.errors import TraceError

    try:
        w = load_workload(path, skip_bad_lines=skip)
    except TraceError as exc:
        return str(exc)
    cols = [getattr(w, c).tolist() for c in ("job_id", "submit_s", "runtime_s", "procs",
                                             "requested_time_s", "user_id", "group_id",
                                             "executable")]
    report = (w.report.as_dict(), list(w.report.dropped.items()), w.report.first_bad_line)
    return cols, report, dict(w.header.entries), w.machine_procs


@pytest.mark.parametrize("name", [*CLEAN_FILES, *DECLINED_FILES, *OUT_OF_ORDER_FILES])
def test_bulk_reader_loads_as_the_line_reader(tmp_path, monkeypatch, name):
    """Whole files parsed at once give exactly what parsing line by line gives: the same
    numbers (to the sign of zero), header, drops in the same order, and the same error or
    skip for a malformed line (the bulk reader declines such files)."""
    from olsctl.swf import SwfReader

    text = {**CLEAN_FILES, **DECLINED_FILES, **OUT_OF_ORDER_FILES}[name]
    path = tmp_path / "t.swf"
    path.write_bytes(text.encode())
    assert (SwfReader(path).table() is None) == (name in DECLINED_FILES)
    bulk = [_loaded(path, skip) for skip in (False, True)]
    monkeypatch.setattr("olsctl.swf.SwfReader.table", lambda self: None)
    lines = [_loaded(path, skip) for skip in (False, True)]
    assert bulk == lines
    if name == "signs-and-negative-zero":  # -0 is -0.0, as float() reads it
        assert np.signbit(load_workload(path).submit_s[0])


@pytest.mark.parametrize("bulk", [True, False], ids=["bulk", "line-by-line"])
def test_records_of_unknown_submit_time_are_dropped_and_counted(tmp_path, monkeypatch,
                                                                 capsys, bulk):
    """A record whose submit time is -1 (unknown) is dropped and counted by reason, out
    of the submit order, as one with no runtime is; the log then runs. A known negative
    submit time is still an error."""
    if not bulk:
        monkeypatch.setattr("olsctl.swf.SwfReader.table", lambda self: None)
    path = tmp_path / "thunder-like.swf"
    path.write_text(PLACEHOLDERS)
    w = load_workload(path)
    assert w.job_id.tolist() == [1, 2] and w.report.records == 6 and w.report.kept == 2
    assert list(w.report.dropped.items()) == [("submit time unknown", 3), ("runtime <= 0", 1)]
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--trace", path.name, "--out", "o", "--quiet"]) == 0
    load = json.loads((tmp_path / "o" / "summary.json").read_text())["load"]
    assert load["dropped"] == {"runtime <= 0": 1, "submit time unknown": 3}
    capsys.readouterr()
    path.write_text(_swf(JOB_1, _job(7, -2, 30, 1), JOB_2))
    assert main(["trace", "info", path.name]) == 2
    assert capsys.readouterr().err.strip() == (
        "TraceError: thunder-like.swf:3: field 2 (submit_time) is negative: -2")


def test_bulk_reader_reads_the_bundled_logs_as_the_line_reader(monkeypatch):
    src = ROOT / "traces" / "SDSC-SP2-1998-4.2-cln.swf.gz"
    bulk = _loaded(src, False)
    monkeypatch.setattr("olsctl.swf.SwfReader.table", lambda self: None)
    assert bulk == _loaded(src, False)
