"""Query results printed the same way whatever DuckDB type a column has (INTERVAL, DECIMAL, UUID,
BLOB, lists, structs, HUGEINT ...): ``table`` for people (rows and long text cut, with a notice on
stderr saying so), ``csv``, ``json`` and ``markdown`` whole. Timestamps are ISO 8601 in UTC in every
format (``2026-09-01T09:00:00Z``)."""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Iterable, Sequence
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import IO
from uuid import UUID

from wcwidth import wcswidth, wcwidth

TABLE_ROWS = 200
TABLE_TEXT = 60


def interval(v: timedelta) -> str:
    """An interval as DuckDB prints one: ``2:10:00``, ``3 days 04:00:00``."""
    sign = "-" if v < timedelta(0) else ""
    v = abs(v)
    days, rest = v.days, v.seconds
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    clock = f"{h:02d}:{m:02d}:{sec:02d}" + (f".{v.microseconds:06d}".rstrip("0") if v.microseconds else "")
    return sign + (f"{days} day{'s' if days != 1 else ''} {clock}" if days else clock)


def jsonable(v: object) -> object:
    """A value JSON can hold: timestamps ISO 8601 UTC, intervals as text, decimals exact as text."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, datetime):
        if v.tzinfo is not None:
            return v.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
        return v.isoformat()
    if isinstance(v, (date, time)):
        return v.isoformat()
    if isinstance(v, timedelta):
        return interval(v)
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, UUID):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [jsonable(x) for x in v]
    return str(v)


def text(v: object) -> str:
    """A value as one cell of text (CSV, markdown, table): nested values as JSON."""
    if v is None:
        return ""
    j = jsonable(v)
    if isinstance(j, (list, dict)):
        return json.dumps(j, ensure_ascii=False)
    if isinstance(j, bool):
        return "true" if j else "false"
    return str(j)


def _numeric(v: object) -> bool:
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def write(columns: Sequence[str], rows: Iterable[Sequence], fmt: str, out: IO[str] | None = None,
          notes: IO[str] | None = None) -> int:
    """Print ``rows`` in ``fmt``; returns the rows printed."""
    out = out or sys.stdout
    notes = notes or sys.stderr
    n = 0
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow([text(v) for v in r])
            n += 1
    elif fmt == "json":
        out.write("[")
        for r in rows:
            out.write(("," if n else "") + "\n" + json.dumps(dict(zip(columns, (jsonable(v) for v in r),
                                                                      strict=True)), ensure_ascii=False))
            n += 1
        out.write("\n]\n" if n else "]\n")
    elif fmt == "markdown":
        out.write("| " + " | ".join(c.replace("|", "\\|") for c in columns) + " |\n")
        out.write("|" + "|".join("---" for _ in columns) + "|\n")
        for r in rows:
            out.write("| " + " | ".join(" ".join(text(v).split()).replace("|", "\\|") for v in r) + " |\n")
            n += 1
    else:
        n = _table(columns, rows, out, notes)
    return n


def width(text: str) -> int:
    """Columns a text takes in a terminal (a CJK character two, a combining mark none)."""
    w = wcswidth(text)
    return w if w >= 0 else len(text)


def pad(text: str, columns: int, right: bool = False) -> str:
    """``text`` filled with spaces to ``columns`` terminal columns (on the left when ``right``)."""
    fill = " " * max(columns - width(text), 0)
    return fill + text if right else text + fill


def clip(text: str, columns: int) -> str:
    """``text`` cut to at most ``columns`` terminal columns, ending in … when it was cut."""
    if width(text) <= columns:
        return text
    used = 0
    for i, ch in enumerate(text):
        used += max(wcwidth(ch), 0)
        if used > columns - 1:
            return text[:i] + "…"
    return text


def _table(columns: Sequence[str], rows: Iterable[Sequence], out: IO[str], notes: IO[str]) -> int:
    shown, more, cut = [], False, False
    for r in rows:
        if len(shown) == TABLE_ROWS:
            more = True
            break
        cells = []
        for v in r:
            t = " ".join(text(v).split()) if isinstance(v, str) else text(v).replace("\n", " ")
            head = t[:4 * TABLE_TEXT]  # a long text measured by its head only (a character takes at most two columns)
            short = clip(head if head == t else head + "…", TABLE_TEXT)
            if short != t:
                t, cut = short, True
            cells.append((t, _numeric(v)))
        shown.append(cells)
    widths = [max([width(c)] + [width(r[i][0]) for r in shown]) for i, c in enumerate(columns)]
    right = [bool(shown) and all(r[i][1] or not r[i][0] for r in shown) for i in range(len(columns))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(pad(c, w, right[i]) for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()
    out.write(line(list(columns)) + "\n")
    out.write(line(["─" * w for w in widths]) + "\n")
    for r in shown:
        out.write(line([c for c, _ in r]) + "\n")
    if not shown:
        out.write("(no rows)\n")
    if more:
        notes.write(f"(the first {TABLE_ROWS} rows shown; more not shown: --format csv or json prints every row)\n")
    if cut:
        notes.write(f"(text longer than {TABLE_TEXT} columns cut at …; --format csv or json prints it whole)\n")
    return len(shown)
