"""VS Code Copilot Chat: discovery, chat sessions (flat and mutation log), transcripts, memories,
the chat index, and one row per conversation across sources."""

import base64
import json
import shutil

import pytest

from pipeline.extract.base import Context, ReadResult, Source
from pipeline.extract.vscode import (
    chat_title,
    default_vscode_users,
    discover_vscode_user,
    display_model,
    read_chat_session,
    replay_mutation_log,
    request_models,
    request_status,
    result_text,
    session_from_memory_dir,
    workspace_folder,
)
from pipeline.ingest import ingest
from pipeline.redact import Redactor

from .conftest import REPO, real, rows

SAMPLE_USER = REPO / "data" / "sample" / "vscode-user"


def ctx():
    return Context(run_id="r1", redact=Redactor())


def log_bytes(*entries) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in entries).encode()


def test_mutation_log_replays_set_push_truncate_and_delete(tmp_path):
    res = ReadResult()
    state = replay_mutation_log(log_bytes(
        {"kind": 0, "v": {"sessionId": "s", "requests": [], "inputState": {"x": 1}}},
        {"kind": 2, "k": ["requests"], "v": [{"requestId": "a"}, {"requestId": "b"}]},
        {"kind": 1, "k": ["requests", 1, "response"], "v": [{"value": "hi"}]},
        {"kind": 2, "k": ["requests"], "v": [{"requestId": "c"}], "i": 1},
        {"kind": 1, "k": ["customTitle"], "v": "T"},
        {"kind": 3, "k": ["inputState"]},
    ), "p", res, ctx())
    assert state == {"sessionId": "s", "requests": [{"requestId": "a"}, {"requestId": "c"}], "customTitle": "T"}
    assert res.rejects == []


def test_mutation_log_without_its_snapshot_line_is_rejected(tmp_path):
    res = ReadResult()
    assert replay_mutation_log(log_bytes({"kind": 1, "k": ["customTitle"], "v": "x"}), "p", res, ctx()) is None
    assert [(r["position"], r["reason"]) for r in res.rejects] == [
        ("line 1 @ byte 0", "chat session log is missing its initial snapshot (kind 0) line; not replayed")]


def test_a_damaged_line_inside_a_mutation_log_is_rejected_and_replay_goes_on():
    res = ReadResult()
    data = log_bytes({"kind": 0, "v": {"requests": []}}) + b"{broken\n" + log_bytes(
        {"kind": 1, "k": ["customTitle"], "v": "kept"}, {"kind": 1, "k": ["requests", 5, "x"], "v": 1})
    state = replay_mutation_log(b"\xef\xbb\xbf" + data, "p", res, ctx())
    assert state == {"requests": [], "customTitle": "kept"}
    assert [r["reason"].split(":")[0] for r in res.rejects] == ["line is not valid JSON",
                                                                "mutation could not be applied"]


def test_workspace_json_shapes(tmp_path):
    # a local folder as a path (dim_sessions.cwd), a remote one as its URI
    cases = {'{"folder": "file:///c%3A/Users/me/app"}': "c:/Users/me/app",
             '{"folder": "file:///Users/me/my%20app"}': "/Users/me/my app",
             '{"configuration": "file:///home/me/ws/all.code-workspace"}': "/home/me/ws",
             '{"workspace": {"configPath": "file:///w/x.code-workspace"}}': "/w",
             '{"folder": "vscode-remote://wsl%2Bubuntu/home/me/app"}': "vscode-remote://wsl%2Bubuntu/home/me/app"}
    for i, (text, want) in enumerate(cases.items()):
        d = tmp_path / str(i)
        d.mkdir()
        (d / "workspace.json").write_text(text)
        assert workspace_folder(d) == want


def test_memory_folder_names_decode_to_session_ids():
    sid = "f56f201a-672e-4cc5-ada9-4736258cc586"
    name = base64.urlsafe_b64encode(sid.encode()).decode().rstrip("=")
    assert session_from_memory_dir(name) == sid
    assert session_from_memory_dir("repo") is None


