r"""Sphinx configuration of prefbo's documentation (``make docs``).

Pages are Markdown (MyST); the API reference is generated from the
docstrings (``_ext/prefbo_api.py``) and the tutorials from their jupytext
sources in ``tutorials/`` (``_ext/prefbo_tutorials.py``), executed in their
small mode. The build treats warnings as errors and is ``nitpicky``: every
reference to a prefbo name, page or heading must resolve.
"""

import logging
import sys
from pathlib import Path

from sphinx.util import logging as sphinx_logging

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "_ext"))

import prefbo  # noqa: E402

project = "prefbo"
author = "the prefbo developers"
copyright = "the prefbo developers (MIT licence)"
release = prefbo.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "myst_nb",
    "prefbo_api",
    "prefbo_tutorials",
    "prefbo_links",
]

exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]

# -- the API reference --------------------------------------------------------
autodoc_default_options = {"show-inheritance": True}
autodoc_member_order = "bysource"
autoclass_content = "both"  # the class's docstring, then __init__'s (its Args)
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autodoc_preserve_defaults = True
# an override without a docstring of its own is not documented (an inherited
# docstring would bring torch's or BoTorch's cross-references along)
autodoc_inherit_docstrings = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # Attributes: sections as fields, not entries

# Every reference to a prefbo name must resolve. Other libraries' names are
# not checked: the build is offline, so there is no intersphinx inventory of
# torch, GPyTorch, BoTorch or the standard library to resolve them against.
nitpicky = True
EXTERNAL = (
    "torch|gpytorch|botorch|linear_operator|numpy|np|scipy|pyro|threadpoolctl"
    "|tqdm|sqlalchemy|starlette|uvicorn|jinja2|httpx|matplotlib|selenium"
    "|typing|typing_extensions|collections|pathlib|os|io|abc|enum|types"
    "|dataclasses|datetime|json|argparse|contextlib|concurrent|threading"
    "|multiprocessing|subprocess|socket|signal|queue|sqlite3|asyncio"
    "|logging|warnings|random|itertools|functools|re|tempfile|uuid"
    "|hashlib|builtins|numbers|decimal|fractions|math|zipfile|gzip|csv"
    "|weakref|copy|inspect|ast|textwrap|shutil|sys|time|string|struct"
)
nitpick_ignore_regex = [
    (r"py:.*", rf"({EXTERNAL})(\..*)?"),
    # private names (a leading underscore) have no entry of their own
    (r"py:.*", r"(.*\.)?_[A-Za-z]\w*(\..*)?"),
]
# other libraries' names as signatures write them, unqualified (the
# annotation's module imports them under TYPE_CHECKING or by this name)
nitpick_ignore = [
    ("py:class", name)
    for name in (
        "Tensor",
        "Kernel",
        "Mean",
        "Model",
        "LinearOperator",
        "InputTransform",
        "InducingPointAllocator",
        "ProcessGroup",
        "BaseProcess",
        "Connection",
    )
] + [("py:exc", "HTTPException"), ("py:exc", "IntegrityError")]
# An attribute set in __init__ (no entry of its own).
nitpick_ignore += [
    ("py:attr", "carried"),
    ("py:attr", "QuestionEngine.carried"),
]

# -- pages ----------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

# -- tutorials --------------------------------------------------------------------
prefbo_tutorials_dir = str(ROOT / "tutorials")
nb_execution_mode = "force"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

# -- output -----------------------------------------------------------------------
html_theme = "furo"
html_title = f"prefbo {release}"
html_static_path: list[str] = []

# -- warnings in modules others are rebuilding ----------------------------------------
# A docutils warning has no type to name in `suppress_warnings`; these are
# dropped by where they come from and what they say, and no others.
KNOWN_WARNINGS = [
    # the usage lines of the module's docstring read as a definition list
    ("docstring of prefbo.serve.cli", "Definition list ends without a blank line"),
]


class _KnownWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        where = str(getattr(record, "location", "") or "")
        message = str(record.msg)
        return not any(w in where and message.startswith(m) for w, m in KNOWN_WARNINGS)


def setup(app):
    for handler in logging.getLogger("sphinx").handlers:
        if isinstance(handler, sphinx_logging.WarningStreamHandler):
            handler.filters.insert(0, _KnownWarnings())
    # nbclient's "Executing notebook with kernel" lines, one per tutorial
    logging.getLogger("traitlets").setLevel(logging.WARNING)
