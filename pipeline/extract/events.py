"""Readers for Copilot CLI event logs: ``session-state/<id>/events.jsonl``, the legacy flat
``session-state/<id>.jsonl`` and the legacy ``history-session-state/session_<id>_<ms>.json``."""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path

import orjson

from ..redact import literal_lines, screen_lines
from ..schema import COUNT, RESULT_HEAD_CHARS
from ..vocabulary import (
    ASSISTANT_MESSAGE,
    BINARY_ASSET,
    REASONING_TYPES,
    SESSION_ERROR,
    SESSION_START,
    SYSTEM_MESSAGE,
    TOOL_COMPLETE,
    TOOL_COMPLETIONS,
    TOOL_START,
    USER_MESSAGE,
)
from .base import (
    FORBIDDEN_BYTES,
    Context,
    Prior,
    Problems,
    ReadResult,
    Source,
    as_text,
    bigint,
    cap_texts,
    keep,
    load_json_file,
    ordered_json,
    reader,
    scrub,
    to_json,
)
from .jsonl import Budget, ReadState, Record, iter_jsonl, windows

log = logging.getLogger(__name__)


# Fields lifted into their own columns; what remains of `data` goes to `extra`.
_LIFTED = {"content", "model", "interactionId", "turnId", "toolCallId", "toolName", "name", "arguments",
           "success", "error", "result", "parentToolCallId", "mcpServerName", "outputTokens", "requestId",
           "toolRequests", "apiCallId"}
# of a session.binary_asset: its id (``sha256:<hex of the bytes>``), type, MIME type and size
_ASSET_KEPT = ("assetId", "type", "mimeType", "byteLength")


