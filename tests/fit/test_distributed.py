import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from prefbo.data import AnswerLoader
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.fit import fit_variational
from prefbo.fit.distributed import ShardedAnswerLoader
from prefbo.fit.distributed_example import build_problem

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


@pytest.fixture
def group_of_one():
    assert not dist.is_initialized()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_a_group_of_one_takes_the_single_process_steps(group_of_one, capsys):
    def run(**kwargs):
        model = build_problem(30, 101, 8)
        result = fit_variational(model, batch_size=32, epochs=3, lr=0.05, **kwargs)
        return model, result

    single, expected = run(seed=1)
    model, result = run(seed=1, distributed=True, progress=True)
    assert result.world_size == 1 and result.elbo == expected.elbo
    for key, value in single.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
    err = capsys.readouterr().err  # one progress bar, finished
    assert err.count("| 0/3 [") == 1 and "| 3/3 [" in err
    # seed=None: rank 0 draws the seed; explicit group; learn only q(u)
    _, result = run(
        seed=None,
        distributed=True,
        process_group=dist.group.WORLD,
        learn_hyperparameters=False,
    )
    assert result.num_epochs == 3 and not model.training


@pytest.mark.parametrize("world_size", [2, 3])
def test_shards_partition_the_single_process_minibatches(world_size):
    model = build_problem(20, 50, 4)
    data = model.data
    reference = list(AnswerLoader(data, 16, generator=torch.Generator().manual_seed(5)))
    shards = [
        list(
            ShardedAnswerLoader(
                data,
                16,
                rank=r,
                world_size=world_size,
                generator=torch.Generator().manual_seed(5),
            )
        )
        for r in range(world_size)
    ]
    assert all(len(s) == len(reference) == 4 for s in shards)
    for i, batch in enumerate(reference):  # the last holds 2 answers
        parts = [s[i] for s in shards if s[i] is not None]
        assert len(parts) == min(world_size, batch.answer_index.numel())
        answers = torch.cat([p.answer_index for p in parts])
        assert torch.equal(answers.sort().values, batch.answer_index.sort().values)
        assert all(p.scale == batch.scale for p in parts)  # the global N / |B|
        for p in parts:  # each shard carries only the designs it touches
            assert torch.equal(p.data.datapoints, data.datapoints[p.design_index])
    # the last minibatch has 2 answers: a third rank gets an empty shard
    assert (shards[-1][-1] is None) == (world_size == 3)
    with pytest.raises(InputDataError, match=r"rank must be in \[0, world_size=2\)"):
        ShardedAnswerLoader(data, 16, rank=2, world_size=2)


def test_distributed_typed_errors():
    model = build_problem(10, 20, 4)
    assert not dist.is_initialized()
    with pytest.raises(
        UnsupportedError,
        match="distributed=True needs an initialised torch.distributed process "
        r"group .*got torch.distributed.is_initialized\(\) == False",
    ):
        fit_variational(model, distributed=True)
    with pytest.raises(InputTypeError, match="distributed must be a bool; got str"):
        fit_variational(model, distributed="yes")
    with pytest.raises(
        InputDataError, match="process_group is only used with distributed=True"
    ):
        fit_variational(model, process_group=object())
