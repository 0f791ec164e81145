"""Bad input through the CLI: malformed SWF traces, bad YAML configs and bad options.

Every known input problem must end as ONE stderr line ``Kind: file[:line]: ...`` with exit
code 2, no traceback, and no output directory (the loading rules of docs/internals.md and error
format). Also pins the lenient loading rules (drops are counted, never
clipped), ``--skip-bad-lines``, a tiny end-to-end run and byte-for-byte determinism.

Everything runs in-process through :func:`olsctl.cli.main` inside ``tmp_path``.
"""

from __future__ import annotations

import csv
import gzip
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from olsctl.cli import main
from olsctl.workload import load_workload

HEADER = "; MaxProcs: 8\n"
JOBS_CSV_HEADER = (
    "job_id,submission_time,starting_time,finish_time,execution_time,waiting_time,"
    "turnaround_time,requested_number_of_resources,requested_time,bounded_slowdown"
)
OUT = "out"


# --------------------------------------------------------------------------- helpers


def swf_line(job_id, submit, runtime, procs, requested_time=-1, alloc=None) -> str:
    """One 18-field SWF job line; field 5 (allocated) defaults to ``procs`` (field 8)."""
    alloc = procs if alloc is None else alloc
    fields = [job_id, submit, -1, runtime, alloc, -1, -1, procs, requested_time,
              -1, 1, 1, 1, -1, -1, -1, -1, -1]
    assert len(fields) == 18
    return " ".join(str(f) for f in fields)


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines))
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``main(argv)`` in-process; (exit code, stdout, stderr). argparse exits count too."""
    capsys.readouterr()  # drop anything printed before
    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse errors
        rc = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def one_error_line(rc: int, err: str, kind: str) -> str:
    """Check exit code 2 and exactly one stderr line ``kind: ...``; return that line."""
    assert "Traceback" not in err, f"traceback on stderr:\n{err}"
    lines = err.splitlines()
    assert rc == 2, f"exit code {rc}, stderr: {err!r}"
    assert len(lines) == 1, f"expected one stderr line, got {len(lines)}: {err!r}"
    line = lines[0]
    assert line.startswith(f"{kind}: "), f"expected a {kind}: line, got {line!r}"
    return line


def assert_no_output(tmp_path: Path) -> None:
    assert not (tmp_path / OUT).exists(), "an output directory was created on bad input"
    assert not (tmp_path / "olsctl-out").exists(), "the default output directory was created"


def names_key(line: str, key_path: str) -> bool:
    """``key_path:`` appears as a whole key (``procs:`` must not match ``active_procs:``)."""
    return re.search(rf"(?<![\w.]){re.escape(key_path)}:", line) is not None


def read_jobs_csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


# Two good jobs on lines 2 and 3 (line 1 is the header), then the bad line on line 4,
# then one more good job on line 5.
GOOD_BEFORE = [swf_line(1, 0, 100, 2), swf_line(2, 10, 50, 4)]
GOOD_AFTER = [swf_line(9, 30, 20, 1)]
GOOD_IDS = [1, 2, 9]
BAD_LINE_NO = 4

# (id, bad line, substrings the message must contain besides file:line)
BAD_LINES = [
    pytest.param("3 20 -1 x 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1",
                 ["field 4 (run_time)", "'x'"], id="non-numeric-runtime"),
    pytest.param("3 20 -1 10 2 -1 -1 four -1 -1 1 1 1 -1 -1 -1 -1 -1",
                 ["field 8 (requested_processors)", "'four'"], id="non-numeric-procs"),
    pytest.param("3 20 -1 nan 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1",
                 ["field 4 (run_time)", "nan"], id="nan-runtime"),
    pytest.param("3 20 -1 10 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1",
                 ["18", "17"], id="too-few-fields"),
    pytest.param("3 20 -1 10 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1 7",
                 ["18", "19"], id="too-many-fields"),
    pytest.param(swf_line(3, -5, 10, 2),
                 ["field 2 (submit_time)", "negative"], id="negative-submit"),
    pytest.param(swf_line(3, 5, 10, 2),
                 ["field 2 (submit_time)", "back in time"], id="submit-goes-back"),
    pytest.param(swf_line(2, 20, 10, 2),
                 ["field 1 (job_number)", "line 3"], id="duplicate-job-id"),
]


def bad_trace(tmp_path: Path, bad: str, name: str = "bad.swf") -> Path:
    return write(tmp_path / name, [HEADER, *GOOD_BEFORE, bad, *GOOD_AFTER])


# ------------------------------------------------------------------ malformed SWF lines


@pytest.mark.parametrize("bad, needles", BAD_LINES)
def test_run_rejects_malformed_line(tmp_path, capsys, bad, needles):
    bad_trace(tmp_path, bad)
    rc, _, err = run_cli(capsys, "run", "--trace", "bad.swf", "--out", OUT, "--quiet")
    line = one_error_line(rc, err, "TraceError")
    assert f"bad.swf:{BAD_LINE_NO}:" in line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    assert_no_output(tmp_path)


@pytest.mark.parametrize("bad, needles", BAD_LINES)
def test_trace_info_rejects_malformed_line(tmp_path, capsys, bad, needles):
    bad_trace(tmp_path, bad)
    rc, out, err = run_cli(capsys, "trace", "info", "bad.swf")
    line = one_error_line(rc, err, "TraceError")
    assert f"bad.swf:{BAD_LINE_NO}:" in line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    assert out == ""


@pytest.mark.parametrize("name", ["packed.swf", "packed.swf.gz"])
def test_gzipped_trace_bad_line_is_named(tmp_path, capsys, name):
    """gzip is detected by its magic bytes (also without a .gz name); line numbers are
    those of the decompressed text."""
    text = "".join(line + "\n" for line in
                   [HEADER.strip(), *GOOD_BEFORE, BAD_LINES[0].values[0], *GOOD_AFTER])
    (tmp_path / name).write_bytes(gzip.compress(text.encode()))
    for argv in (("run", "--trace", name, "--out", OUT, "--quiet"), ("trace", "info", name)):
        rc, _, err = run_cli(capsys, *argv)
        line = one_error_line(rc, err, "TraceError")
        assert f"{name}:{BAD_LINE_NO}: field 4 (run_time)" in line
        assert "'x'" in line
    assert_no_output(tmp_path)


def test_gzipped_trace_good_and_plain_text_named_gz(tmp_path, capsys):
    """A good gzipped trace named .swf and a plain trace named .swf.gz both load."""
    text = HEADER + "".join(line + "\n" for line in [*GOOD_BEFORE, *GOOD_AFTER])
    (tmp_path / "zipped.swf").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "plain.swf.gz").write_text(text)
    for name in ("zipped.swf", "plain.swf.gz"):
        w = load_workload(tmp_path / name)
        assert w.job_id.tolist() == GOOD_IDS
        assert w.machine_procs == 8


# ------------------------------------------------------------------ malformed SWF files


def test_empty_file(tmp_path, capsys):
    """An empty file: the message should say there are no jobs (not only ask for procs)."""
    (tmp_path / "empty.swf").write_text("")
    for argv in (("run", "--trace", "empty.swf", "--out", OUT, "--quiet"),
                 ("trace", "info", "empty.swf")):
        rc, _, err = run_cli(capsys, *argv)
        line = one_error_line(rc, err, "TraceError")
        assert "empty.swf" in line
        assert "no job records" in line, f"empty file not reported as such: {line!r}"
    assert_no_output(tmp_path)


def test_empty_file_with_procs(tmp_path, capsys):
    (tmp_path / "empty.swf").write_text("")
    for argv in (("run", "--trace", "empty.swf", "--procs", "8", "--out", OUT, "--quiet"),
                 ("trace", "info", "--procs", "8", "empty.swf")):
        rc, _, err = run_cli(capsys, *argv)
        line = one_error_line(rc, err, "TraceError")
        assert "empty.swf" in line
        assert "no job records" in line and "empty" in line
    assert_no_output(tmp_path)


def test_header_only_file(tmp_path, capsys):
    write(tmp_path / "header.swf", ["; Computer: tiny", HEADER])
    for argv in (("run", "--trace", "header.swf", "--out", OUT, "--quiet"),
                 ("trace", "info", "header.swf")):
        rc, _, err = run_cli(capsys, *argv)
        line = one_error_line(rc, err, "TraceError")
        assert "header.swf" in line
        assert "no job records" in line and "header only" in line
    assert_no_output(tmp_path)


def test_no_machine_size_is_an_error(tmp_path, capsys):
    write(tmp_path / "nosize.swf", ["; Computer: tiny", *GOOD_BEFORE, *GOOD_AFTER])
    for argv in (("run", "--trace", "nosize.swf", "--out", OUT, "--quiet"),
                 ("trace", "info", "nosize.swf")):
        rc, _, err = run_cli(capsys, *argv)
        line = one_error_line(rc, err, "TraceError")
        assert "nosize.swf" in line
        assert "MaxProcs" in line and "MaxNodes" in line
        assert "procs" in line  # tells the user what to set
    assert_no_output(tmp_path)


def test_no_machine_size_fixed_by_procs(tmp_path, capsys):
    write(tmp_path / "nosize.swf", ["; Computer: tiny", *GOOD_BEFORE, *GOOD_AFTER])
    rc, _, err = run_cli(capsys, "run", "--trace", "nosize.swf", "--procs", "8",
                         "--out", OUT, "--quiet")
    assert rc == 0, err
    summary = json.loads((tmp_path / OUT / "summary.json").read_text())
    assert summary["metrics"]["processors"] == 8
    assert summary["active_procs_at_start"] == 8
    assert summary["load"]["kept"] == 3

    rc, out, err = run_cli(capsys, "trace", "info", "--procs", "8", "--json", "nosize.swf")
    assert rc == 0, err
    assert json.loads(out)["machine_procs"] == 8


def test_nonexistent_trace(tmp_path, capsys):
    for argv in (("run", "--trace", "nope.swf", "--out", OUT, "--quiet"),
                 ("trace", "info", "nope.swf")):
        rc, _, err = run_cli(capsys, *argv)
        line = one_error_line(rc, err, "TraceError")
        assert "nope.swf" in line
        assert "no such file" in line
    assert_no_output(tmp_path)


def test_trace_is_a_directory(tmp_path, capsys):
    (tmp_path / "adir.swf").mkdir()
    rc, _, err = run_cli(capsys, "trace", "info", "adir.swf")
    line = one_error_line(rc, err, "TraceError")
    assert "adir.swf" in line


# ---------------------------------------------------------------------- --skip-bad-lines


@pytest.mark.parametrize("bad, needles", BAD_LINES)
def test_skip_bad_lines_each(tmp_path, capsys, bad, needles):
    bad_trace(tmp_path, bad)
    rc, _, err = run_cli(capsys, "run", "--trace", "bad.swf", "--skip-bad-lines",
                         "--out", OUT, "--quiet")
    assert rc == 0, err
    summary = json.loads((tmp_path / OUT / "summary.json").read_text())
    assert summary["load"]["bad_lines_skipped"] == 1
    assert summary["load"]["kept"] == len(GOOD_IDS)
    rows = read_jobs_csv(tmp_path / OUT / "jobs.csv")
    assert [int(r["job_id"]) for r in rows] == GOOD_IDS


def test_skip_bad_lines_all_kinds(tmp_path, capsys):
    bad = [p.values[0] for p in BAD_LINES]
    lines = [HEADER, swf_line(1, 0, 100, 2), swf_line(2, 10, 50, 4), *bad,
             swf_line(6, 30, 20, 1), swf_line(7, 40, 10, 8)]
    write(tmp_path / "many.swf", lines)

    # without the flag: the first bad line (line 4) is reported
    rc, _, err = run_cli(capsys, "run", "--trace", "many.swf", "--out", OUT, "--quiet")
    assert "many.swf:4:" in one_error_line(rc, err, "TraceError")
    assert_no_output(tmp_path)

    rc, _, err = run_cli(capsys, "run", "--trace", "many.swf", "--skip-bad-lines",
                         "--out", OUT, "--quiet")
    assert rc == 0, err
    summary = json.loads((tmp_path / OUT / "summary.json").read_text())
    assert summary["load"]["bad_lines_skipped"] == len(bad) == 8
    assert summary["load"]["records"] == 4
    assert summary["load"]["kept"] == 4
    assert summary["load"]["dropped"] == {}
    rows = read_jobs_csv(tmp_path / OUT / "jobs.csv")
    assert [int(r["job_id"]) for r in rows] == [1, 2, 6, 7]

    rc, out, err = run_cli(capsys, "trace", "info", "--skip-bad-lines", "--json", "many.swf")
    assert rc == 0, err
    info = json.loads(out)
    assert info["load"]["bad_lines_skipped"] == 8
    assert info["load"]["kept"] == 4


def test_skip_bad_lines_from_config(tmp_path, capsys):
    bad_trace(tmp_path, BAD_LINES[0].values[0])
    write(tmp_path / "skip.yaml", ["trace: bad.swf", f"out: {OUT}", "skip_bad_lines: true"])
    rc, _, err = run_cli(capsys, "run", "skip.yaml", "--quiet")
    assert rc == 0, err
    summary = json.loads((tmp_path / OUT / "summary.json").read_text())
    assert summary["load"]["bad_lines_skipped"] == 1


# ------------------------------------------------------------------------ loading rules


def test_loading_rules_drop_and_count(tmp_path, capsys):
    write(tmp_path / "rules.swf", [
        HEADER,
        swf_line(1, 0, 100, 2, alloc=4),      # field 8 (2) wins over field 5 (4)
        swf_line(2, 1, 100, -1, alloc=3),     # field 8 unknown -> field 5 (3)
        swf_line(3, 2, 100, 16),              # wider than the 8-processor machine
        swf_line(4, 3, 0, 2),                 # runtime 0
        swf_line(5, 4, -1, 2),                # runtime unknown
        swf_line(6, 5, 100, -1, alloc=0),     # processors 0
        swf_line(7, 6, 100, 0, alloc=-1),     # processors unknown
        swf_line(8, 7, 100, 8),               # exactly the machine: kept
        swf_line(9, 8, 100, 9, alloc=1),      # field 8 (9) wins: wider, not 1 processor
    ])
    w = load_workload(tmp_path / "rules.swf")
    assert w.machine_procs == 8
    assert w.job_id.tolist() == [1, 2, 8]
    assert w.procs.tolist() == [2, 3, 8]
    assert w.report.records == 9
    assert w.report.kept == 3
    assert w.report.dropped == {"runtime <= 0": 2, "processors <= 0": 2,
                                "wider than the machine": 2}

    rc, _, err = run_cli(capsys, "run", "--trace", "rules.swf", "--out", OUT, "--quiet")
    assert rc == 0, err
    summary = json.loads((tmp_path / OUT / "summary.json").read_text())
    assert summary["load"]["records"] == 9
    assert summary["load"]["kept"] == 3
    assert summary["load"]["dropped"] == {"processors <= 0": 2, "runtime <= 0": 2,
                                          "wider than the machine": 2}
    rows = read_jobs_csv(tmp_path / OUT / "jobs.csv")
    # not clipped: the 16- and 9-processor jobs are absent, not squeezed to 8
    assert {int(r["job_id"]): int(r["requested_number_of_resources"]) for r in rows} == \
        {1: 2, 2: 3, 8: 8}


def test_procs_option_overrides_header(tmp_path, capsys):
    write(tmp_path / "t.swf", [HEADER, swf_line(1, 0, 100, 2), swf_line(2, 5, 100, 8)])
    rc, _, err = run_cli(capsys, "run", "--trace", "t.swf", "--procs", "4",
                         "--out", OUT, "--quiet")
    assert rc == 0, err
    summary = json.loads((tmp_path / OUT / "summary.json").read_text())
    assert summary["metrics"]["processors"] == 4
    assert summary["load"]["dropped"] == {"wider than the machine": 1}
    assert [int(r["job_id"]) for r in read_jobs_csv(tmp_path / OUT / "jobs.csv")] == [1]


def test_all_jobs_wider_than_machine(tmp_path, capsys):
    write(tmp_path / "wide.swf", [HEADER, swf_line(1, 0, 100, 16), swf_line(2, 5, 100, 9)])
    rc, _, err = run_cli(capsys, "run", "--trace", "wide.swf", "--out", OUT, "--quiet")
    line = one_error_line(rc, err, "TraceError")
    assert "wide.swf" in line
    assert_no_output(tmp_path)


def test_maxnodes_first_integer(tmp_path):
    write(tmp_path / "nodes.swf", [
        "; Computer: big",
        "; MaxNodes: 338 (batch partition; 512 total)",
        swf_line(1, 0, 100, 338),
        swf_line(2, 5, 100, 400),  # fits 512 but not the 338 batch processors
    ])
    w = load_workload(tmp_path / "nodes.swf")
    assert w.machine_procs == 338
    assert w.job_id.tolist() == [1]
    assert w.report.dropped == {"wider than the machine": 1}


def test_maxprocs_wins_over_maxnodes(tmp_path):
    write(tmp_path / "both.swf", ["; MaxNodes: 100", "; MaxProcs: 400",
                                  swf_line(1, 0, 100, 300)])
    w = load_workload(tmp_path / "both.swf")
    assert w.machine_procs == 400
    assert w.job_id.tolist() == [1]


def test_user_estimates(tmp_path):
    write(tmp_path / "est.swf", [
        HEADER,
        swf_line(1, 0, 100, 1, requested_time=200),  # estimate above runtime
        swf_line(2, 1, 100, 1, requested_time=50),   # under-estimate -> runtime
        swf_line(3, 2, 100, 1, requested_time=-1),   # missing -> runtime
        swf_line(4, 3, 30, 1, requested_time=100),
    ])
    w = load_workload(tmp_path / "est.swf")
    np.testing.assert_array_equal(w.estimate_s("user"), [200.0, 100.0, 100.0, 100.0])
    np.testing.assert_array_equal(w.estimate_s("exact"), [100.0, 100.0, 100.0, 30.0])
    np.testing.assert_array_equal(w.requested_time_s, [200.0, 50.0, -1.0, 100.0])


def test_queue_order_by_submit_then_id(tmp_path):
    write(tmp_path / "ties.swf", [HEADER, swf_line(5, 0, 10, 1), swf_line(3, 0, 10, 1),
                                  swf_line(4, 7, 10, 1)])
    w = load_workload(tmp_path / "ties.swf")
    assert w.job_id.tolist() == [3, 5, 4]


# ------------------------------------------------------------------------- bad configs


@pytest.fixture
def tiny_trace(tmp_path) -> Path:
    return write(tmp_path / "t.swf", [HEADER, *GOOD_BEFORE, *GOOD_AFTER])


CONFIG_CASES = [
    pytest.param(["colour: red"], "colour", id="unknown-top-level-key"),
    pytest.param(["policy: {name: nope}"], "policy.name", id="unknown-policy"),
    pytest.param(["policy: easy"], "policy", id="policy-is-a-string"),
    pytest.param(["policy: {name: easy, depth: 2}"], "policy.depth", id="unknown-policy-param"),
    pytest.param(["policy: {name: easy, order: lifo}"], "policy.order", id="bad-policy-order"),
    pytest.param(["policy: {name: easy, order: 3}"], "policy.order", id="policy-order-type"),
    pytest.param(["policy: [easy]"], "policy", id="policy-is-a-list"),
    pytest.param(['procs: "many"'], "procs", id="procs-string"),
    pytest.param(["procs: true"], "procs", id="procs-bool"),
    pytest.param(["procs: 7.5"], "procs", id="procs-float"),
    pytest.param(["strict: 3"], "strict", id="strict-int"),
    pytest.param(['skip_bad_lines: "yes"'], "skip_bad_lines", id="skip-bad-lines-string"),
    pytest.param(["procs: 0"], "procs", id="procs-zero"),
    pytest.param(["procs: -4"], "procs", id="procs-negative"),
    pytest.param(["active_procs: -1"], "active_procs", id="active-negative"),
    pytest.param(["procs: 8", "active_procs: 9"], "active_procs", id="active-above-procs"),
    pytest.param(["active_procs: 16"], "active_procs", id="active-above-trace-machine"),
    pytest.param(["estimates: bogus"], "estimates", id="estimates-unknown"),
    pytest.param(["estimates: 3"], "estimates", id="estimates-type"),
    pytest.param(['trace: ""'], "trace", id="trace-empty"),
    pytest.param(["trace: 12"], "trace", id="trace-type"),
]


@pytest.mark.parametrize("lines, key_path", CONFIG_CASES)
def test_bad_config(tmp_path, capsys, tiny_trace, lines, key_path):
    base = [] if any(line.startswith("trace:") for line in lines) else ["trace: t.swf"]
    write(tmp_path / "bad-config.yaml", [*base, f"out: {OUT}", *lines])
    rc, _, err = run_cli(capsys, "run", "bad-config.yaml", "--quiet")
    line = one_error_line(rc, err, "ConfigError")
    assert "bad-config.yaml" in line
    assert names_key(line, key_path), f"key path {key_path!r} not named in {line!r}"
    assert_no_output(tmp_path)


@pytest.mark.parametrize("text, line_no", [
    pytest.param("trace: t.swf\n  out: out\n", 2, id="bad-indent"),
    pytest.param(f"trace: t.swf\nout: {OUT}\n\tprocs: 8\n", 3, id="tab"),
    pytest.param(f"trace: t.swf\nout: {OUT}\npolicy: {{name: easy\n", 4, id="unclosed-brace"),
])
def test_config_invalid_yaml(tmp_path, capsys, tiny_trace, text, line_no):
    (tmp_path / "broken.yaml").write_text(text)
    rc, _, err = run_cli(capsys, "run", "broken.yaml", "--quiet")
    line = one_error_line(rc, err, "ConfigError")
    assert f"broken.yaml:{line_no}:" in line
    assert_no_output(tmp_path)


def test_config_top_level_list(tmp_path, capsys, tiny_trace):
    write(tmp_path / "list.yaml", ["- trace: t.swf", f"- out: {OUT}"])
    rc, _, err = run_cli(capsys, "run", "list.yaml", "--quiet")
    line = one_error_line(rc, err, "ConfigError")
    assert "list.yaml" in line
    assert "mapping" in line and "list" in line
    assert_no_output(tmp_path)


def test_config_file_missing(tmp_path, capsys):
    rc, _, err = run_cli(capsys, "run", "nope.yaml", "--quiet")
    line = one_error_line(rc, err, "ConfigError")
    assert "nope.yaml" in line
    assert_no_output(tmp_path)


def test_config_trace_missing(tmp_path, capsys):
    """The trace path in a config is relative to the config's folder; when it is missing
    the one-line TraceError names the trace, the config file and its key."""
    (tmp_path / "conf").mkdir()
    write(tmp_path / "conf" / "run.yaml", ["trace: missing.swf", f"out: {OUT}"])
    rc, _, err = run_cli(capsys, "run", "conf/run.yaml", "--quiet")
    line = one_error_line(rc, err, "TraceError")
    assert "missing.swf" in line
    assert_no_output(tmp_path)
    assert "run.yaml" in line, f"config file not named: {line!r}"
    assert names_key(line, "trace"), f"key path 'trace' not named: {line!r}"


def test_config_trace_relative_to_config_dir(tmp_path, capsys):
    (tmp_path / "conf").mkdir()
    write(tmp_path / "conf" / "t.swf", [HEADER, *GOOD_BEFORE, *GOOD_AFTER])
    write(tmp_path / "conf" / "run.yaml", ["trace: t.swf", f"out: {OUT}"])
    rc, _, err = run_cli(capsys, "run", "conf/run.yaml", "--quiet")
    assert rc == 0, err
    assert (tmp_path / OUT / "jobs.csv").exists()  # out is relative to the working dir


def test_config_bad_trace_content(tmp_path, capsys):
    bad_trace(tmp_path, BAD_LINES[0].values[0])
    write(tmp_path / "run.yaml", ["trace: bad.swf", f"out: {OUT}"])
    rc, _, err = run_cli(capsys, "run", "run.yaml", "--quiet")
    line = one_error_line(rc, err, "TraceError")
    assert f"bad.swf:{BAD_LINE_NO}: field 4 (run_time)" in line
    assert_no_output(tmp_path)


# ------------------------------------------------------------------------ bad CLI values


def test_estimates_bogus_is_an_argparse_error(tmp_path, capsys, tiny_trace):
    rc, _, err = run_cli(capsys, "run", "--trace", "t.swf", "--estimates", "bogus",
                         "--out", OUT)
    assert rc == 2
    assert "--estimates" in err and "invalid choice" in err and "bogus" in err
    assert "Traceback" not in err
    assert_no_output(tmp_path)


def test_procs_not_an_integer_is_an_argparse_error(tmp_path, capsys, tiny_trace):
    rc, _, err = run_cli(capsys, "run", "--trace", "t.swf", "--procs", "many", "--out", OUT)
    assert rc == 2
    assert "--procs" in err and "many" in err
    assert_no_output(tmp_path)


@pytest.mark.parametrize("value", ["0", "-3"])
def test_trace_info_procs_out_of_range(tmp_path, capsys, tiny_trace, value):
    rc, out, err = run_cli(capsys, "trace", "info", "--procs", value, "t.swf")
    assert "Traceback" not in err
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "--procs" in lines[0] and f"(got {value})" in lines[0]
    assert out == ""


@pytest.mark.parametrize("value", ["0", "-3"])
def test_run_procs_out_of_range(tmp_path, capsys, tiny_trace, value):
    rc, _, err = run_cli(capsys, "run", "--trace", "t.swf", "--procs", value,
                         "--out", OUT, "--quiet")
    line = one_error_line(rc, err, "ConfigError")
    assert names_key(line, "procs") and f"(got {value})" in line
    assert_no_output(tmp_path)


def test_run_unknown_policy_option(tmp_path, capsys, tiny_trace):
    rc, _, err = run_cli(capsys, "run", "--trace", "t.swf", "--policy", "nope",
                         "--out", OUT, "--quiet")
    line = one_error_line(rc, err, "ConfigError")
    assert names_key(line, "policy.name") and "nope" in line
    assert_no_output(tmp_path)


def test_cli_option_overrides_bad_config_value_still_checked(tmp_path, capsys, tiny_trace):
    """A good config plus a bad command-line value: rejected by the same checks."""
    write(tmp_path / "ok.yaml", ["trace: t.swf", f"out: {OUT}", "procs: 8"])
    rc, _, err = run_cli(capsys, "run", "ok.yaml", "--procs", "0", "--quiet")
    line = one_error_line(rc, err, "ConfigError")
    assert names_key(line, "procs")
    assert_no_output(tmp_path)


# ---------------------------------------------------------------------- good end to end


def test_tiny_trace_end_to_end(tmp_path, capsys):
    write(tmp_path / "tiny.swf", [
        HEADER,
        swf_line(1, 0, 100, 2, requested_time=200),
        swf_line(2, 5, 50, 4),
        swf_line(3, 10, 30, 8, requested_time=60),
    ])
    rc, out, err = run_cli(capsys, "run", "--trace", "tiny.swf", "--out", OUT, "--quiet")
    assert rc == 0, err
    assert err == ""
    for name in ("jobs.csv", "timeseries.csv", "summary.json"):
        assert (tmp_path / OUT / name).is_file(), name
    text = (tmp_path / OUT / "jobs.csv").read_text()
    assert text.splitlines()[0] == JOBS_CSV_HEADER
    # Hand-checked on 8 processors, EASY/FCFS, exact estimates: jobs 1 (2p) and 2 (4p)
    # start on arrival; job 3 (8p) waits for job 1 to end at 100.
    rows = {int(r["job_id"]): r for r in read_jobs_csv(tmp_path / OUT / "jobs.csv")}
    assert {j: (float(r["starting_time"]), float(r["finish_time"])) for j, r in rows.items()} \
        == {1: (0.0, 100.0), 2: (5.0, 55.0), 3: (100.0, 130.0)}
    assert float(rows[3]["waiting_time"]) == 90.0
    assert float(rows[3]["bounded_slowdown"]) == pytest.approx(1 + 90 / 30)
    summary = json.loads((tmp_path / OUT / "summary.json").read_text())
    assert summary["load"] == {"source": "tiny.swf", "records": 3, "kept": 3, "dropped": {},
                               "bad_lines_skipped": 0}
    assert summary["metrics"]["mean_bsld"] == pytest.approx((1 + 1 + 4) / 3)
    ts = (tmp_path / OUT / "timeseries.csv").read_text().splitlines()
    assert ts[0] == "time,queue_length,busy_procs,active_procs"
    assert len(ts) > 1


# ------------------------------------------------------------------------ determinism


def _random_trace(path: Path, n_jobs: int = 60, seed: int = 7) -> None:
    rng = random.Random(seed)
    lines, t = ["; MaxProcs: 16"], 0
    for job_id in range(1, n_jobs + 1):
        t += rng.randint(0, 40)
        runtime = rng.randint(1, 500)
        req = rng.choice([-1, runtime * rng.randint(1, 4), max(1, runtime // 2)])
        lines.append(swf_line(job_id, t, runtime, rng.choice([1, 2, 3, 4, 8, 16]), req))
    write(path, lines)


@pytest.mark.parametrize("estimates", ["exact", "user"])
def test_same_config_same_bytes(tmp_path, capsys, estimates):
    _random_trace(tmp_path / "rand.swf")
    write(tmp_path / "det.yaml", ["trace: rand.swf", "out: first", f"estimates: {estimates}",
                                  "strict: true"])
    rc, _, err = run_cli(capsys, "run", "det.yaml", "--quiet")
    assert rc == 0, err
    rc, _, err = run_cli(capsys, "run", "det.yaml", "--out", "second", "--quiet")
    assert rc == 0, err
    a, b = tmp_path / "first", tmp_path / "second"
    for name in ("jobs.csv", "timeseries.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert len((a / "jobs.csv").read_text().splitlines()) == 61
    sa = json.loads((a / "summary.json").read_text())
    sb = json.loads((b / "summary.json").read_text())
    assert (sa["config"].pop("out"), sb["config"].pop("out")) == ("first", "second")
    assert sa == sb
    assert sa["config"]["estimates"] == estimates


def test_all_dropped_says_why(tmp_path, capsys):
    """When the loading rules drop every job, the one error line counts them by reason,
    for `run` and `trace info` alike."""
    write(tmp_path / "gone.swf", [
        HEADER,
        swf_line(1, 0, 0, 2),                 # runtime 0
        swf_line(2, 1, -1, 2),                # runtime unknown
        swf_line(3, 2, 100, -1, alloc=0),     # processors unknown
        swf_line(4, 3, 100, 16),              # wider than the 8-processor machine
    ])
    for argv in (("run", "--trace", "gone.swf", "--out", OUT, "--quiet"),
                 ("trace", "info", "gone.swf")):
        rc, _, err = run_cli(capsys, *argv)
        line = one_error_line(rc, err, "TraceError")
        assert "gone.swf" in line and "4 records" in line
        for reason in ("2 runtime <= 0", "1 processors <= 0", "1 wider than the machine"):
            assert reason in line, f"{reason!r} not in {line!r}"
    assert_no_output(tmp_path)


def test_every_line_skipped_as_malformed_says_so(tmp_path, capsys):
    """With --skip-bad-lines and no good line left, the error says they were all skipped
    (and why the first was), not that the file holds a header only."""
    write(tmp_path / "bad.swf", [HEADER, BAD_LINES[0].values[0], BAD_LINES[2].values[0]])
    rc, _, err = run_cli(capsys, "trace", "info", "bad.swf", "--skip-bad-lines")
    line = one_error_line(rc, err, "TraceError")
    assert "all 2 skipped as malformed" in line and "bad.swf:2: field 4 (run_time)" in line
