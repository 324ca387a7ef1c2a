r"""Choice-function likelihoods with ``d`` latent utilities.

A person shown an option set ``A`` picks a non-empty subset ``C ⊆ A``; the
rest ``R = A \ C`` is rejected. With ``d`` utilities, independent noise σ per
utility and ``P(o ≻ v) := Π_i Φ((u_i(o) − u_i(v)) / s)``, ``s = √2·σ``:

- rational (Pareto) choice:
  ``Π_{o,v ∈ C, unordered} (1 − P(o ≻ v) − P(v ≻ o))
  · Π_{v ∈ R} (1 − Π_{o ∈ C} (1 − P(o ≻ v)))``
  — no chosen option dominates another, and every rejected option is
  dominated by some chosen one;
- pseudo-rational choice: the same first product, times
  ``Π_{v ∈ R} Π_i (1 − Π_{o ∈ C} Φ((u_i(v) − u_i(o)) / s))`` — no rejected
  option beats every chosen one in any single utility.

Note on the first product: it is the Pareto conflict probability
(:mod:`prefbo.likelihoods.pareto`) for every unordered chosen pair. Writing
it over ordered pairs, ``Π_{o ≠ v} (1 − P(o ≻ v))``, would overstate it by
``P(o ≻ v)P(v ≻ o)`` (the two dominations are mutually exclusive). With one
utility two chosen options are impossible (probability 0); such
data raise :class:`~prefbo.exceptions.UnsupportedError`.
"""

from __future__ import annotations

from abc import abstractmethod

import torch
from torch import Tensor

from prefbo.data.containers import ChoiceSets
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.likelihoods.base import (
    AnswerIndex,
    PreferenceLikelihood,
    check_index_tensor,
)
from prefbo.utils.logspace import log1m_prod_ndtr, log_any, log_pareto_conflict


