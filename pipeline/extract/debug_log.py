"""VS Code Copilot Chat agent debug logs: ``workspaceStorage/<hash>/GitHub.copilot-chat/debug-logs/<session>/``.

With ``github.copilot.chat.agentDebugLog.fileLogging.enabled`` (off by default), Copilot Chat writes one folder
per chat session: ``main.jsonl``, one log per sub-agent run (``<label>-<toolCallId>.jsonl``, its
``session_start`` naming the parent session) and ``models.json`` (the model catalogue at the session's start).
Each line is ``{ts, dur, sid, type, name, spanId, parentSpanId, status, attrs}``. An ``llm_request`` line is one
model call with its model, tokens (``inputTokens`` includes ``cachedTokens``), time to the first token and its
exact cost, ``copilotUsageNanoAiu``: the only per-request cost VS Code leaves on disk. Those lines become
``stg_debug_requests`` rows (a sub-agent's under its parent session), and the usage model takes them before the
chat session's own per-request figures (``transform/usage.py``), so no request counts twice.

Prompts, answers and tool calls come from the chat session file; the debug log's own (``user_message``,
``agent_response``, ``tool_call``) are not read: their ``attrs`` were empty in every log seen so far (the public
fixtures strip them). Copilot Chat 0.45 writes only ``session_start`` lines: such a folder is no session.
"""

from __future__ import annotations

import os

from ..schema import COUNT
from .base import (
    Context,
    Prior,
    Problems,
    ReadResult,
    Source,
    bigint,
    epoch_ms_iso,
    json_objects,
    read_bytes,
    reader,
)
from .jsonl import TOO_DEEP, Record, loads_cut

SOURCE_KIND = "vscode_debug_log"
MAIN = "main.jsonl"
MAX_MODELS_BYTES = 16 * 1024 * 1024  # models.json (38 KB seen)


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _logs(folder: str) -> list[str]:
    """The folder's logs: main.jsonl first, then the sub-agents' in name order."""
    names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".jsonl") and e.is_file())
    return sorted(names, key=lambda n: n != MAIN)


def _multipliers(path: str, res: ReadResult, ctx: Context) -> dict[str, float]:
    """``models.json``: each model's premium-request multiplier (``billing.multiplier``)."""
    if not os.path.isfile(path):
        return {}
    raw = read_bytes(path, limit=MAX_MODELS_BYTES + 1)
    models, _cut = loads_cut(raw.lstrip(b"\xef\xbb\xbf").rstrip(b"\x00 \r\n\t")) \
        if len(raw) <= MAX_MODELS_BYTES else (None, False)
    if models is None or models is TOO_DEEP:
        res.reject(path, "models.json is not valid JSON (or larger than 16 MB): no multipliers read",
                   excerpt=ctx.excerpt(raw[:400]))
        return {}
    out = {}
    for m in models if isinstance(models, list) else []:
        billing = m.get("billing") if isinstance(m, dict) else None
        mult = billing.get("multiplier") if isinstance(billing, dict) else None
        if isinstance(m.get("id"), str) and isinstance(mult, (int, float)) and not isinstance(mult, bool) \
                and 0 <= mult < 1e6:
            out[m["id"]] = float(mult)
    return out


@reader("debug_log")
def read_debug_log(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()
    folder = source.path
    multipliers = _multipliers(os.path.join(folder, "models.json"), res, ctx)
    for name in _logs(folder):
        path = os.path.join(folder, name)
        log = {"is_subagent": name != MAIN, "agent": None, "version": None}
        for item, obj, excerpt in json_objects(path, res, ctx):  # a window at a time
            attrs = obj.get("attrs") if isinstance(obj.get("attrs"), dict) else {}
            kind = obj.get("type")
            if kind == "session_start":
                log["version"] = _str(attrs.get("copilotVersion")) or log["version"]
                if _str(attrs.get("parentSessionId")):
                    log["is_subagent"], log["agent"] = True, _str(attrs.get("label"))
            elif kind == "llm_request":
                problems = Problems()
                if item.note:
                    problems.note(item.note)
                res.add("stg_debug_requests", _request(source, path, item, obj, attrs, log, multipliers, problems,
                                                       ctx))
                if problems:
                    res.reject(path, f"request kept; {problems.reason()}", line=item.line, offset=item.offset,
                               excerpt=excerpt())
    requests = res.rows.get("stg_debug_requests")
    if requests:  # a folder of nothing but session_start lines is no session
        times = sorted(r["requested_at"] for r in requests if r["requested_at"])
        res.add("stg_session_meta", debug_log_meta(source, ctx.run_id, times[0] if times else None,
                                                   times[-1] if times else None))
    return res


def _request(source: Source, path: str, item: Record, obj: dict, attrs: dict, log: dict,
             multipliers: dict[str, float], problems: Problems, ctx: Context) -> dict:
    model = _str(attrs.get("model"))
    if model is None and isinstance(obj.get("name"), str) and obj["name"].startswith("chat:"):
        model = obj["name"][len("chat:"):] or None

    def count(key: str) -> int | None:
        return bigint(attrs.get(key), key, problems, COUNT)
    return {
        "session_id": source.session_id, "source_kind": SOURCE_KIND,
        "span_id": _str(obj.get("spanId")), "parent_span_id": _str(obj.get("parentSpanId")),
        "requested_at": epoch_ms_iso(obj.get("ts"), "ts", problems),
        "duration_ms": bigint(obj.get("dur"), "dur", problems, COUNT), "ttft_ms": count("ttft"),
        "model": model, "debug_name": _str(attrs.get("debugName")),
        "input_tokens": count("inputTokens"), "output_tokens": count("outputTokens"),
        "cache_read_tokens": count("cachedTokens"), "nano_aiu": count("copilotUsageNanoAiu"),
        "request_multiplier": multipliers.get(model) if model else None,
        "status": _str(obj.get("status")), "is_subagent": log["is_subagent"], "agent": log["agent"],
        "copilot_version": log["version"],
        "_source_path": path, "_source_line": item.line, "_run_id": ctx.run_id,
    }


def debug_log_meta(source: Source, run_id: str, first: str | None, last: str | None) -> dict:
    """The stg_session_meta row of a debug log with requests: its session, workspace folder and the time of its
    first and last request."""
    return {"session_id": source.session_id, "source_kind": SOURCE_KIND, "title": None, "summary": None,
            "cwd": source.workspace, "git_root": None, "repository": None, "branch": None, "host_type": "vscode",
            "client_name": "vscode", "created_at": first, "updated_at": last, "first_user_message": None,
            "extra": None, "_source_path": source.path, "_run_id": run_id}
