"""``python -m pipeline mcp``: the user's own Copilot history served to their agents over the Model
Context Protocol (stdio, the official ``mcp`` SDK).

Four tools: ``search`` (BM25 over prompts, answers, checkpoints and memories: the warehouse's
``search()`` macro), ``session`` (one session: its facts, prompts with answers, tool calls, files,
checkpoints), ``usage`` (the figures of ``python -m pipeline usage``) and ``query`` (read-only SQL).
Each call opens the warehouse read-only and closes it (an ingest may run between calls; while one
writes, a call is told the warehouse is busy); a query cannot write, read files or attach anything
(``enable_external_access`` off), and what it returns is capped. Nothing is written to stdout but the
protocol: logs go to stderr.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, timezone
from pathlib import Path

import duckdb

from .output import jsonable
from .warehouse import connect

log = logging.getLogger(__name__)

MAX_ROWS = 500  # rows a query returns at most (it says when it cut)
ANSWER_CHARS = 4000  # of each answer and prompt in a session's view
CALLS_PER_PROMPT = 50
TARGET_KEYS = ("path", "filePath", "file_path", "command", "pattern", "query", "url", "description")


class HistoryError(Exception):
    """What a tool call asked for does not exist or cannot be done: said to the agent as a tool error."""


@contextmanager
def _reading(warehouse: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(warehouse, read_only=True)
    try:
        # no files, no network, no ATTACH: the agent sees the warehouse and nothing else of the machine
        con.execute("set enable_external_access = false")
        con.execute("set lock_configuration = true")
        yield con
    finally:
        con.close()


def _dicts(rel: duckdb.DuckDBPyRelation, limit: int | None = None) -> tuple[list[dict], bool]:
    cols = rel.columns
    rows = rel.fetchmany(limit + 1) if limit is not None else rel.fetchall()
    cut = limit is not None and len(rows) > limit
    return [{c: jsonable(v) for c, v in zip(cols, r, strict=True)} for r in rows[:limit]], cut


def search_history(warehouse: Path, words: str, limit: int = 10) -> list[dict]:
    if not words.strip():
        raise HistoryError("search needs words")
    limit = max(1, min(int(limit), 100))
    with _reading(warehouse) as con:
        rel = con.sql("""
            select r.score, r.kind, r.session_id, r.ref, s.title as session_title, p.name as project, r.written_at,
                   left(regexp_replace(coalesce(r.text, ''), '\\s+', ' ', 'g'), 400) as snippet
            from search(?, k := ?) as r
            left join dim_sessions as s using (session_id)
            left join dim_projects as p on p.project_id = s.project_id
            order by r.score desc, r.kind, r.session_id, r.ref""", params=[words, limit])
        return _dicts(rel)[0]


def session_view(warehouse: Path, session_id: str, max_prompts: int = 50) -> dict:
    """One session: an id or a unique prefix of at least 8 characters."""
    key = session_id.strip()
    if len(key) < 8:
        raise HistoryError("give a session id, or at least its first 8 characters")
    max_prompts = max(1, min(int(max_prompts), 500))
    with _reading(warehouse) as con:
        ids = [r[0] for r in con.execute("select session_id from dim_sessions where starts_with(session_id, ?) "
                                         "order by session_id limit 3", [key]).fetchall()]
        if not ids:
            raise HistoryError(f"no session {key!r} in the warehouse")
        if len(ids) > 1 and key not in ids:
            raise HistoryError(f"{key!r} names several sessions: {', '.join(ids)}")
        sid = key if key in ids else ids[0]
        facts = _dicts(con.sql("""
            select s.session_id, s.title, p.name as project, s.client, s.cwd, s.repository, s.branch, s.started_at,
                   s.ended_at, s.active_s, s.duration_s, s.n_turns, s.n_tool_calls, s.n_failed_tool_calls,
                   s.n_errors, s.error_message, s.models
            from dim_sessions as s left join dim_projects as p using (project_id) where s.session_id = ?""",
                               params=[sid]))[0][0]
        usage = _dicts(con.sql("""
            select model, requests, input_tokens, output_tokens, premium_requests, ai_credits, cost_usd, cost_source
            from fct_usage where session_id = ? order by model""", params=[sid]))[0]
        turns = _dicts(con.sql(f"""
            select turn_index, started_at, model, selected_model, status, error_code, error_message, n_tool_calls,
                   left(user_message, {ANSWER_CHARS}) as prompt, left(assistant_response, {ANSWER_CHARS}) as answer
            from fct_turns where session_id = ? order by turn_index""", params=[sid]), max_prompts)[0]
        target = "coalesce(" + ", ".join(f"arguments->>'{k}'" for k in TARGET_KEYS) + ")"
        calls = _dicts(con.sql(f"""
            select turn_index, tool_name, tool_family, is_success, left(error_message, 500) as error,
                   left(case when json_valid(arguments) then {target} end, 300) as target
            from fct_tool_calls where session_id = ?
            qualify row_number() over (partition by turn_index order by coalesce(started_at, requested_at),
                                       tool_call_id) <= {CALLS_PER_PROMPT}
            order by turn_index nulls first, coalesce(started_at, requested_at), tool_call_id""", params=[sid]))[0]
        files = _dicts(con.sql("""
            select f.path, t.action, t.n_touches from fct_file_touches as t join dim_files as f using (file_id)
            where t.session_id = ? order by f.path, t.action""", params=[sid]))[0]
        checkpoints = _dicts(con.sql(f"""
            select checkpoint_number, title, left(overview, {ANSWER_CHARS}) as overview,
                   left(next_steps, {ANSWER_CHARS}) as next_steps
            from fct_checkpoints where session_id = ? order by checkpoint_number""", params=[sid]))[0]
    by_turn: dict[object, list[dict]] = {}
    for c in calls:
        by_turn.setdefault(c.pop("turn_index"), []).append(c)
    for t in turns:
        t["tool_calls"] = by_turn.get(t["turn_index"], [])
    return {**facts, "usage": usage, "prompts": turns, "tool_calls_before_the_first_prompt": by_turn.get(None, []),
            "files": files, "checkpoints": checkpoints,
            "note": f"prompts and answers cut at {ANSWER_CHARS:,} characters, at most {CALLS_PER_PROMPT} tool calls "
                    "a prompt; the query tool reads the rest (fct_turns, fct_tool_calls, tool_call_outputs)"}


def usage_figures(warehouse: Path, by: str = "month", since: str | None = None, until: str | None = None,
                  project: str | None = None) -> dict:
    from .usage_report import UsageError, period_end, period_start, render, usage_table

    today = datetime.now(timezone.utc).date()

    def day(text: str | None, what: str) -> date | None:
        if not text:
            return None
        try:
            return (period_start if what == "since" else period_end)(text, today)
        except ValueError as exc:
            raise HistoryError(f"{what} {text!r} is not a date like 2026-09-01 or a period word (today, "
                               f"yesterday, {'7d, 30d, this-week, this-month, ' if what == 'since' else ''}"
                               "last-month)") from exc

    import json

    with _reading(warehouse) as con:
        try:
            table = usage_table(con, by, day(since, "since"), day(until, "until"), project)
        except UsageError as exc:
            raise HistoryError(str(exc)) from exc
    return json.loads(render(table, "json"))


def read_only_query(warehouse: Path, sql: str, limit: int = 100) -> dict:
    limit = max(1, min(int(limit), MAX_ROWS))
    with _reading(warehouse) as con:
        try:
            rel = con.sql(sql)
            if rel is None:
                raise HistoryError("the statement returned no rows (only queries are answered)")
            rows, cut = _dicts(rel, limit)
        except duckdb.Error as exc:
            raise HistoryError(str(exc).splitlines()[0]) from exc
    return {"columns": list(rows[0]) if rows else [], "rows": rows, "truncated": cut,
            **({"note": f"only the first {limit} rows; add a LIMIT or an aggregate"} if cut else {})}


def build_server(warehouse: str | Path):
    """The MCP server over ``warehouse`` (its tools read it; nothing writes)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    wh = Path(warehouse)
    server = MCPServer(
        "copilot-history", version=_version(),
        instructions="The user's own GitHub Copilot history (CLI and VS Code), read from their warehouse: "
                     "search past prompts, answers and checkpoints; open a session; see token use and cost; "
                     "query the tables (dim_sessions, fct_turns, fct_tool_calls, fct_usage, ...) read-only.")

    def guarded(fn: Callable, *args: object) -> object:
        try:
            return fn(wh, *args)
        except HistoryError as exc:
            raise ToolError(str(exc)) from exc
        except Exception as exc:  # noqa: BLE001 - a busy or missing warehouse: said to the agent, not a crash
            log.info("tool failed", exc_info=True)
            raise ToolError(" ".join(str(exc).split())[:500]) from exc

    @server.tool(description="BM25 search over the user's past Copilot prompts, answers, checkpoints and "
                             "memories; best first, with the session each hit belongs to.")
    def search(words: str, limit: int = 10) -> list[dict]:
        return guarded(search_history, words, limit)

    @server.tool(description="One past Copilot session by id (or its first 8+ characters): title, project, "
                             "time, models, cost, each prompt with its answer, status and tool calls, the "
                             "files it touched and its checkpoints.")
    def session(session_id: str, max_prompts: int = 50) -> dict:
        return guarded(session_view, session_id, max_prompts)

    @server.tool(description="Copilot requests, tokens, premium requests, AI credits and dollars by day, week, "
                             "month, session, model, project, agent (main or a sub-agent) or skill, with a total; "
                             "since as YYYY-MM-DD, today, "
                             "yesterday, 7d, 30d, this-week, this-month or last-month (UTC days); until as "
                             "YYYY-MM-DD, today, yesterday or last-month; what a sum leaves out is in each row's "
                             "`unknown`.")
    def usage(by: str = "month", since: str | None = None, until: str | None = None,
              project: str | None = None) -> dict:
        return guarded(usage_figures, by, since, until, project)

    @server.tool(description="Read-only DuckDB SQL over the warehouse (tables dim_sessions, dim_projects, "
                             "dim_files, fct_turns, fct_tool_calls, fct_usage, fct_usage_legs, fct_checkpoints, "
                             "report_*; the view tool_call_outputs). No files, no writes; at most 500 rows.")
    def query(sql: str, limit: int = 100) -> dict:
        return guarded(read_only_query, sql, limit)

    return server


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("copilot-warehouse")
    except Exception:  # noqa: BLE001 - run from a checkout without the package installed
        return ""


def serve_stdio(warehouse: str | Path) -> None:
    if not Path(warehouse).exists():
        from .warehouse import WarehouseError
        raise WarehouseError(f"no warehouse at {warehouse}: run `python -m pipeline ingest` first")
    build_server(warehouse).run("stdio")
