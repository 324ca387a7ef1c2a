#!/usr/bin/env python
r"""Find import cycles between the modules, and between the subpackages, of prefbo.

The graph is built from the source with :mod:`ast` (nothing is imported):

- Nodes are the modules of the package (``prefbo/data/pairwise.py`` is
  ``prefbo.data.pairwise``, ``prefbo/data/__init__.py`` is ``prefbo.data``).
- An edge ``a -> b`` is a module-level import in ``a`` of ``b``: ``import
  prefbo.x.y``, ``from prefbo.x import y`` (the submodule ``prefbo.x.y`` when
  there is one, else the module or package ``prefbo.x``) and the relative
  forms ``from .y import z`` / ``from . import y``. The parent packages an
  import initialises first are not edges: every module would otherwise cycle
  through its own package's ``__init__``, which is harmless; a cycle through
  another package's ``__init__`` shows in the package graph.
- Module level is everything executed on import: the module body, class
  bodies and the branches of ``if``/``try``/``with``, but not function bodies
  and not ``if TYPE_CHECKING:`` blocks. An import of a prefbo module inside a
  function is reported as a warning (an error with
  ``--strict-function-imports``): it is usually a cycle dodged, not removed.

The package graph joins modules into units: ``prefbo.<name>`` for each
subpackage or top-level module (``prefbo.data``, ``prefbo.exceptions``), with
an edge ``prefbo.a -> prefbo.b`` when any module of ``a`` imports any module
of ``b``. ``prefbo/__init__.py``, the top that re-exports everything, is left
out of the package graph.

For each strongly connected component the shortest cycle through each of its
nodes is printed (not every elementary cycle: there can be exponentially
many), shortest first; each package edge of a cycle is shown with
one module import that makes it (``-v``: all of them). Exit status 1 when a
cycle (or, with ``--strict-function-imports``, a function-level import) is
found.

Usage::

    python tools/check_imports.py [--root DIR] [--package prefbo]
        [--strict-function-imports] [-v]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    r"""One import of a package module: where it is and what it imports."""

    source: str  # the importing module
    target: str  # the imported module
    path: Path
    line: int
    function: str | None  # the enclosing function, None at module level


def module_name(path: Path, root: Path) -> str:
    r"""The dotted name of the module at ``path`` (relative to ``root``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def find_modules(root: Path, package: str) -> dict[str, Path]:
    r"""Every module of ``package`` under ``root``, by dotted name."""
    top = root / package
    if not (top / "__init__.py").is_file():
        raise SystemExit(f"error: {top} is not a package (no __init__.py)")
    return {
        module_name(path, root): path
        for path in sorted(top.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _walk(
    nodes: Iterable[ast.AST], function: str | None, scope: str = ""
) -> Iterator[tuple[ast.Import | ast.ImportFrom, str | None]]:
    r"""The imports in ``nodes`` with their enclosing function (None: module level).

    ``scope`` is the dotted path of enclosing classes and functions, so that a
    method is reported as ``Class.method``.
    """
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, function
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{scope}{node.name}"
            yield from _walk(node.body, name, f"{name}.")
        elif isinstance(node, ast.ClassDef):  # a class body runs on import
            yield from _walk(node.body, function, f"{scope}{node.name}.")
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _walk(node.orelse, function, scope)  # the body never runs
        else:  # if / for / while / with / try / match: every branch may run
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    yield from _walk(children, function, scope)


def _resolve_base(node: ast.ImportFrom, source: str, is_package: bool) -> str:
    r"""The absolute module a (possibly relative) ``from ... import`` names."""
    if node.level == 0:
        return node.module or ""
    parts = source.split(".")
    if not is_package:
        parts = parts[:-1]  # a module's relative imports start from its package
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _deepest(name: str, modules: dict[str, Path]) -> str | None:
    r"""The longest prefix of the dotted ``name`` that is a known module."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        candidate = ".".join(parts[:k])
        if candidate in modules:
            return candidate
    return None


def find_imports(modules: dict[str, Path]) -> list[Import]:
    r"""Every import between the modules, at module level or in a function."""
    found = []
    for source, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node, function in _walk(tree.body, None):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve_base(node, source, is_package)
                for alias in node.names:
                    sub = f"{base}.{alias.name}" if base else alias.name
                    targets.append(sub if sub in modules else base)
            for name in targets:
                target = _deepest(name, modules)
                imp = Import(source, target or "", path, node.lineno, function)
                if target is not None and target != source and imp not in found:
                    found.append(imp)
    return found


def unit_of(module: str, package: str) -> str | None:
    r"""``package.<first part>``, the unit of the package graph (None for the top)."""
    parts = module.split(".")
    return None if len(parts) < 2 else f"{package}.{parts[1]}"


def _sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    r"""Strongly connected components (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def _shortest_cycle_through(
    start: str, graph: dict[str, set[str]], allowed: set[str]
) -> list[str] | None:
    r"""The shortest cycle ``start -> ... -> start`` inside ``allowed`` (BFS)."""
    parent: dict[str, str] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node] & allowed):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if child not in seen:
                seen.add(child)
                parent[child] = node
                queue.append(child)
    return None


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    r"""Shortest cycles through each node of each cycle, shortest first.

    Args:
        graph: Edges ``node -> set of nodes``; every node is a key.

    Returns:
        Cycles as node lists ``[a, b, ..., a]``, each once (rotated to start
        at its smallest node), sorted by length then name.
    """
    cycles: set[tuple[str, ...]] = set()
    for component in _sccs(graph):
        allowed = set(component)
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        for node in component:
            cycle = _shortest_cycle_through(node, graph, allowed)
            if cycle is not None:
                ring = cycle[:-1]
                k = ring.index(min(ring))
                ring = ring[k:] + ring[:k]
                cycles.add((*ring, ring[0]))
    return [list(c) for c in sorted(cycles, key=lambda c: (len(c), c))]


def build_graphs(
    imports: list[Import], modules: Iterable[str], package: str
) -> tuple[
    dict[str, set[str]], dict[str, set[str]], dict[tuple[str, str], list[Import]]
]:
    r"""The module graph, the package graph and the imports behind each package edge."""
    module_graph: dict[str, set[str]] = {m: set() for m in modules}
    package_graph: dict[str, set[str]] = {}
    witness: dict[tuple[str, str], list[Import]] = {}
    for m in module_graph:
        unit = unit_of(m, package)
        if unit is not None:
            package_graph.setdefault(unit, set())
    for imp in imports:
        if imp.function is not None:
            continue
        module_graph[imp.source].add(imp.target)
        a, b = unit_of(imp.source, package), unit_of(imp.target, package)
        if a is not None and b is not None and a != b:
            package_graph[a].add(b)
            witness.setdefault((a, b), []).append(imp)
    return module_graph, package_graph, witness


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Report import cycles between modules and between subpackages."
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parents[1],
        help="the repository root holding the package (default: this repository)",
    )
    parser.add_argument("--package", default="prefbo", help="default: prefbo")
    parser.add_argument(
        "--strict-function-imports",
        action="store_true",
        help="fail on imports of package modules inside functions (else warn)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every module import behind each package edge of a cycle",
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    modules = find_modules(root, args.package)
    imports = find_imports(modules)
    module_graph, package_graph, witness = build_graphs(imports, modules, args.package)

    def report(label: str, cycles: list, explain: bool) -> bool:
        if cycles:
            print(f"{label} import cycles ({len(cycles)}):")
        for cycle in cycles:
            print("  " + " -> ".join(cycle))
            for a, b in zip(cycle[:-1], cycle[1:], strict=True) if explain else ():
                imps = witness[a, b]
                shown = imps if args.verbose else imps[:1]
                for imp in shown:
                    where = imp.path.relative_to(root)
                    print(f"      {a} -> {b}: {where}:{imp.line} imports {imp.target}")
                if len(imps) > len(shown):
                    print(
                        f"      ... and {len(imps) - len(shown)} more (-v lists them)"
                    )
        return bool(cycles)

    module_cycles = find_cycles(module_graph)
    package_cycles = find_cycles(package_graph)
    failed = report("module", module_cycles, explain=False)
    failed = report("package", package_cycles, explain=True) or failed

    in_functions = [imp for imp in imports if imp.function is not None]
    if in_functions:
        kind = "errors" if args.strict_function_imports else "warnings"
        print(f"imports of {args.package} modules inside functions ({kind}):")
        for imp in in_functions:
            where = imp.path.relative_to(root)
            print(f"  {where}:{imp.line} in {imp.function}(): {imp.target}")
        failed = failed or args.strict_function_imports

    n_edges = sum(len(v) for v in module_graph.values())
    print(
        f"check_imports: {len(modules)} modules, {n_edges} module-level imports, "
        f"{len(module_cycles)} module cycles, {len(package_cycles)} package cycles, "
        f"{len(in_functions)} function-level imports"
        + (" -- FAILED" if failed else " -- ok")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
