"""What ingest would read, and from where: per source root and kind, how many files, how many bytes
and when the newest changed (the ``sources`` verb). And the check behind its warning: a folder named
as a Copilot home or a VS Code User folder that holds nothing Copilot writes, with the folder below
it that does (``--copilot-home ~`` instead of ``~/.copilot`` reads nothing and says why).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .extract import discover
from .extract.base import Finder
from .sources import KINDS

# what a folder holds when Copilot wrote it
CLI_MARKERS = ("session-state", "history-session-state", "session-store.db", "session-store.db-wal", "data.db", "otel")
VSCODE_MARKERS = ("workspaceStorage", "globalStorage")
SEARCH_DEPTH = 3  # how far below a wrongly named folder to look for the right one
SEARCH_ENTRIES = 5000  # and how many entries at most (a home folder can be huge)


@dataclass
class KindCount:
    root: str
    kind: str
    files: int = 0
    bytes: int = 0
    newest: datetime | None = None


def holds(folder: Path, markers: tuple[str, ...]) -> bool:
    try:
        return any((folder / m).exists() for m in markers)
    except OSError:
        return False


def suggest(folder: Path, markers: tuple[str, ...]) -> Path | None:
    """The nearest folder below ``folder`` that holds one of ``markers`` (hidden folders first: ~/.copilot),
    breadth first, at most SEARCH_DEPTH levels and SEARCH_ENTRIES entries; None when there is none."""
    level, seen = [folder], 0
    for _depth in range(SEARCH_DEPTH):
        below = []
        for parent in level:
            try:
                with os.scandir(parent) as it:
                    entries = sorted((e for e in it if e.is_dir(follow_symlinks=False)),
                                     key=lambda e: (not e.name.startswith("."), e.name))
            except OSError:
                continue
            for e in entries:
                seen += 1
                if seen > SEARCH_ENTRIES:
                    return None
                if holds(Path(e.path), markers):
                    return Path(e.path)
                if e.name not in {"node_modules", ".git", "proc", "sys"}:
                    below.append(Path(e.path))
        level = below
    return None


def _home_text(p: Path) -> str:
    home = Path.home()
    try:
        return "~/" + str(p.relative_to(home)) if p.is_relative_to(home) and p != home else str(p)
    except ValueError:
        return str(p)


def warnings(copilot_homes: list[Path], vscode_users: list[Path]) -> list[str]:
    """One line per named folder that holds nothing Copilot writes, naming the one below it that does."""
    out = []
    for flag, folders, markers, what in (
            ("--copilot-home", copilot_homes, CLI_MARKERS, "a Copilot CLI home (session-state/, session-store.db, "
                                                            "data.db, otel/)"),
            ("--vscode-user", vscode_users, VSCODE_MARKERS, "a VS Code User folder (workspaceStorage/)")):
        for folder in folders:
            folder = Path(folder).expanduser()
            if not folder.is_dir() or holds(folder, markers):
                continue
            hint = suggest(folder, markers)
            out.append(f"{flag} {folder}: holds nothing Copilot writes (expected {what})"
                       + (f"; did you mean {_home_text(hint)}?" if hint else ""))
    return out


def inventory(copilot_homes: list[Path], vscode_users: list[Path]) -> tuple[list[KindCount], list]:
    """Per root and kind: files, bytes, newest change; and the problems discovery met."""
    finder = Finder()
    counts: dict[tuple[str, str], KindCount] = {}
    for src in discover(copilot_homes, vscode_users, finder):
        c = counts.setdefault((src.root, src.kind), KindCount(src.root, src.kind))
        paths = [Path(src.path)]
        if Path(src.path).is_dir():
            paths = [p for p in Path(src.path).rglob("*") if p.is_file()]
        elif src.kind == "session_store" and Path(src.path + "-wal").is_file():
            paths.append(Path(src.path + "-wal"))
        c.files += 1
        for p in paths:
            try:
                st = p.stat()
            except OSError:
                continue
            c.bytes += st.st_size
            changed = datetime.fromtimestamp(st.st_mtime, timezone.utc)
            c.newest = max(c.newest, changed) if c.newest else changed
    order = list(KINDS)
    rows = sorted(counts.values(), key=lambda c: (c.root, order.index(c.kind) if c.kind in order else 99, c.kind))
    return rows, finder.problems
