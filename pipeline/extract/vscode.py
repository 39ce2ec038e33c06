"""VS Code Copilot Chat: discovery of User folders and readers for chat sessions (flat JSON and
the JSONL mutation log), transcripts, memory files and the chat index in ``state.vscdb``.

Chat sessions are translated into the CLI event vocabulary (user.message, assistant.message
with toolRequests, tool.execution_complete) so one set of transforms serves every source.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote, urlparse

import orjson

from .base import Context, Prior, ReadResult, Source, as_text, load_json_file, read_bytes, reader, to_json
from .events import (
    ASSISTANT_MESSAGE,
    SESSION_START,
    TOOL_COMPLETE,
    USER_MESSAGE,
    event_rows,
    read_event_log,
)
from .jsonl import Record, iter_jsonl
from .store import read_snapshot

log = logging.getLogger(__name__)

FILE_EDITED = "vscode.file_edited"  # a synthesized event: one entry of a request's editedFileEvents
PRODUCTS = ("Code", "Code - Insiders", "VSCodium", "Code - OSS")
_VSCODE_CALL_SUFFIX = re.compile(r"__vscode-\d+$")
_FILE_URI = re.compile(r"\((file:///[^)\s]+)\)")


# ------------------------------------------------------------------------------------ discovery
def default_vscode_users(env=os.environ, home: Path | None = None) -> list[Path]:
    """Every VS Code ``User`` folder on this machine: Linux, macOS, Windows, portable, remote servers."""
    home = home or Path.home()
    cands = []
    for product in PRODUCTS:
        cands.append(home / ".config" / product / "User")
        cands.append(home / "Library" / "Application Support" / product / "User")
        if env.get("APPDATA"):
            cands.append(Path(env["APPDATA"]) / product / "User")
    if env.get("VSCODE_PORTABLE"):
        cands.append(Path(env["VSCODE_PORTABLE"]) / "user-data" / "User")
    for server in (".vscode-server", ".vscode-server-insiders", ".vscodium-server"):
        cands.append(home / server / "data" / "User")
    return [c for c in cands if c.is_dir()]


def workspace_folder(storage: Path) -> str | None:
    """The folder a ``workspaceStorage/<hash>/`` belongs to, from its ``workspace.json``."""
    path = storage / "workspace.json"
    if not path.is_file():
        return None
    try:
        doc = orjson.loads(path.read_bytes())
    except (orjson.JSONDecodeError, OSError):
        log.warning("%s: unreadable workspace.json; sessions there get no project", path)
        return None
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("folder"), str):
        return folder_path(doc["folder"])
    for key in ("configuration", "workspace"):  # a .code-workspace file: its folder is the root
        value = doc.get(key)
        if isinstance(value, dict):
            value = value.get("configPath") or value.get("path")
        if isinstance(value, str):
            return folder_path(value.rsplit("/", 1)[0] if "/" in value else value)
    return None


def folder_path(uri: str) -> str:
    """A workspace folder as a path: ``file:///c%3A/Users/x`` -> ``c:/Users/x``,
    ``file:///home/x`` -> ``/home/x``. A remote (``vscode-remote://``) URI stays a URI: it is the
    workspace's identity, and no local path names it."""
    if not uri.startswith("file://"):
        return uri
    path = unquote(urlparse(uri).path)
    if re.match(r"^/[A-Za-z]:(/|$)", path):
        path = path[1:]
    return path or uri


def _child(folder: Path, name: str) -> Path | None:
    """``folder/name`` matched case-insensitively (``GitHub.copilot-chat`` vs ``github.copilot-chat``)."""
    if not folder.is_dir():
        return None
    exact = folder / name
    if exact.is_dir():
        return exact
    return next((c for c in sorted(folder.iterdir()) if c.is_dir() and c.name.lower() == name.lower()), None)


def discover_vscode_user(user: Path) -> list[Source]:
    user = user.resolve()
    root = str(user)
    out: list[Source] = []
    storage_root = user / "workspaceStorage"
    storages = sorted(p for p in storage_root.iterdir() if p.is_dir()) if storage_root.is_dir() else []
    for storage in storages:
        folder = workspace_folder(storage)
        out.extend(_chat_files(storage / "chatSessions", root, folder))
        chat_ext = _child(storage, "GitHub.copilot-chat")
        if chat_ext is not None:
            tdir = chat_ext / "transcripts"
            if tdir.is_dir():
                out.extend(Source(str(p), "transcript", p.stem, root, folder) for p in sorted(tdir.glob("*.jsonl")))
            out.extend(_memories(chat_ext / "memory-tool" / "memories", root, folder))
        state = storage / "state.vscdb"
        if state.is_file():
            out.append(Source(str(state), "vscode_state_db", None, root, folder))
    glob = user / "globalStorage"
    out.extend(_chat_files(glob / "emptyWindowChatSessions", root, None))
    chat_ext = _child(glob, "github.copilot-chat")
    if chat_ext is not None:
        out.extend(_memories(chat_ext / "memory-tool" / "memories", root, None))
    return out


