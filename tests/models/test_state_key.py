from prefbo import PairwiseLaplaceGP
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.models.state_key import state_key
from prefbo.utils.testing import make_pairwise_data


def test_state_key_follows_values_data_and_likelihood():
    X, comp, _ = make_pairwise_data(8, 12)
    model = PairwiseLaplaceGP(X, comp)
    lik = PairwiseProbitLikelihood()

    def key():
        return state_key([model.covar_module], model.datapoints, comp, lik)

    first = key()
    assert key() == first
    # GPyTorch's setters write through .data (no version bump): still seen
    model.covar_module.outputscale = 2.0
    assert key() != first
    second = key()
    comp[0] = comp[0].flip(-1)  # in place: a new version
    assert key() != second
    third = key()
    lik.noise_std = 0.5
    assert key() != third


def test_model_state_is_cached_until_a_hyperparameter_changes():
    X, comp, _ = make_pairwise_data(8, 12)
    model = PairwiseLaplaceGP(X, comp)
    state = model.approximation
    assert model.approximation is state
    model.covar_module.base_kernel.lengthscale = 0.3
    assert model.approximation is not state
