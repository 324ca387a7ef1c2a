r"""Ask/tell preferential Bayesian optimisation with a durable session log.

:class:`PreferentialOptimizer` asks ``q`` options at a time, is told which one
was chosen (stored as the comparisons "winner ≻ each other option"), refits a
preference model and recommends the design with the highest posterior mean.
The model comes from a model kind (:mod:`prefbo.loop.model_kinds`), the
questions from a strategy (:mod:`prefbo.loop.strategies`); both are looked up
by name, and new ones are registered there.

Determinism: the state is a pure function of the answers told so far (with
the virtual comparisons at the box's faces that an asked question carries to
its answer, :mod:`prefbo.loop.boundary`). Each
question is computed under a torch RNG forked and seeded by ``(seed, number
of answers)``, and each model fit under one seeded by ``(seed, number of
answers at that fit)`` from fresh default hyperparameters, so the same answers
give the same next question, whether told in one process or replayed from the
log by :meth:`PreferentialOptimizer.resume`, and whatever ``best()`` calls
came in between. Undoing an answer returns to the earlier state (the same
question is asked again).

Example:
    >>> opt = PreferentialOptimizer(bounds, strategy="eubo", log_path="s.jsonl")
    >>> for _ in range(20):
    ...     X = opt.ask()                     # q x d
    ...     opt.tell(person.compare(X[0], X[1]))
    >>> x_best, mean, sd = opt.best()
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from torch import Tensor

from prefbo.exceptions import InputDataError
from prefbo.loop import options as _options
from prefbo.loop.answers import Answer, check_answer, check_virtual
from prefbo.loop.boundary import DEFAULT_STEP
from prefbo.loop.box import DesignBox
from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.fitted import FittedModels
from prefbo.loop.question_maker import QuestionMaker
from prefbo.loop.questions import Questions
from prefbo.loop.replay import replay
from prefbo.loop.session import SessionLog, check_json_config
from prefbo.loop.settings import LoopSettings, settings_from
from prefbo.loop.spaces import check_space_options, encode_options
from prefbo.space import Space

__all__ = ["Answer", "PreferentialOptimizer", "expected_fit_warnings"]


def _setting(name: str, doc: str) -> property:
    r"""A read-only attribute of the optimiser: its ``settings.<name>``."""
    return property(lambda self: getattr(self.settings, name), doc=doc)


class PreferentialOptimizer:
    r"""Ask/tell preferential BO over a box or a :class:`~prefbo.space.Space`
    (see the module docstring), built from public parts: ``settings``,
    ``box``, ``models``, ``question_maker`` and ``questions`` (their classes:
    :mod:`prefbo.loop`)."""

    # the settings (read-only; ``settings`` holds them, see __init__)
    model_name = _setting("model", "The model kind's name.")
    strategy = _setting("strategy", "The strategy's name.")
    q = _setting("q", "Options per question.")
    keep_winner = _setting("keep_winner", "Whether the last winner is kept.")
    refit_every = _setting("refit_every", "Answers between refits.")
    seed = _setting("seed", "The seed of every random choice (an int).")
    initial_random = _setting("initial_random", "Random questions first.")
    warm_start_fits = _setting("warm_start_fits", "Whether refits warm-start.")
    unit_cube = _setting("unit_cube", "Whether the models see the unit cube.")
    avoid_resolved = _setting("avoid_resolved", "Whether resolved repeats are refused.")
    boundary_step = _setting("boundary_step", "The virtual comparisons' step or None.")
    fit_options = _setting("fit_options", "The refits' L-BFGS-B options.")
    acqf_options = _setting("acqf_options", "The acquisition maximiser's options.")
    model_options = _setting("model_options", "The model constructor's options.")
    metadata = _setting("metadata", "The data stored in the log header.")

    def __init__(
        self,
        bounds: Tensor | list | Space | dict | None = None,
        model: str = "ep",
        strategy: str = "eubo",
        q: int = 2,
        keep_winner: bool = False,
        refit_every: int = 1,
        seed: int = 0,
        log_path: str | os.PathLike | None = None,
        initial_random: int = 2,
        *,
        warm_start_fits: bool = True,
        unit_cube: bool = True,
        avoid_resolved: bool = True,
        boundary_step: float | None = DEFAULT_STEP,
        fit_options: dict[str, Any] | None = None,
        acqf_options: dict[str, Any] | None = None,
        model_options: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        settings: LoopSettings | None = None,
    ) -> None:
        r"""
        Args:
            bounds: ``2 x d`` box ``[lower, upper]`` (stored as float64),
                finite and of finite width; or a :class:`~prefbo.space.Space`
                (or its JSON form): mixed variables and item pools, whose
                designs are the space's model points (``d`` its ``dim``;
                ``self.space.decode(X)`` gives the person's view, and
                :meth:`tell` takes the options as those dicts too). How
                questions are chosen there: :mod:`prefbo.loop.spaces`.
            model: A registered model kind (:mod:`prefbo.loop.model_kinds`):
                ``"ep"`` (:class:`~prefbo.models.PairwiseEPGP`, the default),
                ``"laplace"`` (:class:`~prefbo.models.PairwiseLaplaceGP`; by
                default with the outputscale prior's box ending at 20, which
                keeps the Laplace approximation from re-asking pairs it has
                seen decisively), ``"skew"`` (:class:`~prefbo.models.SkewGP`)
                or ``"variational"``
                (:class:`~prefbo.models.VariationalPreferenceGP`, ``q(u)``
                refitted under the fitted kernel at every answer;
                ``model_options["fit"]`` overrides the settings of
                :func:`~prefbo.fit.fit_variational`). How the kinds compare
                in regret: ``benchmarks/decisions.md``.
            strategy: A registered strategy (:mod:`prefbo.loop.strategies`):
                ``"eubo"`` (analytic EUBO, ``q=2``), ``"qeubo"`` (MC qEUBO),
                ``"bald"`` (pairwise BALD under the model's own answer
                likelihood, ``q=2``), ``"mes"`` (max-value entropy of the
                utility against the current best or the kept winner,
                ``q=2``), ``"ts"`` (the current best, or kept winner, against
                ``q-1`` Thompson maximisers) or ``"random"``.
            q: Options per question, ``>= 2``.
            log_path: Append-only session log to create (see
                :mod:`prefbo.loop.session`); ``None`` for none. The optimiser
                holds the log's exclusive lock until :meth:`close` (or the
                end of a ``with`` block, its garbage collection, or the end
                of the process).
            settings: Every setting at once, as a
                :class:`~prefbo.loop.settings.LoopSettings` (then ``bounds``
                is ``None`` and the other settings are left at their
                defaults); the other arguments are its convenience form.

        The other arguments (``seed``, ``keep_winner``, ``refit_every``,
        ``initial_random``, ``warm_start_fits``, ``unit_cube``,
        ``avoid_resolved``, ``boundary_step``, ``fit_options``,
        ``acqf_options``, ``model_options``, ``metadata``) are the settings
        :class:`~prefbo.loop.settings.LoopSettings` documents (``seed``: of
        every random choice; ``metadata``: JSON-serialisable data stored in
        the log header).

        Raises:
            InputTypeError: ``q``, ``refit_every``, ``seed`` or
                ``initial_random`` is not an int, ``keep_winner``,
                ``warm_start_fits``, ``unit_cube`` or ``avoid_resolved`` not a
                bool, ``boundary_step`` not ``None`` or a float, ``model`` or
                ``strategy`` not a str, ``bounds`` not numbers, ``log_path``
                not a path, ``settings`` not a ``LoopSettings``, or an option
                of the wrong type (named).
            InputDataError: An unknown model kind, strategy or option key, or
                an invalid value (named), e.g. ``bounds`` that are not
                finite or whose width overflows; or ``settings`` given
                beside another setting.
            SessionLogLockedError: Another optimiser holds ``log_path``.
            UnsupportedError: A strategy that cannot serve ``q`` or the model
                kind.
        """
        # every setting argument by name: the parameters but these three
        given = {
            k: v
            for k, v in locals().items()
            if k not in ("self", "log_path", "settings")
        }
        _options.check_setting_types(log_path, flags={}, dicts={})
        self.settings = settings_from(given, settings)
        self.box = DesignBox(
            self.settings.box, self.settings.space, self.settings.unit_cube
        )
        self.space, self.bounds = self.box.space, self.box.bounds
        self.question_maker = QuestionMaker(
            self.box, self.strategy, self.q, self.acqf_options, self.keep_winner
        )
        # the parts: the answers' models, and the questions made from them
        self.models = FittedModels(self.settings, self.box)
        self.questions = Questions(self.settings, self.question_maker, self.models)
        # questions the strategy could not make worth asking (see
        # prefbo.loop.repeats), replaced by uniformly random options
        self.random_fallbacks = 0
        # the question asked and not yet answered, and the virtual
        # comparisons (k x 2 x d, prefbo.loop.boundary) it carries
        self._pending: Tensor | None = None
        self._pending_virtual: Tensor | None = None
        self._create_log(log_path)

    def _create_log(self, log_path: str | os.PathLike | None) -> None:
        r"""Create the session log at ``log_path``, its header the
        :attr:`config` (no log for ``None``)."""
        self._log: SessionLog | None = None
        self._view_of: str | None = None  # the log of a read-only view
        if log_path is not None:
            check_json_config(self.config)
            self._log = SessionLog.create(log_path, self.config)

    # ------------------------------------------------------------ properties
    @property
    def config(self) -> dict[str, Any]:
        r"""The settings as the log header stores them
        (:meth:`LoopSettings.to_dict <prefbo.loop.settings.LoopSettings.to_dict>`)."""
        return self.settings.to_dict()

    @property
    def history(self) -> list[Answer]:
        r"""The answers in force (undone ones removed), oldest first (copies:
        editing them does not change the optimizer's data)."""
        return [
            Answer(
                t.seq,
                t.options.clone(),
                t.answer,
                None if t.virtual is None else t.virtual.clone(),
            )
            for t in self.models.answers
        ]

    @property
    def dim(self) -> int:
        r"""Number of columns ``d`` of a design: the box's variables, or a
        space's model columns (``space.dim``: one per category of a
        categorical variable, one per feature of an item pool)."""
        return self.bounds.shape[-1]

    # ------------------------------------------------------------ ask / tell
    def ask(self) -> Tensor:
        r"""The next question (the same one until it is answered).

        Returns:
            A ``q x d`` float64 tensor of options.
        """
        if self._pending is None:
            question, virtual, fallback = self.questions.make()
            self.random_fallbacks += int(fallback)
            self._pending, self._pending_virtual = question, virtual
        return self._pending.clone()

    @property
    def pending_virtual(self) -> Tensor | None:
        r"""The ``k x 2 x d`` virtual comparisons ``[inner, face]``
        (:mod:`prefbo.loop.boundary`) the pending question carries to its
        answer (``None``: none, or nothing pending); a caller storing
        answers elsewhere gives them back to :meth:`tell` (``virtual=``)."""
        return None if self._pending_virtual is None else self._pending_virtual.clone()

    def tell(
        self, answer: int, options: Tensor | None = None, *, virtual: Any = None
    ) -> None:
        r"""Record which option was chosen; logged durably before returning.

        Args:
            answer: Index in ``[0, q)`` of the chosen option.
            options: The ``q x d`` options the answer refers to (with a
                space, also a list of ``q`` dicts by variable name); default
                the pending question of :meth:`ask`. The answer to the
                pending question (these options, or within 1e-9 of the box's
                width of them) carries its virtual comparisons
                (``boundary_step``); other options carry none, unless given.
            virtual: The virtual comparisons (:attr:`pending_virtual`, a
                tensor or nested list) these options carried when asked, so
                an optimiser rebuilt from stored answers asks what the
                original asks. Default: the pending question's, as above.

        Raises:
            InputTypeError: ``answer`` is not an int (a bool, a float, a
                string), or ``virtual`` is not numbers.
            InputDataError: ``answer`` is not an index of ``options``, or
                ``options`` are not ``q x d`` (``q >= 2``), not finite, outside
                the box, or not distinct designs, or (with a space) not
                designs of the space; ``virtual`` is not ``k x 2 x d``
                designs of the box, or given with ``boundary_step=None``; or
                the optimiser is a read-only view or its log was closed.
        """
        self._check_writable("tell")
        if virtual is not None and self.boundary_step is None:
            raise InputDataError("virtual needs a boundary_step; it is None here.")
        if virtual is not None:
            virtual = check_virtual(virtual, self.bounds).clone()
        if options is None:
            if self._pending is None:
                raise InputDataError(
                    "tell(answer) needs a pending question; call ask() first or "
                    "pass options=<q x d tensor>."
                )
            options = self._pending
        elif self.space is not None:
            options = encode_options(self.space, options)
        options, answer = self.check_answer(answer, options)
        if virtual is None and self._pending is not None:
            if self.box.same_question(options, self._pending):  # pending's
                virtual = self._pending_virtual
        seq = self.num_answers
        if self._log is not None:
            record = {"type": "tell", "options": options.tolist(), "answer": answer}
            if virtual is not None:
                record["virtual"] = virtual.tolist()
            seq = self._log.append(record)
        self.restore(Answer(seq, options, answer, virtual))

    def undo(self) -> Answer:
        r"""Withdraw the latest answer (logged as an ``undo`` record).

        Returns:
            The withdrawn answer; its question is asked again next.
        """
        self._check_writable("undo")
        if not self.models.answers:
            raise InputDataError("undo() needs an answer to withdraw; none is left.")
        if self._log is not None:
            self._log.append({"type": "undo"})
        self._pending, self._pending_virtual = None, None
        return self.models.withdraw()

    def check_answer(self, answer: Any, options: Any) -> tuple[Tensor, int]:
        r"""``(options, answer)`` checked as :meth:`tell` checks them."""
        options, answer = check_answer(answer, options, self.bounds)
        if self.space is not None:
            check_space_options(self.space, options)
        return options, answer

    def _check_writable(self, method: str) -> None:
        if self._view_of is not None:
            raise InputDataError(
                f"{method}() on a read-only view of the session log "
                f"{self._view_of!r}; resume it without read_only=True (once no "
                "other optimiser holds it) to answer."
            )

    @property
    def log_path(self) -> Path | None:
        r"""The session log's path (a read-only view's too); ``None``
        without a log."""
        if self._view_of is not None:
            return Path(self._view_of)
        return None if self._log is None else self._log.path

    def close(self) -> None:
        r"""Close the session log and release its lock (no-op without a log).

        A later :meth:`tell` or :meth:`undo` raises; resume the log to go on.
        """
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> PreferentialOptimizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def restore(self, answer: Answer) -> None:
        r"""Hold an answer read back from storage as :meth:`tell` held it,
        without logging it (how :mod:`prefbo.loop.replay` rebuilds an
        optimiser from its session log).

        Args:
            answer: The answer, its ``options`` and ``answer`` checked as
                :meth:`check_answer` checks them and its ``virtual``
                comparisons by :func:`~prefbo.loop.answers.check_virtual`
                (neither is checked here); ``seq``: its line in the log.

        Raises:
            InputDataError: The optimiser is a read-only view.
        """
        self._check_writable("restore")
        options, virtual = answer.options.clone(), answer.virtual
        self.models.add(Answer(answer.seq, options, answer.answer, virtual))
        self._pending, self._pending_virtual = None, None

    @property
    def num_answers(self) -> int:
        r"""The number of answers in force (``len(history)``, without copying
        them)."""
        return len(self.models.answers)

    # ------------------------------------------------------------ the models
    @property
    def model(self) -> Any:
        r"""The model conditioned on every answer (``None`` before the
        first; :attr:`FittedModels.model <prefbo.loop.fitted.FittedModels.model>`)."""
        return self.models.model

    def predict(self, X: Tensor) -> tuple[Tensor, Tensor]:
        r"""Posterior mean and sd of the utility at ``n x d`` designs of the
        box: two ``n`` float64 tensors
        (:meth:`FittedModels.predict <prefbo.loop.fitted.FittedModels.predict>`)."""
        return self.models.predict(X)

    def best(self) -> tuple[Tensor, float, float]:
        r"""``(design, mean, sd)``: the told ``d`` design with the highest
        posterior mean, and the mean and sd of the utility there."""
        return self.models.best()

    def data(self) -> tuple[Tensor, Tensor]:
        r"""``n x d`` float64 designs and ``m x 2`` ``[winner, loser]`` indices."""
        return self.models.data()

    def to_unit(self, X: Tensor) -> Tensor:
        r"""``... x d`` designs as points of the unit cube
        (:meth:`DesignBox.to_unit <prefbo.loop.box.DesignBox.to_unit>`)."""
        return self.box.to_unit(X)

    def from_unit(self, Z: Tensor) -> Tensor:
        r"""``... x d`` points of the unit cube as designs, clamped to the box
        (:meth:`DesignBox.from_unit <prefbo.loop.box.DesignBox.from_unit>`)."""
        return self.box.from_unit(Z)

    @property
    def work_size(self) -> int:
        r"""The size by which :func:`prefbo.utils.threads.limited` runs the
        fits and questions (:attr:`FittedModels.work_size
        <prefbo.loop.fitted.FittedModels.work_size>`)."""
        return self.models.work_size

    @property
    def failed_fits(self) -> int:
        r"""Refits that failed (their starting hyperparameters kept)."""
        return self.models.failed_fits

    def release_fits(self) -> None:
        r"""Free every cached fit but the latest
        (:meth:`FittedModels.release_fits
        <prefbo.loop.fitted.FittedModels.release_fits>`)."""
        self.models.release_fits()

    # ------------------------------------------------------------ resume
    @classmethod
    def resume(
        cls, log_path: str | os.PathLike, *, read_only: bool = False, **expected: Any
    ) -> PreferentialOptimizer:
        r"""Rebuild an optimizer from its log and keep appending to it.

        The optimiser takes the log's exclusive lock first (see
        ``log_path``), so no other writer appends while it reads. A torn last
        line (a crash mid-write) is reported with a
        :class:`~prefbo.loop.session.SessionLogWarning` naming the line and cut
        from the file; every earlier answer is kept, and so is every complete,
        checksummed record. Every record is checked as :meth:`tell` checks
        its arguments. Logs written before a setting existed resume with the
        behaviour they were written with (their header is read by
        :meth:`LoopSettings.from_dict
        <prefbo.loop.settings.LoopSettings.from_dict>`).

        Args:
            log_path: A log written by an optimizer created with ``log_path``.
            read_only: A view: no lock is taken and nothing in the file is
                changed (a torn last line is only reported; a log damaged
                further up, with a record out of sequence or one that
                :meth:`tell` would refuse, shows the answers before that
                line, with a warning naming it);
                :meth:`tell` and :meth:`undo` raise. For looking at a log
                another optimiser holds, or at what a damaged log still says.
            **expected: Settings to check against the log's header (e.g.
                ``seed=0``); a mismatch raises ``InputDataError``.

        Returns:
            The optimizer in the state after the logged answers: its next
            :meth:`ask` equals the one the logging process would have made.

        Raises:
            SessionLogLockedError: Another optimiser holds the log (its pid
                named).
            SessionLogError: The log is damaged before its last line, holds
                a complete record out of sequence, or a record whose contents
                :meth:`tell` or the constructor would refuse (the line named).
            FileNotFoundError: There is no ``log_path``.
        """
        _options.check_setting_types(None, flags={"read_only": read_only}, dicts={})
        log = None if read_only else SessionLog(log_path, 0)
        try:
            opt, count = replay(cls, log_path, read_only, expected)
        except BaseException:
            if log is not None:
                log.close()
            raise
        if log is None:
            opt._view_of = str(log_path)
        else:
            log.next_seq, opt._log = count + 1, log
        return opt
