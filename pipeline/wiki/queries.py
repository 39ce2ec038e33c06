"""Everything the wiki shows, read from the warehouse once, in a fixed order (so the same warehouse
gives the same pages). What a BI user would want too lives in a model (``report_open_threads``,
``report_session_files``, ...); this module only selects, and sums report rows for display."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from dataclasses import dataclass, field

import duckdb

from .markdown import slug

# a session's pages (wiki and site): at most PAGE_PROMPTS prompts each, and a page closes before its tool calls
# pass PAGE_CALLS (a prompt with more is a page of its own); one session of 200,000 calls was one 97 MB page
PAGE_PROMPTS = 200
PAGE_CALLS = 2_000

_USAGE_WEEKS = """
    select week, sum(requests) as requests, sum(input_tokens) as input_tokens,
           sum(output_tokens) as output_tokens, sum(cache_read_tokens) as cache_read_tokens,
           sum(ai_credits) as ai_credits, sum(cost_usd) as cost_usd,
           sum(n_legs_unknown_input) as n_legs_unknown_input, sum(n_legs_unknown_cost) as n_legs_unknown_cost,
           sum(n_legs_estimated_cost) as n_legs_estimated_cost
    from report_usage_weekly {where} group by week order by week"""
_USAGE_MODELS = """
    select model, count(distinct session_id) as n_sessions, sum(requests) as requests,
           sum(input_tokens) as input_tokens, sum(output_tokens) as output_tokens,
           sum(ai_credits) as ai_credits, sum(cost_usd) as cost_usd,
           count(*) filter (where input_tokens is null and requests > 0) as n_legs_unknown_input,
           count(*) filter (where cost_source = 'unknown') as n_legs_unknown_cost,
           count(*) filter (where cost_source = 'estimated') as n_legs_estimated_cost
    from int_usage_legs {where} group by model
    order by sum(ai_credits) desc nulls last, sum(requests) desc, model"""


# what a call was about, for a one-line list: the first of these arguments it has
TARGET_KEYS = ("path", "filePath", "file_path", "command", "pattern", "query", "url", "description", "prompt")
_TOOL_CALLS = f"""
    select session_id, turn_index, tool_call_id, tool_name, tool_family, is_success, error_message, duration_ms,
           coalesce(started_at, requested_at) as called_at,
           case when json_valid(arguments) then left(coalesce({", ".join(f"arguments->>'{k}'" for k in TARGET_KEYS)}),
                                                     400) end as target
    from fct_tool_calls
    where {{where}}
    order by session_id, turn_index nulls first, called_at nulls last, tool_call_id"""
# what a session's page shows, by session ({where}: which sessions; WikiData's fields of the same names)
SESSION_PARTS = {
    "turns": "select * from fct_turns where {where} order by session_id, turn_index",
    "checkpoints": "select * from fct_checkpoints where {where} order by session_id, checkpoint_number",
    "session_files": "select * from report_session_files where {where} order by session_id, first_seen_at, path",
    "refs": "select * from fct_refs where {where} order by session_id, ref_type, ref_value",
    "tool_calls": _TOOL_CALLS,
    # with the premium requests and cost its legs know (fct_usage holds a figure only when every leg does)
    "session_usage": """with u as (select * from fct_usage where {where}),
        l as (select session_id, model, sum(premium_requests) as premium_known,
                     count(*) filter (where premium_requests is null and requests > 0) as n_legs_unknown_premium,
                     sum(ai_credits) as credits_known, sum(cost_usd) as usd_known,
                     count(*) filter (where cost_source = 'unknown') as n_legs_unknown_cost
              from fct_usage_legs semi join u using (session_id, model) group by session_id, model)
        select u.*, l.premium_known, l.n_legs_unknown_premium, l.credits_known, l.usd_known,
               coalesce(l.n_legs_unknown_cost, 0) as n_legs_unknown_cost
        from u left join l using (session_id, model)
        order by session_id, model""",
    "memories": "select * from fct_memories where session_id is not null and {where} order by session_id, kind, path",
    # who made the requests, and the skills they ran under (fct_requests: the requests the logs record)
    "session_split": """with r as (select * from fct_requests where {where})
        select session_id, 'agent' as split, coalesce(agent, '(unknown)') as name, count(*) as requests,
               sum(output_tokens) as output_tokens, sum(ai_credits) as credits_known, sum(cost_usd) as usd_known,
               count(*) filter (where cost_source = 'unknown') as n_unknown_cost
        from r group by all
        union all
        select session_id, 'skill', coalesce(skill, '(none)'), count(*), sum(output_tokens), sum(ai_credits),
               sum(cost_usd), count(*) filter (where cost_source = 'unknown')
        from r group by all
        order by session_id, split, requests desc, name""",
}


_LAST_ORDER = re.compile(r"\s+order by [^()']*$", re.I)


def unordered(sql: str) -> str:
    """``sql`` without its last ORDER BY, when that clause is the statement's own (no parenthesis or quote
    after it): for a query whose rows are summed, not listed."""
    return _LAST_ORDER.sub("", sql)


@dataclass
class Usage:
    weeks: list[dict]
    models: list[dict]


@dataclass
class WikiData:
    projects: list[dict]
    sessions: list[dict]
    totals: dict
    usage: Usage  # of all projects
    project_usage: dict[str, Usage]
    files: dict[str, list[dict]]  # by project: report_file_importance
    coupling: dict[str, list[dict]]
    topics: dict[str, list[dict]]
    trends: dict[str, list[dict]]
    threads: dict[str, list[dict]]  # by project: report_open_threads
    turns: dict[str, list[dict]]  # by session
    checkpoints: dict[str, list[dict]]
    session_files: dict[str, list[dict]]  # by session: report_session_files
    refs: dict[str, list[dict]]
    tool_calls: dict[str, list[dict]]  # by session: fct_tool_calls with a short target (path, command, ...)
    session_usage: dict[str, list[dict]]
    session_split: dict[str, list[dict]]  # by session: requests by agent and by skill (fct_requests)
    memories: dict[str, list[dict]]
    weekly: list[dict]  # report_activity_weekly
    tools: list[dict]  # calls per tool (the 15 most used)
    people: list[dict]  # report_people: more than one row only in team mode
    people_weeks: dict[str, list[dict]]  # by person: report_people_usage_weekly summed over models
    money: dict = field(default_factory=dict)  # months (cost per month), and the latest months' top project, model
    page_data: dict[str, object] = field(default_factory=dict)  # a page's own data, by page (catalog.Page.query)
    project_slug: dict[str, str] = field(default_factory=dict)
    project_name: dict[str, str] = field(default_factory=dict)

    def calls_by_turn(self, session_id: str) -> dict[int | None, list[dict]]:
        """A session's tool calls by the prompt they belong to (None: before the first prompt), in order."""
        out: dict[int | None, list[dict]] = {}
        for c in self.tool_calls.get(session_id, []):
            out.setdefault(c["turn_index"], []).append(c)
        return out

    def __post_init__(self):
        self.project_slug = {p["project_id"]: f"{slug(p['name'])}-{p['project_id'][:6]}" for p in self.projects}
        self.project_name = {p["project_id"]: p["name"] for p in self.projects}


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[dict]:
    # a statement executed, not a relation: a page of 2,000 tool calls 19 -> 13 ms (a relation plans again)
    cur = con.execute(sql, params) if params else con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _by(con: duckdb.DuckDBPyConnection, key: str, sql: str, params: list | None = None) -> dict[str, list[dict]]:
    out = defaultdict(list)
    for r in _rows(con, sql, params):
        out[r[key]].append(r)
    return out


