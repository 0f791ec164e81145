"""Slurm sacct dumps: the converter's pure pieces, ``olsctl convert slurm`` on hand-made
samples (tests/data/slurm), bad input, and ``olsctl run --trace`` straight on a dump.

sample.sacct (UTC, 2024-01-05 from 10:00:00; seconds below count from then) holds:
  100        4 cpus, 00:20:00 limit, steps .batch .extern .0        submit 0
  110_1/_2   array tasks, 4 and 2 cpus, 01:00:00                    submit 10
  110_[3-4]  the array's pending rest (tasks 3 and 4)       dropped: 2 pending jobs
  120+0/+1   heterogeneous job, 2 + 4 cpus, 1-00:00:00 and 2-00     submit 20
  130        2 cpus, UNLIMITED                                      submit 30
  131        1 cpu, Partition_Limit, OUT_OF_MEMORY                  submit 40
  132        8 cpus, 1-00:00:00, CANCELLED by 1001 while running    submit 50
  133        2 cpus, 00:10:00, TIMEOUT                              submit 60
  140        PENDING                                                dropped: pending
  141        cancelled while pending (Start = End, nothing allocated) dropped
  143        cancelled while pending (Start None)                   dropped
  142        RUNNING (End Unknown)                                  dropped: still running
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from olsctl.cli import main
from olsctl.slurm import (
    JobId,
    convert_lines,
    group_lines,
    is_sacct,
    parse_duration_s,
    parse_job_id,
    parse_row,
    parse_time_limit_s,
)
from olsctl.swf import SwfReader
from olsctl.workload import load_workload

DATA = Path(__file__).resolve().parent / "data" / "slurm"
SAMPLE = DATA / "sample.sacct"
HEADER = ("JobID|JobIDRaw|Submit|Start|End|Elapsed|AllocCPUS|AllocNodes|Timelimit|User|"
          "Group|Account|Partition|State")

# The SWF records of sample.sacct, by hand from the file (job, submit, wait, runtime,
# procs, -1, -1, procs, requested time, -1, status, user, group, -1, queue, -1, -1, -1):
# users alice 1, bob 2, carol 3, dave 4; accounts phys 1, chem 2, bio 3; partitions
# batch 1, debug 2 (in order of first appearance in submit order).
SAMPLE_SWF = [
    "1 0 5 1000 4 -1 -1 4 1200 -1 1 1 1 -1 1 -1 -1 -1",         # 100, 00:20:00
    "2 10 995 400 4 -1 -1 4 3600 -1 1 2 2 -1 1 -1 -1 -1",       # 110_1 (tie at 10: _1 first)
    "3 10 995 300 2 -1 -1 2 3600 -1 0 2 2 -1 1 -1 -1 -1",       # 110_2 FAILED
    "4 20 1385 500 6 -1 -1 6 172800 -1 1 3 1 -1 1 -1 -1 -1",    # 120: 2 + 4, max(1 d, 2 d)
    "5 30 1275 100 2 -1 -1 2 -1 -1 1 1 3 -1 2 -1 -1 -1",        # 130 UNLIMITED
    "6 40 1865 50 1 -1 -1 1 -1 -1 0 4 3 -1 2 -1 -1 -1",         # 131 Partition_Limit, OOM
    "7 50 1905 200 8 -1 -1 8 86400 -1 5 2 2 -1 1 -1 -1 -1",     # 132 cancelled: status 5
    "8 60 2095 600 2 -1 -1 2 600 -1 0 3 1 -1 1 -1 -1 -1",       # 133 TIMEOUT
]


def body(swf_text: str) -> list[str]:
    return [line for line in swf_text.splitlines() if not line.startswith(";")]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- pure pieces ------------------------------------------------------------------------


def test_job_ids():
    assert parse_job_id("1234") == JobId(1234, None, None, None)
    assert parse_job_id("1234_7") == JobId(1234, "7", None, None)
    assert parse_job_id("1234_[1-10%2]") == JobId(1234, "[1-10%2]", None, None)
    assert parse_job_id("1234+1") == JobId(1234, None, 1, None)
    assert parse_job_id("1234.batch").step == "batch"
    assert parse_job_id("1234_7.extern").allocation == (1234, "7", None)
    assert parse_job_id("1234+1.0").allocation == (1234, None, 1)
    assert parse_job_id("1234_7").name == "1234_7" and parse_job_id("1234+1").name == "1234"
    for bad in ("abc", "12_", "12+x", ""):
        with pytest.raises(ValueError):
            parse_job_id(bad)


@pytest.mark.parametrize("text, seconds", [
    ("UNLIMITED", -1), ("Partition_Limit", -1), ("", -1),
    ("30", 1800),                      # MM
    ("05:30", 330),                    # MM:SS
    ("01:00:00", 3600),                # HH:MM:SS
    ("2-00", 2 * 86400),               # D-HH
    ("1-12:30", 86400 + 12 * 3600 + 30 * 60),   # D-HH:MM
    ("3-01:02:03", 3 * 86400 + 3723),  # D-HH:MM:SS
])
def test_time_limits(text, seconds):
    assert parse_time_limit_s(text) == seconds


@pytest.mark.parametrize("bad", ["soon", "1:2:3:4", "-5", "x-01:00:00", "01:xx:00"])
def test_bad_time_limits(bad):
    with pytest.raises(ValueError):
        parse_time_limit_s(bad)


def test_elapsed():
    assert parse_duration_s("00:20:00") == 1200
    assert parse_duration_s("1-02:00:00") == 93600
    assert parse_duration_s("00:00:01.500") == 1.5
    with pytest.raises(ValueError):
        parse_duration_s("20")  # a bare number is not a sacct duration


def test_steps_join_their_allocation_and_requeues_stay_apart():
    columns = ["JobID", "State"]
    rows = [parse_row(text, columns, n, "x") for n, text in enumerate([
        "7|REQUEUED", "7.batch|CANCELLED",      # first attempt of job 7 and its step
        "7|COMPLETED", "7.batch|COMPLETED", "7.0|COMPLETED",   # second attempt
        "8+0|COMPLETED", "8+0.batch|COMPLETED", "8+1|COMPLETED", "8+1.0|COMPLETED",
        "9.batch|COMPLETED",                    # a step whose job is not in the dump
    ], start=2)]
    jobs, orphans = group_lines(rows)
    assert [[a.line_no for a in j.allocations] for j in jobs] == [[2], [4], [7, 9]]
    assert [j.steps for j in jobs] == [1, 2, 2]
    assert orphans == 1


def test_requeued_attempts_are_jobs_of_their_own():
    lines = [HEADER,
             "7|7|2024-01-05T10:00:00|2024-01-05T10:00:00|2024-01-05T10:10:00|00:10:00|4|1|"
             "01:00:00|ann|g|acct|batch|REQUEUED",
             "7|7|2024-01-05T10:10:00|2024-01-05T10:20:00|2024-01-05T10:50:00|00:30:00|4|1|"
             "01:00:00|ann|g|acct|batch|COMPLETED"]
    conv = convert_lines(lines, "r.sacct")
    assert body(conv.swf_text) == ["1 0 0 600 4 -1 -1 4 3600 -1 0 1 1 -1 1 -1 -1 -1",
                                   "2 600 600 1800 4 -1 -1 4 3600 -1 1 1 1 -1 1 -1 -1 -1"]
    assert "job,1,7\njob,2,7\n" in conv.key_text


def test_sacct_files_are_recognised(tmp_path):
    assert is_sacct(SAMPLE)
    named = tmp_path / "dump.txt"
    named.write_text(SAMPLE.read_text())
    assert is_sacct(named)  # by its header line
    swf = tmp_path / "x.swf"
    swf.write_text("; MaxProcs: 4\n1 0 0 10 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n")
    assert not is_sacct(swf)


# -- convert ----------------------------------------------------------------------------


def test_sample_converts(tmp_path, capsys):
    swf, key = tmp_path / "s.swf", tmp_path / "s.csv"
    code, out, err = cli(capsys, "convert", "slurm", SAMPLE, "--swf", swf, "--key", key)
    assert code == 0, err
    assert body(swf.read_text()) == SAMPLE_SWF
    reader = SwfReader(swf)
    list(reader)
    h = reader.header
    assert h.first_int("UnixStartTime") == 1704448800  # 2024-01-05T10:00:00Z
    assert h.get("TimeZoneString") == "UTC" and h.first_int("TimeZone") == 0
    assert h.first_int("MaxProcs") == 8  # G alone: 8 cpus; never more at once
    assert h.first_int("MaxNodes") == 2 and h.first_int("MaxQueues") == 2
    assert h.get("Note").startswith("converted from sacct by olsctl convert slurm")
    assert "most cpus busy at once" in h.get("Note")
    with open(key, newline="") as fh:
        rows = [tuple(r) for r in csv.reader(fh)]
    assert rows[0] == ("kind", "number", "name")
    assert [r[2] for r in rows if r[0] == "job"] == [
        "100", "110_1", "110_2", "120", "130", "131", "132", "133"]
    assert [r[2] for r in rows if r[0] == "user"] == ["alice", "bob", "carol", "dave"]
    assert [r[2] for r in rows if r[0] == "group"] == ["phys", "chem", "bio"]
    assert [r[2] for r in rows if r[0] == "queue"] == ["batch", "debug"]
    # one summary line with the drops by reason (steps of every job counted as folded)
    assert out.strip().splitlines() == [
        f"wrote {swf} and {key} (MaxProcs 8, from the most busy at once in the log): "
        "8 jobs, dropped 6 (2 cancelled before start, 3 pending, 1 still running), "
        "13 steps folded"]


def test_units_nodes_and_procs(tmp_path, capsys):
    swf = tmp_path / "n.swf"
    assert cli(capsys, "convert", "slurm", SAMPLE, "--swf", swf, "--units", "nodes")[0] == 0
    rows = [line.split() for line in body(swf.read_text())]
    assert [int(r[4]) for r in rows] == [1, 1, 1, 2, 1, 1, 2, 1]  # het job: 1 + 1 nodes
    assert [r[4] for r in rows] == [r[7] for r in rows]
    reader = SwfReader(swf)
    list(reader)
    assert reader.header.first_int("MaxProcs") == 2 == reader.header.first_int("MaxNodes")
    assert cli(capsys, "convert", "slurm", SAMPLE, "--swf", swf, "--procs", "16")[0] == 0
    reader = SwfReader(swf)
    list(reader)
    assert reader.header.first_int("MaxProcs") == 16
    assert "busy at once" not in (reader.header.get("Note") or "")


def test_parsable_trailing_pipe(tmp_path, capsys):
    """``sacct --parsable`` (not 2) ends every line with '|': read the same."""
    src = tmp_path / "p.sacct"
    src.write_text("".join(line + "|\n" for line in SAMPLE.read_text().splitlines()))
    swf = tmp_path / "p.swf"
    assert cli(capsys, "convert", "slurm", src, "--swf", swf)[0] == 0
    assert body(swf.read_text()) == SAMPLE_SWF


# -- time zones -------------------------------------------------------------------------

# dst.sacct, local times of America/New_York:
#   500: submit 03-10 01:30, start 01:50 (EST), end 03:10 (EDT, after the clocks went
#        forward at 02:00) -> wait 20 min, runtime 06:50Z..07:10Z = 20 min (not 80)
#   501: submit 01:55 EST, start 03:05 EDT -> wait 10 min (not 70), runtime 10 min
#   502: submit 11-03 01:20, start 01:40 (both EDT), end 01:10 after the clocks went
#        back at 02:00 (EST, the second 01:10) -> runtime 05:40Z..06:10Z = 30 min
#   503: submit 01:50 EDT, start 01:05 EST (second occurrence), end 01:25 EST ->
#        wait 05:50Z..06:05Z = 15 min, runtime 20 min
# Submit times from 03-10 06:30Z: 502 at 11-03 05:20Z = 238 days - 70 min = 20559000 s.
DST_SWF = [
    "1 0 1200 1200 2 -1 -1 2 3600 -1 1 1 1 -1 1 -1 -1 -1",
    "2 1500 600 600 2 -1 -1 2 3600 -1 1 2 2 -1 1 -1 -1 -1",
    "3 20559000 1200 1800 2 -1 -1 2 3600 -1 1 1 1 -1 1 -1 -1 -1",
    "4 20560800 900 1200 2 -1 -1 2 3600 -1 1 2 2 -1 1 -1 -1 -1",
]


def test_dst_changes_with_tz(tmp_path, capsys):
    swf = tmp_path / "d.swf"
    code, out, err = cli(capsys, "convert", "slurm", DATA / "dst.sacct", "--swf", swf,
                         "--tz", "America/New_York")
    assert code == 0, err
    assert body(swf.read_text()) == DST_SWF
    reader = SwfReader(swf)
    list(reader)
    assert reader.header.first_int("UnixStartTime") == 1710052200  # 2024-03-10T06:30:00Z
    assert reader.header.first_int("TimeZone") == -5 * 3600
    assert reader.header.get("TimeZoneString") == "America/New_York"
    assert "Elapsed" not in out  # End - Start agrees with Elapsed everywhere


def test_explicit_offsets_need_no_tz(tmp_path, capsys):
    swf = tmp_path / "o.swf"
    assert cli(capsys, "convert", "slurm", DATA / "dst_offsets.sacct", "--swf", swf)[0] == 0
    assert body(swf.read_text()) == DST_SWF


def test_local_times_read_as_utc_fail_with_a_hint(tmp_path, capsys):
    swf = tmp_path / "d.swf"
    code, _, err = cli(capsys, "convert", "slurm", DATA / "dst.sacct", "--swf", swf)
    assert code == 2
    assert err.strip().splitlines() == [
        "TraceError: dst.sacct:5: field End: before Start (are the times in another zone? "
        "see --tz): '2024-11-03T01:10:00'"]
    assert not swf.exists()
    # without the fall-back jobs, UTC reading gives runtimes that disagree with Elapsed
    src = tmp_path / "spring.sacct"
    src.write_text("".join(line + "\n" for line in
                           (DATA / "dst.sacct").read_text().splitlines()[:4]))
    code, out, _ = cli(capsys, "convert", "slurm", src, "--swf", swf)
    assert code == 0
    assert "1 job's End - Start differs from Elapsed (is --tz the cluster's zone?)" in out
    assert body(swf.read_text())[0].split()[3] == "4800"  # 01:50 -> 03:10 read as 80 min


# -- bad input --------------------------------------------------------------------------

GOOD = ("42|42|2024-01-05T10:00:00|2024-01-05T10:01:00|2024-01-05T10:11:00|00:10:00|4|1|"
        "01:00:00|ann|g|acct|batch|COMPLETED")


def _with(column: str, value: str) -> str:
    fields = GOOD.split("|")
    fields[HEADER.split("|").index(column)] = value
    return "|".join(fields)


BAD = [
    ([HEADER, GOOD, _with("Start", "yesterday")],
     "bad.sacct:3: field Start: not a time: 'yesterday'"),
    ([HEADER, _with("Submit", "Unknown")], "bad.sacct:2: field Submit: not a time: 'Unknown'"),
    ([HEADER, _with("JobID", "abc")], "bad.sacct:2: field JobID: not a Slurm job id: 'abc'"),
    ([HEADER, _with("AllocCPUS", "four")],
     "bad.sacct:2: field AllocCPUS: not a whole number >= 0: 'four'"),
    ([HEADER, _with("Timelimit", "soon")],
     "bad.sacct:2: field Timelimit: not a time limit: 'soon'"),
    ([HEADER, _with("Elapsed", "long")], "bad.sacct:2: field Elapsed: not a duration: 'long'"),
    ([HEADER, _with("State", "EXPLODED")],
     "bad.sacct:2: field State: unknown job state: 'EXPLODED'"),
    ([HEADER, _with("Start", "2024-01-05T09:00:00")],
     "bad.sacct:2: field Start: before Submit (are the times in another zone? see --tz): "
     "'2024-01-05T09:00:00'"),
    ([HEADER, GOOD.rsplit("|", 1)[0]], "bad.sacct:2: expected 14 fields (as the header), found 13"),
    ([HEADER.replace("|Submit", "").replace("|AllocCPUS", ""), "x"],
     "bad.sacct:1: header lacks column(s) Submit, AllocCPUS (add them to sacct --format)"),
    ([GOOD], "bad.sacct:1: not a sacct --parsable2 header (no JobID column; run sacct without "
             f"--noheader): {GOOD[:80]!r}"),
    ([], "bad.sacct: empty file (expected a sacct --parsable2 header line)"),
    ([HEADER, _with("Start", "Unknown").replace("COMPLETED", "PENDING")],
     "bad.sacct: no job in the log ran to an end (1 pending)"),
]


@pytest.mark.parametrize("lines, message", BAD, ids=[m.split(": ", 1)[-1][:30] for _, m in BAD])
def test_bad_input_is_one_line(tmp_path, capsys, lines, message):
    src = tmp_path / "bad.sacct"
    src.write_text("".join(line + "\n" for line in lines))
    swf, key = tmp_path / "out.swf", tmp_path / "out.csv"
    code, out, err = cli(capsys, "convert", "slurm", src, "--swf", swf, "--key", key)
    assert code == 2
    assert err.strip().splitlines() == [f"TraceError: {message}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.sacct"]  # nothing written
    # run --trace reads the dump through the same code: the same message
    code, _, err = cli(capsys, "run", "--trace", src, "--out", tmp_path / "run", "--quiet")
    assert code == 2 and err.strip().splitlines() == [f"TraceError: {message}"]


@pytest.mark.parametrize("option, message", [
    (["--tz", "Mars/Olympus"], "ConfigError: command line: --tz: unknown time zone "
                               "'Mars/Olympus' (an IANA name such as UTC or Europe/Paris)"),
    (["--procs", "0"], "ConfigError: command line: --procs: must be >= 1 (got 0)"),
])
def test_bad_options(tmp_path, capsys, option, message):
    code, _, err = cli(capsys, "convert", "slurm", SAMPLE, "--swf", tmp_path / "x.swf", *option)
    assert code == 2 and err.strip().splitlines() == [message]
    assert not (tmp_path / "x.swf").exists()


def test_skip_bad_lines(tmp_path, capsys):
    src = tmp_path / "some.sacct"
    src.write_text("\n".join([HEADER, GOOD, _with("JobID", "abc"),
                              _with("JobID", "43").replace("10:01:00", "then")]) + "\n")
    swf = tmp_path / "s.swf"
    code, out, _ = cli(capsys, "convert", "slurm", src, "--swf", swf, "--skip-bad-lines")
    assert code == 0
    assert body(swf.read_text()) == ["1 0 60 600 4 -1 -1 4 3600 -1 1 1 1 -1 1 -1 -1 -1"]
    assert ("2 bad lines skipped (first: some.sacct:3: field JobID: not a Slurm job id: "
            "'abc')") in out


# -- run --trace on a dump --------------------------------------------------------------


def test_run_on_the_sample_is_easy_by_hand(tmp_path, capsys, monkeypatch):
    """REQUIRED acceptance: the sample (every case above) runs straight from the dump,
    and EASY (exact estimates, 8 processors from the header) starts the jobs as derived
    by hand. Jobs: A=1 (4 cpus, 1000 s), B=2 (4, 400), C=3 (2, 300), D=4 (6, 500),
    E=5 (2, 100), F=6 (1, 50), G=7 (8, 200), H=8 (2, 600); submits 0, 10, 10, 20, 30,
    40, 50, 60. (The logged starts differ: the run must not use them.)

    t=0    A starts (4 free).                 t=10 B starts (0 free); C waits.
    t=20..60  D, E, F, G, H arrive and wait (nothing free).
    t=410  B ends, 4 free: head C fits, starts (2 free). Head D (6) is blocked; shadow:
           C ends 710 (4 free), A ends 1000 (8 free) -> shadow 1000, extra 8 - 6 = 2.
           E (2, ends 510 <= 1000) starts (0 free). F, G, H do not fit.
    t=510  E ends, 2 free. D blocked, shadow 1000, extra 2. F (1, ends 560) starts.
           G does not fit; H (2) does not fit (1 free).
    t=560  F ends, 2 free. D blocked, shadow 1000, extra 2. G no. H (2, ends 1160 >
           1000) uses 2 <= extra: starts (extra 0).
    t=710  C ends, 2 free. D needs 6: at 1000 A frees 4 -> 6 -> shadow 1000, extra 0.
           G does not fit.
    t=1000 A ends, 6 free: D starts (0 free). G (8) blocked: H ends 1160 (2 free),
           D ends 1500 (8 free) -> shadow 1500, extra 0.
    t=1500 D ends: G starts.
    """
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "run", "--trace", SAMPLE, "--out", "tmp", "--quiet")
    assert code == 0, err
    with open(tmp_path / "tmp" / "jobs.csv", newline="") as fh:
        starts = {int(r["job_id"]): float(r["starting_time"]) for r in csv.DictReader(fh)}
    assert starts == {1: 0, 2: 10, 3: 410, 4: 1000, 5: 410, 6: 510, 7: 1500, 8: 560}
    summary = json.loads((tmp_path / "tmp" / "summary.json").read_text())
    assert summary["load"]["kept"] == 8
    assert summary["load"]["dropped"] == {"cancelled before start": 2, "pending": 3,
                                          "still running": 1}


def test_convert_then_run_equals_run_on_the_dump(tmp_path, capsys):
    swf = tmp_path / "s.swf"
    assert cli(capsys, "convert", "slurm", SAMPLE, "--swf", swf)[0] == 0
    for trace, out in ((swf, "a"), (SAMPLE, "b")):
        code, _, err = cli(capsys, "run", "--trace", trace, "--out", tmp_path / out,
                           "--estimates", "user", "--quiet")
        assert code == 0, err
    a, b = (tmp_path / d / "jobs.csv" for d in "ab")
    assert a.read_bytes() == b.read_bytes()


def test_trace_info_on_a_dump(capsys):
    code, out, err = cli(capsys, "trace", "info", SAMPLE, "--json")
    assert code == 0, err
    load = json.loads(out)["load"]
    assert load["kept"] == 8 and load["records"] == 14
    w = load_workload(SAMPLE)
    assert w.machine_procs == 8 and w.procs.tolist() == [4, 4, 2, 6, 2, 1, 8, 2]
    assert w.requested_time_s.tolist() == [1200, 3600, 3600, 172800, -1, -1, 86400, 600]


def test_unwritable_key_leaves_no_swf(tmp_path, capsys):
    swf, key = tmp_path / "s.swf", tmp_path / "missing" / "k.csv"
    code, _, err = cli(capsys, "convert", "slurm", SAMPLE, "--swf", swf, "--key", key)
    assert code == 2
    assert err.strip().splitlines() == [
        f"ConfigError: command line: --key: cannot write {key}: No such file or directory"]
    assert list(tmp_path.iterdir()) == []


def test_the_readme_sacct_command_has_what_the_converter_needs(tmp_path, capsys):
    """A dump made with the README's --format (a subset of the sample's columns, in its
    order) converts to the same SWF jobs."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    command = next(line for line in readme.splitlines() if "--format JobID" in line)
    wanted = command.split("--format", 1)[1].split()[0].split(",")
    columns = HEADER.split("|")
    keep = [columns.index(c) for c in wanted]
    src = tmp_path / "readme.sacct"
    src.write_text("".join("|".join(line.split("|")[i] for i in keep) + "\n"
                           for line in SAMPLE.read_text().splitlines()))
    swf = tmp_path / "r.swf"
    assert cli(capsys, "convert", "slurm", src, "--swf", swf)[0] == 0
    assert body(swf.read_text()) == SAMPLE_SWF


