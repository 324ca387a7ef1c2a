r"""``prefbo serve``: preference studies with people in a browser.

A study file (:mod:`prefbo.serve.config`) names the space, the question size,
the model and strategy, the answers per participant and how an option is
shown. The server (:mod:`prefbo.serve.app`) keeps everything in one database
(:mod:`prefbo.serve.store`: SQLite by default, any SQLAlchemy URL), commits
every answer before it sends the next question, and gets its questions from
worker processes (:mod:`prefbo.serve.worker`) that fit the models off the
request path. Participants join by an unguessable link; the researcher's page
sits behind a secret token; :class:`~prefbo.serve.client.StudyClient` drives
the same JSON endpoints from Python.

Needs the ``serve`` extra: ``pip install prefbo[serve]``.
"""

from prefbo.serve.client import StudyClient, StudyServerError
from prefbo.serve.config import StudyConfig, StudyFileError, load_study

__all__ = [
    "StudyClient",
    "StudyConfig",
    "StudyFileError",
    "StudyServerError",
    "load_study",
]
