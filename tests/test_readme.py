"""The README stays true: every command and config key it shows exists and runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from olsctl.cli import main
from olsctl.config import CONTROLLER_KEYS, POWER_KEYS, TOP_LEVEL, load_config

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def _olsctl_commands() -> list[str]:
    cmds = []
    for block in _blocks("sh"):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("olsctl"):
                    cmds.append(part)
    return cmds


FAST = [c for c in _olsctl_commands() if c != "olsctl bench"]


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


def test_readme_python_example_runs(workdir):
    (code,) = _blocks("python")
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["future"].unstarted == 0
    assert scope["snaps"][0].active_procs == 100
    assert scope["sim"].state.active_procs == 80


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
