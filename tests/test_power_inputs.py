"""Power inputs: profile CSVs, the synthetic model, cap configs; bad input is one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import workload_from_rows
from olsctl.cli import main
from olsctl.errors import ConfigError, TraceError
from olsctl.power.cap import CapSchedule, parse_cap
from olsctl.power.profiles import (ProfileSettings, load_power_csv, nrel_quantiles,
                                   synthetic_profiles)

W = workload_from_rows([(1, 0, 10, 1), (2, 5, 10, 2), (3, 9, 10, 1)], 4)


def test_two_phase_profile_has_the_given_mean_max_and_std(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("job_id,mean_w,max_w,std_w\n1,300,500,50\n2,200,200,0\n")
    prof = load_power_csv(f, W, 100.0, 1000.0)
    assert prof.mean_w[:2] == pytest.approx([300, 200])
    assert prof.max_w[:2] == pytest.approx([500, 200])
    assert prof.std_w[:2] == pytest.approx([50, 0], abs=1e-9)
    assert prof.synthetic_jobs == 1  # job 3 is not in the file: synthetic, counted


@pytest.mark.parametrize("body,message", [
    ("job_id,mean_w\n1,-5\n", "p.csv:2: field mean_w is negative"),
    ("job_id,mean_w\n1,nan\n", "p.csv:2: field mean_w is not finite"),
    ("job_id,mean_w\n1,abc\n", "p.csv:2: field mean_w is not a number"),
    ("job_id,mean_w,max_w,std_w\n1,300,200,5\n", "p.csv:2: field max_w (200) is below"),
    ("job_id,mean_w\n1,3\n1,4\n", "p.csv:3: job 1 appears twice"),
    ("job,power\n1,3\n", "p.csv:1: header needs job_id and mean_w"),
])
def test_bad_power_csv_names_line_and_field(tmp_path, body, message):
    f = tmp_path / "p.csv"
    f.write_text(body)
    with pytest.raises(TraceError) as err:
        load_power_csv(f, W, 100.0, 1000.0)
    assert message in str(err.value)


def test_bad_power_csv_through_the_cli_is_one_line_and_writes_nothing(tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.csv").write_text("job_id,mean_w\n15,-1\n")
    (tmp_path / "c.yaml").write_text("trace: KTH-SP2\npower: {profiles: p.csv}\nout: out\n")
    assert main(["run", "c.yaml", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("TraceError: p.csv:2: field mean_w is negative")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("power,key", [
    ("{cap: {schedule: [{at_s: 10, fraction: 0.5}, {at_s: 5, fraction: 0.8}]}}",
     "power.cap.schedule[1].at_s"),
    ("{cap: {fraction: 0}}", "power.cap.fraction"),
    ("{cap: {fraction: 0.5, watts: 3}}", "power.cap"),
    ("{cap: {watts: -3}}", "power.cap.watts"),
    ("{idle_w: 2000}", "power.idle_w"),
    ("{sample_s: 0}", "power.sample_s"),
    ("{volts: 3}", "power.volts"),
    ("{seed: 1.5}", "power.seed"),
])
def test_bad_power_config_names_the_key(tmp_path, capsys, monkeypatch, power, key):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(f"trace: KTH-SP2\npower: {power}\nout: out\n")
    assert main(["run", "c.yaml", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"ConfigError: c.yaml: {key}")
    assert not (tmp_path / "out").exists()


def test_cap_schedule_changes_take_effect_at_their_time():
    cap = parse_cap({"schedule": [{"at_s": 0, "fraction": 0.417}, {"at_s": 100, "fraction": 0.625},
                                  {"at_s": 200, "watts": 50.0}]}, 1000.0, "power.cap",
                    origin_s=1000.0)
    assert [cap.cap_at(t) for t in (0, 1099.9, 1100, 1199, 1200, 1e9)] == pytest.approx(
        [417, 417, 625, 625, 50, 50])
    assert CapSchedule.constant(5.0).cap_at(-1e9) == 5.0
    with pytest.raises(ConfigError):
        parse_cap({"schedule": []}, 1.0, "power.cap")


def test_synthetic_profiles_are_seeded_calibrated_and_per_project():
    rows = [(i, i, 100, 1) for i in range(1, 401)]
    w = workload_from_rows(rows, 4)
    w = type(w)(**{**w.__dict__, "group_id": np.arange(400) % 5})  # 5 projects
    a = synthetic_profiles(w, 100.0, 2000.0, ProfileSettings(seed=3))
    b = synthetic_profiles(w, 100.0, 2000.0, ProfileSettings(seed=3))
    c = synthetic_profiles(w, 100.0, 2000.0, ProfileSettings(seed=4))
    assert np.array_equal(a.power_w, b.power_w) and not np.array_equal(a.power_w, c.power_w)
    assert np.allclose(np.add.reduceat(a.fraction, a.offset[:-1]), 1.0)
    assert (a.power_w >= 100).all() and (a.power_w <= 2000).all()
    # jobs of one project cluster around its base: spread within projects is far below
    # the spread between them
    mean = a.mean_w
    groups = [mean[np.arange(400) % 5 == g] for g in range(5)]
    within = np.mean([g.std() / g.mean() for g in groups])
    assert within < 0.2
    levels, q = nrel_quantiles()
    assert levels[0] == 0 and levels[-1] == 1 and np.all(np.diff(q) >= 0)
    assert 400 < float(np.interp(0.5, levels, q)) < 420  # NREL median per node, W


def test_run_with_power_writes_power_csv_and_summary(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(
        "trace: KTH-SP2\nout: out\npower:\n  cap: {fraction: 0.625}\n  sample_s: 600\n")
    assert main(["run", "c.yaml", "--quiet"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    p = summary["power"]
    assert p["energy_j"] == pytest.approx(p["job_energy_j"] + p["idle_energy_j"]
                                          + p["sleep_energy_j"] + p["wake_energy_j"])
    assert p["peak_power_w"] <= 100 * 1150.0
    lines = (tmp_path / "out" / "power.csv").read_text().splitlines()
    assert lines[0] == "time,mean_power_w,peak_power_w,cap_w,within_cap"
    within = [int(x.split(",")[4]) for x in lines[1:]]
    assert p["csr"] == pytest.approx(sum(within) / len(within))
    header = (tmp_path / "out" / "jobs.csv").read_text().splitlines()[0]
    assert header.endswith(",power_w,energy_j")


def test_a_jobs_synthetic_profile_does_not_depend_on_the_other_jobs():
    rows = [(i, i * 3, 50 + i, 1 + i % 3) for i in range(1, 60)]
    full = workload_from_rows(rows, 4)
    cut = full.select(np.arange(10, 40))
    a = synthetic_profiles(full, 100.0, 900.0)
    b = synthetic_profiles(cut, 100.0, 900.0)
    for i in range(30):
        fa, pa = a.phases(10 + i)
        fb, pb = b.phases(i)
        assert np.array_equal(fa, fb) and np.array_equal(pa, pb)
