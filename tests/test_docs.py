"""The pages in docs/ stay true: every shell example runs (the hours-long ones trimmed, as
named in TRIMMED), every command, option and config key they show exists, and every
Python example runs. The README's own examples: tests/test_readme.py, whose machinery
this reuses."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import runpy
import shlex
import time
from pathlib import Path
from typing import Callable

import pytest
import yaml

from olsctl import policies
from olsctl.cli import HANDLERS, _parser, main
from olsctl.config import CONTROLLER_KEYS, POWER_KEYS, TOP_LEVEL
from olsctl.live import follow, sampler
from olsctl.study.study_file import STUDY_KEYS
from olsctl.tune import TUNE_KEYS
from test_readme import README, ROOT, SHELL, _blocks, link_repo, shell_commands

DOCS = {p.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))}
#: every Markdown text the tests read: the README and the pages
TEXTS = {"README.md": README, **{f"docs/{k}": v for k, v in DOCS.items()}}

# -- the shell examples -------------------------------------------------------------------

#: commands too long for the default suite, run whole by ``pytest -m slow``
SLOW = {"olsctl bench": "every bundled log, best of 3 (minutes)"}
#: a short log for trimmed examples: KTH-SP2's first jobs (about three weeks)
SHORT_JOBS = 1500


def _short_log(tmp: Path) -> str:
    """KTH-SP2's header and first SHORT_JOBS jobs as ``tmp/short/KTH-SP2-short.swf``;
    its path relative to ``tmp/configs``."""
    import gzip

    src = next((ROOT / "traces").glob("KTH-SP2*.swf.gz"))
    lines = gzip.open(src, "rt").read().splitlines()
    header = [x for x in lines if x.startswith(";")]
    jobs = [x for x in lines if x.strip() and not x.startswith(";")][:SHORT_JOBS]
    (tmp / "short").mkdir(exist_ok=True)
    (tmp / "short" / "KTH-SP2-short.swf").write_text("\n".join(header + jobs) + "\n")
    return "../short/KTH-SP2-short.swf"


def _edit_yaml(path: Path, change: Callable[[dict], None]) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))


def _trim_wallace(tmp: Path) -> None:
    """configs/study-wallace.yaml (24 runs of minutes each) cut to the short log, the
    62.5% cap and WFP order: its two capping policies, two runs."""
    log = _short_log(tmp)
    _edit_yaml(tmp / "configs" / "study-wallace.yaml", lambda s: s["grid"].update(
        {"trace": [log], "power.cap.fraction": [0.625], "policy.order": ["wfp"]}))


def _trim_lawson(tmp: Path) -> None:
    """configs/study-lawson.yaml (24 runs, minutes) cut to the short log and exact
    estimates: its three schemes, three runs."""
    log = _short_log(tmp)
    _edit_yaml(tmp / "configs" / "study-lawson.yaml",
               lambda s: s["grid"].update({"trace": [log], "estimates": ["exact"]}))


def _trim_cap_ols(tmp: Path) -> None:
    """configs/cap-ols.yaml on the short log instead of the whole of KTH-SP2 (paced at
    an hour a second, the whole log would take hours; the clock is a fake one anyway)."""
    log = _short_log(tmp)
    _edit_yaml(tmp / "configs" / "cap-ols.yaml", lambda c: c.update({"trace": log}))


#: commands run trimmed in the default suite: the command -> what trims it
TRIMMED: dict[str, Callable[[Path], None]] = {
    "olsctl study configs/study-wallace.yaml": _trim_wallace,
    "olsctl study configs/study-lawson.yaml": _trim_lawson,
    "olsctl run configs/cap-ols.yaml --live": _trim_cap_ols,
    "olsctl run configs/cap-ols.yaml --live --pace 3600": _trim_cap_ols,
}


def _shell_blocks() -> list[tuple[str, list[str]]]:
    """(page:block number, its commands) for each shell block of docs/ with a command."""
    out = []
    for name, text in DOCS.items():
        for i, block in enumerate(_blocks(SHELL, text)):
            if cmds := shell_commands(block):
                out.append((f"{name}:{i + 1}", cmds))
    return out


BLOCKS = _shell_blocks()


class FakeTime:
    """A clock that moves only when slept on: pacing and replays take no wall time, and
    what they waited is known exactly."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def clock(self) -> float:
        return self.now_s

    def sleep(self, wait_s: float) -> None:
        self.now_s += max(wait_s, 0.0)


