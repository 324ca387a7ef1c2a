"""``benchmarks/harness/runner.py``: ``python -m benchmarks NAME``."""

from __future__ import annotations

import ast
import subprocess
import sys
from types import SimpleNamespace

import pytest

from benchmarks.harness import runner

#: Modules of the suite that are not run by name, and why.
HELPERS = {
    "__init__.py": "the package",
    "__main__.py": "the runner's entry",
    "inducing_bo_report.py": "inducing_bo's report, built from its store",
}
#: Scripts that keep their own ``if __name__ == "__main__"`` (runnable as
#: files too) until they join the harness, and why.
OWN_ENTRY: dict[str, str] = {}


def _guards(name: str) -> list[ast.If]:
    tree = ast.parse((runner.BENCHMARKS / f"{name}.py").read_text(encoding="utf-8"))
    return [
        node
        for node in tree.body
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
    ]


def test_every_script_of_the_suite_has_a_name_and_every_name_a_script():
    scripts = {p.name for p in runner.BENCHMARKS.glob("*.py") if p.name not in HELPERS}
    assert scripts == {f"{name}.py" for name in runner.SCRIPTS}
    for name, script in runner.SHELL_SCRIPTS.items():
        assert (runner.BENCHMARKS / script).is_file(), name


@pytest.mark.parametrize("name", runner.SCRIPTS)
def test_a_script_has_a_main_and_the_runner_is_its_only_entry(name):
    # read, not imported: a script's import may set its thread variables
    tree = ast.parse((runner.BENCHMARKS / f"{name}.py").read_text(encoding="utf-8"))
    mains = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "main"
    ]
    assert len(mains) == 1, f"{name} has no main()"
    assert mains[0].args.args and mains[0].args.args[0].arg == "argv"
    if name not in OWN_ENTRY:
        assert not _guards(name), f"{name} has its own `if __name__ == '__main__'`"
    assert runner.summary(name), f"{name} has no docstring"


def test_the_scripts_allowed_their_own_entry_still_have_one():
    # an entry that no longer applies leaves the list
    assert [name for name in OWN_ENTRY if not _guards(name)] == []


def test_no_benchmark_edits_sys_path():
    folders = [runner.BENCHMARKS, runner.REPO / "tests" / "benchmarks"]
    found = [
        str(path.relative_to(runner.REPO))
        for folder in folders
        for path in folder.rglob("*.py")
        if "sys.path" in path.read_text(encoding="utf-8")
        and path.name != "test_runner.py"
    ]
    assert found == []


def test_help_lists_every_name_with_its_summary(capsys):
    assert runner.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m benchmarks NAME [options]")
    for name in runner.names():
        assert f"  {name} " in out
    assert "Preferential BO regret: prefbo's loop default against" in out
    assert runner.main([]) == 0  # no name: the same listing


def test_an_unknown_name_is_refused_with_the_names(capsys):
    with pytest.raises(SystemExit) as exit_:
        runner.main(["pbo_screen"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "no benchmark named 'pbo_screen'; the names are laplace_vs_botorch" in err


def test_a_script_runs_with_its_options_in_sys_argv(monkeypatch):
    seen = []

    def main() -> int:
        seen.append(list(sys.argv))
        return 3

    monkeypatch.setattr(
        runner.importlib, "import_module", lambda name: SimpleNamespace(main=main)
    )
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    assert runner.main(["pbo_regret", "--report", "--seeds", "2"]) == 3
    assert seen == [["python -m benchmarks pbo_regret", "--report", "--seeds", "2"]]
    # a main that returns a page (not a status) exits 0
    monkeypatch.setattr(
        runner.importlib,
        "import_module",
        lambda name: SimpleNamespace(main=lambda: "# page"),
    )
    assert runner.run("threads", []) == 0


def test_a_child_process_starts_a_script_through_the_runner():
    assert runner.child_command("threads", "--child", "fit") == [
        sys.executable,
        "-m",
        "benchmarks",
        "threads",
        "--child",
        "fit",
    ]


def test_the_runner_lists_the_names_without_importing_torch():
    code = (
        "import sys, runpy; sys.argv = ['benchmarks', '--help']\n"
        "try:\n    runpy.run_module('benchmarks', run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code == 0\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=runner.REPO,
        check=True,
    )
    assert out.stdout.strip().endswith("False")
    assert "  pbo_regret " in out.stdout
