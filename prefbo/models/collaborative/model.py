r"""A collaborative preference model: everyone's answers teach a shared utility
and a few shared tastes; each person is a point in taste space.

Person ``p``'s utility is a shared utility plus their weights on ``K``
shared latent taste functions plus, optionally, a small residual of their own
(Houlsby et al. 2012, "Collaborative Gaussian processes for preference
learning"; Simpson & Gurevych 2020, crowdGPPL; Bonilla et al. 2010):

.. math::
    f_p(x) = g(x) + \sum_{k=1}^K w_{pk} h_k(x) + r_p(x),
    \qquad w_p \sim N(B u_p, I),

``g`` and ``h_k`` sparse GPs over the design features (with an item effect
each where designs are items known by id;
:mod:`~prefbo.models.collaborative.shared`), ``u_p`` the person's features
(when given) and ``r_p`` the residual (:mod:`~prefbo.models.collaborative.people`).

Inference splits the two levels, as stochastic variational inference does
with local and global variables (Hoffman et al. 2013): each person's
posterior over their ``D = K + M_r`` latents is found at the shared
functions' posterior means by expectation propagation (the default for the
probit; :mod:`~prefbo.models.collaborative.ep`) or a Laplace approximation
(Newton's method; :mod:`~prefbo.models.collaborative.people`) in ``D``
dimensions (milliseconds, a refit's result when updated answer by answer);
the shared functions' variational posteriors, their hyperparameters and the
feature map ``B`` follow the ELBO's gradient on minibatches of people
(:mod:`~prefbo.models.collaborative.training`). A newcomer with no answers
gets the population's posterior: their weights at the prior ``N(B u, I)``.

The model is a BoTorch ``Model``: :meth:`CollaborativePreferenceGP.posterior`
takes the person; :meth:`CollaborativePreferenceGP.person_model` is one
person's view for BoTorch's acquisition functions (EUBO, Thompson sampling).
"""

from __future__ import annotations

from typing import Any

import gpytorch
import torch
from botorch.models.model import Model
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from torch import Tensor

from prefbo.exceptions import InputDataError
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.likelihoods.pairwise import as_prefbo_likelihood
from prefbo.models.collaborative.answers import AnswerTable
from prefbo.models.collaborative.checks import (
    check_answer_sides,
    check_answers,
    check_designs,
    check_inducing,
    check_item_effects,
    check_newcomer_features,
    check_person_features,
    check_rows,
    pool_item_effects,
    warn_equal_items,
)
from prefbo.models.collaborative.design_index import DesignIndex
from prefbo.models.collaborative.ep import check_ep_likelihood, ep_people
from prefbo.models.collaborative.people import PersonPosterior, laplace_people
from prefbo.models.collaborative.person_model import PersonModel
from prefbo.models.collaborative.shared import SharedFunctions, choose_inducing
from prefbo.models.collaborative.training import fit_collaborative
from prefbo.utils.checks import check_int, describe
from prefbo.utils.threads import limited

#: The ways of computing each person's posterior (``people_inference``).
PEOPLE_INFERENCE = ("auto", "ep", "laplace")
#: Added to a posterior covariance's diagonal for BoTorch's samplers.
POSTERIOR_JITTER = 1e-10