def event_rows(obj: dict, *, session_id: str, source_kind: str, index: int, line: int, offset: int,
               source_path: str, ctx: Context, screen: tuple[bool, bool] = (True, True),
               problems: Problems | None = None) -> tuple[dict, list[dict]]:
    """One stg_events row (and its stg_tool_requests rows) from one parsed event envelope.

    ``screen`` says whether the event's raw line may hold a secret and a forbidden key (see
    ``read_event_log``); text of a line cleared of both is stored as it is, without the rules.
    Every field may have any JSON type: what does not fit its column is text or NULL (a number
    out of range is noted in ``problems``). On a line that may hold a secret every text goes
    through the rules, identifiers included.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"an entry that is {type(obj).__name__}, not an object")
    may_hold_secret, may_hold_forbidden = screen
    redact = ctx.redact if may_hold_secret else keep
    clean = (lambda v: scrub(v, redact)) if may_hold_secret or may_hold_forbidden else keep
    etype = obj.get("type")
    etype = etype if isinstance(etype, str) else None
    data = obj.get("data")
    if not isinstance(data, dict):
        data = {"value": data} if data is not None else {}

    content = None
    if etype not in REASONING_TYPES:
        content = as_text(data.get("content"))
    result = data.get("result")
    result_content = None
    if isinstance(result, dict):
        result_content = as_text(result.get("content"))
    elif result is not None:
        result_content = as_text(result)
    error = data.get("error")
    error_message = as_text(error.get("message")) if isinstance(error, dict) else as_text(error)
    if etype == SESSION_ERROR and error_message is None:
        error_message = as_text(data.get("message"))
    args = data.get("arguments")
    tool_name = data.get("toolName")
    if tool_name is None and etype != "skill.invoked":
        tool_name = data.get("name") if etype in (TOOL_START, *TOOL_COMPLETIONS) else None
    success = data.get("success")
    out_tokens = data.get("outputTokens")

    extra = {k: v for k, v in data.items() if k not in _LIFTED}
    if etype in REASONING_TYPES:  # reasoning text, whatever the field: only its id is kept
        extra = {k: v for k, v in extra.items() if k == "reasoningId"}
    elif etype == BINARY_ASSET:  # the image itself (base64, up to ~600 KB a line) is not kept: what it was
        extra = {k: v for k, v in extra.items() if k in _ASSET_KEPT}
        if "byteLength" not in extra and isinstance(data.get("data"), str):
            extra["base64Chars"] = len(data["data"])
    if isinstance(result, dict):
        # detailedContent usually repeats content word for word: kept only when it says more
        rest = {k: v for k, v in result.items()
                if k != "content" and not (k == "detailedContent" and v == result.get("content"))}
        if rest:
            extra["result"] = rest
    if isinstance(error, dict):
        rest = {k: v for k, v in error.items() if k != "message"}
        if rest:
            extra["error"] = rest
    for key in ("agentId", "ephemeral"):
        if key in obj:
            extra.setdefault("_envelope", {})[key] = obj[key]

    # identifiers come from the same line: on a flagged line they go through the rules too
    ident = (lambda v: redact(_str(v))) if may_hold_secret else _str
    result_content = redact(result_content)
    row = {
        "session_id": session_id,
        "source_kind": source_kind,
        "event_index": index,
        "event_id": ident(obj.get("id")),
        "parent_id": ident(obj.get("parentId")),
        "event_type": ident(etype),
        "ts": ident(obj.get("timestamp")),
        "agent_id": ident(obj.get("agentId")),
        "content": redact(content),
        "model": ident(data.get("model")),
        "interaction_id": ident(data.get("interactionId")),
        "turn_id": ident(data.get("turnId")),
        "tool_call_id": ident(data.get("toolCallId")),
        "tool_name": ident(tool_name),
        "arguments": _args_json(args, redact, clean),
        "success": success if isinstance(success, bool) else None,
        "error_message": redact(error_message),
        "result_content": None,  # set below, when result_head does not hold the whole output
        "parent_tool_call_id": ident(data.get("parentToolCallId")),
        "mcp_server_name": ident(data.get("mcpServerName")),
        "output_tokens": bigint(out_tokens, "outputTokens", problems, COUNT),
        "request_id": ident(data.get("requestId")),
        "api_call_id": ident(data.get("apiCallId") or data.get("serviceRequestId")),
        "extra": ordered_json(clean(extra)) if extra else None,
        "_source_path": source_path,
        "_source_line": line,
        "_source_offset": offset,
        "_run_id": ctx.run_id,
        **result_facts(result_content),
    }
    if etype == SYSTEM_MESSAGE and row["content"] is not None and len(row["content"]) >= TEXT_KEY_MIN_CHARS:
        row["content_key"] = text_key(row["content"])  # its text stored once (load.spool)
    if row["result_chars"] is not None and len(row["result_head"]) < row["result_chars"]:
        row["result_content"] = result_content  # an output longer than its head: the whole of it, once
    requests = []
    tool_requests = data.get("toolRequests")
    if etype == ASSISTANT_MESSAGE and isinstance(tool_requests, list):
        for i, req in enumerate(tool_requests):
            if not isinstance(req, dict):
                continue
            function = req.get("function") if isinstance(req.get("function"), dict) else {}
            requests.append({
                "session_id": session_id, "event_index": index, "request_index": i,
                "tool_call_id": ident(req.get("toolCallId") or req.get("id")),
                "tool_name": ident(req.get("name") or function.get("name")),
                "arguments": _args_json(req.get("arguments", function.get("arguments")), redact, clean),
                # a VS Code round dates its own calls; a CLI request is its message's
                "ts": ident(req.get("timestamp")) or row["ts"], "model": row["model"],
                "mcp_server_name": ident(req.get("mcpServerName")),
                "_source_path": source_path, "_source_line": line, "_run_id": ctx.run_id,
            })
    return row, requests


# white space as the star's test for numbered lines sees it (Unicode White_Space: polars' and RE2's \s
# with \pZ), which a tool output's head must reach past (see result_facts)
_WHITE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"


# a system prompt this long or longer is staged once (stg_texts), its events naming it by key
TEXT_KEY_MIN_CHARS = 4096
_KEYS: dict[str, str] = {}  # the keys of the last texts seen (a history repeats one prompt thousands of times)


def text_key(text: str) -> str:
    """The key of a text stored once: the MD5 of its UTF-8 bytes, hex (as ``result_md5``)."""
    key = _KEYS.get(text)
    if key is None:
        key = hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()
        if len(_KEYS) >= 64:
            _KEYS.pop(next(iter(_KEYS)))
        _KEYS[text] = key
    return key


def result_facts(text: str | None) -> dict:
    """What the star reads of a tool output instead of the whole of it: its length in characters, the
    MD5 of its UTF-8 bytes and its head - the first RESULT_HEAD_CHARS characters, or up to the first two
    that are not white space when those come later (a `view` of a file starts with a numbered line). An
    output the head holds whole is stored there only; a longer one, already redacted, in ``result_content``
    (each output's text stored once: on the bench's `events` corpus, of short outputs, the copy in both
    columns cost the stage 3.5-4 s of 45)."""
    if text is None:
        return {"result_chars": None, "result_md5": None, "result_head": None}
    text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")  # as it will be stored
    head = text if len(text) <= RESULT_HEAD_CHARS else text[:max(RESULT_HEAD_CHARS, len(text) - len(
        text.lstrip(_WHITE)) + 2)]
    return {"result_chars": len(text), "result_md5": hashlib.md5(text.encode("utf-8")).hexdigest(),
            "result_head": head}


def _str(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return to_json(v) if isinstance(v, (dict, list)) else str(v)


def _args_json(args: object, redact: Callable, clean: Callable) -> str | None:
    """Tool arguments as JSON text. VS Code transcripts give them as a JSON string already."""
    if args is None:
        return None
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return ordered_json(redact(args))
    return ordered_json(clean(args))


def read_event_log(source: Source, ctx: Context, prior: Prior | None, source_kind: str) -> ReadResult:
    res = ReadResult()
    start, line, index, res.appended = resume_point(source.path, prior)
    state = read_span(res, source, ctx, source_kind, start, line, index, Budget())
    res.last_good_offset, res.good_line, res.pending_tail = state.good_offset, state.good_line, state.pending_tail
    return res


def resume_point(path: str, prior: Prior | None) -> tuple[int, int, int, bool]:
    """Where reading a log starts: (byte offset, line, index of its first new event, whether its rows continue
    the rows read before) - after what was read of it when it only grew since (``is_append``), else its start."""
    if prior is not None and prior.last_good_offset and is_append(path, prior):
        return prior.last_good_offset, prior.good_line, prior.n_records, True
    return 0, 1, 0, False


def read_span(res: ReadResult, source: Source, ctx: Context, source_kind: str, start: int, line: int, index: int,
              budget: Budget, stop: int | None = None) -> ReadState:
    """Read a log's records from byte ``start`` (at ``line``, the first being event ``index``) into ``res``, to
    the end of the file or up to ``stop`` (the end of a line: a part of a large log read beside its other parts,
    ``extract.parallel``); ``budget`` is what rejoining broken events may still spend in the file. Returns where
    reading stopped (``more``: at a line before ``stop`` that may be an event running past it); ``res.n_records``
    is the index after the last event."""
    sid = source.session_id
    pieces = windows(source.path, start, stop=stop)  # a grown log: only the new bytes; a large one a piece at a time
    piece = next(pieces)
    while True:
        base, data, final = piece
        state = ReadState(base, line)
        # an RE2 scan of the piece's bytes finds the physical lines that may hold a secret, a search for each
        # forbidden key those that may hold one, and the rules and the scrubbing walk run only for the events on them (a
        # text lies within its event's bytes, so a screen match for it touches one of the event's lines)
        starts = [0]
        nl = data.find(b"\n")
        while nl != -1:
            starts.append(nl + 1)
            nl = data.find(b"\n", nl + 1)
        secret_lines = screen_lines(data, starts) if ctx.redact.enabled else set()
        forbidden_lines = literal_lines(data, starts, FORBIDDEN_BYTES)
        n_starts = len(starts)
        for item in iter_jsonl(data, 0, line, state, base=base, final=final, budget=budget):
            if isinstance(item, Record):
                first = item.line - line
                last = first + item.n_lines
                end = starts[last] if last < n_starts else len(data)
                raw = data[starts[first]:end]
                hits = (_touches(secret_lines, first, last), _touches(forbidden_lines, first, last))
                if record_rows(res, item.obj, raw, hits, note=item.note, line=item.line, offset=item.offset,
                               index=index, session_id=sid, source_kind=source_kind, path=source.path, ctx=ctx):
                    index += 1
            else:
                res.reject(source.path, item.reason, line=item.line, offset=item.offset,
                           excerpt=ctx.excerpt(item.excerpt))
        del data, starts, secret_lines, forbidden_lines
        if final:
            break
        ctx.spill(res, state.good_offset - base)  # a log read in pieces: its rows leave memory as it goes
        line = state.good_line
        try:
            piece = pieces.send(state.good_offset)
        except StopIteration:  # ``stop`` reached
            break
    res.n_records = index
    return state


def _touches(lines: set[int], first: int, last: int) -> bool:
    """Whether any of the lines ``first`` .. ``last - 1`` is in ``lines``."""
    return bool(lines) and any(i in lines for i in range(first, last))


def record_rows(res: ReadResult, obj: dict, raw: bytes, screen_hits: tuple[bool, bool], *, note: str, line: int,
                offset: int, index: int, session_id: str | None, source_kind: str, path: str, ctx: Context) -> bool:
    """Add one parsed log record's rows (or its reject) to ``res``; whether it became an event.
    ``raw`` is the record's bytes, ``screen_hits`` what the line screens found in them."""
    problems = Problems()
    if note:
        problems.note(note)
    try:  # one record that cannot be converted is a reject; the rest of the file goes on
        if len(raw) > ctx.max_text:  # only a line this long can hold a text this long
            cap_texts(obj, ctx.max_text, problems)
        row, reqs = event_rows(obj, session_id=session_id, source_kind=source_kind, index=index, line=line,
                               offset=offset, source_path=path, ctx=ctx, screen=screen_hits, problems=problems)
    except Exception as exc:  # noqa: BLE001 - any value of any type may be in a hostile line
        res.reject(path, f"event could not be read: {_error(exc)}", line=line, offset=offset,
                   excerpt=ctx.excerpt(raw))
        return False
    if problems:
        res.reject(path, f"event kept; {problems.reason()}", line=line, offset=offset, excerpt=ctx.excerpt(raw))
    res.add("stg_events", row)
    for r in reqs:
        res.add("stg_tool_requests", r)
    return True


