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

from ..vocabulary import (
    ABORT,
    ASSISTANT_MESSAGE,
    ASSISTANT_USAGE,
    AUTO_RESOLVED,
    FILE_EDITED,
    SESSION_ERROR,
    SESSION_START,
    TOOL_COMPLETE,
    USER_MESSAGE,
)
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


def workspace_folder(storage: Path, user: Path | None = None) -> str | None:
    """The folder a ``workspaceStorage/<hash>/`` belongs to, from its ``workspace.json``: its ``folder``;
    for a workspace file (``configuration`` / ``workspace``), the first folder the file names when it can be
    read (here or under ``user``'s ``../Workspaces/``), else the folder a saved ``.code-workspace`` file sits
    in. An untitled multi-root workspace (``<UserData>/Workspaces/<n>/workspace.json``) that cannot be read
    names no folder: its own folder is VS Code's, not the user's."""
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
    for key in ("configuration", "workspace"):
        value = doc.get(key)
        if isinstance(value, dict):
            value = value.get("configPath") or value.get("path")
        if not isinstance(value, str):
            continue
        file = folder_path(value)
        first = _first_workspace_folder(file, user)
        if first is not None:
            return first
        if _UNTITLED_WORKSPACE.search(file.replace("\\", "/")):
            return None
        return file.rsplit("/", 1)[0] if "/" in file else file
    return None


_UNTITLED_WORKSPACE = re.compile(r"/Workspaces/\d+/workspace\.json$")