def _usage(con: duckdb.DuckDBPyConnection, project_id: str | None = None) -> Usage:
    """Per week (report_usage_weekly) and per model (int_usage_legs) usage, of one project or of all."""
    where, params = ("where project_id = ?", [project_id]) if project_id else ("", None)
    return Usage(_rows(con, _USAGE_WEEKS.format(where=where), params),
                 _rows(con, _USAGE_MODELS.format(where=where), params))


# the parts of a session page that grow with its prompts: read a page at a time for a session of several pages
PAGED_PARTS = ("turns", "tool_calls")


def session_parts(con: duckdb.DuckDBPyConnection, first: str | None = None, last: str | None = None,
                  paged: frozenset[str] = frozenset()) -> dict[str, dict[str, list[dict]]]:
    """What the session pages show (``SESSION_PARTS``), of every session or of the session ids from
    ``first`` to ``last``; of the ``paged`` sessions without their turns and tool calls (``with_page``)."""
    where, params = ("session_id between ? and ?", [first, last]) if first is not None else ("true", [])
    out = {}
    for part, sql in SESSION_PARTS.items():
        if part in PAGED_PARTS and paged:
            out[part] = _by(con, "session_id", sql.format(where=f"{where} and not list_contains(?, session_id)"),
                            [*params, sorted(paged)])
        else:
            out[part] = _by(con, "session_id", sql.format(where=where), params or None)
    return out


def with_sessions(con: duckdb.DuckDBPyConnection, data: WikiData, first: str, last: str,
                  paged: frozenset[str] = frozenset()) -> WikiData:
    """``data`` (read without the session parts) with those of the session ids ``first`` to ``last`` (of the
    ``paged`` ones, their turns and tool calls a page at a time: ``with_page``)."""
    return dataclasses.replace(data, **session_parts(con, first, last, paged))


