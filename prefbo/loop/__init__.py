r"""The preference-elicitation loop: ask, fit, choose the next question.

:class:`PreferentialOptimizer` is the ask/tell loop (durable with a session
log, see :mod:`prefbo.loop.session`), its settings a frozen, versioned
:class:`LoopSettings` (:mod:`prefbo.loop.settings`). It is built from public
parts: a :class:`DesignBox` (the designs and the models' coordinates of
them), the models of its answers (:class:`~prefbo.loop.fitted.FittedModels`),
the rounds of a question (:class:`~prefbo.loop.questions.Questions`) and a
:class:`QuestionMaker` (a strategy's question under a model), which
:class:`PopulationStudy` asks its participants with too. Its models come
from the model kinds of :mod:`prefbo.loop.model_kinds` and its questions
from the strategies of :mod:`prefbo.loop.strategies`, each registered by name
(:func:`register_model_kind`, :func:`register_strategy`).
:class:`PopulationStudy` runs many participants on one population model
(:mod:`prefbo.loop.study`). :mod:`prefbo.loop.demo` is the main job of
``make demo``.
"""

from prefbo.loop.box import DesignBox
from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.model_kinds import ModelKind, register_model_kind
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.question_maker import QuestionMaker
from prefbo.loop.settings import LoopSettings
from prefbo.loop.strategies import Question, Strategy, register_strategy
from prefbo.loop.study import PopulationStudy

__all__ = [
    "DesignBox",
    "LoopSettings",
    "ModelKind",
    "PopulationStudy",
    "PreferentialOptimizer",
    "Question",
    "QuestionMaker",
    "Strategy",
    "expected_fit_warnings",
    "register_model_kind",
    "register_strategy",
]
