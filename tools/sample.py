"""Writes the small synthetic Copilot home bundled under ``data/sample/`` (``make sample``).

It covers every shape the readers accept: session folders with events.jsonl (resumed legs,
failed tool calls, an unknown event type, reasoning text that must never be stored, a secret
that must be redacted), workspace.yaml in its ``name`` / legacy ``summary`` / quoted forms,
checkpoints as real markdown and as the seed note's JSON, vscode.metadata.json, plan.md and
index.md, a legacy flat ``<id>.jsonl``, a legacy ``history-session-state`` file, damaged lines,
and a ``session-store.db`` in WAL mode whose newest rows exist only in the ``-wal`` file; and a
VS Code ``User`` folder (``vscode-user/``) with flat and mutation-log chat sessions, transcripts,
memories, a chat index in ``state.vscdb``, a damaged log, a BOM, a Windows workspace, an
empty-window chat, and one conversation that is also a CLI session folder and a transcript.

Two projects are planted for the reports: in ``acme-api`` the file ``src/auth/token_service.py``
is the hot file and "token refresh" the topic; in ``webapp`` (a Windows checkout) it is
``src/components/CartView.tsx`` and "cart checkout".
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
import struct
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tools.synthlog import NS, Log, iso, nano_aiu, sid

T0 = datetime(2026, 9, 1, 9, 0, 0, tzinfo=timezone.utc)
FAKE_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a fake token shaped like a real one

ACME = {"cwd": "/home/dev/acme-api", "gitRoot": "/home/dev/acme-api", "branch": "main",
        "repository": "acme/acme-api", "hostType": "github"}
WEB = {"cwd": "C:\\Users\\dev\\webapp", "gitRoot": "C:\\Users\\dev\\webapp", "branch": "feature/cart"}


def view(path: str, body: str = "1. line one\n2. line two") -> tuple:
    return ("view", {"path": path}, True, body)


def edit(path: str) -> tuple:
    return ("edit", {"path": path, "old_str": "a", "new_str": "b"}, True, "File updated.")


def create(path: str) -> tuple:
    return ("create", {"path": path, "file_text": "x"}, True, "Created file.")


def bash(cmd: str, out: str = "ok", ok: bool = True) -> tuple:
    return ("bash", {"command": cmd, "description": "run"}, ok, out)


def write_session(home: Path, name: str, log: Log, workspace: str | None, extra: dict | None = None):
    folder = home / "session-state" / log.session
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.jsonl").write_text(log.text(), encoding="utf-8", newline="\n")
    if workspace is not None:
        (folder / "workspace.yaml").write_text(workspace, encoding="utf-8")
    for rel, content in (extra or {}).items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content, encoding="utf-8")


def acme_sessions(home: Path) -> list[str]:
    ids = []
    tok = "/home/dev/acme-api/src/auth/token_service.py"
    # 1: a resumed session (two legs, two shutdowns), checkpoints in the real markdown shape
    s = sid("acme-1")
    lg = Log(s, T0)
    lg.start(ACME, version="1.0.60")
    lg.prompt("Implement token refresh in the auth token service; refresh tokens must rotate.")
    lg.tools([view(tok), view("src/auth/session.py"), ("report_intent", {"intent": "Reading auth"}, True, "ok")])
    lg.tools([edit(tok), create("/home/dev/acme-api/tests/test_token_refresh.py")],
             "I'll add the refresh flow.")
    lg.tools([bash("pytest tests/test_token_refresh.py", "1 failed", ok=False)])
    lg.answer("Token refresh now rotates refresh tokens; one test still fails on expiry.")
    lg.add("session.compaction_complete", {"success": True, "checkpointNumber": 1,
                                           "checkpointPath": "checkpoints/001-token-refresh-rotation.md"})
    lg.shutdown(T0, 10000, 0.4, nano=True)  # 1.0.60: each shutdown counts its own leg, cost logged
    leg2 = lg.t + timedelta(hours=2)
    lg.resume(leg2, "claude-sonnet-4.6")
    lg.prompt("Fix the failing token refresh expiry test.")
    lg.tools([view(tok), edit(tok), bash("pytest -q", "3 passed")])
    lg.answer("Fixed: the expiry check used local time. All token refresh tests pass.")
    lg.add("session.shutdown_summary_v2", {"note": "an event type from a future CLI version"})
    lg.shutdown(leg2, 10000, 0.4, nano=True)
    cp1 = ("# Token refresh rotation\n\n<overview>\nAdded token refresh with rotating refresh tokens to the auth "
           "token service.\n</overview>\n<history>\n1. Read token_service.py\n2. Added refresh flow\n</history>\n"
           "<work_done>\n- refresh() rotates tokens\n</work_done>\n<technical_details>\nRefresh tokens are "
           "single-use.\n</technical_details>\n<important_files>\n- src/auth/token_service.py\n"
           "- tests/test_token_refresh.py\n</important_files>\n<next_steps>\n- Fix expiry test\n"
           "- Add token revocation endpoint\n</next_steps>\n")
    index = ("# Checkpoint History\n\n| # | Title | File |\n|---|-------|------|\n"
             "| 1 | Token refresh rotation | 001-token-refresh-rotation.md |\n")
    write_session(home, "acme-1", lg,
                  f"id: {s}\ncwd: /home/dev/acme-api\ngit_root: /home/dev/acme-api\nrepository: acme/acme-api\n"
                  "branch: main\nclient_name: github/cli\nname: Token refresh rotation\nuser_named: true\n"
                  "summary_count: 1\ncreated_at: 2026-09-01T09:00:00.000Z\nupdated_at: 2026-09-01T11:10:00.000Z\n",
                  {"checkpoints/index.md": index, "checkpoints/001-token-refresh-rotation.md": cp1,
                   "plan.md": "# Plan\n\n1. Token refresh with rotation\n2. Revocation endpoint\n"})
    ids.append(s)

    # 2: legacy `summary` block scalar, a secret pasted in a prompt, checkpoints in the seed note's JSON shape
    s = sid("acme-2")
    lg = Log(s, T0 + timedelta(days=3))
    lg.start(ACME, version="0.0.409")
    lg.prompt(f"The token refresh fails in CI with GITHUB_TOKEN={FAKE_TOKEN}; why does the refresh token expire?")
    lg.tools([view(tok), ("grep", {"pattern": "refresh", "path": "src"}, True, "src/auth/token_service.py:3")])
    lg.tools([edit(tok)], "The refresh token TTL is read in seconds but stored in ms.")
    lg.answer("Fixed the TTL unit in token refresh. Rotate that token: it was pasted into the chat.")
    lg.shutdown(lg.t, 4500)  # 0.0.409: tokens but no cost logged (estimated from the price table)
    cp_json = {"title": "Token refresh TTL units", "overview": "Token refresh TTL read in wrong unit.",
               "history": "1. Investigated CI failure", "work_done": "- TTL in seconds",
               "technical_details": "TTL stored in ms", "important_files": "- src/auth/token_service.py",
               "next_steps": "- Add a regression test for token refresh TTL"}
    write_session(home, "acme-2", lg,
                  f"id: {s}\ncwd: /home/dev/acme-api\nsummary: |-\n  Token refresh TTL bug\n  found in CI\n"
                  "summary_count: 1\ncreated_at: 2026-09-04T09:00:00.000Z\nupdated_at: 2026-09-04T09:30:00.000Z\n",
                  {f"checkpoints/{uuid.uuid5(NS, 'cp-acme-2')}.json": json.dumps(cp_json, indent=2)})
    ids.append(s)

    # 3: a session driven from VS Code: customTitle wins; quoted YAML values
    # CLI 1.0.78 on auto model selection: shutdowns count every leg so far, usage checkpoints carry the
    # running cost, the second leg is killed (no shutdown), and autopilot nudges with an empty message
    s = sid("acme-3")
    lg = Log(s, T0 + timedelta(days=10))
    lg.start(ACME)
    lg.events[-1]["data"]["newModel"] = "auto"
    lg.events[0]["data"]["selectedModel"] = "auto"
    lg.add("session.auto_mode_resolved", {"chosenModel": "claude-sonnet-4.6"}, 0.1)
    lg.prompt("Add rate limiting to the login endpoint and reuse the token service.")
    lg.tools([view("src/api/login.py"), view(tok), edit("src/api/login.py")])
    lg.answer("Rate limiting added to login.")
    spent = 0

    def checkpoint(messages: list) -> None:
        nonlocal spent
        use = {"inputTokens": 8000 * len(messages), "cacheReadTokens": 3200 * len(messages),
               "cacheWriteTokens": 0, "outputTokens": sum(m["outputTokens"] for m in messages)}
        spent += nano_aiu("claude-sonnet-4.6", use, auto=True)
        lg.usage_checkpoint(spent)

    checkpoint(lg.leg)
    leg1 = lg.t
    lg.shutdown(leg1, 8000, 0.4, nano=True, cumulative=True, auto=True, total_nano=spent)
    lg.resume(lg.t + timedelta(minutes=30), "auto")
    lg.prompt("Also limit the token refresh endpoint.")
    lg.tools([view("src/api/refresh.py"), edit("src/api/refresh.py")])
    checkpoint(lg.leg)  # ... and then the terminal was closed: no shutdown for this leg
    lg.resume(lg.t + timedelta(hours=1), "auto")
    lg.add("user.message", {"content": "", "transformedContent": "<current_datetime>x</current_datetime>\n\n"
                            "You have not yet marked the task as complete using the task_complete tool."})
    lg.answer("Both endpoints are rate limited; marking the task complete.")
    checkpoint(lg.leg)
    # the final shutdown remembers legs 1 and 3: the killed leg's counts were lost with its process
    lg.shutdown(leg1, 8000, 0.4, nano=True, cumulative=True, auto=True, total_nano=spent)
    meta = {"workspaceFolder": {"folderPath": "/home/dev/acme-api", "timestamp": 1788771600000},
            "worktreeProperties": {"repositoryPath": "/home/dev/acme-api", "branchName": "feat/rate-limit",
                                   "baseBranchName": "origin/main"},
            "writtenToDisc": True, "firstUserMessage": "Add rate limiting", "customTitle": "Login rate limiting"}
    write_session(home, "acme-3", lg,
                  f"id: \"{s}\"\ncwd: '/home/dev/acme-api'\nname: \"auto title from first prompt\"\n"
                  "created_at: '2026-09-11 09:00:00'\n",
                  {"vscode.metadata.json": json.dumps(meta, indent=2),
                   "index.md": "Added rate limiting to login, reusing the token service.\n"})
    ids.append(s)
    return ids


def web_sessions(home: Path) -> list[str]:
    ids = []
    cart = "C:\\Users\\dev\\webapp\\src\\components\\CartView.tsx"
    s = sid("web-1")
    lg = Log(s, T0 + timedelta(days=5))
    lg.start(WEB, version="1.0.34")
    lg.prompt("The cart checkout button does nothing; fix cart checkout in CartView.")
    lg.tools([view(cart), view("c:/Users/dev/webapp/src/api/checkout.ts"), view("src\\components\\CartView.tsx")])
    lg.tools([edit(cart), edit("c:\\users\\dev\\webapp\\src\\components\\CartView.tsx")], "Wiring the handler.")
    lg.answer("Cart checkout works: the click handler was never bound.")
    lg.shutdown(lg.t, 4000)  # 1.0.34: tokens, no cost logged
    write_session(home, "web-1", lg, f"id: {s}\ncwd: C:\\Users\\dev\\webapp\nname: Cart checkout button\n")
    ids.append(s)

    # damaged log: U+2028 in a string, one event split over lines, a glued fragment, a NUL tail
    s = sid("web-2")
    lg = Log(s, T0 + timedelta(days=6))
    lg.start(WEB)
    lg.prompt("Show cart checkout totals\u2028with tax on one line")
    lg.tools([view(cart, "1. export function CartView() {\n2. }")])
    lg.answer("Totals now include tax in cart checkout.")
    lines = [json.dumps(e, ensure_ascii=False) for e in lg.events]
    split_at = next(i for i, e in enumerate(lg.events) if e["type"] == "tool.execution_complete")
    lines[split_at] = lines[split_at].replace("\\n", "\n", 1)  # a literal newline inside the output
    glued = next(i for i, e in enumerate(lg.events) if e["type"] == "assistant.turn_end")
    lines[glued] = '{"type":"assistant.turn_start","data":{"tur' + lines[glued]
    text = "\n".join(lines) + "\n" + "\x00" * 64
    folder = home / "session-state" / s
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.jsonl").write_bytes(text.encode("utf-8"))
    (folder / "workspace.yaml").write_text(f"id: {s}\ncwd: C:\\Users\\dev\\webapp\nname: [unclosed\n",
                                           encoding="utf-8")
    ids.append(s)
    return ids


def legacy(home: Path) -> None:
    s = sid("legacy-flat")
    lg = Log(s, T0 - timedelta(days=60))
    lg.start({}, version="0.0.348")
    del lg.events[0]["data"]["context"]  # old flat logs name the working folder only in the system prompt
    lg.add("system.message", {"role": "system", "content": "You are the GitHub Copilot CLI.\n"
                              "* Current working directory: /home/dev/acme-api\n* Platform: linux"})
    lg.add("user.message", {"content": "Explain the token service module.\n\n"
                                       f"<current_datetime>{iso(lg.t)}</current_datetime>"})
    lg.answer("It issues and verifies tokens.")
    (home / "session-state").mkdir(parents=True, exist_ok=True)
    (home / "session-state" / f"{s}.jsonl").write_text(lg.text(), encoding="utf-8")
    h = sid("legacy-history")
    start = T0 - timedelta(days=90)
    doc = {"sessionId": h, "startTime": iso(start), "chatMessages": [], "timeline": [
        {"id": "t1", "timestamp": iso(start + timedelta(seconds=1)), "type": "info", "text": "Logged in"},
        {"id": "t2", "timestamp": iso(start + timedelta(seconds=5)), "type": "user",
         "text": "Rename the token service config key"},
        {"id": "t3", "timestamp": iso(start + timedelta(seconds=9)), "type": "copilot", "text": "Renaming it."},
        {"type": "tool_call_completed", "id": "t4", "timestamp": iso(start + timedelta(seconds=12)),
         "callId": "toolu_legacy1", "name": "str_replace_editor", "toolTitle": "str_replace_editor",
         "arguments": {"command": "str_replace", "path": "/home/dev/acme-api/src/auth/token_service.py",
                       "old_str": "a", "new_str": "b"}, "result": {"type": "success", "log": "Edited"}},
    ]}
    (home / "history-session-state").mkdir(parents=True, exist_ok=True)
    (home / "history-session-state" / f"session_{h}_{int(start.timestamp() * 1000)}.json").write_text(
        json.dumps(doc, indent=2), encoding="utf-8")


STORE_DDL = """
create table schema_version (version integer);
create table sessions (id text primary key, cwd text, repository text, host_type text, branch text,
    summary text, created_at text default (datetime('now')), updated_at text);
