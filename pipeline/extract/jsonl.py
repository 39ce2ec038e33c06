"""A JSON-lines reader that survives what Copilot really writes.

Handles, without losing a complete record, in time linear in the size of the file:
- raw U+2028 / U+2029 inside strings (lines are split on ``\\n`` only, never ``str.splitlines``);
- one event broken over several physical lines by literal newlines (joined until it parses);
- a truncated event glued to the next complete event on one line (the complete one is kept);
- trailing NUL bytes after a crash, a UTF-8 BOM, invalid UTF-8 (kept with U+FFFD);
- an unterminated last line that does not parse yet (a live session): not a reject, the
  reader stops before it and reports the offset to resume from next time;
- hostile lines: nesting deeper than the parsers go (the record is kept with what lies deeper
  than ``CUT_DEPTH`` levels replaced by a marker, and a note), lone surrogate escapes
  (kept as U+FFFD), NaN / Infinity and integers beyond 64 bits (parsed; the readers set them
  to NULL), random bytes and megabytes of non-JSON text (rejected line by line: rejoining a
  broken event is tried only where one can end, a bounded number of times per line and within
  a byte budget per file).
"""

from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import orjson

MAX_JOIN_LINES = 400  # physical lines one event broken by literal newlines may span
MAX_JOIN_BYTES = 64 * 1024 * 1024  # ... and bytes
MAX_JOIN_TRIES = 8  # parses of a candidate joined event per broken line
MAX_GLUE_TRIES = 16  # event starts tried inside one line that does not parse
JOIN_BUDGET = 256 * 1024 * 1024  # bytes parsed while rejoining, per file: past it, lines are rejected as they are
JOIN_PARSES = 20_000  # ... and parses
_LINE_END_BRACE = re.compile(rb"\}[\x00\r \t]*\n")
_GLUE = re.compile(rb'\{\s*"type"\s*:')
_BOM = b"\xef\xbb\xbf"
_SURROGATE = re.compile("[\ud800-\udfff]")
TOO_DEEP = object()  # what _loads returns for a document nested deeper than the parsers go
CUT_DEPTH = 200  # what lies deeper than this in a document too deep to parse is replaced by a marker
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


DEEP_NOTE = f"values nested deeper than {CUT_DEPTH} levels replaced by a marker"


def cut_deep(raw: bytes, limit: int = CUT_DEPTH) -> bytes:
    """``raw`` with every value nested deeper than ``limit`` levels replaced by a marker string, in
    one pass (strings are skipped whole, brackets inside them do not count)."""
    marker = b'"[nested deeper than %d levels]"' % limit
    out, last, depth, cut = [], 0, 0, -1
    for m in _TOKENS.finditer(raw):
        c = raw[m.start()]
        if c == 0x22:  # a string
            continue
        if c in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth == limit + 1:
                cut = m.start()
        else:
            if depth == limit + 1 and cut >= 0:
                out += (raw[last:cut], marker)
                last, cut = m.end(), -1
            depth -= 1
    out.append(raw[last:])
    return b"".join(out)


def loads_cut(raw: bytes):
    """Like ``_loads``, but a document nested too deep is parsed with its deepest values cut
    (``cut_deep``); returns (value, whether it was cut); the value is ``TOO_DEEP`` if even that fails."""
    obj = _loads(raw)
    if obj is not TOO_DEEP:
        return obj, False
    obj = _loads(cut_deep(raw))
    return (TOO_DEEP if obj is None else obj), True


@dataclass(slots=True)
class Record:
    obj: dict
    line: int  # 1-based physical line where the record starts
    offset: int  # byte offset where the record starts
    n_lines: int = 1  # physical lines it spans (more than one: an event broken by literal newlines)
    note: str = ""  # what was changed to read it (its deepest values cut)


@dataclass(slots=True)
class Reject:
    line: int
    offset: int
    reason: str
    excerpt: str


@dataclass(slots=True)
class ReadState:
    """Where reading stopped: resume from ``good_offset`` (at line ``good_line``) next time."""

    good_offset: int
    good_line: int
    pending_tail: bool = False  # an unterminated last line was left for the next run
    more: bool = False  # not the end of the file: stopped at a line that may join lines not read yet


