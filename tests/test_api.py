"""The Python API (olsctl.api, re-exported from olsctl): a run writes the bytes
``olsctl run`` writes and its arrays are its files' columns; mapping configs, keywords
and ``overrides`` build the config ``--set`` builds; bad input raises the CLI's line; a
study as ``olsctl study`` (and resumed); load_trace as a run loads; pandas frames, and
the clear ImportError without pandas; docs/python.md's examples run. Also: a study
stopped by SIGTERM ends with one line, without loky's leaked-resource warnings.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pytest

import olsctl
from olsctl.cli import main
from test_study import make_study, write_tiny_swf

ROOT = Path(__file__).resolve().parent.parent
EASY = ROOT / "configs" / "easy.yaml"
PUBLIC = {"ConfigError", "OlsctlError", "RunResult", "SimulationError", "StudyError",
          "StudyResult", "TraceError", "load_run", "load_trace", "run", "study"}


def csv_columns(path: Path) -> dict[str, list[float]]:
    """A CSV file olsctl wrote, read by the csv module (not olsctl's reader)."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    return {name: [float(row[i]) for row in rows[1:]] for i, name in enumerate(rows[0])}


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def cli_easy(tmp_path_factory) -> Path:
    """configs/easy.yaml on KTH-SP2, written by ``olsctl run`` into out/."""
    folder = tmp_path_factory.mktemp("cli") / "out"
    assert main(["run", str(EASY), "--out", str(folder), "--quiet"]) == 0
    return folder


@pytest.fixture
def tiny(tmp_path, monkeypatch) -> Path:
    """A working directory holding tiny.swf (120 jobs on 32 processors)."""
    write_tiny_swf(tmp_path / "tiny.swf")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_public_names_are_all_and_resolve():
    assert set(olsctl.__all__) == PUBLIC
    for name in olsctl.__all__:
        assert getattr(olsctl, name) is not None
    assert olsctl.run is olsctl.api.run and olsctl.load_trace is olsctl.api.load_trace
    assert callable(olsctl.study) and olsctl.study.load_study  # the package, callable


def test_run_writes_the_cli_bytes_and_its_arrays_are_the_files(cli_easy, tmp_path):
    out = cli_easy.parent / "api"
    shutil.move(cli_easy, out)  # the same folder name: summary.json records it
    try:
        result = olsctl.run(str(EASY), out=str(cli_easy))
        assert files(cli_easy) == files(out)
    finally:
        shutil.rmtree(cli_easy, ignore_errors=True)
        shutil.move(out, cli_easy)
    assert result.out == cli_easy
    jobs = csv_columns(cli_easy / "jobs.csv")
    assert list(result.jobs) == list(jobs)
    for name, values in jobs.items():
        assert np.array_equal(result.jobs[name], values), name
    assert result.jobs["job_id"].dtype == np.int64
    for name, values in csv_columns(cli_easy / "timeseries.csv").items():
        assert np.array_equal(result.timeseries[name], values), name
    summary = json.loads((cli_easy / "summary.json").read_text())
    assert result.summary == summary
    weekly = summary["weekly"]
    assert np.array_equal(result.weeks["mean_bsld"],
                          [np.nan if w["mean_bsld"] is None else w["mean_bsld"] for w in weekly],
                          equal_nan=True)
    assert [str(d) for d in result.weeks["week_start"]] == [w["week_start"] for w in weekly]
    assert np.nansum(result.weeks["sla_kept"]) == summary["sla"]["windows_kept"]
    assert result.decisions == [] and result.power is None


def test_run_without_out_leaves_no_folder(cli_easy, tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    result = olsctl.run(EASY)
    assert list(tmp_path.iterdir()) == []
    assert result.out is None and result.summary["config"]["out"] is None
    assert np.array_equal(result.jobs["starting_time"],
                          csv_columns(cli_easy / "jobs.csv")["starting_time"])


def test_a_mapping_config_is_the_same_run_as_its_file(tiny):
    config = {"trace": "tiny.swf", "estimates": "user",
              "policy": {"name": "easy", "order": "sjf"}}
    (tiny / "tiny.yaml").write_text(json.dumps(config))
    assert main(["run", "tiny.yaml", "--out", "cli", "--quiet"]) == 0
    result = olsctl.run(config, out="cli-again")
    assert files(tiny / "cli-again") == files(tiny / "cli") | {
        "summary.json": (tiny / "cli" / "summary.json").read_bytes().replace(
            b'"out": "cli"', b'"out": "cli-again"')}
    assert result.summary["config"]["policy"] == {"name": "easy", "order": "sjf"}


def test_keywords_and_overrides_set_what_the_command_line_sets(tiny):
    (tiny / "base.yaml").write_text("trace: tiny.swf\npolicy: {name: easy, order: fcfs}\n")
    assert main(["run", "base.yaml", "--set", "policy.order=wfp", "--estimates", "user",
                 "--out", "cli", "--quiet"]) == 0
    cli = (tiny / "cli" / "jobs.csv").read_bytes()
    by_keyword = olsctl.run("base.yaml", policy={"order": "wfp"}, estimates="user", out="a")
    by_override = olsctl.run("base.yaml", overrides={"policy.order": "wfp",
                                                     "estimates": "user"}, out="b")
    assert (tiny / "a" / "jobs.csv").read_bytes() == cli == (tiny / "b" / "jobs.csv").read_bytes()
    assert by_keyword.summary["config"]["policy"] == {"name": "easy", "order": "wfp"}
    assert by_override.summary["config"] == by_keyword.summary["config"] | {"out": "b"}
    named = olsctl.run("base.yaml", policy="mqbf")  # a text names the policy, as --policy
    assert named.summary["config"]["policy"]["name"] == "mqbf"
    with pytest.raises(olsctl.ConfigError, match="policy.order: given twice"):
        olsctl.run("base.yaml", policy={"order": "wfp"}, overrides={"policy.order": "sjf"})


def _cli_line(args: list[str], capsys) -> str:
    assert main(args) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


def _only_api_frames(exc: BaseException) -> None:
    """The traceback of an error the API raised stops at the caller's call."""
    frames = traceback.extract_tb(exc.__traceback__)
    assert all(Path(f.filename).name in ("test_api.py", "api.py") for f in frames), frames


def test_bad_input_raises_the_line_the_cli_prints(tiny, capsys):
    (tiny / "bad.yaml").write_text("trace: tiny.swf\npolicy: {name: easy, bogus: 1}\n")
    line = _cli_line(["run", "bad.yaml", "--out", "x", "--quiet"], capsys)
    with pytest.raises(olsctl.ConfigError) as info:
        olsctl.run("bad.yaml")
    assert str(info.value) == line
    _only_api_frames(info.value)

    line = _cli_line(["run", "--trace", "tiny.swf", "--set", "policy.order=random",
                      "--out", "x", "--quiet"], capsys)
    with pytest.raises(olsctl.ConfigError) as info:
        olsctl.run(trace="tiny.swf", overrides={"policy.order": "random"})
    assert str(info.value) == line.replace("command line:", "arguments:")
    _only_api_frames(info.value)

    with pytest.raises(olsctl.ConfigError, match=r"^ConfigError: arguments: bogus: unknown key"):
        olsctl.run(bogus=1)
    with pytest.raises(olsctl.TraceError, match=r"nope\.swf: no such file"):
        olsctl.run(trace="nope.swf")
    assert not (tiny / "x").exists()


def test_a_study_is_the_cli_study_and_resumes(tiny):
    path = make_study(tiny, "base: {trace: tiny.swf}\ngrid:\n  estimates: [exact, user]\n")
    assert main(["study", str(path), "--out", "cli", "--quiet"]) == 0
    result = olsctl.study(path, out="api")
    assert (result.computed, result.reused, result.failed) == (2, 0, {})
    assert (tiny / "api" / "results.csv").read_bytes() == (tiny / "cli" / "results.csv").read_bytes()
    with open(tiny / "cli" / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(result.results["id"]) == [r["id"] for r in rows]
    assert list(result.results["estimates"]) == ["exact", "user"]
    assert np.array_equal(result.results["mean_bsld"], [float(r["mean_bsld"]) for r in rows])
    one = result.run(rows[1]["id"])
    assert np.array_equal(one.jobs["starting_time"],
                          csv_columns(tiny / "cli" / "runs" / rows[1]["id"] / "jobs.csv")
                          ["starting_time"])
    again = olsctl.study({"base": {"trace": "tiny.swf"}, "grid": {"estimates": ["exact", "user"]}},
                         out="api")
    assert (again.computed, again.reused) == (0, 2)
    with pytest.raises(olsctl.ConfigError, match=r"<study mapping>: out: .*needs"):
        olsctl.study({"base": {"trace": "tiny.swf"}, "grid": {"estimates": ["user"]}})


def test_load_trace_is_what_a_run_loads(cli_easy, tiny):
    kth = olsctl.load_trace("KTH-SP2")
    jobs = csv_columns(cli_easy / "jobs.csv")
    order = np.argsort(kth.job_id)
    assert np.array_equal(kth.job_id[order], jobs["job_id"])
    assert np.array_equal(kth.submit_s[order], jobs["submission_time"])
    assert np.array_equal(kth.procs[order], jobs["requested_number_of_resources"])
    summary = json.loads((cli_easy / "summary.json").read_text())
    assert kth.report.as_dict() == summary["load"]
    scaled = olsctl.load_trace(Path("tiny.swf"), procs=64, load_scale=2.0)
    assert scaled.machine_procs == 64
    tiny_jobs = olsctl.load_trace("tiny.swf")
    assert np.allclose(scaled.submit_s - scaled.submit_s[0],
                       (tiny_jobs.submit_s - tiny_jobs.submit_s[0]) / 2)
    with pytest.raises(olsctl.TraceError, match="no such file"):
        olsctl.load_trace("missing.swf")


def test_frames_are_the_files_read_by_pandas(cli_easy):
    pd = pytest.importorskip("pandas")
    result = olsctl.load_run(cli_easy)
    pd.testing.assert_frame_equal(result.jobs_frame(), pd.read_csv(cli_easy / "jobs.csv"),
                                  check_dtype=False)
    frames = result.to_pandas()
    assert set(frames) == {"jobs", "timeseries", "weeks"}
    pd.testing.assert_frame_equal(frames["timeseries"],
                                  pd.read_csv(cli_easy / "timeseries.csv"), check_dtype=False)
    assert list(frames["weeks"]["jobs"]) == [w["jobs"] for w in result.summary["weekly"]]


def test_frames_without_pandas_say_how_to_get_it(cli_easy, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas fails
    result = olsctl.load_run(cli_easy)
    for frame in (result.jobs_frame, result.weeks_frame, result.to_pandas):
        with pytest.raises(ImportError, match=r"pip install pandas"):
            frame()
    assert result.jobs["job_id"].size > 0  # the arrays need nothing


# -- docs/python.md ---------------------------------------------------------------------------

def test_docs_python_examples_run(tmp_path, monkeypatch, capsys):
    """Every Python block of docs/python.md, in order, in a folder holding
    configs/easy.yaml; a block starting "# needs pandas" only where pandas is installed."""
    text = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert len(blocks) >= 6
    (tmp_path / "configs").mkdir()
    shutil.copy(EASY, tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    try:
        import pandas  # noqa: F401
        has_pandas = True
    except ImportError:
        has_pandas = False
    ran = 0
    scope: dict = {}
    for i, code in enumerate(blocks):
        if code.startswith("# needs pandas") and not has_pandas:
            continue
        scope = {"__name__": "__main__"}
        exec(compile(code, f"docs/python.md block {i + 1}", "exec"), scope)
        ran += 1
    # the last block drives the simulator: the what-if of the snapshot taken before the
    # machine shrank starts every job, on all the processors
    assert scope["future"].unstarted == 0
    assert scope["snaps"][0].active_procs == 100
    assert scope["sim"].state.active_procs == 80
    printed = capsys.readouterr().out
    assert "mean bounded slowdown 72.3" in printed
    assert "ConfigError: arguments: policy.order: must be one of" in printed
    assert "wfp: mean bounded slowdown" in printed
    assert ran == len(blocks) - (0 if has_pandas else 1)


# -- a study stopped by SIGTERM ---------------------------------------------------------------

def test_sigterm_stops_a_study_in_one_line_without_leak_warnings(tmp_path):
    """SIGTERM while the loky pool runs: the study ends with "terminated" and exit code
    143, and loky's resource tracker finds nothing to warn about."""
    write_tiny_swf(tmp_path / "tiny.swf", jobs=3000)
    path = make_study(tmp_path, "base: {trace: tiny.swf}\ngrid:\n  estimates: [exact, user]\n"
                                "  load_scale: [1.0, 1.1, 1.2, 1.3]\nn_jobs: 2\n")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", "from olsctl.cli import entry_point; "
                             "entry_point()", "study", str(path), "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    partial = out / ".partial"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if partial.is_dir() and any(partial.iterdir()):  # a worker has started a run
            proc.send_signal(signal.SIGTERM)
            break
        time.sleep(0.005)
    _, err = proc.communicate(timeout=60)  # (also waits for the resource tracker)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == "terminated", err
    assert "leaked" not in err and "Traceback" not in err, err
