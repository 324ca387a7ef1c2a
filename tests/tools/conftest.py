import importlib.util
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def _load_tool(name):
    r"""Import ``tools/<name>.py`` (a script, not a package module)."""
    spec = importlib.util.spec_from_file_location(
        f"_tools_{name}", TOOLS / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def check_imports():
    return _load_tool("check_imports")


@pytest.fixture(scope="session")
def check_layout():
    return _load_tool("check_layout")


@pytest.fixture
def write_tree(tmp_path):
    r"""Write ``{relative path: source}`` under ``tmp_path`` and return the root."""

    def write(files):
        for rel, text in files.items():
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return tmp_path

    return write