def _chat_files(folder: Path, root: str, workspace: str | None) -> list[Source]:
    if not folder.is_dir():
        return []
    return [Source(str(p), "chat_session", p.stem, root, workspace) for p in sorted(folder.iterdir())
            if p.is_file() and p.suffix in (".json", ".jsonl")]


def _memories(folder: Path, root: str, workspace: str | None) -> list[Source]:
    if not folder.is_dir():
        return []
    out = []
    for p in sorted(folder.rglob("*.md")):
        rel = p.relative_to(folder)
        sid = session_from_memory_dir(rel.parts[0]) if len(rel.parts) > 1 else None
        out.append(Source(str(p), "vscode_memory", sid, root, workspace))
    return out


def session_from_memory_dir(name: str) -> str | None:
    """``memories/<name>/``: ``name`` is the session id as unpadded url-safe base64; others are not sessions."""
    try:
        raw = base64.urlsafe_b64decode(name + "=" * (-len(name) % 4))
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    if len(text) >= 8 and text.isprintable() and re.fullmatch(r"[A-Za-z0-9_.:-]+", text):
        return text
    return None


# ------------------------------------------------------------------------------------ chat sessions
def replay_mutation_log(data: bytes, path: str, res: ReadResult, ctx: Context) -> dict | None:
    """Replay ``{"kind":0,"v":state}`` then set (1), push (2, optional truncate ``i``) and delete (3)."""
    state = None
    for item in iter_jsonl(data):
        if not isinstance(item, Record):
            res.reject(path, item.reason, line=item.line, offset=item.offset, excerpt=ctx.redact(item.excerpt))
            continue
        entry = item.obj
        kind = entry.get("kind")
        if state is None:
            if kind != 0 or not isinstance(entry.get("v"), dict):
                res.reject(path, "chat session log is missing its initial snapshot (kind 0) line; not replayed",
                           line=item.line, offset=item.offset, excerpt=ctx.redact(str(entry)[:200]))
                return None
            state = entry["v"]
            continue
        try:
            if kind == 0 and isinstance(entry.get("v"), dict):
                state = entry["v"]  # a compaction rewrote the whole state
            elif kind in (1, 2, 3):
                _apply(state, entry.get("k") or [], kind, entry.get("v"), entry.get("i"))
            else:
                raise ValueError(f"unknown mutation kind {kind!r}")
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            res.reject(path, f"mutation could not be applied: {exc}", line=item.line, offset=item.offset,
                       excerpt=ctx.redact(str(entry)[:200]))
    if state is None and not res.rejects:
        res.reject(path, "chat session log is empty")
    return state


def _apply(state, keys: list, kind: int, value, index) -> None:
    parent = state
    for k in keys[:-1]:
        parent = parent[k]
    last = keys[-1] if keys else None
    if kind == 1:
        if last is None:
            raise ValueError("set without a path")
        if isinstance(parent, list) and last == len(parent):
            parent.append(value)
        else:
            parent[last] = value
    elif kind == 2:
        target = parent[last] if last is not None else parent
        if not isinstance(target, list):
            raise TypeError("push onto something that is not a list")
        if isinstance(index, int):
            del target[index:]
        target.extend(value if isinstance(value, list) else [value])
    elif kind == 3:
        if isinstance(parent, list):
            del parent[last]
        else:
            parent.pop(last, None)


def _iso(ms) -> str | None:
    if isinstance(ms, (int, float)) and not isinstance(ms, bool):
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return ms if isinstance(ms, str) else None


def _markdown_of(response) -> str:
    """The visible answer: MarkdownString parts (no ``kind``), markdownContent parts, inline references."""
    if isinstance(response, str):
        return response
    out = []
    for part in response or []:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            kind = part.get("kind")
            if kind is None and isinstance(part.get("value"), str):
                out.append(part["value"])
            elif kind == "markdownContent":
                out.append(as_text(part.get("content")) or "")
            elif kind == "inlineReference":
                ref = part.get("inlineReference") or {}
                name = ref.get("name") or Path(str(ref.get("path") or (ref.get("uri") or {}).get("path") or "")).name
                out.append(f"`{name}`" if name else "")
    return "".join(out).strip()


def _model(request: dict) -> str | None:
    m = request.get("modelId")
    if isinstance(m, str):
        return m.removeprefix("copilot/")
    return None


