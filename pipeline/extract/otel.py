"""Copilot's OpenTelemetry file export: ``otel/*.jsonl`` in the Copilot home.

With ``COPILOT_OTEL_FILE_EXPORTER_PATH=<file>`` (CLI 1.0.4+; the desktop app and VS Code have their own settings)
Copilot appends its spans and metrics to a JSONL file; no path is the default, and ``~/.copilot/otel/`` is where
people put them. A span is ``{type: "span", traceId, spanId, parentSpanId, name, startTime: [s, ns], endTime,
attributes, status, events, resource}`` (VS Code leaves ``type`` out). Only the leaf ``chat <model>`` spans are
read: one per model request, with the session (``gen_ai.conversation.id``), the model, the tokens, the exact cost
(``github.copilot.nano_aiu``), the premium multiplier (``github.copilot.cost``: not money), the initiator, the turn
and the time to the first chunk. An ``invoke_agent`` span repeats its children's totals and metrics are cumulative
re-exports: neither is read, so nothing counts twice. Token attributes were renamed in CLI 1.0.64
(``cache_read_input_tokens`` became ``cache_read.input_tokens``): both are read; a value that is not a count
(``"[REDACTED]"``) is NULL. The rows go to ``stg_otel_requests``; the usage model takes them for a leg no shutdown,
store or debug log covers (``transform/usage.py``), and a session known from its events and from OTel is one session.

An export only grows: a grown one is read from where the last run stopped (its earlier bytes checked unchanged,
as the CLI's logs are); one changed otherwise is read again whole.
"""

from __future__ import annotations

from datetime import datetime, timezone

from ..schema import COUNT
from .base import Context, Prior, Problems, ReadResult, Source, bigint, json_objects, reader
from .events import is_append
from .jsonl import ReadState, Record

SOURCE_KIND = "otel"

# each figure under its attribute names, newest first (CLI 1.0.64 renamed the cache and reasoning ones)
TOKENS = {
    "input_tokens": ("gen_ai.usage.input_tokens",),
    "output_tokens": ("gen_ai.usage.output_tokens",),
    "cache_read_tokens": ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens"),
    "cache_write_tokens": ("gen_ai.usage.cache_write.input_tokens", "gen_ai.usage.cache_creation.input_tokens",
                           "gen_ai.usage.cache_creation_input_tokens", "gen_ai.usage.cache_write_input_tokens"),
    "reasoning_tokens": ("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_output_tokens"),
}


def _str(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def _time(v: object) -> float | None:
    """An OTel ``[seconds, nanoseconds]`` time as epoch seconds (None when it is not one)."""
    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        t = v[0] + v[1] / 1e9
        return t if 0 <= t < 253402300800 else None
    return None


def _iso(t: float | None) -> str | None:
    return None if t is None else \
        datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _count(attrs: dict, names: tuple[str, ...], problems: Problems) -> int | None:
    for name in names:
        if attrs.get(name) is not None:
            return bigint(attrs[name], name, problems, COUNT)
    return None


def _number(v: object) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) < 1e15:
        return float(v)
    if isinstance(v, str):
        try:
            return _number(float(v))
        except ValueError:
            return None
    return None


def is_chat_span(obj: dict) -> bool:
    """A leaf model request: a span (``type`` span, or none as VS Code writes) whose operation is ``chat``."""
    attrs = obj.get("attributes")
    return obj.get("type", "span") == "span" and isinstance(attrs, dict) \
        and attrs.get("gen_ai.operation.name") == "chat"


@reader("otel")
def read_otel(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()
    path = source.path
    start, line = 0, 1
    if prior is not None and prior.last_good_offset and is_append(path, prior):  # grown: its new lines only
        start, line = prior.last_good_offset, prior.good_line
        res.appended = True
    end = ReadState(start, line)
    for item, obj, excerpt in json_objects(path, res, ctx, start, line, end):  # a window at a time
        if not is_chat_span(obj):
            continue
        problems = Problems()
        if item.note:
            problems.note(item.note)
        row = _request(obj, path, item, problems, ctx)
        if row["session_id"] is None:
            res.reject(path, "chat span names no session (gen_ai.conversation.id): not counted", line=item.line,
                       offset=item.offset, excerpt=excerpt())
            continue
        res.add("stg_otel_requests", row)
        if problems:
            res.reject(path, f"span kept; {problems.reason()}", line=item.line, offset=item.offset,
                       excerpt=excerpt())
    res.last_good_offset, res.good_line, res.pending_tail = end.good_offset, end.good_line, end.pending_tail
    return res


def _request(obj: dict, path: str, item: Record, problems: Problems, ctx: Context) -> dict:
    a = obj["attributes"]
    resource = obj.get("resource") if isinstance(obj.get("resource"), dict) else {}
    service = resource.get("attributes") if isinstance(resource.get("attributes"), dict) else {}
    start, end = _time(obj.get("startTime")), _time(obj.get("endTime"))
    ttft = _number(a.get("gen_ai.response.time_to_first_chunk"))
    nano = _number(a.get("github.copilot.nano_aiu"))
    name = _str(obj.get("name"))
    return {
        "session_id": _str(a.get("gen_ai.conversation.id")), "source_kind": SOURCE_KIND,
        "span_id": _str(obj.get("spanId")), "trace_id": _str(obj.get("traceId")),
        "parent_span_id": _str(obj.get("parentSpanId")),
        "requested_at": _iso(start),
        "duration_ms": round((end - start) * 1000) if start is not None and end is not None and end >= start else None,
        "ttft_ms": round(ttft * 1000) if ttft is not None and ttft >= 0 else None,
        "model": _str(a.get("gen_ai.response.model")) or _str(a.get("gen_ai.request.model"))
        or (name[len("chat "):] if name and name.startswith("chat ") else None),
        **{col: _count(a, names, problems) for col, names in TOKENS.items()},
        "nano_aiu": bigint(round(nano) if nano is not None else None, "github.copilot.nano_aiu", problems, COUNT),
        "request_multiplier": _number(a.get("github.copilot.cost")),
        "initiator": _str(a.get("github.copilot.initiator")),
        "turn_id": _str(a.get("github.copilot.turn_id")),
        "interaction_id": _str(a.get("github.copilot.interaction_id")),
        "service_request_id": _str(a.get("github.copilot.service_request_id")),
        "service_name": _str(service.get("service.name")), "service_version": _str(service.get("service.version")),
        "_source_path": path, "_source_line": item.line, "_run_id": ctx.run_id,
    }
