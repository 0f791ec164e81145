"""The README stays true: its quick start and recipes run as written and show what they
say. The machinery that reads shell and Python examples out of Markdown lives here too;
tests/test_docs.py uses it on the pages in docs/."""

from __future__ import annotations

import csv
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from olsctl.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: the languages of the fenced blocks that hold shell examples
SHELL = ("sh", "console", "bash")
#: the README's test command: the second quick-start command, which .ci/run runs
TEST_COMMAND = "pip install '.[test]' && pytest"


def _blocks(lang: str | tuple[str, ...], text: str = README) -> list[str]:
    """The bodies of ``text``'s fenced blocks in ``lang`` (one name or several)."""
    langs = (lang,) if isinstance(lang, str) else lang
    return re.findall(rf"```(?:{'|'.join(map(re.escape, langs))})\n(.*?)```", text, flags=re.S)


def shell_commands(block: str) -> list[str]:
    """The ``olsctl`` commands of one shell block, in order: its lines joined where one
    ends in a backslash, a leading ``$ `` prompt and a trailing comment dropped, and
    each ``&&`` part that starts with ``olsctl``."""
    cmds = []
    for line in block.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0].strip()
        line = line[2:] if line.startswith("$ ") else line
        cmds += [part.strip() for part in line.split("&&") if part.strip().startswith("olsctl")]
    return cmds


def _olsctl_commands(text: str = README) -> list[str]:
    """Every ``olsctl`` command of ``text``'s shell blocks."""
    return [c for block in _blocks(SHELL, text) for c in shell_commands(block)]


def _section(title: str, text: str = README) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _recipes() -> dict[str, list[str]]:
    """The commands of each recipe, in order (they run one after another)."""
    recipes = {}
    for part in _section("Recipes").split("\n### ")[1:]:
        title, body = part.split("\n", 1)
        recipes[title.strip()] = _olsctl_commands(body)
    return recipes


RECIPE_COMMANDS = {c for cmds in _recipes().values() for c in cmds}
#: the README's commands outside the recipes (the quick start's)
FAST = [c for c in _olsctl_commands() if c not in RECIPE_COMMANDS]


def link_repo(tmp: Path) -> None:
    """``tmp`` as the repository root for the examples: the bundled logs linked and the
    configs copied (so that a test may trim one)."""
    (tmp / "traces").symlink_to(ROOT / "traces")
    shutil.copytree(ROOT / "configs", tmp / "configs")


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    link_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_quick_start_has_exactly_two_commands():
    commands = _blocks("sh", _section("Quick start"))
    assert [c.strip() for c in commands] == ["pip install . && olsctl run", TEST_COMMAND]


def test_ci_runs_the_readme_test_command():
    """.ci/run runs the README's test command, which the Tests section shows too."""
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text()
    assert [c.strip() for c in _blocks("sh", _section("Tests"))] == [TEST_COMMAND]


def test_readme_shows_commands():
    assert FAST == ["olsctl run"]
    assert set(_recipes()) == {"Tune a scheduler's settings", "An SLA-driven power-saving study",
                               "Watch a run live", "Your own Slurm log"}


def test_readme_links_every_docs_page():
    """"Read on" links each page of docs/, and every page it links exists."""
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", _section("Read on")))
    assert linked == {p.name for p in (ROOT / "docs").glob("*.md")}


@pytest.mark.parametrize("command", FAST)
def test_readme_command_runs(command, workdir, capsys):
    args = shlex.split(command)[1:]
    if args[:1] == ["run"] and "--out" not in args:
        args += ["--out", str(workdir / "out")]
    assert main(args) == 0, capsys.readouterr().err
    if args[:1] == ["run"]:
        out = Path(args[args.index("--out") + 1])
        assert {p.name for p in out.iterdir()} >= {"jobs.csv", "timeseries.csv", "summary.json"}


def test_bundled_configs_load():
    from olsctl.config import load_config
    from olsctl.study import load_study
    from olsctl.tune import load_tune

    configs = sorted((ROOT / "configs").glob("*.yaml"))
    assert configs
    for path in configs:
        if path.name.startswith("study-"):
            load_study(path)
        elif path.name.startswith("tune-"):
            load_tune(path)
        else:
            load_config(path)


def _trimmed_sla_power_study(path: Path) -> None:
    """``configs/study-sla-power.yaml`` cut to one log, one SLA level and two schemes (its
    84 runs take about 12 minutes on two cores): the recipe's commands then run as
    written, on fewer runs."""
    study = yaml.safe_load(path.read_text())
    study["grid"]["trace"] = ["KTH-SP2"]
    study["grid"]["sla.max"] = [200]
    study["grid"]["scheme"] = {k: study["grid"]["scheme"][k] for k in ("EASY", "procs")}
    path.unlink()
    path.write_text(yaml.safe_dump(study))


