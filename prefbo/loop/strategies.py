r"""Questioning strategies of the loop, by name.

:class:`~prefbo.loop.PreferentialOptimizer`'s ``strategy`` names a
:class:`Strategy` registered here. Once the initial random questions are
answered, the strategy chooses the new options of each question from the
model conditioned on every answer:

- ``"eubo"``: BoTorch's analytic Expected Utility of the Best Option
  (Lin et al., 2022), pairs only; maximised by ``optimize_acqf`` on
  :class:`~prefbo.acquisition.FastAnalyticEUBO` with
  :func:`~prefbo.acquisition.gen_candidates_eubo` (``acqf_options
  ["optimizer"] = "scipy"``, the default) or by
  :func:`~prefbo.acquisition.maximize_eubo` (``"torch"``);
- ``"qeubo"``: Monte Carlo qEUBO for ``q >= 2`` options;
- ``"bald"``: pairwise BALD (Houlsby et al., 2011) under the model's own
  answer likelihood, :class:`~prefbo.acquisition.PairwiseBALD`, pairs only;
- ``"mes"``: the design of largest max-value entropy of the utility (Wang &
  Jegelka, 2017) on 512 Sobol candidates, against the current best design or
  the kept winner, pairs only;
- ``"ts"``: the current best design, or the kept winner, against ``q - 1``
  Thompson maximisers (:func:`~prefbo.acquisition.thompson_batch`);
- ``"random"``: uniformly random options (no model).

A new strategy subclasses :class:`Strategy` and is added with
:func:`register_strategy`; the optimiser itself does not change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.acquisition.max_value_entropy_search import qMaxValueEntropy
from botorch.acquisition.preference import qExpectedUtilityOfBestOption
from botorch.models.model import Model
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.acquisition import (
    FastAnalyticEUBO,
    PairwiseBALD,
    gen_candidates_eubo,
    maximize_eubo,
    thompson_batch,
)
from prefbo.exceptions import UnsupportedError
from prefbo.loop.model_kinds import ModelKind
from prefbo.loop.options import acqf_scipy_options
from prefbo.loop.registry import Registry
from prefbo.loop.repeats import RepeatRule


@dataclass(frozen=True)
class Question:
    r"""What a strategy chooses the new options of one question from.

    Everything is in the model's coordinates, the unit cube of the
    optimiser's box (the optimiser maps the new options back to the box).

    Attributes:
        model: The model conditioned on every answer so far.
        bounds: ``2 x d`` float64 unit cube ``[0, 1]^d``.
        fixed: ``d`` kept winner, the question's first option, or ``None``.
        num_new: Options to choose: ``q``, or ``q - 1`` beside ``fixed``.
        seed: Seed of this question's random choices, in ``[0, 2**31 - 1)``
            (the torch RNG is also seeded by it).
        options: The optimiser's ``acqf_options``.
        best: Returns the ``d`` told design with the highest posterior mean.
        rule: Which new options the loop asks (:mod:`prefbo.loop.repeats`):
            a strategy passes the candidates its search scored to
            :func:`choose` (or, one at a time, tests them with
            ``rule.allowed``), which skips resolved repeats and asks a
            repeat only when no unasked candidate is nearly as informative.
    """

    model: Model
    bounds: Tensor
    fixed: Tensor | None
    num_new: int
    seed: int
    options: dict[str, Any]
    best: Callable[[], Tensor]
    rule: RepeatRule


class Strategy:
    r"""How the new options of a question are chosen.

    Attributes:
        pair_only: Asks pairs only (``q = 2``).
        uses_model: ``False``: the options are drawn uniformly by the
            optimiser, no model is fitted for them (and ``initial_random``
            may be 0).
        requires: What the model kind must offer, as ``{attribute of
            ModelKind: what it is, in words}`` (e.g. ``{"gaussian_posterior":
            "a Gaussian posterior"}``); checked by :meth:`check`.
    """

    pair_only: bool = False
    uses_model: bool = True
    requires: dict[str, str] = {}

    def check(self, name: str, q: int, model: str, kind: type[ModelKind]) -> None:
        r"""Raise if the strategy cannot serve these settings.

        Args:
            name: The strategy's registered name (for messages).
            q: Options per question.
            model: The model kind's name.
            kind: The model kind.

        Raises:
            UnsupportedError: The combination is not supported.
        """
        if self.pair_only and q != 2:
            raise UnsupportedError(
                f"strategy={name!r} asks pairs only (q=2); got q={q}. Use "
                "strategy='qeubo' for larger choice sets."
            )
        for attribute, what in self.requires.items():
            if not getattr(kind, attribute):
                raise UnsupportedError(
                    f"strategy={name!r} needs {what}, which model={model!r} does "
                    "not provide; use model='ep' or 'laplace'."
                )

    def acquire(self, question: Question) -> Tensor:
        r"""The ``num_new x d`` new options (detached), after ``fixed`` if any,
        that ``question.rule`` lets the loop ask (see :func:`choose`)."""
        raise NotImplementedError


def choose(
    question: Question,
    candidates: Tensor,
    values: Tensor,
    more: Callable[[], tuple[Tensor, Tensor]] | None = None,
) -> Tensor | None:
    r"""The candidate the loop asks, by ``question.rule``
    (:meth:`~prefbo.loop.repeats.RepeatRule.choose`), or ``None``.

    Args:
        question: The question.
        candidates: ``b x num_new x d`` candidate new options.
        values: ``b`` values (higher is better).
        more: Further candidates and values, scored only where the best
            allowed candidate is a repeat none of ``candidates`` replaces.
    """
    return question.rule.choose(candidates, values, more)


def sobol_candidates(
    question: Question,
    score: Callable[[Tensor], Tensor],
    prefix: Tensor | None = None,
    num: int = 1024,
) -> tuple[Tensor, Tensor]:
    r"""``num`` scrambled Sobol candidates (seeded by the question) and their
    scores.

    Args:
        question: The question.
        score: Values of ``b x num_new x d`` candidates (``b``).
        prefix: ``k x d`` options every candidate starts with (e.g. the
            current best), or ``None``.
        num: Number of candidates.

    Returns:
        ``num x num_new x d`` candidates and their ``num`` values.
    """
    d = question.bounds.shape[-1]
    k = 0 if prefix is None else prefix.shape[0]
    m = question.num_new - k
    sobol = SobolEngine(m * d, scramble=True, seed=question.seed)
    lo, hi = question.bounds
    cand = lo + (hi - lo) * sobol.draw(num).to(lo).reshape(num, m, d)
    if prefix is not None:
        cand = torch.cat([prefix.expand(num, k, d), cand], dim=-2)
    with torch.no_grad():
        values = score(cand)
    return cand, values


def sobol_fallback(
    question: Question,
    score: Callable[[Tensor], Tensor],
    prefix: Tensor | None = None,
    num: int = 1024,
) -> Tensor:
    r"""The new options of highest ``score`` that the question's rules allow
    among ``num`` scrambled Sobol draws (:func:`sobol_candidates`); the draw
    of highest ``score`` if the rules allow none.

    A strategy may use it as its whole search (score ``b x num_new x d``
    candidates, return ``b`` values), or as the fallback after an optimiser
    whose candidates the rules refused.
    """
    cand, values = sobol_candidates(question, score, prefix, num)
    found = choose(question, cand, values)
    return cand[int(values.argmax())] if found is None else found


def choose_or_fallback(
    question: Question,
    candidates: Tensor,
    values: Tensor,
    score: Callable[[Tensor], Tensor],
    prefix: Tensor | None = None,
) -> Tensor:
    r"""The optimised candidate the rule asks, with the Sobol draws
    (:func:`sobol_candidates`) as its further candidates; the Sobol fallback
    if none of the optimised candidates is allowed.

    Args:
        question: The question.
        candidates: ``b x num_new x d`` optimised candidates.
        values: Their ``b`` values.
        score: The values of ``b' x num_new x d`` candidates (``b'``).
        prefix: ``k x d`` options every Sobol candidate starts with.
    """
    found = choose(
        question,
        candidates,
        values,
        more=lambda: sobol_candidates(question, score, prefix),
    )
    return sobol_fallback(question, score, prefix) if found is None else found


class _FixedFirst(AcquisitionFunction):
    r"""``acqf`` of ``[fixed, X]``: optimise the other options of a question."""

    def __init__(self, acqf: AcquisitionFunction, fixed: Tensor) -> None:
        super().__init__(model=acqf.model)
        self.acqf = acqf
        self.fixed = fixed  # d

    @t_batch_mode_transform()
    def forward(self, X: Tensor) -> Tensor:  # noqa: D102
        F = self.fixed.expand(*X.shape[:-2], 1, X.shape[-1])  # b x 1 x d
        return self.acqf(torch.cat([F, X], dim=-2))  # b x q x d


class AcquisitionStrategy(Strategy):
    r"""A strategy maximising a BoTorch acquisition function over the new
    options with ``optimize_acqf`` (a kept winner held fixed)."""

    def acquisition(
        self, question: Question
    ) -> tuple[AcquisitionFunction, Tensor | None]:
        r"""The acquisition function and the option it does not handle
        itself (``question.fixed``, or ``None``)."""
        raise NotImplementedError

    def acquire(self, question: Question) -> Tensor:  # noqa: D102
        o = question.options
        acqf, fixed = self.acquisition(question)
        if fixed is not None:
            acqf = _FixedFirst(acqf, fixed)
        cand, values = optimize_acqf(
            acqf,
            bounds=question.bounds,
            q=question.num_new,
            num_restarts=o["num_restarts"],
            raw_samples=o["raw_samples"],
            options=acqf_scipy_options(o, question.seed),
            # BoTorch's L-BFGS-B on the written-out EUBO value and gradient
            # (gen_candidates_scipy's iterates, to rounding; qEUBO, BALD and
            # the fixed-first wrapper go to gen_candidates_scipy itself)
            gen_candidates=gen_candidates_eubo,
            return_best_only=False,
        )
        cand, values = cand.detach(), values.detach()  # restarts x num_new x d
        return choose_or_fallback(question, cand, values, acqf)


class EUBO(AcquisitionStrategy):
    r"""Analytic EUBO of a pair (BoTorch's values, from pair moments)."""

    pair_only = True

    def acquisition(self, question):  # noqa: D102
        fixed = question.fixed
        acqf = FastAnalyticEUBO(
            question.model,
            previous_winner=None if fixed is None else fixed.unsqueeze(0),
        )
        return acqf, None  # the kept winner is BoTorch's previous_winner

    def acquire(self, question):  # noqa: D102
        o = question.options
        if o["optimizer"] != "torch":
            return super().acquire(question)
        new = maximize_eubo(
            question.model,
            question.bounds,
            previous_winner=question.fixed,
            raw_samples=o["raw_samples"],
            num_restarts=o["num_restarts"],
            num_steps=o["maxiter"],
            seed=question.seed,
        ).detach()
        acqf = self.acquisition(question)[0]
        with torch.no_grad():
            value = acqf(new.unsqueeze(0))  # 1
        return choose_or_fallback(question, new.unsqueeze(0), value, acqf)


class QEUBO(AcquisitionStrategy):
    r"""Monte Carlo qEUBO on ``mc_samples`` scrambled Sobol normal draws."""

    def acquisition(self, question):  # noqa: D102
        sampler = SobolQMCNormalSampler(
            torch.Size([question.options["mc_samples"]]), seed=question.seed
        )
        acqf = qExpectedUtilityOfBestOption(pref_model=question.model, sampler=sampler)
        return acqf, question.fixed


class BALD(AcquisitionStrategy):
    r"""Pairwise BALD under the model's own answer noise (BoTorch's assumes
    a unit noise scale)."""

    pair_only = True

    def acquisition(self, question):  # noqa: D102
        return PairwiseBALD(question.model), question.fixed


class MaxValueEntropy(Strategy):
    r"""The design of largest max-value entropy against the best or kept one."""

    pair_only = True
    requires = {"gaussian_posterior": "a Gaussian posterior"}

    def acquire(self, question):  # noqa: D102
        o, bounds, seed = question.options, question.bounds, question.seed
        sobol = SobolEngine(bounds.shape[-1], scramble=True, seed=seed)
        lo, hi = bounds
        candidates = lo + (hi - lo) * sobol.draw(512).to(bounds)  # 512 x d
        acqf = qMaxValueEntropy(question.model, candidate_set=candidates)
        x, values = optimize_acqf(
            acqf,
            bounds=bounds,
            q=1,
            num_restarts=o["num_restarts"],
            raw_samples=o["raw_samples"],
            options=acqf_scipy_options(o, seed),
            return_best_only=False,
        )
        x, values = x.detach(), values.detach()  # restarts x 1 x d
        if question.fixed is not None:
            return choose_or_fallback(question, x, values, acqf)
        best = question.best().unsqueeze(0)  # the current best against the new
        pairs = torch.cat([best.expand_as(x), x], -2)  # restarts x 2 x d
        return choose_or_fallback(
            question, pairs, values, lambda X: acqf(X[..., 1:, :]), best
        )


class Thompson(Strategy):
    r"""The best or kept design against Thompson maximisers (pathwise
    posterior samples maximised by batched ascent)."""

    requires = {"pathwise_samples": "pathwise samples"}
    # Thompson draws tried while the first is not allowed or is a repeat
    # (the rule of prefbo.loop.repeats chooses among them, earlier first)
    max_draws = 4

    def acquire(self, question):  # noqa: D102
        o, fixed = question.options, question.fixed
        k = question.num_new if fixed is not None else question.num_new - 1
        best = None if fixed is not None else question.best().unsqueeze(0)
        draws = []
        for draw in range(self.max_draws):
            cand = thompson_batch(
                question.model,
                question.bounds,
                k,
                raw_samples=o["raw_samples"],
                num_restarts=o["num_restarts"],
                num_steps=o["maxiter"],
                seed=question.seed + draw,
            ).detach()
            if best is not None:
                cand = torch.cat([best, cand])  # num_new x d
            draws.append(cand)
            if question.rule.allowed(cand) and not question.rule.is_repeat(cand):
                return cand
        values = -torch.arange(len(draws), dtype=draws[0].dtype)  # earlier first
        found = choose(question, torch.stack(draws), values)
        return draws[0] if found is None else found  # none allowed: the first


class Random(Strategy):
    r"""Uniformly random options (drawn by the optimiser; no model)."""

    uses_model = False


STRATEGIES: Registry[Strategy] = Registry(
    "strategy",
    "strategy",
    "a Strategy instance",
    lambda entry: isinstance(entry, Strategy),
    {
        "eubo": EUBO(),
        "qeubo": QEUBO(),
        "bald": BALD(),
        "mes": MaxValueEntropy(),
        "ts": Thompson(),
        "random": Random(),
    },
)


def register_strategy(name: str, strategy: Strategy) -> None:
    r"""Make ``strategy`` available as ``PreferentialOptimizer(strategy=name)``.

    Strategies hold no state of an optimiser, so one instance serves all.

    Args:
        name: A new name.
        strategy: A :class:`Strategy` instance.

    Raises:
        InputTypeError: ``name`` is not a string or ``strategy`` not a
            :class:`Strategy`.
        InputDataError: ``name`` is already registered.
    """
    STRATEGIES.register(name, strategy)


def strategy_names() -> tuple[str, ...]:
    r"""The registered strategies' names, in order of registration."""
    return STRATEGIES.names()


def get_strategy(name: str) -> Strategy:
    r"""The strategy registered as ``name``.

    Raises:
        InputTypeError: ``name`` is not a string.
        InputDataError: No strategy has that name.
    """
    return STRATEGIES.get(name)