# -- what a new user meets: encodings, missing columns, other formats, pending arrays ----


def _dump(path: Path, columns: list[str], *rows: dict[str, str]) -> Path:
    """A dump of ``columns``, each row GOOD's fields with ``rows``' changes."""
    good = dict(zip(HEADER.split("|"), GOOD.split("|")))
    lines = ["|".join(columns)] + ["|".join({**good, **r}[c] for c in columns) for r in rows]
    path.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    return path


def test_a_latin1_dump_keeps_users_apart_and_says_once_it_is_not_utf8(tmp_path, capsys):
    """m\\xfcller and m\\xf6ller (Latin-1 bytes, not UTF-8) are two users, not one."""
    src = _dump(tmp_path / "l.sacct", HEADER.split("|"), {"User": "ann"},
                {"JobID": "43", "User": "m\u00fcller"}, {"JobID": "44", "User": "m\u00f6ller"},
                {"JobID": "45", "User": "m\u00fcller"})
    assert b"m\xfcller" in src.read_bytes()
    swf, key = tmp_path / "l.swf", tmp_path / "l.csv"
    code, out, err = cli(capsys, "convert", "slurm", src, "--swf", swf, "--key", key)
    assert code == 0, err
    assert [line.split()[11] for line in body(swf.read_text())] == ["1", "2", "3", "2"]
    users = [r[2] for r in csv.reader(key.read_text(encoding="utf-8").splitlines())
             if r[0] == "user"]
    assert users == ["ann", "m\u00fcller", "m\u00f6ller"]
    assert err.splitlines() == ["l.sacct: not UTF-8 (line 3 first): read as Latin-1, so "
                                "names that differ in any byte stay different"]
    # a UTF-8 dump with every column says nothing
    assert cli(capsys, "convert", "slurm", SAMPLE, "--swf", swf)[2] == ""


