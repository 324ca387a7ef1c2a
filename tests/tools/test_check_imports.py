import pytest


@pytest.fixture
def run(check_imports, capsys):
    def run(root, *flags):
        code = check_imports.main(["--root", str(root), *flags])
        return code, capsys.readouterr().out

    return run


ACYCLIC = {
    "prefbo/__init__.py": "from prefbo.a import f\nfrom prefbo.b.y import g\n",
    "prefbo/exceptions.py": "class Oops(Exception):\n    pass\n",
    "prefbo/a/__init__.py": "from prefbo.a.x import f\n",
    "prefbo/a/x.py": "import torch\n\nfrom prefbo import exceptions\n\nf = 1\n",
    "prefbo/b/__init__.py": "",
    "prefbo/b/y.py": "from ..a import x\nfrom .z import h\n\ng = 2\n",
    "prefbo/b/z.py": "import prefbo.a.x\n\nh = 3\n",
}


def test_an_acyclic_tree_passes(write_tree, run):
    code, out = run(write_tree(ACYCLIC))
    assert code == 0, out
    assert "0 module cycles, 0 package cycles" in out and out.endswith("-- ok\n")


def test_the_module_graph_resolves_absolute_relative_and_submodule_imports(
    write_tree, check_imports
):
    root = write_tree(ACYCLIC)
    modules = check_imports.find_modules(root, "prefbo")
    graph, packages, _ = check_imports.build_graphs(
        check_imports.find_imports(modules), modules, "prefbo"
    )
    assert graph["prefbo"] == {"prefbo.a", "prefbo.b.y"}
    assert graph["prefbo.a.x"] == {"prefbo.exceptions"}  # a submodule, not prefbo
    assert graph["prefbo.b.y"] == {"prefbo.a.x", "prefbo.b.z"}
    assert graph["prefbo.b.z"] == {"prefbo.a.x"}
    assert "prefbo" not in packages  # the top is left out of the package graph
    assert packages == {
        "prefbo.a": {"prefbo.exceptions"},
        "prefbo.b": {"prefbo.a"},
        "prefbo.exceptions": set(),
    }


def test_a_module_cycle_is_found(write_tree, run):
    root = write_tree(
        {
            **ACYCLIC,
            "prefbo/a/x.py": "from prefbo.b.z import h\n\nf = 1\n",
        }
    )
    code, out = run(root)
    assert code == 1
    assert "module import cycles (1):\n  prefbo.a.x -> prefbo.b.z -> prefbo.a.x\n" in (
        out
    )
    assert "package import cycles (1):\n  prefbo.a -> prefbo.b -> prefbo.a\n" in out
    assert "prefbo.a -> prefbo.b: prefbo/a/x.py:1 imports prefbo.b.z" in out


def test_a_package_cycle_without_a_module_cycle_is_found(write_tree, run):
    root = write_tree({**ACYCLIC, "prefbo/a/w.py": "from prefbo.b import y\n"})
    code, out = run(root)
    assert code == 1 and "module import cycles" not in out
    assert "package import cycles (1):\n  prefbo.a -> prefbo.b -> prefbo.a\n" in out


def test_importing_names_from_the_own_package_init_is_a_cycle(write_tree, run):
    root = write_tree({**ACYCLIC, "prefbo/a/w.py": "from prefbo.a import x\n"})
    assert run(root)[0] == 0  # x is a submodule: an edge to it alone
    root = write_tree({**ACYCLIC, "prefbo/a/x.py": "from prefbo.a import g\n"})
    code, out = run(root)
    assert code == 1 and "prefbo.a -> prefbo.a.x -> prefbo.a" in out


def test_cycles_are_printed_shortest_first(write_tree, run):
    root = write_tree(
        {
            "prefbo/__init__.py": "",
            "prefbo/p/__init__.py": "",
            "prefbo/p/a.py": "from . import b\n",
            "prefbo/p/b.py": "from . import c\n",
            "prefbo/p/c.py": "from . import a\nfrom . import d\n",
            "prefbo/p/d.py": "from . import c\n",
        }
    )
    code, out = run(root)
    lines = [line.strip() for line in out.splitlines()]
    assert code == 1
    assert lines[:3] == [
        "module import cycles (2):",
        "prefbo.p.c -> prefbo.p.d -> prefbo.p.c",
        "prefbo.p.a -> prefbo.p.b -> prefbo.p.c -> prefbo.p.a",
    ]


def test_imports_in_functions_warn_and_type_checking_imports_are_skipped(
    write_tree, run
):
    root = write_tree(
        {
            **ACYCLIC,
            "prefbo/a/x.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from prefbo.b.z import h\n"
                "class C:\n"
                "    def m(self):\n"
                "        from prefbo.b import z\n"
                "        return z\n"
                "f = 1\n"
            ),
        }
    )
    code, out = run(root)
    assert code == 0, out
    assert "cycles" not in out.split("check_imports:")[0]
    assert "(warnings):\n  prefbo/a/x.py:6 in C.m(): prefbo.b.z\n" in out
    code, out = run(root, "--strict-function-imports")
    assert code == 1 and "(errors):" in out


def test_find_cycles_on_a_bare_graph(check_imports):
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"b"}, "e": {"a"}}
    assert check_imports.find_cycles(graph) == [
        ["a", "b", "a"],
        ["b", "c", "d", "b"],
    ]
    assert check_imports.find_cycles({"a": {"b"}, "b": set()}) == []
