r"""How the loop computes its next question.

:class:`Questions` is the part of :class:`~prefbo.loop.PreferentialOptimizer`
that turns the current model into the next question: uniformly random
options first (``initial_random``), then the strategy's, with the option
kept from the last answer (``keep_winner``), the rule against questions not
worth asking (:mod:`prefbo.loop.repeats`, a random question if the strategy
finds nothing else) and the virtual comparisons at the box's faces
(:mod:`prefbo.loop.boundary`). Each question is made by the optimiser's
:class:`~prefbo.loop.question_maker.QuestionMaker` under an RNG seeded by
``(seed, number of answers)``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from prefbo.loop.answers import Answer
from prefbo.loop.boundary import ROUNDS, face_columns, face_comparisons, off_faces
from prefbo.loop.box import DesignBox
from prefbo.loop.question_maker import QuestionMaker
from prefbo.loop.repeats import RepeatRule
from prefbo.space import Space
from prefbo.utils.seeds import question_seed
from prefbo.utils.threads import limited


class Questions:
    r"""The next question of an optimiser (a mixin of
    :class:`~prefbo.loop.PreferentialOptimizer`, which holds the answers, the
    model, the strategy and the settings)."""

    space: Space | None
    bounds: Tensor
    box: DesignBox
    q: int
    seed: int
    strategy: str
    initial_random: int
    keep_winner: bool
    avoid_resolved: bool
    boundary_step: float | None
    dim: int
    model: Any
    acqf_options: dict[str, Any]
    random_fallbacks: int
    question_maker: QuestionMaker
    _tells: list[Answer]
    _model: Any
    _proposed: list[Tensor]
    _pending_virtual: Tensor | None

    def _fixed_option(self) -> Tensor | None:
        r"""The ``d`` design every new question starts with, or ``None``."""
        if self.keep_winner and self._tells:
            last = self._tells[-1]
            return last.options[last.answer]
        return None

    def _next_question(self) -> Tensor:
        r"""The next question (:meth:`_make_question`), made under prefbo's
        thread policy (:func:`prefbo.utils.threads.limited`, by
        ``work_size``)."""
        with limited(self.work_size):
            return self._make_question()

    def _make_question(self) -> Tensor:
        r"""The strategy's question, computed again (at most
        :data:`~prefbo.loop.boundary.ROUNDS` times) while it proposes an
        option on a face, with that option's virtual comparison
        (:mod:`prefbo.loop.boundary`); those made are kept for the answer.
        Options still on a face after the last round get their comparisons
        too and are asked a step inside (:meth:`_off_faces`). A question the
        strategy could not make worth asking (a random one) is counted once
        in ``random_fallbacks`` and ends the rounds."""
        question, fallback = self._question()
        use = self.boundary_step is not None and self.question_maker.uses_model
        if use and len(self._tells) >= self.initial_random:
            columns = face_columns(self.space, self.dim)
            kept = int(self._fixed_option() is not None)  # told already
            try:
                for rounds in range(ROUNDS + 1):
                    Z = self.to_unit(question[kept:])
                    pairs = face_comparisons(Z, columns, self.boundary_step)
                    if fallback or not pairs:
                        break
                    self._proposed += [self.from_unit(torch.stack(p)) for p in pairs]
                    self._model = None  # rebuilt with them
                    if rounds == ROUNDS:  # no computation left
                        question = self._off_faces(question, kept, columns)
                    else:
                        question, fallback = self._question()
                if self._proposed:
                    self._pending_virtual = torch.stack(self._proposed)
            finally:  # also when a round fails: the model of the answers alone
                if self._proposed:
                    self._proposed, self._model = [], None
        self.random_fallbacks += int(fallback)
        return question

    def _off_faces(self, question: Tensor, kept: int, columns: Tensor) -> Tensor:
        r"""The ``q x d`` question with its new options (after the first
        ``kept``) moved ``boundary_step`` inside every face they lie on
        (:func:`~prefbo.loop.boundary.off_faces`), unless the rule of
        :mod:`prefbo.loop.repeats` refuses the moved question under the
        model with their virtual comparisons; then it is asked as proposed."""
        Z = off_faces(self.to_unit(question[kept:]), columns, self.boundary_step)
        moved = torch.cat([question[:kept], self.from_unit(Z)])  # q x d
        if self.space is not None:
            moved = self.space.snap(moved)
        if self._rule().allowed(self.box.to_model(moved[kept:])):
            return moved
        return question

    def _rule(self) -> RepeatRule:
        r"""The rule of :mod:`prefbo.loop.repeats` under the current model
        (with the kept winner, if any, as every question's first option)."""
        fixed = self._fixed_option()
        return RepeatRule(
            self.model,
            [self.box.to_model(t.options) for t in self._tells],
            fixed=None if fixed is None else self.box.to_model(fixed),
            avoid_resolved=self.avoid_resolved,
        )

    def _question(self) -> tuple[Tensor, bool]:
        r"""The strategy's question under the current model (a random one
        before ``initial_random`` answers), and whether it is a random one
        because the strategy found nothing worth asking
        (:class:`~prefbo.loop.question_maker.QuestionMaker`)."""
        k = len(self._tells)
        step_seed = question_seed(self.seed, k)
        fixed = self._fixed_option()
        maker = self.question_maker
        if k < self.initial_random or not maker.uses_model:
            return maker.random(step_seed, fixed), False
        rule = self._rule()

        def best() -> Tensor:  # the recommendation, a model input
            return self.box.to_model(self.best()[0])

        return maker.from_model(rule, step_seed, best, fixed)
