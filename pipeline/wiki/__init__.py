"""The markdown wiki, in three steps: ``queries`` reads what it shows from the warehouse, ``pages``
turns that into pages (pure functions), and ``write_wiki`` writes them.

The same warehouse gives the same bytes; a page whose bytes did not change is not rewritten, and
what the previous report wrote and this one did not is removed (only that: ``.manifest.json``).
"""

from __future__ import annotations

from pathlib import Path

from .. import charts
from ..tree import TreeResult, write_tree
from ..warehouse import connect
from . import catalog
from .catalog import build_pages
from .markdown import page_name

__all__ = ["WikiResult", "build_pages", "page_name", "write_wiki"]


WikiResult = TreeResult  # what write_wiki returns (kept under its old name)


def write_wiki(warehouse: str | Path, out_dir: str | Path, data: catalog.WikiData | None = None,
               charts_out: dict[str, str] | None = None) -> TreeResult:
    """Read the warehouse (``catalog.load``; or take ``data`` already read), build the pages (``pages``), draw
    the charts that changed (``charts``; the drawn SVGs are put in ``charts_out`` for the site) and write
    what changed under ``out_dir``."""
    out_dir = Path(out_dir)
    if data is None:
        con = connect(warehouse, read_only=True)
        try:
            data = catalog.load(con)
        finally:
            con.close()
    pages, specs = build_pages(data)
    svgs = charts.render_all(specs, out_dir)
    if charts_out is not None:
        charts_out.update(svgs)
    pages.update(svgs)
    return write_tree(pages, out_dir, "wiki")
