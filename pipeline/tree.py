"""Write a folder of generated files (the wiki, the site): only files whose bytes changed are
rewritten, each through a temporary file, and what the previous run wrote and this one did not is
removed - only that, as listed in the folder's ``.manifest.json``; never a file it did not write."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)
MANIFEST = ".manifest.json"


@dataclass
class TreeResult:
    what: str
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)

    def add(self, other: TreeResult) -> None:
        """Count the files ``other`` wrote and found unchanged (part of the same tree) as this one's."""
        self.written += other.written
        self.unchanged += other.unchanged

    def line(self, out: Path) -> str:
        return (f"{self.what}: {len(self.written)} pages written, {len(self.unchanged)} unchanged, "
                f"{len(self.removed)} removed in {out}")


def write_files(files: dict[str, str | bytes], out_dir: str | Path, result: TreeResult) -> None:
    """Write each of ``files`` that changed under ``out_dir`` (through a temporary file), noting it in
    ``result`` as written or unchanged; the manifest is ``write_tree``'s."""
    out_dir = Path(out_dir)
    root = out_dir.resolve()
    for rel, content in sorted(files.items()):
        path = out_dir / rel
        if not path.resolve().is_relative_to(root):  # names are made safe (page_name); this is the guard
            raise ValueError(f"page {rel!r} would be written outside {out_dir}")
        data = content.encode("utf-8") if isinstance(content, str) else content
        if path.is_file() and path.read_bytes() == data:
            result.unchanged.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        result.written.append(path)


def write_tree(files: dict[str, str | bytes], out_dir: str | Path, what: str = "files",
               done: TreeResult | None = None) -> TreeResult:
    """Write what changed of ``files`` under ``out_dir``, remove what the previous run wrote and this one
    did not, and list this run's files in the manifest. ``done``: files of this tree already written
    (``write_files``, by worker processes), listed with the others."""
    out_dir = Path(out_dir)
    result = TreeResult(what)
    root = out_dir.resolve()
    write_files(files, out_dir, result)
    names = set(files)
    if done is not None:
        result.add(done)
        names |= {p.relative_to(out_dir).as_posix() for p in (*done.written, *done.unchanged)}
    manifest = out_dir / MANIFEST
    try:
        previous = json.loads(manifest.read_text(encoding="utf-8")).get("files", []) if manifest.is_file() else []
    except (ValueError, OSError, AttributeError):
        previous = []
    for rel in sorted(set(previous) - names):
        stale = out_dir / rel
        if isinstance(rel, str) and stale.resolve().is_relative_to(root) and stale.is_file():
            stale.unlink()
            result.removed.append(stale)
    listing = (json.dumps({"files": sorted(names)}, indent=1) + "\n").encode("utf-8")
    out_dir.mkdir(parents=True, exist_ok=True)
    if not manifest.is_file() or manifest.read_bytes() != listing:  # unchanged: not rewritten either
        tmp = manifest.with_name(MANIFEST + ".tmp")
        tmp.write_bytes(listing)
        tmp.replace(manifest)
    log.info(result.line(out_dir))
    return result
