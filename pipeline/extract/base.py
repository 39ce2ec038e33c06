"""What every reader gets and returns, and the registry that dispatches source kinds to readers."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ..redact import Redactor

# Append-only logs: a grown one is read from where the last run stopped.
APPEND_KINDS = frozenset({"events", "legacy_jsonl", "transcript"})

# Never stored anywhere (CONTRACT.md): dropped wherever they appear in an event's data.
FORBIDDEN_KEYS = frozenset({"reasoningText", "reasoningOpaque", "encryptedContent", "transformedContent"})
# Matches a raw JSON line that may hold a forbidden key (a key escaped with \uXXXX is caught by the
# secret screen, which sends the line down the careful path anyway).
FORBIDDEN_SCREEN = "|".join(sorted(FORBIDDEN_KEYS))


@dataclass(frozen=True)
class Source:
    """One unit the ingest fingerprints and reads: a file, or a folder read as a whole."""

    path: str
    kind: str
    session_id: str | None = None
    root: str = ""  # the source root it was found under (Copilot home or VS Code user folder)
    workspace: str | None = None  # VS Code: the folder its workspaceStorage belongs to (workspace.json)


@dataclass
class Prior:
    """What the warehouse remembers of a source from the last run that read it."""

    fingerprint: str
    size: int
    last_good_offset: int
    n_records: int
    good_line: int = 1
    tail_digest: str | None = None


@dataclass
class ReadResult:
    rows: dict[str, list[dict]] = field(default_factory=dict)
    rejects: list[dict] = field(default_factory=list)
    last_good_offset: int = 0
    good_line: int = 1
    n_records: int = 0
    appended: bool = False  # rows continue the file's previous rows (append-only growth)
    pending_tail: bool = False
    skipped_reason: str | None = None  # could not be read now; retried next run, rows kept

    def add(self, table: str, row: dict) -> None:
        self.rows.setdefault(table, []).append(row)

    def reject(self, source_path: str, reason: str, *, line=None, offset=None, excerpt: str = "") -> None:
        if line is not None:
            position = f"line {line} @ byte {offset}"
        elif offset is not None:
            position = f"byte {offset}"
        else:
            position = "file"
        self.rejects.append({
            "source_path": source_path, "position": position, "line_number": line,
            "byte_offset": offset, "reason": reason, "excerpt": excerpt[:200],
        })


@dataclass
class Context:
    run_id: str
    redact: Redactor


Reader = Callable[[Source, Context, "Prior | None"], ReadResult]
READERS: dict[str, Reader] = {}


def reader(kind: str):
    def register(fn: Reader) -> Reader:
        READERS[kind] = fn
        return fn
    return register


def stat_fingerprint(path: str) -> tuple[str, int]:
    """Fingerprint from metadata only (cheap): size and mtime of a file, or of every file in a folder."""
    st = os.stat(path)  # one system call for a file, the common case
    if stat.S_ISDIR(st.st_mode):
        p = Path(path)
        parts = []
        total = 0
        for child in sorted(p.rglob("*")):
            if child.is_file():
                st = child.stat()
                total += st.st_size
                parts.append(f"{child.relative_to(p)}:{st.st_size}:{st.st_mtime_ns}")
        return hashlib.md5("|".join(parts).encode()).hexdigest(), total
    return f"{st.st_size}:{st.st_mtime_ns}", st.st_size


def keep(value):
    """The redactor for text a line screen has cleared."""
    return value


def scrub(value, redact: Redactor):
    """Drop forbidden keys at any depth and redact every string."""
    if isinstance(value, dict):
        return {k: scrub(v, redact) for k, v in value.items() if k not in FORBIDDEN_KEYS}
    if isinstance(value, list):
        return [scrub(v, redact) for v in value]
    if isinstance(value, str):
        return redact(value)
    return value


def to_json(value) -> str | None:
    if value is None:
        return None
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def as_text(value) -> str | None:
    """Text from a value that may be a string, a list of parts or a nested object."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, bool)):
        return str(value)
    if isinstance(value, list):
        parts = [as_text(v) for v in value]
        return "\n".join(p for p in parts if p)
    if isinstance(value, dict):
        for key in ("text", "value", "content", "message"):
            if key in value:
                return as_text(value[key])
        return to_json(value)
    return str(value)


def read_bytes(path: str, start: int = 0) -> bytes:
    with open(path, "rb") as fh:
        if start:
            fh.seek(start)
        return fh.read()


def load_json_file(source: Source, res: ReadResult, ctx: Context):
    """A whole-file JSON object, or None with a file-level reject (BOM and NUL tail tolerated)."""
    raw = read_bytes(source.path)
    try:
        doc = orjson.loads(raw.lstrip(b"\xef\xbb\xbf").rstrip(b"\x00 \r\n\t"))
    except orjson.JSONDecodeError as exc:
        res.reject(source.path, f"file is not valid JSON: {exc}",
                   excerpt=ctx.redact(raw[:200].decode("utf-8", "replace")))
        return None
    if not isinstance(doc, dict):
        res.reject(source.path, "file is JSON but not an object")
        return None
    return doc