@pytest.mark.parametrize("title", list(_recipes()))
def test_readme_recipe_runs(title, tmp_path, monkeypatch, capsys):
    """Each recipe's commands, in order, in one directory (the Slurm recipe's dump is the
    hand-made sample of tests/test_slurm.py). What each shows or writes is checked
    against what the recipe says, or an answer worked out apart from it."""
    (tmp_path / "traces").symlink_to(ROOT / "traces")
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    _trimmed_sla_power_study(tmp_path / "configs" / "study-sla-power.yaml")
    shutil.copy(ROOT / "tests" / "data" / "slurm" / "sample.sacct", tmp_path / "jobs.sacct")
    monkeypatch.chdir(tmp_path)
    commands = _recipes()[title]
    assert commands, title
    outputs, studies = [], []  # each command's output; whether studies/ exists after it
    for command in commands:
        assert main(shlex.split(command)[1:]) == 0, (command, capsys.readouterr().err)
        outputs.append(capsys.readouterr().out)
        studies.append((tmp_path / "studies").exists())
    if title.startswith("Tune"):
        tuned = yaml.safe_load((tmp_path / "runs" / "tune-mqbf-ols" / "tuned.yaml").read_text())
        assert tuned["policy"]["queues"] == 3 and tuned["policy"]["boundaries_s"] == [300, 3000]
    elif title.startswith("An SLA"):
        _check_sla_recipe(tmp_path, _recipe_text(title), outputs, studies)
    elif title.startswith("Watch"):
        _check_live_recipe(tmp_path, outputs)
    else:
        _check_slurm_recipe(tmp_path, outputs)


def _recipe_text(title: str) -> str:
    return _section("Recipes").split(f"\n### {title}\n", 1)[1].split("\n### ", 1)[0]


def _words(text: str) -> list[str]:
    """``text``'s lines with table rules dropped and runs of blanks made one."""
    return [" ".join(line.strip("│┃ ").replace("│", " ").replace("┃", " ").split())
            for line in text.splitlines()]


def _is_png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _check_sla_recipe(tmp: Path, text: str, outputs: list[str], studies: list[bool]) -> None:
    """The recipe's claims: the whole study is its 84 runs (4 logs x 3 SLA levels x 7
    schemes); ``--list`` computes nothing; ``olsctl report`` prints, per log and scheme,
    the mean bounded slowdown, processor savings, energy and share of weeks that kept
    the SLA, and draws tradeoff.png and weekly.png. On the trimmed study (KTH-SP2, SLA
    200, EASY and procs): EASY on all processors saves nothing, the controller saves
    some; each run's share of weeks kept is recounted from its weeks."""
    from olsctl.study import load_study

    runs, logs, levels, schemes = map(int, re.search(
        r"shows the (\d+) runs \((\d+) logs x (\d+) SLA levels x (\d+) schemes\)",
        text).groups())
    whole = load_study(ROOT / "configs" / "study-sla-power.yaml")
    assert len(whole.points) == runs == logs * levels * schemes
    assert [len({p.labels[i] for p in whole.points}) for i in range(3)] == \
        [logs, levels, schemes]
    study = load_study(tmp / "configs" / "study-sla-power.yaml")
    ids = [p.run_id for p in study.points]
    assert len(ids) == 2
    listed = _words(outputs[0])
    for rid in ids:
        assert any(line.endswith(f"{rid} missing") for line in listed), (rid, listed)
    assert "2 runs, 0 finished in studies/sla-power" in listed
    assert studies == [False, True, True]  # --list wrote nothing
    rows = {r["id"]: r for r in csv.DictReader(
        (tmp / "studies" / "sla-power" / "results.csv").read_text().splitlines())}
    assert list(rows) == ids
    easy, procs = (rows[p.run_id] for p in study.points)  # (grid order: EASY, procs)
    assert (easy["scheme"], procs["scheme"]) == ("EASY", "procs")
    assert float(easy["processor_savings"]) == 0.0 < float(procs["processor_savings"])
    report = _words(outputs[2])
    for rid, row in rows.items():
        summary = json.loads((tmp / "studies" / "sla-power" / "runs" / rid /
                              "summary.json").read_text())
        weeks = [w["mean_bsld"] <= 200 for w in summary["weekly"] if w["jobs"]]
        assert float(row["sla_windows_kept_share"]) == sum(weeks) / len(weeks)
        line = next(x for x in report if f" {float(row['mean_bsld']):.2f} " in f" {x} ")
        for shown in (f"{100 * float(row['processor_savings']):.1f}%",
                      f"{float(row['energy_j']) / 3.6e9:.2f}",
                      f"{100 * float(row['sla_windows_kept_share']):.1f}%"):
            assert shown in line.split(), (shown, line)
    figures = tmp / "studies" / "sla-power" / "report"
    assert _is_png(figures / "tradeoff.png") and _is_png(figures / "weekly.png")


