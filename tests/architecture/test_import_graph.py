"""The package's import graph, read from the source with ``ast`` (every import, also those
inside functions): vgpu, the harness (loadgen/) and the benchmarks have no import cycle,
vgpu's packages (``vgpu.bench``, ``vgpu.results``, ``vgpu.site``...: each folder or
top-level module under vgpu/) import each other in one direction only, the harness never
imports vgpu, vgpu reaches the harness only through its contract, only
the CLI layer imports the CLI, the simulator lab (vgpu.sim) is reached only through
the Site's seam, and the layers of vgpu.results import only downward."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("vgpu", "loadgen", "benchmarks")
# Folders of scripts, run as ``python benchmarks/x.py``: a bare ``import y`` there is the
# sibling benchmarks/y.py.
SCRIPT_FOLDERS = {"benchmarks"}
HARNESS_API = {"loadgen", "loadgen.contract"}
CLI_ENTRY_POINTS = {"vgpu.__main__"}  # `python -m vgpu` runs the CLI
# The Site factory plugs the simulator lab in (vgpu.site.SimulatedLab); the sim commands
# start and stop it. Nothing else knows the simulator is there.
SIMULATOR_SEAM = {"vgpu.site", "vgpu.cli.sim"}
# Packages whose sub-packages import each other in one direction only (no circle of
# packages, even where the modules themselves form none).
LAYERED = ("vgpu", "vgpu.vsphere")
# vgpu.vsphere's layers, from the ground up: a module imports only its own sub-package and
# those on lower floors; the two on the ground floor know nothing of each other.
VSPHERE_FLOORS = (("connect", "desired"), ("read",), ("plan",), ("preflight",), ("apply",),
                  ("render",), ("commands",))

Graph = dict[str, set[str]]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path
            for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imported(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield submodule if submodule in known else source


@functools.cache
def import_graph() -> Graph:
    """Module -> the modules of ``PACKAGES`` it imports, read once per test run.
    ``from pkg import name`` imports ``pkg.name`` when that is a module, else ``pkg``
    itself (its ``__init__``)."""
    modules = _modules()
    known = set(modules)
    graph: Graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        targets = {_sibling_script(target, name, known)
                   for target in _imported(tree, name, is_package, known)}
        graph[name] = {target for target in targets
                       if target.split(".")[0] in PACKAGES and target != name}
    return graph


def _sibling_script(target: str, module: str, known: set[str]) -> str:
    folder = module.split(".")[0]
    if folder in SCRIPT_FOLDERS and f"{folder}.{target}" in known:
        return f"{folder}.{target}"
    return target


def find_cycle(graph: Graph) -> list[str] | None:
    """One cycle among the modules of ``graph`` (edges to unknown names are ignored)."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in graph:
                continue
            if state.get(target) == "open":
                return [*stack[stack.index(target):], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        stack.pop()
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def package_of(module: str, root: str) -> str:
    """``vgpu.targets.connect`` -> ``vgpu.targets``; ``vgpu.site`` -> itself; ``vgpu`` -> itself."""
    parts = module.split(".")
    return ".".join(parts[:len(root.split(".")) + 1])


def package_graph(graph: Graph, root: str) -> tuple[Graph, dict[tuple[str, str], list[str]]]:
    """Package -> the packages under ``root`` it imports, and for each such pair the module
    imports that make it (``a.x -> b.y``), to name them when a circle is found."""
    packages: Graph = {}
    because: dict[tuple[str, str], list[str]] = {}
    for name, targets in graph.items():
        if not _in(name, root):
            continue
        source = package_of(name, root)
        packages.setdefault(source, set())
        for target in sorted(t for t in targets if _in(t, root)):
            imported = package_of(target, root)
            if imported != source:
                packages[source].add(imported)
                because.setdefault((source, imported), []).append(f"{name} -> {target}")
    return packages, because


@pytest.mark.parametrize("root", LAYERED)
def test_packages_import_each_other_in_one_direction(root: str) -> None:
    packages, because = package_graph(import_graph(), root)
    assert len(packages) > 6, f"too few packages found under {root}/"
    cycle = find_cycle(packages)
    steps = [] if cycle is None else [
        f"{a} -> {b} ({'; '.join(because[a, b][:3])})" for a, b in pairwise(cycle)]
    assert cycle is None, "a circle of packages: " + ", ".join(steps)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package: str) -> None:
    graph = import_graph()
    inside = {name: {t for t in targets if _in(t, package)}
              for name, targets in graph.items() if _in(name, package)}
    assert inside, f"no module found under {package}/"
    cycle = find_cycle(inside)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_harness_never_imports_vgpu() -> None:
    offenders = {name: sorted(t for t in targets if _in(t, "vgpu"))
                 for name, targets in import_graph().items() if _in(name, "loadgen")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_vgpu_reaches_the_harness_only_through_its_contract() -> None:
    offenders = {name: sorted(t for t in targets if _in(t, "loadgen") and t not in HARNESS_API)
                 for name, targets in import_graph().items() if _in(name, "vgpu")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_the_cli_layer_imports_the_cli() -> None:
    offenders = {name: sorted(t for t in targets if _in(t, "vgpu.cli"))
                 for name, targets in import_graph().items()
                 if _in(name, "vgpu") and not _in(name, "vgpu.cli")
                 and name not in CLI_ENTRY_POINTS}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_the_site_factory_and_the_sim_commands_import_the_simulator() -> None:
    offenders = {name: sorted(t for t in targets if _in(t, "vgpu.sim"))
                 for name, targets in import_graph().items()
                 if _in(name, "vgpu") and not _in(name, "vgpu.sim")
                 and name not in SIMULATOR_SEAM}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_graph_sees_function_level_imports() -> None:
    graph = import_graph()
    assert "vgpu.cli.bench" in graph["vgpu.cli"]  # imported inside _register()
    assert "vgpu.sim.follow" in graph["vgpu.site"]  # imported inside open_site()
    assert "loadgen.llm.run" in graph["loadgen.runner"]  # imported inside run()
    assert "loadgen.runner" in graph["benchmarks.harness_overhead"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_a_circle_of_packages_is_seen_though_its_modules_form_none() -> None:
    modules = {"vgpu.a.one": {"vgpu.b.two"}, "vgpu.b.two": set(),
               "vgpu.b.three": {"vgpu.a.four"}, "vgpu.a.four": set(), "vgpu.c": {"vgpu.a.one"}}
    assert find_cycle(modules) is None
    packages, because = package_graph(modules, "vgpu")
    assert packages == {"vgpu.a": {"vgpu.b"}, "vgpu.b": {"vgpu.a"}, "vgpu.c": {"vgpu.a"}}
    assert find_cycle(packages) == ["vgpu.a", "vgpu.b", "vgpu.a"]
    assert because["vgpu.b", "vgpu.a"] == ["vgpu.b.three -> vgpu.a.four"]


def test_bench_and_train_meet_only_in_the_targets_layer() -> None:
    """Benchmarks and training both run on targets (vgpu.targets: where a scenario runs,
    its hosts, their devices and clocks); neither imports the other."""
    graph = import_graph()
    crossing = {name: sorted(t for t in targets if _in(t, other))
                for one, other in (("vgpu.bench", "vgpu.train"), ("vgpu.train", "vgpu.bench"))
                for name, targets in graph.items() if _in(name, one)}
    assert {k: v for k, v in crossing.items() if v} == {}
    assert "vgpu.targets.connect" in graph["vgpu.train.targets"]
    assert not any(_in(t, "vgpu.bench") or _in(t, "vgpu.train")
                   for name, targets in graph.items() if _in(name, "vgpu.targets")
                   for t in targets)


def _raw_imports(path: Path) -> set[str]:
    """Every module a file names in an import (top-level package of outside code too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_vsphere_layers_import_only_downward() -> None:
    floor = {f"vgpu.vsphere.{name}": level
             for level, names in enumerate(VSPHERE_FLOORS) for name in names}
    graph = import_graph()
    modules = [name for name in graph if _in(name, "vgpu.vsphere") and name != "vgpu.vsphere"]
    assert {package_of(name, "vgpu.vsphere") for name in modules} == set(floor)
    climbs = {}
    for name in modules:
        source = package_of(name, "vgpu.vsphere")
        for target in graph[name]:
            imported = package_of(target, "vgpu.vsphere")
            if _in(target, "vgpu.vsphere") and imported != source \
                    and floor.get(imported, -1) >= floor[source]:
                climbs.setdefault(name, []).append(target)
    assert climbs == {}


def test_desired_state_knows_no_vcenter_and_vsphere_no_command_line() -> None:
    """vgpu.vsphere.desired is pure: no pyVmomi, no login; nothing under vgpu.vsphere
    imports typer (the CLI turns what the commands raise into exits)."""
    pyvmomi = {str(path.relative_to(ROOT)): sorted(found)
               for path in sorted((ROOT / "vgpu/vsphere/desired").rglob("*.py"))
               if (found := {n for n in _raw_imports(path) if n.split(".")[0] in
                             {"pyVmomi", "pyVim"}})}
    typer = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "vgpu/vsphere").rglob("*.py"))
             if any(n.split(".")[0] == "typer" for n in _raw_imports(path))]
    assert pyvmomi == {}
    assert typer == []


# The layers of vgpu.results, lowest first: each imports only those before it.
RESULTS_LAYERS = ("stats", "store", "verdict", "views", "export")


def climbs(graph: Graph, root: str, layers: tuple[str, ...]) -> dict[str, list[str]]:
    """Per module under ``root``, its imports of a higher layer of ``root`` than its own
    (or of a module of ``root`` in no layer). A module of ``root`` outside every layer is
    listed against itself: each must have its place."""
    rank = {f"{root}.{layer}": i for i, layer in enumerate(layers)}
    found: dict[str, list[str]] = {}
    for name, targets in graph.items():
        if not _in(name, root) or name == root:
            continue
        own = rank.get(package_of(name, root))
        if own is None:
            found[name] = [name]
            continue
        up = sorted(t for t in targets if _in(t, root)
                    and rank.get(package_of(t, root), len(layers)) > own)
        if up:
            found[name] = up
    return found


def test_results_layers_import_only_downward() -> None:
    """stats < store < verdict < views < export: the store never judges, the verdict
    engine never formats, nothing below exports."""
    graph = import_graph()
    assert climbs(graph, "vgpu.results", RESULTS_LAYERS) == {}
    assert graph["vgpu.results"] == set()  # the package's face hands on no names
    assert "vgpu.results.stats.noise" in graph["vgpu.results.store.result_store"]
    assert "vgpu.results.views.telemetry_view" in graph["vgpu.results.export.runs"]


def test_a_climb_between_layers_is_seen() -> None:
    modules = {"r.low.a": {"r.high.b"}, "r.high.b": {"r.low.a"}, "r.stray": set(),
               "r.high.c": {"r.low.a", "elsewhere"}}
    assert climbs(modules, "r", ("low", "high")) == {"r.low.a": ["r.high.b"],
                                                     "r.stray": ["r.stray"]}