@pytest.fixture
def fake_time(monkeypatch) -> FakeTime:
    """LiveRun's pacing and the monitor's replay on a :class:`FakeTime`."""
    fake = FakeTime()
    swap = {time.monotonic: fake.clock, time.sleep: fake.sleep}
    for fn in (sampler.LiveRun.__init__, follow.monitor):
        monkeypatch.setattr(fn, "__defaults__", tuple(swap.get(d, d) if callable(d) else d
                                                      for d in fn.__defaults__))
    return fake


def _samples(run_dir: Path) -> list[dict]:
    feed = [json.loads(x) for x in (run_dir / "live.jsonl").read_text().splitlines()]
    return [r for r in feed if r.get("kind") == "sample"]


def _check_waits(command: str, waited_s: float) -> None:
    """What --pace and a replay say they do: one simulated hour per wall second, and
    X samples per second (20 by default)."""
    args = shlex.split(command)[1:]
    if "--pace" in args:
        out = Path("runs/cap-ols-kth")
        times = [s["time_s"] for s in _samples(out)]
        pace = float(args[args.index("--pace") + 1])
        assert waited_s == pytest.approx((times[-1] - times[0]) / pace, rel=1e-6), command
    elif args[0] == "monitor":
        speed = float(args[args.index("--speed") + 1]) if "--speed" in args else 20.0
        n = len(_samples(Path(args[1])))
        assert waited_s == pytest.approx((n - 1) / speed, rel=1e-6), command


def _run_outputs(args: list[str]) -> Path:
    """The output directory of ``olsctl run ARGS``: --out, else the config's out."""
    if "--out" in args:
        return Path(args[args.index("--out") + 1])
    config = next((a for a in args[1:2] if a.endswith(".yaml")), None)
    out = yaml.safe_load(Path(config).read_text()).get("out") if config else None
    return Path(out or "olsctl-out")


@pytest.mark.parametrize("where,commands", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_docs_shell_block_runs(where, commands, tmp_path, monkeypatch, capsys, fake_time):
    """The block's commands, in order, in one directory (a later one may read what an
    earlier one wrote); those in TRIMMED on their trimmed configs, those in SLOW left
    to ``pytest -m slow``. Each exits 0; a run leaves its three files."""
    link_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    for command in commands:
        if command in TRIMMED:
            TRIMMED[command](tmp_path)
    ran = 0
    for command in commands:
        if command in SLOW:
            continue
        args = shlex.split(command)[1:]
        start_s = fake_time.now_s
        assert main(args) == 0, (command, capsys.readouterr().err)
        capsys.readouterr()
        _check_waits(command, fake_time.now_s - start_s)
        if args[0] == "run":
            out = _run_outputs(args)
            assert {p.name for p in out.iterdir()} >= {"jobs.csv", "timeseries.csv",
                                                       "summary.json"}, command
        ran += 1
    assert ran


def test_every_docs_command_is_run_or_named():
    """Each command of a shell block runs in test_docs_shell_block_runs, or is named in
    SLOW (and run by test_slow_docs_commands_run)."""
    shown = {c for _, cmds in BLOCKS for c in cmds}
    assert set(SLOW) <= shown and set(TRIMMED) <= shown


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(SLOW))
def test_slow_docs_commands_run(command, tmp_path, monkeypatch, capsys):
    link_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(command)[1:]) == 0
    if command == "olsctl bench":
        assert "same starts: True" in capsys.readouterr().out


# -- commands, options and keys shown --------------------------------------------------------

