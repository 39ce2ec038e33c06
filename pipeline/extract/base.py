"""What every reader gets and returns, and the registry that dispatches source kinds to readers."""

from __future__ import annotations

import hashlib
import math
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import orjson

from ..redact import Redactor
from ..schema import INT32, INT64
from ..sources import KINDS
from .jsonl import DEEP_NOTE, TOO_DEEP, ReadState, Record, iter_records, loads_cut  # the logs' lenient parser

# Never stored anywhere (CONTRACT.md): dropped wherever they appear in an event's data.
FORBIDDEN_KEYS = frozenset({"reasoningText", "reasoningOpaque", "encryptedContent", "transformedContent"})
# What a raw JSON line that may hold a forbidden key holds (a key escaped with \uXXXX is caught by the
# secret screen, which sends the line down the careful path anyway).
FORBIDDEN_BYTES = tuple(k.encode() for k in sorted(FORBIDDEN_KEYS))


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
    prefix_digest: str | None = None
    head_digest: str | None = None


@dataclass
class ReadResult:
    rows: dict[str, list[dict]] = field(default_factory=dict)
    # (table, Parquet file, rows, what is added to its event indexes as it is loaded): rows spilled
    parts: list[tuple[str, str, int, int]] = field(default_factory=list)
    rejects: list[dict] = field(default_factory=list)
    last_good_offset: int = 0
    good_line: int = 1
    n_records: int = 0
    appended: bool = False  # rows continue the file's previous rows (append-only growth)
    pending_tail: bool = False
    skipped_reason: str | None = None  # could not be read now; retried next run, rows kept

    def add(self, table: str, row: dict) -> None:
        self.rows.setdefault(table, []).append(row)

    def reject(self, source_path: str, reason: str, *, line: int | None = None, offset: int | None = None,
               excerpt: str = "") -> None:
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


# Text longer than this many characters is cut to it, with its full length and sha256 appended and a
# _rejects row saying so (a 200 MB prompt would otherwise make every search model run out of memory).
MAX_TEXT_CHARS = 4 * 1024 * 1024
EXCERPT_CHARS = 200


def max_text_chars() -> int:
    """``$COPILOT_WAREHOUSE_MAX_TEXT`` (characters), else ``MAX_TEXT_CHARS``."""
    value = os.environ.get("COPILOT_WAREHOUSE_MAX_TEXT", "")
    return int(value) if value.isdigit() and int(value) > 0 else MAX_TEXT_CHARS


@dataclass
class Context:
    run_id: str
    redact: Redactor
    max_text: int = MAX_TEXT_CHARS
    scratch: str | None = None  # a private folder for copies (of live databases); None: the system's temp folder
    # what a reader of a large source calls as it goes, with its result and the bytes read since: the rows
    # read so far may leave memory (``parallel`` writes them to Parquet parts in ``scratch``); by default
    # they stay
    spill: Callable[[ReadResult, int], None] = lambda _res, _nbytes: None

    def excerpt(self, text: str | bytes | None) -> str:
        """The start of a record for a _rejects row: redacted before it is cut, so a secret that
        straddles the cut cannot leave half of itself behind."""
        if isinstance(text, bytes):
            text = text[:16 * EXCERPT_CHARS].decode("utf-8", "replace")
        return self.redact((text or "")[:16 * EXCERPT_CHARS])[:EXCERPT_CHARS]


class Problems(list):
    """Values a reader set to NULL (out of range for their column) or cut, for one record."""

    def note(self, what: str) -> None:
        if what not in self:
            self.append(what)

    def reason(self) -> str:
        return "; ".join(self)


def bigint(v: object, what: str, problems: Problems | None, bounds: tuple[int, int] = INT64) -> int | None:
    """An integer column's value: ints, integral floats and numeric strings within ``bounds``;
    anything else NULL (with a note when it was a number that does not fit)."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, str):
        try:
            v = float(v) if any(c in v for c in ".eEnN") else int(v)
        except ValueError:
            return None
    if isinstance(v, float):
        if not math.isfinite(v):
            if problems is not None:
                problems.note(f"{what} is {v} (set to NULL)")
            return None
        v = int(v)
    if not isinstance(v, int):
        return None
    if not bounds[0] <= v <= bounds[1]:
        if problems is not None:
            problems.note(f"{what} = {v} is out of range (set to NULL)")
        return None
    return v


def integer(v: object, what: str, problems: Problems | None) -> int | None:
    return bigint(v, what, problems, INT32)


def cap_text(text: str, limit: int, what: str, problems: Problems | None) -> str:
    """``text`` cut to ``limit`` characters, its full length and sha256 appended, when longer."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    if problems is not None:
        problems.note(f"{what} of {len(text):,} characters cut to {limit:,}")
    return text[:limit] + f"\n[... cut: {len(text):,} characters in all, sha256 {digest}]"


def cap_texts(value: object, limit: int, problems: Problems | None):
    """Every string in a parsed record longer than ``limit`` cut (see ``cap_text``); in place."""
    if isinstance(value, str):
        return cap_text(value, limit, "a text", problems)
    stack = [value]
    while stack:
        v = stack.pop()
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, x in list(items):
            if isinstance(x, str) and len(x) > limit:
                v[k] = cap_text(x, limit, f"text of `{k}`", problems)
            elif isinstance(x, (dict, list)):
                stack.append(x)
    return value


