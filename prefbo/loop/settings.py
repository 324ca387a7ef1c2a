r"""The loop's settings: one frozen, versioned object, a session log's header.

:class:`LoopSettings` holds every setting of a
:class:`~prefbo.loop.PreferentialOptimizer` (what its constructor takes
beside ``log_path``), checked when it is made, and is what the optimiser
writes into its session log's header (:meth:`LoopSettings.to_dict`, with
the layout's ``version``) and reads back when the log is resumed
(:meth:`LoopSettings.from_dict`).

Versions of the header's layout:

- ``1``: every header written before the settings carried a ``version``.
  Settings were added over time, and such a header lacks those added after
  it was written; each missing one gets the behaviour the log was written
  with (:func:`migrate`): ``warm_start_fits=False`` (every refit from the
  defaults), ``fit_options`` of scipy's L-BFGS-B (``maxfun=15000``, its
  ``ftol``), ``acqf_options`` with BoTorch's ``optimize_acqf`` and its
  default tolerance, ``unit_cube=False`` (models on the box's own units),
  ``avoid_resolved=False`` (only identical options refused) and
  ``boundary_step=None`` (no virtual comparisons at the faces).
- ``2`` (:data:`SETTINGS_VERSION`): every setting, and ``"version": 2``.

Example:
    >>> settings = LoopSettings(bounds, strategy="random", seed=3)
    >>> header = settings.to_dict()            # JSON-serialisable
    >>> LoopSettings.from_dict(header) == settings
    True
    >>> opt = PreferentialOptimizer(settings=settings)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError, SettingsVersionError
from prefbo.loop import options as _options
from prefbo.loop.arguments import check_schedule, design_box, model_and_strategy
from prefbo.loop.boundary import DEFAULT_STEP
from prefbo.loop.model_kinds import ModelKind, get_model_kind
from prefbo.loop.spaces import unit_box
from prefbo.loop.strategies import Strategy, get_strategy
from prefbo.space import Space
from prefbo.utils.checks import describe

#: The layout :meth:`LoopSettings.to_dict` writes.
SETTINGS_VERSION = 2


def _from_version_1(config: dict[str, Any]) -> dict[str, Any]:
    r"""A header of layout 1 (any of the settings added after it was written
    missing) as layout 2, each missing setting the behaviour the log was
    written with (see the module docstring)."""
    config = dict(config)
    config.setdefault("warm_start_fits", False)
    config.setdefault("unit_cube", False)
    config.setdefault("avoid_resolved", False)
    config.setdefault("boundary_step", None)
    config.setdefault("fit_options", {"maxfun": 15000})  # scipy's default
    if isinstance(config.get("fit_options"), dict):
        ftol = _options.SCIPY_FTOL
        config["fit_options"] = {"ftol": ftol, **config["fit_options"]}
    if isinstance(config.get("acqf_options"), dict):
        config["acqf_options"] = {
            "optimizer": "scipy",
            "ftol": None,  # BoTorch's default
            **config["acqf_options"],
        }
    config["version"] = 2
    return config


#: version -> the function that takes a header of that layout to the next.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _from_version_1,
}


def migrate(config: Mapping[str, Any]) -> dict[str, Any]:
    r"""A header's settings in the current layout (:data:`SETTINGS_VERSION`).

    Args:
        config: The header's ``config``; without a ``version``, layout 1.

    Returns:
        A new dict with ``"version": SETTINGS_VERSION`` (``config`` is not
        edited).

    Raises:
        SettingsVersionError: ``version`` is not an int in ``[1,
            SETTINGS_VERSION]`` (a newer prefbo's log, or not a version).
    """
    config = dict(config)
    version = config.get("version", 1)
    if type(version) is not int or version < 1:
        raise SettingsVersionError(
            "config version must be an int >= 1 (the settings layout); got "
            f"{describe(version)}."
        )
    if version > SETTINGS_VERSION:
        raise SettingsVersionError(
            f"config version {version} is newer than this prefbo reads (settings "
            f"versions 1 to {SETTINGS_VERSION}); upgrade prefbo to read it."
        )
    while version < SETTINGS_VERSION:
        config = MIGRATIONS[version](config)
        version = config["version"]
    return config


@dataclass(frozen=True, eq=False)
class LoopSettings:
    r"""Every setting of a :class:`~prefbo.loop.PreferentialOptimizer`,
    checked when made (see the module docstring).

    Each setting is checked when the settings are made, and kept
    normalised: ``bounds`` as the float64 ``2 x d`` box (a copy) or the
    :class:`~prefbo.space.Space`, the option dictionaries with their
    defaults filled in, ``seed`` an int and ``boundary_step`` a float or
    ``None``. Two settings are equal when their :meth:`to_dict` are. The
    dictionaries are the object's own: read them, do not edit them
    (:func:`dataclasses.replace` makes changed settings, checked again).

    Args:
        bounds, model, strategy, q: The designs, the model kind, the
            strategy and the options per question, as
            :class:`~prefbo.loop.PreferentialOptimizer` documents them.
        keep_winner: Put the previous answer's winner first in the next
            question and choose only the other ``q-1`` options.
        refit_every: Refit hyperparameters after every this many answers
            (the model is always conditioned on all answers).
        seed: Seed of every random choice, an int in ``[-2**63, 2**64 - 1]``.
        initial_random: Questions drawn uniformly at random before the
            strategy takes over; at least 1 unless the strategy uses no
            model (the first question comes before any answer).
        warm_start_fits: Start each refit at the hyperparameters and
            approximation of the previous one (the fit at ``c`` answers
            starts from the fit at ``c - refit_every``, a chain that
            depends on the answers alone, so a resumed session recomputes
            it exactly). ``False``: every refit starts at the model's
            default hyperparameters.
        unit_cube: The models see the unit cube of the box (every
            default prior is set for inputs in ``[0, 1]^d``). ``False``:
            the box's own units (older log headers).
        avoid_resolved: Never ask a repeat or near-copy the model no
            longer needs, nor a repeat where an unasked question is
            nearly as informative (:mod:`prefbo.loop.repeats`). ``False``:
            only identical options refused (older log headers).
        boundary_step: Tell the model that the utility rises into the
            box from its faces (:mod:`prefbo.loop.boundary`): while a
            question is computed, every option the strategy proposes on
            a face becomes the loser of a virtual comparison with the
            design this far inside (a fraction of the box's width, in
            ``[0.001, 0.5]``; with a space, only its continuous
            variables have faces) and the question is computed again
            (up to 4 computations; options still on a face are then
            asked this far inside); the comparisons go with the answer.
            Only strategies that use the model, after ``initial_random``;
            never for a kept winner. It keeps EUBO from spending its
            questions on the faces and corners, where a stationary
            model's variance is largest, at a price: a person whose
            best design lies on a face is only brought to within about
            ``boundary_step`` of it (pass ``None`` where that is
            expected). ``None``: no virtual comparisons (older log headers).
        fit_options: scipy L-BFGS-B ``options`` of the Laplace and EP
            hyperparameter refits (``fit_gpytorch_mll``'s
            ``optimizer_kwargs["options"]``); default ``{"maxfun": 30,
            "ftol": 1e-6}``: at most 30 evaluations, and a stop once the
            evidence changes by less than 1e-6 of itself.
        acqf_options: ``num_restarts``, ``raw_samples``, ``maxiter`` and
            ``ftol`` (L-BFGS-B's relative tolerance on the acquisition
            value, default 1e-6; ``None``: BoTorch's) of the acquisition
            maximiser, ``mc_samples`` of qEUBO, and ``optimizer``, the
            maximiser of strategy ``"eubo"``: ``"scipy"`` (default,
            BoTorch's ``optimize_acqf``, which stops at local optima) or
            ``"torch"`` (:func:`~prefbo.acquisition.maximize_eubo`, which
            scores every pair of ``raw_samples`` Sobol designs and
            refines the best ``num_restarts`` by at most ``maxiter``
            Newton steps: it finds higher EUBO values, which is not
            better for regret, see ``benchmarks/decisions.md``).
        model_options: Keyword arguments of the model's constructor.
        metadata: JSON-serialisable data stored in the log header (e.g.
            variable names), available as the optimiser's ``metadata``.

    Raises:
        InputTypeError: A setting of the wrong type (named).
        InputDataError: An unknown model kind, strategy or option key, or
            an invalid value (named).
        UnsupportedError: A strategy that cannot serve ``q`` or the model
            kind.
    """

    bounds: Tensor | Space
    model: str = "ep"
    strategy: str = "eubo"
    q: int = 2
    keep_winner: bool = False
    refit_every: int = 1
    seed: int = 0
    initial_random: int = 2
    warm_start_fits: bool = True
    unit_cube: bool = True
    avoid_resolved: bool = True
    boundary_step: float | None = DEFAULT_STEP
    fit_options: dict[str, Any] | None = None
    acqf_options: dict[str, Any] | None = None
    model_options: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    #: The layout of :meth:`to_dict` (:data:`SETTINGS_VERSION`).
    version: int = field(default=SETTINGS_VERSION, init=False)

    def __post_init__(self) -> None:
        space, box = design_box(self.bounds)
        _options.check_setting_types(
            None,
            flags={
                "keep_winner": self.keep_winner,
                "warm_start_fits": self.warm_start_fits,
                "unit_cube": self.unit_cube,
                "avoid_resolved": self.avoid_resolved,
            },
            dicts={"model_options": self.model_options, "metadata": self.metadata},
        )
        kind, strategy = model_and_strategy(self.model, self.strategy, self.q, space)
        step = check_schedule(
            self.refit_every,
            self.boundary_step,
            self.seed,
            self.initial_random,
            strategy.uses_model,
        )
        acqf = _options.acqf_options(self.acqf_options)
        model_options = dict(self.model_options or {})
        _options.check_model_options(
            self.model, kind.model_class, model_options, kind.loop_options
        )
        fit = _options.fit_options(self.fit_options)
        kept = {
            "bounds": box.clone() if space is None else space,
            "seed": int(self.seed),
            "boundary_step": step,
            "acqf_options": acqf,
            "model_options": model_options,
            "fit_options": fit,
            "metadata": dict(self.metadata or {}),
        }
        for name, value in kept.items():
            object.__setattr__(self, name, value)

    __hash__ = None  # type: ignore[assignment]  # holds dicts

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LoopSettings):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    # ------------------------------------------------------------ derived
    @property
    def space(self) -> Space | None:
        r"""The :class:`~prefbo.space.Space` of the designs (``None``: a box)."""
        return self.bounds if isinstance(self.bounds, Space) else None

    @property
    def box(self) -> Tensor:
        r"""The ``2 x d`` float64 box of the designs (a space's: the unit box
        of its ``space.dim`` model columns); a copy."""
        space = self.space
        return self.bounds.clone() if space is None else unit_box(space)

    @property
    def model_kind(self) -> type[ModelKind]:
        r"""The registered model kind named by ``model``."""
        return get_model_kind(self.model)

    @property
    def strategy_object(self) -> Strategy:
        r"""The registered strategy named by ``strategy``."""
        return get_strategy(self.strategy)

    # ------------------------------------------------------------ the header
    def to_dict(self) -> dict[str, Any]:
        r"""The settings, JSON-serialisable where ``metadata`` is (a session
        log's header ``config``), with the layout's ``version``; new dicts.
        """
        space = self.space
        return {
            "version": self.version,
            "bounds": self.bounds.tolist() if space is None else space.to_dict(),
            "model": self.model,
            "strategy": self.strategy,
            "q": self.q,
            "keep_winner": self.keep_winner,
            "refit_every": self.refit_every,
            "seed": self.seed,
            "initial_random": self.initial_random,
            "warm_start_fits": self.warm_start_fits,
            "unit_cube": self.unit_cube,
            "avoid_resolved": self.avoid_resolved,
            "boundary_step": self.boundary_step,
            "fit_options": dict(self.fit_options),
            "acqf_options": dict(self.acqf_options),
            "model_options": dict(self.model_options),
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> LoopSettings:
        r"""The settings of a header's ``config``, of any layout this prefbo
        has written (:func:`migrate`).

        A header of layout 1 may lack any setting but ``bounds`` (the
        default then, after :func:`migrate`); later layouts hold every one.

        Args:
            config: The ``config`` of a session log's header.

        Returns:
            The settings, checked.

        Raises:
            SettingsVersionError: A layout this prefbo cannot read.
            InputDataError: An unknown setting, a missing one (see above),
                or a setting the constructor refuses (named).
            InputTypeError: A setting of the wrong type (named).
            UnsupportedError: A strategy that cannot serve ``q`` or the
                model kind.
        """
        if not isinstance(config, Mapping):
            raise InputDataError(
                f"config must be a dict of settings; got {describe(config)}."
            )
        written = config.get("version", 1)
        config = migrate(config)
        known = [f.name for f in dataclasses.fields(cls)]
        _options.check_keys("config", config, known)
        # layout 1 grew over time: what it lacks has its default; later
        # layouts hold every setting
        needed = known if written != 1 else ["bounds"]
        for name in needed:
            if name not in config:
                raise InputDataError(
                    f"config has no setting {name!r} (a header of settings "
                    f"version {written} holds {', '.join(needed)})."
                )
        del config["version"]
        return cls(**config)


def settings_from(given: dict[str, Any], settings: Any) -> LoopSettings:
    r"""The settings of a :class:`~prefbo.loop.PreferentialOptimizer`:
    ``settings`` itself, or made from the constructor's other arguments.

    Args:
        given: The constructor's setting arguments by name (``bounds`` and
            every field of :class:`LoopSettings`).
        settings: Its ``settings`` argument (``None``: made from ``given``).

    Returns:
        The settings, checked.

    Raises:
        InputTypeError: ``settings`` is not a :class:`LoopSettings`, or a
            setting of ``given`` has the wrong type (named).
        InputDataError: ``settings`` given beside ``bounds`` or a setting
            not at its default (named), or an invalid setting (named).
    """
    if settings is None:
        return LoopSettings(**given)
    if not isinstance(settings, LoopSettings):
        raise InputTypeError(
            f"settings must be a LoopSettings or None; got {describe(settings)}."
        )
    defaults = {f.name: f.default for f in dataclasses.fields(LoopSettings)}
    beside = [
        name
        for name, value in given.items()
        if (value is not None if name == "bounds" else value != defaults[name])
    ]
    if beside:
        raise InputDataError(
            "settings holds every setting; leave the other arguments at their "
            f"defaults (dataclasses.replace(settings, ...) changes one); got "
            f"also {', '.join(beside)}."
        )
    return settings
