r"""Many participants, one population model: the ask/tell loop of a study.

:class:`PopulationStudy` asks each participant questions about their own
utility ``f_p = g + h_p`` (:mod:`prefbo.kernels.population`), from one
population model fitted on everyone's answers. A participant's first
question already comes from what the others taught (the population
posterior plus the prior of a person's deviation): the warm start of a new
person. Each participant's answers go to their own session log
(``<log_dir>/<name>.jsonl``, durable and locked as
:class:`~prefbo.loop.PreferentialOptimizer`'s), and the study's settings to
``<log_dir>/study.json``; :meth:`PopulationStudy.resume` rebuilds the study
from the folder.

The model is the collaborative one by default
(:mod:`prefbo.loop.study_collaborative`): it updates the teller's
posterior online and refits the shared part on a schedule of answer
counts, so its questions depend on the global order of the answers, and a
resumed study's can differ; that module says what it promises. With the
exact population model (``model="ep"`` or ``"laplace"``) the model is a
function of each participant's answers (in their order), whatever the
order between participants: the fit after ``k`` answers in all starts at
the default hyperparameters under an RNG seeded by ``(seed, k)``, and a
question runs under one seeded by ``(seed, k, participant)``; a resumed
study asks what the running one would have.

Example:
    >>> study = PopulationStudy(bounds, log_dir="study")
    >>> X = study.ask("ann")                 # 2 x d, for ann
    >>> study.tell("ann", 0)                 # ann chose X[0]
    >>> x, mean, sd = study.best()           # the population's favourite
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from botorch.exceptions.errors import ModelFittingError
from botorch.fit import fit_gpytorch_mll
from botorch.models.model import Model
from botorch.posteriors import Posterior
from torch import Tensor

from prefbo.exceptions import InputDataError
from prefbo.kernels.population import POPULATION, with_participant
from prefbo.loop import options as _options
from prefbo.loop.boundary import DEFAULT_STEP
from prefbo.loop.box import DesignBox
from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.fitted import seeded
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.question_maker import QuestionMaker
from prefbo.loop.repeats import RepeatRule
from prefbo.loop.settings import LoopSettings
from prefbo.loop.spaces import encode_options
from prefbo.loop.study_arguments import check_study
from prefbo.loop.study_collaborative import (
    COLLABORATIVE,
    CollaborativeState,
    unavailable,
)
from prefbo.loop.study_folder import check_name, lock_folder
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.models.population import disagreement, population_model
from prefbo.utils.checks import check_int, check_seed
from prefbo.utils.seeds import fit_seed, participant_question_seed
from prefbo.utils.threads import limited

MLLS = {"ep": PairwiseEPMLL, "laplace": PairwiseLaplaceMLL}


class ParticipantView(Model):
    r"""One participant's utility in a population model, as a one-output
    BoTorch model on the designs alone (the participant's id appended)."""

    def __init__(self, model: Model, participant: int) -> None:
        super().__init__()
        self.population = model
        self.participant = participant
        self.likelihood = model.likelihood

    @property
    def num_outputs(self) -> int:  # noqa: D102
        return 1

    def posterior(self, X: Tensor, **kwargs: Any) -> Posterior:  # noqa: D102
        return self.population.posterior(
            with_participant(X, self.participant), **kwargs
        )


class PopulationStudy:
    r"""Participants by name, one population model (see the module docstring).

    Args:
        bounds: ``2 x d`` box, or a :class:`~prefbo.space.Space`, as
            :class:`~prefbo.loop.PreferentialOptimizer` takes them.
        log_dir: A folder for the participants' logs and ``study.json``
            (created; it must not hold a study already), or ``None``.
        model: ``"collaborative"`` (default;
            :mod:`prefbo.loop.study_collaborative`): a shared utility and
            tastes refitted now and then, each answer applied to its
            participant at once; or ``"ep"`` or ``"laplace"``: the exact
            population model, refitted at every answer (its
            hyperparameters, disagreement and fixed hyperparameters are
            theirs alone). The collaborative study's regret was the lower
            after 3 and 12 answers (``benchmarks/population_study.py``).
        strategy: ``"eubo"`` (default) or ``"random"``; with
            ``model="collaborative"`` also ``"ts"`` (Thompson sampling: the
            maxima of two draws of the participant's utility over the
            candidates).
        seed: Seed of every random choice.
        initial_random: Questions of the whole study (all participants
            together) drawn uniformly before the model is used: 2, as
            :class:`~prefbo.loop.PreferentialOptimizer`'s, by default (at
            least 1: the first comes before any answer). Later participants'
            first questions come from the model: the warm start.
        acqf_options: As :class:`~prefbo.loop.PreferentialOptimizer`'s.
        boundary_step: The collaborative kind's step off the faces of the
            continuous variables (in units of their range): the questions
            carry virtual comparisons of this step (:mod:`prefbo.loop.boundary`,
            :mod:`prefbo.loop.people_questions`), and the candidates of the
            batched step within this step of a face lie on it. ``None``:
            neither, where a participant's best may lie on a face. The
            exact kinds take only the default.
    """

    def __init__(
        self,
        bounds: Any,
        log_dir: str | os.PathLike | None = None,
        *,
        model: str = COLLABORATIVE,
        strategy: str = "eubo",
        seed: int = 0,
        initial_random: int = 2,
        acqf_options: dict[str, Any] | None = None,
        boundary_step: float | None = DEFAULT_STEP,
    ) -> None:
        step = check_study(model, strategy, boundary_step)
        check_seed("seed", seed)
        check_int("initial_random", initial_random, 1)
        # the designs, checked as the participants' optimisers check them
        # (those only check and log their answers)
        settings = LoopSettings(bounds, strategy="random", seed=seed)
        self.box = DesignBox(settings.box, settings.space)
        self._bounds = settings.to_dict()["bounds"]  # its JSON form
        self.space, self.bounds = self.box.space, self.box.bounds
        self.model_name, self.strategy = model, strategy
        self.seed, self.initial_random = int(seed), initial_random
        self.boundary_step = step
        self.acqf_options = _options.acqf_options(acqf_options)
        self.question_maker = QuestionMaker(
            self.box, strategy, 2, self.acqf_options, inset=step
        )
        self._people: dict[str, PreferentialOptimizer] = {}
        self._order: list[str] = []  # participants by their id
        # a participant's question asked and not yet answered, and the
        # virtual comparisons its answer carries (or None)
        self._pending: dict[str, tuple[Tensor, Tensor | None]] = {}
        self._model: Any = None
        self._fixed: dict[str, Tensor] | None = None
        self._collab = (
            CollaborativeState(seed, initial_random) if model == COLLABORATIVE else None
        )
        self.failed_fits = 0
        self.random_fallbacks = 0
        self.log_dir = None if log_dir is None else Path(log_dir)
        self._closed = False
        self._lock: int | None = None
        if self.log_dir is not None:
            if (self.log_dir / "study.json").exists():
                raise InputDataError(
                    f"{str(self.log_dir)!r} already holds a study; resume it with "
                    "PopulationStudy.resume."
                )
            self.log_dir.mkdir(parents=True, exist_ok=True)
            (self.log_dir / "study.json").write_text(json.dumps(self.config))
            self._lock = lock_folder(self.log_dir)

    @property
    def config(self) -> dict[str, Any]:
        r"""The settings, JSON-serialisable (``study.json``)."""
        return {
            "bounds": self._bounds,
            "model": self.model_name,
            "strategy": self.strategy,
            "seed": self.seed,
            "initial_random": self.initial_random,
            "acqf_options": self.acqf_options,
            "boundary_step": self.boundary_step,
        }

    @classmethod
    def resume(cls, log_dir: str | os.PathLike) -> PopulationStudy:
        r"""The study in ``log_dir`` with every participant's logged answers,
        in the order they were first told (the participants' ids)."""
        log_dir = Path(log_dir)
        try:
            config = json.loads((log_dir / "study.json").read_text())
        except (OSError, ValueError) as e:
            raise InputDataError(
                f"{str(log_dir)!r} holds no readable study.json: {e}"
            ) from e
        study = cls(**config)
        study.log_dir = log_dir
        study._lock = lock_folder(log_dir)
        order = log_dir / "participants.json"
        try:  # a failed resume releases the folder
            for name in json.loads(order.read_text()) if order.exists() else []:
                opt = PreferentialOptimizer.resume(log_dir / f"{name}.jsonl")
                study._people[name], _ = opt, study._order.append(name)
            study._changed()  # the collaborative kind rebuilds its model
        except BaseException:
            study.close()
            raise
        return study

    # ------------------------------------------------------------ people
    @property
    def participants(self) -> list[str]:
        r"""The participants' names, in the order of their ids."""
        return list(self._order)

    def _person(self, name: object) -> PreferentialOptimizer:
        check_name(name)
        if self._closed:
            raise InputDataError(
                "the study was closed; resume it (PopulationStudy.resume) to go on."
            )
        if name not in self._people:
            path = None if self.log_dir is None else self.log_dir / f"{name}.jsonl"
            self._people[name] = PreferentialOptimizer(
                self.config["bounds"],
                strategy="random",
                seed=self.seed,
                initial_random=0,
                log_path=path,
                metadata={"study_participant": name},
            )
            self._order.append(name)
            if self.log_dir is not None:
                (self.log_dir / "participants.json").write_text(json.dumps(self._order))
        return self._people[name]

    def history(self, name: str) -> list[Any]:
        r"""A participant's answers in force (see ``PreferentialOptimizer``;
        none for a name the study has not seen)."""
        check_name(name)
        return self._people[name].history if name in self._people else []

    # ------------------------------------------------------------ ask / tell
    def ask(self, name: str) -> Tensor:
        r"""The next ``2 x d`` question for participant ``name`` (the same
        one until it is answered; a new name joins the study)."""
        person = self._person(name)
        if name not in self._pending:
            with limited(2 * self._answers() + 2):  # the model's latent values
                self._pending[name] = self._question(name, person)
        return self._pending[name][0].clone()

    def tell(self, name: str, answer: int, options: Any = None) -> None:
        r"""Record participant ``name``'s answer (logged before returning);
        ``options`` default to their pending question. The answer to the
        pending question (``options`` omitted, or the same) carries the
        virtual comparisons it was asked with (the collaborative kind's:
        :mod:`prefbo.loop.person_question`, :mod:`prefbo.loop.people_questions`)."""
        check_name(name)
        pending, virtual = self._pending.get(name, (None, None))
        if options is None:
            if pending is None:
                raise InputDataError(
                    f"tell({name!r}, answer) needs a pending question; call "
                    f"ask({name!r}) first or pass options."
                )
            options = pending
        elif virtual is not None:  # kept by the answer to that question only
            told = options
            if self.space is not None:
                told = encode_options(self.space, options)
            same = isinstance(told, Tensor) and self.box.same_question(told, pending)
            virtual = virtual if same else None
        self._person(name).tell(answer, options=options, virtual=virtual)
        self._changed(name)

    def undo(self, name: str) -> Any:
        r"""Withdraw participant ``name``'s latest answer.

        Raises:
            InputDataError: ``name`` is not a participant (ask and tell
                register a name, an undo does not) or has no answer left.
        """
        check_name(name)
        if name not in self._people:
            raise InputDataError(
                "name must be a participant of the study to undo their answer "
                f"(one of {self._order}); got {name!r}."
            )
        last = self._person(name).undo()
        self._changed()
        return last

    def close(self) -> None:
        r"""Close every participant's log and release the study folder; a
        later ask or tell raises (resume the study to go on)."""
        for person in self._people.values():
            person.close()
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
        self._closed = True

    def _changed(self, name: str | None = None) -> None:
        r"""Drop what went stale: after ``name``'s tell (``None``: an undo or a
        resume). Every question depends on everyone's answers, except the
        collaborative kind's between its refits (only the teller's changes)."""
        self._model = None
        if self._collab is not None:
            n, k = len(self._order), self._answers()
            if name is None:
                self._collab.rebuild(self._data(), n, k)
            else:
                last, pid = self._people[name].history[-1], self._order.index(name)
                opts = self.box.to_model(last.options)
                virtual = (
                    None if last.virtual is None else self.box.to_model(last.virtual)
                )
                if self._collab.told(pid, opts, last.answer, self._data, n, k, virtual):
                    self._pending.pop(name, None)
                    return
        self._pending.clear()

    # ------------------------------------------------------------ the model
    def _answers(self) -> int:  # the count, without history's copies
        return sum(p.num_answers for p in self._people.values())

    def _data(self) -> dict[int, tuple[Tensor, Tensor]]:
        data = {}
        for pid, name in enumerate(self._order):
            person = self._people[name]
            if person.num_answers:  # virtual comparisons before their answers
                data[pid] = person.models.model_data()
        return data

    @property
    def collaborative(self) -> CollaborativeState | None:
        r"""The collaborative kind's model and schedule of fits (``None`` for
        the exact kinds)."""
        return self._collab

    @property
    def model(self) -> Any:
        r"""The population model of every answer, fitted (``None`` before the
        first answer); its inputs are ``[unit-cube design, participant id]``
        (collaborative: a ``CollaborativePreferenceGP``, person ids apart)."""
        k = self._answers()
        if self._collab is not None:
            return self._collab.current(self._data, len(self._order), k)
        if k == 0:
            return None
        if self._model is None and self._fixed is not None:
            with expected_fit_warnings():
                model = population_model(self._data(), model=self.model_name)
                model.load_state_dict(self._fixed, strict=False)
            self._model = model.eval()
        if self._model is None:
            with seeded(fit_seed(self.seed, k)), expected_fit_warnings():
                model = population_model(self._data(), model=self.model_name)
                with torch.enable_grad():
                    try:
                        fit_gpytorch_mll(MLLS[self.model_name](model.likelihood, model))
                    except ModelFittingError:  # keep the starting hyperparameters
                        self.failed_fits += 1
            self._model = model.eval()
        return self._model

    def hyperparameters(self) -> dict[str, Tensor]:
        r"""The fitted model's kernel hyperparameters (its ``covar_module``
        state), for :meth:`fix_hyperparameters` of this or another study
        (the exact kinds only: ``UnsupportedError`` for the collaborative)."""
        self._exact_only("hyperparameters")
        if self.model is None:
            raise InputDataError("hyperparameters() needs at least one answer.")
        state = self.model.state_dict()
        return {k: v.clone() for k, v in state.items() if k.startswith("covar_module.")}

    def fix_hyperparameters(self, state: dict[str, Tensor] | None) -> None:
        r"""Use these hyperparameters (from :meth:`hyperparameters`) for the
        model instead of fitting it at each change of the answers: a
        server's questions between refits cost an EP run, not a fit.
        ``None`` fits again.

        Raises:
            InputDataError: A key that is not a kernel hyperparameter.
            UnsupportedError: The collaborative kind.
        """
        self._exact_only("fix_hyperparameters")
        if state is not None:
            bad = sorted(k for k in state if not k.startswith("covar_module."))
            if bad:
                raise InputDataError(
                    f"{bad[0]!r} is not a hyperparameter of the population "
                    "model's kernel (covar_module.*)."
                )
        self._fixed = None if state is None else dict(state)
        self._model = None

    def participant_model(self, name: str) -> Model:
        r"""Participant ``name``'s utility as a model on the unit-cube designs
        (a name without answers: a newcomer's, the population's plus a
        deviation's prior; collaborative: a ``PersonModel``)."""
        if self._collab is not None:
            return self._collab_view(name)
        return ParticipantView(self.model, self._id(name))

    def _collab_view(self, name: str | None) -> Model:
        pid, n = None if name is None else self._id(name), len(self._order)
        self._collab.current(self._data, n, self._answers())  # fitted if none
        return self._collab.view(None if pid == n else pid)

    def _exact_only(self, method: str) -> None:
        if self._collab is not None:
            raise unavailable(method)

    def _id(self, name: object) -> int:
        r"""``name``'s participant id; a newcomer's (the next id, not
        registered) for a name the study has not seen."""
        check_name(name)
        return self._order.index(name) if name in self._order else len(self._order)

    def best(self, name: str | None = None) -> tuple[Tensor, float, float]:
        r"""The told design (anyone's) with the highest posterior mean of the
        population's utility, or of participant ``name``'s (a name without
        answers: a newcomer's, the warm-start recommendation)."""
        if self._answers() == 0:
            raise InputDataError("best() needs at least one answer; none was told.")
        designs = self._told_designs()
        Z = self.box.to_model(designs)
        with torch.no_grad(), expected_fit_warnings():
            if self._collab is not None:  # name None: the population's
                post = self._collab_view(name).posterior(Z.unsqueeze(-2))
            else:
                pid = POPULATION if name is None else self._id(name)
                post = self.model.posterior(with_participant(Z, pid).unsqueeze(-2))
        mean = post.mean.reshape(-1)
        sd = post.variance.reshape(-1).clamp_min(0).sqrt()
        i = int(mean.argmax())
        return designs[i].clone(), float(mean[i]), float(sd[i])

    def _told_designs(self) -> Tensor:
        r"""Every participant's told designs, stacked (box coordinates)."""
        return torch.cat([p.data()[0] for p in self._people.values() if p.num_answers])

    def disagreement(self) -> float:
        r"""The fitted share of the utility's prior variance that is a
        person's own (:func:`~prefbo.models.population.disagreement` at the
        told designs; the exact kinds only, as :meth:`hyperparameters`)."""
        self._exact_only("disagreement")
        if self._answers() == 0:
            raise InputDataError(
                "disagreement() needs at least one answer; none was told."
            )
        designs = self._told_designs()
        return disagreement(self.model, self.box.to_model(designs))

    # ------------------------------------------------------------ questions
    def _question(
        self, name: str, person: PreferentialOptimizer
    ) -> tuple[Tensor, Tensor | None]:
        r"""``name``'s next question and the virtual comparisons it carries."""
        k, pid = self._answers(), self._order.index(name)
        step_seed = participant_question_seed(self.seed, k, pid)
        if k < self.initial_random or not self.question_maker.uses_model:
            return self.question_maker.random(step_seed), None
        asked = [self.box.to_model(t.options) for t in person.history]

        def best() -> Tensor:  # their recommendation, a model input
            return self.box.to_model(self.best(name)[0])

        if self._collab is not None:  # from the model (fitted here if none)
            self._collab.current(self._data, len(self._order), k)
            question, virtual, fallback = self._collab.ask(
                self.question_maker, pid, asked, best, k
            )
        else:
            rule = RepeatRule(ParticipantView(self.model, pid), asked)
            question, fallback = self.question_maker.from_model(rule, step_seed, best)
            virtual = None
        self.random_fallbacks += int(fallback)
        return question, virtual