def test_default_user_folders_on_every_platform(tmp_path):
    home = tmp_path / "home"
    made = [home / ".config" / "Code" / "User", home / ".config" / "VSCodium" / "User",
            home / "Library" / "Application Support" / "Code - Insiders" / "User",
            home / ".vscode-server" / "data" / "User", tmp_path / "appdata" / "Code" / "User",
            tmp_path / "portable" / "user-data" / "User"]
    for m in made:
        m.mkdir(parents=True)
    found = default_vscode_users({"APPDATA": str(tmp_path / "appdata"), "VSCODE_PORTABLE": str(tmp_path / "portable")},
                                 home=home)
    assert sorted(map(str, found)) == sorted(map(str, made))


def test_discovery_of_the_sample_user_folder():
    kinds = sorted({s.kind for s in discover_vscode_user(SAMPLE_USER)})
    assert kinds == ["chat_session", "transcript", "vscode_memory", "vscode_state_db"]


def test_vscode_sample_ingest(sample_home, tmp_path):
    user = tmp_path / "vscode-user"
    shutil.copytree(SAMPLE_USER, user)
    wh = tmp_path / "w.duckdb"
    summary = ingest(wh, [sample_home], [user])
    assert summary.n_rejects == 3  # the sample's damaged YAML and glued line, and the log without its snapshot
    got = rows(wh, "select title, client, p.name, n_turns, n_tool_calls from dim_sessions "
                   "left join dim_projects p using (project_id) where client = 'vscode' order by started_at")
    assert got == [
        ("Cart checkout spinner", "vscode", "webapp", 1, 2),
        ("Login rate limiting", "vscode", "acme-api", 2, 5),
        ("Token refresh docs", "vscode", "acme-api", 2, 3),
        ("Flaky token refresh test", "vscode", "acme-api", 1, 0),  # title from state.vscdb
        ("List the token refresh endpoints", "vscode", "acme-api", 1, 0),  # transcript only
        ("What is a refresh token?", "vscode", "(no project)", 1, 0),  # empty window
    ]
    # the conversation that is a chat session, a transcript and a CLI folder is one session, counted once
    assert rows(wh, "select sources, n_turns from dim_sessions where title = 'Login rate limiting'") == [
        (["chat_session", "events", "session_index", "transcript", "vscode_chat", "vscode_metadata",
          "vscode_transcript", "workspace_yaml"], 2)]
    assert rows(wh, "select count(*) from fct_turns t join dim_sessions s using (session_id) "
                    "where s.title = 'Login rate limiting'") == [(2,)]
    # edited files and tool arguments become file touches; Windows workspace paths join the webapp project
    assert rows(wh, "select f.path, t.action from fct_file_touches t join dim_files f using (file_id) "
                    "join dim_sessions s using (session_id) where s.title in ('Token refresh docs', "
                    "'Cart checkout spinner') order by 1, 2") == [
        ("docs/auth.md", "edit"), ("docs/token-refresh.md", "create"), ("src/auth/token_service.py", "view"),
        ("src/components/CartView.tsx", "edit"), ("src/components/CartView.tsx", "view")]
    assert rows(wh, "select m.kind, s.title, regexp_extract(m.path, '[^/]+$') from fct_memories m "
                    "left join dim_sessions s using (session_id) where m.kind = 'memory' order by 3") == [
        ("memory", None, "conventions.md"), ("memory", "Token refresh docs", "notes.md"),
        ("memory", None, "preferences.md")]
    assert rows(wh, "select distinct model from fct_turns t join dim_sessions s using (session_id) "
                    "where s.title = 'Token refresh docs'") == [("claude-sonnet-4.5",)]
    # a second run reads nothing again
    again = ingest(wh, [sample_home], [user])
    assert again.n_files_read == 0


