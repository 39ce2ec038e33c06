"""VS Code agent debug logs (extract/debug_log.py): each model call's exact cost, a sub-agent's under its parent
session, joined to the chat session of the same id without counting a request twice. The logs are built here
in the format of Copilot Chat 0.66-0.68 (more-sources.md section 2), with made-up values; the real 0.45 stubs
are in real-samples-new and make no session."""

import json
from datetime import datetime, timezone

import pytest

from pipeline.extract.base import Context, Source
from pipeline.extract.debug_log import read_debug_log
from pipeline.ingest import ingest
from pipeline.redact import Redactor

from .conftest import REAL_NEW, rows

SID = "11111111-2222-4333-8444-555555555555"
T0 = 1790000000000  # ms


def line(kind: str, ts: int, span: str, parent: str | None = None, dur: int = 0, name: str | None = None,
         **attrs) -> str:
    obj = {"ts": ts, "dur": dur, "sid": SID, "type": kind, "name": name or kind, "spanId": span, "status": "ok",
           "attrs": attrs}
    if parent:
        obj["parentSpanId"] = parent
    return json.dumps(obj)


def call(ts: int, span: str, model: str, inp: int, out: int, cached: int, nano: int, debug: str = "panel/editAgent",
         dur: int = 2000, ttft: int = 900) -> str:
    return line("llm_request", ts, span, "0000000000000001", dur, f"chat:{model}", model=model, debugName=debug,
                inputTokens=inp, outputTokens=out, cachedTokens=cached, ttft=ttft, copilotUsageNanoAiu=nano)


def debug_folder(user, sid=SID, with_child=True, extra_lines=()):
    folder = user / "workspaceStorage" / "h1" / "GitHub.copilot-chat" / "debug-logs" / sid
    folder.mkdir(parents=True)
    main = [json.dumps({"v": 1, "ts": T0, "dur": 0, "sid": sid, "type": "session_start", "name": "session_start",
                        "spanId": f"session-start-{sid}", "status": "ok",
                        "attrs": {"copilotVersion": "0.68.0", "vscodeVersion": "1.140.0"}}),
            line("user_message", T0 + 1, "0000000000000001"),
            call(T0 + 1000, "000000000000000b", "claude-sonnet-4.6", 20000, 100, 0, 5_000_000_000),
            call(T0 + 5000, "0000000000000010", "claude-sonnet-4.6", 24000, 200, 19990, 1_500_000_000),
            call(T0 + 9000, "0000000000000039", "gpt-4o-mini", 1600, 70, 0, 0, debug="backgroundTodoAgent"),
            line("child_session_ref", T0 + 9500, "child-ref-toolu_x", childSessionId="toolu_x",
                 childLogFile="executionSubagent-toolu_x.jsonl", label="executionSubagent"),
            *extra_lines]
    (folder / "main.jsonl").write_text("\n".join(main) + "\n")
    if with_child:
        child = [json.dumps({"v": 1, "ts": T0 + 9501, "dur": 0, "sid": "toolu_x", "type": "session_start",
                             "name": "session_start", "spanId": "session-start-toolu_x", "status": "ok",
                             "attrs": {"copilotVersion": "0.68.0", "parentSessionId": sid,
                                       "label": "executionSubagent"}}),
                 call(T0 + 9600, "000000000000000b", "gpt-5.6-luna", 2200, 80, 0, 66_000_000,
                      debug="executionSubagentTool")]
        (folder / "executionSubagent-toolu_x.jsonl").write_text("\n".join(child) + "\n")
    (folder / "models.json").write_text(json.dumps([
        {"id": "claude-sonnet-4.6", "billing": {"is_premium": True, "multiplier": 1}},
        {"id": "gpt-4o-mini", "billing": {"is_premium": False, "multiplier": 0}}]))
    return folder


def chat_session(user, sid=SID):
    chats = user / "workspaceStorage" / "h1" / "chatSessions"
    chats.mkdir(parents=True)
    (user / "workspaceStorage" / "h1" / "workspace.json").write_text('{"folder": "file:///home/dev/api"}')
    (chats / f"{sid}.json").write_text(json.dumps({"version": 3, "sessionId": sid, "creationDate": T0, "requests": [
        {"requestId": "r1", "timestamp": T0 + 1, "message": {"text": "fix the failing test"},
         "response": [{"value": "Fixed."}], "modelId": "copilot/claude-sonnet-4.6",
         "result": {"timings": {"totalElapsed": 9000}, "metadata": {"promptTokens": 44000, "outputTokens": 300}}}]}))


