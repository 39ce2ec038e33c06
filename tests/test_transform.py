"""The star build as pure functions of small staging frames (a few rows each): whole rows out."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl

from pipeline.schema import STAGING
from pipeline.transform import star
from pipeline.transform.star import build_star, conform

LOG = "/h/session-state/s1/events.jsonl"


def stg(table: str, rows: list[dict]) -> pl.DataFrame:
    """A staging frame with every declared column (absent ones NULL)."""
    return conform(pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame(), table)


def staging(**tables) -> dict[str, pl.DataFrame]:
    return {t.name: stg(t.name, tables.get(t.name, [])) for t in STAGING}


def ev(i: int, etype: str, **fields) -> dict:
    return {"session_id": "s1", "source_kind": "events", "event_index": i, "event_id": f"e{i}",
            "event_type": etype, "ts": f"2026-09-01T10:00:{i:02d}Z", "_source_path": LOG, **fields}


def utc(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=timezone.utc)


def rows(frame: pl.DataFrame, *cols: str) -> list[tuple]:
    return frame.select(cols).rows()


def test_turns_prompts_answers_and_copilot_nudges():
    out = build_star(staging(stg_events=[
        ev(0, "user.message", content="Fix the parser <current_datetime>x</current_datetime>"),
        ev(1, "assistant.message", content="Looking.", output_tokens=10, model="m1"),
        ev(2, "user.message", content="<system_reminder>keep going</system_reminder>"),  # a nudge: no prompt
        ev(3, "assistant.message", content="Fixed.", output_tokens=5, model="m1"),
        ev(4, "user.message", content="Thanks"),
    ]))
    assert rows(out["fct_turns"], "turn_index", "user_message", "assistant_response", "n_assistant_messages",
                "output_tokens", "n_continuations", "started_at") == [
        (0, "Fix the parser", "Looking.\n\nFixed.", 2, 15, 1, utc("2026-09-01 10:00:00")),
        (1, "Thanks", None, 0, None, 0, utc("2026-09-01 10:00:04")),
    ]
    assert rows(out["dim_sessions"], "session_id", "n_turns", "n_continuations", "n_events", "is_gone") == [
        ("s1", 2, 1, 5, False)]


def test_a_tool_call_is_its_request_start_and_completion():
    args = '{"path": "/r/app/src/a.py"}'
    out = build_star(staging(
        stg_events=[
            ev(0, "session.start", extra='{"context": {"cwd": "/r/app", "gitRoot": "/r/app"}}'),
            ev(1, "user.message", content="read a.py"),
            ev(2, "assistant.message", content="", model="m1"),
            ev(3, "tool.execution_start", tool_call_id="c1", tool_name="view", arguments=args),
            ev(5, "tool.execution_complete", tool_call_id="c1", success=True, result_content="1. x"),
        ],
        stg_tool_requests=[{"session_id": "s1", "event_index": 2, "request_index": 0, "tool_call_id": "c1",
                            "tool_name": "view", "arguments": args, "model": "m1", "_source_path": LOG}]))
    calls = out["fct_tool_calls"]
    assert rows(calls, "tool_call_id", "turn_index", "tool_name", "tool_family", "is_success", "duration_ms",
                "model") == [("c1", 0, "view", "read", True, 2000, "m1")]
    file_id = calls["file_id"][0]
    assert rows(out["fct_file_touches"], "file_id", "action", "n_touches") == [(file_id, "view", 1)]
    assert rows(out["int_session_files"], "session_id", "file_id", "path", "is_in_project") == [
        ("s1", file_id, "src/a.py", True)]
    assert out["fct_turns"]["n_tool_calls"].to_list() == [1]


def test_store_turns_count_only_for_sessions_without_an_event_log():
    out = build_star(staging(
        stg_events=[ev(0, "user.message", content="from the log")],
        stg_store_turns=[{"session_id": "s1", "turn_index": 0, "user_message": "from the store",
                          "ts": "2026-09-01 10:00:00", "_source_path": "/h/session-store.db"},
                         {"session_id": "s2", "turn_index": 3, "user_message": "only in the store",
                          "ts": "2026-09-02 10:00:00", "_source_path": "/h/session-store.db"}]))
    assert rows(out["fct_turns"], "session_id", "turn_index", "user_message", "source_kind") == [
        ("s1", 0, "from the log", "events"), ("s2", 0, "only in the store", "store")]


def test_a_checkpoint_in_the_folder_wins_and_takes_its_time_from_the_store():
    out = build_star(staging(stg_checkpoints=[
        {"session_id": "s1", "source_kind": "store", "checkpoint_number": 1, "title": "store copy",
         "created_at": "2026-09-01 11:00:00", "_source_path": "/h/session-store.db"},
        {"session_id": "s1", "source_kind": "folder_md", "checkpoint_number": 1, "title": "folder copy",
         "_source_path": "/h/session-state/s1/checkpoints"},
    ]))
    assert rows(out["fct_checkpoints"], "checkpoint_number", "title", "source_kind", "created_at") == [
        (1, "folder copy", "folder_md", utc("2026-09-01 11:00:00"))]


def test_store_refs_are_normalized_to_commit_pr_issue():
    out = build_star(staging(stg_store_refs=[
        {"session_id": "s1", "ref_type": "PULL_REQUEST", "ref_value": "7", "_source_path": "/h/db"},
        {"session_id": "s1", "ref_type": " commit", "ref_value": "abc", "_source_path": "/h/db"},
        {"session_id": "s1", "ref_type": "deployment", "ref_value": "x", "_source_path": "/h/db"},  # kept in staging
    ]))
    assert sorted(rows(out["fct_refs"], "ref_type", "ref_value")) == [("commit", "abc"), ("pr", "7")]


def test_a_session_is_gone_when_none_of_its_sources_is_on_disk_and_may_have_no_project():
    data = staging(
        stg_events=[ev(0, "user.message", content="hi")],
        stg_store_usage=[{"row_id": 1, "session_id": "s2", "model": "m1", "output_tokens": 3,
                          "_source_path": "/h/session-store.db"}])
    present = pl.DataFrame({"source_path": ["/h/session-store.db"], "session_id": [None]},
                           schema={"source_path": pl.String, "session_id": pl.String})
    sessions = build_star(data, present=present)["dim_sessions"].sort("session_id")
    nowhere = star._project_key(None, None, None, {})["project_id"]
    # s1's log is gone; s2 is known only from a store usage row: the no-project bucket
    assert rows(sessions, "session_id", "is_gone") == [("s1", True), ("s2", True)]
    assert sessions.filter(pl.col("session_id") == "s2")["project_id"].to_list() == [nowhere]
