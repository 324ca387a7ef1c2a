r"""Links from a page to a file of the repository outside ``docs/``.

A Markdown page links to a benchmark's results page as
``[page](../benchmarks/results/NAME.md)``, which reads right where the
repository is browsed. Sphinx would take such a ``.md`` path for a page of
the site and fail on it; this transform makes it a download of the file (as
MyST does for any other file), so the link works in the built site too. A
link to a file that does not exist stays as it was and fails the build.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform


class RepositoryFileLinks(SphinxTransform):
    r"""A link to an existing file outside the site becomes a download."""

    default_priority = 100

    def apply(self, **kwargs: Any) -> None:
        srcdir = Path(self.env.srcdir)
        here = Path(self.env.doc2path(self.env.docname)).parent
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("reftype") != "myst" or node.get("refdomain") != "doc":
                continue
            target = node["reftarget"]
            if target in self.env.found_docs:
                continue
            path = (srcdir / target).resolve()
            candidates = [path, path.with_name(path.name + ".md")]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None or found.is_relative_to(srcdir):
                continue
            download = addnodes.download_reference(
                refdomain=None,
                reftarget=os.path.relpath(found, here),
                refdoc=self.env.docname,
                reftype="myst",
                refexplicit=True,
            )
            download.extend(node.children)
            download.source, download.line = node.source, node.line
            node.replace_self(download)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_transform(RepositoryFileLinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
