import copy

import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption

from prefbo.exceptions import InputDataError
from prefbo.models.collaborative import (
    PersonModel,
    PersonPosterior,
)
from prefbo.models.collaborative.questions import imagined_posteriors


@pytest.fixture
def model(small_fitted):
    return small_fitted


def test_a_view_at_a_given_posterior_is_the_person_after_those_answers(model):
    # the view at an imagined posterior = the view of a copy that observed
    # the answers; the model itself is not changed
    winners, losers = torch.tensor([[3, 5]]), torch.tensor([[8, 2]])
    latent = imagined_posteriors(model, torch.tensor([4]), winners, losers)
    view = model.person_model(4, latent)
    assert isinstance(view, PersonModel) and view.latent is latent
    twin = copy.deepcopy(model)
    twin.observe(4, winners[0], losers[0])
    X = model.designs[:6].unsqueeze(0)  # 1 x 6 x d
    got, want = view.posterior(X), twin.person_model(4).posterior(X)
    torch.testing.assert_close(got.mean, want.mean, atol=1e-6, rtol=0)
    torch.testing.assert_close(
        got.mvn.covariance_matrix, want.mvn.covariance_matrix, atol=1e-6, rtol=0
    )
    stored = model.person_model(4).posterior(X)
    assert not torch.allclose(stored.mean, got.mean, atol=1e-3)


def test_eubo_on_a_view_at_a_given_posterior(model):
    latent = model.posterior_of(2)
    view = model.person_model(2, latent)
    pair = model.designs[:2].unsqueeze(0)
    a = AnalyticExpectedUtilityOfBestOption(pref_model=view)(pair)
    b = AnalyticExpectedUtilityOfBestOption(pref_model=model.person_model(2))(pair)
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize(
    "latent",
    [
        "not a posterior",
        PersonPosterior(torch.zeros(2, 6), torch.eye(6).expand(2, 6, 6)),
        PersonPosterior(torch.zeros(1, 3), torch.eye(3).unsqueeze(0)),
    ],
)
def test_a_latent_not_of_one_person_is_refused(model, latent):
    with pytest.raises(InputDataError, match="latent must be one person's"):
        PersonModel(model, 0, latent)
