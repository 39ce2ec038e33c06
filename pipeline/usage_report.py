"""``python -m pipeline usage``: requests, tokens, AI credits and dollars by day, week, month,
session, model or project, with a total line; the numbers of the ``report_usage_*`` models (all of
them add up the rows of ``int_usage_legs``)."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

import duckdb

from .output import clip as _clip
from .output import pad as _pad
from .output import width as _width

BY = ("day", "week", "month", "session", "model", "project", "agent", "skill")
# by agent and by skill: from the single requests (fct_requests), the only rows that say which agent made them
# the columns that name a row, and what they group by: weeks as ISO weeks (2026-W12), months as 2026-03;
# a session with its first day, project and title, in date order
_KEYS = {
    "day": (["day"], ["legs.day"]),
    "week": (["week"], ["strftime(legs.day, '%G-W%V')"]),
    "month": (["month"], ["strftime(legs.day, '%Y-%m')"]),
    "session": (["session_id", "project", "title"], ["legs.session_id", "projects.name", "sessions.title"]),
    "model": (["model"], ["legs.model"]),
    "project": (["project"], ["projects.name"]),
    "agent": (["agent"], ["coalesce(legs.agent, '(unknown)')"]),
    "skill": (["skill"], ["coalesce(legs.skill, '(none)')"]),
}
# the requests as the leg columns the figures read (one row, one request)
_REQUESTS = """(
    select r.session_id, s.project_id, r.requested_at::date as day, r.model, r.agent, r.skill, 1 as requests,
           r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_tokens,
           r.request_multiplier::decimal(38, 6) as premium_requests, r.ai_credits, r.cost_usd, r.cost_source
    from fct_requests as r join dim_sessions as s using (session_id))"""
FIGURES = ["sessions", "requests", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
           "premium_requests", "ai_credits", "cost_usd"]


class UsageError(Exception):
    """The filters name something the warehouse does not have."""


@dataclass
class UsageTable:
    by: str
    keys: list[str]
    rows: list[dict]
    total: dict

    @property
    def columns(self) -> list[str]:
        figures = [f for f in FIGURES if not (self.by == "session" and f == "sessions")]  # one each
        return [*self.keys, *figures, "unknown"]


def usage_table(con: duckdb.DuckDBPyConnection, by: str = "day", since: date | None = None, until: date | None = None,
                project: str | None = None) -> UsageTable:
    if by not in BY:
        raise UsageError(f"--by must be one of {', '.join(BY)}")
    names, exprs = _KEYS[by]
    where, params = ["true"], []
    if since:
        where.append("legs.day >= ?")
        params.append(since)
    if until:
        where.append("legs.day <= ?")
        params.append(until)
    if project:
        ids = [r[0] for r in con.execute("select project_id from dim_projects where lower(name) = lower(?) "
                                         "or project_id = ?", [project, project]).fetchall()]
        if not ids:
            known = ", ".join(sorted(r[0] for r in con.execute("select distinct name from dim_projects").fetchall()))
            raise UsageError(f"no project named {project!r} (projects: {known or 'none'})")
        where.append("legs.project_id in (select unnest(?))")
        params.append(ids)
    keys = ", ".join(f"{e} as {n}" for n, e in zip(names, exprs, strict=True))
    order = ", ".join(str(i + 1) for i in range(len(names)))
    if by == "session":  # in date order, each with the first UTC day it used a model
        keys += ", min(legs.day) as date"
        order = "min(legs.day), legs.session_id"
    sql = f"""
        select {keys},
            count(distinct legs.session_id)::integer as sessions,
            sum(legs.requests)::bigint as requests,
            sum(legs.input_tokens)::bigint as input_tokens,
            sum(legs.output_tokens)::bigint as output_tokens,
            sum(legs.cache_read_tokens)::bigint as cache_read_tokens,
            sum(legs.cache_write_tokens)::bigint as cache_write_tokens,
            sum(legs.premium_requests) as premium_requests,
            sum(legs.ai_credits) as ai_credits,
            sum(legs.cost_usd) as cost_usd,
            (count(*) filter (where legs.input_tokens is null and legs.requests > 0))::integer as unknown_input,
            (count(*) filter (where legs.cost_source = 'unknown'))::integer as unknown_cost,
            (count(*) filter (where legs.cost_source = 'estimated'))::integer as estimated_cost,
            (count(*) filter (where legs.premium_requests is null and legs.requests > 0))::integer
                as unknown_premium,
            grouping({exprs[0]}) as is_total
        from {_REQUESTS if by in ("agent", "skill") else "int_usage_legs"} as legs
        join dim_sessions as sessions on legs.session_id = sessions.session_id
        join dim_projects as projects on legs.project_id = projects.project_id
        where {' and '.join(where)}
        group by grouping sets (({', '.join(exprs)}), ())
        order by is_total, {order}
    """
    rel = con.execute(sql, params)
    cols = [d[0] for d in rel.description]
    out = [dict(zip(cols, r, strict=True)) for r in rel.fetchall()]
    rows, total = [], dict.fromkeys([*names, *FIGURES], None) | {"sessions": 0, "requests": 0, "unknown": ""}
    unit = "request" if by in ("agent", "skill") else "leg"
    for r in out:
        r["unknown"] = _unknown_note(r.pop("unknown_input"), r.pop("unknown_cost"), r.pop("estimated_cost"),
                                     r.pop("unknown_premium"), unit)
        if r.pop("is_total"):
            total = r
        else:
            rows.append(r)
    if by == "session":
        names = ["date", *names]
    for n in names:
        total[n] = "total" if n == names[0] else ""
    return UsageTable(by, names, rows, total)


# ------------------------------------------------------------------------------------ periods
_DAYS = re.compile(r"^(\d{1,4})d$")


def period_start(text: str, today: date) -> date:
    """A first day as people say it: YYYY-MM-DD, today, yesterday, 7d / 30d (the last N days, today
    included), this-week, this-month, last-month."""
    t = text.strip().lower()
    if t == "today":
        return today
    if t == "yesterday":
        return today - timedelta(days=1)
    if m := _DAYS.match(t):
        return today - timedelta(days=max(int(m.group(1)), 1) - 1)
    if t == "this-week":
        return today - timedelta(days=today.weekday())
    if t == "this-month":
        return today.replace(day=1)
    if t == "last-month":
        return (today.replace(day=1) - timedelta(days=1)).replace(day=1)
    return date.fromisoformat(t)


def period_end(text: str, today: date) -> date:
    """A last day: YYYY-MM-DD, today, yesterday, last-month (its last day)."""
    t = text.strip().lower()
    if t == "today":
        return today
    if t == "yesterday":
        return today - timedelta(days=1)
    if t == "last-month":
        return today.replace(day=1) - timedelta(days=1)
    return date.fromisoformat(t)


def _current(by: str, today: date) -> tuple[date, date, str]:
    """The period of ``by`` (day, week, month) that holds ``today``: first day, last day, label."""
    if by == "day":
        return today, today, f"today ({today.isoformat()})"
    if by == "week":
        start = today - timedelta(days=today.weekday())
        return start, start + timedelta(days=6), f"this week ({today.strftime('%G-W%V')})"
    start = today.replace(day=1)
    nxt = (start + timedelta(days=32)).replace(day=1)
    return start, nxt - timedelta(days=1), f"this month ({today.strftime('%Y-%m')})"


def _spent(con: duckdb.DuckDBPyConnection, first: date, last: date, project_ids: list[str] | None = None):
    """Dollars the legs of [first, last] cost (logged or estimated), and how many legs have no cost."""
    where = "legs.day between ? and ?" + (" and legs.project_id in (select unnest(?))" if project_ids else "")
    params = [first, last, *([project_ids] if project_ids else [])]
    usd, unknown = con.execute(f"""
        select coalesce(sum(cost_usd), 0), count(*) filter (where cost_source = 'unknown')
        from int_usage_legs as legs where {where}""", params).fetchone()
    return Decimal(usd), int(unknown)


def budget(con: duckdb.DuckDBPyConnection, amount: Decimal, by: str, today: date) -> tuple[str, bool]:
    """How much of a budget of ``amount`` dollars the current day, week or month has spent: (a line, over?)."""
    if by not in ("day", "week", "month"):
        raise UsageError("--budget counts a day, a week or a month: use --by day, week or month")
    first, last, label = _current(by, today)
    usd, unknown = _spent(con, first, last)
    share = (usd / amount * 100) if amount > 0 else Decimal(0)
    over = usd > amount
    line = (f"{label}: ${usd:,.2f} of ${amount:,.2f} ({share:.0f}%)"
            + (f", over by ${usd - amount:,.2f}" if over else f", ${amount - usd:,.2f} left")
            + (f"; {unknown} leg{'s' if unknown != 1 else ''} without cost not counted" if unknown else ""))
    return line, over


def status_line(con: duckdb.DuckDBPyConnection, today: date) -> str:
    """One line for a status bar: today's and this month's cost (legs without cost marked +?)."""
    parts = []
    for by in ("day", "month"):
        first, last, label = _current(by, today)
        usd, unknown = _spent(con, first, last)
        parts.append(f"{label.split(' (')[0]} ${usd:,.2f}{' +?' if unknown else ''}")
    return "Copilot " + " · ".join(parts)


def _unknown_note(unknown_input: int, unknown_cost: int, estimated: int, unknown_premium: int = 0,
                  unit: str = "leg") -> str:
    """What the sums leave out: legs (or requests) whose input tokens, cost or premium requests no source
    records, and estimates."""
    parts = []
    if unknown_input:
        parts.append(f"{unknown_input} {unit}{'s' if unknown_input != 1 else ''} without input")
    if unknown_cost:
        parts.append(f"{unknown_cost} without cost" if unknown_input else
                     f"{unknown_cost} {unit}{'s' if unknown_cost != 1 else ''} without cost")
    if unknown_premium:
        parts.append(f"{unknown_premium} without premium requests" if parts else
                     f"{unknown_premium} {unit}{'s' if unknown_premium != 1 else ''} without premium requests")
    if estimated:
        parts.append(f"{estimated} estimated")
    return ", ".join(parts)


# ------------------------------------------------------------------------------------ output
def _plain(v: object):
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, date):
        return v.isoformat()
    return v


def render(table: UsageTable, fmt: str, width: int | None = None) -> str:
    """The table in ``fmt``; a ``table`` fits ``width`` columns of a terminal (None: as wide as it is)."""
    cols = table.columns
    rows = [*table.rows, table.total]
    if fmt == "json":
        return json.dumps({"by": table.by, "rows": [{c: _plain(r.get(c)) for c in cols} for r in table.rows],
                           "total": {c: _plain(table.total.get(c)) for c in cols if c not in table.keys}},
                          ensure_ascii=False, indent=2) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if r.get(c) is None else _plain(r.get(c)) for c in cols])
        return buf.getvalue()
    cells = [[_cell(c, r.get(c)) for c in cols] for r in rows]
    headers = [_HEADERS.get(c, c) for c in cols]
    if fmt == "markdown":
        lines = ["| " + " | ".join(headers) + " |",
                 "|" + "|".join("---:" if c in FIGURES else "---" for c in cols) + "|"]
        lines += ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in cells[:-1]]
        lines.append("| " + " | ".join(f"**{x}**" if x else "" for x in cells[-1]) + " |")
        return "\n".join(lines) + "\n"
    cols, headers, cells = _fit(cols, headers, cells, width)
    widths = [max(_width(h), *(_width(row[i]) for row in cells)) for i, h in enumerate(headers)]

    def line(values: list):
        return "  ".join(_pad(v, w, right=c in FIGURES) for c, v, w in zip(cols, values, widths, strict=True)).rstrip()
    rule = "  ".join("-" * w for w in widths)
    body = [line(headers), rule, *(line(r) for r in cells[:-1]), rule, line(cells[-1])]
    if not table.rows:
        body.insert(2, "(no usage recorded for these filters)")
    if table.by in ("agent", "skill"):
        body.append("Days are UTC; 1 AI credit = $0.01. Rows are the single requests the logs record (fct_requests): "
                    "a request's cost is logged, else estimated from its tokens, else unknown; a skill is the one "
                    "last invoked in the request's turn. — : no source records the figure; sums count the requests "
                    "that record it (see the last column).")
    else:
        body.append("Days are UTC; 1 AI credit = $0.01. A leg is a session's run from its start or a resume to its "
                    "shutdown. Premium requests: the billing unit before June 2026 (requests x model multiplier). "
                    "— : no source records the figure; sums count the legs that record it (see the last "
                    "column).")
    return "\n".join(body) + "\n"


# what a narrow terminal loses first, then the text columns are cut to fit
_DROP_FIRST = ("cache_write_tokens", "cache_read_tokens", "sessions", "input_tokens", "premium_requests", "requests")


def _fit(cols: list[str], headers: list[str], cells: list[list[str]], width: int | None):
    """The columns and cells of a table that fits ``width``: figures dropped in _DROP_FIRST's order, then
    the title and the last column cut."""
    def total(cs: list[int]) -> int:
        return sum(max(_width(headers[i]), *(_width(r[i]) for r in cells)) for i in cs) + 2 * (len(cs) - 1)
    keep = list(range(len(cols)))
    if width is None:
        return cols, headers, cells
    for name in _DROP_FIRST:
        if total(keep) <= width:
            break
        if name in cols:
            keep.remove(cols.index(name))
    over = total(keep) - width
    for name, least in (("unknown", 12), ("title", 20)):
        if over > 0 and name in cols and cols.index(name) in keep:
            i = cols.index(name)
            now = max(_width(headers[i]), *(_width(r[i]) for r in cells))
            cut = max(least, now - over)
            cells = [[_clip(v, cut) if j == i else v for j, v in enumerate(r)] for r in cells]
            over -= now - cut
    return [cols[i] for i in keep], [headers[i] for i in keep], [[r[i] for i in keep] for r in cells]


def terminal_width() -> int | None:
    """The terminal's width when stdout is one, else None (a file or a pipe gets every column)."""
    import sys
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


_HEADERS = {"input_tokens": "input", "output_tokens": "output", "cache_read_tokens": "cache read",
            "cache_write_tokens": "cache write", "premium_requests": "premium", "ai_credits": "AI credits",
            "cost_usd": "USD", "session_id": "session"}


def _cell(col: str, v: object) -> str:
    if v is None:
        return "—" if col in FIGURES else ""
    if col in ("ai_credits", "premium_requests"):
        return f"{v:,.2f}"
    if col == "cost_usd":
        return f"${v:,.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, date):
        return v.isoformat()
    text = " ".join(str(v).split())
    if col == "session_id":
        return text[:8]
    return text if col == "unknown" else _clip(text, 60)
