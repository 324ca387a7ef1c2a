import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from prefbo.fit import fit_variational
from prefbo.fit.distributed_example import build_problem, main

ROOT = Path(__file__).resolve().parents[2]
# 301 answers in minibatches of 100: the last one has a single answer, so
# rank 1's last shard of every epoch is empty (the KL term lives on rank 0)
PROBLEM = {"num_designs": 40, "num_answers": 301, "num_inducing": 12}
FIT = {"batch_size": 100, "epochs": 4, "lr": 0.05, "seed": 0}


def _torchrun(out: Path, nproc: int = 2, timeout: float = 150.0) -> str:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "prefbo.fit.distributed_example",
        f"--designs={PROBLEM['num_designs']}",
        f"--answers={PROBLEM['num_answers']}",
        f"--inducing={PROBLEM['num_inducing']}",
        f"--batch-size={FIT['batch_size']}",
        f"--epochs={FIT['epochs']}",
        f"--lr={FIT['lr']}",
        f"--seed={FIT['seed']}",
        "--dtype=float64",
        "--device=cpu",
        "--backend=gloo",
        f"--out={out}",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    # a session of its own: on a timeout the agent and both workers go together
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"torchrun timed out after {timeout} s:\n{output}")
    assert proc.returncode == 0, output
    return output


def test_two_gloo_processes_follow_the_one_process_trajectory(tmp_path):
    output = _torchrun(tmp_path)
    # one progress bar (rank 0's: one start), finished after the 4 epochs
    assert "2 process(es), gloo" in output and "| 4/4 [" in output
    assert output.count("| 0/4 [") == 1
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    # the replicas stay identical: both ranks took the same steps
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert ranks[0]["elbo"] == ranks[1]["elbo"]
    for key, value in ranks[0]["state_dict"].items():
        assert torch.equal(value, ranks[1]["state_dict"][key]), key
    # ... and those of one process on all the data with the same seed, up to
    # the order of summation (a missing gradient all-reduce, or a KL counted
    # twice, moves the trajectory by far more than this)
    model = build_problem(**PROBLEM)
    result = fit_variational(model, early_stopping_patience=None, **FIT)
    assert result.world_size == 1
    assert result.elbo[-1] > result.elbo[0] + 10  # it did learn
    torch.testing.assert_close(
        torch.tensor(ranks[0]["elbo"]),
        torch.tensor(result.elbo),
        rtol=1e-6,
        atol=0.0,
    )
    state = model.state_dict()
    assert set(state) == set(ranks[0]["state_dict"])
    for key, value in state.items():
        torch.testing.assert_close(
            ranks[0]["state_dict"][key], value, rtol=1e-6, atol=1e-9, msg=key
        )
    # the fitted values moved: the comparison is not of two initial states
    start = build_problem(**PROBLEM).state_dict()
    moved = "variational_strategy._variational_distribution.variational_mean"
    assert (state[moved] - start[moved]).abs().max() > 1e-2


def test_without_torchrun_it_fits_as_a_group_of_one(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    argv = ["--designs=30", "--answers=101", "--inducing=8", "--batch-size=32"]
    argv += ["--epochs=2", "--seed=1", f"--out={tmp_path}"]
    result = main(argv)
    assert not dist.is_initialized()  # it left the group
    assert "1 process(es), gloo: ELBO" in capsys.readouterr().out
    model = build_problem(30, 101, 8, seed=1)
    expected = fit_variational(
        model, batch_size=32, epochs=2, lr=0.05, seed=1, early_stopping_patience=None
    )
    assert result.world_size == 1 and result.elbo == expected.elbo
    saved = torch.load(tmp_path / "rank0.pt", weights_only=True)
    assert saved["world_size"] == 1 and saved["elbo"] == expected.elbo
    for key, value in model.state_dict().items():
        assert torch.equal(saved["state_dict"][key], value), key
