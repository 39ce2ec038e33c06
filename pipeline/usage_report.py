"""``python -m pipeline usage``: requests, tokens, AI credits and dollars by day, week, month,
session, model or project, with a total line; the numbers of the ``report_usage_*`` models (all of
them add up the rows of ``int_usage_legs``)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

import duckdb

BY = ("day", "week", "month", "session", "model", "project")
_KEYS = {
    "day": (["day"], ["legs.day"]),
    "week": (["week"], ["date_trunc('week', legs.day)::date"]),
    "month": (["month"], ["date_trunc('month', legs.day)::date"]),
    "session": (["session_id", "title"], ["legs.session_id", "sessions.title"]),
    "model": (["model"], ["legs.model"]),
    "project": (["project"], ["projects.name"]),
}
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
        return [*self.keys, *FIGURES, "unknown"]


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
        from int_usage_legs as legs
        join dim_sessions as sessions on legs.session_id = sessions.session_id
        join dim_projects as projects on legs.project_id = projects.project_id
        where {' and '.join(where)}
        group by grouping sets (({', '.join(exprs)}), ())
        order by is_total, {', '.join(str(i + 1) for i in range(len(names)))}
    """
    rel = con.execute(sql, params)
    cols = [d[0] for d in rel.description]
    out = [dict(zip(cols, r, strict=True)) for r in rel.fetchall()]
    rows, total = [], dict.fromkeys([*names, *FIGURES], None) | {"sessions": 0, "requests": 0, "unknown": ""}
    for r in out:
        r["unknown"] = _unknown_note(r.pop("unknown_input"), r.pop("unknown_cost"), r.pop("estimated_cost"),
                                     r.pop("unknown_premium"))
        if r.pop("is_total"):
            total = r
        else:
            rows.append(r)
    for n in names:
        total[n] = "total" if n == names[0] else ""
    return UsageTable(by, names, rows, total)


def _unknown_note(unknown_input: int, unknown_cost: int, estimated: int, unknown_premium: int = 0) -> str:
    """What the sums leave out: legs whose input tokens, cost or premium requests no source records, and
    estimates."""
    parts = []
    if unknown_input:
        parts.append(f"{unknown_input} leg{'s' if unknown_input != 1 else ''} without input")
    if unknown_cost:
        parts.append(f"{unknown_cost} without cost" if unknown_input else
                     f"{unknown_cost} leg{'s' if unknown_cost != 1 else ''} without cost")
    if unknown_premium:
        parts.append(f"{unknown_premium} without premium requests" if parts else
                     f"{unknown_premium} leg{'s' if unknown_premium != 1 else ''} without premium requests")
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


def render(table: UsageTable, fmt: str) -> str:
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
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]

    def line(values: list):
        return "  ".join(v.rjust(w) if c in FIGURES else v.ljust(w)
                         for c, v, w in zip(cols, values, widths, strict=True)).rstrip()
    rule = "  ".join("-" * w for w in widths)
    body = [line(headers), rule, *(line(r) for r in cells[:-1]), rule, line(cells[-1])]
    if not table.rows:
        body.insert(2, "(no usage recorded for these filters)")
    body.append("Days are UTC; 1 AI credit = $0.01. A leg is a session's run from its start or a resume to its "
                "shutdown. Premium requests: the billing unit before June 2026 (requests x model multiplier). "
                "— : no source records the figure; sums count the legs that record it (see the last "
                "column).")
    return "\n".join(body) + "\n"


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
    return text if len(text) <= 60 or col == "unknown" else text[:59] + "…"
