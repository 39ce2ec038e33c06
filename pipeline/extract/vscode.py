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
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

import orjson

from ..vocabulary import ASSISTANT_MESSAGE, ASSISTANT_USAGE, FILE_EDITED, SESSION_START, TOOL_COMPLETE, USER_MESSAGE
from .base import (
    Context,
    Finder,
    Prior,
    Problems,
    ReadResult,
    Source,
    as_text,
    cap_text,
    cap_texts,
    epoch_ms_iso,
    load_json_file,
    read_bytes,
    reader,
    to_json,
)
from .events import event_rows, read_event_log
from .jsonl import Record, _loads, iter_jsonl
from .store import read_snapshot

log = logging.getLogger(__name__)

PRODUCTS = ("Code", "Code - Insiders", "VSCodium", "Code - OSS")
_VSCODE_CALL_SUFFIX = re.compile(r"__vscode-\d+$")
_FILE_URI = re.compile(r"\((file:///[^)\s]+)\)")


# ------------------------------------------------------------------------------------ discovery
def default_vscode_users(env: Mapping[str, str] = os.environ, home: Path | None = None) -> list[Path]:
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


def discover_vscode_user(user: Path, finder: Finder | None = None) -> list[Source]:
    """Every source unit under a VS Code User folder; what cannot be listed or examined is noted in
    ``finder.problems`` and left out."""
    finder = finder or Finder()
    user = user.resolve()
    root = str(user)
    out: list[Source] = []
    top = {e.name: e for e in finder.entries(root)}
    storage_root = top.get("workspaceStorage")
    storages = [e for e in finder.entries(storage_root.path) if finder.is_dir(e)] \
        if storage_root is not None and finder.is_dir(storage_root) else []
    for storage in storages:
        folder = workspace_folder(Path(storage.path))
        children = {e.name: e for e in finder.entries(storage.path)}
        out.extend(_chat_files(children.get("chatSessions"), root, folder, finder))
        chat_ext = _child(children, "GitHub.copilot-chat", finder)
        if chat_ext is not None:
            ext = {e.name: e for e in finder.entries(chat_ext.path)}
            tdir = ext.get("transcripts")
            if tdir is not None and finder.is_dir(tdir):
                out.extend(Source(e.path, "transcript", e.name[:-len(".jsonl")], root, folder)
                           for e in finder.entries(tdir.path) if e.name.endswith(".jsonl") and finder.is_file(e))
            out.extend(_memories(os.path.join(chat_ext.path, "memory-tool", "memories"), root, folder, finder))
        state = children.get("state.vscdb")
        if state is not None and finder.is_file(state):
            out.append(Source(state.path, "vscode_state_db", None, root, folder))
    glob = top.get("globalStorage")
    if glob is not None and finder.is_dir(glob):
        children = {e.name: e for e in finder.entries(glob.path)}
        out.extend(_chat_files(children.get("emptyWindowChatSessions"), root, None, finder))
        chat_ext = _child(children, "github.copilot-chat", finder)
        if chat_ext is not None:
            out.extend(_memories(os.path.join(chat_ext.path, "memory-tool", "memories"), root, None, finder))
    return out


def _child(children: dict[str, os.DirEntry], name: str, finder: Finder) -> os.DirEntry | None:
    """The folder ``name`` among ``children``, matched case-insensitively (``GitHub.copilot-chat`` vs
    ``github.copilot-chat``)."""
    exact = children.get(name)
    if exact is not None and finder.is_dir(exact):
        return exact
    return next((e for n, e in sorted(children.items()) if n.lower() == name.lower() and finder.is_dir(e)), None)


def _chat_files(folder: os.DirEntry | None, root: str, workspace: str | None, finder: Finder) -> list[Source]:
    if folder is None or not finder.is_dir(folder):
        return []
    return [Source(e.path, "chat_session", e.name.rsplit(".", 1)[0], root, workspace)
            for e in finder.entries(folder.path) if e.name.endswith((".json", ".jsonl")) and finder.is_file(e)]