def test_splitrail_real_flat_chat_session(tmp_path):
    src = real("Piebald-AI-splitrail", "src", "analyzers", "tests", "source_data", "copilot.json")
    user = tmp_path / "User"
    ws = user / "workspaceStorage" / "abc"
    (ws / "chatSessions").mkdir(parents=True)
    (ws / "workspace.json").write_text('{"folder": "vscode-remote://ssh-remote%2Bsample/home/sample/workspace/splitrail"}')
    shutil.copyfile(src, ws / "chatSessions" / "f56f201a-672e-4cc5-ada9-4736258cc586.json")
    wh = tmp_path / "w.duckdb"
    ingest(wh, [], [user])
    assert rows(wh, "select title, client, n_turns, n_tool_calls, models from dim_sessions") == [
        ("Adding a debug option to the application", "vscode", 3, 13,
         ["generic-copilot/litellm/anthropic/claude-haiku-4.5"])]
    assert rows(wh, "select tool_name, count(*) from fct_tool_calls group by 1 order by 1") == [
        ("grep_search", 5), ("read_file", 8)]
    assert rows(wh, "select path from dim_files order by 1") == [
        ("README.md",), ("src/config.rs",), ("src/main.rs",), ("src/upload.rs",), ("src/utils.rs",),
        ("src/watcher.rs",)]
    assert rows(wh, "select user_message from fct_turns where turn_index = 0") == [
        ("Does this application have a debug option",)]


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_flat_chat_file_with_or_without_bom(tmp_path, bom):
    p = tmp_path / "s1.json"
    p.write_bytes(bom + json.dumps({"version": 3, "sessionId": "s1", "creationDate": 1, "requests": [
        {"requestId": "r", "timestamp": 1000, "message": {"text": "hi"}, "response": "old string response"}]}).encode())
    res = read_chat_session(Source(str(p), "chat_session", "s1"), ctx(), None)
    assert res.rejects == []
    assert [(r["event_type"], r["content"]) for r in res.rows["stg_events"]][1:] == [
        ("user.message", "hi"), ("assistant.message", "old string response"), ("assistant.usage", None)]


def test_multi_root_workspaces_name_their_first_folder_never_vs_code_s(tmp_path):
    user = tmp_path / "Code" / "User"
    storage = user / "workspaceStorage" / "h"
    storage.mkdir(parents=True)
    untitled = "file:///home/a/.config/Code/Workspaces/1773210789679/workspace.json"
    (storage / "workspace.json").write_text(json.dumps({"workspace": untitled}))
    assert workspace_folder(storage, user) is None  # the file is not here: no folder, not Workspaces/<n>
    ws = tmp_path / "Code" / "Workspaces" / "1773210789679"
    ws.mkdir(parents=True)
    (ws / "workspace.json").write_text('{"folders": [{"path": "/srv/api"}, {"path": "/srv/web"}],}')
    assert workspace_folder(storage, user) == "/srv/api"  # found beside the User folder, trailing comma and all
    saved = tmp_path / "proj" / "all.code-workspace"
    saved.parent.mkdir()
    saved.write_text('// comment\n{"folders": [{"path": "app"}]}')
    (storage / "workspace.json").write_text(json.dumps({"workspace": {"configPath": saved.as_uri()}}))
    assert workspace_folder(storage, user) == str(saved.parent / "app")