@pytest.mark.parametrize("drop, said", [
    (["Timelimit"], ["no Timelimit column: requested times are unknown (-1), so --estimates "
                     "user runs on the exact runtimes"]),
    (["Elapsed", "AllocNodes", "User", "Account", "Group", "Partition"],
     ["no Elapsed column: End - Start is not checked against Elapsed (a wrong --tz goes "
      "unnoticed)", "no AllocNodes column: no node counts (no MaxNodes in the SWF header)",
      "no User column: users are unknown (-1)",
      "no Account column: groups are unknown (-1): there is no Group column either",
      "no Partition column: queues are unknown (-1)"]),
    (["Account"], []),  # Group stands in
], ids=["timelimit", "all-others", "account-only"])
def test_missing_optional_columns_are_named_with_what_follows(tmp_path, capsys, drop, said):
    columns = [c for c in HEADER.split("|") if c not in drop]
    src = _dump(tmp_path / "m.sacct", columns, {})
    code, out, err = cli(capsys, "convert", "slurm", src, "--swf", tmp_path / "m.swf")
    assert code == 0, err
    assert err.splitlines() == [f"m.sacct: {line}" for line in said]
    if "Timelimit" in drop:  # what the note says: user estimates are the runtimes
        w = load_workload(tmp_path / "m.swf")
        assert w.requested_time_s.tolist() == [-1]
        assert w.estimate_s("user").tolist() == w.estimate_s("exact").tolist()


