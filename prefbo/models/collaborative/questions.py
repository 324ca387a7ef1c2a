r"""Questions for many people at once from a collaborative preference model.

One batched step gives each of ``B`` people the pair of candidates to ask
next, from their own posterior (a newcomer's is the population's, so their
first question is already informed):

- ``"eubo"``: the pair with the highest expected utility of the best option,
  ``E max(f_a, f_b)`` (Lin et al. 2022, "Preference exploration for
  efficient Bayesian optimization with multiple outcomes"), in closed form
  for a Gaussian pair: with ``s² = Var(f_a − f_b)`` and
  ``γ = (μ_a − μ_b)/s``, ``E max = μ_b + (μ_a − μ_b) Φ(γ) + s φ(γ)``;
- ``"thompson"``: the maxima of two draws of the person's utility over the
  candidates (the second draw's maximum among the others).

The people's posteriors over all ``C`` candidates come from one call of
:meth:`~prefbo.models.collaborative.CollaborativePreferenceGP.moments`:
``O(B C² D)`` time and ``B C²`` memory, taken in chunks of people. They are
computed in float64 whatever the model's dtype (the model's features at the
candidates and the people's posteriors are cast): a pair's difference
variance ``v_a + v_b − 2 c_ab`` is small where the two candidates are near
or the person's posterior is sharp, below float32's rounding of ``v``, and
Thompson's draws need the Cholesky factor of a near-singular table.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError
from prefbo.models.collaborative.checks import check_person_ids
from prefbo.models.collaborative.people import PersonPosterior
from prefbo.utils.checks import describe
from prefbo.utils.threads import limited

STRATEGIES = ("eubo", "thompson")
#: Entries of the ``B x C x C`` pair tables (float64) built at once.
CHUNK_ENTRIES = 4_000_000


def pair_eubo(mean: Tensor, cov: Tensor) -> Tensor:
    r"""``E max(f_a, f_b)`` for all pairs: ``B x C x C`` from means ``B x C``
    and covariances ``B x C x C`` (the diagonal: ``μ_a``), in their dtype
    (near pairs' difference variances ``v_a + v_b − 2 c_ab`` need float64
    covariances: from float32 ones they are rounding noise)."""
    var = cov.diagonal(dim1=-2, dim2=-1)
    diff_var = (var.unsqueeze(-1) + var.unsqueeze(-2) - 2 * cov).clamp_min(0)
    s = diff_var.sqrt()
    gap = mean.unsqueeze(-1) - mean.unsqueeze(-2)  # B x C x C: μ_a − μ_b
    gamma = gap / s.clamp_min(1e-30)
    pdf = torch.exp(-0.5 * gamma**2) / math.sqrt(2 * math.pi)
    value = mean.unsqueeze(-2) + gap * torch.special.ndtr(gamma) + s * pdf
    return torch.where(
        s > 0, value, torch.maximum(mean.unsqueeze(-1), mean.unsqueeze(-2))
    )


def _best_pairs(mean: Tensor, cov: Tensor, exclude: Tensor) -> Tensor:
    B, C = mean.shape
    value = pair_eubo(mean, cov)
    upper = torch.ones(C, C, dtype=torch.bool, device=mean.device).triu(1)
    value = value.masked_fill(~upper, float("-inf"))
    rows = (exclude >= 0).all(-1).nonzero().squeeze(-1)
    low, high = exclude[rows].min(-1).values, exclude[rows].max(-1).values
    value[rows, low, high] = float("-inf")  # the pair on screen
    flat = value.reshape(B, -1).argmax(-1)
    return torch.stack([flat // C, flat % C], -1)


def _sqrt_table(cov: Tensor) -> Tensor:
    r"""``B x C x C`` factors ``L`` with ``L Lᵀ = cov``: Cholesky's, or
    where rounding left a table indefinite (Cholesky fails), the symmetric
    root of its nearest positive semi-definite table (negative eigenvalues
    set to 0)."""
    L, info = torch.linalg.cholesky_ex(cov)
    failed = (info > 0).nonzero().squeeze(-1)
    if failed.numel():
        values, vectors = torch.linalg.eigh(cov[failed])
        L[failed] = vectors * values.clamp_min(0).sqrt().unsqueeze(-2)
    return L


def _thompson_pairs(
    mean: Tensor, cov: Tensor, generator: torch.Generator, exclude: Tensor
) -> Tensor:
    B, C = mean.shape
    eye = torch.eye(C, dtype=cov.dtype, device=cov.device)
    jitter = 1e-9 * cov.diagonal(dim1=-2, dim2=-1).mean(-1).clamp_min(1e-12)
    L = _sqrt_table(cov + jitter.view(-1, 1, 1) * eye)
    noise = torch.randn(B, C, 2, generator=generator, dtype=mean.dtype)
    draws = mean.unsqueeze(-1) + L @ noise.to(mean.device)  # B x C x 2
    first = draws[..., 0].argmax(-1)
    taken = draws[..., 1].scatter(-1, first.unsqueeze(-1), float("-inf"))
    # the pair on screen: its other design is no second option for the first
    on = (exclude >= 0).all(-1) & (exclude == first.unsqueeze(-1)).any(-1)
    partner = exclude.sum(-1) - first
    rows = on.nonzero().squeeze(-1)
    taken[rows, partner[rows]] = float("-inf")
    second = taken.argmax(-1)
    return torch.stack([first, second], -1)


def next_questions(
    model,
    people: Tensor,
    candidates: Tensor,
    strategy: str = "eubo",
    items: Tensor | None = None,
    seed: int = 0,
    latent: PersonPosterior | None = None,
    exclude: Tensor | None = None,
) -> Tensor:
    r"""Each person's next pair of candidates, in one batched step.

    Args:
        model: A fitted
            :class:`~prefbo.models.collaborative.CollaborativePreferenceGP`.
        people: ``B`` long ids (each below ``model.num_people``).
        candidates: ``C x d`` designs to choose from (``C ≥ 2``).
        strategy: ``"eubo"`` or ``"thompson"``.
        items: ``C`` item ids of the candidates (``-1``: none; default
            looked up by exact match).
        seed: Seed of Thompson's draws.
        latent: The ``B`` people's posteriors to use instead of their stored
            ones (e.g. :func:`imagined_posteriors`, a look-ahead).
        exclude: ``B x 2`` candidate indices of a pair each person must not
            be asked (the question on their screen), in either order;
            ``-1``: none.

    Returns:
        ``B x 2`` long indices into ``candidates``, distinct in each row.

    Raises:
        InputTypeError: ``people`` is not an integer tensor.
        InputDataError: An unknown strategy, fewer than 2 candidates, or an id
            out of range.
    """
    if strategy not in STRATEGIES:
        raise InputDataError(f"strategy must be one of {STRATEGIES}; got {strategy!r}.")
    people = check_person_ids(people, model.num_people)
    d = model.designs.shape[-1]
    if (
        not isinstance(candidates, Tensor)
        or not candidates.is_floating_point()
        or candidates.ndim != 2
        or candidates.shape[-1] != d
    ):
        raise InputDataError(
            f"candidates must be a C x {d} floating tensor; got {describe(candidates)}."
        )
    if not bool(torch.isfinite(candidates).all()):
        raise InputDataError("candidates must be finite; got NaN or inf.")
    if items is None:
        items = model.item_ids(candidates)
    candidates = candidates.to(model.designs)
    C = candidates.shape[0]
    if C < 2:
        raise InputDataError(f"candidates must hold at least 2 designs; got {C}.")
    people = people.to(model.designs.device)
    items = items.long().to(model.designs.device)
    if items.shape != (C,) or int(items.max()) >= max(model.num_items, 1):
        raise InputDataError(
            f"items must hold one id per candidate ({C}), each below "
            f"{max(model.num_items, 1)} or -1; got {describe(items)}."
        )
    if latent is None:
        latent = PersonPosterior(
            model.latent_mean[people], model.latent_precision_chol[people]
        )
    elif latent.mean.shape != (len(people), model.latent_dim):
        raise InputDataError(
            f"latent must hold the posteriors of the {len(people)} people "
            f"({len(people)} x {model.latent_dim}); got means of shape "
            f"{tuple(latent.mean.shape)}."
        )
    if exclude is None:
        exclude = torch.full((len(people), 2), -1, dtype=torch.long)
    exclude = exclude.long().to(model.designs.device)
    if exclude.shape != (len(people), 2) or (len(exclude) and int(exclude.max()) >= C):
        raise InputDataError(
            f"exclude must be {len(people)} x 2 candidate indices below {C} (-1: "
            f"none); got {describe(exclude)}."
        )
    generator = torch.Generator().manual_seed(seed)
    device = model.designs.device
    chunk = max(1, CHUNK_ENTRIES // (C * C))
    out = []
    with torch.no_grad(), limited(len(people) * C):
        for start in range(0, len(people), chunk):
            part = PersonPosterior(  # float64: the moments' dtype
                latent.mean[start : start + chunk].to(device, torch.float64),
                latent.precision_chol[start : start + chunk].to(device, torch.float64),
            )
            mean, cov = model.moments(candidates.unsqueeze(0), part, items.unsqueeze(0))
            mean, cov = mean[:, 0], cov[:, 0]  # B x C, B x C x C
            if strategy == "eubo":
                out.append(_best_pairs(mean, cov, exclude[start : start + chunk]))
            else:
                out.append(
                    _thompson_pairs(
                        mean, cov, generator, exclude[start : start + chunk]
                    )
                )
    if not out:
        return torch.zeros(0, 2, dtype=torch.long, device=candidates.device)
    return torch.cat(out)


def believed_answers(model, people: Tensor, options: Tensor) -> Tensor:
    r"""The option each of ``B`` people more likely prefers: ``B`` indices
    of the highest posterior mean among their ``B x q x d`` ``options`` (the
    "kriging believer" answer to a question not answered yet; Ginsbourger
    et al. 2010)."""
    people = people.long().to(model.designs.device)
    items = model.item_ids(options.reshape(-1, options.shape[-1]))
    options = options.to(model.designs)
    with torch.no_grad(), limited(options.shape[0] * options.shape[1]):
        latent = PersonPosterior(
            model.latent_mean[people], model.latent_precision_chol[people]
        )
        _, offset, phi = model.shared.person_rows(
            options.reshape(-1, options.shape[-1]), items
        )
        B, q = options.shape[:2]
        mean = offset.reshape(B, q) + (
            phi.reshape(B, q, -1) @ latent.mean.unsqueeze(-1)
        ).squeeze(-1)
    return mean.argmax(-1)


def imagined_posteriors(
    model, people: Tensor, winners: Tensor, losers: Tensor, mask: Tensor | None = None
) -> PersonPosterior:
    r"""The posteriors ``B`` people would have after ``k`` more answers each
    (``B`` or ``B x k`` winner and loser design rows; ``mask``: ``B x k``,
    which of them count, default all, so people of fewer answers are
    padded), at the current shared functions, without storing the answers:
    what :meth:`observe` would store, for a question made before the answer
    to the one on screen is known, or made with virtual comparisons that
    only its answer keeps."""
    people = people.long().to(model.designs.device)
    with torch.no_grad(), limited(len(people) * 16):
        batch = model.answers.gather(people)
        winners = winners.reshape(len(people), -1).to(people)
        losers = losers.reshape(len(people), -1).to(people)
        if mask is None:
            extra = torch.ones_like(winners, dtype=torch.bool)
        else:
            extra = mask.reshape(winners.shape).to(people.device, torch.bool)
        W = torch.cat([batch.winners, winners], -1)
        L = torch.cat([batch.losers, losers], -1)
        delta, offset = model.answer_rows(W, L)
        mask = torch.cat([batch.mask, extra], -1)
        return model.infer_people(people, delta, offset, mask)
