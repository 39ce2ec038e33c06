"""Files written by real Copilot installs (../shared/real-samples); skipped when absent."""

import shutil

from pipeline.ingest import ingest

from .conftest import real, rows

VIBE = ("Mai0313-VibeCodingTracker",)
LANTERN = ("WildChildForLife-lantern", "fixtures", "copilot-home")


def _home_with_events(tmp_path, src, sid="96ef38f0-9d09-45c3-8124-6448c36090ed"):
    home = tmp_path / "home"
    (home / "session-state" / sid).mkdir(parents=True)
    shutil.copyfile(src, home / "session-state" / sid / "events.jsonl")
    return home


def test_vibecodingtracker_cli_1_0_34_log(tmp_path):
    home = _home_with_events(tmp_path, real(*VIBE, "tests", "fixtures", "sessions", "copilot.jsonl"))
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select n_turns, n_tool_calls, n_failed_tool_calls, cwd, repository, branch, copilot_version "
                    "from dim_sessions") == [
        (2, 13, 0, "/home/wei/repo/VibeCodingTracker", "Mai0313/VibeCodingTracker",
         "refactor/gemini-copilot-new-formats", "1.0.34")]
    assert rows(wh, "select model, requests, input_tokens, output_tokens, cache_read_tokens, usage_source "
                    "from fct_usage") == [("claude-sonnet-4.6", 6, 186809, 2848, 151738, "shutdown")]
    assert rows(wh, "select count(*), count(completed_at), bool_and(is_success) from fct_tool_calls") == [
        (13, 13, True)]
    assert rows(wh, "select tool_name, count(*) from fct_tool_calls group by 1 order by 1") == [
        ("bash", 2), ("glob", 1), ("report_intent", 1), ("task_complete", 1), ("view", 4),
        ("web_fetch", 1), ("web_search", 3)]
    # the project's own files: Cargo.toml viewed; folder views are not file touches
    assert rows(wh, "select f.path, t.action from fct_file_touches t join dim_files f using (file_id)") == [
        ("Cargo.toml", "view")]
    assert rows(wh, "select count(*) from stg_events where extra like '%transformedContent%'") == [(0,)]


def test_the_same_session_captured_earlier_then_later_is_reread_not_appended(tmp_path):
    sid = "96ef38f0-9d09-45c3-8124-6448c36090ed"
    home = _home_with_events(tmp_path, real(*VIBE, "examples_at_f64d3c6", "test_conversation_copilot.jsonl"))
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select n_tool_calls from dim_sessions") == [(11,)]
    # the later capture inserts events in the middle: not an append, so the file is read whole again
    shutil.copyfile(real(*VIBE, "tests", "fixtures", "sessions", "copilot.jsonl"),
                    home / "session-state" / sid / "events.jsonl")
    ingest(wh, [home])
    assert rows(wh, "select n_turns, n_tool_calls from dim_sessions") == [(2, 13)]
    assert rows(wh, "select count(*), count(distinct _source_line) from stg_events") == [(55, 55)]


def test_legacy_history_session_state_timeline(tmp_path):
    src = real(*VIBE, "examples_at_bcec23f", "test_conversation_copilot.json")
    home = tmp_path / "home"
    (home / "history-session-state").mkdir(parents=True)
    shutil.copyfile(src, home / "history-session-state" /
                    "session_0b2a81da-02cf-4cbb-ae14-07c597b84f4e_1760187292206.json")
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select session_id, n_turns, n_tool_calls, sources from dim_sessions") == [
        ("0b2a81da-02cf-4cbb-ae14-07c597b84f4e", 1, 15, ["history_json"])]
    assert rows(wh, "select action, count(*) from fct_file_touches group by 1 order by 1") == [
        ("create", 1), ("edit", 3), ("view", 3)]


def test_lantern_cli_1_0_78_session_folders(tmp_path):
    home = tmp_path / "home"
    shutil.copytree(real(*LANTERN), home)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select count(*), sum(n_turns), min(n_turns), max(n_turns) from dim_sessions") == [(4, 4, 1, 1)]
    assert rows(wh, "select title, n_tool_calls, n_failed_tool_calls from dim_sessions "
                    "where n_failed_tool_calls > 0") == [
        ("In src/orders.py make average_item_price return 0 when the cart has no items.", 2, 2)]
    assert rows(wh, "select distinct error_message from fct_tool_calls where not is_success") == [
        ('"path": Required',)]
    assert rows(wh, "select distinct model, usage_source from fct_usage") == [("qwen3:0.6b", "shutdown")]
    assert rows(wh, "select f.path from dim_files f") == [("src/orders.py",)]
    assert rows(wh, "select count(*) from dim_projects") == [(1,)]