def _memories(folder: str, root: str, workspace: str | None, finder: Finder) -> list[Source]:
    """Memory files at any depth under ``folder`` (``<session in base64>/x.md``, ``repo/x.md``, ``x.md``)."""
    out = []
    pending = [(folder, None)]
    while pending:
        path, first = pending.pop()
        if not os.path.isdir(path):
            continue
        for e in finder.entries(path):
            if finder.is_dir(e) and not e.is_symlink():
                pending.append((e.path, first if first is not None else e.name))
            elif e.name.endswith(".md") and finder.is_file(e):
                sid = session_from_memory_dir(first) if first is not None else None
                out.append(Source(e.path, "vscode_memory", sid, root, workspace))
    return sorted(out, key=lambda src: src.path)


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
            res.reject(path, item.reason, line=item.line, offset=item.offset, excerpt=ctx.excerpt(item.excerpt))
            continue
        entry = item.obj
        if item.note:
            res.reject(path, f"mutation kept; {item.note}", line=item.line, offset=item.offset)
        kind = entry.get("kind")
        if state is None:
            if kind != 0 or not isinstance(entry.get("v"), dict):
                res.reject(path, "chat session log is missing its initial snapshot (kind 0) line; not replayed",
                           line=item.line, offset=item.offset, excerpt=ctx.excerpt(str(entry)))
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
        except Exception as exc:  # noqa: BLE001 - a mutation of any shape against a state of any shape
            res.reject(path, f"mutation could not be applied: {type(exc).__name__}: {exc}", line=item.line,
                       offset=item.offset,
                       excerpt=ctx.excerpt(str(entry)))
    if state is None and not res.rejects:
        res.reject(path, "chat session log is empty")
    return state


def _apply(state: object, keys: list, kind: int, value: object, index: object) -> None:
    if not isinstance(keys, list):
        raise ValueError(f"its path is {type(keys).__name__}, not a list")
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


def _iso(ms: object, what: str = "a time", problems: Problems | None = None) -> str | None:
    return epoch_ms_iso(ms, what, problems)


def _d(v: object) -> dict:
    return v if isinstance(v, dict) else {}


def _l(v: object) -> list:
    return v if isinstance(v, list) else []


def _markdown_of(response: object) -> str:
    """The visible answer: MarkdownString parts (no ``kind``), markdownContent parts, inline references."""
    if isinstance(response, str):
        return response
    out = []
    for part in _l(response):
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            kind = part.get("kind")
            if kind is None and isinstance(part.get("value"), str):
                out.append(part["value"])
            elif kind == "markdownContent":
                out.append(as_text(part.get("content")) or "")
            elif kind == "inlineReference":
                ref = _d(part.get("inlineReference"))
                name = ref.get("name") or Path(str(ref.get("path") or _d(ref.get("uri")).get("path") or "")).name
                out.append(f"`{name}`" if name else "")
    return "".join(out).strip()


def _model(request: dict) -> str | None:
    m = request.get("modelId")
    if isinstance(m, str):
        return m.removeprefix("copilot/")
    return None


def _tool_calls(request: dict) -> list[dict]:
    """Tool calls with arguments from result.metadata.toolCallRounds, completion from the response parts."""
    parts = [p for p in _l(request.get("response")) if isinstance(p, dict)
             and p.get("kind") == "toolInvocationSerialized"]
    rounds = _l(_d(_d(request.get("result")).get("metadata")).get("toolCallRounds"))
    calls = [c for r in rounds if isinstance(r, dict) for c in _l(r.get("toolCalls")) if isinstance(c, dict)]
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
        msg = as_text(_d(p.get("invocationMessage")).get("value") if isinstance(p.get("invocationMessage"), dict)
                      else p.get("invocationMessage")) or ""
        uri = _FILE_URI.search(msg)
        out.append({"toolCallId": str(p.get("toolCallId") or f"{request.get('requestId')}:{i}"),
                    "name": p.get("toolId"), "arguments": {"filePath": uri.group(1)} if uri else None,
                    "success": p.get("isComplete")})
    return out


def _extension_version(requests: list) -> str | None:
    """The Copilot Chat extension version that answered the session's first request that names one."""
    for req in requests or []:
        agent = req.get("agent") if isinstance(req, dict) else None
        version = agent.get("extensionVersion") if isinstance(agent, dict) else None
        if isinstance(version, str) and version:
            return version
    return None