def _tool_calls(request: dict) -> list[dict]:
    """Tool calls with arguments from result.metadata.toolCallRounds, completion from the response parts."""
    parts = [p for p in request.get("response") or [] if isinstance(p, dict)
             and p.get("kind") == "toolInvocationSerialized"]
    rounds = ((request.get("result") or {}).get("metadata") or {}).get("toolCallRounds") or []
    calls = [c for r in rounds if isinstance(r, dict) for c in r.get("toolCalls") or [] if isinstance(c, dict)]
    out = []
    if calls:
        for i, c in enumerate(calls):
            part = parts[i] if i < len(parts) else {}
            call_id = str(c.get("id") or f"{request.get('requestId')}:{i}")
            out.append({"toolCallId": _VSCODE_CALL_SUFFIX.sub("", call_id),
                        "name": c.get("name") or part.get("toolId"), "arguments": c.get("arguments"),
                        "success": part.get("isComplete") if part else None})
        return out
    for i, p in enumerate(parts):  # older files: no rounds; the file a tool read is in its message
        msg = as_text((p.get("invocationMessage") or {}).get("value") if isinstance(p.get("invocationMessage"), dict)
                      else p.get("invocationMessage")) or ""
        uri = _FILE_URI.search(msg)
        out.append({"toolCallId": str(p.get("toolCallId") or f"{request.get('requestId')}:{i}"),
                    "name": p.get("toolId"), "arguments": {"filePath": uri.group(1)} if uri else None,
                    "success": p.get("isComplete")})
    return out


def _extension_version(requests) -> str | None:
    """The Copilot Chat extension version that answered the session's first request that names one."""
    for req in requests or []:
        agent = req.get("agent") if isinstance(req, dict) else None
        version = agent.get("extensionVersion") if isinstance(agent, dict) else None
        if isinstance(version, str) and version:
            return version
    return None


def chat_events(doc: dict, session_id: str, workspace: str | None) -> list[dict]:
    """A chat session as CLI-style events. Tool calls carry no time: a chat session records when a
    request started and how long it took, not when each of its tool calls ran."""
    start = _iso(doc.get("creationDate"))
    ctx = {"cwd": workspace} if workspace else {}
    events = [{"type": SESSION_START, "timestamp": start,
               "data": {"sessionId": session_id, "startTime": start, "producer": "vscode-chat", "context": ctx,
                        "copilotVersion": _extension_version(doc.get("requests")),
                        "initialLocation": doc.get("initialLocation")}}]
    for n, req in enumerate(doc.get("requests") or []):
        if not isinstance(req, dict):
            continue
        ts = req.get("timestamp")
        message = req.get("message")
        text = message.get("text") if isinstance(message, dict) else as_text(message)
        rid = req.get("requestId") or f"request-{n}"
        events.append({"type": USER_MESSAGE, "id": f"{rid}:user", "timestamp": _iso(ts),
                       "data": {"content": text, "interactionId": rid}})
        timings = (req.get("result") or {}).get("timings") or {}
        done = ts + timings["totalElapsed"] if isinstance(ts, (int, float)) and isinstance(
            timings.get("totalElapsed"), (int, float)) else ts
        calls = _tool_calls(req)
        model = _model(req)
        tokens = _request_tokens(req)
        events.append({"type": ASSISTANT_MESSAGE, "id": f"{rid}:assistant", "timestamp": _iso(done),
                       "data": {"content": _markdown_of(req.get("response")), "model": model, "interactionId": rid,
                                "toolRequests": [{k: c[k] for k in ("toolCallId", "name", "arguments")}
                                                 for c in calls],
                                "outputTokens": tokens.get("outputTokens"), "requestId": rid,
                                "vote": req.get("vote"), "isCanceled": req.get("isCanceled")}})
        if tokens.get("inputTokens") is not None:  # newer versions record the request's tokens
            events.append({"type": "assistant.usage", "id": f"{rid}:usage", "timestamp": _iso(done),
                           "data": {"model": model, "apiCallId": rid, **tokens}})
        for c in calls:
            events.append({"type": TOOL_COMPLETE, "id": f"{rid}:{c['toolCallId']}", "timestamp": None,
                           "data": {"toolCallId": c["toolCallId"], "toolName": c["name"], "success": c["success"],
                                    "model": model}})
        for e in req.get("editedFileEvents") or []:
            if isinstance(e, dict):
                uri = e.get("uri")
                path = uri.get("path") or uri.get("external") if isinstance(uri, dict) else uri
                events.append({"type": FILE_EDITED, "id": f"{rid}:edit:{path}", "timestamp": _iso(done),
                               "data": {"arguments": {"path": path}, "eventKind": e.get("eventKind")}})
    return events