Reader = Callable[[Source, Context, "Prior | None"], ReadResult]
READERS: dict[str, Reader] = {}


def reader(kind: str):
    """Register ``fn`` as the reader of a source kind declared in ``pipeline/sources.py``."""
    if kind not in KINDS:
        raise ValueError(f"reader for {kind!r}: no such source kind in pipeline/sources.py")

    def register(fn: Reader) -> Reader:
        READERS[kind] = fn
        return fn
    return register


def printable_path(path: str) -> str:
    """A path as text: a file name that is not valid UTF-8 (Linux allows any bytes) gets U+FFFD."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class Finder:
    """Directory listing for discovery that never raises: a folder that cannot be listed, an entry
    that cannot be examined (a symlink loop, no permission) or a name that is not valid UTF-8 is
    noted in ``problems`` (path, reason; written to _rejects) and left out."""

    def __init__(self):
        self.problems: list[tuple[str, str]] = []
        self.stats: dict[str, os.stat_result] = {}  # each source found: its stat (``one_each``)

    def note(self, path: str, reason: str) -> None:
        self.problems.append((printable_path(path), reason))

    def entries(self, folder: str) -> list[os.DirEntry]:
        try:
            with os.scandir(folder) as it:
                found = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            self.note(folder, f"folder cannot be listed ({exc.strerror or exc}); not read")
            return []
        out = []
        for e in found:
            try:
                e.name.encode("utf-8")
            except UnicodeEncodeError:
                self.note(e.path, "name is not valid UTF-8; not read")
                continue
            out.append(e)
        return out

    def is_dir(self, entry: os.DirEntry) -> bool:
        try:
            return entry.is_dir()
        except OSError as exc:
            self.note(entry.path, f"cannot be examined ({exc.strerror or exc}); not read")
            return False

    def is_file(self, entry: os.DirEntry) -> bool:
        try:
            if entry.is_file():
                return True
            if entry.is_symlink() and not os.path.exists(entry.path):
                os.stat(entry.path)  # a dangling or looping link: say why
            return False
        except OSError as exc:
            self.note(entry.path, f"cannot be examined ({exc.strerror or exc}); not read")
            return False


# POSIX's ctime is the time of the inode's last change: every write, truncate, chmod or utime sets it to now, and
# nothing sets it back. Windows' st_ctime is the file's creation time instead.
CHANGE_TIME = os.name != "nt"


def stat_fingerprint(path: str, st: os.stat_result | None = None, *, change_time: bool | None = None
                     ) -> tuple[str, int]:
    """(fingerprint, size) from metadata only: a file's size and mtime, and where the system keeps one
    (``CHANGE_TIME``) the time of its last change and its inode; of a folder, those of every file in it. With them a
    source whose fingerprint is as recorded has not been written, truncated or replaced since, even when its size
    stayed and its mtime was set back: an edit anywhere in it is seen, and nothing is opened to see it (a content
    check of the 1 GB `events` corpus's logs opened 5,244 of them on every run). ``st``: the path's stat if it was
    just taken. ``change_time=False``: the fingerprint earlier versions recorded of every source but the append-only
    logs (size and mtime only), which ``load.state`` accepts once in its place."""
    st = st if st is not None else os.stat(path)  # one system call for a file, the common case
    with_change = CHANGE_TIME if change_time is None else change_time and CHANGE_TIME
    if stat.S_ISDIR(st.st_mode):
        p = Path(path)
        parts = []
        total = 0
        for child in sorted(p.rglob("*")):
            if child.is_file():
                st = child.stat()
                total += st.st_size
                parts.append(f"{child.relative_to(p)}:{_stamp(st, with_change)}")
        return hashlib.md5("|".join(parts).encode()).hexdigest(), total
    return _stamp(st, with_change), st.st_size


def _stamp(st: os.stat_result, change_time: bool) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}" + (f":{st.st_ctime_ns}:{st.st_ino}" if change_time else "")


def keep(value: object):
    """The redactor for text a line screen has cleared."""
    return value


def scrub(value: object, redact: Redactor | Callable):
    """Drop forbidden keys at any depth and redact the rest: a ``Redactor`` sees the structure (a key that
    names a secret, an option before its value: ``Redactor.structure``); any other function (``keep``, on a
    line the secret screen cleared) is applied to every string, keys included."""
    cleaned = _without_forbidden(value)
    return redact.structure(cleaned) if isinstance(redact, Redactor) else _each_string(cleaned, redact)


def _without_forbidden(value: object):
    if isinstance(value, dict):
        return {k: _without_forbidden(v) for k, v in value.items() if k not in FORBIDDEN_KEYS}
    if isinstance(value, list):
        return [_without_forbidden(v) for v in value]
    return value


def _each_string(value: object, redact: Callable):
    if isinstance(value, dict):
        return {redact(k): _each_string(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_each_string(v, redact) for v in value]
    if isinstance(value, str):
        return redact(value)
    return value


def to_json(value: object) -> str | None:
    return _dumps(value, orjson.OPT_SORT_KEYS)


def ordered_json(value: object) -> str | None:
    """JSON text with keys in the order they were read (as DuckDB writes JSON): the form of
    ``extra`` and ``arguments`` in the staging tables, which DuckDB writes canonically at load
    (``load.spool.CANONICAL_JSON``), whichever reader produced them."""
    return _dumps(value, None)


def _dumps(value: object, option: int | None) -> str | None:
    if value is None:
        return None
    try:
        return orjson.dumps(value, option=option).decode()
    except (orjson.JSONEncodeError, TypeError):  # integers beyond 64 bits, surrogates, deep nesting
        return orjson.dumps(_jsonable(value), option=option).decode()


MAX_JSON_DEPTH = 200
_SURROGATE = re.compile("[\ud800-\udfff]")


def _jsonable(value: object, depth: int = 0):
    """``value`` as orjson can write it: integers beyond 64 bits as text, non-finite floats as null,
    lone surrogates as U+FFFD, non-text keys as text, nesting past ``MAX_JSON_DEPTH`` as a marker."""
    if depth > MAX_JSON_DEPTH:
        return f"[nested deeper than {MAX_JSON_DEPTH} levels]"
    if isinstance(value, dict):
        return {_jsonable(k, depth) if isinstance(k, str) else str(k): _jsonable(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if INT64[0] <= value <= 2**64 - 1 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if _SURROGATE.search(value) \
            else value
    return str(value)


def as_text(value: object, depth: int = 0) -> str | None:
    """Text from a value that may be a string, a list of parts or a nested object."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, bool)):
        return str(value)
    if depth > MAX_JSON_DEPTH:
        return to_json(value)
    if isinstance(value, list):
        parts = [as_text(v, depth + 1) for v in value]
        return "\n".join(p for p in parts if p)
    if isinstance(value, dict):
        for key in ("text", "value", "content", "message"):
            if key in value:
                return as_text(value[key], depth + 1)
        return to_json(value)
    return str(value)


def read_bytes(path: str, start: int = 0, limit: int = -1) -> bytes:
    with open(path, "rb") as fh:
        if start:
            fh.seek(start)
        return fh.read(limit)


# epoch milliseconds a timestamp may be: from 1970 to the year 9999
_EPOCH_MS = (0, 253402300799999)


def epoch_ms_iso(v: object, what: str, problems: Problems | None) -> str | None:
    """An epoch-milliseconds value as ISO-8601 UTC text; a number no date can be is NULL (noted)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if not (math.isfinite(v) and _EPOCH_MS[0] <= v <= _EPOCH_MS[1]):
            if problems is not None:
                problems.note(f"{what} = {v} is no time (set to NULL)")
            return None
        return datetime.fromtimestamp(v / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return v if isinstance(v, str) else None


def load_json_file(source: Source, res: ReadResult, ctx: Context, problems: Problems | None = None):
    """A whole-file JSON object, or None with a file-level reject (BOM and NUL tail tolerated); its
    texts longer than the cap are cut (noted in ``problems``)."""
    raw = read_bytes(source.path)
    doc, was_cut = loads_cut(raw.lstrip(b"\xef\xbb\xbf").rstrip(b"\x00 \r\n\t"))
    if was_cut and doc is not TOO_DEEP and problems is not None:
        problems.note(DEEP_NOTE)
    if doc is TOO_DEEP:
        res.reject(source.path, "file is nested deeper than JSON parsers go", excerpt=ctx.excerpt(raw))
        return None
    if doc is None:
        res.reject(source.path, "file is not valid JSON", excerpt=ctx.excerpt(raw))
        return None
    if not isinstance(doc, dict):
        res.reject(source.path, "file is JSON but not an object", excerpt=ctx.excerpt(raw))
        return None
    if len(raw) > ctx.max_text:
        cap_texts(doc, ctx.max_text, problems)
    return doc


def json_objects(path: str, res: ReadResult, ctx: Context, start: int = 0, line: int = 1,
                 end: ReadState | None = None):
    """Every record of a JSONL file that is a JSON object, from byte ``start`` (line ``line``), a window at a
    time (``jsonl.iter_records``), as (record, its object, a function giving its excerpt for a reject); a line
    that is no JSON, or JSON but not an object, is a reject of its own and reading goes on. ``res.n_records``
    counts the records read; ``end``, when given, is left where reading stopped (an unterminated last line is
    left for the next run)."""
    for item, data, base in iter_records(path, start, line, end):
        if not isinstance(item, Record):
            res.reject(path, item.reason, line=item.line, offset=item.offset, excerpt=ctx.excerpt(item.excerpt))
            continue
        res.n_records += 1
        if not isinstance(item.obj, dict):
            res.reject(path, f"a line that is {type(item.obj).__name__}, not an object", line=item.line,
                       offset=item.offset, excerpt=ctx.excerpt(str(item.obj)))
            continue
        at = item.offset - base
        yield item, item.obj, (lambda data=data, at=at: ctx.excerpt(data[at:at + 400]))