@pytest.mark.parametrize("name, header", [
    ("fixed.sacct", "JobID           JobName  Partition    Account  AllocCPUS      State"),
    ("fixed.txt", "       JobID    Submit      Start        End  AllocCPUS      State"),
    ("commas.txt", "JobID,Submit,Start,End,AllocCPUS,State"),
])
def test_a_dump_without_parsable2_is_told_to_use_it(tmp_path, capsys, name, header):
    src = tmp_path / name
    src.write_text(header + "\n------------ ---------- ----------\n42 x batch\n")
    message = (f"TraceError: {name}:1: a header with JobID but no '|' (sacct's fixed-width "
               f"output, or another delimiter): dump with sacct --parsable2")
    code, _, err = cli(capsys, "convert", "slurm", src, "--swf", tmp_path / "o.swf")
    assert code == 2 and err.splitlines() == [message]
    code, _, err = cli(capsys, "run", "--trace", src, "--out", tmp_path / "run", "--quiet")
    assert code == 2 and err.splitlines() == [message]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_pending_array_lines_count_one_job_per_task(tmp_path, capsys):
    assert [parse_job_id(f"7_{t}").tasks for t in ("[5-9]", "[1,3,5-7]", "[5-9%2]",
                                                   "[1-7:2]", "[0]", "3")] == [5, 5, 5, 4, 1, 1]
    for bad in ("7_[5-]", "7_[9-5]", "7_[]", "7_[1-3%]", "7_[1-7:0]", "7_[a]"):
        with pytest.raises(ValueError):
            parse_job_id(bad)
    never = {"Start": "Unknown", "End": "Unknown", "AllocCPUS": "0", "AllocNodes": "0"}
    src = _dump(tmp_path / "a.sacct", HEADER.split("|"), {},
                {**never, "JobID": "43_[5-9]", "State": "PENDING"},
                {**never, "JobID": "44_[1,3,5-7]", "State": "PENDING"},
                {**never, "JobID": "45_[5-9%2]", "State": "CANCELLED by 7"},
                {**never, "JobID": "46", "State": "PENDING"})
    code, out, err = cli(capsys, "convert", "slurm", src, "--swf", tmp_path / "a.swf")
    assert code == 0, err
    assert "1 jobs, dropped 16 (5 cancelled before start, 11 pending)" in out
    src.write_text(src.read_text().replace("44_[1,3,5-7]", "44_[1,3-]"))
    code, _, err = cli(capsys, "convert", "slurm", src, "--swf", tmp_path / "a.swf")
    assert code == 2
    assert err.splitlines() == ["TraceError: a.sacct:4: field JobID: not a Slurm job id: "
                                "'44_[1,3-]'"]


def test_the_summary_counts_one_of_a_kind_in_the_singular():
    """One bad line and one job whose times disagree read as such, two as two."""
    from olsctl.slurm.converter import Conversion

    def summary(n: int) -> str:
        return Conversion("", "", [], n, 4, "x", bad_lines=n, first_error="x",
                          elapsed_mismatches=n).summary()

    one, two = summary(1), summary(2)
    assert "1 bad line skipped" in one and "1 job's End - Start" in one
    assert "2 bad lines skipped" in two and "2 jobs' End - Start" in two
