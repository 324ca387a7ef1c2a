r"""How the loop computes its next question.

:class:`Questions` is the part of :class:`~prefbo.loop.PreferentialOptimizer`
that turns the current model (its
:class:`~prefbo.loop.fitted.FittedModels`) into the next question: uniformly random
options first (``initial_random``), then the strategy's, with the option
kept from the last answer (``keep_winner``), the rule against questions not
worth asking (:mod:`prefbo.loop.repeats`, a random question if the strategy
finds nothing else) and the virtual comparisons at the box's faces
(:mod:`prefbo.loop.boundary`). Each question is made by the optimiser's
:class:`~prefbo.loop.question_maker.QuestionMaker` under an RNG seeded by
``(seed, number of answers)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from prefbo.loop.boundary import ask_off_faces
from prefbo.loop.fitted import FittedModels
from prefbo.loop.question_maker import QuestionMaker
from prefbo.loop.repeats import RepeatRule
from prefbo.loop.settings import LoopSettings
from prefbo.utils.seeds import question_seed
from prefbo.utils.threads import limited


class Questions:
    r"""The next question of an optimiser's answers (see the module
    docstring), held by :class:`~prefbo.loop.PreferentialOptimizer` as
    ``opt.questions``.

    Args:
        settings: The optimiser's settings (``seed``, ``initial_random``,
            ``keep_winner``, ``avoid_resolved``, ``boundary_step``).
        maker: The question maker (its box is the optimiser's).
        models: The models of the optimiser's answers; the virtual
            comparisons of the question being computed are proposed to it
            and cleared again once the question is made.
    """

    def __init__(
        self, settings: LoopSettings, maker: QuestionMaker, models: FittedModels
    ) -> None:
        self.settings, self.maker, self.models = settings, maker, models
        self.box = maker.box

    def fixed_option(self) -> Tensor | None:
        r"""The ``d`` design every new question starts with (the last
        answer's winner, with ``keep_winner``), or ``None``."""
        answers = self.models.answers
        if self.settings.keep_winner and answers:
            last = answers[-1]
            return last.options[last.answer]
        return None

    def make(self) -> tuple[Tensor, Tensor | None, bool]:
        r"""The next question, made under prefbo's thread policy
        (:func:`prefbo.utils.threads.limited`, by the models' ``work_size``).

        The strategy's question is computed again (at most
        :data:`~prefbo.loop.boundary.ROUNDS` times) while it proposes an
        option on a face, with that option's virtual comparison
        (:mod:`prefbo.loop.boundary`). Options still on a face after the
        last round get their comparisons too and are asked a step inside
        (:func:`~prefbo.loop.boundary.ask_off_faces`). A question the
        strategy could not make worth asking (a random one) ends the rounds.

        Returns:
            ``(question, virtual, fallback)``: the ``q x d`` question, the
            ``k x 2 x d`` virtual comparisons it carries to its answer
            (``None``: none) and whether it is a random one because the
            strategy found nothing worth asking.
        """
        with limited(self.models.work_size):
            return self._make()

    def _make(self) -> tuple[Tensor, Tensor | None, bool]:
        step, models = self.settings.boundary_step, self.models
        use = step is not None and self.maker.uses_model
        if not use or len(models.answers) < self.settings.initial_random:
            question, fallback = self.question()
            return question, None, fallback
        kept = int(self.fixed_option() is not None)  # told already
        try:  # the model is rebuilt with each round's comparisons
            question, fallback = ask_off_faces(
                self.question,
                models.propose,
                lambda new: self.rule().allowed(new),
                self.box,
                step,
                kept,
            )
            virtual = torch.stack(models.proposed) if models.proposed else None
        finally:  # also when a round fails: the model of the answers alone
            models.clear_proposed()
        return question, virtual, fallback

    def rule(self) -> RepeatRule:
        r"""The rule of :mod:`prefbo.loop.repeats` under the current model
        (with the kept winner, if any, as every question's first option)."""
        fixed = self.fixed_option()
        return RepeatRule(
            self.models.model,
            [self.box.to_model(t.options) for t in self.models.answers],
            fixed=None if fixed is None else self.box.to_model(fixed),
            avoid_resolved=self.settings.avoid_resolved,
        )

    def question(self) -> tuple[Tensor, bool]:
        r"""The strategy's ``q x d`` question under the current model (a
        random one before ``initial_random`` answers), and whether it is a
        random one because the strategy found nothing worth asking
        (:class:`~prefbo.loop.question_maker.QuestionMaker`)."""
        k = len(self.models.answers)
        step_seed = question_seed(self.settings.seed, k)
        fixed = self.fixed_option()
        maker = self.maker
        if k < self.settings.initial_random or not maker.uses_model:
            return maker.random(step_seed, fixed), False
        rule = self.rule()

        def best() -> Tensor:  # the recommendation, a model input
            return self.box.to_model(self.models.best()[0])

        return maker.from_model(rule, step_seed, best, fixed)
