"""The shape of the code, held: no import circle among olsctl's modules (module-level,
function-level or type-checking imports alike), no module over 500 lines in olsctl/ or
policies/, and nothing outside policies/ naming a built-in policy's class (the engine and
the controller reach a policy through its registry entry)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO_ROOT

import olsctl.policies as policies

PACKAGES = ((REPO_ROOT / "olsctl", "olsctl"), (REPO_ROOT / "policies", "olsctl.policies"))


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the two packages: dotted name -> (file, is a package)."""
    mods = {}
    for base, pkg in PACKAGES:
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            mods[".".join([pkg, *parts])] = (path, is_pkg)
    return mods


def import_graph() -> dict[str, set[str]]:
    """Which olsctl modules each imports, anywhere in its file (a name imported from a
    package that is a module of it counts as that module)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, (path, is_pkg) in mods.items():
        package = name if is_pkg else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected parts of two or more
    modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    graph = import_graph()
    assert "olsctl.policies.core.jit" in graph["olsctl.policies.easy.forward"]
    assert circles(graph) == []


def test_no_module_over_500_lines():
    long = {str(path.relative_to(REPO_ROOT)): n for path, _ in _modules().values()
            if (n := len(path.read_text().splitlines())) > 500}
    assert long == {}


def test_nothing_outside_the_policies_names_a_policy_class():
    classes = {entry.factory.__name__ for entry in policies.REGISTRY.values()}
    assert {"EasyBackfill", "MultiQueueBackfill", "WindowKnapsack"} <= classes
    named = {}
    for path in (REPO_ROOT / "olsctl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Name, ast.Attribute, ast.alias)):
                word = getattr(node, "id", None) or getattr(node, "attr", None) \
                    or getattr(node, "name", None)
                if word in classes:
                    named.setdefault(str(path.relative_to(REPO_ROOT)), set()).add(word)
    assert named == {}
