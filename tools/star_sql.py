"""The star's relational core in DuckDB SQL against the same steps in polars, timed in alternating rounds on one
ingested warehouse, and the SQL's rows compared with the star's:

    python -m tools.star_sql data/bench/run-events-1024mb/bench.duckdb [--rounds 3]

The core is what ``transform.star.turns_and_calls`` builds, with the session.start context
(``transform.star._start_context``): each session's events in order with their turn, leg and model in use, the
tool events placed among them, the tool calls paired from their request, start and completion, and the turns
with their answers, tokens, end, model, status and count of tool calls. The polars side pulls each batch of
sessions the way an ingest's star does (``load.star``: the same queries and batches, read into polars in this
process) and builds the core; the SQL side builds it in temp tables from the staged rows where they lie, with no
pull. Both run in this process, alternating, on every session of the warehouse.

The SQL is a lower bound of a star in SQL: it leaves out the rules that read a text one at a time (Copilot's
injected tags taken out of a prompt, a VS Code button's click, the model of a subagent, a chat's untimed calls, an
error's code), which a SQL star would still need. Its rows equal the star's on the CLI logs `make bench` writes,
which call for none of them: printed, and the command fails when they differ. ``--rounds 0`` compares only.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

_TOOLS = "('tool.execution_start', 'tool.execution_complete')"
_RUNNING = "(partition by session_id order by event_index rows unbounded preceding)"
_PLACED = "(partition by session_id order by event_index, is_tool rows unbounded preceding)"
_NUMBERED = r"^[\t\n\x0B\f\r\x{85}\pZ]*1[.:|]"

# the core, a temp table a statement: ev (the events but tool events, prepared), tl (the tool events placed),
# calls, turns, ctx (each session's start context)
CORE_SQL = {
    "ev": f"""
create temp table ev as
with e as (
  select session_id, source_kind, event_index, event_type, try_cast(ts as timestamp) as "at", model, interaction_id,
         tool_call_id, parent_tool_call_id, output_tokens, api_call_id, event_id, error_message, _source_path, extra,
         case when event_type in ('user.message', 'assistant.message') then content end as content,
         event_type = 'user.message' and trim(coalesce(content, '')) <> ''
           and coalesce(json_extract_string(extra, '$.source'), '') not like 'skill-%' as is_prompt,
         case when event_type = 'session.model_change' then json_extract_string(extra, '$.newModel')
              when event_type in ('session.start', 'session.resume') then json_extract_string(extra, '$.selectedModel')
              when event_type = 'session.auto_mode_resolved' then json_extract_string(extra, '$.chosenModel')
              when event_type = 'session.shutdown' then json_extract_string(extra, '$.currentModel')
              when event_type in ('assistant.turn_start', 'assistant.message') then model end as hint,
         case when event_type = 'session.model_change' then json_extract_string(extra, '$.newModel')
              when event_type in ('session.start', 'session.resume', 'user.message')
              then json_extract_string(extra, '$.selectedModel') end as sel_hint,
         (row_number() over (partition by session_id order by event_index) = 1
          or event_type in ('session.start', 'session.resume'))::int as seg_start,
         (event_type = 'session.shutdown')::int as is_shut,
         (event_type = 'session.usage_checkpoint')::int as is_checkpoint
  from stg_events where session_id is not null and event_type not in {_TOOLS}),
s as (select *, sum(is_prompt::int) over {_RUNNING} - 1 as t0, sum(seg_start) over {_RUNNING} as seg,
             last_value(case when lower(hint) not in ('auto', '') then hint end ignore nulls) over {_RUNNING} as ffill,
             first_value(case when lower(hint) not in ('auto', '') then hint end ignore nulls)
               over (partition by session_id order by event_index rows between current row and unbounded following)
               as bfill,
             last_value(sel_hint ignore nulls) over {_RUNNING} as sel_model
      from e),
l as (select *, sum(is_shut) over (partition by session_id, seg order by event_index rows unbounded preceding)
                - is_shut as shut_before
      from s),
m as (select *, coalesce(last_value(case when event_type in ('assistant.message', 'assistant.usage')
                                         then shut_before end ignore nulls)
                           over (partition by session_id, seg order by event_index rows unbounded preceding), 0) as sub
      from l),
