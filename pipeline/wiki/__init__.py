"""The markdown wiki, in three steps: ``queries`` reads what it shows from the warehouse, ``pages``
turns that into pages (pure functions), and ``write_wiki`` writes them.

The same warehouse gives the same bytes; a page whose bytes did not change is not rewritten, and
what the previous report wrote and this one did not is removed (only that: ``.manifest.json``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from .. import charts
from ..warehouse import connect
from . import queries
from .markdown import page_name
from .pages import build_pages

__all__ = ["WikiResult", "build_pages", "page_name", "write_wiki"]

log = logging.getLogger(__name__)


@dataclass
class WikiResult:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)

    def line(self, out: Path) -> str:
        return (f"wiki: {len(self.written)} pages written, {len(self.unchanged)} unchanged, "
                f"{len(self.removed)} removed in {out}")


MANIFEST = ".manifest.json"  # the pages and charts the last report wrote: the only files it ever removes


def write_wiki(warehouse: str | Path, out_dir: str | Path) -> WikiResult:
    """Read the warehouse (``queries``), build the pages (``pages``), draw the charts that changed
    (``charts``) and write what changed under ``out_dir``."""
    out_dir = Path(out_dir)
    con = connect(warehouse, read_only=True)
    try:
        data = queries.load(con)
    finally:
        con.close()
    pages, specs = build_pages(data)
    pages.update(charts.render_all(specs, out_dir))
    result = WikiResult()
    root = out_dir.resolve()
    for rel, content in sorted(pages.items()):
        path = out_dir / rel
        if not path.resolve().is_relative_to(root):  # names are made safe (page_name); this is the guard
            raise ValueError(f"page {rel!r} would be written outside {out_dir}")
        data = content.encode("utf-8")
        if path.is_file() and path.read_bytes() == data:
            result.unchanged.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        result.written.append(path)
    # remove what the previous report wrote and this one did not; never a file it did not write
    manifest = out_dir / MANIFEST
    try:
        previous = json.loads(manifest.read_text(encoding="utf-8")).get("files", []) if manifest.is_file() else []
    except (ValueError, OSError, AttributeError):
        previous = []
    for rel in sorted(set(previous) - set(pages)):
        stale = out_dir / rel
        if isinstance(rel, str) and stale.resolve().is_relative_to(root) and stale.is_file():
            stale.unlink()
            result.removed.append(stale)
    listing = (json.dumps({"files": sorted(pages)}, indent=1) + "\n").encode("utf-8")
    if not manifest.is_file() or manifest.read_bytes() != listing:  # unchanged: not rewritten either
        tmp = manifest.with_name(MANIFEST + ".tmp")
        tmp.write_bytes(listing)
        tmp.replace(manifest)
    log.info(result.line(out_dir))
    return result