def _error(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def tail_digest(path: str, offset: int) -> str:
    """Digest of the 4 KiB that end at ``offset``: with the head digest (``head_and_tail_digests``), the content
    check of a log whose size and mtime did not change."""
    with open(path, "rb") as fh:
        fh.seek(max(0, offset - 4096))
        return hashlib.md5(fh.read(min(offset, 4096))).hexdigest()


def head_and_tail_digests(path: str, offset: int) -> tuple[str, str]:
    """Digests of a file's first 4 KiB and of its ``tail_digest`` at ``offset``, from one open."""
    with open(path, "rb") as fh:
        head = hashlib.md5(fh.read(4096)).hexdigest()
        fh.seek(max(0, offset - 4096))
        return head, hashlib.md5(fh.read(min(offset, 4096))).hexdigest()


# (the file as its stat names it, offset, XXH3 state) of the last prefix digested in this process: a grown log's
# prefix is digested to check it before it is read, and the longer prefix again after; the second continues from
# the first (one pass over a 524 MB log instead of two, 0.12-0.17 s each) while the file is the one its stat named
# then (path, device, inode, size, mtime and ctime: any write in between makes it digest from the start)
_LAST_PREFIX: list = []


def prefix_digest(path: str, offset: int) -> str:
    """XXH3-128 of every byte before ``offset``: what was read of a log is still there, byte for byte."""
    import xxhash

    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        start, h = 0, None
        if _LAST_PREFIX and _LAST_PREFIX[0] == key and _LAST_PREFIX[1] <= offset:
            start, h = _LAST_PREFIX[1], _LAST_PREFIX[2].copy()
        h = h or xxhash.xxh3_128()
        fh.seek(start)
        left = offset - start
        while left > 0:
            chunk = fh.read(min(left, 8 * 1024 * 1024))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    _LAST_PREFIX[:] = [key, offset - left, h.copy()]
    return h.hexdigest()


def is_append(path: str, prior: Prior) -> bool:
    """The file grew and every byte up to the last good offset is what was read before (an edit before it,
    even one that keeps the size, as `sed -i` does, reads the file whole again)."""
    size = Path(path).stat().st_size
    if size < prior.size or size < prior.last_good_offset or not prior.prefix_digest:
        return False
    return prior.tail_digest == tail_digest(path, prior.last_good_offset) and \
        prior.prefix_digest == prefix_digest(path, prior.last_good_offset)


@reader("events")
def read_events(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    return read_event_log(source, ctx, prior, "events")


@reader("legacy_jsonl")
def read_legacy_jsonl(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    return read_event_log(source, ctx, prior, "legacy_jsonl")


_HISTORY_NAME = re.compile(r"^session_(?P<id>.+?)_(?P<ms>\d{10,})$")


def history_session_id(path: str) -> str:
    stem = Path(path).stem
    m = _HISTORY_NAME.match(stem)
    return m.group("id") if m else stem


@reader("history_json")
def read_history_json(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    """Legacy CLI 0.0.3xx ``history-session-state/session_<id>_<ms>.json`` (timeline format)."""
    res = ReadResult()
    problems = Problems()
    doc = load_json_file(source, res, ctx, problems)
    if doc is None:
        return res
    sid = doc.get("sessionId") if isinstance(doc.get("sessionId"), str) and doc["sessionId"] else source.session_id
    index = 0
    for position, ev in _history_events(doc):
        try:
            row, reqs = event_rows(ev, session_id=sid, source_kind="history_json", index=index, line=None,
                                   offset=None, source_path=source.path, ctx=ctx, problems=problems)
        except Exception as exc:  # noqa: BLE001 - a timeline entry of any shape
            res.reject(source.path, f"{position} could not be read: {_error(exc)}", excerpt=ctx.excerpt(str(ev)))
            continue
        row["_source_line"] = index + 1  # position in the synthesized event list
        res.add("stg_events", row)
        for r in reqs:
            res.add("stg_tool_requests", r)
        index += 1
    if problems:
        res.reject(source.path, f"file kept; {problems.reason()}")
    res.n_records = index
    res.last_good_offset = os.path.getsize(source.path)
    return res


def _history_events(doc: dict):
    """Translate the legacy timeline (or OpenAI-style chatMessages) into CLI events, as (where in
    the file, event) pairs; entries of the wrong shape are passed on for the caller to reject."""
    def d(v: object) -> dict:
        return v if isinstance(v, dict) else {}

    start = doc.get("startTime")
    yield "startTime", {"type": SESSION_START, "timestamp": start,
                        "data": {"sessionId": doc.get("sessionId"), "startTime": start,
                                 "producer": "copilot-cli-legacy"}}
    timeline = doc.get("timeline")
    if isinstance(timeline, list) and timeline:
        for n, item in enumerate(timeline):
            where = f"timeline entry {n + 1}"
            if not isinstance(item, dict):
                yield where, item  # rejected by the caller: not an object
                continue
            kind, ts, eid = item.get("type"), item.get("timestamp"), item.get("id")
            if kind == "user":
                yield where, {"type": USER_MESSAGE, "id": eid, "timestamp": ts, "data": {"content": item.get("text")}}
            elif kind == "copilot":
                yield where, {"type": ASSISTANT_MESSAGE, "id": eid, "timestamp": ts,
                              "data": {"content": item.get("text")}}
            elif kind == "tool_call_completed":
                result = d(item.get("result"))
                status = result.get("type")
                data = {"toolCallId": item.get("callId"), "toolName": item.get("name"),
                        "arguments": item.get("arguments"),
                        "success": None if status is None else status == "success",
                        "result": {"content": result.get("log")},
                        "toolTitle": item.get("toolTitle"), "intentionSummary": item.get("intentionSummary")}
                if status not in (None, "success"):
                    data["error"] = {"message": as_text(result.get("log")) or str(status)}
                yield where, {"type": TOOL_START, "id": eid, "timestamp": ts,
                              "data": {k: data[k] for k in ("toolCallId", "toolName", "arguments")}}
                yield where, {"type": TOOL_COMPLETE, "id": eid, "timestamp": ts, "data": data}
            elif kind == "info":
                yield where, {"type": "session.info", "id": eid, "timestamp": ts, "data": {"message": item.get("text")}}
            else:
                yield where, {"type": f"legacy.{kind}", "id": eid, "timestamp": ts, "data": item}
        return
    messages = doc.get("chatMessages")
    for i, msg in enumerate(messages if isinstance(messages, list) else []):
        where = f"chat message {i + 1}"
        if not isinstance(msg, dict):
            yield where, msg
            continue
        role = msg.get("role")
        if role == "user":
            yield where, {"type": USER_MESSAGE, "timestamp": None, "data": {"content": as_text(msg.get("content"))}}
        elif role == "assistant":
            calls = msg.get("tool_calls") if isinstance(msg.get("tool_calls"), list) else []
            reqs = [{"toolCallId": c.get("id") or f"call-{i}-{j}", "name": d(c.get("function")).get("name"),
                     "arguments": d(c.get("function")).get("arguments")}
                    for j, c in enumerate(calls) if isinstance(c, dict)]
            yield where, {"type": ASSISTANT_MESSAGE, "timestamp": None,
                          "data": {"content": as_text(msg.get("content")), "toolRequests": reqs}}
        elif role == "tool":
            yield where, {"type": TOOL_COMPLETE, "timestamp": None,
                          "data": {"toolCallId": msg.get("tool_call_id"), "toolName": msg.get("name"),
                                   "result": {"content": as_text(msg.get("content"))}}}