class ChoiceLikelihood(PreferenceLikelihood):
    r"""Base class of likelihoods of chosen subsets of option sets.

    Answers (for :meth:`choice_log_prob`, :meth:`log_prob_answers`,
    :meth:`expected_log_prob_answers`, :meth:`log_marginal_answers`):

    - ``option_sets``: a ``k x s`` long tensor of design indices, padded with
      ``-1`` (anywhere in a row);
    - ``chosen``: a ``k x s`` bool tensor, ``True`` for chosen options
      (``False`` on padding; at least one per set).

    Utilities are ``batch_shape x n x d``; results are ``batch_shape x k``.
    Expectations use QMC over the ``s·d`` latents of each set. Subclasses
    implement :meth:`_log_prob_rejected`.

    The log marginal ``log E_q[p(C | A, u)]`` has no closed form and is the
    log of a plain (scrambled Sobol) QMC mean of ``p``: its error falls
    with ``num_samples`` (roughly as ``1/S``), but for an answer that is
    unlikely under ``q`` (``p`` dominated by rare latent configurations,
    e.g. small ``noise_std`` against a wide ``q``) the estimate is biased
    low until enough points reach those configurations; raise
    ``num_samples`` there.
    """

    data_type = ChoiceSets

    def choice_log_prob(
        self, utilities: Tensor, option_sets: Tensor, chosen: Tensor
    ) -> Tensor:
        r"""Log-probability of each choice given the utilities.

        Args:
            utilities: A ``batch_shape x n x d`` tensor of utilities at the
                designs.
            option_sets: A ``k x s`` long tensor of design indices, ``-1``
                padded.
            chosen: A ``k x s`` bool tensor marking the chosen options.

        Returns:
            A ``batch_shape x k`` tensor of ``log p(C_k | A_k, u)``.
        """
        return self.log_prob_answers(utilities, option_sets, chosen)

    def _index(
        self,
        num_designs: int,
        num_outputs: int,
        option_sets: Tensor,
        chosen: Tensor,
    ) -> AnswerIndex:
        option_sets = check_index_tensor(
            option_sets, "option_sets", num_designs, padding=True, shape_text="k x s"
        )
        if not isinstance(chosen, Tensor) or chosen.dtype != torch.bool:
            got = chosen.dtype if isinstance(chosen, Tensor) else type(chosen).__name__
            raise InputTypeError(f"chosen must be a k x s bool tensor; got {got}.")
        if chosen.shape != option_sets.shape:
            raise InputDataError(
                f"chosen must have option_sets' shape {tuple(option_sets.shape)}; got "
                f"{tuple(chosen.shape)}."
            )
        valid = option_sets >= 0  # k x s
        ranked = option_sets.sort(-1).values
        dup = (ranked[:, 1:] == ranked[:, :-1]) & (ranked[:, 1:] >= 0)
        if bool(dup.any()):
            row = int(dup.any(-1).nonzero()[0])
            raise InputDataError(
                f"option_sets must list distinct designs in a row (-1 padding "
                f"aside); row {row} is {option_sets[row].tolist()}."
            )
        if bool((chosen & ~valid).any()):
            row = int((chosen & ~valid).any(-1).nonzero()[0])
            raise InputDataError(
                f"chosen must be False on padding (-1) entries of option_sets; row "
                f"{row} marks a padding entry as chosen."
            )
        count = chosen.sum(-1)  # k
        if bool((count == 0).any()):
            row = int((count == 0).nonzero()[0])
            raise InputDataError(
                f"chosen must mark at least one option of every set; row {row} has "
                "none chosen."
            )
        if num_outputs == 1 and bool((count > 1).any()):
            row = int((count > 1).nonzero()[0])
            raise UnsupportedError(
                f"with d=1 utility two chosen options have probability 0; row {row} "
                f"has {int(count[row])} chosen. Use utilities with d >= 2."
            )
        d, s = num_outputs, option_sets.shape[-1]
        designs = option_sets.clamp_min(0).repeat_interleave(d, dim=-1)  # k x s*d
        outputs = torch.arange(d, device=option_sets.device).repeat(s)
        return AnswerIndex(
            designs=designs,
            outputs=outputs.expand_as(designs),
            mask=valid.repeat_interleave(d, dim=-1),
            extra=torch.stack([chosen, valid & ~chosen], dim=0),  # 2 x k x s
        )

    def _log_prob_latents(self, latents: Tensor, index: AnswerIndex) -> Tensor:
        chosen, rejected = index.extra[0], index.extra[1]  # k x s
        s = chosen.shape[-1]
        u = latents.unflatten(-1, (s, -1))  # ... x k x s x d
        # z[..., o, v, i] = (u_i(o) - u_i(v)) / s
        z = (u.unsqueeze(-2) - u.unsqueeze(-3)) / self.scale  # ... x k x s x s x d
        logp = self._log_prob_rejected(z, chosen, rejected)  # ... x k
        if u.shape[-1] > 1:
            upper = torch.ones(s, s, dtype=torch.bool, device=chosen.device).triu(1)
            pairs = chosen.unsqueeze(-1) & chosen.unsqueeze(-2) & upper  # k x s x s
            if bool(pairs.any()):
                conflict = log_pareto_conflict(z)  # ... x k x s x s
                logp = logp + torch.where(pairs, conflict, 0.0).sum((-1, -2))
        return logp

    @abstractmethod
    def _log_prob_rejected(self, z: Tensor, chosen: Tensor, rejected: Tensor) -> Tensor:
        r"""Log-probability of the rejections.

        Args:
            z: ``... x k x s x s x d`` standardised differences,
                ``z[..., o, v, i] = (u_i(o) − u_i(v)) / s``.
            chosen: ``k x s`` bool.
            rejected: ``k x s`` bool (valid and not chosen).

        Returns:
            A ``... x k`` tensor.
        """


class RationalChoiceLikelihood(ChoiceLikelihood):
    r"""Rational (Pareto) choice: every rejected option is dominated by a chosen one."""

    def _log_prob_rejected(self, z: Tensor, chosen: Tensor, rejected: Tensor) -> Tensor:
        # P(o ≻ v) = Π_i Φ(z[o, v, i]); its complement without cancellation
        log_dom = torch.special.log_ndtr(z).sum(-1)  # ... x k x s(o) x s(v)
        log_not_dom = log1m_prod_ndtr(z)  # ... x k x s(o) x s(v)
        # log(1 − Π_{o ∈ C} (1 − P(o ≻ v))), events indexed by o (last dim)
        mask = chosen.unsqueeze(-2)  # k x 1 x s(o)
        per_v = log_any(
            log_dom.transpose(-1, -2), log_not_dom.transpose(-1, -2), mask
        )  # ... x k x s(v)
        return torch.where(rejected, per_v, 0.0).sum(-1)


class PseudoRationalChoiceLikelihood(ChoiceLikelihood):
    r"""Pseudo-rational choice: no rejected option wins a utility against all chosen."""

    def _log_prob_rejected(self, z: Tensor, chosen: Tensor, rejected: Tensor) -> Tensor:
        # per v and i: log(1 − Π_{o ∈ C} Φ((u_i(v) − u_i(o)) / s)), Φ(−z[o, v, i])
        zt = (-z).permute(*range(z.ndim - 3), -2, -1, -3)  # ... x k x s(v) x d x s(o)
        mask = chosen.unsqueeze(-2).unsqueeze(-2)  # k x 1 x 1 x s(o)
        per_v = log1m_prod_ndtr(zt, mask).sum(-1)  # ... x k x s(v)
        return torch.where(rejected, per_v, 0.0).sum(-1)
