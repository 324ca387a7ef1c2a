"""``benchmarks/harness/shards.py``: each of ``k`` shards gets its share of
the cores, set before torch is imported, unless the user set the threads."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from benchmarks.harness import shards
from benchmarks.harness.runner import BENCHMARKS, REPO

#: No thread variables: the environment of a user who set none.
BARE = {
    k: v
    for k, v in os.environ.items()
    if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PREFBO_THREADS")
}


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@pytest.fixture
def shard(monkeypatch):
    r"""The module on a machine of 8 usable cores, torch not yet imported."""
    monkeypatch.setattr(shards, "usable_cores", lambda: 8)
    monkeypatch.delitem(sys.modules, "torch")
    return shards


@pytest.mark.parametrize(
    "argv, k",
    [
        (["x.py"], 1),
        (["x.py", "--shard", "1/3"], 3),
        (["x.py", "--seeds", "2", "--shard=0/4", "--report"], 4),
        (["x.py", "--shard", "oops"], 1),
        (["x.py", "--shard", "0/0"], 1),
        (["x.py", "--shard"], 1),
    ],
)
def test_the_shard_count_is_read_from_either_spelling(shard, argv, k):
    assert shard.shard_count(argv) == k


def test_a_shard_gets_its_share_of_the_cores_and_keeps_the_policy(shard):
    argv = ["x.py", "--shard", "0/3"]
    assert shard.share_cores_for_shard(argv, {}) == {
        "OMP_NUM_THREADS": "2",  # 8 // 3
        "MKL_NUM_THREADS": "2",
        "PREFBO_THREADS": "auto",
    }
    # more shards than cores: one thread each
    assert shard.share_cores_for_shard(["x.py", "--shard=5/16"], {}) == {
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PREFBO_THREADS": "auto",
    }


def test_the_users_setting_wins(shard):
    argv = ["x.py", "--shard", "0/2"]
    assert shard.share_cores_for_shard(argv, {"OMP_NUM_THREADS": "1"}) == {}
    # only what the user left unset is set
    user = {"MKL_NUM_THREADS": "3", "PREFBO_THREADS": "off"}
    assert shard.share_cores_for_shard(argv, user) == {"OMP_NUM_THREADS": "4"}
    # one process: nothing to share
    assert shard.share_cores_for_shard(["x.py", "--shard", "0/1"], {}) == {}
    assert shard.share_cores_for_shard(["x.py"], {}) == {}


def test_too_late_once_torch_is_imported():
    shard = shards
    assert "torch" in sys.modules  # this test process imported it
    with pytest.raises(RuntimeError, match=r"--shard i/2 gets its threads from "):
        shard.share_cores_for_shard(["x.py", "--shard", "0/2"], {})
    # nothing to set: nothing to refuse
    assert shard.share_cores_for_shard(["x.py"], {}) == {}


def test_a_shard_of_pbo_regret_runs_on_its_share(tmp_path):
    # the script as users start it, two shards and no thread variables: its
    # torch has half the cores, and prefbo's policy stays on
    cmd = [sys.executable, "-m", "benchmarks", "pbo_regret", "--shard", "0/2"]
    cmd += ["--seeds", "0", "--store", str(tmp_path / "runs.jsonl")]
    out = subprocess.run(
        cmd, env=BARE, capture_output=True, text=True, check=True, cwd=REPO
    )
    n = max(1, cores() // 2)
    assert f"0 runs to do in shard 0/2 (torch threads {n}; " in out.stdout
    assert f"OMP_NUM_THREADS={n}, MKL_NUM_THREADS={n}, PREFBO_THREADS=auto" in (
        out.stdout
    )
    assert "prefbo's policy on" in out.stdout
    assert not (tmp_path / "runs.jsonl").exists()


def sharded_scripts() -> list[str]:
    r"""The scripts (not the package's ``__init__`` / ``__main__``) that take
    ``--shard``."""
    return sorted(
        p.name
        for p in BENCHMARKS.glob("[!_]*.py")
        if "--shard" in p.read_text(encoding="utf-8")
    )


def test_the_sharded_scripts_are_the_known_ones():
    assert sharded_scripts() == ["inducing_bo.py", "pbo_regret.py"]


@pytest.mark.parametrize("name", sharded_scripts())
def test_a_sharded_script_shares_the_cores_before_any_other_import(name):
    # every import before the call is of the standard library (which does
    # not import torch) or of the shards module itself
    body = ast.parse((BENCHMARKS / name).read_text()).body
    call = "os.environ.update(share_cores_for_shard(sys.argv))"
    at = [n for n, s in enumerate(body) if ast.unparse(s) == call]
    assert len(at) == 1, f"{name}: no `{call}` at its top level"
    before = set()
    for stmt in body[: at[0]]:
        if isinstance(stmt, ast.Import):
            before |= {a.name.split(".")[0] for a in stmt.names}
        elif isinstance(stmt, ast.ImportFrom):
            module = stmt.module or ""
            top = module.split(".")[0]
            before.add(module if top == "benchmarks" else top)
    allowed = set(sys.stdlib_module_names) | {"__future__", "benchmarks.harness.shards"}
    assert before <= allowed, f"{name} imports {before - allowed} first"
    assert "benchmarks.harness.shards" in before


def test_importing_the_shards_module_imports_no_torch():
    # the packages above it import nothing either
    code = "import sys; import benchmarks.harness.shards; print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO
    )
    assert out.stdout.strip() == "False", out.stderr
