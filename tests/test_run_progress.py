"""``olsctl run``'s progress when stderr is not a terminal (a pipe, a file): a plain line
now and then (:class:`olsctl.runner.PlainProgress`), none for a short run or with
``--quiet``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import pytest

from olsctl.cli import main
from olsctl.runner import PlainProgress


def _progress(total: int) -> tuple[PlainProgress, list[str], Callable[[float, int], int]]:
    """A plain progress on a clock set by hand; ``at(t_s, done)`` tells it ``done`` jobs
    started at wall second ``t_s`` and returns how many lines it has said."""
    said: list[str] = []
    now = [0.0]
    progress = PlainProgress(said.append, clock=lambda: now[0])

    def at(t_s: float, done: int) -> int:
        now[0] = t_s
        progress.update(done, total, 0.0)
        return len(said)
    return progress, said, at


def test_a_line_every_tenth_of_the_jobs_at_most_and_15_s_apart():
    progress, said, at = _progress(1000)
    with progress:                 # the clock starts at 0
        assert at(5, 400) == 0     # 40% started, but only 5 s in
        assert at(16, 450) == 1    # 15 s in, and 10% more
        assert at(40, 500) == 1    # 5% more only, 24 s after the last line
        assert at(45, 560) == 2    # 11% more, 29 s after
        assert at(50, 900) == 2    # 34% more, but 5 s after
        assert at(106, 600) == 3   # nothing new for a minute: a line all the same
        assert at(300, 1000) == 3  # the end: the run's summary follows
    assert said[0] == "simulating: 450 of 1,000 jobs started (45%) in 16 s, about 20 s left"


def test_no_line_for_a_run_under_15_s():
    progress, said, at = _progress(1000)
    with progress:
        for t_s in range(1, 15):
            at(t_s, 70 * t_s)
    assert said == []


def _log(path: Path, jobs: int = 5000) -> Path:
    lines = ["; MaxProcs: 8"] + [f"{j} {5 * j} -1 {10 + j % 7} {1 + j % 3} -1 -1 {1 + j % 3} "
                                 f"-1 -1 1 1 1 -1 -1 -1 -1 -1" for j in range(1, jobs + 1)]
    path.write_text("\n".join(lines) + "\n")
    return path


LINE = re.compile(r"simulating: [\d,]+ of 5,000 jobs started \(\d+%\) in \d+ s, about \d+ s "
                  r"left")


@pytest.mark.parametrize("gap_s", [0.0, PlainProgress.gap_s])
def test_olsctl_run_off_a_terminal_prints_plain_lines_on_stderr(tmp_path, monkeypatch, capsys,
                                                                 gap_s):
    """The main simulator reports every 2,048 jobs started: with no gap asked between
    lines, a 5,000-job run says so twice on stderr (41%, 82%); with the real gap, this
    run (well under 15 s) says nothing. Stdout is the summary alone; --quiet prints
    nothing at all."""
    monkeypatch.setattr(PlainProgress, "gap_s", gap_s)
    trace = _log(tmp_path / "t.swf")
    assert main(["run", "--trace", str(trace), "--out", str(tmp_path / "a")]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("simulating")]
    assert len(lines) == (2 if gap_s == 0 else 0) and all(LINE.fullmatch(x) for x in lines)
    assert "simulating" not in out and "wrote jobs.csv" in out
    assert main(["run", "--trace", str(trace), "--out", str(tmp_path / "q"), "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