def page_ranges(turns: list[tuple[int, int | None]]) -> list[tuple[int, int]]:
    """The pages of a session's prompts, from (turn_index, n_tool_calls) of each in order: the first and last
    turn index of each page (PAGE_PROMPTS, PAGE_CALLS). Empty when one page holds them all."""
    ranges: list[tuple[int, int]] = []
    first = last = None
    n_prompts = n_calls = 0
    for turn, calls in turns:
        if first is not None and (n_prompts >= PAGE_PROMPTS or n_calls + (calls or 0) > PAGE_CALLS):
            ranges.append((first, last))
            first, n_prompts, n_calls = None, 0, 0
        first = turn if first is None else first
        last, n_prompts, n_calls = turn, n_prompts + 1, n_calls + (calls or 0)
    if first is not None:
        ranges.append((first, last))
    return ranges if len(ranges) > 1 else []



def page_plans(con: duckdb.DuckDBPyConnection, first: str | None = None,
               last: str | None = None) -> dict[str, list[tuple[int, int]]]:
    """The pages of the sessions (from ``first`` to ``last``, or all) that have several (``page_ranges``)."""
    where, params = ("session_id between ? and ? and", [first, last]) if first is not None else ("", [])
    turns = _by(con, "session_id", f"""
        select session_id, turn_index, n_tool_calls from fct_turns
        where session_id in (select session_id from dim_sessions where {where} (n_turns > ? or n_tool_calls > ?))
        order by session_id, turn_index""", [*params, PAGE_PROMPTS, PAGE_CALLS])
    plans = {sid: page_ranges([(t["turn_index"], t["n_tool_calls"]) for t in ts]) for sid, ts in turns.items()}
    return {sid: ranges for sid, ranges in plans.items() if ranges}


def with_page(con: duckdb.DuckDBPyConnection, data: WikiData, session_id: str, first_turn: int, last_turn: int,
              is_first: bool) -> WikiData:
    """``data`` with the turns and tool calls of one page of a session (the calls before its first prompt on
    the first page)."""
    where = "session_id = ? and (turn_index between ? and ?" + (" or turn_index is null)" if is_first else ")")
    params = [session_id, first_turn, last_turn]
    return dataclasses.replace(data, **{part: _by(con, "session_id", SESSION_PARTS[part].format(where=where), params)
                                        for part in PAGED_PARTS})


def money(con: duckdb.DuckDBPyConnection) -> dict:
    """What the overview leads with: the cost of every month (known sums, and how many legs they leave out),
    and of the latest two months with usage their top project and model. "Latest" is the warehouse's, not
    the clock's: the same warehouse gives the same pages."""
    months = _rows(con, """
        select strftime(month, '%Y-%m') as month, sum(ai_credits) as ai_credits, sum(cost_usd) as cost_usd,
               sum(premium_requests) as premium_requests, sum(requests) as requests,
               sum(n_legs_unknown_cost) as n_legs_unknown_cost, sum(n_legs_estimated_cost) as n_legs_estimated_cost
        from report_usage_monthly group by 1 order by 1""")
    out: dict = {"months": months, "latest": []}
    for m in months[-2:][::-1]:
        top = {}
        for key, sql in (("project", "select p.name, sum(r.cost_usd) as usd, sum(r.requests) as n "
                                     "from report_usage_monthly as r join dim_projects as p using (project_id)"),
                         ("model", "select r.model, sum(r.cost_usd) as usd, sum(r.requests) as n "
                                   "from report_usage_monthly as r")):
            # the most expensive; where no cost is known, the most used
            row = con.execute(f"""{sql} where strftime(r.month, '%Y-%m') = ? group by 1
                                  order by usd desc nulls last, n desc, 1 limit 1""", [m["month"]]).fetchone()
            top[key] = {"name": row[0], "cost_usd": row[1]} if row else None
        out["latest"].append({**m, "top": top})
    return out


