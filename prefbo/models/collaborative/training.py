r"""Fitting a collaborative preference model: local Laplace steps for the
people of a minibatch, a gradient step on the shared part.

Each step draws a minibatch of people, refits their Laplace posteriors
``q(z_p) = N(ẑ_p, H_p⁻¹)`` at the current shared means
(:mod:`~prefbo.models.collaborative.people`), then follows the gradient of
the evidence lower bound

.. math::
    \mathcal{L} = \sum_p \Big(\sum_{a \in p} E_q[\log F(\delta_a / s)]
    - \mathrm{KL}(q(z_p) \,\|\, N(\mu_p^0, I))\Big)
    - \sum_j \mathrm{KL}(q(u_j) \,\|\, N(0, I)) + \log p(\theta)

(people's sum estimated from the minibatch, scaled by ``P / B``; ``p(θ)``
the lengthscales' prior and the people's own share's,
:meth:`~prefbo.models.collaborative.shared.SharedFunctions.log_prior`) in the
shared variational parameters, the kernel's lengthscales, the scales and the
person-feature map, with the people's posteriors held fixed: variational EM
with local and global variables (Hoffman et al. 2013, stochastic variational
inference). The answer's difference ``δ = f_p(w) − f_p(l)`` is bilinear in
independent Gaussians (the shared coordinates and the person's latents); the
expectation uses the Gaussian with its exact first two moments,

.. math::
    E\delta = c + \Delta^\top \hat z,\quad
    \mathrm{Var}\,\delta = v_0 + \sum_k (\Sigma_{kk} + \hat z_k^2) v_k
    + \Delta^\top \Sigma \Delta,

``v_j`` the variance of ``F_j(w) − F_j(l)``, by Gauss–Hermite quadrature.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from prefbo.exceptions import InputTypeError
from prefbo.likelihoods.pairwise import pairwise_expected_log_prob
from prefbo.models.collaborative.answers import PaddedAnswers
from prefbo.models.collaborative.people import PersonPosterior
from prefbo.utils.checks import check_float, check_int, check_seed, describe
from prefbo.utils.threads import limited

#: The smallest variance of an answer's difference in the ELBO's quadrature.
VARIANCE_FLOOR = 1e-12
#: Answers per minibatch the default batch of people aims at.
ANSWERS_PER_BATCH = 4096
#: Default number of gradient steps: this many passes over the people, at
#: least :data:`MIN_STEPS`.
EPOCHS = 20
MIN_STEPS = 300


def expected_log_likelihood(
    model,
    batch: PaddedAnswers,
    latent: PersonPosterior,
    differences: tuple[Tensor, Tensor, Tensor],
) -> Tensor:
    r"""``B x A`` expected log-likelihoods of the answers (padding: 0), with
    gradients to the shared part (see the module docstring), from their
    ``differences`` (``SharedFunctions.answer_differences`` with variances)."""
    delta, offset, dvar = differences  # B x A x D, B x A, J x B x A
    K = model.shared.num_tastes
    z = latent.mean.unsqueeze(-1)  # B x D x 1
    mu = offset + (delta @ z).squeeze(-1)
    white = latent.whitened(delta)  # B x D x A
    var = dvar[0] + (white**2).sum(-2)
    if K:
        second = latent.second_moments(K)  # B x K
        var = var + (second.unsqueeze(-1) * dvar[1:].permute(1, 0, 2)).sum(-2)
    # padding answers (design 0 against itself), and answers between two
    # rows of one design, have variance 0, where the quadrature's square root
    # has an infinite gradient: padding gets 1, the others a floor
    var = torch.where(batch.mask, var.clamp_min(VARIANCE_FLOOR), torch.ones_like(var))
    ell = pairwise_expected_log_prob(model.likelihood, mu, var)
    return ell * batch.mask


def person_kl(latent: PersonPosterior, prior_mean: Tensor) -> Tensor:
    r"""``B`` KL divergences ``KL(N(ẑ, H⁻¹) ‖ N(μ⁰, I))``."""
    D = latent.mean.shape[-1]
    logdet_h = 2 * latent.precision_chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    trace = latent.covariance().diagonal(dim1=-2, dim2=-1).sum(-1)
    return 0.5 * (trace + ((latent.mean - prior_mean) ** 2).sum(-1) - D + logdet_h)


def people_terms(model, people: Tensor, refit: bool = False) -> Tensor:
    r"""``Σ_p (Σ_{a∈p} E_q[log F] − KL(q(z_p) ‖ N(μ_p⁰, I)))`` over ``people``,
    with gradients to the shared part and the feature map: at their
    posteriors as stored, or, with ``refit``, after refitting their Laplace
    posteriors at the current shared means (from the same differences the
    ELBO uses; Newton from the last mode converges in a step or two, which
    is what makes a step cheap)."""
    batch = model.answers.gather(people)
    differences = model.shared.answer_differences(
        model.designs, model.items, batch.winners, batch.losers, variance=True
    )
    if refit:
        model.refit_people(people, *differences[:2], batch.mask, "laplace")
    latent = PersonPosterior(
        model.latent_mean[people], model.latent_precision_chol[people]
    )
    ell = expected_log_likelihood(model, batch, latent, differences).sum()
    return ell - person_kl(latent, model.prior_mean(people)).sum()


def minibatch_elbo(
    model, people: Tensor, num_people: int, num_answers: int, refit: bool = False
) -> Tensor:
    r"""The ELBO per answer estimated from ``people`` (their
    :func:`people_terms`, scaled by ``num_people / B``)."""
    scale = num_people / len(people)
    total = scale * people_terms(model, people, refit)
    total = total - model.shared.kl() + model.shared.log_prior()
    return total / max(num_answers, 1)


def full_elbo(model, people: Tensor, num_answers: int, batch_people: int) -> float:
    r"""The ELBO per answer over all of ``people`` (Laplace posteriors
    refitted at the current shared means), in batches of ``batch_people``."""
    with torch.no_grad():
        total = -model.shared.kl() + model.shared.log_prior()
        for start in range(0, len(people), batch_people):
            total = total + people_terms(
                model, people[start : start + batch_people], refit=True
            )
    return float(total) / max(num_answers, 1)


def fit_collaborative(
    model,
    steps: int | None = None,
    batch_people: int | None = None,
    lr: float = 0.03,
    seed: int = 0,
    revive: bool = False,
) -> list[float]:
    r"""Fit a :class:`~prefbo.models.collaborative.CollaborativePreferenceGP`.

    Warm-starts from the model's current state, so a refit after new answers
    continues where the last fit ended. Each step refits its people's
    Laplace posteriors (warm-started Newton); after the last step every
    person's posterior is computed by the model's ``people_inference``.

    With ``revive``, a fit that ends with parts switched off (a scale
    below :data:`~prefbo.models.collaborative.shared.COLLAPSED`) is run once
    more from the same start with those parts revived
    (:meth:`~prefbo.models.collaborative.shared.SharedFunctions.revive`),
    and the fit with the higher ELBO over all people is kept: twice the
    cost where a part collapsed. Warm refits as answers come use it: fits
    on few answers switch tastes off (the prior on the people's own share,
    :data:`~prefbo.models.collaborative.shared.OWN_SHARE`, counts only the
    parts that are on), and plain refits never switch them on again. In
    a study of six people in two planted groups with ten answers each,
    plain refits ended with everyone alike, where a fit from scratch on
    the same answers tells the groups apart; with revived refits the
    study told them apart. It is no guarantee of a fit from scratch's
    optimum: where the residual already explains people, revived tastes
    shrink again within the run and the plain run is kept.
    :class:`~prefbo.loop.PopulationStudy` and ``prefbo serve`` revive at
    the refits where the answers pass a power of two.

    Args:
        model: The model.
        steps: Gradient steps (default :data:`EPOCHS` passes over the people
            who answered, at least :data:`MIN_STEPS`).
        batch_people: People per minibatch (default about
            :data:`ANSWERS_PER_BATCH` answers' worth).
        lr: Adam's learning rate.
        seed: Seed of the minibatches and of the revived parts.
        revive: Whether a fit that ends with collapsed parts is also run
            with them revived.

    Returns:
        The ELBO per answer at each step of the fit kept (minibatch
        estimates).
    """
    lr = check_float("lr", lr, minimum=0, open_minimum=True)
    seed = check_seed("seed", seed)
    if not isinstance(revive, bool):
        raise InputTypeError(f"revive must be a bool; got {describe(revive)}.")
    counts = model.answers.counts()
    active = (counts > 0).nonzero().squeeze(-1)
    m = int(counts.sum())
    if m == 0:
        model.eval()
        return []
    per_person = m / len(active)
    if batch_people is None:
        batch_people = max(
            1, min(len(active), math.ceil(ANSWERS_PER_BATCH / per_person))
        )
    batch_people = check_int("batch_people", batch_people, 1)
    if steps is None:
        steps = max(MIN_STEPS, EPOCHS * math.ceil(len(active) / batch_people))
    steps = check_int("steps", steps, 0)
    descent = Descent(model, active, counts, batch_people, lr, seed)
    initial = shared_state(model) if revive and steps else None
    history = descent.run(steps)
    parts = model.shared.collapsed() if initial is not None else {}
    if any(bool(mask.any()) for mask in parts.values()):
        kept, elbo = shared_state(model), descent.elbo()
        model.load_state_dict(initial, strict=False)
        model.shared.revive(parts, seed)
        revived = descent.run(steps)
        better = descent.elbo()
        if better > elbo or (math.isnan(elbo) and not math.isnan(better)):
            history = revived
        else:
            model.load_state_dict(kept, strict=False)
    model.eval()
    with torch.no_grad():
        everyone = torch.arange(model.num_people, device=model.designs.device)
        for start in range(0, len(everyone), 4 * batch_people):
            model.update_people(everyone[start : start + 4 * batch_people])
    return history


def shared_state(model) -> dict[str, Tensor]:
    r"""A copy of the model's state but the people's posteriors (which a
    fit recomputes)."""
    return {
        k: v.detach().clone()
        for k, v in model.state_dict().items()
        if not k.startswith("latent_")
    }


class Descent:
    r"""Adam on the shared part of a model over minibatches of its ``active``
    people (their answer ``counts`` by person id), each run from a fresh
    optimiser and the same minibatch order (``seed``)."""

    def __init__(
        self,
        model,
        active: Tensor,
        counts: Tensor,
        batch_people: int,
        lr: float,
        seed: int,
    ) -> None:
        self.model, self.active, self.counts = model, active, counts
        self.batch_people, self.lr, self.seed = batch_people, lr, seed
        self.answers = int(counts[active].sum())

    def run(self, steps: int) -> list[float]:
        r"""``steps`` steps; the minibatch ELBO per answer at each."""
        model, active = self.model, self.active
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.Adam(params, lr=self.lr)
        g = torch.Generator().manual_seed(self.seed)
        order, at, history = torch.randperm(len(active), generator=g), 0, []
        model.train()
        for _ in range(steps):
            if at >= len(order):
                order, at = torch.randperm(len(active), generator=g), 0
            people = active[order[at : at + self.batch_people].to(active.device)]
            at += self.batch_people
            with limited(int(self.counts[people].sum())):
                opt.zero_grad()
                elbo = minibatch_elbo(model, people, len(active), self.answers, True)
                (-elbo).backward()
                opt.step()
            history.append(float(elbo.detach()))
        return history

    def elbo(self) -> float:
        r"""The ELBO per answer over all active people, their Laplace
        posteriors refitted at the current shared part."""
        with limited(min(self.answers, 4 * ANSWERS_PER_BATCH)):
            return full_elbo(
                self.model, self.active, self.answers, 4 * self.batch_people
            )