def _code(text: str) -> list[str]:
    """The code of ``text``: each fenced block's lines, and each inline code span (its
    line breaks made spaces)."""
    fenced = re.findall(r"```\w*\n(.*?)```", text, flags=re.S)
    prose = re.sub(r"```\w*\n.*?```", "", text, flags=re.S)
    spans = [s.replace("\n", " ") for s in re.findall(r"`([^`]+)`", prose)]
    return [line for block in fenced for line in block.replace("\\\n", " ").splitlines()] \
        + spans


def _command_name(words: list[str]) -> str:
    return " ".join(words[:2]) if words[0] in ("trace", "convert") else words[0]


def _shown_commands() -> list[tuple[str, str, str]]:
    """(text, command name, its arguments) for every ``olsctl COMMAND ...`` shown: code
    (each ``&&`` part, without a ``$ `` prompt, ``VAR=value`` settings or a trailing
    comment) that starts with ``olsctl``."""
    out = []
    for name, text in TEXTS.items():
        for code in _code(text):
            for part in code.split(" #", 1)[0].split("&&"):
                part = re.sub(r"^(\$ )?(\w+=\S*\s+)*", "", part.strip())
                if m := re.match(r"olsctl ((?:[a-z][a-z-]*(?: |$)){1,2})", part):
                    command = _command_name(m.group(1).split())
                    out.append((name, command, part[len("olsctl " + command):]))
    return out


def _options(command: str) -> set[str]:
    """The option strings ``olsctl COMMAND`` takes."""
    import argparse

    parser = _parser()
    for word in command.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return {s for a in parser._actions for s in a.option_strings}


def test_every_command_shown_exists():
    shown = _shown_commands()
    assert {c for _, c, _ in shown} >= {"run", "monitor", "study", "tune", "report", "bench"}
    missing = sorted({(t, c) for t, c, _ in shown if c not in HANDLERS})
    assert not missing, missing


def test_every_option_shown_exists():
    """Each ``--option`` in code that starts with ``olsctl COMMAND`` (an example or a
    synopsis) is an option of that command."""
    bad = set()
    for text, command, rest in _shown_commands():
        if command not in HANDLERS:
            continue  # test_every_command_shown_exists names it
        for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest):
            if option not in _options(command):
                bad.add((text, command, option))
    assert not bad, sorted(bad)