g as (select * exclude (t0, seg, sub, ffill, bfill, hint, sel_hint, seg_start, is_shut, shut_before),
             case when t0 >= 0 then t0 end as turn_index,
             dense_rank() over (partition by session_id order by seg * 1000000 + sub) as leg_index,
             coalesce(nullif(model, ''), ffill, bfill) as eff_model
      from m)
select * exclude (is_checkpoint),
       sum(is_checkpoint) over (partition by session_id, leg_index order by event_index rows unbounded preceding)
         as obs_index
from g""",
    "tl": f"""
create temp table tl as
with marks as (
  select session_id, event_index, turn_index, leg_index, false as is_tool, null::bigint as _source_line,
         null as _source_path, null as event_type, null::timestamp as "at", null as tool_call_id, null as tool_name,
         null as arguments, null::boolean as success, null as error_message, null as parent_tool_call_id,
         null as mcp_server_name, null::bigint as result_chars, null as result_md5, null::boolean as result_numbered,
         null as model
  from ev
  union all
  select session_id, event_index, null, null, true, _source_line, _source_path, event_type, try_cast(ts as timestamp),
         tool_call_id, tool_name, arguments, success, error_message, parent_tool_call_id, mcp_server_name,
         result_chars, result_md5, regexp_matches(result_head, '{_NUMBERED}'), model
  from stg_events where session_id is not null and event_type in {_TOOLS})
select * exclude (turn_index, leg_index),
       last_value(turn_index ignore nulls) over {_PLACED} as turn_index,
       coalesce(last_value(leg_index ignore nulls) over {_PLACED}, 1) as leg_index
from marks qualify is_tool""",
    "calls": """
create temp table calls as
with req as (
  select r.session_id, coalesce(r.tool_call_id, format('req-{}-{}', r.event_index, r.request_index)) as tool_call_id,
         r.tool_name as req_name, r.arguments as req_args, r.model as req_model, r.mcp_server_name as req_mcp,
         e.turn_index as req_turn, coalesce(e."at", try_cast(r.ts as timestamp)) as requested_at
  from stg_tool_requests r join ev e on e._source_path = r._source_path and e.event_index = r.event_index
  qualify row_number() over (partition by r.session_id, coalesce(r.tool_call_id, format('req-{}-{}', r.event_index,
                             r.request_index)) order by r._source_path, r.event_index, r.request_index) = 1),
st as (select session_id, coalesce(tool_call_id, 'start-' || event_index) as tool_call_id, tool_name as start_name,
              arguments as start_args, model as start_model, mcp_server_name as start_mcp, turn_index as start_turn,
              parent_tool_call_id as start_parent, "at" as started_at
       from tl where event_type = 'tool.execution_start'
       qualify row_number() over (partition by session_id, coalesce(tool_call_id, 'start-' || event_index)
                                  order by event_index) = 1),
dn as (select session_id, coalesce(tool_call_id, 'done-' || event_index) as tool_call_id, tool_name as done_name,
              arguments as done_args, model as done_model, turn_index as done_turn, parent_tool_call_id as done_parent,
              success as is_success, error_message, result_chars, result_md5, result_numbered, "at" as completed_at,
              case when result_chars is not null then _source_path end as result_source_path,
              case when result_chars is not null then _source_line end as result_source_line
       from tl where event_type = 'tool.execution_complete'
       qualify row_number() over (partition by session_id, coalesce(tool_call_id, 'done-' || event_index)
                                  order by event_index desc) = 1),
k as (select session_id, tool_call_id from req union select session_id, tool_call_id from st
      union select session_id, tool_call_id from dn)
select k.session_id, k.tool_call_id, coalesce(req_turn, start_turn, done_turn) as turn_index,
       coalesce(start_name, req_name, done_name) as tool_name, coalesce(start_mcp, req_mcp) as mcp_server_name,
       coalesce(start_args, req_args, done_args) as arguments, is_success, error_message, result_chars, result_md5,
       result_numbered, coalesce(req_model, start_model, done_model) as model,
       coalesce(start_parent, done_parent) as parent_tool_call_id, requested_at,
       coalesce(started_at, requested_at) as started_at, completed_at, result_source_path, result_source_line,
       date_diff('millisecond', coalesce(started_at, requested_at), completed_at) as duration_ms
