import pytest
import torch
from botorch.acquisition.max_value_entropy_search import qMaxValueEntropy

from prefbo import PairwiseLaplaceGP
from prefbo.utils.testing import make_pairwise_data


def test_condition_on_observations_equals_refit_on_all_data():
    X, comp = make_pairwise_data(20, 30)[:2]
    model = PairwiseLaplaceGP(X, comp)
    Xnew = torch.tensor([[0.123, 0.456], [0.789, 0.012]], dtype=torch.float64)
    cond = model.condition_on_observations(Xnew, torch.tensor([[1, 0]]))
    full = PairwiseLaplaceGP(
        torch.cat([X, Xnew]), torch.cat([comp, torch.tensor([[21, 20]])])
    )
    Xt = torch.rand(5, 2, dtype=torch.float64)
    torch.testing.assert_close(cond.posterior(Xt).mean, full.posterior(Xt).mean)
    assert model.n == 20 and cond.n == 22  # the original is untouched


def test_fantasized_answers_follow_the_answer_model():
    from botorch.sampling import SobolQMCNormalSampler

    X, comp = make_pairwise_data(20, 40, seed=7)[:2]
    model = PairwiseLaplaceGP(X, comp)
    pair = torch.rand(1, 2, 2, dtype=torch.float64)
    fant = model.fantasize(pair, SobolQMCNormalSampler(torch.Size([4096]), seed=0))
    assert fant.batch_shape == (4096, 1) and fant.n == 22 and fant.m == 41
    new = fant.comparisons[..., -1, :]  # 4096 x 1 x 2, indices 20 / 21
    first_wins = (new[..., 0] == 20).double().mean()
    p = model.predict_preference(pair[:, :1], pair[:, 1:]).squeeze()
    assert first_wins.item() == pytest.approx(p.item(), abs=0.03)


def test_knowledge_gradient_and_mes_with_pending_points_run():
    from botorch.acquisition import qKnowledgeGradient

    X, comp = make_pairwise_data(15, 30, seed=8)[:2]
    model = PairwiseLaplaceGP(X, comp)
    kg = qKnowledgeGradient(model, num_fantasies=4)
    assert torch.isfinite(kg(torch.rand(3, 2 + 4, 2, dtype=torch.float64))).all()
    mes = qMaxValueEntropy(
        model,
        candidate_set=torch.rand(50, 2, dtype=torch.float64),
        X_pending=torch.rand(1, 2, dtype=torch.float64),
    )
    assert torch.isfinite(mes(torch.rand(3, 1, 2, dtype=torch.float64))).all()
