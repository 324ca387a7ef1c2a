r"""One question maker: a strategy's question under a model, over a box.

A :class:`QuestionMaker` turns a model, the rule against questions not worth
asking (:class:`~prefbo.loop.repeats.RepeatRule`, which holds the model and
the questions asked so far) and a seed into the next question: the
strategy's options (:func:`~prefbo.loop.spaces.choose_options`, under an
RNG seeded by that seed), or uniformly random ones where the strategy finds
nothing the rule allows, or before the model is used. It is what
:class:`~prefbo.loop.PreferentialOptimizer` asks with (``opt.question_maker``)
and what :class:`~prefbo.loop.PopulationStudy` asks each participant with
(a participant's view of the population model as the model), so the same
model, rule and seed give the same question to either.

Under a :class:`~prefbo.models.collaborative.CollaborativePreferenceGP`,
which gives every person a posterior of their own, :meth:`QuestionMaker.for_people`
makes the questions of many people at once
(:mod:`prefbo.loop.people_questions`): what the collaborative kind of a
study asks each participant with, and ``prefbo serve``'s collaborative kind
every waiting participant.

Example:
    >>> maker = QuestionMaker(DesignBox(bounds), "eubo", q=2)
    >>> X, fallback = maker.from_model(RepeatRule(model, asked), seed, best)
    >>> asked = maker.for_people(collaborative, torch.tensor([0, 3]), seed=seed)
    >>> asked.questions, asked.virtual     # 2 x 2 x d, and what each carries
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from prefbo.exceptions import UnsupportedError
from prefbo.loop.boundary import DEFAULT_STEP
from prefbo.loop.box import DesignBox
from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.fitted import seeded
from prefbo.loop.options import DEFAULT_ACQF_OPTIONS, SEED_MOD
from prefbo.loop.people_checks import check_people, check_virtual
from prefbo.loop.people_questions import (
    BATCHED_STRATEGIES,
    CANDIDATES,
    PeopleQuestions,
    ask_people,
    candidates,
)
from prefbo.loop.repeats import RepeatRule
from prefbo.loop.spaces import choose_options, takes_exact
from prefbo.loop.strategies import Question, Strategy, get_strategy
from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.utils.checks import check_seed
from prefbo.utils.seeds import batch_question_seed


class QuestionMaker:
    r"""The questions of one strategy over one box (see the module docstring).

    Args:
        box: The designs' box and the models' coordinates of them.
        strategy: A registered strategy's name
            (:mod:`prefbo.loop.strategies`).
        q: Options per question (checked by the caller against the
            strategy, as :class:`~prefbo.loop.settings.LoopSettings` does).
        acqf_options: The acquisition maximiser's options, complete (as
            :func:`~prefbo.loop.options.acqf_options` gives them); default
            :data:`~prefbo.loop.options.DEFAULT_ACQF_OPTIONS`.
        keep_winner: Whether every question starts with a kept winner (a
            finite space's pairs are then not enumerated).
        inset: The step of the virtual comparisons at the faces that keep
            the questions off them, in units of the continuous variables'
            ranges (:func:`~prefbo.loop.person_question.ask_person`'s and
            :meth:`for_people`'s; :meth:`candidates` within this step of a
            face lie on it); ``None``: the whole box as it comes, no
            comparisons.

    Raises:
        InputDataError: An unknown strategy.
    """

    def __init__(
        self,
        box: DesignBox,
        strategy: str,
        q: int = 2,
        acqf_options: dict[str, Any] | None = None,
        keep_winner: bool = False,
        inset: float | None = DEFAULT_STEP,
    ) -> None:
        self.box = box
        self.inset = inset
        self.strategy_name = strategy
        self.strategy: Strategy = get_strategy(strategy)
        self.q = q
        self.acqf_options = dict(
            DEFAULT_ACQF_OPTIONS if acqf_options is None else acqf_options
        )
        # a finite space's pairs enumerated (prefbo.loop.spaces)
        self.exact = takes_exact(box.space, strategy, q, keep_winner)

    @property
    def uses_model(self) -> bool:
        r"""Whether the strategy's questions come from a model (else every
        question is :meth:`random`)."""
        return self.strategy.uses_model

    def random(self, seed: int, fixed: Tensor | None = None) -> Tensor:
        r"""A question of uniformly random designs.

        Args:
            seed: The question's seed.
            fixed: The ``d`` design the question starts with (a kept
                winner), or ``None``.

        Returns:
            The ``q x d`` float64 question: ``fixed`` (if any), then new
            designs drawn by :meth:`DesignBox.uniform
            <prefbo.loop.box.DesignBox.uniform>` (none equal to ``fixed``).
        """
        new = self.box.uniform(self.q - (fixed is not None), seed, fixed)
        return self._with(fixed, new)

    def from_model(
        self,
        rule: RepeatRule,
        seed: int,
        best: Callable[[], Tensor],
        fixed: Tensor | None = None,
    ) -> tuple[Tensor, bool]:
        r"""The strategy's question under ``rule.model``.

        Args:
            rule: The rule against questions not worth asking, holding the
                model (inputs in the box's model coordinates), the questions
                asked and ``rule.fixed``, ``fixed`` as a model input.
            seed: The question's seed: the strategy runs under the CPU RNG
                seeded by it, and a random question is drawn with it.
            best: The current recommendation as a ``d`` model input (called
                only by the strategies that use it).
            fixed: The ``d`` design every question starts with (a kept
                winner), or ``None``.

        Returns:
            ``(question, fallback)``: the ``q x d`` float64 question
            (``fixed`` first, if any) and whether it is a random one
            because the strategy found nothing the rule allows.
        """
        num_new = self.q - (fixed is not None)
        question = Question(
            model=rule.model,
            bounds=self.box.model_bounds,
            fixed=rule.fixed,
            num_new=num_new,
            seed=seed % SEED_MOD,
            options=self.acqf_options,
            best=best,
            rule=rule,
        )
        with seeded(seed), expected_fit_warnings():
            new = choose_options(
                self.strategy_name, self.strategy, question, self.box.space, self.exact
            )
        if new is not None and rule.allowed(new):
            return self._with(fixed, self.box.from_model(new)), False
        return self.random(seed, fixed), True

    def candidates(self, seed: int, count: int = CANDIDATES) -> Tensor:
        r"""Distinct designs of the box to choose :meth:`for_people`'s
        questions from (:func:`~prefbo.loop.people_questions.candidates`).

        Args:
            seed: The draw's seed.
            count: How many to draw where the box's designs are not listed
                (a box, or a space of more than
                :data:`~prefbo.loop.people_questions.LISTED`).

        Returns:
            ``C x d`` float64 designs in the box's model coordinates (the
            unit cube; a space's model points).
        """
        X = candidates(self.box.space, self.box.dim, seed, count, self.inset)
        return X if self.box.unit_cube else self.box.from_unit(X)

    def for_people(
        self,
        model: CollaborativePreferenceGP,
        people: Tensor,
        shown: Sequence[Tensor | None] | None = None,
        seed: int = 0,
        shown_virtual: Sequence[Tensor | None] | None = None,
        asked: Sequence[Tensor | None] | None = None,
    ) -> PeopleQuestions:
        r"""The next questions of ``B`` people of a collaborative model, in
        one batched step (:mod:`prefbo.loop.people_questions`).

        The strategy ``"eubo"`` asks each person the pair of
        :meth:`candidates` of highest EUBO at their posterior, ``"ts"`` the
        best pair of a Thompson draw of it
        (:func:`~prefbo.loop.people_questions.ask_people`), with virtual
        comparisons at the box's faces (step: the maker's ``inset``;
        ``None``: none); a person looking at a question is asked at the
        posterior after the comparisons it carries and the answer their
        model finds likelier, and not that question again; a question that
        repeats one the person answered (``asked``) is asked only as the
        single-person loop's repeat rule allows
        (:func:`~prefbo.loop.people_questions.repeat_rule`). A strategy that
        uses no model (``"random"``) asks :meth:`random` questions, the
        ``b``-th of seed :func:`~prefbo.utils.seeds.batch_question_seed`.

        Args:
            model: The collaborative model, its inputs the box's model
                coordinates.
            people: ``B`` long person ids of ``model`` (a newcomer added
                with ``model.add_person()`` first).
            shown: ``B`` entries: the ``2 x d`` options (model coordinates)
                of the question on person ``b``'s screen, or ``None``;
                default ``None`` for everyone.
            seed: The step's seed: the candidates' draw and Thompson's.
            shown_virtual: ``B`` entries: the ``k x 2 x d`` virtual
                comparisons (model coordinates) the question on person
                ``b``'s screen carries, or ``None``; default ``None`` for
                everyone.
            asked: ``B`` entries: the ``k x 2 x d`` questions (model
                coordinates) person ``b`` answered, or ``None``; default
                ``None`` for everyone.

        Returns:
            The :class:`~prefbo.loop.people_questions.PeopleQuestions`: the
            ``B x 2 x d`` float64 questions in the box's model coordinates
            (the unit cube; a space's model points; map them with
            :meth:`DesignBox.from_model
            <prefbo.loop.box.DesignBox.from_model>`) and the virtual
            comparisons each carries to its answer.

        Raises:
            InputTypeError: A ``model`` that is not collaborative, or
                ``people`` not a 1-d integer tensor
                (:func:`~prefbo.loop.people_checks.check_people`).
            InputDataError: A person id out of range, or ``shown`` not one
                ``None`` or ``2 x d`` entry per person, or ``shown_virtual``
                not one ``None`` or ``k x 2 x d`` entry per person
                (:func:`~prefbo.loop.people_checks.check_virtual`).
            UnsupportedError: A maker whose ``q`` is not 2, or a strategy
                the batched step does not run (it runs
                :data:`~prefbo.loop.people_questions.BATCHED_STRATEGIES`).
        """
        seed = check_seed("seed", seed)
        if shown is None:
            shown = [None] * (len(people) if isinstance(people, Tensor) else 0)
        if self.q != 2:
            raise UnsupportedError(
                f"for_people asks pairs; this maker has q={self.q}: make it with q=2."
            )
        if self.uses_model and self.strategy_name not in BATCHED_STRATEGIES:
            raise UnsupportedError(
                "for_people runs the strategies "
                f"{sorted(BATCHED_STRATEGIES)} and those without a model (such "
                f"as 'random'); this maker's is {self.strategy_name!r}: make it "
                "with one of those."
            )
        if not self.uses_model:
            check_people(model, people, shown)
            check_virtual(shown_virtual, shown, self.box.dim)
            asked = [
                self.box.to_model(self.random(batch_question_seed(seed, b)))
                for b in range(len(people))
            ]
            if not asked:
                empty = torch.zeros(0, self.q, self.box.dim, dtype=torch.float64)
                return PeopleQuestions(empty, [])
            return PeopleQuestions(torch.stack(asked), [None] * len(asked))
        strategy = BATCHED_STRATEGIES[self.strategy_name]
        X = self.candidates(seed)
        return ask_people(
            model,
            people,
            X,
            shown,
            strategy,
            seed,
            shown_virtual,
            box=self.box,
            step=self.inset,
            asked=asked,
        )

    @staticmethod
    def _with(fixed: Tensor | None, new: Tensor) -> Tensor:
        r"""The ``q x d`` question ``[fixed, new]`` (``new`` without one)."""
        if fixed is None:
            return new
        return torch.cat([fixed.unsqueeze(0), new])  # q x d
