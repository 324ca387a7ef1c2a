r"""Where a served study's questions and favourites come from.

A :class:`QuestionEngine` is built from the study and fed every answer in the
database; it proposes the next question of a participant and the
favourites the researcher sees. ``model.kind = "population"`` puts every
participant on one :class:`~prefbo.loop.PopulationStudy` (a later
participant's first questions already use what the others said);
``"individual"`` gives each participant their own
:class:`~prefbo.loop.PreferentialOptimizer` (any strategy and ``q``), rebuilt
from their stored answers and the virtual comparisons at the space's faces
that each question carried (:attr:`QuestionEngine.carried`, stored with the
question), so a participant is asked what the library's loop would ask.

A participant's next question is made while they look at their current one,
whose answer is not known yet: the engine then believes the answer the model
finds most likely ("kriging believer", Ginsbourger et al. 2010), so the next
question is not the current one again. "No preference" answers are kept in
the database and the export but not told to the models (a pairwise model has
no tie).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from prefbo.kernels.population import POPULATION, with_participant
from prefbo.loop import PopulationStudy, PreferentialOptimizer
from prefbo.serve.answered import points
from prefbo.serve.config import StudyConfig
from prefbo.serve.rows import QuestionRow
from prefbo.space import Integer, ItemPool
from prefbo.utils.seeds import participant_seed


def _told(question: QuestionRow) -> bool:
    return question.answered and not question.no_preference


class QuestionEngine:
    r"""The models of a study at one set of answers.

    Args:
        config: The study.
        answered: Every answered question (rows of
            :meth:`~prefbo.serve.store.Store.answered`).
        hyperparameters: The population model's kernel hyperparameters from
            an earlier fit (:meth:`~prefbo.loop.PopulationStudy.hyperparameters`)
            to use instead of a fit; ``None``: fit them.
        optimizers: Participant id to their optimiser, kept by the caller
            from engine to engine (individual models): one whose answers
            are the first of the participant's stored answers is told the
            rest, so a new answer costs one fit instead of the chain of all
            (:class:`~prefbo.loop.PreferentialOptimizer` fits each count from
            the one before); any other is rebuilt. The questions are the
            same either way. ``None``: rebuild every one.

    Attributes:
        hyperparameters: Those used by the last population model (fitted
            once here where none were given), for a later engine.
        carried: Participant id to the virtual comparisons (a ``k x 2 x d``
            tensor, or ``None``) that the engine's latest question for them
            carries to its answer (individual models only:
            :attr:`~prefbo.loop.PreferentialOptimizer.pending_virtual`).
    """

    def __init__(
        self,
        config: StudyConfig,
        answered: list[QuestionRow],
        hyperparameters: dict[str, Tensor] | None = None,
        optimizers: dict[int, PreferentialOptimizer] | None = None,
    ) -> None:
        self.config = config
        self.answered = [a for a in answered if _told(a)]
        self.hyperparameters = hyperparameters
        self.carried: dict[int, Tensor | None] = {}
        self.optimizers = {} if optimizers is None else optimizers

    def _population(self, pending: dict[int, list] | None = None) -> PopulationStudy:
        c = self.config
        study = PopulationStudy(
            c.space,
            model=c.inference,
            strategy=c.strategy,
            seed=c.seed,
            initial_random=c.initial_random,
        )
        for a in self.answered:
            study.tell(str(a.participant_id), a.choice, points(a.options))
        for pid, (options, choice) in (pending or {}).items():
            study.tell(str(pid), choice, options)
        if self.hyperparameters is not None:
            study.fix_hyperparameters(self.hyperparameters)
        elif self.answered or pending:
            self.hyperparameters = study.hyperparameters()  # the one fit
        return study

    def _individual(self, pid: int) -> PreferentialOptimizer:
        r"""Participant ``pid``'s optimiser, told their stored answers with
        the virtual comparisons their questions carried (kept in
        :attr:`optimizers`)."""
        stored = [a for a in self.answered if a.participant_id == pid]
        opt = self.optimizers.get(pid)
        if opt is None or not _told_first(opt, stored):
            c = self.config
            opt = PreferentialOptimizer(
                c.space,
                model=c.inference,
                strategy=c.strategy,
                q=c.q,
                seed=participant_seed(c.seed, pid),
                initial_random=c.initial_random,
                boundary_step=c.boundary_step,
            )
            self.optimizers[pid] = opt
        for a in stored[len(opt.history) :]:
            carried = a.virtual_comparisons
            opt.tell(a.choice, points(a.options), virtual=carried)
        opt.release_fits()  # kept: one fit per participant, not the chain
        return opt

    def propose(
        self,
        shown: dict[int, list | None],
        shown_virtual: dict[int, list | None] | None = None,
    ) -> dict[int, Tensor]:
        r"""The next question of each participant in ``shown`` (see
        :meth:`propose_each`)."""
        return dict(self.propose_each(shown, shown_virtual))

    def propose_each(
        self,
        shown: dict[int, list | None],
        shown_virtual: dict[int, list | None] | None = None,
    ) -> Iterator[tuple[int, Tensor]]:
        r"""The next question of each participant in ``shown``, one at a
        time and in its order, so a caller can store each as it comes (the
        population's fits are made once, before the first), with the
        virtual comparisons it carries in :attr:`carried`.

        Args:
            shown: Participant id to the options of the question they are
                looking at (``None``: none; the proposal is then for now).
            shown_virtual: Participant id to the virtual comparisons the
                question they are looking at carries (as stored; missing or
                ``None``: none).

        Yields:
            ``(participant id, q x dim tensor of model points)``.
        """
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fit warnings: the loop's own
            if self.config.model_kind == "population":
                study = self._believing(shown)
                for pid in shown:
                    yield pid, study.ask(str(pid))
            else:
                carried = shown_virtual or {}
                for pid, options in shown.items():
                    yield pid, self._propose_individual(pid, options, carried.get(pid))

    def _believing(self, shown: dict[int, list | None]) -> PopulationStudy:
        r"""The population study of every answer and, for each question on
        screen, the answer the model finds likelier."""
        pending = {pid: points(o) for pid, o in shown.items() if o is not None}
        believed: dict[int, tuple[Tensor, int]] = {}
        if pending and self.answered:
            study = self._population()
            for pid, options in pending.items():
                post = study.participant_model(str(pid)).posterior(
                    options.unsqueeze(-2)
                )
                believed[pid] = (options, int(post.mean.reshape(-1).argmax()))
        elif pending:  # no answer yet: any believed answer is as good
            believed = {pid: (o, 0) for pid, o in pending.items()}
        return self._population(believed)

    def _propose_individual(
        self, pid: int, options: list | None, virtual: list | None
    ) -> Tensor:
        opt = self._individual(pid)
        if options is not None:  # believe the likelier answer to it
            X = points(options)
            choice = int(opt.predict(X)[0].argmax()) if opt.history else 0
            opt.tell(choice, X, virtual=virtual)
        try:
            question = opt.ask()
            self.carried[pid] = opt.pending_virtual
        finally:
            if options is not None:
                opt.undo()  # the kept optimiser holds the stored answers only
        return question

    def favourites(self, pids: list[int]) -> dict[str, Any]:
        r"""The population's favourite (population kind) and each
        participant's, with the posterior mean and sd of the utility there,
        in the person's view (dicts by variable name)."""
        space = self.config.space
        out: dict[str, Any] = {"population": None, "participants": {}}
        if not self.answered:
            return out
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self.config.model_kind == "population":
                study = self._population()
                x, mean, sd = study.best()
                out["population"] = favourite(space, x, mean, sd)
                out["slices"] = utility_slices(
                    space,
                    out["population"]["values"],
                    lambda Z: _population_utility(study, Z),
                )
                for pid in pids:
                    x, mean, sd = study.best(str(pid))
                    out["participants"][str(pid)] = favourite(space, x, mean, sd)
                return out
            for pid in pids:
                opt = self._individual(pid)
                if opt.history:
                    x, mean, sd = opt.best()
                    out["participants"][str(pid)] = favourite(space, x, mean, sd)
        return out


#: points of a continuous variable's slice, and the most values of a finite one
SLICE_POINTS, SLICE_VALUES = 21, 40


def _population_utility(study: PopulationStudy, Z: Tensor) -> tuple[Tensor, Tensor]:
    with torch.no_grad():
        post = study.model.posterior(with_participant(Z, POPULATION).unsqueeze(-2))
    return post.mean.reshape(-1), post.variance.reshape(-1).clamp_min(0).sqrt()


def utility_slices(
    space: Any, at: dict[str, Any], utility: Callable[[Tensor], tuple[Tensor, Tensor]]
) -> list[dict]:
    r"""The population's utility (``utility``: model points to posterior
    mean and sd) along each variable through ``at``: a continuous (or long
    integer) variable on a grid, an ordinal's or a categorical's values in
    order, a pool's items ranked by the mean (the best
    :data:`SLICE_VALUES`)."""
    out = []
    for v in space.variables:
        discrete = v.levels is not None and not (
            isinstance(v, Integer) and v.levels > SLICE_POINTS
        )
        values = v.values() if discrete else v.spread(SLICE_POINTS)
        Z = space.encode([{**at, v.name: value} for value in values])
        mean, sd = utility(Z)
        order = list(range(len(values)))
        if isinstance(v, ItemPool):  # a ranking
            order = mean.argsort(descending=True).tolist()
        order = order[:SLICE_VALUES]
        out.append(
            {
                "name": v.name,
                "labels": [_label(values[i]) for i in order],
                "mean": [float(mean[i]) for i in order],
                "sd": [float(sd[i]) for i in order],
                "discrete": discrete,
            }
        )
    return out


def _label(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def _told_first(opt: PreferentialOptimizer, stored: list[QuestionRow]) -> bool:
    r"""Whether ``opt``'s answers are the first of ``stored`` (options, answer
    and virtual comparisons alike)."""
    if len(opt.history) > len(stored):
        return False
    for told, a in zip(opt.history, stored):
        carried = a.virtual_comparisons
        if (
            told.answer != a.choice
            or not torch.equal(told.options, points(a.options))
            or (told.virtual is None) != (carried is None)
            or (carried is not None and not torch.equal(told.virtual, points(carried)))
        ):
            return False
    return True


def favourite(space: Any, x: Tensor, mean: float, sd: float) -> dict[str, Any]:
    r"""A favourite as the researcher's page shows it: the design's values
    by variable name, the posterior mean and sd of the utility there."""
    return {"values": space.decode(x)[0], "mean": mean, "sd": sd}