def _check_live_recipe(tmp: Path, outputs: list[str]) -> None:
    """The run writes its feed and finishes with the figures its config claims (the share
    of weeks kept and the processors saved on KTH-SP2 with SLA feedback); the monitor's
    replay ends on the run's own figures: every job done, the weeks kept, the mean
    bounded slowdown, the utilization and the last tick's choice."""
    run = tmp / "runs" / "easy-ols-live"
    summary = json.loads((run / "summary.json").read_text())
    claims = " ".join(line.lstrip("#").strip() for line in
                      (tmp / "configs" / "easy-ols.yaml").read_text().splitlines()
                      if line.startswith("#"))
    weeks, saved = re.search(r"on KTH-SP2 ([\d.]+)% of the weeks .*?saving ([\d.]+)% of the "
                             r"processors", claims).groups()
    sla, metrics = summary["sla"], summary["metrics"]
    assert f"{100 * sla['kept_share']:.1f}" == weeks
    assert f"{100 * metrics['processor_savings']:.1f}" == saved
    feed = [json.loads(line) for line in (run / "live.jsonl").read_text().splitlines()]
    jobs = summary["load"]["kept"]
    assert feed[0]["kind"] == "start" and feed[0]["jobs"] == jobs
    assert feed[-1] == {"kind": "end", "status": "finished"}
    assert (feed[-2]["done"], feed[-2]["windows_kept"], feed[-2]["windows_judged"]) == \
        (jobs, sla["windows_kept"], sla["windows"])
    assert "easy-ols-live" in outputs[0]
    last = [json.loads(line) for line in (run / "decisions.jsonl").read_text()
            .splitlines()][-1]
    final = outputs[1].splitlines()[-1]
    for shown in (f"done {jobs:,}/{jobs:,}", f"SLA {sla['windows_kept']}/{sla['windows']} kept",
                  f"mean bsld {metrics['mean_bsld']:.2f}",
                  f"util {100 * metrics['utilization']:.1f}%",
                  f"chose {last['chosen']['active_procs']} procs"):
        assert shown in final, (shown, final)


def _check_slurm_recipe(tmp: Path, outputs: list[str]) -> None:
    """The sample dump (tests/test_slurm.py) converts to its hand-made SWF records and key,
    saying what it left out and why; ``trace info`` shows its 8 jobs on 8 processors;
    the run is EASY with the users' time limits as estimates, whose starts (worked out
    below) are those of tests/test_slurm.py's run with exact estimates; and, as the
    recipe says, a run straight on the dump gives the same jobs.

    Estimates max(limit, runtime): A=1 1200, B=2 3600, C=3 3600, D=4 172800, E=5 100,
    F=6 50, G=7 86400, H=8 600 (actual 1000, 400, 300, 500, 100, 50, 200, 600). A
    starts at 0, B at 10. At 410 B ends: C starts; D (6) blocked, shadow 1200 (A's
    expected end) with extra 0; E (ends 510) starts. At 510 F (ends 560) starts. At 560
    H (ends 1160 <= 1200) starts. At 710 C ends: 2 free, G (8) does not fit. At 1000 A
    ends: D starts. At 1500 D ends: G starts."""
    from test_slurm import SAMPLE_SWF, body

    assert outputs[0].strip() == (
        "wrote mine.swf and mine-key.csv (MaxProcs 8, from the most busy at once in the "
        "log): 8 jobs, dropped 6 (2 cancelled before start, 3 pending, 1 still running), "
        "13 steps folded")
    assert body((tmp / "mine.swf").read_text()) == SAMPLE_SWF
    key = list(csv.reader((tmp / "mine-key.csv").read_text().splitlines()))
    assert [r[2] for r in key if r[0] == "job"] == [
        "100", "110_1", "110_2", "120", "130", "131", "132", "133"]
    info = _words(outputs[1])
    for shown in ("machine processors 8", "records / kept 8 / 8", "dropped none", "users 4"):
        assert shown in info, (shown, info)
    run = tmp / "runs" / "mine"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["config"]["estimates"] == "user"
    assert summary["config"]["policy"]["name"] == "easy"
    jobs = list(csv.DictReader((run / "jobs.csv").read_text().splitlines()))
    assert {int(r["job_id"]): float(r["starting_time"]) for r in jobs} == \
        {1: 0, 2: 10, 3: 410, 4: 1000, 5: 410, 6: 510, 7: 1500, 8: 560}
    assert [int(r["requested_time"]) for r in jobs] == \
        [1200, 3600, 3600, 172800, 100, 50, 86400, 600]
    assert main(["run", "--trace", "jobs.sacct", "--estimates", "user", "--out",
                 str(tmp / "direct"), "--quiet"]) == 0
    assert (tmp / "direct" / "jobs.csv").read_bytes() == (run / "jobs.csv").read_bytes()