def test_tool_outputs_failures_and_the_call_left_by_max_tool_calls():
    tree = {"$mid": 20, "content": [{"$mid": 23, "value": {"node": {"children": [
        {"type": 2, "text": "line 1", "lineBreakBefore": False},
        {"type": 2, "text": "line 2", "lineBreakBefore": True}]}}}]}
    assert result_text(tree) == "line 1\nline 2"
    round_calls = [{"toolCalls": [{"id": "call_a__vscode-1", "name": "read_file", "arguments": '{"filePath": "x"}'},
                                  {"id": "call_b__vscode-2", "name": "manage_todo_list", "arguments": "{}"}],
                    "timestamp": 1700000000000}]
    results = {"call_a__vscode-1": {"content": [{"value": "ERROR while calling tool: Invalid input path: x"}]}}
    doc = {"sessionId": "s", "creationDate": 1699999999000, "requests": [
        {"requestId": "r0", "timestamp": 1699999999500, "message": {"text": "do it"}, "modelId": "copilot/auto",
         "response": [{"kind": "toolInvocationSerialized", "toolId": "copilot_readFile", "toolCallId": "uuid-1",
                       "isComplete": True}],
         "result": {"details": "Claude Sonnet 4.5 • 1x", "metadata": {
             "toolCallRounds": round_calls, "toolCallResults": results, "maxToolCallsExceeded": True}}},
        {"requestId": "r1", "timestamp": 1700000001000, "confirmation": "Continue",
         "message": {"text": '@agent Continue: "Continue to iterate?"'}, "modelId": "copilot/auto",
         "response": [{"kind": "toolInvocationSerialized", "toolId": "manage_todo_list", "toolCallId": "uuid-2",
                       "isComplete": True}], "result": {"details": "Claude Sonnet 4.5 • 1x"}}]}
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(doc, f)
    res = read_chat_session(Source(f.name, "chat_session", "s"), ctx(), None)
    done = [r for r in res.rows["stg_events"] if r["event_type"] == "tool.execution_complete"]
    # the failed call and the deferred one, which ran after the click: two calls, never the UUID parts again
    assert [(r["tool_call_id"], r["success"], (r["error_message"] or "")[:24]) for r in done] == [
        ("call_a", False, "ERROR while calling tool"), ("call_b", True, "")]
    users = [r for r in res.rows["stg_events"] if r["event_type"] == "user.message"]
    assert [json.loads(r["extra"] or "{}").get("source") for r in users] == [None, "button"]
    reqs = res.rows["stg_tool_requests"]
    assert {r["ts"] for r in reqs} == {"2023-11-14T22:13:20.000Z"}  # the round's time


def test_models_statuses_and_titles_of_chat_requests():
    assert display_model("Raptor mini (Preview)") == "raptor-mini"
    assert display_model("GPT-5.3-Codex") == "gpt-5.3-codex"
    assert request_models({"modelId": "copilot/auto", "result": {"details": "GPT-5.3-Codex • 0.9x"}}) == {
        "selected": "auto", "answered": "gpt-5.3-codex", "multiplier": 0.9}
    assert request_models({"result": {"details": "GPT-4.1 • 0x"}})["answered"] == "gpt-4.1"
    assert request_models({"modelId": "github.copilot-chat/gpt-4.1"})["answered"] == "gpt-4.1"
    assert request_models({"modelId": "copilot/auto", "result": {"metadata": {"resolvedModel": "grok-code-fast-1"}}}
                          )["answered"] == "grok-code-fast-1"
    assert request_models({"modelId": "copilot/auto"})["answered"] is None  # never guessed
    assert request_status({"result": {"errorDetails": {"code": "rateLimited", "message": "m"}}}) == (
        "error", "rateLimited", "m")
    assert request_status({"modelState": {"value": 2}}) == ("cancelled", None, None)
    assert request_status({"response": [{"kind": "warning", "content": {"value": "Chat setup failed."}}]}) == (
        "error", "warning", "Chat setup failed.")
    assert request_status({"response": [{"value": "an answer"}]}) == ("ok", None, None)
    assert chat_title("Sure, please provide the request for which you need a title.") is None
    assert chat_title("Fix the build") == "Fix the build"


