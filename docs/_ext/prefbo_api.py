r"""The API reference, generated from the package at build time.

One page per public subpackage of ``prefbo`` (and one for ``prefbo.cli`` and
``prefbo.exceptions``). A page documents the names in the subpackage's
``__all__`` under the subpackage's own path (``prefbo.models.SkewGP``: the
path users import), then each of its modules: the module's docstring and the
public names it defines that the subpackage does not export. So every public
name has exactly one entry, and a new module or name appears without editing
the docs.

A reference to a name by another path of the same object (the defining
module's ``prefbo.models.skew.SkewGP``, the top-level ``prefbo.SkewGP``, or a
bare ``SkewGP`` in a signature, a constant imported by another module under
its own name) is resolved to that entry by
:func:`resolve_alias`, through the ``missing-reference`` event; a reference
that names no documented object stays unresolved, and the build (``nitpicky``
with warnings as errors) fails on it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

PACKAGE = "prefbo"
#: pages of single modules at the top level (everything else is a subpackage)
TOP_MODULES = ("prefbo.cli", "prefbo.exceptions")
OUT_DIR = "api"


def _public(name: str) -> bool:
    return not name.startswith("_")


def subpackages() -> list[str]:
    r"""The public subpackages of ``prefbo``, nested ones included, sorted."""
    root = importlib.import_module(PACKAGE)
    found = []
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{PACKAGE}."):
        parts = info.name.split(".")
        if info.ispkg and all(_public(p) for p in parts):
            found.append(info.name)
    return sorted(found)


def modules_of(package: str) -> list[str]:
    r"""The public modules directly inside ``package`` (not subpackages)."""
    pkg = importlib.import_module(package)
    return sorted(
        f"{package}.{info.name}"
        for info in pkgutil.iter_modules(pkg.__path__)
        if not info.ispkg and _public(info.name)
    )


def exported(module: ModuleType) -> list[str]:
    r"""A module's ``__all__`` but ``__version__`` (nothing where it has no
    ``__all__``)."""
    names = getattr(module, "__all__", None)
    if names is None:
        return []
    return [n for n in names if n != "__version__"]


def defined_here(module: ModuleType) -> list[str]:
    r"""The public classes and functions a module defines, and the constants
    (type aliases included) its own code assigns at its top level."""
    assigned: set[str] = set()
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        tree = ast.Module(body=[], type_ignores=[])
    for statement in tree.body:
        targets = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign):
            targets = [statement.target]
        for target in targets:
            for node in ast.walk(target):  # a, b = ... binds both
                if isinstance(node, ast.Name):
                    assigned.add(node.id)
    names = []
    for name, obj in vars(module).items():
        if not _public(name) or inspect.ismodule(obj):
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            if obj.__module__ == module.__name__ and obj.__name__ == name:
                names.append(name)
            elif name in assigned:  # an alias of a class: a constant here
                names.append(name)
        elif name in assigned:
            names.append(name)
    return names


def _title(text: str, mark: str = "=") -> str:
    return f"{text}\n{mark * len(text)}\n"


def directive(path: str, obj: Any) -> list[str]:
    r"""The autodoc directive that documents ``obj`` under ``path``."""
    if inspect.isclass(obj):
        kind = "autoexception" if issubclass(obj, BaseException) else "autoclass"
    elif callable(obj):
        kind = "autofunction"
    else:
        kind = "autodata"
    options = ["   :members:", "   :undoc-members:"] if inspect.isclass(obj) else []
    return [f".. {kind}:: {path}", *options, ""]


def package_page(package: str) -> str:
    r"""The rst source of one subpackage's page."""
    reg = registry()
    pkg = importlib.import_module(package)
    names = exported(pkg)
    own = [n for n in names if f"{package}.{n}" in reg.documented]
    elsewhere = [n for n in names if n not in own]
    lines = [_title(f"``{package}``"), f".. automodule:: {package}", ""]
    for n in own:
        lines += directive(f"{package}.{n}", getattr(pkg, n))
    if elsewhere:
        lines.append("Also exported here, documented where they live:")
        lines.append("")
        for n in elsewhere:
            target = reg.aliases.get(f"{package}.{n}") or reg.path_of(getattr(pkg, n))
            lines.append(f"- :py:obj:`{n} <{target}>`")
        lines.append("")
    children = [p for p in subpackages() if p.rpartition(".")[0] == package]
    if children:
        lines += [".. toctree::", "   :maxdepth: 1", ""]
        lines += [f"   {c}" for c in children]
        lines.append("")
    for name in modules_of(package):
        lines += module_section(name, "-")
    return "\n".join(lines)


def module_section(name: str, mark: str) -> list[str]:
    r"""A module's docstring and the names documented under its path."""
    reg = registry()
    module = importlib.import_module(name)
    lines = [_title(f"``{name}``", mark), f".. automodule:: {name}", ""]
    for n in defined_here(module):
        if f"{name}.{n}" in reg.documented:
            lines += directive(f"{name}.{n}", getattr(module, n))
    return lines


