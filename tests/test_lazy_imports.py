"""What ``olsctl run`` loads: the other commands' modules, the Slurm converter and the
workers' multiprocessing are imported only when used (start-up time); every handler
``olsctl.cli`` names exists, and every name ``olsctl.slurm`` stands behind stays
importable from it.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tempfile

import pytest

import olsctl.cli
import olsctl.slurm
from conftest import REPO_ROOT

#: modules a quiet run on an SWF log never needs
NOT_NEEDED = ("olsctl.commands.bench", "olsctl.commands.logs", "olsctl.commands.results",
              "olsctl.commands.study", "olsctl.slurm.converter", "olsctl.slurm.jobs",
              "multiprocessing", "rich.table")


def test_a_quiet_run_loads_only_what_it_uses():
    code = ("import sys; from olsctl.cli import main; "
            "code = main(['run', '--trace', 'KTH-SP2', '--out', sys.argv[1], '--quiet']); "
            f"print(code, sorted(set({NOT_NEEDED!r}) & set(sys.modules)))")
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", code, tmp], capture_output=True,
                             text=True, cwd=REPO_ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "0 []"


@pytest.mark.parametrize("name", olsctl.slurm.__all__)
def test_every_slurm_name_is_its_parts(name):
    part = importlib.import_module(f"olsctl.slurm.{olsctl.slurm._PART_OF[name]}")
    assert getattr(olsctl.slurm, name) is getattr(part, name)


@pytest.mark.parametrize("command", sorted(olsctl.cli.HANDLERS))
def test_every_command_names_a_handler_of_its_module(command):
    module, name = olsctl.cli.HANDLERS[command]
    assert callable(getattr(importlib.import_module(f"olsctl.commands.{module}"), name))
    assert olsctl.cli.COMMANDS[command].__name__ == name


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(olsctl.slurm, "no_such_name")
    assert set(olsctl.slurm._PART_OF) == set(olsctl.slurm.__all__)
