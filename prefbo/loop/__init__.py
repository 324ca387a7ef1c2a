r"""The preference-elicitation loop: ask, fit, choose the next question.

:class:`PreferentialOptimizer` is the ask/tell loop (durable with a session
log, see :mod:`prefbo.loop.session`); :mod:`prefbo.loop.demo` is the README's
main job.
"""

from prefbo.loop.optimizer import PreferentialOptimizer

__all__ = ["PreferentialOptimizer"]
