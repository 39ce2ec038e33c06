"""VS Code's ``agent-traces.db``: OpenTelemetry spans Copilot Chat keeps in SQLite.

With ``github.copilot.chat.otel.enabled`` and ``...otel.dbSpanExporter.enabled``, Copilot Chat writes its spans to
``<UserData>/User/globalStorage/github.copilot-chat/agent-traces.db`` (schema 2, WAL): ``spans`` (one row per span,
the GenAI attributes in columns of their own) and ``span_attributes`` (key, value: the cost in nano-AIU and
whatever else). As in the file export (``otel.py``), only the leaf ``chat`` spans are read, into
``stg_otel_requests`` (``source_kind`` ``vscode_traces``): an ``invoke_agent`` span repeats its children's totals.
The database is read from a copy with its WAL, as the session store is (``store.read_snapshot``). VS Code drops
spans older than 7 days and keeps 100 conversations at startup: what an earlier run read of them is kept.
"""

from __future__ import annotations

import sqlite3

from ..schema import COUNT
from .base import Context, Prior, Problems, ReadResult, Source, bigint, epoch_ms_iso, reader
from .store import _select, read_snapshot

SOURCE_KIND = "vscode_traces"
SPAN_COLUMNS = ["span_id", "parent_span_id", "name", "start_time_ms", "end_time_ms", "operation_name",
                "conversation_id", "chat_session_id", "response_model", "request_model", "input_tokens",
                "output_tokens", "cached_tokens", "reasoning_tokens", "turn_index", "ttft_ms"]
# attributes read beside the columns, by what they give
NANO_KEYS = ("github.copilot.nano_aiu", "copilot.nano_aiu", "copilot_usage_nano_aiu")
CACHE_WRITE_KEYS = ("gen_ai.usage.cache_write.input_tokens", "gen_ai.usage.cache_creation.input_tokens",
                    "gen_ai.usage.cache_creation_input_tokens")
MULTIPLIER_KEYS = ("github.copilot.cost",)
INITIATOR_KEYS = ("github.copilot.initiator",)


def _number(v: object) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v) if v == v else None
    if isinstance(v, (str, bytes)):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _attributes(con: sqlite3.Connection, ids: list[str]) -> dict[str, dict[str, object]]:
    """The attributes of the chat spans this reader uses, by span id."""
    have = {r[1] for r in con.execute('pragma table_info("span_attributes")')}
    if not {"span_id", "key", "value"} <= have or not ids:
        return {}
    keys = (*NANO_KEYS, *CACHE_WRITE_KEYS, *MULTIPLIER_KEYS, *INITIATOR_KEYS)
    out: dict[str, dict[str, object]] = {}
    q = ",".join("?" * len(keys))
    for sid, key, value in con.execute(f'select span_id, key, value from span_attributes where key in ({q})', keys):
        out.setdefault(sid, {})[key] = value
    return out


def _first(attrs: dict, keys: tuple[str, ...]) -> object:
    return next((attrs[k] for k in keys if attrs.get(k) is not None), None)


@reader("agent_traces")
def read_agent_traces(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()

    def read(con: sqlite3.Connection) -> None:
        spans = _select(con, "spans", SPAN_COLUMNS)
        if spans is None:
            res.reject(source.path, "agent-traces.db has no spans table: nothing read")
            return
        chats = [s for s in spans if s["operation_name"] == "chat"]
        attrs = _attributes(con, [s["span_id"] for s in chats if s["span_id"] is not None])
        for i, s in enumerate(chats):
            problems = Problems()
            a = attrs.get(s["span_id"], {})
            sid = s["chat_session_id"] or s["conversation_id"]
            if not isinstance(sid, str) or not sid:
                res.reject(source.path, f"chat span {i + 1} names no session: not counted")
                continue
            start, end = bigint(s["start_time_ms"], "start_time_ms", problems, COUNT), \
                bigint(s["end_time_ms"], "end_time_ms", problems, COUNT)
            nano = _number(_first(a, NANO_KEYS))
            initiator = _first(a, INITIATOR_KEYS)
            res.add("stg_otel_requests", {
                "session_id": sid, "source_kind": SOURCE_KIND, "span_id": s["span_id"], "trace_id": None,
                "parent_span_id": s["parent_span_id"],
                "requested_at": epoch_ms_iso(start, "start_time_ms", problems) if start is not None else None,
                "duration_ms": end - start if start is not None and end is not None and end >= start else None,
                "ttft_ms": bigint(s["ttft_ms"], "ttft_ms", problems, COUNT),
                "model": s["response_model"] or s["request_model"],
                "input_tokens": bigint(s["input_tokens"], "input_tokens", problems, COUNT),
                "output_tokens": bigint(s["output_tokens"], "output_tokens", problems, COUNT),
                "cache_read_tokens": bigint(s["cached_tokens"], "cached_tokens", problems, COUNT),
                "cache_write_tokens": bigint(_first(a, CACHE_WRITE_KEYS), "cache write", problems, COUNT),
                "reasoning_tokens": bigint(s["reasoning_tokens"], "reasoning_tokens", problems, COUNT),
                "nano_aiu": bigint(round(nano) if nano is not None else None, "nano_aiu", problems, COUNT),
                "request_multiplier": _number(_first(a, MULTIPLIER_KEYS)),
                "initiator": initiator if isinstance(initiator, str) else None,
                "turn_id": None if s["turn_index"] is None else str(s["turn_index"]), "interaction_id": None,
                "service_request_id": None, "service_name": "copilot-chat", "service_version": None,
                "_source_path": source.path, "_source_line": i + 1, "_run_id": ctx.run_id})
            if problems:
                res.reject(source.path, f"chat span {i + 1} kept; {problems.reason()}")

    read_snapshot(source, res, "agent-traces.db", read, ctx)
    res.n_records = len(res.rows.get("stg_otel_requests", []))
    return res