def runs(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """The ingest runs, newest first."""
    return _rows(con, """select run_id, started_at, mode, n_files_read, n_files_unchanged, n_records, n_rejects,
                                n_redactions, n_sessions_changed from _runs order by started_at desc, run_id desc""")


def rejects(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """The reasons of the rows now in _rejects, counted."""
    return _rows(con, """select regexp_replace(reason, ' \\(.*$', '') as reason, count(*) as n
                         from _rejects group by 1 order by 2 desc, 1""")


FAILURES_LIMIT = 500


def failures(con: duckdb.DuckDBPyConnection) -> dict:
    """The Failures page: prompts whose status is error or cancelled, and failed tool calls, newest first (the
    latest FAILURES_LIMIT of each)."""
    prompts = _rows(con, f"""
        select t.session_id, s.title, t.turn_index, t.started_at, left(t.user_message, 400) as user_message,
               t.status, t.error_code, left(t.error_message, 600) as error_message
        from fct_turns as t join dim_sessions as s using (session_id)
        where t.status in ('error', 'cancelled')
        order by t.started_at desc nulls last, t.session_id, t.turn_index limit {FAILURES_LIMIT + 1}""")
    target = "coalesce(" + ", ".join(f"c.arguments->>'{k}'" for k in TARGET_KEYS) + ")"
    calls = _rows(con, f"""
        select c.session_id, s.title, c.tool_name, coalesce(c.started_at, c.requested_at) as called_at,
               left(c.error_message, 600) as error_message,
               left(case when json_valid(c.arguments) then {target} end, 300) as target
        from fct_tool_calls as c join dim_sessions as s using (session_id)
        where c.is_success = false
        order by called_at desc nulls last, c.session_id, c.tool_call_id limit {FAILURES_LIMIT + 1}""")
    return {"prompts": prompts[:FAILURES_LIMIT], "calls": calls[:FAILURES_LIMIT], "limit": FAILURES_LIMIT,
            "cut": len(prompts) > FAILURES_LIMIT or len(calls) > FAILURES_LIMIT}


def load(con: duckdb.DuckDBPyConnection, sessions: bool = True) -> WikiData:
    """Everything the pages show; without what only the session pages show when ``sessions`` is False
    (``report`` reads that a few hundred sessions at a time: ``with_sessions``)."""
    projects = _rows(con, """
        select project_id, name, repository, root_path, n_sessions, first_seen_at, last_seen_at
        from dim_projects order by last_seen_at desc nulls last, name, project_id""")
    return WikiData(
        projects=projects,
        sessions=_rows(con, """
            select s.session_id, s.project_id, s.title, s.summary, s.client, s.sources, s.cwd, s.repository, s.branch,
                   s.copilot_version, s.started_at, s.ended_at, s.duration_s, s.active_s, s.n_turns, s.n_tool_calls,
                   s.n_failed_tool_calls, s.models, s.is_gone, s.n_errors, s.error_message,
                   c.cost_usd, c.premium_requests, coalesce(c.n_legs_unknown_cost, 0) as n_legs_unknown_cost
            from dim_sessions as s left join (
                select session_id, sum(cost_usd) as cost_usd, sum(premium_requests) as premium_requests,
                       count(*) filter (where cost_source = 'unknown') as n_legs_unknown_cost
                from int_usage_legs group by session_id) as c using (session_id)
            order by s.started_at desc nulls last, s.session_id"""),
        totals=_rows(con, """
            select count(*) as n_sessions, sum(n_turns) as n_turns, sum(n_tool_calls) as n_calls,
                   sum(n_failed_tool_calls) as n_failed, min(started_at) as first_at, max(ended_at) as last_at
            from dim_sessions""")[0],
        usage=_usage(con),
        project_usage={p["project_id"]: _usage(con, p["project_id"]) for p in projects},
        files=_by(con, "project_id", "select * from report_file_importance order by project_id, rank"),
        coupling=_by(con, "project_id", """select * from report_file_coupling
                                           order by project_id, degree desc, shared_sessions desc, path_a, path_b"""),
        topics=_by(con, "project_id", "select * from report_topics order by project_id, rank"),
        trends=_by(con, "project_id", "select * from report_topic_trends order by project_id, month, term"),
        threads=_by(con, "project_id", "select * from report_open_threads "
                                       "order by started_at desc nulls last, session_id"),
        **(session_parts(con) if sessions else {part: {} for part in SESSION_PARTS}),
        weekly=_rows(con, "select week, n_turns, n_tool_calls, n_failed_tool_calls from report_activity_weekly "
                          "order by week"),
        tools=_rows(con, """select tool_name, sum(n_calls) as n, sum(n_failed) as f from report_tool_usage
                            group by tool_name order by n desc, tool_name limit 15"""),
        people=_rows(con, "select * from report_people "
                          "order by ai_credits desc nulls last, n_sessions desc, user_name"),
        people_weeks=_by(con, "user_name", """
            select user_name, week, sum(requests) as requests, sum(output_tokens) as output_tokens,
                   sum(ai_credits) as ai_credits, sum(cost_usd) as cost_usd
            from report_people_usage_weekly group by user_name, week order by user_name, week"""),
        money=money(con),
    )
