"""Markdown building blocks of the wiki: escaping (every text a person or a model wrote is escaped in
table cells or fenced, so markdown or HTML inside it cannot break a page), tables, links, number and
time formats, and safe file names."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from datetime import date, datetime
from functools import lru_cache

import yaml

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#!~])")


def cell(value: object) -> str:
    """A value safe inside a table cell: one line, markdown and HTML characters escaped."""
    if value is None:
        return ""
    text = " ".join(str(value).split())
    return _MD_SPECIAL.sub(r"\\\1", text)


def code(value: object) -> str:
    """An inline code span (a path, a run id) safe in a table cell."""
    if value is None:
        return ""
    text = " ".join(str(value).split()).replace("|", "\\|")
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fenced(text: str | None, info: str = "text") -> str:
    """Text in a code fence longer than any backtick run inside it: nothing in it is interpreted."""
    text = (text or "").rstrip("\n")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


# libyaml's emitter (PyYAML's wheels carry it): 5x faster than the pure-Python SafeDumper (~2 s of
# `report` on 5,474 pages), and its text loads back to the same values where the Python emitter's
# does not (a NEL, U+0085, in a title: tests/test_fuzz.py); every wiki built here is byte for byte the same
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Quoting(_DUMPER):  # type: ignore[misc,valid-type]
    """Every text double-quoted, its line breaks and controls escaped."""


_Quoting.add_representer(str, lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style='"'))
# what a YAML double-quoted text may not hold as it is: outside YAML's printable set, or a line break
# YAML 1.1 folds (NEL, U+2028/9), or a byte order mark; JSON's escapes do the rest (JSON's string is YAML's)
_UNSAFE = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]|[\u2028\u2029\ufeff]")


def _flow(value: object) -> str:
    """A value as YAML on one line: a text double-quoted, a list in brackets."""
    if isinstance(value, str):  # the common case, without a YAML emitter per value (~5,000 pages of report)
        return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))
    if value is None or isinstance(value, (bool, int)):
        return json.dumps(value)
    text = yaml.dump(value, Dumper=_Quoting, default_flow_style=True, allow_unicode=True, width=2**31 - 1)
    return text.removesuffix("\n...\n").rstrip("\n")


def front_matter(meta: dict) -> str:
    """YAML front matter of a page: one line per key, every text double-quoted - whatever a title holds
    (``: ``, ``#``, a newline, ``---``, markup), for YAML readers and for tools that read it by lines."""
    return "---\n" + "".join(f"{key}: {_flow(value)}\n" for key, value in meta.items()) + "---\n"


def table(headers: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def link(text: str, target: str) -> str:
    return f"[{cell(text)}]({target})"


def fmt_ts(ts: datetime | None) -> str:
    return ts.strftime("%Y-%m-%d %H:%M") if ts else ""


def fmt_num(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:,.2f}" if v != int(v) else f"{int(v):,}"
    return f"{v:,}"


def fmt_credits(v: object) -> str:
    return "" if v is None else f"{v:,.2f}"


def fmt_usd(v: object) -> str:
    return "" if v is None else f"${v:,.2f}"


def fmt_cost(usd: object, n_unknown: int | None = 0, money: bool = True, unit: str = "leg") -> str:
    """A cost as every page and `usage` show it: the known sum, and how many legs (or requests) it leaves out
    ("$7.49 + 1 leg unknown"); "unknown" when no leg's cost is known; empty when there was no request."""
    n = n_unknown or 0
    if usd is None:
        return "unknown" if n else ""
    text = f"${usd:,.2f}" if money else f"{usd:,.2f}"
    return text + (f" + {n} {unit}{'s' if n != 1 else ''} unknown" if n else "")


def month_range(months: Iterable[date]) -> list:
    """Every month from the first to the last given, so quiet months show as zeros."""
    if not months:
        return []
    first, last = min(months), max(months)
    out, m = [], first
    while m <= last:
        out.append(m)
        m = m.replace(year=m.year + 1, month=1) if m.month == 12 else m.replace(month=m.month + 1)
    return out


_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def slug(text: str) -> str:
    s = _NOT_SLUG.sub("-", (text or "").lower()).strip("-")
    return s[:40] or "project"


_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


@lru_cache(maxsize=1 << 18)  # the same sessions' names again and again (a search index: 422,000 documents)
def page_name(session_id: str) -> str:
    """The file name (without .md) of a session's page: the id itself when it is a plain name (every
    id Copilot writes is), else a slug of it and a hash, so that no id (``../../x``, markup, a NUL)
    can name a file outside the wiki or break a link."""
    if _SAFE_NAME.fullmatch(session_id) and ".." not in session_id:
        return session_id
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{slug(session_id)[:40]}-{digest}"


def plural(n: int | None, word: str, many: str | None = None) -> str:
    """``1 session``, ``2 sessions``, ``1,048 sessions``."""
    n = n or 0
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def fmt_premium(known: object, n_unknown: int | None) -> str:
    """Premium requests of a session's legs: their sum, marked as a lower bound (``≥``) when some leg with
    requests does not record them; empty when none does."""
    if known is None:
        return ""
    text = f"{float(known):,.2f}"
    return f"≥ {text}" if n_unknown else text


def fmt_duration(seconds: float | None) -> str:
    """A duration as people say it: ``45 s``, ``3 min 20 s``, ``2 h 10 min``, ``3 d 4 h``; empty when unknown."""
    if seconds is None:
        return ""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m} min {s} s" if s else f"{m} min"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(h, 24)
    return f"{d:,} d {h} h" if h else f"{d:,} d"


def fmt_ms(ms: int | None) -> str:
    if ms is None:
        return ""
    return f"{ms:,} ms" if ms < 1000 else fmt_duration(ms / 1000) if ms >= 60_000 else f"{ms / 1000:.1f} s"


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:.*?[^`])?\1(?!`)")
_UNSAFE_SCHEME = re.compile(r"(\]\(\s*<?\s*|^ {0,3}\[[^\]]*\]:\s*<?\s*)(javascript|vbscript|data|file):",
                            re.IGNORECASE | re.MULTILINE)


def _escape_outside_code(line: str) -> str:
    out, pos = [], 0
    for m in _CODE_SPAN.finditer(line):
        out.append(line[pos:m.start()].replace("<", "&lt;"))
        out.append(m.group(0))
        pos = m.end()
    out.append(line[pos:].replace("<", "&lt;"))
    return "".join(out)


def safe_markdown(text: str | None) -> str:
    """Markdown someone (or a model) wrote, kept as markdown - headings, lists, tables, code - but inert:
    raw HTML is escaped outside code and links to ``javascript:``/``data:``/``vbscript:``/``file:``
    point nowhere. GitHub and Obsidian sanitize too; this holds where a renderer does not."""
    out, fence, prev_blank = [], None, True
    for line in (text or "").rstrip("\n").split("\n"):
        m = _FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line[m.end():].strip():
                fence = None
            out.append(line)
        elif m:
            fence = m.group(1)
            out.append(line)
        elif prev_blank and (line.startswith("    ") or line.startswith("\t")):
            out.append(line)  # an indented code block: shown as written
            continue
        else:
            out.append(_escape_outside_code(line))
        prev_blank = not line.strip()
    return _UNSAFE_SCHEME.sub(lambda m: m.group(1) + "#blocked-" + m.group(2).lower() + ":", "\n".join(out))


def quoted(text: str | None) -> str:
    """Markdown shown as a block quote (rendered, inert: ``safe_markdown``)."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in safe_markdown(text).split("\n"))