def _table_keys(text: str, after: str) -> set[str]:
    """The backquoted names in the first column of the first table after ``after``."""
    lines = text.split(after, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return {k for row in rows[2:] for k in re.findall(r"`(\w+)`", row.split(" | ", 1)[0])}


@pytest.mark.parametrize("page,after,keys", [
    ("configuration.md", "# Configuration", TOP_LEVEL),
    ("controller.md", "## Settings", CONTROLLER_KEYS),
    ("power.md", "# Power", POWER_KEYS),
    ("studies.md", "A study file:", STUDY_KEYS),
    ("studies.md", "## Tuning", TUNE_KEYS),
])
def test_key_table_lists_every_key(page, after, keys):
    """The reference table lists every key, and only keys, of its section."""
    assert _table_keys(DOCS[page], after) == set(keys)


def test_policy_tables_show_only_real_policies_and_settings():
    """The policy table's names are registered policies and the settings it gives each
    are that policy's; the RMAP/PARM table's keys are settings of those policies."""
    text = DOCS["policies.md"]
    table = text.split("| `policy.name` |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([\w-]+)` \| (.*?) \|", table, flags=re.M)
    assert len(rows) >= 6
    for name, params in rows:
        assert name in policies.REGISTRY, name
        shown = set(re.findall(r"`(\w+)` \(", params))
        assert shown and shown <= set(policies.REGISTRY[name].params), (name, shown)
    budget = set().union(*(policies.REGISTRY[n].params for n in
                           ("rmap-traditional", "rmap-naive", "rmap-adaptive", "parm")))
    shown = _table_keys(text, "## Overprovisioned machines (RMAP, PARM)")
    assert len(shown) >= 10 and shown <= budget, shown - budget


#: dotted names in code that are not config keys: files, and summary.json's fields
NOT_KEYS = {"power.csv", "power.png", "power.forced_starts"}


def test_every_dotted_config_key_shown_exists():
    """``policy.X``, ``power.X``, ``controller.X`` (and ``controller.sla.X``), ``sla.X``
    shown in code (``--set`` included) are keys of their section."""
    params = set().union(*(e.params for e in policies.REGISTRY.values())) | {"name"}
    sections = {"policy": params, "power": set(POWER_KEYS), "controller": set(CONTROLLER_KEYS),
                "sla": {"metric", "max", "window_s"},
                "controller.sla": {"metric", "max", "feedback"}}
    bad, seen = set(), 0
    for text, body in TEXTS.items():
        for code in _code(body):
            pattern = r"(?<![\w./-])((?:controller\.sla|policy|power|controller|sla))\.([a-z_]+)"
            for section, key in re.findall(pattern, code):
                if f"{section}.{key}" in NOT_KEYS:
                    continue
                seen += 1
                if key not in sections[section]:
                    bad.add((text, f"{section}.{key}"))
    assert seen >= 20 and not bad, sorted(bad)


def test_yaml_examples_load(tmp_path):
    """Each YAML block of docs/ is a study file that loads (its keys checked)."""
    from olsctl.study import load_study

    blocks = [b for text in DOCS.values() for b in _blocks("yaml", text)]
    assert blocks
    for i, block in enumerate(blocks):
        path = tmp_path / f"example-{i}.yaml"
        path.write_text(block)
        assert load_study(path).points


# -- the Python examples -------------------------------------------------------------------

#: (docs/python.md's blocks build on one another: tests/test_api.py runs them in order)
PYTHON = [(name, i, block) for name, text in DOCS.items() if name != "python.md"
          for i, block in enumerate(_blocks("python", text))]


@pytest.fixture
def own_registry():
    """Policies an example registers are gone after it."""
    before = dict(policies.REGISTRY)
    yield
    for name in set(policies.REGISTRY) - set(before):
        del policies.REGISTRY[name]


@pytest.mark.parametrize("name,i,code", PYTHON, ids=[f"{n}:{i + 1}" for n, i, _ in PYTHON])
def test_docs_python_example_runs(name, i, code, tmp_path, monkeypatch, own_registry):
    """Each Python block runs as a script (``__name__ == "__main__"``, runpy) in a
    directory of its own; what it computes or prints is what its page says."""
    link_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    script = tmp_path / f"{Path(name).stem}-{i + 1}.py"
    script.write_text(code)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # __main__ is the script while it runs
        scope = runpy.run_path(str(script), run_name="__main__")
    if name == "adding-a-policy.md":
        lines = printed.getvalue().splitlines()
        assert len(lines) == 2 and all(x.startswith("smallest-first: contract kept") for x in
                                       lines), lines
    else:
        pytest.fail(f"docs/{name}: no check for what its Python example does")


def test_policy_example_is_the_tested_file():
    """The policy shown is examples/smallest_first.py after its docstring, as
    tests/test_examples.py runs it."""
    (code,) = _blocks("python", DOCS["adding-a-policy.md"])
    source = (ROOT / "examples" / "smallest_first.py").read_text(encoding="utf-8")
    docstring_end = ast.parse(source).body[0].end_lineno
    assert code.strip() == "\n".join(source.splitlines()[docstring_end:]).strip()


def test_links_between_pages_resolve():
    """Every relative link of the README and docs/ names a file that exists, and every
    page is listed in docs/index.md."""
    bad = []
    for name, text in TEXTS.items():
        base = (ROOT / name).parent
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            if not (base / target).exists():
                bad.append((name, target))
    assert not bad, bad
    listed = set(re.findall(r"\]\(([\w-]+\.md)\)", DOCS["index.md"]))
    assert listed == set(DOCS) - {"index.md"}