def _request_tokens(req: dict) -> dict:
    """Token counts a request records (newer Copilot Chat versions): ``promptTokens`` /
    ``completionTokens`` on the request or in ``result.usage``. Empty when it records none."""
    result = req.get("result") if isinstance(req.get("result"), dict) else {}
    usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    out = {}
    for key, names in (("inputTokens", ("promptTokens", "prompt_tokens", "inputTokens")),
                       ("outputTokens", ("completionTokens", "completion_tokens", "outputTokens"))):
        for src in (req, usage):
            value = next((src.get(n) for n in names if isinstance(src.get(n), int)
                          and not isinstance(src.get(n), bool)), None)
            if value is not None:
                out[key] = value
                break
    return out


@reader("chat_session")
def read_chat_session(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()
    if source.path.endswith(".jsonl"):
        doc = replay_mutation_log(read_bytes(source.path), source.path, res, ctx)
    else:
        doc = load_json_file(source, res, ctx)
    if doc is None:
        return res
    sid = doc.get("sessionId") if isinstance(doc.get("sessionId"), str) else source.session_id
    for i, ev in enumerate(chat_events(doc, sid, source.workspace)):
        row, reqs = event_rows(ev, session_id=sid, source_kind="chat_session", index=i, line=i + 1, offset=None,
                               source_path=source.path, ctx=ctx)
        res.add("stg_events", row)
        for r in reqs:
            res.add("stg_tool_requests", r)
    r = ctx.redact
    res.add("stg_session_meta", {
        "session_id": sid, "source_kind": "vscode_chat", "title": r(doc.get("customTitle")), "summary": None,
        "cwd": source.workspace, "git_root": None, "repository": None, "branch": None, "host_type": "vscode",
        "client_name": "vscode", "created_at": _iso(doc.get("creationDate")),
        "updated_at": _iso(doc.get("lastMessageDate")), "first_user_message": None,
        "extra": to_json({k: doc.get(k) for k in ("version", "initialLocation", "responderUsername", "isImported")
                          if k in doc}),
        "_source_path": source.path, "_run_id": ctx.run_id})
    res.n_records = len(res.rows.get("stg_events", []))
    res.last_good_offset = os.path.getsize(source.path)
    return res


@reader("transcript")
def read_transcript(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    """``GitHub.copilot-chat/transcripts/<id>.jsonl``: the CLI envelope, append-only."""
    res = read_event_log(source, ctx, prior, "transcript")
    if not res.appended:
        res.add("stg_session_meta", {
            "session_id": source.session_id, "source_kind": "vscode_transcript", "title": None, "summary": None,
            "cwd": source.workspace, "git_root": None, "repository": None, "branch": None, "host_type": "vscode",
            "client_name": "vscode", "created_at": None, "updated_at": None, "first_user_message": None,
            "extra": None, "_source_path": source.path, "_run_id": ctx.run_id})
    return res


@reader("vscode_memory")
def read_memory(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()
    text = read_bytes(source.path).lstrip(b"\xef\xbb\xbf").replace(b"\x00", b"").decode("utf-8", "replace")
    rel = os.path.relpath(source.path, source.root).replace(os.sep, "/")
    res.add("stg_documents", {"session_id": source.session_id, "kind": "memory", "path": rel,
                              "content": ctx.redact(text), "_source_path": source.path, "_run_id": ctx.run_id})
    res.n_records = 1
    return res


@reader("vscode_state_db")
def read_state_db(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    """The chat index (``chat.ChatSessionStore.index``) of ``state.vscdb``: titles and timings."""
    res = ReadResult()
    found: list = []

    def read(con: sqlite3.Connection) -> None:
        if con.execute("select 1 from sqlite_master where name = 'ItemTable'").fetchone():
            found.extend(con.execute("select value from ItemTable where key = 'chat.ChatSessionStore.index'"))

    read_snapshot(source, res, "state.vscdb", read)
    if not found:
        return res
    row = found[0]
    raw = row[0].decode("utf-8", "replace") if isinstance(row[0], bytes) else row[0]
    try:
        index = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        res.reject(source.path, f"chat index is not valid JSON: {exc}", excerpt=raw[:200])
        return res
    entries = index.get("entries") if isinstance(index, dict) else None
    for sid, e in sorted((entries or {}).items()):
        if not isinstance(e, dict):
            continue
        timing = e.get("timing") if isinstance(e.get("timing"), dict) else {}
        res.add("stg_session_meta", {
            "session_id": e.get("sessionId") or sid, "source_kind": "vscode_index", "title": ctx.redact(e.get("title")),
            "summary": None, "cwd": source.workspace, "git_root": None, "repository": None, "branch": None,
            "host_type": "vscode", "client_name": "vscode", "created_at": _iso(timing.get("created")),
            "updated_at": _iso(e.get("lastMessageDate") or timing.get("lastRequestEnded")),
            "first_user_message": None,
            "extra": to_json({k: e.get(k) for k in ("isEmpty", "lastResponseState", "initialLocation") if k in e}),
            "_source_path": source.path, "_run_id": ctx.run_id})
    res.n_records = len(res.rows.get("stg_session_meta", []))
    return res
