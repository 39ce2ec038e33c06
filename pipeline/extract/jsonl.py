"""A JSON-lines reader that survives what Copilot really writes.

Handles, without losing a complete record:
- raw U+2028 / U+2029 inside strings (lines are split on ``\\n`` only, never ``str.splitlines``);
- one event broken over several physical lines by literal newlines (joined until it parses);
- a truncated event glued to the next complete event on one line (the complete one is kept);
- trailing NUL bytes after a crash, a UTF-8 BOM, invalid UTF-8 (kept with U+FFFD);
- an unterminated last line that does not parse yet (a live session): not a reject, the
  reader stops before it and reports the offset to resume from next time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import orjson

MAX_JOIN_LINES = 400
MAX_JOIN_BYTES = 64 * 1024 * 1024
_GLUE = re.compile(rb'\{\s*"type"\s*:')
_BOM = b"\xef\xbb\xbf"


@dataclass(slots=True)
class Record:
    obj: dict
    line: int  # 1-based physical line where the record starts
    offset: int  # byte offset where the record starts
    n_lines: int = 1  # physical lines it spans (more than one: an event broken by literal newlines)


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


def _loads(raw: bytes):
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    text = raw.decode("utf-8", "replace")
    try:
        # strict=False accepts raw control characters inside strings (literal tabs etc.)
        return json.loads(text, strict=False)
    except ValueError:
        return None


def _clean(line: bytes) -> bytes:
    return line.strip(b"\x00").rstrip(b"\r").strip()


def excerpt_of(raw: bytes, n: int = 200) -> str:
    return raw[:n].decode("utf-8", "replace")


def iter_jsonl(
    data: bytes, start_offset: int = 0, start_line: int = 1, state: ReadState | None = None, base: int = 0
) -> Iterator[Record | Reject]:
    """Yield records and rejects from ``data[start_offset:]``; fill ``state`` with the resume point.

    ``base`` is the file offset ``data`` starts at (a log read from its last good offset):
    every offset reported is a file offset.
    """
    for item in _iter(data, start_offset, start_line, state, base == 0):
        if base:
            item.offset += base
        yield item
    if state is not None and base:
        state.good_offset += base


def _iter(data: bytes, start_offset: int, start_line: int, state: ReadState | None, at_file_start: bool):
    n = len(data)
    pos = start_offset
    line_no = start_line
    if pos == 0 and at_file_start and data.startswith(_BOM):
        pos = len(_BOM)
    good_offset, good_line = pos, line_no
    pending = False

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
        obj = _loads(raw)
        if isinstance(obj, dict):
            yield Record(obj, line_no, pos)
            pos, line_no = next_pos, line_no + 1
            good_offset, good_line = pos, line_no
            continue
        if obj is not None:
            yield Reject(line_no, pos, "line is JSON but not an object", excerpt_of(raw))
            pos, line_no = next_pos, line_no + 1
            good_offset, good_line = pos, line_no
            continue

        # 1) a truncated prefix glued to a complete event on the same line (copilot-cli #4098)
        glued = _split_glued(raw)
        if glued is not None:
            cut, obj = glued
            yield Reject(line_no, pos, "truncated event glued to the next event", excerpt_of(raw[:cut]))
            yield Record(obj, line_no, pos + cut)
            pos, line_no = next_pos, line_no + 1
            good_offset, good_line = pos, line_no
            continue

        # 2) one event broken over several physical lines by literal newlines (copilot-cli #2649)
        joined = _join_following(data, pos, end, terminated)
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
        state.good_offset, state.good_line, state.pending_tail = good_offset, good_line, pending


def _split_glued(raw: bytes):
    for m in _GLUE.finditer(raw, 1):
        obj = _loads(raw[m.start():])
        if isinstance(obj, dict):
            return m.start(), obj
    return None


def _join_following(data: bytes, pos: int, end: int, terminated: bool):
    """Join the line at ``pos`` with following lines until the whole parses as one object."""
    if not terminated:
        return None
    n = len(data)
    parts_end = end
    cursor = end + 1
    for n_lines in range(2, MAX_JOIN_LINES + 2):
        if cursor >= n or parts_end - pos > MAX_JOIN_BYTES:
            return None
        nl = data.find(b"\n", cursor)
        line_end = nl if nl != -1 else n
        nxt = _clean(data[cursor:line_end])
        # a following line that is a whole event by itself means the broken line was just garbage
        if nxt.startswith(b"{") and isinstance(_loads(nxt), dict):
            return None
        parts_end = line_end
        candidate = data[pos:parts_end].strip(b"\x00").rstrip(b"\r")
        obj = _loads(candidate)
        if isinstance(obj, dict):
            return obj, (line_end + 1 if nl != -1 else n), n_lines
        if nl == -1:
            return None
        cursor = nl + 1
    return None