class Budget:
    """What rejoining broken events may still spend in one file (bytes parsed and parses), shared by
    the windows a large file is read in."""

    def __init__(self):
        self.bytes, self.parses = JOIN_BUDGET, JOIN_PARSES

    def spend(self, nbytes: int) -> bool:
        self.bytes -= nbytes
        self.parses -= 1
        return self.left

    @property
    def left(self) -> bool:
        return self.bytes > 0 and self.parses > 0


def _loads(raw: bytes):
    """The JSON value of ``raw``; None when it is not JSON, ``TOO_DEEP`` when nested too deep."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            return TOO_DEEP
    text = raw.decode("utf-8", "replace")
    try:
        # strict=False accepts raw control characters inside strings (literal tabs etc.); this
        # parser also takes what orjson refuses: lone surrogate escapes, NaN, integers beyond 64 bits
        return _without_surrogates(json.loads(text, strict=False))
    except RecursionError:
        return TOO_DEEP
    except ValueError:
        return None


def _without_surrogates(value: object):
    """``value`` with every lone surrogate (``"\\ud800"``, which no UTF-8 text can hold) as U+FFFD."""
    stack = [value]
    while stack:
        v = stack.pop()
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, x in list(items):
            if isinstance(x, str):
                if _SURROGATE.search(x):
                    v[k] = _fix(x)
            elif isinstance(x, (dict, list)):
                stack.append(x)
        if isinstance(v, dict) and any(isinstance(k, str) and _SURROGATE.search(k) for k in v):
            fixed = {(_fix(k) if isinstance(k, str) else k): x for k, x in v.items()}
            v.clear()
            v.update(fixed)
    if isinstance(value, str) and _SURROGATE.search(value):
        return _fix(value)
    return value


def _fix(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _clean(line: bytes) -> bytes:
    return line.strip(b"\x00").rstrip(b"\r").strip()


def excerpt_of(raw: bytes, n: int = 3200) -> str:
    return raw[:n].decode("utf-8", "replace")


def iter_jsonl(
    data: bytes, start_offset: int = 0, start_line: int = 1, state: ReadState | None = None, base: int = 0,
    final: bool = True, budget: Budget | None = None,
) -> Iterator[Record | Reject]:
    """Yield records and rejects from ``data[start_offset:]``; fill ``state`` with the resume point.

    ``base`` is the file offset ``data`` starts at (a log read from its last good offset, or a window
    of a large log): every offset reported is a file offset. ``final``: ``data`` runs to the end of the
    file; else it ends with a whole line, and reading stops (``state.more``) at a line that does not
    parse and might be an event broken over lines that run past ``data`` (``windows`` reads on from
    there). ``budget``: what rejoining may spend in the whole file (a new one per call by default).
    """
    for item in _iter(data, start_offset, start_line, state, base == 0, final, budget or Budget()):
        if base:
            item.offset += base
        yield item
    if state is not None and base:
        state.good_offset += base


WINDOW_BYTES = 32 * 1024 * 1024  # a log is read this much at a time (more: its longest line, a join's reach)


def windows(path: str, start: int = 0, size: int | None = None,
            stop: int | None = None) -> Iterator[tuple[int, bytes, bool]]:
    """A file from ``start`` in pieces of about ``size`` bytes, each ending with a whole line except the
    last: (file offset of the piece, its bytes, whether it runs to the end of the file). Memory is bounded
    by the piece, the longest line and how far a broken event may be rejoined (``MAX_JOIN_BYTES``), not by
    the file. The caller tells where the next piece starts with ``send(offset)`` (where it stopped reading
    lines, at or before the piece's end); without it, right after the piece.

    ``stop``: read only up to this offset, the end of a line (a part of a large log read beside its other
    parts: ``extract.parallel``): the piece that reaches it is not the end of the file, and nothing comes
    after it - a caller that would read on from before ``stop`` (a broken event that may run past it) is
    told so by the end of the pieces (StopIteration)."""
    size = size or WINDOW_BYTES
    with open(path, "rb") as fh:
        fh.seek(start)
        pos, held = start, b""
        # no more asked of a file than it holds: reading 32 MB into a buffer for a 200 KB log took a fresh mapping of
        # 32 MB each time (0.28-0.5 s more for 1,200 of the bench's logs, 247 MB, than asking for their size)
        end = os.fstat(fh.fileno()).st_size if stop is None else stop
        while True:
            want = min(size, end - pos - len(held))
            chunk = fh.read(want) if want > 0 else b""
            data = held + chunk
            if stop is not None and (pos + len(data) >= stop or len(chunk) < want):
                yield pos, data[:stop - pos], False  # the part's end (or the file's, if it shrank: see above)
                return
            if len(chunk) < size:  # the end of the file
                yield pos, data, True
                return
            cut = data.rfind(b"\n") + 1
            if not cut:  # a line longer than the piece so far: read on
                held = data
                continue
            resume = yield pos, data[:cut], False
            resume = pos + cut if resume is None else resume
            held = data[resume - pos:]
            pos = resume


def iter_records(path: str, start: int = 0, line: int = 1,
                 end: ReadState | None = None) -> Iterator[tuple[Record | Reject, bytes, int]]:
    """Every record (or reject) of a JSONL file from byte ``start`` (line ``line``), a window at a time
    (``windows``): memory bounded by the window and the longest line, not by the file. Each with the window's
    bytes and its file offset (a record's bytes are ``data[item.offset - base:]``). ``end``, when given, is left
    where reading stopped (its good offset and line, and whether an unterminated last line was left for later)."""
    budget = Budget()
    pieces = windows(path, start)
    piece = next(pieces)
    while True:
        base, data, final = piece
        state = ReadState(base, line)
        for item in iter_jsonl(data, 0, line, state, base=base, final=final, budget=budget):
            yield item, data, base
        if final:
            if end is not None:
                end.good_offset, end.good_line, end.pending_tail = state.good_offset, state.good_line, \
                    state.pending_tail
            return
        line = state.good_line
        piece = pieces.send(state.good_offset)


class _Joins:
    """What rejoining broken events may still spend (the file's ``Budget``), and where a line of ``data``
    ends with ``}`` (found once, when the first broken line needs it)."""

    def __init__(self, data: bytes, budget: Budget):
        self.data, self.budget, self._ends, self._newlines = data, budget, None, None

    def spend(self, nbytes: int) -> bool:
        return self.budget.spend(nbytes)

    @property
    def left(self) -> bool:
        return self.budget.left

    def ends_after(self, offset: int):
        """Offsets of the newlines that end a line ending with ``}``, after ``offset``, in order."""
        if self._ends is None:
            self._ends = [m.end() - 1 for m in _LINE_END_BRACE.finditer(self.data)]
        i = bisect.bisect_right(self._ends, offset)
        return self._ends[i:i + MAX_JOIN_TRIES]

    def lines_between(self, start: int, stop: int) -> int:
        """Newlines in ``data[start:stop]`` (every newline is found once, when first needed)."""
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer(b"\n", self.data)]
        return bisect.bisect_left(self._newlines, stop) - bisect.bisect_left(self._newlines, start)


def _iter(data: bytes, start_offset: int, start_line: int, state: ReadState | None, at_file_start: bool,
          final: bool, file_budget: Budget):
    n = len(data)
    budget = _Joins(data, file_budget)
    pos = start_offset
    line_no = start_line
    if pos == 0 and at_file_start and data.startswith(_BOM):
        pos = len(_BOM)
    good_offset, good_line = pos, line_no
    pending = more = False

    while pos < n:
        nl = data.find(b"\n", pos)
        terminated = nl != -1
        end = nl if terminated else n
        raw = _clean(data[pos:end])
        next_pos = end + 1 if terminated else n
        if not raw:
            pos, line_no = next_pos, line_no + 1
            if terminated:
                good_offset, good_line = pos, line_no
            continue
        obj, was_cut = loads_cut(raw)
        if obj is TOO_DEEP:
            yield Reject(line_no, pos, "event nested deeper than JSON parsers go (over 1,000 levels)", excerpt_of(raw))
            pos, line_no = next_pos, line_no + 1
            good_offset, good_line = pos, line_no
            continue
        if isinstance(obj, dict):
            yield Record(obj, line_no, pos, note=DEEP_NOTE if was_cut else "")
            pos, line_no = next_pos, line_no + 1
            good_offset, good_line = pos, line_no
            continue
        if obj is not None:
            yield Reject(line_no, pos, "line is JSON but not an object", excerpt_of(raw))
            pos, line_no = next_pos, line_no + 1
            good_offset, good_line = pos, line_no
            continue

        # 1) a truncated prefix glued to a complete event on the same line (copilot-cli #4098)
        glued = _split_glued(raw, budget)
        if glued is not None:
            cut, obj = glued
            yield Reject(line_no, pos, "truncated event glued to the next event", excerpt_of(raw[:cut]))
            yield Record(obj, line_no, pos + cut)
            pos, line_no = next_pos, line_no + 1
            good_offset, good_line = pos, line_no
            continue

        # a broken event may run past this window: read on from here, with more of the file after it
        if not final and raw.startswith(b"{") and n - end <= MAX_JOIN_BYTES and budget.left:
            more = True
            break

        # 2) one event broken over several physical lines by literal newlines (copilot-cli #2649)
        joined = _join_following(data, pos, end, terminated, raw, budget)
        if joined is not None:
            obj, after, n_lines = joined
            yield Record(obj, line_no, pos, n_lines)
            pos, line_no = after, line_no + n_lines
            good_offset, good_line = pos, line_no
            continue

        # 3) an unterminated last line: a session still being written. Not an error.
        if not terminated:
            pending = True
            break

        yield Reject(line_no, pos, "line is not valid JSON", excerpt_of(raw))
        pos, line_no = next_pos, line_no + 1
        good_offset, good_line = pos, line_no

    if state is not None:
        state.good_offset, state.good_line, state.pending_tail, state.more = good_offset, good_line, pending, more


def _split_glued(raw: bytes, budget: _Joins):
    """A complete event after a truncated prefix on one line: tried at the first few event starts."""
    if not raw.endswith(b"}"):
        return None
    for tries, m in enumerate(_GLUE.finditer(raw, 1)):
        if tries >= MAX_GLUE_TRIES or not budget.spend(len(raw) - m.start()):
            return None
        obj = _loads(raw[m.start():])
        if isinstance(obj, dict):
            return m.start(), obj
    return None


def _join_following(data: bytes, pos: int, end: int, terminated: bool, raw: bytes, budget: _Joins):
    """Join the line at ``pos`` with following lines until the whole parses as one object.

    A broken event starts with ``{`` and ends on a line that ends with ``}``: only there is a parse
    tried (those line ends are found once per file), at most ``MAX_JOIN_TRIES`` times, within
    ``MAX_JOIN_LINES`` lines and the file's budget, so a file of non-JSON text costs one pass."""
    if not terminated or not raw.startswith(b"{") or not budget.left:
        return None
    for stop in budget.ends_after(end):
        if stop - pos > MAX_JOIN_BYTES:
            return None
        n_lines = budget.lines_between(pos, stop) + 1
        if n_lines > MAX_JOIN_LINES + 1:
            return None
        # the line ending there, when it is a whole event by itself: the broken line was just garbage
        line_start = data.rfind(b"\n", end, stop) + 1  # a line that ends with }: short in practice
        last = _clean(data[line_start:stop])
        if last.startswith(b'{"'):
            if not budget.spend(len(last)):
                return None
            if isinstance(_loads(last), dict):
                return None
        candidate = data[pos:stop].strip(b"\x00").rstrip(b"\r")
        if not budget.spend(len(candidate)):
            return None
        obj = _loads(candidate)
        if isinstance(obj, dict):
            return obj, stop + 1, n_lines
    return None