def _first_workspace_folder(file: str, user: Path | None) -> str | None:
    """The first folder a workspace file names (``folders[0].path``, relative to the file, or ``.uri``),
    reading the file where its URI says or, for an untitled one, beside ``user`` (a copied User folder)."""
    cands = [Path(file)] if "://" not in file else []
    m = _UNTITLED_WORKSPACE.search(file.replace("\\", "/"))
    if m and user is not None:
        cands.append(user.parent / m.group(0).lstrip("/"))
    for cand in cands:
        try:
            raw = cand.read_bytes() if cand.is_file() else None
        except OSError:
            raw = None
        if raw is None:
            continue
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:  # a .code-workspace may hold comments and trailing commas
            text = re.sub(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', lambda x: x.group(1) or "",
                          raw.decode("utf-8", "replace"), flags=re.S)
            try:
                doc = orjson.loads(re.sub(r",(\s*[}\]])", r"\1", text))
            except orjson.JSONDecodeError:
                continue
        folders = doc.get("folders") if isinstance(doc, dict) else None
        for f in folders if isinstance(folders, list) else []:
            if isinstance(f, dict) and isinstance(f.get("uri"), str):
                return folder_path(f["uri"])
            if isinstance(f, dict) and isinstance(f.get("path"), str):
                target = f["path"]
                if not (target.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", target)):
                    target = os.path.normpath(os.path.join(os.path.dirname(file), target))
                return target
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
        folder = workspace_folder(Path(storage.path), user)
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
            ddir = ext.get("debug-logs")  # a folder per chat session (extract/debug_log.py)
            if ddir is not None and finder.is_dir(ddir):
                out.extend(Source(e.path, "debug_log", e.name, root, folder)
                           for e in finder.entries(ddir.path) if finder.is_dir(e))
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
            # VS Code's own session store (the CLI store's schema, sessions.host_type 'vscode'; behind an
            # experiment): read as the CLI's is, copied with its WAL (extract/store.py)
            ext = {e.name: e for e in finder.entries(chat_ext.path)}
            store, wal = ext.get("session-store.db"), ext.get("session-store.db-wal")
            if store is not None and finder.is_file(store):
                out.append(Source(store.path, "session_store", None, root))
            elif wal is not None and finder.is_file(wal):
                out.append(Source(wal.path, "orphan_wal", None, root))
            traces = ext.get("agent-traces.db")  # OpenTelemetry spans in SQLite (extract/traces.py)
            if traces is not None and finder.is_file(traces):
                out.append(Source(traces.path, "agent_traces", None, root))
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


_MODEL_PREFIXES = ("copilot/", "github.copilot-chat/")
# result.details: "<display name> • <premium multiplier>x" ("Grok Code Fast 1 • 1x", "GPT-4.1 • 0x")
_DETAILS = re.compile(r"^\s*(?P<name>[^•]*?)\s*(?:•\s*(?P<mult>\d+(?:\.\d+)?)x)?\s*$")
# what VS Code writes when generating a title failed: not a title
_FAILED_TITLE = re.compile(r"^(?:sure|certainly|of course|i'm sorry|sorry|i am sorry)\b[^.]*\b(?:provide|share)\b",
                           re.I)
# ResponseModelState (microsoft/vscode): 0 pending, 1 complete, 2 cancelled, 3 failed, 4 needs input
_CANCELLED, _FAILED = 2, 3
ERROR_PREFIX = "ERROR while calling tool:"


def model_id(value: object) -> str | None:
    """A model id without the client's prefix (``copilot/``, ``github.copilot-chat/``)."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    for prefix in _MODEL_PREFIXES:
        value = value.removeprefix(prefix)
    return value or None


def display_model(name: str) -> str | None:
    """A model's display name as its id: "Claude Sonnet 4.5" -> claude-sonnet-4.5, "Raptor mini (Preview)"
    -> raptor-mini, "GPT-5.3-Codex" -> gpt-5.3-codex."""
    name = re.sub(r"\((?:preview|beta|experimental)\)", "", name, flags=re.I)
    slug = re.sub(r"[\s_]+", "-", name.strip().lower()).strip("-")
    return slug or None


def request_models(req: dict) -> dict:
    """The model the user selected (``modelId``; ``auto`` stays auto), the one that answered (the selected
    one unless it is auto or missing; else the one ``result.details`` names, else
    ``result.metadata.resolvedModel``) and the premium-request multiplier ``result.details`` gives."""
    result = _d(req.get("result"))
    selected = model_id(req.get("modelId"))
    details = result.get("details")
    m = _DETAILS.match(details) if isinstance(details, str) else None
    named = display_model(m.group("name")) if m and m.group("name") else None
    resolved = model_id(_d(result.get("metadata")).get("resolvedModel"))
    fallback = selected if selected and selected.lower() != "auto" else None
    mult = float(m.group("mult")) if m and m.group("mult") else None
    return {"selected": selected, "answered": fallback or named or resolved, "multiplier": mult}


def request_status(req: dict) -> tuple[str, str | None, str | None]:
    """(ok | error | cancelled, error code, error message) of one chat request: ``result.errorDetails``,
    ``modelState`` (2 cancelled, 3 failed), ``isCanceled``, or a warning in place of an answer
    ("Chat setup failed.")."""
    result = _d(req.get("result"))
    err = _d(result.get("errorDetails"))
    state = _d(req.get("modelState")).get("value")
    if err or state == _FAILED:
        return "error", as_text(err.get("code")), as_text(err.get("message"))
    if state == _CANCELLED or req.get("isCanceled") is True:
        return "cancelled", None, None
    parts = [p for p in _l(req.get("response")) if isinstance(p, dict)]
    warnings = [as_text(_d(p.get("content")).get("value") if isinstance(p.get("content"), dict) else p.get("content"))
                for p in parts if p.get("kind") == "warning"]
    # the answer is looked at only when there is a warning: the caller renders it once for every request
    if warnings and not (any(p.get("kind") == "toolInvocationSerialized" for p in parts)
                         or _markdown_of(req.get("response"))):
        return "error", "warning", "\n".join(w for w in warnings if w) or None
    return "ok", None, None


def chat_title(value: object) -> str | None:
    """``customTitle``, unless it is what a failed title generation wrote."""
    if not isinstance(value, str) or not value.strip() or _FAILED_TITLE.match(value.strip()):
        return None
    return value


def result_text(entry: object) -> str | None:
    """The text a tool call gave the model (``toolCallResults[id]``): ``content`` parts that are text
    (``{"value": "..."}``) or a rendered prompt tree (``{"value": {"node": ...}}``, its text leaves joined)."""
    content = _d(entry).get("content") if isinstance(entry, dict) else entry
    out: list[str] = []

    def walk(node: object, depth: int = 0) -> None:
        if depth > 200:
            return
        if isinstance(node, dict):
            text = node.get("text")
            if isinstance(text, str):
                if node.get("lineBreakBefore") and out and not out[-1].endswith("\n"):
                    out.append("\n")
                out.append(text)
            for key in ("node", "children", "value"):
                if key in node and not isinstance(node[key], str):
                    walk(node[key], depth + 1)
        elif isinstance(node, list):
            for n in node:
                walk(n, depth + 1)

    for part in _l(content):
        value = part.get("value") if isinstance(part, dict) else part
        if isinstance(value, str):
            out.append(value)
        else:
            walk(value)
    return "".join(out) if out else (None if not isinstance(content, list) else "")


def _part_key(call_id: str) -> str:
    return _VSCODE_CALL_SUFFIX.sub("", call_id)


RESOURCES = "chat-session-resources"
MAX_STORED_OUTPUTS = 10_000  # content.txt files read per session at most


def stored_outputs(chat_file: str, session_id: str, ctx: Context, problems: Problems) -> dict[str, str]:
    """Tool outputs VS Code stored aside for a chat session of ``workspaceStorage/<hash>/chatSessions/``:
    ``GitHub.copilot-chat/chat-session-resources/<session>/<toolCallId>__vscode-<ms>/content.txt``, by call id
    (the ``__vscode-<ms>`` suffix dropped, as the calls' ids are). Read with the chat file: a new output comes
    with the chat file's next change."""
    folder = Path(chat_file).parent.parent / "GitHub.copilot-chat" / RESOURCES / session_id
    out: dict[str, str] = {}
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:  # none (the usual case), or not readable: the chat file's outputs stand
        return out
    for e in entries[:MAX_STORED_OUTPUTS]:
        path = os.path.join(e.path, "content.txt")
        if not e.is_dir() or not os.path.isfile(path):
            continue
        raw = read_bytes(path, limit=ctx.max_text * 4 + 1)
        out[_part_key(e.name)] = cap_text(raw.decode("utf-8", "replace"), ctx.max_text, "a stored tool output",
                                          problems)
    return out


def with_stored_outputs(events: list[dict], aside: dict[str, str]) -> list[dict]:
    """The completions of ``events`` with the output VS Code stored aside where the chat file has none, or less
    of it (a cut one)."""
    if not aside:
        return events
    for ev in events:
        data = ev.get("data")
        if ev.get("type") != TOOL_COMPLETE or not isinstance(data, dict) or data.get("toolCallId") not in aside:
            continue
        whole = aside[data["toolCallId"]]
        have = _d(data.get("result")).get("content")
        if isinstance(have, str) and len(have) >= len(whole):
            continue
        data["result"] = {"content": whole}
        if data.get("success") is None:  # it ran: its output says how
            data["success"] = not whole.lstrip().startswith(ERROR_PREFIX)
        if data["success"] is False:
            data["error"] = {"message": whole}
    return events


def _tool_calls(request: dict, deferred: list[dict] | None = None) -> tuple[list[dict], list[dict]]:
    """The tool calls of one request and the calls it left for the next (``maxToolCallsExceeded``).

    The model's calls are ``result.metadata.toolCallRounds`` (name, arguments, the round's time); what
    each returned is ``result.metadata.toolCallResults`` under the same id (a failure is a result that
    starts ``ERROR while calling tool:``); a call with no result did not run. The response's
    ``toolInvocationSerialized`` parts are VS Code's view of them: ids that may be UUIDs, context steps
    that are no call, none for a call that failed validation - never paired by position. Files without
    rounds (older versions, a "Continue" click) have only the parts: those are the calls, their success
    ``isComplete``; a part that ran a call deferred by the request before completes that call."""
    parts = [p for p in _l(request.get("response")) if isinstance(p, dict)
             and p.get("kind") == "toolInvocationSerialized"]
    meta = _d(_d(request.get("result")).get("metadata"))
    results = _d(meta.get("toolCallResults"))
    rid = request.get("requestId")
    out, left = [], []
    rounds = [r for r in _l(meta.get("toolCallRounds")) if isinstance(r, dict)]
    calls = [(c, r.get("timestamp")) for r in rounds for c in _l(r.get("toolCalls")) if isinstance(c, dict)]
    if calls:
        for i, (c, at) in enumerate(calls):
            raw_id = str(c.get("id") or f"{rid}:{i}")
            call = {"toolCallId": _part_key(raw_id), "name": c.get("name"), "arguments": c.get("arguments"),
                    "at": at, "success": None, "output": None}
            if raw_id in results or call["toolCallId"] in results:
                text = result_text(results.get(raw_id, results.get(call["toolCallId"])))
                call["output"] = text
                call["success"] = not (text or "").lstrip().startswith(ERROR_PREFIX)
            elif meta.get("maxToolCallsExceeded"):
                left.append(call)
                continue
            out.append(call)
        return out, left
    pending = list(deferred or [])
    for i, p in enumerate(parts):  # no rounds: the file a tool read is in its message
        done = p.get("isComplete") if isinstance(p.get("isComplete"), bool) else None
        match = next((c for c in pending if c["name"] == p.get("toolId")), None)
        if match is not None:
            pending.remove(match)
            out.append(dict(match, success=done))
            continue
        msg = as_text(_d(p.get("invocationMessage")).get("value") if isinstance(p.get("invocationMessage"), dict)
                      else p.get("invocationMessage")) or ""
        uri = _FILE_URI.search(msg)
        out.append({"toolCallId": str(p.get("toolCallId") or f"{rid}:{i}"), "name": p.get("toolId"),
                    "arguments": {"filePath": uri.group(1)} if uri else None, "at": None, "success": done,
                    "output": None})
    return out, []


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
    the wrong shape raises when converted, so the caller can reject it alone. A tool call is dated by
    its round (when the model asked for it); a chat session does not record when a call ran."""
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
    deferred: list[dict] = []

    def convert(req: object, n: int) -> list[dict]:
        nonlocal deferred
        events, deferred = _request_events(req, n, problems, deferred)
        return events

    for n, req in enumerate(_l(requests)):
        yield f"request {n + 1}", req, lambda req=req, n=n: convert(req, n)


def _request_events(req: dict, n: int, problems: Problems | None,
                    deferred: list[dict] | None = None) -> tuple[list[dict], list[dict]]:
    if not isinstance(req, dict):
        raise ValueError(f"it is {type(req).__name__}, not an object")
    ts = req.get("timestamp")
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        ts = None
    message = req.get("message")
    text = message.get("text") if isinstance(message, dict) else as_text(message)
    rid = req.get("requestId") if isinstance(req.get("requestId"), str) and req["requestId"] else f"request-{n}"
    click = req.get("confirmation") if isinstance(req.get("confirmation"), str) and req["confirmation"] else None
    models = request_models(req)
    user = {"content": as_text(text), "interactionId": rid,
            **({"selectedModel": models["selected"]} if models["selected"] else {})}
    if click:  # "Continue" / "Try Again": a button, not a prompt
        user.update(source="button", confirmation=click)
    events = [{"type": USER_MESSAGE, "id": f"{rid}:user", "timestamp": _iso(ts, "timestamp", problems), "data": user}]
    result = _d(req.get("result"))
    elapsed = _d(result.get("timings")).get("totalElapsed")
    done = ts + elapsed if ts is not None and isinstance(elapsed, (int, float)) and not isinstance(elapsed, bool) \
        else ts
    done_at = _iso(done, "timings", problems)
    calls, left = _tool_calls(req, deferred)
    model = models["answered"]
    tokens = _request_tokens(req)
    status, code, error = request_status(req)
    content = _markdown_of(req.get("response"))
    if models["selected"] and models["selected"].lower() == "auto" and model:
        events.append({"type": AUTO_RESOLVED, "id": f"{rid}:auto", "timestamp": done_at,
                       "data": {"chosenModel": model}})
    # a request that failed before any answer (rate limit, setup) is no answered request
    answered = bool(result or content or calls) and not (status == "error" and not content and not calls)
    if answered:
        events.append({"type": ASSISTANT_MESSAGE, "id": f"{rid}:assistant", "timestamp": done_at,
                       "data": {"content": content, "model": model, "interactionId": rid,
                                "toolRequests": [{"toolCallId": c["toolCallId"], "name": c["name"],
                                                  "arguments": c["arguments"], "timestamp": _iso(c["at"])}
                                                 for c in calls],
                                "outputTokens": tokens.get("outputTokens"), "requestId": rid,
                                "vote": req.get("vote"),
                                "isCanceled": req.get("isCanceled")}})
        events.append({"type": ASSISTANT_USAGE, "id": f"{rid}:usage", "timestamp": done_at,
                       "data": {"model": model, "apiCallId": rid, **tokens,
                                **({"cost": models["multiplier"]} if models["multiplier"] is not None else {})}})
    if status == "error":
        events.append({"type": SESSION_ERROR, "id": f"{rid}:error", "timestamp": done_at,
                       "data": {"errorType": code, "message": error, "interactionId": rid}})
    elif status == "cancelled":
        events.append({"type": ABORT, "id": f"{rid}:abort", "timestamp": done_at,
                       "data": {"reason": "cancelled", "interactionId": rid}})
    for c in calls:
        data = {"toolCallId": c["toolCallId"], "toolName": c["name"], "success": c["success"], "model": model}
        if c["output"] is not None:
            data["result"] = {"content": c["output"]}
            if c["success"] is False:
                data["error"] = {"message": c["output"]}
        events.append({"type": TOOL_COMPLETE, "id": f"{rid}:{c['toolCallId']}", "timestamp": None, "data": data})
    for k, e in enumerate(_l(req.get("editedFileEvents"))):
        uri = e.get("uri") if isinstance(e, dict) else None
        path = uri.get("path") or uri.get("external") if isinstance(uri, dict) else uri
        if isinstance(path, str) and path:
            events.append({"type": FILE_EDITED, "id": f"{rid}:edit:{k}", "timestamp": done_at,
                           "data": {"arguments": {"path": path}, "eventKind": e.get("eventKind")}})
    return events, left


def _request_tokens(req: dict) -> dict:
    """Token counts a request records: ``promptTokens`` / ``completionTokens`` on the request (0.45),
    in ``result.usage`` (0.37) or ``result.metadata`` (``promptTokens`` / ``outputTokens``, 0.38). Empty
    when it records none."""
    result = _d(req.get("result"))
    sources = (req, _d(result.get("usage")), _d(result.get("metadata")))
    out = {}
    for key, names in (("inputTokens", ("promptTokens", "prompt_tokens", "inputTokens")),
                       ("outputTokens", ("completionTokens", "completion_tokens", "outputTokens"))):
        for src in sources:
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
    if isinstance(doc.get("requests"), list) and not doc["requests"]:
        # an empty stub (a chat view opened, nothing asked): no session
        log.debug("%s: chat session without a request; not a session", source.path)
        res.n_records = 0
        res.last_good_offset = os.path.getsize(source.path)
        return res
    index = 0
    aside = stored_outputs(source.path, sid, ctx, problems)
    try:
        for where, raw, events in chat_events(doc, sid, source.workspace, problems):
            try:
                rows = [event_rows(ev, session_id=sid, source_kind="chat_session", index=index + i, line=index + i + 1,
                                   offset=None, source_path=source.path, ctx=ctx, problems=problems)
                        for i, ev in enumerate(with_stored_outputs(events(), aside))]
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
    title = chat_title(doc.get("customTitle"))
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
            title = chat_title(e.get("title"))
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