class CollaborativePreferenceGP(Model, gpytorch.Module):
    r"""A collaborative preference model (see the module docstring).

    Args:
        designs: ``n x d`` designs in the unit cube (a pool's items, or the
            designs people compared).
        answers: ``m x 3`` long rows ``(person, winner, loser)``, winner and
            loser rows of ``designs``.
        num_people: ``P``; default ``answers[:, 0].max() + 1``.
        person_features: ``P x e`` features of the people (standardised,
            e.g. age, ownership) or ``None``.
        num_tastes: ``K ≥ 0`` latent tastes (unused ones shrink away).
        num_inducing: ``M`` inducing points of the shared functions.
        num_residual: ``M_r`` inducing points of each person's residual
            (``0``: none; at most ``M``).
        item_effects: Whether each row of ``designs`` is an item with an
            effect of its own beyond its features; ``None`` (the default):
            where the designs are a pool with more items than inducing
            points, its items compared over and over (each in two answers on
            average), not where each design is compared about once (a
            continuous study's) or every item is an inducing point
            (:func:`~prefbo.models.collaborative.checks.pool_item_effects`).
        likelihood: A prefbo pairwise likelihood (default probit,
            ``noise_std=1``).
        seed: Seed of the inducing points and the tastes' start.
        inducing_points: ``M x d`` inducing points of one's own (e.g. a
            Sobol set of the box where few designs are known yet); default
            ``num_inducing`` of the designs, by conditional variance
            reduction. The residual's are their first ``num_residual``.
        people_inference: Each person's posterior: ``"ep"``
            (expectation propagation,
            :func:`~prefbo.models.collaborative.ep.ep_people`; probit only),
            ``"laplace"`` (the mode,
            :func:`~prefbo.models.collaborative.people.laplace_people`; any
            link) or ``"auto"``: EP for the probit, else Laplace. Where a few
            answers are nearly decisive (a newcomer's first answers,
            rankings) the posterior is skewed and EP's mean follows its mass
            beyond the mode. The fit's own steps use Laplace posteriors
            whatever this says (see :meth:`fit`).
    """

    def __init__(
        self,
        designs: Tensor,
        answers: Tensor,
        num_people: int | None = None,
        person_features: Tensor | None = None,
        num_tastes: int = 3,
        num_inducing: int = 64,
        num_residual: int = 16,
        item_effects: bool | None = None,
        likelihood: Any = None,
        seed: int = 0,
        inducing_points: Tensor | None = None,
        people_inference: str = "auto",
    ) -> None:
        gpytorch.Module.__init__(self)
        check_designs(designs)
        answers, P = check_answers(answers, designs.shape[0], num_people)
        K = check_int("num_tastes", num_tastes, 0)
        M = check_int("num_inducing", num_inducing, 1)
        Mr = check_int("num_residual", num_residual, 0)
        item_effects = check_item_effects(item_effects)
        self.likelihood = as_prefbo_likelihood(likelihood or PairwiseProbitLikelihood())
        if people_inference not in PEOPLE_INFERENCE:
            raise InputDataError(
                f"people_inference must be one of {sorted(PEOPLE_INFERENCE)}; got "
                f"{people_inference!r}."
            )
        if people_inference == "auto":
            probit = isinstance(self.likelihood, PairwiseProbitLikelihood)
            people_inference = "ep" if probit else "laplace"
        if people_inference == "ep":  # refused here, not at the first answer
            check_ep_likelihood(self.likelihood)
        #: ``"ep"`` or ``"laplace"``: how people's posteriors are computed.
        self.people_inference = people_inference
        # buffers, so that .to() and .double() move and cast them with the rest
        self.register_buffer("designs", designs)
        self.num_initial = designs.shape[0]
        Z = check_inducing(inducing_points, designs)
        if Z is None:
            Z = choose_inducing(designs, M, seed)
        n = designs.shape[0]
        if item_effects is None:
            item_effects = pool_item_effects(n, len(answers), Z.shape[0])
        self.num_items = n if item_effects else 0
        if item_effects:
            warn_equal_items(designs)
        self.register_buffer(
            "items",
            torch.arange(designs.shape[0], device=designs.device)
            if item_effects
            else torch.full((designs.shape[0],), -1, device=designs.device),
        )
        self.shared = SharedFunctions(Z, K, self.num_items, min(Mr, Z.shape[0]), seed)
        self.answers = AnswerTable(answers.to(designs.device), P)
        U = check_person_features(person_features, P, designs)
        self.register_buffer("person_features", U)
        if U is not None:
            self.feature_map = torch.nn.Parameter(designs.new_zeros(U.shape[1], K))
        D = K + self.shared.num_residual
        # each person's posterior: part of the state dict (a model saved
        # after people joined loads only into one with as many people)
        with torch.no_grad():
            mean = self.prior_mean(torch.arange(P, device=designs.device))
        self.register_buffer("latent_mean", mean)
        eye = torch.eye(D, dtype=designs.dtype, device=designs.device)
        self.register_buffer("latent_precision_chol", eye.expand(P, D, D).clone())

    # ---------------------------------------------------------- sizes
    @property
    def num_outputs(self) -> int:  # noqa: D102
        return 1

    @property
    def num_people(self) -> int:
        r"""People known (training people and those added since)."""
        return self.answers.num_people

    @property
    def num_tastes(self) -> int:
        r"""``K``."""
        return self.shared.num_tastes

    @property
    def latent_dim(self) -> int:
        r"""``D = K + M_r``: each person's latent coordinates."""
        return self.shared.num_tastes + self.shared.num_residual

    # ---------------------------------------------------------- people
    def prior_mean(self, people: Tensor, features: Tensor | None = None) -> Tensor:
        r"""``B x D`` prior means ``[B u_p; 0]`` of ``B`` people's latents
        (``features``: their ``B x e`` features, default the stored ones)."""
        D, K = self.latent_dim, self.num_tastes
        mean = self.designs.new_zeros(len(people), D)
        if self.person_features is not None:
            U = self.person_features[people] if features is None else features
            mean = torch.cat([U @ self.feature_map, mean[:, K:]], dim=-1)
        return mean

    def add_person(self, features: Tensor | None = None) -> int:
        r"""A newcomer; returns their id. Their posterior is the population's
        (weights at the prior ``N(B u, I)``) until they answer.

        Args:
            features: The person's ``e`` features (required when the model
                has person features; the training people's mean is not
                assumed).
        """
        row = check_newcomer_features(features, self.person_features)
        if row is not None:
            self.person_features = torch.cat([self.person_features, row])
        pid = self.answers.add_person()
        with torch.no_grad():
            mean = self.prior_mean(torch.tensor([pid], device=self.designs.device))
        D = self.latent_dim
        eye = torch.eye(D, dtype=self.designs.dtype, device=self.designs.device)
        self.latent_mean = torch.cat([self.latent_mean, mean])
        self.latent_precision_chol = torch.cat(
            [self.latent_precision_chol, eye.unsqueeze(0)]
        )
        return pid

    def design_rows(self, designs: Tensor) -> Tensor:
        r"""Rows of the design table for ``k x d`` designs: an item's row
        where one matches (:meth:`item_ids`, a coarser dtype included), else
        the first equal row's, else a new row appended (once for equal new
        designs). Found through a hash index of the table
        (:class:`~prefbo.models.collaborative.design_index.DesignIndex`),
        kept as rows are added: ``O(k)``, not ``O(k n)``."""
        out = self.item_ids(designs).to(self.designs.device)
        rest = (out < 0).nonzero().squeeze(-1)
        designs = designs.to(self.designs)[rest]
        rows, new = self._design_index().add(self.designs, designs)
        if new:
            self.designs = torch.cat([self.designs, designs[new]])
            self.items = torch.cat([self.items, self.items.new_full((len(new),), -1)])
            self._design_index().extended(self.designs)
        out[rest] = torch.tensor(rows, dtype=torch.long, device=out.device)
        return out

    def _design_index(self) -> DesignIndex:
        r"""The design table's index (made at first use)."""
        if not isinstance(getattr(self, "_index", None), DesignIndex):
            self._index = DesignIndex()
        return self._index

    def observe(self, person: int, winners: Tensor, losers: Tensor) -> PersonPosterior:
        r"""Add a person's answers and update their posterior at once (the
        shared part fixed).

        Args:
            person: An id below :attr:`num_people`.
            winners, losers: ``k`` long design rows, or ``k x d`` designs.

        Returns:
            The person's new
            :class:`~prefbo.models.collaborative.people.PersonPosterior`.
        """
        person = self._check_person(person)
        check_answer_sides(winners, losers, self.designs.shape[-1])
        pair = []
        for t in (winners, losers):
            if t.is_floating_point():
                t = self.design_rows(t)
            pair.append(t.reshape(-1).long().to(self.designs.device))
        rows = torch.stack([torch.full_like(pair[0], person), *pair], -1)
        check_answers(rows, self.designs.shape[0], self.num_people)
        self.answers.add(person, pair[0], pair[1])
        return self.update_people(torch.tensor([person], device=self.designs.device))

    def forget(self, person: int) -> None:
        r"""Withdraw every answer of ``person`` (e.g. to observe them again
        after an undo); their posterior returns to the prior."""
        person = self._check_person(person)
        self.answers.forget(person)
        with torch.no_grad():
            ids = torch.tensor([person], device=self.designs.device)
            self.latent_mean[person] = self.prior_mean(ids)[0]
            self.latent_precision_chol[person] = torch.eye(
                self.latent_dim, dtype=self.designs.dtype, device=self.designs.device
            )

    def _check_person(self, person: int) -> int:
        person = check_int("person", person, 0)
        if person >= self.num_people:
            raise InputDataError(
                f"person must be an id below {self.num_people}; got {person}."
            )
        return person

    # ---------------------------------------------------------- updates
    def update_people(self, people: Tensor) -> PersonPosterior:
        r"""Refit ``B`` people's posteriors at the current shared functions
        (by :attr:`people_inference`) and store them."""
        people = people.to(self.designs.device)
        with torch.no_grad(), limited(len(people) * 16):
            batch = self.answers.gather(people)
            delta, offset = self.answer_rows(batch.winners, batch.losers)
        return self.refit_people(people, delta, offset, batch.mask)

    def refit_people(
        self,
        people: Tensor,
        delta: Tensor,
        offset: Tensor,
        mask: Tensor,
        inference: str | None = None,
    ) -> PersonPosterior:
        r"""Refit and store ``B`` people's posteriors from their answers'
        ``B x A x D`` rows, ``B x A`` offsets and mask (as
        :meth:`answer_rows` and :meth:`AnswerTable.gather
        <prefbo.models.collaborative.answers.AnswerTable.gather>` give them;
        taken as constants), by ``inference`` (default
        :attr:`people_inference`)."""
        post = self.infer_people(people, delta, offset, mask, inference)
        self.latent_mean[people] = post.mean
        self.latent_precision_chol[people] = post.precision_chol
        return post

    def infer_people(
        self,
        people: Tensor,
        delta: Tensor,
        offset: Tensor,
        mask: Tensor,
        inference: str | None = None,
    ) -> PersonPosterior:
        r"""``B`` people's posteriors from answers' rows, offsets and mask
        (as :meth:`refit_people` takes them) by ``inference`` (``"ep"`` or
        ``"laplace"``; default :attr:`people_inference`), without storing
        them (Laplace starts from their stored posterior means)."""
        inference = inference or self.people_inference
        if inference not in ("ep", "laplace"):
            raise InputDataError(
                f"inference must be 'ep' or 'laplace'; got {inference!r}."
            )
        with torch.no_grad(), limited(len(people) * 16):
            if inference == "ep":
                return ep_people(
                    self.likelihood, delta, offset, mask, self.prior_mean(people)
                )
            return laplace_people(
                self.likelihood,
                delta,
                offset,
                mask,
                self.prior_mean(people),
                start=self.latent_mean[people],
            )

    def answer_rows(self, winners: Tensor, losers: Tensor) -> tuple[Tensor, Tensor]:
        r"""``B x A x D`` rows ``Δ`` and ``B x A`` offsets ``c`` of answers
        (see :mod:`~prefbo.models.collaborative.people`) at the shared
        functions' means."""
        delta, offset, _ = self.shared.answer_differences(
            self.designs, self.items, winners, losers
        )
        return delta, offset

    def posterior_of(self, person: int | None) -> PersonPosterior:
        r"""A person's stored posterior (``None``: a newcomer without features)."""
        if person is None:
            D = self.latent_dim
            eye = torch.eye(D, dtype=self.designs.dtype, device=self.designs.device)
            return PersonPosterior(self.designs.new_zeros(1, D), eye.unsqueeze(0))
        person = self._check_person(person)
        return PersonPosterior(
            self.latent_mean[person : person + 1],
            self.latent_precision_chol[person : person + 1],
        )

    # ---------------------------------------------------------- predictions
    def moments(
        self, X: Tensor, latent: PersonPosterior, items: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        r"""Mean ``B x b x q`` and covariance ``B x b x q x q`` of ``B`` people's
        utilities at ``b x q x d`` designs (their first two moments, exact
        under the shared and personal posteriors), in ``latent``'s dtype.

        Args:
            X: ``b x q x d`` designs (read in the model's dtype).
            latent: The ``B`` people's posteriors.
            items: ``b x q`` item ids of the designs (``-1``: none; default:
                looked up in the item table by exact match).
        """
        b, q, d = X.shape
        if items is None:
            items = self.item_ids(X.reshape(-1, d))
        flat = X.reshape(-1, d).to(self.designs)  # read in the model's dtype
        basis, offset, phi = self.shared.person_rows(flat, items.reshape(-1))
        root = self.shared.roots(basis).reshape(-1, b, q, basis.shape[-1])
        offset, phi = offset.reshape(b, q), phi.reshape(b, q, -1)  # b x q (x D)
        K, mu = self.num_tastes, latent.mean  # B x D, in the moments' dtype
        root, offset, phi = root.to(mu), offset.to(mu), phi.to(mu)
        out_mean = offset + torch.einsum("bqd,pd->pbq", phi, mu)
        cov_j = root @ root.mT  # J x b x q x q
        if self.num_items:
            cov_j = cov_j + self.shared.item_covariance(items.reshape(b, q)).to(mu)
        A = latent.whitened(phi.reshape(1, b * q, -1).expand(len(mu), -1, -1))
        A = A.reshape(len(mu), -1, b, q).permute(0, 2, 3, 1)  # B x b x q x D
        cov = cov_j[0] + A @ A.mT
        if K:
            second = latent.second_moments(K)  # B x K
            cov = cov + torch.einsum("pk,kbij->pbij", second, cov_j[1:])
        return out_mean, cov

    def item_ids(self, X: Tensor) -> Tensor:
        r"""Item ids of ``n x d`` designs: the first equal item's row, else
        ``-1`` (the table's hash index: ``O(n)``); designs of a coarser dtype
        (float32 of a float64 model) match the items rounded to it."""
        if not self.num_items:
            return torch.full((X.shape[0],), -1, device=X.device)
        ours, theirs = self.designs.dtype, X.dtype
        if theirs.is_floating_point and torch.finfo(theirs).eps > torch.finfo(ours).eps:
            items = self.designs[: self.num_items].to(theirs)
            rows = DesignIndex().find(items, X)  # indexed anew: O(items)
        else:
            rows = self._design_index().find(self.designs, X.to(self.designs))
        rows = torch.tensor(rows, dtype=torch.long, device=X.device)
        return torch.where(rows < self.num_items, rows, -1)

    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool = False,
        posterior_transform: Any = None,
        person: int | None = None,
        latent: PersonPosterior | None = None,
        **kwargs: Any,
    ) -> GPyTorchPosterior:
        r"""The posterior of ``person``'s utility at ``batch_shape x q x d``
        designs (``person=None``: a newcomer's, the population's), or of one
        whose latent posterior is ``latent`` (one person's, e.g. after
        answers imagined with
        :func:`~prefbo.models.collaborative.questions.imagined_posteriors`)."""
        d = self.designs.shape[-1]
        if not isinstance(X, Tensor) or X.ndim < 2 or X.shape[-1] != d:
            raise InputDataError(f"X must be batch_shape x q x {d}; got {describe(X)}.")
        shape = X.shape[:-1]
        blocks = X.reshape(-1, shape[-1], X.shape[-1])
        with limited(shape.numel()):
            latent = self.posterior_of(person) if latent is None else latent
            mean, cov = self.moments(blocks, latent)
        mean, cov = mean[0].reshape(shape), cov[0].reshape(*shape, shape[-1])
        eye = torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)
        post = GPyTorchPosterior(MultivariateNormal(mean, cov + POSTERIOR_JITTER * eye))
        return post if posterior_transform is None else posterior_transform(post)

    def utility_mean(self, person: int | None, rows: Tensor | None = None) -> Tensor:
        r"""Posterior mean of ``person``'s utility at design rows (default the
        items, or all designs given at construction)."""
        device = self.designs.device
        if rows is None:  # the items, or the designs given at construction
            rows = torch.arange(self.num_initial, device=device)
        rows = check_rows(rows, self.designs.shape[0]).to(device)
        with torch.no_grad(), limited(len(rows)):
            _, offset, phi = self.shared.person_rows(
                self.designs[rows], self.items[rows]
            )
            return offset + phi @ self.posterior_of(person).mean[0]

    def shared_means(self, X: Tensor) -> Tensor:
        r"""Posterior means of the shared utility and the ``K`` tastes at
        ``n x d`` designs: ``(K + 1) x n`` (items looked up by exact match)."""
        with torch.no_grad(), limited(X.shape[0]):
            return self.shared.means(self.shared.basis(X), self.item_ids(X))

    def person_model(
        self, person: int | None, latent: PersonPosterior | None = None
    ) -> PersonModel:
        r"""One person's view as a BoTorch ``Model`` (for EUBO, Thompson); see
        :class:`~prefbo.models.collaborative.person_model.PersonModel`."""
        if person is not None:
            person = self._check_person(person)
        return PersonModel(self, person, latent)

    # ---------------------------------------------------------- training
    def fit(self, **kwargs: Any) -> list[float]:
        r"""Fit the shared part on everyone's answers and refresh every
        person's posterior; see
        :func:`~prefbo.models.collaborative.training.fit_collaborative`."""
        return fit_collaborative(self, **kwargs)