def test_a_debug_log_gives_each_model_call_with_its_logged_cost(tmp_path):
    user = tmp_path / "User"
    folder = debug_folder(user)
    res = read_debug_log(Source(str(folder), "debug_log", SID, str(user), "/home/dev/api"),
                         Context(run_id="r", redact=Redactor()), None)
    assert res.rejects == []
    got = [(r["model"], r["debug_name"], r["input_tokens"], r["cache_read_tokens"], r["output_tokens"], r["nano_aiu"],
            r["ttft_ms"], r["is_subagent"], r["agent"], r["request_multiplier"])
           for r in res.rows["stg_debug_requests"]]
    assert got == [
        ("claude-sonnet-4.6", "panel/editAgent", 20000, 0, 100, 5_000_000_000, 900, False, None, 1.0),
        ("claude-sonnet-4.6", "panel/editAgent", 24000, 19990, 200, 1_500_000_000, 900, False, None, 1.0),
        ("gpt-4o-mini", "backgroundTodoAgent", 1600, 0, 70, 0, 900, False, None, 0.0),
        ("gpt-5.6-luna", "executionSubagentTool", 2200, 0, 80, 66_000_000, 900, True, "executionSubagent", None)]
    assert {r["session_id"] for r in res.rows["stg_debug_requests"]} == {SID}
    first = datetime.fromtimestamp((T0 + 1000) / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert res.rows["stg_session_meta"][0]["created_at"] == first  # the first call's time


def test_debug_log_calls_replace_the_chat_sessions_own_figures_and_cost_is_logged(tmp_path):
    user = tmp_path / "User"
    debug_folder(user)
    chat_session(user)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [], [user])
    assert rows(wh, "select session_id, client, n_turns, cwd from dim_sessions") == [
        (SID, "vscode", 1, "/home/dev/api")]
    assert rows(wh, "select sources from dim_sessions")[0][0] == ["chat_session", "vscode_chat", "vscode_debug_log"]
    # the four calls, not the chat session's one request: nothing counted twice
    assert rows(wh, "select source, count(*), sum(nano_aiu), count(ttft_ms), count(*) filter (where is_subagent) "
                    "from fct_requests where session_id = ? group by 1", [SID]) == [
        ("debug_log", 4, 6_566_000_000, 4, 1)]
    legs = rows(wh, "select model, requests, input_tokens, cache_read_tokens, output_tokens, nano_aiu, cost_source, "
                    "token_source, premium_requests from fct_usage_legs order by model")
    assert [tuple(x if not hasattr(x, "as_tuple") else float(x) for x in leg) for leg in legs] == [
        # premium requests: the chat session's (it names no multiplier here: unknown), 0 for a free model
        ("claude-sonnet-4.6", 2, 44000, 19990, 300, 6_500_000_000, "logged", "debug_log", None),
        ("gpt-4o-mini", 1, 1600, 0, 70, 0, "logged", "debug_log", 0.0),
        ("gpt-5.6-luna", 1, 2200, 0, 80, 66_000_000, "logged", "debug_log", None)]
    assert float(rows(wh, "select sum(ai_credits) from fct_usage where session_id = ?", [SID])[0][0]) == 6.566
    # the calls are placed in the prompt they answered, each with its agent and its logged cost
    assert rows(wh, "select distinct turn_index from fct_requests") == [(0,)]
    assert [(a, n, c, float(x)) for a, n, c, x in rows(
        wh, "select agent, count(*), min(cost_source), sum(ai_credits) from fct_requests group by 1 order by 1")] == [
        ("executionSubagent", 1, "logged", 0.066), ("main", 3, "logged", 6.5)]


def test_a_debug_log_alone_is_a_session_and_a_stub_is_none(tmp_path):
    user = tmp_path / "User"
    debug_folder(user, with_child=False)
    stub = user / "workspaceStorage" / "h1" / "GitHub.copilot-chat" / "debug-logs" / "stub-session"
    stub.mkdir()
    (stub / "main.jsonl").write_text(json.dumps({"ts": T0, "type": "session_start", "sid": "stub-session",
                                                 "attrs": {"copilotVersion": "0.45.1"}}) + "\n")
    wh = tmp_path / "w.duckdb"
    ingest(wh, [], [user])
    assert rows(wh, "select session_id, client, started_at is not null, ended_at > started_at, models "
                    "from dim_sessions") == [(SID, "vscode", True, True, ["claude-sonnet-4.6", "gpt-4o-mini"])]


@pytest.mark.parametrize("bad, reason", [
    ('{"ts": "soon", "type": "llm_request", "spanId": "x", "attrs": {"model": "m", "inputTokens": 1e30}}',
     "request kept; inputTokens"),
    ("not json at all", "not valid JSON"),
    ('[1, 2]', "not an object"),
])
def test_a_damaged_line_is_one_reject_and_the_rest_is_read(tmp_path, bad, reason):
    user = tmp_path / "User"
    folder = debug_folder(user, with_child=False, extra_lines=[bad])
    res = read_debug_log(Source(str(folder), "debug_log", SID, str(user), None), Context(run_id="r", redact=Redactor()),
                         None)
    assert len(res.rejects) == 1 and reason in res.rejects[0]["reason"], res.rejects
    assert sum(r["nano_aiu"] or 0 for r in res.rows["stg_debug_requests"]) == 6_500_000_000


def test_the_real_0_45_debug_logs_are_stubs_and_make_no_session(tmp_path):
    users = sorted(REAL_NEW.glob("*/vscode-user")) if REAL_NEW.is_dir() else []
    logs = [u for u in users if list(u.glob("workspaceStorage/*/GitHub.copilot-chat/debug-logs/*/main.jsonl"))]
    if not logs:
        pytest.skip("no real debug logs beside the checkout")
    for user in logs:
        folders = list(user.glob("workspaceStorage/*/GitHub.copilot-chat/debug-logs/*"))
        for folder in folders:
            res = read_debug_log(Source(str(folder), "debug_log", folder.name, str(user), None),
                                 Context(run_id="r", redact=Redactor()), None)
            kinds = {json.loads(x)["type"] for f in folder.glob("*.jsonl") for x in f.read_text().splitlines() if x}
            assert kinds == {"session_start"} and res.rejects == [] and "stg_debug_requests" not in res.rows
