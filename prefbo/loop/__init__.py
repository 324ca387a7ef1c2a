r"""The preference-elicitation loop: ask, fit, choose the next question.

:class:`PreferentialOptimizer` is the ask/tell loop (durable with a session
log, see :mod:`prefbo.loop.session`). Its models come from the model kinds of
:mod:`prefbo.loop.model_kinds` and its questions from the strategies of
:mod:`prefbo.loop.strategies`, each registered by name
(:func:`register_model_kind`, :func:`register_strategy`).
:class:`PopulationStudy` runs many participants on one population model
(:mod:`prefbo.loop.study`). :mod:`prefbo.loop.demo` is the main job of
``make demo``.
"""

from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.model_kinds import ModelKind, register_model_kind
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.strategies import Question, Strategy, register_strategy
from prefbo.loop.study import PopulationStudy

__all__ = [
    "ModelKind",
    "PopulationStudy",
    "PreferentialOptimizer",
    "Question",
    "Strategy",
    "expected_fit_warnings",
    "register_model_kind",
    "register_strategy",
]