from k left join req using (session_id, tool_call_id) left join st using (session_id, tool_call_id)
left join dn using (session_id, tool_call_id)
order by session_id, started_at nulls last, tool_call_id""",
    "turns": """
create temp table turns as
with users as (select session_id, turn_index, content as user_message, "at" as started_at, interaction_id, source_kind
               from ev where is_prompt and turn_index is not null),
ans as (select session_id, turn_index,
               string_agg(content, chr(10) || chr(10) order by event_index) filter (where trim(content) <> '')
                 as assistant_response,
               count(*) as n_assistant_messages,
               case when count(output_tokens) > 0 then sum(output_tokens) end as output_tokens
        from ev where event_type = 'assistant.message' and turn_index is not null group by all),
ends as (select session_id, turn_index, max("at") as ended_at,
                arg_max(eff_model, event_index) filter (where event_type = 'assistant.message'
                                                        and eff_model is not null) as model,
                arg_min(sel_model, event_index) filter (where is_prompt) as selected_model,
                count(*) filter (where event_type = 'user.message' and not is_prompt) as n_continuations,
                coalesce(arg_max(case when event_type = 'session.error' then 'error' when event_type = 'abort'
                                      then 'cancelled' when event_type = 'assistant.message' then 'ok' end,
                                 event_index)
                         filter (where event_type in ('session.error', 'abort', 'assistant.message')), 'ok') as status
         from ev where turn_index is not null group by all),
te as (select session_id, turn_index, max("at") as tools_end from tl where turn_index is not null group by all),
nc as (select session_id, turn_index, count(*) as n_tool_calls from calls where turn_index is not null group by all)
select u.*, a.assistant_response, coalesce(a.n_assistant_messages, 0) as n_assistant_messages, a.output_tokens,
       greatest(e.ended_at, te.tools_end) as ended_at, e.model, e.selected_model,
       coalesce(e.n_continuations, 0) as n_continuations, e.status, coalesce(nc.n_tool_calls, 0) as n_tool_calls
from users u left join ans a using (session_id, turn_index) left join ends e using (session_id, turn_index)
left join te using (session_id, turn_index) left join nc using (session_id, turn_index)
order by session_id, turn_index""",
    "ctx": """
create temp table ctx as
select session_id, arg_min(json_extract_string(extra, '$.copilotVersion'), event_index) as copilot_version,
       arg_min(json_extract_string(extra, '$.context.cwd'), event_index) as ev_cwd,
       arg_min(json_extract_string(extra, '$.context.gitRoot'), event_index) as ev_git_root,
       arg_min(json_extract_string(extra, '$.context.branch'), event_index) as ev_branch,
       arg_min(json_extract_string(extra, '$.context.repository'), event_index) as ev_repository,
       arg_min(try_cast(json_extract_string(extra, '$.startTime') as timestamp), event_index) as ev_start_time,
       arg_min(json_extract_string(extra, '$.producer'), event_index) as producer