def chat_events(doc: dict, session_id: str, workspace: str | None, problems: Problems | None = None):
    """A chat session as CLI-style events, as (where in the file, events) per request: a request of
    the wrong shape raises when converted, so the caller can reject it alone. Tool calls carry no
    time: a chat session records when a request started and how long it took, not when each of its
    tool calls ran."""
    start = _iso(doc.get("creationDate"), "creationDate", problems)
    ctx = {"cwd": workspace} if workspace else {}
    requests = doc.get("requests")
    session = {"type": SESSION_START, "timestamp": start,
               "data": {"sessionId": session_id, "startTime": start, "producer": "vscode-chat", "context": ctx,
                        "copilotVersion": _extension_version(_l(requests)),
                        "initialLocation": doc.get("initialLocation")}}
    yield "session", None, lambda: [session]
    if requests is not None and not isinstance(requests, list):
        raise ValueError(f"`requests` is {type(requests).__name__}, not a list")
    for n, req in enumerate(_l(requests)):
        yield f"request {n + 1}", req, lambda req=req, n=n: _request_events(req, n, problems)


def _request_events(req: dict, n: int, problems: Problems | None) -> list[dict]:
    if not isinstance(req, dict):
        raise ValueError(f"it is {type(req).__name__}, not an object")
    ts = req.get("timestamp")
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        ts = None
    message = req.get("message")
    text = message.get("text") if isinstance(message, dict) else as_text(message)
    rid = req.get("requestId") if isinstance(req.get("requestId"), str) and req["requestId"] else f"request-{n}"
    events = [{"type": USER_MESSAGE, "id": f"{rid}:user", "timestamp": _iso(ts, "timestamp", problems),
               "data": {"content": as_text(text), "interactionId": rid}}]
    timings = _d(_d(req.get("result")).get("timings"))
    elapsed = timings.get("totalElapsed")
    done = ts + elapsed if ts is not None and isinstance(elapsed, (int, float)) and not isinstance(elapsed, bool) \
        else ts
    calls = _tool_calls(req)
    model = _model(req)
    tokens = _request_tokens(req)
    events.append({"type": ASSISTANT_MESSAGE, "id": f"{rid}:assistant", "timestamp": _iso(done, "timings", problems),
                   "data": {"content": _markdown_of(req.get("response")), "model": model, "interactionId": rid,
                            "toolRequests": [{k: c[k] for k in ("toolCallId", "name", "arguments")} for c in calls],
                            "outputTokens": tokens.get("outputTokens"), "requestId": rid,
                            "vote": req.get("vote"), "isCanceled": req.get("isCanceled")}})
    if tokens.get("inputTokens") is not None:  # newer versions record the request's tokens
        events.append({"type": ASSISTANT_USAGE, "id": f"{rid}:usage", "timestamp": _iso(done),
                       "data": {"model": model, "apiCallId": rid, **tokens}})
    for c in calls:
        events.append({"type": TOOL_COMPLETE, "id": f"{rid}:{c['toolCallId']}", "timestamp": None,
                       "data": {"toolCallId": c["toolCallId"], "toolName": c["name"], "success": c["success"],
                                "model": model}})
    for k, e in enumerate(_l(req.get("editedFileEvents"))):
        uri = e.get("uri") if isinstance(e, dict) else None
        path = uri.get("path") or uri.get("external") if isinstance(uri, dict) else uri
        if isinstance(path, str) and path:
            events.append({"type": FILE_EDITED, "id": f"{rid}:edit:{k}", "timestamp": _iso(done),
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
    problems = Problems()
    if source.path.endswith(".jsonl"):
        doc = replay_mutation_log(read_bytes(source.path), source.path, res, ctx)
        if doc is not None and len(to_json(doc) or "") > ctx.max_text:
            cap_texts(doc, ctx.max_text, problems)
    else:
        doc = load_json_file(source, res, ctx, problems)
    if doc is None:
        return res
    if not isinstance(doc, dict):
        res.reject(source.path, f"chat session state is {type(doc).__name__}, not an object")
        return res
    sid = doc.get("sessionId") if isinstance(doc.get("sessionId"), str) and doc["sessionId"] else source.session_id
    index = 0
    try:
        for where, raw, events in chat_events(doc, sid, source.workspace, problems):
            try:
                rows = [event_rows(ev, session_id=sid, source_kind="chat_session", index=index + i, line=index + i + 1,
                                   offset=None, source_path=source.path, ctx=ctx, problems=problems)
                        for i, ev in enumerate(events())]
            except Exception as exc:  # noqa: BLE001 - a request of any shape
                res.reject(source.path, f"{where} could not be read: {exc}", excerpt=ctx.excerpt(to_json(raw)))
                continue
            for row, reqs in rows:
                res.add("stg_events", row)
                for r in reqs:
                    res.add("stg_tool_requests", r)
            index += len(rows)
    except ValueError as exc:  # `requests` of the wrong type: the session is kept without its requests
        res.reject(source.path, f"chat session kept without its requests: {exc}")
    title = doc.get("customTitle") if isinstance(doc.get("customTitle"), str) else None
    res.add("stg_session_meta", {
        "session_id": sid, "source_kind": "vscode_chat", "title": title, "summary": None,
        "cwd": source.workspace, "git_root": None, "repository": None, "branch": None, "host_type": "vscode",
        "client_name": "vscode", "created_at": _iso(doc.get("creationDate")),
        "updated_at": _iso(doc.get("lastMessageDate")), "first_user_message": None,
        "extra": to_json({k: doc.get(k) for k in ("version", "initialLocation", "responderUsername", "isImported")
                          if k in doc}),
        "_source_path": source.path, "_run_id": ctx.run_id})
    if problems:
        res.reject(source.path, f"chat session kept; {problems.reason()}")
    res.n_records = len(res.rows.get("stg_events", []))
    res.last_good_offset = os.path.getsize(source.path)
    return res


@reader("transcript")
def read_transcript(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    """``GitHub.copilot-chat/transcripts/<id>.jsonl``: the CLI envelope, append-only."""
    res = read_event_log(source, ctx, prior, "transcript")
    if not res.appended:
        res.add("stg_session_meta", transcript_meta(source, ctx.run_id))
    return res


def transcript_meta(source: Source, run_id: str) -> dict:
    """The stg_session_meta row of a transcript read whole: its session and workspace folder."""
    return {"session_id": source.session_id, "source_kind": "vscode_transcript", "title": None, "summary": None,
            "cwd": source.workspace, "git_root": None, "repository": None, "branch": None, "host_type": "vscode",
            "client_name": "vscode", "created_at": None, "updated_at": None, "first_user_message": None,
            "extra": None, "_source_path": source.path, "_run_id": run_id}


@reader("vscode_memory")
def read_memory(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()
    problems = Problems()
    raw = read_bytes(source.path, limit=ctx.max_text * 4 + 1)
    text = cap_text(raw.lstrip(b"\xef\xbb\xbf").replace(b"\x00", b"").decode("utf-8", "replace"), ctx.max_text,
                    "the file", problems)
    rel = os.path.relpath(source.path, source.root).replace(os.sep, "/")
    res.add("stg_documents", {"session_id": source.session_id, "kind": "memory", "path": rel,
                              "content": text, "_source_path": source.path, "_run_id": ctx.run_id})
    if problems:
        res.reject(source.path, f"memory kept; {problems.reason()}")
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

    read_snapshot(source, res, "state.vscdb", read, ctx)
    if not found:
        return res
    row = found[0]
    raw = row[0] if isinstance(row[0], (bytes, str)) else str(row[0])
    index = _loads(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw)
    if not isinstance(index, dict):
        res.reject(source.path, "chat index is not a JSON object", excerpt=ctx.excerpt(raw))
        return res
    entries = index.get("entries") if isinstance(index.get("entries"), dict) else {}
    problems = Problems()
    for sid, e in sorted(entries.items()):
        try:
            if not isinstance(e, dict):
                raise ValueError(f"it is {type(e).__name__}, not an object")
            timing = e.get("timing") if isinstance(e.get("timing"), dict) else {}
            title = e.get("title") if isinstance(e.get("title"), str) else None
            session = e.get("sessionId") if isinstance(e.get("sessionId"), str) and e["sessionId"] else sid
            res.add("stg_session_meta", {
                "session_id": session, "source_kind": "vscode_index", "title": title,
                "summary": None, "cwd": source.workspace, "git_root": None, "repository": None, "branch": None,
                "host_type": "vscode", "client_name": "vscode",
                "created_at": _iso(timing.get("created"), "timing.created", problems),
                "updated_at": _iso(e.get("lastMessageDate") or timing.get("lastRequestEnded"), "lastMessageDate",
                                   problems),
                "first_user_message": None,
                "extra": to_json({k: e.get(k) for k in ("isEmpty", "lastResponseState", "initialLocation") if k in e}),
                "_source_path": source.path, "_run_id": ctx.run_id})
        except Exception as exc:  # noqa: BLE001 - an index entry of any shape
            res.reject(source.path, f"chat index entry could not be read: {exc}",
                       excerpt=ctx.excerpt(to_json({sid: e})))  # with its key: a key may name a secret
    if problems:
        res.reject(source.path, f"chat index kept; {problems.reason()}")
    res.n_records = len(res.rows.get("stg_session_meta", []))
    return res
