import pytest
import torch
import torch.distributed as dist

from prefbo.data import AnswerLoader
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.fit import fit_variational
from prefbo.fit.distributed import ShardedAnswerLoader
from prefbo.fit.distributed_example import build_problem


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
