"""Write a folder of generated files (the wiki, the site, the parquet export): only files whose bytes
changed are rewritten, each through a temporary file, and what the previous run wrote and this one did
not is removed - only that, as listed in the folder's ``.manifest.json``; never a file it did not write.

A file this tool did not write is never written over either: the report writes the rest, leaves that one
as it is, and says so (``OutputError``; ``force`` writes over it and takes it as the report's). What a run
wrote is known even when it was killed before it listed its files in the manifest: each file not listed
yet is first noted in ``.manifest.pending`` (one appended line each, from any process)."""

from __future__ import annotations

import json
import logging
import os
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from .errors import OutputError

log = logging.getLogger(__name__)
MANIFEST = ".manifest.json"
PENDING = ".manifest.pending"


@dataclass
class TreeResult:
    what: str
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    refused: list[Path] = field(default_factory=list)  # files there that this tool did not write: left alone
    # files kept as the last run wrote them without being looked at, by their paths relative to the folder (a
    # report's unchanged session pages: a Path each took ~2 s of 200,000)
    kept: list[str] = field(default_factory=list)

    def add(self, other: TreeResult) -> None:
        """Count the files ``other`` wrote, found unchanged and left alone (part of the same tree) as this one's."""
        self.written += other.written
        self.unchanged += other.unchanged
        self.refused += other.refused
        self.kept += other.kept

    def line(self, out: Path) -> str:
        return (f"{self.what}: {len(self.written)} pages written, {len(self.unchanged) + len(self.kept)} unchanged, "
                f"{len(self.removed)} removed in {out}")


_OWNED: dict[Path, set[str]] = {}  # per folder, in this process (a run's): what the manifests list


def forget() -> None:
    """Read the folders' manifests again (at the start of a report: another process may have written them)."""
    _OWNED.clear()


def owned(out_dir: Path, legacy: frozenset[str] = frozenset()) -> set[str]:
    """The files of ``out_dir`` this tool wrote: those its manifest and its pending list name. ``legacy``:
    the names taken as this tool's in a folder that has neither (written by a version without manifests)."""
    key = out_dir.resolve()
    if key not in _OWNED:
        names: set[str] = set()
        manifest, pending = out_dir / MANIFEST, out_dir / PENDING
        try:
            names.update(n for n in json.loads(manifest.read_text(encoding="utf-8")).get("files", [])
                         if isinstance(n, str))
        except FileNotFoundError:
            if not pending.exists():
                names.update(legacy)
        except (ValueError, OSError, AttributeError):
            pass
        with suppress(OSError):
            names.update(line for line in pending.read_text(encoding="utf-8", errors="replace").splitlines() if line)
        _OWNED[key] = names
    return _OWNED[key]


def _note(out_dir: Path, rel: str) -> None:
    """Note ``rel`` in the folder's pending list before it is written (O_APPEND: workers' lines do not mix)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(out_dir / PENDING, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (rel + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def inside(path: Path, root: Path, out_dir: Path) -> None:
    """``path`` must lead to a place inside ``root`` (``out_dir`` resolved): not through a link out of it."""
    if not path.resolve().is_relative_to(root):
        link = next((p for p in [path, *path.parents] if p.is_symlink()), None)
        how = f"{link} is a link to {os.readlink(link)}" if link else f"{path} is not inside it"
        raise OutputError(f"the report writes only inside {out_dir}, and {how}: remove the link, or choose "
                          "another --out")


def may_write(out_dir: Path, rel: str, path: Path, result: TreeResult, force: bool,
              legacy: frozenset[str] = frozenset()) -> bool:
    """Whether the report may write ``path`` (``out_dir/rel``): a file this tool did not write is left alone
    (noted in ``result.refused``) unless ``force``; a file not listed yet is first noted as pending."""
    mine = owned(out_dir, legacy)
    if rel in mine:
        return True
    if (path.exists() or path.is_symlink()) and not force:
        result.refused.append(path)
        return False
    _note(out_dir, rel)
    mine.add(rel)
    return True


def write_files(files: dict[str, str | bytes], out_dir: str | Path, result: TreeResult, force: bool = False) -> None:
    """Write each of ``files`` that changed under ``out_dir`` (through a temporary file), noting it in
    ``result`` as written or unchanged; the manifest is ``write_tree``'s."""
    out_dir = Path(out_dir)
    root = out_dir.resolve()
    for rel, content in sorted(files.items()):
        path = out_dir / rel
        inside(path, root, out_dir)  # names are made safe (page_name); a link out of the folder is refused
        data = content.encode("utf-8") if isinstance(content, str) else content
        if not may_write(out_dir, rel, path, result, force):
            continue
        if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
            result.unchanged.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.unlink(missing_ok=True)
        tmp.write_bytes(data)
        tmp.replace(path)
        result.written.append(path)


def write_tree(files: dict[str, str | bytes], out_dir: str | Path, what: str = "files",
               done: TreeResult | None = None, force: bool = False) -> TreeResult:
    """Write what changed of ``files`` under ``out_dir``, remove what the previous run wrote and this one
    did not, and list this run's files in the manifest. ``done``: files of this tree already written
    (``write_files``, by worker processes), listed with the others."""
    out_dir = Path(out_dir)
    result = TreeResult(what)
    write_files(files, out_dir, result, force)
    if done is not None:
        result.add(done)
    finish(out_dir, result)
    return result


def finish(out_dir: Path, result: TreeResult) -> None:
    """List the files ``result`` wrote and found unchanged in the manifest, and remove those the previous
    run listed and this one did not write."""
    root = out_dir.resolve()
    prefix = str(out_dir) + os.sep  # each path relative to the folder by its text: Path.relative_to took 1.6 s of
    names = {text[len(prefix):].replace(os.sep, "/") if text.startswith(prefix)  # 200,000 session pages
             else p.relative_to(out_dir).as_posix() for p in (*result.written, *result.unchanged) for text in [str(p)]}
    names.update(result.kept)
    for rel in sorted(owned(out_dir) - names):
        stale = out_dir / rel
        if stale.resolve().is_relative_to(root) and stale.is_file() and not stale.is_symlink():
            stale.unlink()
            result.removed.append(stale)
    listing = (json.dumps({"files": sorted(names)}, indent=1) + "\n").encode("utf-8")
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = out_dir / MANIFEST
    if not manifest.is_file() or manifest.read_bytes() != listing:  # unchanged: not rewritten either
        tmp = manifest.with_name(MANIFEST + ".tmp")
        tmp.write_bytes(listing)
        tmp.replace(manifest)
    (out_dir / PENDING).unlink(missing_ok=True)
    _OWNED.pop(root, None)
    log.info(result.line(out_dir))


def refused(*results: TreeResult) -> None:
    """One line for the files the report left alone because it did not write them (after it wrote the rest)."""
    left = [p for r in results for p in r.refused]
    if left:
        more = f" (and {len(left) - 1} more)" if len(left) > 1 else ""
        raise OutputError(f"{left[0]}{more} was not written by the report and is left as it is: move it away, "
                          "or run `report --force` to write over it")
