"""Hostile inputs: one small odd file per case, each beside good records that must survive it.

``build(root)`` writes a Copilot home and a VS Code User folder holding every case, and returns
what the tests check: per case, the good records (event ids, store rows, ...) that must be kept.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

GOOD = "good-"  # ids of the records every case keeps beside its poison


def _ev(eid: str, etype: str = "user.message", data: dict | None = None, ts: str = "2026-09-01T10:00:00Z") -> bytes:
    return json.dumps({"type": etype, "data": data if data is not None else {"content": f"hello {eid}"},
                       "id": eid, "timestamp": ts}).encode() + b"\n"


def _deep(n: int, leaf="x") -> str:
    return "[" * n + json.dumps(leaf) + "]" * n


# one events.jsonl per case: (name, poison line(s) as bytes, must the poison line be rejected)
def event_cases() -> list[tuple[str, bytes, bool]]:
    msg = {"content": "answer", "toolRequests": [], "model": "m"}
    cases = [
        ("deep-2000", b'{"type":"user.message","id":"p","data":{"content":"x","a":' + _deep(2000).encode() + b"}}\n",
         False),  # kept too: its deepest values cut (with a note), so the parsers manage
        ("deep-500", b'{"type":"user.message","id":"p","data":{"content":"x","a":' + _deep(500).encode() + b"}}\n",
         False),  # kept: parsers manage 500 levels; what is stored is cut at 200 with a marker
        ("int-beyond-int64", b'{"type":"assistant.message","id":"p","data":{"content":"a","outputTokens":'
                             + str(2**70).encode() + b"}}\n", False),
        ("float-1e400", b'{"type":"assistant.message","id":"p","data":{"content":"a","outputTokens":1e400}}\n', False),
        ("nan", b'{"type":"assistant.message","id":"p","data":{"content":"a","outputTokens":NaN}}\n', False),
        ("huge-extra-int", b'{"type":"session.shutdown","id":"p","data":{"modelMetrics":{"m":{"requests":{"count":'
                           + str(2**80).encode() + b'},"usage":{"outputTokens":1e999}}},"totalNanoAiu":-Infinity}}\n',
         False),
        ("function-number", json.dumps({"type": "assistant.message", "id": "p",
                                        "data": dict(msg, toolRequests=[{"function": 5}, "x", 7,
                                                                        {"function": "f", "id": 3}])}).encode() + b"\n",
         False),
        ("tool-requests-dict", json.dumps({"type": "assistant.message", "id": "p",
                                           "data": dict(msg, toolRequests={"a": 1})}).encode() + b"\n", False),
        ("wrong-types", json.dumps({"type": 5, "id": {"a": 1}, "timestamp": [1], "parentId": 2.5, "agentId": True,
                                    "data": {"content": {"x": [1, 2]}, "model": ["m"], "toolCallId": 7,
                                             "success": "true", "result": [1, "a"], "error": 5,
                                             "arguments": "not json {"}}).encode() + b"\n", False),
        ("data-not-object", b'{"type":"assistant.message","id":"p","data":[1,2,3]}\n', False),
        ("lone-surrogate-short", b'{"type":"user.message","id":"p","data":{"content":"a\\ud800b"}}\n', False),
        ("lone-surrogate-long", b'{"type":"user.message","id":"p","data":{"content":"'
                                + b"word " * 2000 + b'\\udfff end"}}\n', False),
        ("invalid-utf8", b'{"type":"user.message","id":"p","data":{"content":"caf\xe9 \xff\xfe"}}\n', False),
        ("timestamp-garbage", json.dumps({"type": "user.message", "id": "p", "timestamp": "99999-99-99T99:99",
                                          "data": {"content": "x"}}).encode() + b"\n", False),
        ("timestamp-epoch-1e30", b'{"type":"user.message","id":"p","timestamp":1e30,"data":{"content":"x"}}\n', False),
        ("not-json", b"this is not json {{{\n", True),
        ("json-array-line", b"[1,2,3]\n", True),
        ("random-bytes", bytes((i * 7919 + 13) % 256 for i in range(4096)).replace(b"\n", b" ") + b"\n", True),
    ]
    return cases


def _session(home: Path, sid: str, body: bytes) -> None:
    folder = home / "session-state" / sid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.jsonl").write_bytes(body)


def _store(path: Path) -> None:
    con = sqlite3.connect(path)
    con.executescript("""
        create table sessions (id text primary key, cwd text, repository text, host_type text, branch text,
            summary text, created_at text, updated_at text);
        create table turns (id integer primary key, session_id text, turn_index integer, user_message text,
            assistant_response text, timestamp text);
        create table checkpoints (id integer primary key, session_id text, checkpoint_number integer, title text,
            overview text, history text, work_done text, technical_details text, important_files text,
            next_steps text, created_at text);
        create table session_refs (id integer primary key, session_id text, ref_type text, ref_value text,
            turn_index integer, created_at text);
        create table assistant_usage_events (id integer primary key, session_id text, model text,
            input_tokens integer, output_tokens integer, total_nano_aiu integer, request_multiplier real,
            created_at text);
    """)
    con.execute("insert into sessions values ('good-store', '/p', 'acme/x', 'github', 'main', 'fine', "
                "'2026-09-01 10:00:00', '2026-09-01 11:00:00')")
    con.execute("insert into sessions values (x'ff6261642d7574663800', '/p', 'acme/x', 'github', 'main', "
                "x'6361ff66e9', '2026-09-01 10:00:00', '2026-09-01 11:00:00')")  # invalid UTF-8 id and text
    con.execute("insert into sessions values (42, null, null, null, null, null, null, null)")  # an integer id
    con.execute("insert into turns values (1, 'good-store', 0, 'good turn', 'ok', '2026-09-01 10:01:00')")
    con.execute("insert into turns values (2, 'good-store', 2147483648, 'turn index beyond int32', 'x', null)")
    con.execute("insert into turns values (3, 'good-store', 1, x'666fff6f', x'e9', x'00ff')")  # invalid UTF-8
    con.execute("insert into turns values (4, 'good-store', 'abc', 'a text turn index', 'x', null)")
    con.execute("insert into checkpoints (session_id, checkpoint_number, title) values "
                "('good-store', 9223372036854775807, 'huge number')")
    con.execute("insert into checkpoints (session_id, checkpoint_number, title) values ('good-store', 1, 'fine')")
    con.execute("insert into session_refs (session_id, ref_type, ref_value) values ('good-store', 'pr', null)")
    con.execute("insert into session_refs (session_id, ref_type, ref_value) values ('good-store', 'pr', '7')")
    con.execute("insert into assistant_usage_events values (1, 'good-store', 'm', 10, 5, 9223372036854775807, "
                "1e308, '2026-09-01 10:02:00')")
    con.execute("insert into assistant_usage_events values (2, 'good-store', 'm', -5, 'lots', 3, 'x', 5)")
    con.commit()
    con.close()


def build(root: Path) -> dict:
    """A Copilot home and a VS Code User folder full of hostile files; returns what must survive."""
    home, user = root / "copilot-home", root / "vscode-user"
    keep: dict[str, list] = {"events": []}
    for name, poison, _rejected in event_cases():
        sid = f"case-{name}"
        before, after = f"{GOOD}{name}-1", f"{GOOD}{name}-2"
        _session(home, sid, _ev(before) + poison + _ev(after, "assistant.message",
                                                       {"content": "kept", "outputTokens": 3}))
        keep["events"] += [before, after]
    # a folder whose name is not valid UTF-8, and one that loops back to itself
    bad = os.fsencode(home / "session-state") + b"/bad-\xff\xfe-name"
    os.makedirs(bad, exist_ok=True)
    with open(bad + b"/events.jsonl", "wb") as fh:
        fh.write(_ev("bad-name-event"))
    loop = home / "session-state" / "case-symlink-loop"
    loop.mkdir(parents=True)
    (loop / "events.jsonl").write_bytes(_ev(f"{GOOD}symlink-1"))
    keep["events"].append(f"{GOOD}symlink-1")
    os.symlink("workspace.yaml", loop / "workspace.yaml")  # points at itself
    # workspace.yaml: an alias bomb, garbage, the wrong shape
    bomb = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
    for i in range(1, 12):
        bomb += f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join([f"*{chr(96 + i)}"] * 9) + "]\n"
    for sid, text in (("case-yaml-bomb", bomb + "name: Bomb\n"), ("case-yaml-garbage", "\x00\xff: [\n"),
                      ("case-yaml-list", "- a\n- b\n")):
        folder = home / "session-state" / sid
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "workspace.yaml").write_text(text, encoding="utf-8", errors="surrogateescape")
        (folder / "events.jsonl").write_bytes(_ev(f"{GOOD}{sid}"))
        keep["events"].append(f"{GOOD}{sid}")
    # vscode.metadata.json with an epoch of 1e30 and wrong types; checkpoints with absurd numbers
    meta = home / "session-state" / "case-metadata"
    meta.mkdir(parents=True)
    (meta / "vscode.metadata.json").write_text(json.dumps({
        "workspaceFolder": {"folderPath": ["x"], "timestamp": 1e30}, "customTitle": {"a": 1},
        "worktreeProperties": "nope", "firstUserMessage": 12}))
    (meta / "events.jsonl").write_bytes(_ev(f"{GOOD}metadata"))
    keep["events"].append(f"{GOOD}metadata")
    cps = meta / "checkpoints"
    cps.mkdir()
    (cps / "99999999999999999999-huge.md").write_text("<overview>huge file number</overview>")
    (cps / "001-fine.md").write_text("<overview>fine</overview>")
    (cps / "a.json").write_text(json.dumps({"checkpoint_number": 2**63 - 1, "title": {"x": 1}, "overview": [1]}))
    (cps / "b.json").write_text(json.dumps({"checkpoint_number": 1.5, "title": "float number"}))
    # legacy history file with wrong types
    hist = home / "history-session-state"
    hist.mkdir(parents=True)
    (hist / "session_case-history_1759669955294.json").write_text(json.dumps({
        "sessionId": "case-history", "startTime": 1e30, "timeline": [
            {"type": "user", "text": "good history prompt", "timestamp": "2025-10-01T10:00:00Z"},
            {"type": "tool_call_completed", "callId": 5, "name": ["x"], "arguments": "x", "result": "ok"},
            "not an object", {"type": "copilot", "text": {"nested": True}}],
        "chatMessages": [{"role": "assistant", "tool_calls": [{"function": "x"}, 5, {"function": 3}]}]}))
    _store(home / "session-store.db")

    # VS Code chat sessions: every field of the wrong type, and a mutation log that breaks the state
    ws = user / "workspaceStorage" / "ws1"
    (ws / "chatSessions").mkdir(parents=True)
    (ws / "workspace.json").write_text('{"folder": "file:///home/dev/app"}')
    good_request = {"requestId": "good-req", "timestamp": 1788000000000, "message": {"text": "good chat prompt"},
                    "response": [{"value": "good answer"}], "modelId": "copilot/gpt-4o"}
    bad_requests = [
        {"requestId": "r1", "timestamp": 1e30, "message": ["x"], "response": 5, "result": "nope"},
        {"requestId": "r2", "timestamp": "soon", "message": {"text": 5}, "response": [5, "a", {"kind": 5}],
         "result": {"timings": "fast", "metadata": [1]}},
        {"requestId": "r3", "response": [{"kind": "inlineReference", "inlineReference": "x"},
                                         {"kind": "toolInvocationSerialized", "invocationMessage": 5}],
         "result": {"metadata": {"toolCallRounds": "x"}}, "editedFileEvents": [{"uri": 5}, "x"]},
        {"requestId": {"id": 1}, "agent": "x", "modelId": 7, "result": {"metadata": {"toolCallRounds": [
            {"toolCalls": [{"id": 5, "name": {"n": 1}, "arguments": [1]}]}, "y"]}}},
        "not a request", 5,
    ]
    (ws / "chatSessions" / "case-chat-types.json").write_text(json.dumps({
        "version": 3, "sessionId": "case-chat-types", "creationDate": 1e30, "customTitle": {"a": 1},
        "lastMessageDate": "x", "requests": [good_request, *bad_requests]}))
    (ws / "chatSessions" / "case-chat-requests-number.json").write_text(json.dumps({
        "version": 3, "sessionId": "case-chat-requests-number", "creationDate": 1, "requests": 5}))
    log = [{"kind": 0, "v": {"version": 3, "sessionId": "case-chat-log", "creationDate": 1788000000000,
                             "requests": [good_request]}},
           {"kind": 1, "k": ["requests"], "v": 5},  # sets requests to a number
           {"kind": 2, "k": ["requests"], "v": [good_request]},  # push onto a number: does not apply
           {"kind": 1, "k": "requests", "v": []}, {"kind": 9}, {"kind": 3, "k": [5, 6]}, "x", 5]
    (ws / "chatSessions" / "case-chat-log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log))
    keep["chat_prompts"] = ["good chat prompt"]
    return keep