def module_page(name: str) -> str:
    r"""The rst source of a top-level module's page."""
    return "\n".join(module_section(name, "="))


def index_page(pages: list[str]) -> str:
    r"""The API reference's front page: the top-level names, then the pages."""
    root = importlib.import_module(PACKAGE)
    lines = [
        _title("API reference"),
        "Every public name of prefbo, by subpackage. A subpackage's page first",
        "documents what it exports (import it from there, e.g.",
        "``from prefbo.models import SkewGP``), then each of its modules with",
        "the names that module alone defines.",
        "",
        "The top-level package ``prefbo`` re-exports the most used names:",
        "",
    ]
    for name in exported(root):
        target = registry().aliases.get(f"{PACKAGE}.{name}", f"{PACKAGE}.{name}")
        lines.append(f"- :py:obj:`prefbo.{name} <{target}>`")
    lines += ["", ".. toctree::", "   :maxdepth: 1", ""]
    lines += [f"   {p}" for p in pages]
    lines.append("")
    return "\n".join(lines)


class Registry:
    r"""Where the API reference documents each object, and the other paths
    that name it.

    Attributes:
        documented: Every documented top-level path (a class, function or
            constant of a module or package).
        aliases: Another path of a documented object (its defining module's,
            or the top-level ``prefbo.NAME``) -> its documented path.
        classes: ``id(class)`` -> its documented path (to look a member up
            along a class's bases).
    """

    def __init__(self) -> None:
        self.documented: set[str] = set()
        self.aliases: dict[str, str] = {}
        self.classes: dict[int, str] = {}
        # shallower packages first, so the path users import wins; among
        # them the package that defines the object before one that re-exports
        packages = sorted(subpackages(), key=lambda p: (p.count("."), p))
        for home in (True, False):
            for package in packages:
                pkg = importlib.import_module(package)
                for name in exported(pkg):
                    obj = getattr(pkg, name)
                    defining = getattr(obj, "__module__", None)
                    at_home = not isinstance(defining, str) or (
                        defining == package or defining.startswith(f"{package}.")
                    )
                    if at_home == home:
                        self._add(f"{package}.{name}", obj, package)
        for package in subpackages():
            for module_name in modules_of(package):
                self._add_module(module_name)
        for module_name in TOP_MODULES:
            self._add_module(module_name)
        root = importlib.import_module(PACKAGE)
        for name in exported(root):
            target = self.path_of(getattr(root, name))
            if target is not None:
                self.aliases[f"{PACKAGE}.{name}"] = target
        self.by_short_name: dict[str, list[str]] = {}
        for path in self.documented:
            self.by_short_name.setdefault(path.rpartition(".")[2], []).append(path)
        for path in self.classes.values():
            cls = _import(path)
            for member in vars(cls) if cls is not None else ():
                if _public(member):
                    self.by_short_name.setdefault(member, []).append(f"{path}.{member}")

    def _add_module(self, module_name: str) -> None:
        module = importlib.import_module(module_name)
        for name in defined_here(module):
            path = f"{module_name}.{name}"
            if path not in self.aliases:
                self._add(path, getattr(module, name), module_name)

    def _add(self, path: str, obj: Any, package: str) -> None:
        if path in self.documented or path in self.aliases:
            return
        existing = self.path_of(obj)
        if existing is not None:
            self.aliases[path] = existing
            return
        self.documented.add(path)
        if inspect.isclass(obj):
            self.classes[id(obj)] = path
        defining = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if isinstance(defining, str) and isinstance(qualname, str):
            if f"{defining}.{qualname}" != path:
                self.aliases[f"{defining}.{qualname}"] = path
        else:  # a constant: the package's module that binds it
            name = path.rpartition(".")[2]
            pkg = importlib.import_module(package)
            for module_name in modules_of(package) if hasattr(pkg, "__path__") else []:
                module = importlib.import_module(module_name)
                if name in vars(module) and vars(module)[name] is obj:
                    self.aliases[f"{module_name}.{name}"] = path

    def path_of(self, obj: Any) -> str | None:
        r"""The documented path of a class or function, if it has one."""
        if obj is None:
            return None
        if inspect.isclass(obj):
            return self.classes.get(id(obj))
        defining = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if isinstance(defining, str) and isinstance(qualname, str):
            full = f"{defining}.{qualname}"
            if full in self.documented:
                return full
            return self.aliases.get(full)
        return None

    def candidates(self, target: str, module: str | None, cls: str | None) -> list[str]:
        r"""Documented paths that ``target`` (a reference's text, seen from
        ``module`` and class ``cls``) may name, most likely first."""
        found = []
        if module and "." not in target:
            found += self._expand(f"{module}.{target}")
        found += self._expand(target)
        if not target.startswith(f"{PACKAGE}."):
            first, _, rest = target.partition(".")
            paths = self.by_short_name.get(first, [])
            if len(paths) == 1:
                found += self._expand(f"{paths[0]}.{rest}" if rest else paths[0])
        owner = _import(f"{module}.{cls}") if module and cls else None
        home = getattr(owner, "__module__", None)
        if isinstance(home, str) and home != module and "." not in target:
            found += self._expand(f"{home}.{target}")
        if module and cls and "." not in target:
            for base in getattr(owner, "__mro__", ()):
                path = self.classes.get(id(base))
                if path is not None:
                    found.append(f"{path}.{target}")
        return list(dict.fromkeys(found))

    def _expand(self, target: str) -> list[str]:
        r"""``target`` with a known alias replaced by the documented path, and
        a member of a class also looked up along the class's bases."""
        parts = target.split(".")
        found = []
        for split in range(len(parts), 0, -1):
            prefix = ".".join(parts[:split])
            if prefix in self.aliases:
                found.append(".".join([self.aliases[prefix], *parts[split:]]))
                break
            if prefix in self.documented:
                found.append(target)
                break
        else:  # a path the reference reaches by import (a re-export)
            obj = _import(target)
            path = self.path_of(obj)
            if path is None and obj is not None and target.startswith(PACKAGE):
                # a constant imported under its own name: the one documented
                name = target.rpartition(".")[2]
                paths = self.by_short_name.get(name, [])
                same = [p for p in paths if _import(p) is obj]
                path = same[0] if len(same) == 1 else None
            if path is not None:
                found.append(path)
        for path in list(found):
            owner_path, _, member = path.rpartition(".")
            owner = _import(owner_path) if owner_path.startswith(PACKAGE) else None
            for base in getattr(owner, "__mro__", ())[1:]:
                base_path = self.classes.get(id(base))
                if base_path is not None:
                    found.append(f"{base_path}.{member}")
        return found


