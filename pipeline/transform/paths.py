"""Path normalization: one spelling per file, whatever OS or tool wrote it."""

from __future__ import annotations

import hashlib
import posixpath
import re
from functools import lru_cache
from urllib.parse import unquote, urlparse

_DRIVE = re.compile(r"^/?([A-Za-z]):(/|$)")


def short_hash(*parts: str | None) -> str:
    return hashlib.md5("\x1f".join(p or "" for p in parts).encode("utf-8")).hexdigest()[:16]


def normalize(path: str | None) -> str | None:
    """`C:\\Users\\x\\` -> `c:/Users/x`; `file:///c%3A/x` -> `c:/x`; `/a//b/./c/` -> `/a/b/c`."""
    if path is None:
        return None
    p = path.strip().strip('"').strip("'")
    if not p:
        return None
    if p.startswith("file://"):
        try:
            p = unquote(urlparse(p).path)
        except ValueError:  # a bracket in its authority that is no IPv6 address (a redacted credential: urllib refuses)
            p = unquote(p[len("file://"):].split("/", 1)[1] if "/" in p[len("file://"):] else "")
            p = "/" + p if p else p
    elif p.startswith("vscode-remote://"):
        return p.rstrip("/")  # a remote workspace: its URI is its identity
    p = p.replace("\\", "/")
    unc = p.startswith("//")
    m = _DRIVE.match(p)
    if m:
        rest = p[m.end():]
        p = f"{m.group(1).lower()}:/" + rest
        norm = posixpath.normpath(p[2:]) if rest else "/"
        return f"{m.group(1).lower()}:{norm}"
    norm = posixpath.normpath(p)
    if unc:
        norm = "/" + norm.lstrip("/")
        norm = "/" + norm
    return norm if norm != "." else ""


def is_absolute(p: str) -> bool:
    return p.startswith("/") or bool(_DRIVE.match(p)) or p.startswith("vscode-remote://")


def _is_windows(p: str) -> bool:
    return bool(_DRIVE.match(p))


def relativize(path: str | None, root: str | None, cwd: str | None) -> tuple[str | None, bool]:
    """Project-relative path and whether it lies inside the project root.

    Relative paths are taken relative to ``cwd`` (then to the project root). Windows paths are
    compared case-insensitively, as Windows compares them.
    """
    p = _remote_path(normalize(path))
    if not p:
        return None, False
    r = _folder(root) or ""
    c = _folder(cwd) or r
    if not is_absolute(p):
        if not c:
            return posixpath.normpath(p), True
        p = normalize(posixpath.join(c, p))
    if not r:
        return p, False
    if _is_windows(r) or _is_windows(p):
        pl, rl = p.lower(), r.lower()
    else:
        pl, rl = p, r
    if pl == rl:
        return "", True
    prefix = rl.rstrip("/") + "/"
    if pl.startswith(prefix):
        return p[len(prefix):], True
    return p, False


@lru_cache(maxsize=4096)
def _folder(path: str | None) -> str | None:
    """A project root or working folder, normalized: the same few recur for every file of a session."""
    return _remote_path(normalize(path))


def _remote_path(p: str | None) -> str | None:
    """The path part of ``vscode-remote://<authority>/path``: files of a remote workspace are plain paths."""
    if p and p.startswith("vscode-remote://"):
        rest = p[len("vscode-remote://"):]
        return posixpath.normpath("/" + unquote(rest.split("/", 1)[1])) if "/" in rest else "/"
    return p


def project_root(git_root: str | None, cwd: str | None) -> str:
    root = normalize(git_root) or normalize(cwd) or ""
    if _is_windows(root):
        return root[0].lower() + root[1:]
    return root


def project_name(root: str, repository: str | None) -> str:
    if repository:
        return repository.rstrip("/").split("/")[-1]
    if not root:
        return "(no project)"
    return root.rstrip("/").split("/")[-1] or root
