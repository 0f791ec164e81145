"""The NREL log converter on a hand-made excerpt, and its bad-input errors."""

from __future__ import annotations

from olsctl.cli import main
from olsctl.power.profiles import load_power_csv
from olsctl.workload import load_workload

HEADER = "submit,start,end,nodes,runtime_s,wait_time,avg_power_per_node\n"


def test_convert_excerpt(tmp_path, capsys):
    src = tmp_path / "gt.csv"
    src.write_text(HEADER
                   + "2024-08-30 10:00:10,2024-08-30 10:01:00,2024-08-30 10:11:00,2,600,50,400.5\n"
                   + "2024-08-30 10:00:00,2024-08-30 10:00:00,2024-08-30 10:20:00,3,1200,0,0\n"
                   + "2024-08-30 10:05:00,2024-08-30 10:05:00,2024-08-30 10:06:00,1,60,0,300\n")
    swf, power = tmp_path / "n.swf", tmp_path / "n.csv"
    assert main(["convert", "nrel", str(src), "--swf", str(swf), "--power", str(power)]) == 0
    w = load_workload(swf)
    # submit order: the 10:00:00 job first; at 10:05 all three run: 3 + 2 + 1 = 6 nodes
    assert w.machine_procs == 6
    assert w.job_id.tolist() == [1, 2, 3]
    assert w.submit_s.tolist() == [0, 10, 300]
    assert w.procs.tolist() == [3, 2, 1] and w.runtime_s.tolist() == [1200, 600, 60]
    prof = load_power_csv(power, w, 100.0, 2000.0)
    assert prof.mean_w[1] == 400.5 and prof.mean_w[2] == 300.0
    assert prof.synthetic_jobs == 1  # the 0 W row is missing data


def test_convert_bad_time_is_one_line(tmp_path, capsys):
    src = tmp_path / "gt.csv"
    src.write_text(HEADER + "yesterday,2024-08-30 10:00:00,2024-08-30 10:20:00,3,1200,0,5\n")
    code = main(["convert", "nrel", str(src), "--swf", str(tmp_path / "n.swf"),
                 "--power", str(tmp_path / "n.csv")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["TraceError: gt.csv:2: field submit is not a time 'YYYY-MM-DD HH:MM:SS': "
                   "'yesterday'"]
    assert not (tmp_path / "n.swf").exists()
