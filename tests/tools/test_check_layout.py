import pytest

MIRRORED = {
    "prefbo/__init__.py": "",
    "prefbo/cli.py": "x = 1\n",
    "prefbo/a/__init__.py": "",
    "prefbo/a/b.py": "x = 1\n" * 5,
    "tests/test_cli.py": "",
    "tests/a/test_b.py": "",
    "tests/a/conftest.py": "",
    "benchmarks/speed.py": "",
    "tests/benchmarks/test_speed_script.py": "",
    "benchmarks/__init__.py": "",
    "benchmarks/__main__.py": "",
    "benchmarks/harness/__init__.py": "",
    "benchmarks/harness/stores.py": "",
    "tests/benchmarks/harness/test_stores.py": "",
    "tools/lint.py": "",
    "tests/tools/test_lint.py": "",
}


@pytest.fixture
def run(check_layout, capsys, monkeypatch):
    monkeypatch.setattr(check_layout, "UNTESTED_MODULES", {})
    monkeypatch.setattr(check_layout, "UNMIRRORED_TESTS", {})
    monkeypatch.setattr(check_layout, "LONG_MODULES", {})

    def run(root, *flags):
        code = check_layout.main(["--root", str(root), *flags])
        return code, capsys.readouterr().out

    return run


def test_a_mirrored_tree_passes(write_tree, run):
    assert run(write_tree(MIRRORED)) == (0, "check_layout: ok\n")


def test_a_module_without_tests_and_a_test_without_a_module_are_reported(
    write_tree, run
):
    root = write_tree(
        {
            **MIRRORED,
            "prefbo/a/c.py": "",
            "tests/a/test_d.py": "",
            "tests/test_e.py": "",
        }
    )
    code, out = run(root)
    assert code == 1
    assert (
        "modules without a mirrored test file (1):\n"
        "  prefbo/a/c.py: expected tests/a/test_c.py\n"
    ) in out
    assert (
        "test files that mirror no module, benchmark script or tool (2):\n"
        "  tests/a/test_d.py: no prefbo/a/d.py\n"
        "  tests/test_e.py: no prefbo/e.py\n"
    ) in out


def test_a_benchmark_test_needs_its_script(write_tree, run):
    root = write_tree({**MIRRORED, "tests/benchmarks/test_gone_script.py": ""})
    code, out = run(root)
    assert (
        code == 1
        and "tests/benchmarks/test_gone_script.py: no benchmarks/gone.py" in out
    )


def test_the_benchmarks_harness_is_mirrored_module_by_module(write_tree, run):
    root = write_tree(
        {
            **MIRRORED,
            "benchmarks/harness/reports.py": "",
            "tests/benchmarks/harness/test_gone.py": "",
        }
    )
    code, out = run(root)
    assert code == 1
    assert (
        "  benchmarks/harness/reports.py: expected "
        "tests/benchmarks/harness/test_reports.py\n"
    ) in out
    assert "  tests/benchmarks/harness/test_gone.py: no benchmarks/harness/gone.py" in (
        out
    )


def test_long_modules_are_reported_unless_allowed(
    write_tree, run, check_layout, monkeypatch
):
    root = write_tree(MIRRORED)
    code, out = run(root, "--max-lines", "4")
    assert code == 1
    assert "modules over 4 lines (1):\n  prefbo/a/b.py: 5 lines\n" in out
    monkeypatch.setattr(
        check_layout, "LONG_MODULES", {"prefbo/a/b.py": "one algorithm"}
    )
    assert run(root, "--max-lines", "4")[0] == 0
    code, out = run(root)  # now under the limit: the entry is stale
    assert code == 1
    assert (
        "no longer apply (remove them) (1):\n  LONG_MODULES: prefbo/a/b.py has 5" in out
    )


def test_allow_lists_excuse_and_go_stale(write_tree, run, check_layout, monkeypatch):
    root = write_tree({**MIRRORED, "prefbo/a/helpers.py": "", "tests/test_all.py": ""})
    monkeypatch.setattr(check_layout, "UNTESTED_MODULES", {"prefbo/a/helpers.py": "r"})
    monkeypatch.setattr(check_layout, "UNMIRRORED_TESTS", {"tests/test_all.py": "r"})
    assert run(root)[0] == 0
    monkeypatch.setattr(
        check_layout,
        "UNMIRRORED_TESTS",
        {"tests/test_all.py": "r", "tests/a/test_b.py": "r", "tests/test_x.py": "r"},
    )
    code, out = run(root)
    assert code == 1
    assert "UNMIRRORED_TESTS: tests/a/test_b.py mirrors prefbo/a/b.py" in out
    assert "UNMIRRORED_TESTS: tests/test_x.py does not exist" in out


def test_the_repository_allow_lists_give_reasons(check_layout):
    for allow in (
        check_layout.UNTESTED_MODULES,
        check_layout.UNMIRRORED_TESTS,
        check_layout.LONG_MODULES,
    ):
        assert all(isinstance(r, str) and len(r) > 10 for r in allow.values())
