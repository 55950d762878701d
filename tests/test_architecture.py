"""The layout rules of docs/architecture.md, checked on the source itself with `ast`.

- Packages import one way: `store` <- `connectors` <- `toolsets` <- `gateway`.
- No import circle between modules, nor between gateway's subpackages, type-checking-only and
  function-level imports included (a circle in types is a circle in the design).
- gateway's subpackages form layers and import only downwards.
- No source or test file over 400 lines; at most 14 modules at the top of `gateway/`.

The checks are plain functions of an import graph, so the tests at the bottom can show each one
failing on a graph that breaks its rule.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("store", "connectors", "toolsets", "gateway")  # each may import only those before it
MAX_LINES = 400
MAX_TOP_MODULES = 14
# gateway's units, lowest first; a unit imports only from its own or a lower layer. The top-level
# modules not named here (access, outbox, lock, logs, redaction, checkpoints, limits) are shared pieces
# that any unit may use; the circle check still covers them.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"config", "automations", "selection"}),
    frozenset({"approvals", "services", "surfaces", "llm", "accounts"}),
    frozenset({"turns"}),
    frozenset({"app", "setup"}),
    frozenset({"cli", "dashboard"}),
)

Graph = dict[str, set[str]]


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: set[str], root: Path = ROOT) -> set[str]:
    """The project modules `path` imports anywhere in it (top level, functions, TYPE_CHECKING blocks).
    `from pkg import name` counts as importing `pkg.name` when that is a module, else `pkg`."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
    return {m for m in found if m in modules and m != name}


def project_graph() -> Graph:
    paths = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, modules) for p in paths}


def upward_imports(graph: Graph) -> list[str]:
    """Imports of a package that comes later in PACKAGES (e.g. toolsets importing gateway)."""
    rank = {pkg: i for i, pkg in enumerate(PACKAGES)}
    return sorted(f"{a} -> {b}" for a, deps in graph.items() for b in deps
                  if rank[b.split(".")[0]] > rank[a.split(".")[0]])


def find_cycle(graph: Graph) -> list[str] | None:
    """One import circle (as a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep):], dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def gateway_units(graph: Graph) -> Graph:
    """gateway's subpackages and top-level modules as nodes, with an edge where any module of one
    imports a module of another."""
    def unit(module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else "__init__"

    units: Graph = {}
    for a, deps in graph.items():
        if a.split(".")[0] != "gateway":
            continue
        edges = units.setdefault(unit(a), set())
        edges.update(unit(b) for b in deps if b.split(".")[0] == "gateway" and unit(b) != unit(a))
    return units


def layer_violations(units: Graph) -> list[str]:
    layer = {u: i for i, names in enumerate(LAYERS) for u in names}
    return sorted(f"{a} -> {b}" for a, deps in units.items() for b in deps
                  if a in layer and b in layer and layer[b] > layer[a])


def long_files(paths: Iterable[Path], root: Path = ROOT) -> list[str]:
    return sorted(f"{p.relative_to(root)}: {n} lines" for p in paths
                  if (n := len(p.read_text().splitlines())) > MAX_LINES)


# -- the project --------------------------------------------------------------------------------------


def test_packages_import_one_way() -> None:
    assert upward_imports(project_graph()) == []


def test_no_import_circle_between_modules() -> None:
    assert find_cycle(project_graph()) is None


def test_no_import_circle_between_gateway_subpackages() -> None:
    assert find_cycle(gateway_units(project_graph())) is None


def test_gateway_layers_import_downwards() -> None:
    assert layer_violations(gateway_units(project_graph())) == []


def test_every_layer_names_a_real_subpackage() -> None:
    named = set().union(*LAYERS)
    real = {p.stem for p in (ROOT / "gateway").glob("*.py")} | {p.parent.name for p in
                                                               (ROOT / "gateway").glob("*/__init__.py")}
    assert named <= real
    assert {p.parent.name for p in (ROOT / "gateway").glob("*/__init__.py")} <= named


def test_no_file_over_400_lines() -> None:
    paths = [p for d in (*PACKAGES, "tests", "bench") for p in (ROOT / d).rglob("*.py")]
    assert long_files(paths) == []


def test_at_most_14_modules_at_the_top_of_gateway() -> None:
    top = sorted(p.name for p in (ROOT / "gateway").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_MODULES, top


def test_every_gateway_subpackage_says_what_belongs_there() -> None:
    for init in (ROOT / "gateway").glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 80, f"{init.relative_to(ROOT)} needs a docstring saying what it holds"


# -- the checks themselves fail on a graph that breaks their rule -------------------------------------


def test_an_upward_import_is_found() -> None:
    graph = {"store.db": set(), "toolsets.web": {"store.db", "gateway.app"}, "gateway.app": {"toolsets.web"}}
    assert upward_imports(graph) == ["toolsets.web -> gateway.app"]


def test_a_circle_is_found_and_named() -> None:
    graph = {"gateway.app": {"gateway.services.factory"}, "gateway.services.factory": {"gateway.services.subagents"},
             "gateway.services.subagents": {"gateway.app"}}
    assert find_cycle(graph) == ["gateway.app", "gateway.services.factory", "gateway.services.subagents",
                                 "gateway.app"]
    units = gateway_units(graph)
    assert find_cycle(units) == ["app", "services", "app"]
    assert layer_violations(units) == ["services -> app"]


def test_a_type_checking_or_function_level_import_counts(tmp_path: Path) -> None:
    source = tmp_path / "gateway" / "turns" / "probe.py"
    source.parent.mkdir(parents=True)
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gateway.app import Gateway\n"
                      "def f():\n    from ..cli import main\n")
    assert imports_of(source, {"gateway.app", "gateway.cli"}, tmp_path) == {"gateway.app", "gateway.cli"}


def test_a_long_file_is_found(tmp_path: Path) -> None:
    long, short = tmp_path / "long.py", tmp_path / "short.py"
    long.write_text("x = 1\n" * (MAX_LINES + 1))
    short.write_text("x = 1\n" * MAX_LINES)
    assert long_files([long, short], tmp_path) == [f"long.py: {MAX_LINES + 1} lines"]
