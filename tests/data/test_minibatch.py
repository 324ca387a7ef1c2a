import pytest
import torch

from prefbo.data.containers import ChoiceSets, PairwiseComparisons, Rankings
from prefbo.data.minibatch import AnswerLoader, Minibatch, iter_minibatches
from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.likelihoods.choice import PseudoRationalChoiceLikelihood
from prefbo.likelihoods.jnd import JustNoticeableDifferenceLikelihood
from prefbo.likelihoods.labels import PairedLabelLikelihood, PlackettLuceLikelihood


def _pairs(g, n, m):
    i = torch.randint(n, (m,), generator=g)
    j = (i + torch.randint(1, n, (m,), generator=g)) % n
    return torch.stack([i, j], -1)


@pytest.fixture
def jnd_data(tkwargs):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(30, 2, generator=g, dtype=torch.float64).to(**tkwargs)
    dev = tkwargs["device"]
    return PairwiseComparisons(X, _pairs(g, 30, 23).to(dev), _pairs(g, 30, 9).to(dev))


def test_one_pass_covers_every_answer_once_with_only_touched_designs(jnd_data):
    data = jnd_data
    g = torch.Generator().manual_seed(1)
    batches = list(iter_minibatches(data, 10, generator=g))
    assert len(batches) == 4 and all(isinstance(b, Minibatch) for b in batches)
    seen = torch.cat([b.answer_index for b in batches]).sort().values
    assert seen.tolist() == list(range(32))
    full_rows = torch.cat([data.comparisons, data.indiscernible])
    for b in batches:
        sub = b.data
        assert b.scale == pytest.approx(32 / b.answer_index.shape[0])
        assert bool((b.design_index[1:] > b.design_index[:-1]).all())  # unique, sorted
        torch.testing.assert_close(sub.datapoints, data.datapoints[b.design_index])
        rows = torch.cat([sub.comparisons, sub.indiscernible])
        assert b.design_index[rows].tolist() == full_rows[b.answer_index].tolist()
        assert set(rows.unique().tolist()) == set(range(b.design_index.shape[0]))
        is_pref = b.answer_index < 23
        assert (
            is_pref[: sub.comparisons.shape[0]].all()
            and not is_pref[sub.comparisons.shape[0] :].any()
        )


def test_minibatch_log_likelihoods_add_up_to_the_full_data(jnd_data):
    lik = JustNoticeableDifferenceLikelihood(threshold=0.2).to(jnd_data.datapoints)
    u = torch.randn(
        30, dtype=jnd_data.datapoints.dtype, device=jnd_data.datapoints.device
    )
    full = lik.log_prob_answers(u, *jnd_data.answers).sum()
    parts = sum(
        lik.log_prob_answers(u[b.design_index], *b.data.answers).sum()
        for b in AnswerLoader(jnd_data, 7)
    )
    torch.testing.assert_close(parts, full)


def test_choice_set_minibatches_trim_padding_and_add_up(tkwargs):
    X = torch.rand(8, 1, **tkwargs)
    data = ChoiceSets(
        X,
        [[0, 1, 2, 3], [4, 5], [6, 7, 0], [1, 3], [2, 5, 7]],
        [[1, 3], [4], [6], [3], [2, 5]],
    )
    lik = PseudoRationalChoiceLikelihood()
    u = torch.randn(8, 2, **tkwargs)
    full = lik.choice_log_prob(u, *data.answers)
    loader = AnswerLoader(data, 2, shuffle=False)
    assert len(loader) == 3
    for b in loader:
        assert bool(b.data.mask.sum(-1).max() == b.data.option_sets.shape[-1])
        out = lik.choice_log_prob(u[b.design_index], *b.data.answers)
        torch.testing.assert_close(out, full[b.answer_index])


def test_label_minibatches_keep_contexts_aligned(tkwargs):
    X = torch.rand(5, 3, **tkwargs)
    ranks = Rankings(X, [[0, 1, 2], [2, 0], [1, 2, 0], [0, 2], [2, 1, 0]])
    u = torch.randn(5, 3, **tkwargs)
    lik = PlackettLuceLikelihood()
    full = lik.log_prob_answers(u, *ranks.answers)
    for b in AnswerLoader(ranks, 2, generator=torch.Generator().manual_seed(0)):
        torch.testing.assert_close(b.data.features, X[b.design_index])
        torch.testing.assert_close(
            lik.log_prob_answers(u[b.design_index], *b.data.answers),
            full[b.answer_index],
        )
    pairs = ranks.to_pairs("all")
    lik2 = PairedLabelLikelihood(link="logit")
    full2 = lik2.log_prob_answers(u, *pairs.answers)
    for b in AnswerLoader(pairs, 3, generator=torch.Generator().manual_seed(0)):
        torch.testing.assert_close(
            lik2.log_prob_answers(u[b.design_index], *b.data.answers),
            full2[b.answer_index],
        )


def test_loader_is_reproducible_and_can_drop_the_last_batch(jnd_data):
    def order(seed):
        loader = AnswerLoader(
            jnd_data, 8, generator=torch.Generator().manual_seed(seed)
        )
        return torch.cat([b.answer_index for b in loader]).tolist()

    assert order(3) == order(3) and order(3) != order(4)
    loader = AnswerLoader(jnd_data, 10, drop_last=True)
    assert len(loader) == 3 and all(b.answer_index.shape[0] == 10 for b in loader)


def test_loader_errors(jnd_data):
    with pytest.raises(
        InputDataError, match="batch_size must be an int >= 1; got batch_size=0"
    ):
        AnswerLoader(jnd_data, 0)
    with pytest.raises(
        InputTypeError, match="batch_size must be an int >= 1; got bool True"
    ):
        AnswerLoader(jnd_data, True)
    with pytest.raises(
        InputTypeError, match="data must be a PairwiseComparisons, LabelComparisons"
    ):
        AnswerLoader(torch.zeros(3), 2)
