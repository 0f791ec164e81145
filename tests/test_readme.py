"""The README stays true: every command and config key it shows exists and runs."""

from __future__ import annotations

import ast
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from olsctl.cli import main
from olsctl.config import CONTROLLER_KEYS, POWER_KEYS, TOP_LEVEL, load_config

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang: str, text: str = README) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def _olsctl_commands(text: str = README) -> list[str]:
    cmds = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("olsctl"):
                    cmds.append(part)
    return cmds


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _recipes() -> dict[str, list[str]]:
    """The commands of each recipe, in order (they run one after another)."""
    recipes = {}
    for part in _section("Recipes").split("\n### ")[1:]:
        title, body = part.split("\n", 1)
        recipes[title.strip()] = [c for c in _olsctl_commands(body) if c.startswith("olsctl")]
    return recipes


RECIPE_COMMANDS = {c for cmds in _recipes().values() for c in cmds}
FAST = [c for c in _olsctl_commands() if c != "olsctl bench" and c not in RECIPE_COMMANDS]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "traces").symlink_to(ROOT / "traces")
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_quick_start_has_exactly_two_commands():
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)```", quick, flags=re.S)
    assert [c.strip() for c in commands] == ["pip install . && olsctl run",
                                             "pip install '.[test]' && pytest"]


def test_ci_runs_the_readme_test_command():
    assert "pip install '.[test]' && pytest" in (ROOT / ".ci" / "run").read_text()


def test_readme_shows_commands():
    assert "olsctl run" in _olsctl_commands()
    assert len(FAST) >= 6


@pytest.mark.parametrize("command", FAST)
def test_readme_command_runs(command, workdir, capsys):
    args = shlex.split(command)[1:]
    if args[:1] == ["run"] and "--out" not in args:
        args += ["--out", str(workdir / "out")]
    assert main(args) == 0, capsys.readouterr().err
    if args[:1] == ["run"]:
        out = Path(args[args.index("--out") + 1])
        assert {p.name for p in out.iterdir()} >= {"jobs.csv", "timeseries.csv", "summary.json"}


@pytest.mark.slow
def test_readme_full_bench_runs(workdir, capsys):
    assert main(["bench"]) == 0
    assert "same starts: True" in capsys.readouterr().out


def _python_parts() -> tuple[str, str]:
    """The section "Using it from Python" split at its subsection "Adding a policy"."""
    using, adding = _section("Using it from Python").split("\n### Adding a policy\n")
    return using, adding


def test_readme_python_example_runs(workdir):
    (code,) = _blocks("python", _python_parts()[0])
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["future"].unstarted == 0
    assert scope["snaps"][0].active_procs == 100
    assert scope["sim"].state.active_procs == 80


def test_readme_policy_example_is_the_tested_file():
    """The policy shown is examples/smallest_first.py after its docstring, as the tests
    run it (tests/test_examples.py)."""
    assert len(_blocks("python")) == 2
    (code,) = _blocks("python", _python_parts()[1])
    source = (ROOT / "examples" / "smallest_first.py").read_text(encoding="utf-8")
    docstring_end = ast.parse(source).body[0].end_lineno
    assert code.strip() == "\n".join(source.splitlines()[docstring_end:]).strip()


def test_config_reference_lists_every_key():
    table = README.split("## Configuration", 1)[1].split("### Policies", 1)[0]
    shown = set(re.findall(r"^\| `(\w+)` \|", table, flags=re.M))
    assert shown == set(TOP_LEVEL)


def test_bundled_configs_load():
    configs = sorted((ROOT / "configs").glob("*.yaml"))
    assert configs
    for path in configs:
        if path.name.startswith("study-"):
            from olsctl.study import load_study

            load_study(path)
        elif path.name.startswith("tune-"):
            from olsctl.tune import load_tune

            load_tune(path)
        else:
            load_config(path)


def test_controller_reference_lists_every_controller_key():
    table = README.split("### Controller", 1)[1].split("\n## ", 1)[0]
    shown = set(re.findall(r"^\| `(\w+)` \|", table, flags=re.M))
    assert shown == set(CONTROLLER_KEYS)


def test_power_reference_lists_every_power_key():
    table = README.split("### Power", 1)[1].split("\n### ", 1)[0]
    shown = set(re.findall(r"^\| `(\w+)` \|", table, flags=re.M))
    assert shown == set(POWER_KEYS)


def _trimmed_sla_power_study(path: Path) -> None:
    """``configs/study-sla-power.yaml`` cut to one log, one SLA level and two schemes (its
    60 runs take hours): the recipe's commands then run as written, on fewer runs."""
    study = yaml.safe_load(path.read_text())
    study["grid"]["trace"] = ["KTH-SP2"]
    study["grid"]["sla.max"] = [200]
    study["grid"]["scheme"] = {k: study["grid"]["scheme"][k] for k in ("EASY", "procs")}
    path.unlink()
    path.write_text(yaml.safe_dump(study))


@pytest.mark.parametrize("title", list(_recipes()))
def test_readme_recipe_runs(title, tmp_path, monkeypatch, capsys):
    """Each recipe's commands, in order, in one directory (the Slurm recipe's dump is the
    hand-made sample of tests/test_slurm.py). Everything each shows or writes is checked."""
    (tmp_path / "traces").symlink_to(ROOT / "traces")
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    _trimmed_sla_power_study(tmp_path / "configs" / "study-sla-power.yaml")
    shutil.copy(ROOT / "tests" / "data" / "slurm" / "sample.sacct", tmp_path / "jobs.sacct")
    monkeypatch.chdir(tmp_path)
    commands = _recipes()[title]
    assert commands, title
    for command in commands:
        assert main(shlex.split(command)[1:]) == 0, (command, capsys.readouterr().err)
    out = capsys.readouterr().out
    if title.startswith("Tune"):
        tuned = yaml.safe_load((tmp_path / "runs" / "tune-mqbf-ols" / "tuned.yaml").read_text())
        assert tuned["policy"]["queues"] == 3 and tuned["policy"]["boundaries_s"] == [300, 3000]
    elif title.startswith("An SLA"):
        report = tmp_path / "studies" / "sla-power" / "report"
        assert (report / "tradeoff.png").is_file() and (report / "weekly.png").is_file()
    elif title.startswith("Watch"):
        assert (tmp_path / "runs" / "easy-ols-live" / "live.jsonl").is_file()
        assert "easy-ols-live" in out
    else:
        assert (tmp_path / "mine.swf").is_file() and (tmp_path / "mine-key.csv").is_file()
        assert {p.name for p in (tmp_path / "runs" / "mine").iterdir()} >= {
            "jobs.csv", "timeseries.csv", "summary.json"}
