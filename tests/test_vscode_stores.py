"""VS Code's own SQLite stores (globalStorage/github.copilot-chat/): its session-store.db, read as the CLI's, and
agent-traces.db (extract/traces.py), whose leaf chat spans are requests with their cost. Made-up databases in the
schemas more-sources.md section 5 gives."""

import sqlite3

from pipeline.ingest import ingest

from . import test_debug_log
from .conftest import rows

SID = test_debug_log.SID


def chat_ext(user):
    folder = user / "globalStorage" / "github.copilot-chat"
    folder.mkdir(parents=True)
    return folder


def traces_db(path, with_debug_calls=False):
    con = sqlite3.connect(path)
    con.executescript("""
        create table spans (span_id text primary key, parent_span_id text, name text, start_time_ms integer,
            end_time_ms integer, operation_name text, conversation_id text, response_model text, request_model text,
            input_tokens integer, output_tokens integer, cached_tokens integer, reasoning_tokens integer,
            tool_name text, tool_call_id text, chat_session_id text, turn_index integer, ttft_ms integer);
        create table span_attributes (span_id text, key text, value text);
    """)
    spans = [("a1", None, "invoke_agent", 1790000000000, 1790000030000, "invoke_agent", SID, None, None, 50000, 500,
              0, 0, None, None, SID, 0, None),
             ("c1", "a1", "chat claude-sonnet-4.6", 1790000001000, 1790000003000, "chat", SID, "claude-sonnet-4.6",
              "claude-sonnet-4.6", 20000, 100, 0, 0, None, None, SID, 0, 900),
             ("c2", "a1", "chat claude-sonnet-4.6", 1790000005000, 1790000007000, "chat", SID, "claude-sonnet-4.6",
              "claude-sonnet-4.6", 24000, 200, 19990, 0, None, None, SID, 0, 800),
             ("t1", "a1", "execute_tool read_file", 1790000004000, 1790000004100, "execute_tool", SID, None, None,
              None, None, None, None, "read_file", "call_1", SID, 0, None)]
    con.executemany("insert into spans values (" + ",".join("?" * 18) + ")", spans)
    con.executemany("insert into span_attributes values (?, ?, ?)", [
        ("a1", "github.copilot.nano_aiu", "6500000000"), ("c1", "github.copilot.nano_aiu", "5000000000"),
        ("c2", "github.copilot.nano_aiu", "1500000000"), ("c1", "gen_ai.prompt", "captured prompt text")])
    con.commit()
    con.close()


def test_agent_traces_give_the_chat_spans_with_their_cost_and_the_agent_span_is_not_counted(tmp_path):
    user = tmp_path / "User"
    test_debug_log.chat_session(user)
    traces_db(chat_ext(user) / "agent-traces.db")
    wh = tmp_path / "w.duckdb"
    ingest(wh, [], [user])
    assert rows(wh, "select source_kind, span_id, nano_aiu, ttft_ms from stg_otel_requests order by span_id") == [
        ("vscode_traces", "c1", 5_000_000_000, 900), ("vscode_traces", "c2", 1_500_000_000, 800)]
    # the two spans replace the chat file's one figure per prompt; the agent span's total is never added
    assert rows(wh, "select token_source, requests, input_tokens, cache_read_tokens, nano_aiu from fct_usage_legs") \
        == [("otel", 2, 44000, 19990, 6_500_000_000)]
    assert "vscode_traces" in rows(wh, "select sources from dim_sessions")[0][0]


def test_a_debug_log_and_traces_of_the_same_calls_count_once(tmp_path):
    user = tmp_path / "User"
    test_debug_log.chat_session(user)
    test_debug_log.debug_folder(user, with_child=False)
    traces_db(chat_ext(user) / "agent-traces.db")
    wh = tmp_path / "w.duckdb"
    ingest(wh, [], [user])
    assert rows(wh, "select token_source, sum(nano_aiu) from fct_usage_legs group by 1") == [
        ("debug_log", 6_500_000_000)]


def test_vscode_s_own_session_store_is_read_as_the_cli_s(tmp_path):
    user = tmp_path / "User"
    con = sqlite3.connect(chat_ext(user) / "session-store.db")
    con.executescript("""
        create table sessions (id text primary key, cwd text, summary text, host_type text, agent_name text,
            created_at text, updated_at text);
        insert into sessions values ('vs1', '/srv/web', 'Refactor the router', 'vscode', 'agent',
            '2026-09-02T09:00:00Z', '2026-09-02T09:30:00Z');
        create table turns (session_id text, turn_index integer, user_message text, assistant_response text,
            timestamp text);
        insert into turns values ('vs1', 0, 'refactor the router', 'Done.', '2026-09-02T09:00:05Z');
    """)
    con.commit()
    con.close()
    wh = tmp_path / "w.duckdb"
    ingest(wh, [], [user])
    assert rows(wh, "select session_id, client, title, cwd, n_turns from dim_sessions") == [
        ("vs1", "vscode", "Refactor the router", "/srv/web", 1)]
