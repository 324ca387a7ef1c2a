r"""The tutorials' pages, made from their jupytext sources at build time.

Each ``tutorials/NAME.py`` (jupytext ``py:percent``) becomes
``<srcdir>/tutorials/NAME.ipynb``, which MyST-NB executes and renders. Three
cells are added to the source's own:

- a hidden first cell that sets ``SMOKE_TEST=1`` (the tutorial's small mode,
  the one the test suite runs) and ``TUTORIAL_OUTPUT`` (a folder of the
  page's own under the build directory);
- after the title, a note that the page ran in the small mode;
- at the end, the figures the run saved (the tutorials save their figures
  to files rather than show them).

Only notebooks whose text changed are rewritten, so an unchanged tutorial is
not executed again by an incremental build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jupytext
import nbformat
from sphinx.application import Sphinx

OUT_DIR = "tutorials"

NOTE = (
    "```{note}\n"
    "This page was executed in the tutorial's small mode (`SMOKE_TEST=1`, the "
    "run the test suite makes): few answers, few samples, so its numbers and "
    "figures are rough. For the real run: `python tutorials/{name}.py` from "
    "the repository's root (figures go to `$TUTORIAL_OUTPUT`, default "
    "`tutorial_output/`).\n"
    "```"
)

FIGURES = """\
from IPython.display import Image, display

for _figure in sorted(OUTPUT.glob("*.png")):
    display(Image(filename=str(_figure)))
"""


def notebook(source: Path, output: Path) -> nbformat.NotebookNode:
    r"""The notebook of the tutorial at ``source``, its figures saved under
    ``output``."""
    nb = jupytext.read(source, fmt="py:percent")
    setup = nbformat.v4.new_code_cell(
        "import os\n"
        "import shutil\n"
        f"shutil.rmtree({str(output)!r}, ignore_errors=True)\n"
        'os.environ["SMOKE_TEST"] = "1"\n'
        f'os.environ["TUTORIAL_OUTPUT"] = {str(output)!r}',
        metadata={"tags": ["remove-cell"]},
    )
    note = nbformat.v4.new_markdown_cell(NOTE.replace("{name}", source.stem))
    figures_title = nbformat.v4.new_markdown_cell(
        "## The figures of this run\n\nWhat the tutorial saved to "
        "`TUTORIAL_OUTPUT` (in the small mode)."
    )
    figures = nbformat.v4.new_code_cell(FIGURES, metadata={"tags": ["remove-input"]})
    first_markdown = next(
        (i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), -1
    )
    cells = list(nb.cells)
    cells.insert(first_markdown + 1, note)
    cells.insert(0, setup)
    if "OUTPUT" in source.read_text(encoding="utf-8"):
        cells += [figures_title, figures]
    nb.cells = cells
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    return nb


def write_notebooks(app: Sphinx) -> None:
    r"""Write ``<srcdir>/tutorials/NAME.ipynb`` for each ``tutorials/NAME.py``
    of the repository (``app.config.prefbo_tutorials_dir``)."""
    sources = sorted(Path(app.config.prefbo_tutorials_dir).glob("*.py"))
    out = Path(app.srcdir) / OUT_DIR
    out.mkdir(exist_ok=True)
    figures = Path(app.outdir).parent / "tutorial_output"
    names = set()
    for source in sources:
        names.add(source.stem)
        text = nbformat.writes(notebook(source, figures / source.stem))
        path = out / f"{source.stem}.ipynb"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    for stale in out.glob("*.ipynb"):
        if stale.stem not in names:
            stale.unlink()


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("prefbo_tutorials_dir", "", "env", types=[str])
    app.connect("builder-inited", write_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