create table turns (id integer primary key autoincrement, session_id text not null references sessions(id),
    turn_index integer not null, user_message text, assistant_response text, timestamp text,
    unique(session_id, turn_index));
create table checkpoints (id integer primary key autoincrement, session_id text, checkpoint_number integer,
    title text, overview text, history text, work_done text, technical_details text, important_files text,
    next_steps text, created_at text, unique(session_id, checkpoint_number));
create table session_files (id integer primary key autoincrement, session_id text, file_path text not null,
    tool_name text, turn_index integer, first_seen_at text, unique(session_id, file_path));
create table session_refs (id integer primary key autoincrement, session_id text, ref_type text not null,
    ref_value text not null, turn_index integer, created_at text, unique(session_id, ref_type, ref_value));
create table assistant_usage_events (id integer primary key autoincrement, session_id text, turn_index integer,
    agent_id text, parent_tool_call_id text, model text, input_tokens integer, output_tokens integer,
    cache_read_tokens integer, cache_write_tokens integer, reasoning_tokens integer, total_nano_aiu integer,
    request_multiplier real, duration_ms integer, initiator text, token_details_json text, created_at text);
create virtual table search_index using fts5(content, session_id unindexed, source_type unindexed,
    source_id unindexed);
"""


def store(home: Path, acme_ids: list[str]) -> None:
    """session-store.db: one session also present as a folder (never counted twice), one only here,
    and rows committed only to the -wal file (read only if the WAL is honoured)."""
    db = home / "session-store.db"
    tmp = home / "_building.db"
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        if p.exists():
            p.unlink()
    con = sqlite3.connect(tmp)
    con.execute("pragma journal_mode=wal")
    con.execute("pragma wal_autocheckpoint=0")
    con.executescript(STORE_DDL)
    con.execute("insert into schema_version values (4)")
    dup = acme_ids[0]
    con.execute("insert into sessions values (?, ?, ?, 'github', 'main', ?, '2026-09-01 09:00:00', ?)",
                (dup, "/home/dev/acme-api", "acme/acme-api", "Token refresh rotation", "2026-09-01 11:10:00"))
    con.execute("insert into turns (session_id, turn_index, user_message, assistant_response, timestamp) "
                "values (?, 0, 'Implement token refresh (store copy)', 'done', '2026-09-01 09:00:05')", (dup,))
    con.execute("insert into session_files (session_id, file_path, tool_name, turn_index, first_seen_at) "
                "values (?, '/home/dev/acme-api/src/auth/token_service.py', 'edit', 0, '2026-09-01 09:00:09')",
                (dup,))
    con.execute("insert into session_refs (session_id, ref_type, ref_value, turn_index, created_at) "
                "values (?, 'pr', '42', 1, '2026-09-01T11:05:00Z')", (dup,))
    con.commit()
    con.execute("pragma wal_checkpoint(TRUNCATE)")  # everything above is in the main file
    only = sid("store-only")
    con.execute("insert into sessions values (?, ?, ?, 'github', 'main', ?, '2026-09-20 14:00:00', ?)",
                (only, "/home/dev/acme-api", "acme/acme-api", "Token revocation endpoint",
                 "2026-09-20T15:00:00.000Z"))
    for i, (u, a) in enumerate([("Add a token revocation endpoint next to token refresh", "Added /revoke."),
                                ("Document token refresh and revocation", "Docs updated.")]):
        con.execute("insert into turns (session_id, turn_index, user_message, assistant_response, timestamp) "
                    "values (?, ?, ?, ?, ?)", (only, i, u, a, f"2026-09-20 14:0{i}:00"))
        con.execute("insert into search_index values (?, ?, 'turn', ?)", (u, only, f"{only}:{i}"))
    con.execute("insert into checkpoints (session_id, checkpoint_number, title, overview, history, work_done, "
                "technical_details, important_files, next_steps, created_at) values "
                "(?, 1, 'Token revocation', 'Added revocation beside token refresh.', '1. Added endpoint', "
                "'- /revoke', 'Revoked ids kept in redis', '- src/auth/token_service.py', "
                "'- Expire revoked ids', '2026-09-20 14:30:00')", (only,))
    for path, tool in (("/home/dev/acme-api/src/auth/token_service.py", "edit"),
                       ("/home/dev/acme-api/src/api/revoke.py", "create"),
                       ("/home/dev/acme-api/docs/auth.md", "edit")):
        con.execute("insert into session_files (session_id, file_path, tool_name, turn_index, first_seen_at) "
                    "values (?, ?, ?, 0, '2026-09-20 14:01:00')", (only, path, tool))
    con.execute("insert into session_refs (session_id, ref_type, ref_value, turn_index, created_at) "
                "values (?, 'commit', 'a1b2c3d4e5f6', 1, '2026-09-20 14:50:00')", (only,))
    for i in range(3):
        use = {"inputTokens": 5000, "cacheReadTokens": 1000, "cacheWriteTokens": 0, "outputTokens": 150}
        con.execute("insert into assistant_usage_events (session_id, turn_index, model, input_tokens, "
                    "output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, total_nano_aiu, "
                    "request_multiplier, duration_ms, created_at) values "
                    "(?, ?, 'claude-sonnet-4.6', 5000, 150, 1000, 0, 0, ?, 1.0, 4000, ?)",
                    (only, min(i, 1), nano_aiu("claude-sonnet-4.6", use), f"2026-09-20 14:0{i}:30"))
    con.execute("insert into search_index values (?, ?, 'workspace_artifact', ?)",
                ("Revocation design: revoked token ids live in redis with the refresh token TTL.", only,
                 "research/revocation.md"))
    con.commit()
    # copy while the connection is open: the last rows exist only in the -wal file
    shutil.copyfile(tmp, db)
    shutil.copyfile(f"{tmp}-wal", f"{db}-wal")
    con.close()
    fix_wal_salt(Path(f"{db}-wal"))
    for p in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        if p.exists():
            p.unlink()


WAL_SALT = (0x5A17_0001, 0x5A17_0002)


def _wal_checksum(data: bytes, big_endian: bool, s0: int, s1: int) -> tuple[int, int]:
    """SQLite's WAL checksum (https://www.sqlite.org/fileformat2.html#walformat), continued from s0, s1."""
    words = struct.unpack((">" if big_endian else "<") + f"{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def fix_wal_salt(wal: Path) -> None:
    """SQLite starts each WAL with random salts, so every ``make sample`` wrote a different -wal file
    (and git showed a change). Set the salts to fixed values and redo the checksum chain: the same
    valid WAL, byte for byte the same every time."""
    data = bytearray(wal.read_bytes())
    if len(data) < 32:
        return
    magic, _version, page_size = struct.unpack(">III", data[:12])
    big = magic == 0x377F0683
    struct.pack_into(">II", data, 16, *WAL_SALT)
    s0, s1 = _wal_checksum(bytes(data[:24]), big, 0, 0)
    struct.pack_into(">II", data, 24, s0, s1)
    frame = 24 + page_size
    for off in range(32, len(data) - frame + 1, frame):
        struct.pack_into(">II", data, off + 8, *WAL_SALT)
        s0, s1 = _wal_checksum(bytes(data[off:off + 8]) + bytes(data[off + 24:off + frame]), big, s0, s1)
        struct.pack_into(">II", data, off + 16, s0, s1)
    wal.write_bytes(bytes(data))


# ------------------------------------------------------------------------------------ VS Code
def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def _md(text: str) -> dict:
    return {"value": text, "supportThemeIcons": False, "supportHtml": False}


def chat_request(rid: str, t: datetime, prompt: str, answer: str, calls: list[tuple[str, dict]],
                 edited: list[str] = (), model: str = "copilot/claude-sonnet-4.5") -> dict:
    """One request of a VS Code chat session, shaped like VS Code 1.10x writes it."""
    parts = [{"kind": "mcpServersStarting", "didStartServerIds": []}, _md(answer.split("\n")[0] + " ")]
    rounds = []
    for i, (name, args) in enumerate(calls):
        call_id = f"toolu_{uuid.uuid5(NS, rid + str(i)).hex[:20]}__vscode-{1000 + i}"
        rounds.append({"toolCalls": [{"name": name, "arguments": json.dumps(args), "id": call_id}]})
        target = args.get("filePath", "")
        parts.append({"kind": "toolInvocationSerialized", "toolId": name, "toolCallId": str(uuid.uuid5(NS, call_id)),
                      "invocationMessage": _md(f"Using [](file://{target})"), "isComplete": True,
                      "isConfirmed": {"type": 1}, "source": {"type": "internal", "label": "Built-In"}})
    rest = "\n".join(answer.split("\n")[1:])
    if rest:
        parts.append(_md(rest))
    return {"requestId": rid, "timestamp": _ms(t), "message": {"text": prompt, "parts": []},
            "modelId": model, "agent": {"id": "github.copilot.editsAgent"}, "variableData": {"variables": []},
            "response": parts, "responseId": f"response_{rid}",
            "result": {"timings": {"firstProgress": 1500, "totalElapsed": 9000},
                       "metadata": {"toolCallRounds": rounds, "toolCallResults": {}}},
            "editedFileEvents": [{"uri": {"$mid": 1, "path": p, "scheme": "file"}, "eventKind": 1} for p in edited]}


def chat_doc(session: str, t: datetime, requests: list[dict], title: str | None = None) -> dict:
    doc = {"version": 3, "sessionId": session, "creationDate": _ms(t), "lastMessageDate": _ms(t) + 60000,
           "initialLocation": "panel", "requesterUsername": "dev", "responderUsername": "GitHub Copilot",
           "isImported": False, "requests": requests}
    if title:
        doc["customTitle"] = title
    return doc


def vscode(out: Path) -> Path:
    user = out / "vscode-user"
    if user.exists():
        shutil.rmtree(user)
    acme = user / "workspaceStorage" / "5d41402abc4b2a76b9719d911017c592"
    web = user / "workspaceStorage" / "7d793037a0760186574b0282f2f435e7"
    for ws, folder in ((acme, "file:///home/dev/acme-api"), (web, "file:///c%3A/Users/dev/webapp")):
        (ws / "chatSessions").mkdir(parents=True)
        (ws / "workspace.json").write_text(json.dumps({"folder": folder}), encoding="utf-8")
    tok = "/home/dev/acme-api/src/auth/token_service.py"

    # the shared conversation: also a CLI folder (acme-3) and a transcript. A mutation log with set,
    # push (one with a truncate index) and delete, replayed to two requests.
    shared = sid("acme-3")
    t = T0 + timedelta(days=10)
    login = "/home/dev/acme-api/src/api/login.py"
    r1 = chat_request("request_shared_1", t, "Add rate limiting to the login endpoint and reuse the token service.",
                      "Rate limiting added to login.",
                      [("read_file", {"filePath": tok}), ("replace_string_in_file", {"filePath": login})],
                      edited=[login])
    lines = [{"kind": 0, "v": chat_doc(shared, t, [])},
             {"kind": 2, "k": ["requests"], "v": [{"requestId": "request_draft", "message": {"text": "draft"}}]},
             {"kind": 2, "k": ["requests"], "v": [r1], "i": 0},  # truncate the draft, push the real request
             {"kind": 1, "k": ["customTitle"], "v": "Login rate limiting"},
             {"kind": 1, "k": ["inputState"], "v": {"inputText": "half-typed"}},
             {"kind": 3, "k": ["inputState"]}]
    (acme / "chatSessions" / f"{shared}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines),
                                                          encoding="utf-8")
    tdir = acme / "GitHub.copilot-chat" / "transcripts"
    tdir.mkdir(parents=True)
    tr = Log(shared, t)
    tr.add("session.start", {"sessionId": shared, "version": 1, "producer": "copilot-agent",
                             "copilotVersion": "0.45.0", "vscodeVersion": "1.110.0", "startTime": iso(t),
                             "context": {"cwd": "/home/dev/acme-api"}}, 0)
    tr.add("user.message", {"content": "Add rate limiting to the login endpoint and reuse the token service.",
                            "attachments": []})
    tr.add("assistant.turn_start", {"turnId": "0.0"})
    tr.add("assistant.message", {"messageId": "m1", "content": "Rate limiting added to login.", "toolRequests": [
        {"toolCallId": "toolu_shared_read", "name": "read_file", "arguments": json.dumps({"filePath": tok}),
         "type": "function"}]})
    tr.add("tool.execution_start", {"toolCallId": "toolu_shared_read", "toolName": "read_file",
                                    "arguments": json.dumps({"filePath": tok})})
    tr.add("tool.execution_complete", {"toolCallId": "toolu_shared_read", "success": True,
                                       "result": {"content": "1. def refresh():"}})
    tr.add("assistant.turn_end", {"turnId": "0.0"})
    (tdir / f"{shared}.jsonl").write_text(tr.text(), encoding="utf-8")

    # a flat (version 3) session with a custom title, tool calls and an edited file
    flat = sid("vs-flat")
    t = T0 + timedelta(days=12)
    doc = chat_doc(flat, t, [
        chat_request("request_flat_1", t, "Document how token refresh works in docs/auth.md",
                     "I'll read the token service first.\nDocumented token refresh and rotation in docs/auth.md.",
                     [("read_file", {"filePath": tok}), ("read_file", {"filePath": tok}),
                      ("create_file", {"filePath": "/home/dev/acme-api/docs/token-refresh.md"})],
                     edited=["/home/dev/acme-api/docs/auth.md"]),
        chat_request("request_flat_2", t + timedelta(minutes=5), "Now explain `refresh()` <b>briefly</b>",
                     "It rotates the refresh token and returns a new access token.", []),
    ], title="Token refresh docs")
    (acme / "chatSessions" / f"{flat}.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")

    # damaged: a mutation log that lost its first (kind 0) line; a flat file with a BOM and no title
    broken = sid("vs-broken")
    (acme / "chatSessions" / f"{broken}.jsonl").write_text(
        json.dumps({"kind": 1, "k": ["customTitle"], "v": "lost"}) + "\n", encoding="utf-8")
    bom = sid("vs-bom")
    t = T0 + timedelta(days=13)
    doc = chat_doc(bom, t, [chat_request("request_bom_1", t, "Why does the token refresh test flake?",
                                         "The clock is not frozen in the test.", [])])
    (acme / "chatSessions" / f"{bom}.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(doc).encode())

    # a session whose chat file is gone: only its transcript is left
    only = sid("vs-transcript-only")
    t = T0 + timedelta(days=14)
    tr = Log(only, t)
    tr.add("session.start", {"sessionId": only, "version": 1, "producer": "copilot-agent",
                             "copilotVersion": "0.45.0", "vscodeVersion": "1.110.0", "startTime": iso(t)}, 0)
    tr.add("user.message", {"content": "List the token refresh endpoints", "attachments": []})
    tr.add("assistant.message", {"messageId": "m1", "content": "POST /refresh and POST /revoke.",
                                 "toolRequests": []})
    (tdir / f"{only}.jsonl").write_text(tr.text(), encoding="utf-8")

    # memories: one per session (directory = url-safe base64 of the id, unpadded), repo and user ones
    mem = acme / "GitHub.copilot-chat" / "memory-tool" / "memories"
    b64 = base64.urlsafe_b64encode(flat.encode()).decode().rstrip("=")
    (mem / b64).mkdir(parents=True)
    (mem / b64 / "notes.md").write_text("# Notes\n\nRefresh tokens rotate on every use.\n", encoding="utf-8")
    (mem / "repo").mkdir()
    (mem / "repo" / "conventions.md").write_text("Use pytest fixtures for token clocks.\n", encoding="utf-8")
    gmem = user / "globalStorage" / "github.copilot-chat" / "memory-tool" / "memories"
    gmem.mkdir(parents=True)
    (gmem / "preferences.md").write_text("Prefer small commits.\n", encoding="utf-8")

    # the chat index in state.vscdb: the only place the BOM session's title is written
    con = sqlite3.connect(acme / "state.vscdb")
    con.execute("create table ItemTable (key text unique on conflict replace, value blob)")
    index = {"version": 1, "entries": {bom: {"sessionId": bom, "title": "Flaky token refresh test",
                                             "lastMessageDate": _ms(T0 + timedelta(days=13, minutes=1)),
                                             "timing": {"created": _ms(T0 + timedelta(days=13))}, "isEmpty": False}}}
    con.execute("insert into ItemTable values ('chat.ChatSessionStore.index', ?)", (json.dumps(index),))
    con.commit()
    con.close()

    # a Windows workspace (file:///c%3A/...) editing the webapp's hot file
    web_sid = sid("vs-web")
    t = T0 + timedelta(days=8)
    cart = "c:\\Users\\dev\\webapp\\src\\components\\CartView.tsx"
    doc = chat_doc(web_sid, t, [chat_request("request_web_1", t, "Make cart checkout show a spinner",
                                             "Added a spinner to cart checkout.",
                                             [("read_file", {"filePath": cart}),
                                              ("replace_string_in_file", {"filePath": cart})],
                                             model="copilot/gpt-5.2")], title="Cart checkout spinner")
    (web / "chatSessions" / f"{web_sid}.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")

    # an empty-window chat (no workspace)
    empty = user / "globalStorage" / "emptyWindowChatSessions"
    empty.mkdir(parents=True)
    e_sid = sid("vs-empty")
    t = T0 + timedelta(days=15)
    doc = chat_doc(e_sid, t, [chat_request("request_empty_1", t, "What is a refresh token?",
                                           "A long-lived credential used to get new access tokens.", [])])
    (empty / f"{e_sid}.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return user


def write_sample(out: Path) -> Path:
    home = out / "copilot-home"
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    acme = acme_sessions(home)
    web_sessions(home)
    legacy(home)
    store(home, acme)
    vscode(out)
    return home


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("data/sample")
    print(f"sample Copilot home written to {write_sample(target)}")