def _import(path: str) -> Any:
    r"""The object a dotted path names (a module, then attributes), or None."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except (ImportError, ValueError, TypeError):  # not a module's name
            continue
        try:
            for attr in parts[split:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


_REGISTRY: Registry | None = None


def registry() -> Registry:
    r"""The registry, built once per process."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = Registry()
    return _REGISTRY


def resolve_alias(
    app: Sphinx, env: BuildEnvironment, node: Any, contnode: nodes.Element
) -> nodes.Element | None:
    r"""Resolve a Python reference that names a documented object by another
    path (see the module's docstring)."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    domain = env.get_domain("py")
    for new_target in registry().candidates(
        target, node.get("py:module"), node.get("py:class")
    ):
        if new_target == target:
            continue
        for reftype in dict.fromkeys([node["reftype"], "obj"]):
            new_node = node.deepcopy()
            new_node["reftarget"] = new_target
            new_node["refspecific"] = False
            resolved = domain.resolve_xref(
                env,
                node["refdoc"],
                app.builder,
                reftype,
                new_target,
                new_node,
                contnode,
            )
            if resolved is not None:
                return resolved
    return None


_DATA_DOCSTRINGS: dict[str, list[str]] = {}


def before_napoleon(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    r"""Keep a constant's or attribute's docstring away from napoleon (which
    would read ``text: more`` as ``type: description``), and drop the
    docstring of its value's type (a ``dict``'s) that autodoc shows for a
    constant with no comment of its own."""
    if what not in ("data", "attribute"):
        return
    type_doc = inspect.getdoc(type(obj))
    if type_doc and "\n".join(lines).strip() == type_doc.strip():
        lines.clear()
    _DATA_DOCSTRINGS[name] = list(lines)


def after_napoleon(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    r"""Put back what :func:`before_napoleon` kept."""
    if what in ("data", "attribute") and name in _DATA_DOCSTRINGS:
        lines[:] = _DATA_DOCSTRINGS.pop(name)


def write_pages(app: Sphinx) -> None:
    r"""Write the API pages into ``<srcdir>/api`` (only files whose text
    changed, so an unchanged page is not rebuilt)."""
    out = Path(app.srcdir) / OUT_DIR
    out.mkdir(exist_ok=True)
    pages: dict[str, str] = {}
    for package in subpackages():
        pages[package] = package_page(package)
    for name in TOP_MODULES:
        pages[name] = module_page(name)
    top = [p for p in pages if p.count(".") == 1]
    pages["index"] = index_page(top)
    for stale in out.glob("*.rst"):
        if stale.stem not in pages:
            stale.unlink()
    for name, text in pages.items():
        path = out / f"{name}.rst"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", write_pages)
    app.connect("missing-reference", resolve_alias)
    app.connect("autodoc-process-docstring", before_napoleon, priority=100)
    app.connect("autodoc-process-docstring", after_napoleon, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