def test_an_empty_chat_is_no_session_and_the_summary_says_why_it_is_not_counted(tmp_path):
    from pipeline.cli import main as cli
    user = tmp_path / "User"
    chats = user / "workspaceStorage" / "h" / "chatSessions"
    chats.mkdir(parents=True)
    (chats / "empty.json").write_text(json.dumps({"version": 3, "sessionId": "empty", "requests": []}))
    (chats / "s1.json").write_text(json.dumps({"version": 3, "sessionId": "s1", "creationDate": 1000, "requests": [
        {"requestId": "r", "timestamp": 1000, "message": {"text": "hi"}, "response": [{"value": "hello"}]}]}))
    (chats / "stub.jsonl").write_text(json.dumps({"kind": 0, "v": {"sessionId": "stub", "requests": []}}) + "\n")
    transcripts = user / "workspaceStorage" / "h" / "GitHub.copilot-chat" / "transcripts"
    transcripts.mkdir(parents=True)
    (transcripts / "t-only.jsonl").write_text(json.dumps({"type": "session.start", "data": {"sessionId": "t-only"},
                                                          "id": "a", "timestamp": "2026-01-01T00:00:00Z"}) + "\n")
    wh = tmp_path / "w.duckdb"
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(["ingest", "--vscode-user", str(user), "--warehouse", str(wh)]) == 0
    assert rows(wh, "select session_id from dim_sessions") == [("s1",)]
    assert "1 session rebuilt, 3 ids that are no session (empty chats) left out" in out.getvalue()
    assert "warehouse now: 1 session," in out.getvalue()


def test_tool_outputs_stored_aside_fill_the_calls_that_lack_them(tmp_path):
    # GitHub.copilot-chat/chat-session-resources/<session>/<toolCallId>__vscode-<ms>/content.txt: made-up outputs,
    # one for a call the chat file records no result of, one longer than the cut result it records
    storage = tmp_path / "User" / "workspaceStorage" / "h"
    (storage / "chatSessions").mkdir(parents=True)
    whole = "\n".join(f"{n}. row {n} of the query result" for n in range(1, 400))
    rounds = [{"toolCalls": [{"id": "call_a__vscode-1", "name": "run_in_terminal", "arguments": "{}"},
                             {"id": "call_b__vscode-2", "name": "read_file", "arguments": '{"filePath": "big.sql"}'},
                             {"id": "call_c__vscode-3", "name": "read_file", "arguments": '{"filePath": "x"}'}],
               "timestamp": 1790000000000}]
    results = {"call_b__vscode-2": {"content": [{"value": whole[:500]}]},
               "call_c__vscode-3": {"content": [{"value": "short and whole"}]}}
    doc = {"sessionId": "s9", "creationDate": 1789999999000, "requests": [
        {"requestId": "r0", "timestamp": 1789999999500, "message": {"text": "query it"}, "modelId": "copilot/auto",
         "response": [{"value": "done"}],
         "result": {"metadata": {"toolCallRounds": rounds, "toolCallResults": results}}}]}
    (storage / "chatSessions" / "s9.json").write_text(json.dumps(doc))
    aside = storage / "GitHub.copilot-chat" / "chat-session-resources" / "s9"
    for call, text in (("call_a__vscode-1790000000100", "token: ghp_" + "a" * 36 + "\nall good"),
                       ("call_b__vscode-1790000000200", whole), ("call_c__vscode-1790000000300", "other")):
        (aside / call).mkdir(parents=True)
        (aside / call / "content.txt").write_text(text)
    res = read_chat_session(Source(str(storage / "chatSessions" / "s9.json"), "chat_session", "s9"), ctx(), None)
    done = {r["tool_call_id"]: r for r in res.rows["stg_events"] if r["event_type"] == "tool.execution_complete"}
    # a: none in the chat file -> the stored one, redacted, and the call succeeded
    assert done["call_a"]["success"] is True and "ghp_" not in done["call_a"]["result_head"]
    assert "all good" in done["call_a"]["result_head"]
    # b: the chat file's is cut -> the whole stored one; c: the chat file's is whole -> kept
    assert done["call_b"]["result_chars"] == len(whole)
    assert done["call_c"]["result_head"] == "short and whole"