from ev where event_type = 'session.start' group by all""",
}

# what is compared with the star's rows, of the CLI logs' sessions
_CALL_COLUMNS = ("session_id, tool_call_id, turn_index, tool_name, mcp_server_name, arguments, is_success, "
                 "error_message, result_chars, result_md5, model, parent_tool_call_id, requested_at::timestamp, "
                 "started_at::timestamp, completed_at::timestamp, duration_ms, result_source_path, "
                 "result_source_line")
_TURN_COLUMNS = ("session_id, turn_index, user_message, started_at::timestamp, interaction_id, assistant_response, "
                 "n_assistant_messages, output_tokens, ended_at::timestamp, model, selected_model, n_continuations, "
                 "status, n_tool_calls")
# the sessions read from CLI logs alone (no store rows, chats or other logs)
_CLI_SESSIONS = """(select session_id from stg_events where session_id is not null group by session_id
                    having bool_and(source_kind = 'events')
                    except select session_id from stg_store_turns)"""


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def sql_core(con: duckdb.DuckDBPyConnection) -> None:
    """The core in temp tables ev, tl, calls, turns and ctx (dropped first)."""
    for name in reversed(CORE_SQL):
        con.execute(f"drop table if exists {name}")
    for sql in CORE_SQL.values():
        con.execute(sql)


def polars_core(con: duckdb.DuckDBPyConnection) -> None:
    """Every session's staged rows pulled as an ingest's star pulls them, batch by batch, and its core built in
    polars (``transform.star.turns_and_calls`` and the start context)."""
    from pipeline.load import star as load_star
    from pipeline.transform import star
    from pipeline.warehouse import key_table

    sessions = [r[0] for r in con.execute("select distinct session_id from stg_events where session_id is not null "
                                          "order by 1").fetchall()]
    present = con.sql("select source_path from _source_files where is_present").pl()["source_path"]
    batches, spans = load_star._batches(con, sessions, key_table(con, "_core_sessions", sessions))
    pulls = load_star._pulls()
    for batch in batches:
        stg = load_star.pull_batch(con, load_star.batch_queries(con, pulls, batch, spans))
        ev, _tools, _turns, _calls = star.turns_and_calls(stg, present)
        star._start_context(ev)


def differences(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, int]]:
    """Of the CLI logs' sessions, the rows of the SQL core's tool calls and turns that are not among the star's,
    and the star's that are not among the SQL's (EXCEPT ALL both ways)."""
    out = {}
    for mine, theirs, cols in (("calls", "fct_tool_calls", _CALL_COLUMNS), ("turns", "fct_turns", _TURN_COLUMNS)):
        a, b = (f"select {cols} from {t} where session_id in {_CLI_SESSIONS}" for t in (mine, theirs))
        out[theirs] = tuple(con.execute(f"select count(*) from ({x} except all {y})").fetchone()[0]
                            for x, y in ((a, b), (b, a)))
    return out


def _timed(step: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), _cpu()
    step()
    return time.perf_counter() - wall, _cpu() - cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.star_sql", description=__doc__.split("\n\n")[0])
    ap.add_argument("warehouse", help="an ingested warehouse (it is read, never written)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    if not Path(args.warehouse).is_file():
        print(f"star_sql: {args.warehouse}: no such warehouse (run `python -m pipeline ingest` first)", file=sys.stderr)
        return 2
    try:
        return _measure(duckdb.connect(args.warehouse, read_only=True), args.rounds)
    except duckdb.Error as e:  # another process writing it, or a file that is no warehouse of this version
        print(f"star_sql: {args.warehouse}: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2


def _measure(con: duckdb.DuckDBPyConnection, rounds: int) -> int:
    """Compare, print, time (``main``); 0 when the rows are the same."""
    sql_core(con)
    n_calls, n_turns = (con.execute(f"select count(*) from {t}").fetchone()[0] for t in ("calls", "turns"))
    diff = differences(con)
    cli = con.execute(f"select count(*) from {_CLI_SESSIONS}").fetchone()[0]
    print(f"{cli} sessions of CLI logs alone; SQL core {n_calls:,} tool calls and {n_turns:,} turns in all")
    for table, (extra, missing) in diff.items():
        print(f"  {table}: {extra} rows of the SQL core not in the star, {missing} of the star not in the SQL core")
    import pipeline.load.builder  # noqa: F401 - the polars side's imports (polars with them): not its build's time
    import pipeline.transform.star  # noqa: F401

    times: dict[str, list[tuple[float, float]]] = {"polars (pull + build)": [], "SQL": []}
    for k in range(rounds):
        times["polars (pull + build)"].append(_timed(lambda: polars_core(con)))
        times["SQL"].append(_timed(lambda: sql_core(con)))
        print(f"round {k + 1}: " + ", ".join(f"{side} {w[-1][0]:.2f} s, {w[-1][1]:.2f} CPU-s"
                                               for side, w in times.items()), flush=True)
    if rounds:
        (pw, pc), (sw, sc) = ((statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
                              for v in times.values())
        print(f"median: polars {pw:.2f} s, {pc:.2f} CPU-s; SQL {sw:.2f} s, {sc:.2f} CPU-s; "
              f"SQL / polars {sw / pw:.2f}x wall, {sc / pc:.2f}x CPU")
    return 0 if all(d == (0, 0) for d in diff.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
