"""Every warehouse table, declared once: columns, types, grain, key and descriptions.

The warehouse is created from these declarations (``create_sql``), the same descriptions
reach DuckDB as ``COMMENT ON`` so BI tools show them, and the README's table reference is
generated from them (``python -m pipeline docs``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

# What a column of each integer type can hold, and the plausible range of a count: a token count or a
# nano-AIU cost outside it is no real figure (10^15 nano-AIU is $10,000 for one request); readers and
# transforms set such values to NULL, so that no sum of them can overflow a column.
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
COUNT = (0, 10**15)
# characters of a tool output kept in stg_events.result_head (what the star and fct_tool_calls read of it)
RESULT_HEAD_CHARS = 4096


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str


@dataclass(frozen=True)
class Table:
    name: str
    grain: str
    key: tuple[str, ...]
    description: str
    columns: tuple[Column, ...] = field(default_factory=tuple)

    def create_sql(self) -> str:
        cols = ",\n  ".join(f'"{c.name}" {c.type}' for c in self.columns)
        return f'create table if not exists "{self.name}" (\n  {cols}\n)'

    def cast_sql(self) -> str:
        """The table's columns as a SELECT list, each cast to its declared type, in its order."""
        return ", ".join(f'cast("{c.name}" as {c.type}) as "{c.name}"' for c in self.columns)


def _t(name: str, grain: str, key: Iterable[str], description: str, *cols):
    return Table(name, grain, tuple(key), description, tuple(Column(*c) for c in cols))


LINEAGE = (
    ("_source_path", "VARCHAR", "File the row was read from."),
    ("_run_id", "VARCHAR", "Ingest run that last wrote the row (see `_runs`)."),
)

# --------------------------------------------------------------------------------------------
# Staging: what the extract stage read, one table per kind of record, with lineage.
# Rows are replaced per source file, so incremental ingest only touches changed files.
# --------------------------------------------------------------------------------------------
STAGING = [
    _t(
        "stg_events", "one row per event line", ["_source_path", "_source_line"],
        "Every event read from events.jsonl, flat legacy session logs, legacy history files, VS Code "
        "transcripts and VS Code chat sessions (translated into the same event vocabulary); "
        "fields the star schema uses are lifted into columns, the rest stays in `extra` (JSON).",
        ("session_id", "VARCHAR", "Copilot session id."),
        ("source_kind", "VARCHAR", "events | legacy_jsonl | history_json | chat_session | transcript"),
        ("event_index", "BIGINT", "0-based position of the event in its file."),
        ("event_id", "VARCHAR", "Envelope `id`."),
        ("parent_id", "VARCHAR", "Envelope `parentId`."),
        ("event_type", "VARCHAR", "Envelope `type`, e.g. `user.message`."),
        ("ts", "VARCHAR", "Envelope `timestamp` as written."),
        ("agent_id", "VARCHAR", "Envelope `agentId` for subagent events."),
        ("content", "VARCHAR", "Message text (user.message content, assistant.message content, ...); NULL "
                               "where `content_key` names the text (`coalesce(content, stg_texts.text)`)."),
        ("content_key", "VARCHAR", "Of a system prompt (system.message content of 4,096 characters or more: the "
                                   "same ~50 KB at every start and resume of a session): the key of its text in "
                                   "stg_texts, where each text is stored once."),
        ("model", "VARCHAR", "Model named by the event."),
        ("interaction_id", "VARCHAR", "`interactionId`."),
        ("turn_id", "VARCHAR", "`turnId`."),
        ("tool_call_id", "VARCHAR", "`toolCallId` of tool events."),
        ("tool_name", "VARCHAR", "`toolName` of tool events."),
        ("arguments", "VARCHAR", "Tool arguments as JSON text (DuckDB's compact form, keys in the order written)."),
        ("success", "BOOLEAN", "`success` of tool.execution_complete."),
        ("error_message", "VARCHAR", "Error message of a failed tool call or session.error."),
        ("result_content", "VARCHAR", "`result.content` of a completed tool call, redacted, when it is longer "
                                      "than `result_head`: the one place the whole output is stored (NULL when "
                                      "`result_head` holds it whole; `coalesce(result_content, result_head)` is "
                                      "the output)."),
        ("result_chars", "BIGINT", "Length of the output in characters."),
        ("result_md5", "VARCHAR", "MD5 of the output's UTF-8 bytes, hex (of the redacted text)."),
        ("result_head", "VARCHAR", "The first 4,096 characters of the output (when those are white space, up "
                                   "to its first two others), the whole of it when shorter: what the star reads "
                                   "of an output, so that no ingest reads whole outputs it does not show."),
        ("parent_tool_call_id", "VARCHAR", "`parentToolCallId` (inside subagents)."),
        ("mcp_server_name", "VARCHAR", "`mcpServerName` of MCP tool calls."),
        ("output_tokens", "BIGINT", "`outputTokens` of assistant.message."),
        ("request_id", "VARCHAR", "`requestId` of assistant.message (newer CLIs: one per prompt, not per call)."),
        ("api_call_id", "VARCHAR", "`apiCallId`, else `serviceRequestId`: one per model call."),
        ("extra", "VARCHAR", "The rest of `data` as JSON, in DuckDB's compact form with keys in the order written "
                             "(never reasoning text or transformedContent; "
                             "result.detailedContent only where it differs from result.content)."),
        ("_source_path", "VARCHAR", "File the row was read from."),
        ("_source_line", "BIGINT", "1-based physical line where the event starts."),
        ("_source_offset", "BIGINT", "Byte offset where the event starts."),
        ("_run_id", "VARCHAR", "Ingest run that wrote the row."),
    ),
    _t(
        "stg_tool_requests", "one row per tool request inside an assistant.message",
        ["_source_path", "_source_line", "request_index"],
        "`assistant.message.toolRequests[]`.",
        ("session_id", "VARCHAR", "Copilot session id."),
        ("event_index", "BIGINT", "Index of the assistant.message event in its file."),
        ("request_index", "INTEGER", "Position in `toolRequests`."),
        ("tool_call_id", "VARCHAR", "`toolCallId`."),
        ("tool_name", "VARCHAR", "`name`."),
        ("arguments", "VARCHAR", "Arguments as JSON text (DuckDB's compact form, keys in the order written)."),
        ("ts", "VARCHAR", "Timestamp of the assistant.message."),
        ("model", "VARCHAR", "Model of the assistant.message."),
        ("mcp_server_name", "VARCHAR", "`mcpServerName`."),
        ("_source_path", "VARCHAR", "File the row was read from."),
        ("_source_line", "BIGINT", "Line of the assistant.message."),
        ("_run_id", "VARCHAR", "Ingest run that wrote the row."),
    ),
    _t(
        "stg_session_meta", "one row per metadata record about a session", ["_source_path"],
        "Session metadata from workspace.yaml, vscode.metadata.json, session-store.db `sessions`, VS Code "
        "chat sessions and transcripts (their workspace folder) and the chat index in state.vscdb.",
        ("session_id", "VARCHAR", "Copilot session id."),
        ("source_kind", "VARCHAR", "workspace_yaml | vscode_metadata | store | vscode_chat | vscode_transcript "
                                   "| vscode_index"),
        ("title", "VARCHAR", "customTitle (vscode_metadata) or `name` (workspace.yaml)."),
        ("summary", "VARCHAR", "Legacy `summary` / store `summary`."),
        ("cwd", "VARCHAR", "Working directory."),
        ("git_root", "VARCHAR", "Git root."),
        ("repository", "VARCHAR", "owner/repo."),
        ("branch", "VARCHAR", "Git branch."),
        ("host_type", "VARCHAR", "github | ado | vscode ..."),
        ("client_name", "VARCHAR", "`client_name` (workspace.yaml)."),
        ("created_at", "VARCHAR", "As written."),
        ("updated_at", "VARCHAR", "As written."),
        ("first_user_message", "VARCHAR", "vscode.metadata.json `firstUserMessage`."),
        ("extra", "VARCHAR", "Remaining keys as JSON."),
        ("_source_path", "VARCHAR", "File (or database#row) the row was read from."),
        ("_run_id", "VARCHAR", "Ingest run that wrote the row."),
    ),
    _t(
        "stg_checkpoints", "one row per checkpoint as read", ["_source_path", "checkpoint_number"],
        "Checkpoints from `checkpoints/NNN-*.md`, `checkpoints/<uuid>.json` and session-store.db.",
        ("session_id", "VARCHAR", "Copilot session id."),
        ("source_kind", "VARCHAR", "folder_md | folder_json | store"),
        ("checkpoint_number", "INTEGER", "1-based checkpoint number."),
        ("title", "VARCHAR", ""), ("overview", "VARCHAR", ""), ("history", "VARCHAR", ""),
        ("work_done", "VARCHAR", ""), ("technical_details", "VARCHAR", ""),
        ("important_files", "VARCHAR", ""), ("next_steps", "VARCHAR", ""),
        ("created_at", "VARCHAR", "As written, when known."),
        ("_source_path", "VARCHAR", "File the row was read from."),
        ("_run_id", "VARCHAR", "Ingest run that wrote the row."),
    ),
    _t(
        "stg_documents", "one row per plan / index / memory document", ["_source_path"],
        "plan.md, root index.md, store workspace artifacts and VS Code memory-tool files.",
        ("session_id", "VARCHAR", "Copilot session id."),
        ("kind", "VARCHAR", "plan | session_index | workspace_artifact | memory"),
        ("path", "VARCHAR", "Path of the document, relative to its source root (Copilot home or VS Code User)."),
        ("content", "VARCHAR", "Document text (redacted)."),
        ("_source_path", "VARCHAR", "File the row was read from."),
        ("_run_id", "VARCHAR", "Ingest run that wrote the row."),
    ),
    _t(
        "stg_store_turns", "one row per session-store.db turn", ["_source_path", "session_id", "turn_index"],
        "session-store.db `turns`.",
        ("session_id", "VARCHAR", ""), ("turn_index", "INTEGER", ""), ("user_message", "VARCHAR", ""),
        ("assistant_response", "VARCHAR", ""), ("ts", "VARCHAR", "As written."),
        ("_source_path", "VARCHAR", "Database file."), ("_run_id", "VARCHAR", ""),
    ),
    _t(
        "stg_store_files", "one row per session-store.db session_files row",
        ["_source_path", "session_id", "file_path"],
        "session-store.db `session_files`.",
        ("session_id", "VARCHAR", ""), ("file_path", "VARCHAR", ""), ("tool_name", "VARCHAR", ""),
        ("turn_index", "INTEGER", ""), ("first_seen_at", "VARCHAR", "As written."),
        ("_source_path", "VARCHAR", "Database file."), ("_run_id", "VARCHAR", ""),
    ),
    _t(
        "stg_store_refs", "one row per session-store.db session_refs row",
        ["_source_path", "session_id", "ref_type", "ref_value"],
        "session-store.db `session_refs`.",
        ("session_id", "VARCHAR", ""), ("ref_type", "VARCHAR", ""), ("ref_value", "VARCHAR", ""),
        ("turn_index", "INTEGER", ""), ("created_at", "VARCHAR", "As written."),
        ("_source_path", "VARCHAR", "Database file."), ("_run_id", "VARCHAR", ""),
    ),
    _t(
        "stg_store_usage", "one row per session-store.db assistant_usage_events row", ["_source_path", "row_id"],
        "session-store.db `assistant_usage_events` (one row per API request).",
        ("row_id", "BIGINT", "Row id in the source table."),
        ("session_id", "VARCHAR", ""), ("model", "VARCHAR", ""),
        ("input_tokens", "BIGINT", "Cache-inclusive: fresh + cache read + cache write."),
        ("output_tokens", "BIGINT", ""),
        ("cache_read_tokens", "BIGINT", ""), ("cache_write_tokens", "BIGINT", ""),
        ("reasoning_tokens", "BIGINT", ""),
        ("total_nano_aiu", "BIGINT", "Cost of the request in nano-AIU (1e9 = one AI credit)."),
        ("request_multiplier", "DOUBLE", "Premium-request multiplier of the request."),
        ("turn_index", "INTEGER", "Turn of the request, as the store numbers turns."),
        ("agent_id", "VARCHAR", "Subagent that made the request."),
        ("parent_tool_call_id", "VARCHAR", "Tool call that started the subagent."),
        ("initiator", "VARCHAR", "What made the request (e.g. `compaction`), when recorded."),
        ("duration_ms", "BIGINT", ""),
        ("time_to_first_token_ms", "BIGINT", "Schema v6 (CLI 1.0.80+)."),
        ("finish_reason", "VARCHAR", "Schema v6: why the model stopped (`stop`, `tool_calls`, ...)."),
        ("copilot_usage_model", "VARCHAR", "The model the request was billed as, when the store says."),
        ("reasoning_effort", "VARCHAR", "Schema v6."),
        ("token_details", "VARCHAR", "`token_details_json` as written: the request's price per token kind "
                                     "(tokenCount x costPerBatch / batchSize sums to total_nano_aiu)."),
        ("created_at", "VARCHAR", "As written."),
        ("_source_path", "VARCHAR", "Database file."), ("_run_id", "VARCHAR", ""),
    ),
    _t(
        "stg_debug_requests", "one row per `llm_request` line of a VS Code agent debug log",
        ["_source_path", "_source_line"],
        "VS Code Copilot Chat agent debug logs (`GitHub.copilot-chat/debug-logs/<session>/main.jsonl` and the "
        "sub-agent logs beside it): one row per model call, with its exact cost.",
        ("session_id", "VARCHAR", "The chat session (the log's folder): a sub-agent's calls are its parent's."),
        ("source_kind", "VARCHAR", "`vscode_debug_log`."),
        ("span_id", "VARCHAR", "`spanId` of the line."), ("parent_span_id", "VARCHAR", "The prompt's span."),
        ("requested_at", "VARCHAR", "`ts` (epoch milliseconds) as an ISO-8601 UTC time."),
        ("duration_ms", "BIGINT", "`dur`."), ("ttft_ms", "BIGINT", "`attrs.ttft`: time to the first token."),
        ("model", "VARCHAR", "`attrs.model`."),
        ("debug_name", "VARCHAR", "`attrs.debugName`: the agent loop (`panel/editAgent`), a sub-agent, or a "
                                  "background request (`backgroundTodoAgent`, titles)."),
        ("input_tokens", "BIGINT", "`attrs.inputTokens`: cache-inclusive."),
        ("output_tokens", "BIGINT", ""), ("cache_read_tokens", "BIGINT", "`attrs.cachedTokens`."),
        ("nano_aiu", "BIGINT", "`attrs.copilotUsageNanoAiu`: the call's cost (0 for a free background model)."),
        ("request_multiplier", "DOUBLE", "Premium-request multiplier of the model, from the folder's `models.json`."),
        ("status", "VARCHAR", "`status` of the line."),
        ("is_subagent", "BOOLEAN", "Read from a sub-agent's log (`<label>-<toolCallId>.jsonl`)."),
        ("agent", "VARCHAR", "The sub-agent's label (`executionSubagent`, ...), from its log's session_start."),
        ("copilot_version", "VARCHAR", "Copilot Chat version of the log's session_start."),
        ("_source_line", "BIGINT", "Line in the log."), *LINEAGE,
    ),
    _t(
        "stg_otel_requests", "one row per leaf `chat` span of an OpenTelemetry file export or agent-traces.db",
        ["_source_path", "_source_line"],
        "Copilot's OpenTelemetry JSONL export (`otel/*.jsonl` in the Copilot home) and VS Code's `agent-traces.db`: "
        "one row per model request (`chat <model>` span); `invoke_agent` spans (which repeat their children's "
        "totals) and metrics are not read.",
        ("session_id", "VARCHAR", "`gen_ai.conversation.id` (agent-traces.db: `chat_session_id`)."),
        ("source_kind", "VARCHAR", "`otel` | `vscode_traces`."),
        ("span_id", "VARCHAR", ""), ("trace_id", "VARCHAR", ""), ("parent_span_id", "VARCHAR", ""),
        ("requested_at", "VARCHAR", "`startTime` as an ISO-8601 UTC time."),
        ("duration_ms", "BIGINT", "`endTime` - `startTime`."),
        ("ttft_ms", "BIGINT", "`gen_ai.response.time_to_first_chunk`, in milliseconds."),
        ("model", "VARCHAR", "`gen_ai.response.model`, else `gen_ai.request.model`."),
        ("input_tokens", "BIGINT", "`gen_ai.usage.input_tokens` (cache-inclusive); NULL when not a count "
                                   "(`[REDACTED]`)."),
        ("output_tokens", "BIGINT", ""),
        ("cache_read_tokens", "BIGINT", "`gen_ai.usage.cache_read.input_tokens` (before CLI 1.0.64 "
                                        "`cache_read_input_tokens`)."),
        ("cache_write_tokens", "BIGINT", "`gen_ai.usage.cache_write.input_tokens` or `cache_creation...`."),
        ("reasoning_tokens", "BIGINT", "`gen_ai.usage.reasoning.output_tokens`."),
        ("nano_aiu", "BIGINT", "`github.copilot.nano_aiu`: the request's cost; NULL when not logged (unknown, not 0)."),
        ("request_multiplier", "DOUBLE", "`github.copilot.cost`: the premium-request multiplier (not money)."),
        ("initiator", "VARCHAR", "`github.copilot.initiator` (`user` | `agent`)."),
        ("turn_id", "VARCHAR", ""), ("interaction_id", "VARCHAR", ""),
        ("service_request_id", "VARCHAR", "`github.copilot.service_request_id`."),
        ("service_name", "VARCHAR", "`github-copilot` (CLI) or `copilot-chat` (VS Code)."),
        ("service_version", "VARCHAR", "The client's version."),
        ("_source_line", "BIGINT", "Line in the file (agent-traces.db: the chat span's place among them)."),
        *LINEAGE,
    ),
    _t(
        "stg_desktop_sessions", "one row per session of the desktop app's data.db", ["_source_path", "session_id"],
        "The Copilot desktop app's `~/.copilot/data.db` `sessions` table: lifetime totals per session (a snapshot, "
        "not requests), read in place and read-only through an allow-list (never `accounts` or `settings`).",
        ("session_id", "VARCHAR", "`id`."), ("source_kind", "VARCHAR", "`desktop`."),
        ("title", "VARCHAR", ""), ("mode", "VARCHAR", ""), ("model", "VARCHAR", ""),
        ("reasoning_effort", "VARCHAR", ""), ("agent", "VARCHAR", ""), ("permission_mode", "VARCHAR", ""),
        ("created_at", "VARCHAR", "ISO-8601 UTC."), ("updated_at", "VARCHAR", ""), ("archived_at", "VARCHAR", ""),
        ("total_input_tokens", "BIGINT", ""), ("total_output_tokens", "BIGINT", ""),
        ("total_cached_tokens", "BIGINT", ""), ("total_reasoning_tokens", "BIGINT", ""),
        ("total_nano_aiu", "BIGINT", "The session's cost so far, in nano-AIU."),
        ("total_agent_merge_nano_aiu", "BIGINT", "As the app writes it."),
        ("context_input_token_limit", "BIGINT", ""), *LINEAGE,
    ),
    _t(
        "stg_desktop_context", "one row per data.db session_context_usage row", ["_source_path", "session_id", "ts_ms"],
        "The desktop app's context-window series: how full each session's context was, over time.",
        ("session_id", "VARCHAR", ""), ("ts_ms", "BIGINT", "Epoch milliseconds."),
        ("current_tokens", "BIGINT", ""), ("token_limit", "BIGINT", ""), *LINEAGE,
    ),
]

# --------------------------------------------------------------------------------------------
# The star schema (CONTRACT.md). Rows are rebuilt per affected session on every run.
# --------------------------------------------------------------------------------------------
STAR = [
    _t(
        "dim_sessions", "one row per session across every source", ["session_id"],
        "Copilot sessions: one row however many sources (folder, flat log, session-store.db) hold it.",
        ("session_id", "VARCHAR", "The Copilot session id as written by Copilot."),
        ("project_id", "VARCHAR", "Project the session ran in (dim_projects)."),
        ("title", "VARCHAR", "vscode customTitle, else workspace.yaml name, else summary, else first prompt."),
        ("summary", "VARCHAR", "Legacy workspace.yaml / session-store.db summary."),
        ("client", "VARCHAR", "Where the session ran: cli | vscode (VS Code's chat, or the Copilot CLI runtime "
                              "VS Code's agent host runs: client_name vscode-agent-host)."),
        ("sources", "VARCHAR[]", "Every source kind the session was read from, sorted."),
        ("cwd", "VARCHAR", "Working directory as written by Copilot."),
        ("git_root", "VARCHAR", "Git root, when known."),
        ("root_path", "VARCHAR", "The session's root folder, normalized (git root, else working directory): its "
                                 "file paths are relative to it."),
        ("repository", "VARCHAR", "owner/repo, when known."),
        ("branch", "VARCHAR", "Git branch at session start."),
        ("copilot_version", "VARCHAR", "CLI version from session.start (VS Code: the Copilot Chat extension "
                                       "version of the requests)."),
        ("started_at", "TIMESTAMPTZ", "UTC start of the session."),
        ("ended_at", "TIMESTAMPTZ", "UTC time of the last event (or last update)."),
        ("duration_s", "DOUBLE", "ended_at - started_at in seconds: the span, idle days included."),
        ("active_s", "DOUBLE", "Seconds of work: the gaps between the session's events summed, each counted up "
                               "to 30 minutes (a session re-opened weeks later is not weeks of work)."),
        ("n_turns", "INTEGER", "User prompts (fct_turns rows)."),
        ("n_continuations", "INTEGER", "user.message events that are no prompt: empty once Copilot's injected "
                                       "tags are removed (autopilot nudges), a skill's file the CLI injects "
                                       "(`source: skill-<name>`), a button VS Code shows (\"Continue\", \"Try "
                                       "Again\"). What follows them stays with the prompt before."),
        ("n_tool_calls", "INTEGER", "Tool calls (fct_tool_calls rows)."),
        ("n_failed_tool_calls", "INTEGER", "Tool calls whose completion reported success = false."),
        ("n_events", "INTEGER", "Events read for the session (all types, incl. unknown)."),
        ("n_unknown_events", "INTEGER", "Events of a type this version does not model (kept in stg_events)."),
        ("n_resumes", "INTEGER", "session.resume events."),
        ("n_errors", "INTEGER", "Errors the session logged: session.error events (a provider's 401 / 404 / 504, "
                                "a VS Code request rate-limited or failed)."),
        ("error_message", "VARCHAR", "The last error's message, redacted; NULL when none."),
        ("models", "VARCHAR[]", "Models used, sorted."),
        ("is_gone", "BOOLEAN", "True when no source file of the session is on disk any more."),
        ("machine_id", "VARCHAR", "Team mode: the machine that pushed the session into the lake (`push --machine`); "
                                  "NULL in a machine's own warehouse."),
        ("user_name", "VARCHAR", "Team mode: who pushed it (`push --user`, else git's user.name); NULL in a "
                                 "machine's own warehouse."),
    ),
    _t(
        "fct_turns", "one row per user prompt", ["session_id", "turn_index"],
        "User prompts with the assistant's visible answer until the next prompt.",
        ("session_id", "VARCHAR", "Session."),
        ("turn_index", "INTEGER", "0-based, in order."),
        ("user_message", "VARCHAR", "What the user typed (never transformedContent), redacted; Copilot's "
                                    "injected tags (current_datetime, reminder, ...) removed."),
        ("assistant_response", "VARCHAR", "Non-empty assistant.message texts of the turn, joined by a blank line."),
        ("final_answer", "VARCHAR", "The messages Copilot marked its final answer (`phase: final_answer`, CLI "
                                    "1.0.8x), without its progress notes (`commentary`); NULL when the log marks "
                                    "none."),
        ("started_at", "TIMESTAMPTZ", "UTC time of the prompt."),
        ("ended_at", "TIMESTAMPTZ", "UTC time of the turn's last event."),
        ("interaction_id", "VARCHAR", "`interactionId` of the prompt."),
        ("model", "VARCHAR", "Model that answered: of the turn's last assistant message (VS Code: the model "
                             "`result.details` / `resolvedModel` name; when no message names it, the latest "
                             "model change or selected model)."),
        ("selected_model", "VARCHAR", "Model the user selected for the prompt (`auto` for auto selection): "
                                      "VS Code's `modelId`, the CLI's selected model or latest model change."),
        ("status", "VARCHAR", "How the turn ended: ok (answered) | error (its last outcome was an error) | "
                              "cancelled; NULL when the logs show no answer."),
        ("error_code", "VARCHAR", "Code of the error of a turn with status error: the provider's HTTP status, "
                                  "else the error type (`rateLimited`, `query`, `warning`)."),
        ("error_message", "VARCHAR", "Message of that error, redacted."),
        ("n_assistant_messages", "INTEGER", "assistant.message events in the turn."),
        ("n_continuations", "INTEGER", "Copilot's own empty user.message nudges inside the turn."),
        ("n_tool_calls", "INTEGER", "Tool calls in the turn."),
        ("output_tokens", "BIGINT", "Sum of assistant.message outputTokens in the turn."),
        ("source_kind", "VARCHAR", "events | legacy_jsonl | history_json | store"),
    ),
    _t(
        "fct_tool_calls", "one row per tool call", ["session_id", "tool_call_id"],
        "Tool request, start and completion joined by toolCallId.",
        ("session_id", "VARCHAR", "Session."),
        ("tool_call_id", "VARCHAR", "`toolCallId`."),
        ("turn_index", "INTEGER", "Turn the call belongs to (null before the first prompt)."),
        ("tool_name", "VARCHAR", "Tool name as the client wrote it."),
        ("tool_family", "VARCHAR", "What the tool does, the same whatever the client called it: read | edit | "
                                   "create | search | shell | web | agent | mcp | other."),
        ("mcp_server_name", "VARCHAR", "MCP server, for MCP tools."),
        ("arguments", "VARCHAR", "Arguments as JSON text, redacted."),
        ("file_id", "VARCHAR", "File the call touched (dim_files), when it names one."),
        ("action", "VARCHAR", "view | edit | create when the call touched a file."),
        ("is_success", "BOOLEAN", "Completion's `success`; null when the call never completed."),
        ("error_message", "VARCHAR", "Error of a failed call."),
        ("result_content", "VARCHAR", "`result.content` (what the model saw), redacted: its first "
                                      "`$COPILOT_WAREHOUSE_RESULT_CHARS` characters (4,096 unless set; 0: all of "
                                      "it). The whole output is stored once, in stg_events; the view "
                                      "tool_call_outputs gives it."),
        ("result_chars", "BIGINT", "Length of the whole output in characters (more than "
                                   "`length(result_content)` when it was cut)."),
        ("result_md5", "VARCHAR", "MD5 of the whole output's UTF-8 bytes, hex: a fingerprint to compare outputs, "
                                  "not a security hash."),
        ("result_source_path", "VARCHAR", "Log the output is stored in (stg_events._source_path)."),
        ("result_source_line", "BIGINT", "Its line there (stg_events._source_line)."),
        ("model", "VARCHAR", "Model that requested the call."),
        ("parent_tool_call_id", "VARCHAR", "Enclosing subagent call."),
        ("requested_at", "TIMESTAMPTZ", "UTC time of the assistant.message that requested it."),
        ("started_at", "TIMESTAMPTZ", "UTC tool.execution_start (else request time); null when the source "
                                    "does not time tool calls (VS Code chat sessions)."),
        ("completed_at", "TIMESTAMPTZ", "UTC tool.execution_complete; null when not timed."),
        ("duration_ms", "BIGINT", "completed_at - started_at."),
    ),
    _t(
        "fct_file_touches", "one row per session x file x action", ["session_id", "file_id", "action"],
        "Which files a session viewed, edited or created.",
        ("session_id", "VARCHAR", "Session."),
        ("file_id", "VARCHAR", "File."),
        ("action", "VARCHAR", "view | edit | create"),
        ("n_touches", "INTEGER", "Tool calls (or session_files rows) behind the touch."),
        ("first_seen_at", "TIMESTAMPTZ", "UTC time of the first touch."),
        ("last_seen_at", "TIMESTAMPTZ", "UTC time of the last touch."),
    ),
    _t(
        "fct_checkpoints", "one row per checkpoint", ["session_id", "checkpoint_number"],
        "Checkpoint summaries (folder markdown or JSON preferred over session-store.db).",
        ("session_id", "VARCHAR", ""), ("checkpoint_number", "INTEGER", "1-based."),
        ("title", "VARCHAR", ""), ("overview", "VARCHAR", ""), ("history", "VARCHAR", ""),
        ("work_done", "VARCHAR", ""), ("technical_details", "VARCHAR", ""),
        ("important_files", "VARCHAR", ""), ("next_steps", "VARCHAR", ""),
        ("created_at", "TIMESTAMPTZ", "UTC, when known (store row or compaction event)."),
        ("source_kind", "VARCHAR", "folder_md | folder_json | store"),
    ),
    _t(
        "fct_refs", "one row per session x ref", ["session_id", "ref_type", "ref_value"],
        "Commits, pull requests and issues a session referred to.",
        ("session_id", "VARCHAR", ""), ("ref_type", "VARCHAR", "commit | pr | issue"),
        ("ref_value", "VARCHAR", "SHA or number."), ("turn_index", "INTEGER", ""),
        ("created_at", "TIMESTAMPTZ", "UTC."), ("source_kind", "VARCHAR", "store | attachment"),
    ),
    _t(
        "fct_requests", "one row per model request, where the sources record requests", ["session_id", "request_id"],
        "Model requests with their time: VS Code agent debug log `llm_request` lines, session-store.db "
        "`assistant_usage_events` rows, OpenTelemetry `chat` spans, `assistant.usage` events and "
        "`assistant.message` events (one per request id). Within a leg the most detailed source wins, in that "
        "order, so no request is counted twice; messages carry output tokens only (input NULL).",
        ("session_id", "VARCHAR", "Session."),
        ("request_id", "VARCHAR", "`debug:<span id>`, `store:<row id>`, `otel:<service request id>`, the event's "
                                  "requestId / id, or `event:<index>`."),
        ("leg_index", "INTEGER", "Leg of the session (1 = from session.start to the first resume or shutdown)."),
        ("turn_index", "INTEGER", "Prompt the request answered (null before the first prompt)."),
        ("requested_at", "TIMESTAMPTZ", "UTC time of the request."),
        ("model", "VARCHAR", "Model that answered; from the latest model change or selected model when the "
                             "event names none."),
        ("selected_model", "VARCHAR", "Model the user selected (`auto` included), when the logs say."),
        ("input_tokens", "BIGINT", "Cache-inclusive input tokens; null when the source does not record them."),
        ("output_tokens", "BIGINT", "Output tokens; null when not recorded."),
        ("cache_read_tokens", "BIGINT", ""), ("cache_write_tokens", "BIGINT", ""),
        ("reasoning_tokens", "BIGINT", ""),
        ("nano_aiu", "BIGINT", "Logged cost in nano-AIU (1e9 = one AI credit); null when not logged per request."),
        ("request_multiplier", "DOUBLE", "Premium-request multiplier, when logged."),
        ("initiator", "VARCHAR", "What made the request (e.g. `compaction`), when logged."),
        ("is_subagent", "BOOLEAN", "Made inside a subagent."),
        ("source", "VARCHAR", "debug_log | store_usage_events | otel | usage_events | messages"),
        ("duration_ms", "BIGINT", "How long the request took, when logged (VS Code debug logs, the store)."),
        ("ttft_ms", "BIGINT", "Time to the first token, when logged (VS Code debug logs)."),
        ("agent", "VARCHAR", "`main`, or the sub-agent that made the request (the debug log's label, the "
                             "`subagent.started` agentName, the `task` call's agent_type); NULL when the source "
                             "cannot tell."),
        ("skill", "VARCHAR", "The skill last invoked in the request's turn before it (an attribution: the logs do "
                             "not record a skill per request); NULL before any."),
        ("ai_credits", "DECIMAL(38,9)", "The request's cost: logged (nano_aiu), else estimated from the price "
                                        "table when its input and output tokens are known, else NULL."),
        ("cost_usd", "DECIMAL(38,11)", "ai_credits x $0.01."),
        ("cost_source", "VARCHAR", "logged | estimated | unknown"),
    ),
    _t(
        "fct_usage_legs", "one row per session x leg x model", ["session_id", "leg_index", "model"],
        "Token use and cost of each leg of a session (a leg runs from session.start or a session.resume to its "
        "session.shutdown, the next resume or the end of the log), as obtained from the best source of that "
        "leg. A figure no source gives is NULL, never 0.",
        ("session_id", "VARCHAR", ""), ("leg_index", "INTEGER", "1-based, in log order."),
        ("model", "VARCHAR", "Model (`(unknown)` when no event names one)."),
        ("started_at", "TIMESTAMPTZ", "UTC start of the leg."),
        ("used_at", "TIMESTAMPTZ", "UTC time of the leg's last request of this model (else the leg's end): the "
                                 "time usage reports date the leg's figures by."),
        ("requests", "BIGINT", "Model requests."),
        ("input_tokens", "BIGINT", "Cache-inclusive input tokens; NULL for a leg known only from its messages."),
        ("output_tokens", "BIGINT", ""), ("cache_read_tokens", "BIGINT", ""),
        ("cache_write_tokens", "BIGINT", ""), ("reasoning_tokens", "BIGINT", ""),
        ("premium_requests", "DECIMAL(38,6)", "Premium requests (the legacy billing unit: requests x multiplier)."),
        ("nano_aiu", "BIGINT", "Logged cost in nano-AIU; NULL when not logged."),
        ("ai_credits", "DECIMAL(38,9)", "Cost in AI credits (1 credit = $0.01): logged, else estimated, else NULL."),
        ("cost_usd", "DECIMAL(38,11)", "ai_credits x $0.01."),
        ("token_source", "VARCHAR", "shutdown (the leg's own session.shutdown) | shutdown_delta (a cumulative "
                                    "shutdown minus the previous one) | shutdown_messages (a shutdown whose per-model "
                                    "figures leave requests out, filled from the messages: input unknown) | "
                                    "debug_log (VS Code agent debug log calls) | otel (OpenTelemetry chat spans) | "
                                    "desktop_totals (the desktop app's lifetime totals, for a session nothing else "
                                    "records: requests unknown) | "
                                    "store_usage_events | usage_events | message_output_tokens (no shutdown: "
                                    "the messages' outputTokens)"),
        ("cost_source", "VARCHAR", "logged | estimated | unknown"),
        ("price_ref", "VARCHAR", "Price table entry an estimate used (package version, provider/model)."),
        ("is_auto", "BOOLEAN", "The leg ran on auto model selection (10% discount, applied to estimates)."),
    ),
    _t(
        "fct_usage", "one row per session x model", ["session_id", "model"],
        "Token use and cost per session and model, summed over every leg (fct_usage_legs); no figure is counted "
        "twice. A figure is NULL when any leg that made requests lacks it (never 0, never a partial sum).",
        ("session_id", "VARCHAR", ""), ("model", "VARCHAR", ""),
        ("requests", "BIGINT", "API requests."),
        ("input_tokens", "BIGINT", "Input tokens (cache-inclusive, as Copilot reports them)."),
        ("output_tokens", "BIGINT", ""), ("cache_read_tokens", "BIGINT", ""),
        ("cache_write_tokens", "BIGINT", ""), ("reasoning_tokens", "BIGINT", ""),
        ("premium_requests", "DECIMAL(38,6)", "Premium requests (legacy unit) from modelMetrics.requests.cost, the "
                                       "store's request multipliers or usage checkpoints."),
        ("nano_aiu", "BIGINT", "Logged cost in nano-AIU, when every leg logged it."),
        ("ai_credits", "DECIMAL(38,9)", "Cost in AI credits (1 credit = $0.01)."),
        ("cost_usd", "DECIMAL(38,11)", "Cost in US dollars."),
        ("cost_source", "VARCHAR", "logged (every leg's cost is in the logs) | estimated (some from the price "
                                   "table) | unknown (some leg has neither)."),
        ("usage_source", "VARCHAR", "How the token figures were obtained: the legs' token_source values, "
                                    "sorted and joined by `+`."),
        ("n_legs", "INTEGER", "Legs with requests of this model."),
        ("first_used_at", "TIMESTAMPTZ", "UTC."), ("last_used_at", "TIMESTAMPTZ", "UTC."),
    ),
    _t(
        "fct_memories", "one row per memory / plan file", ["memory_id"],
        "plan.md, session index.md, store workspace artifacts and VS Code memories (session, repo and user "
        "memories; the last two have no session).",
        ("memory_id", "VARCHAR", "md5 of source path (first 16 hex)."),
        ("session_id", "VARCHAR", "Session the document belongs to."),
        ("kind", "VARCHAR", "plan | session_index | workspace_artifact | memory"),
        ("path", "VARCHAR", "Path relative to the source root."),
        ("content", "VARCHAR", "Text, redacted."),
    ),
    _t(
        "int_session_files", "one row per session x file", ["session_id", "file_id"],
        "The files each session touched, as the star build resolved them (project-relative path, project); "
        "written with the session's facts, and the input of dim_files.",
        ("session_id", "VARCHAR", "Session."),
        ("file_id", "VARCHAR", "md5 of project_id and path (first 16 hex)."),
        ("project_id", "VARCHAR", "Project of the file."),
        ("path", "VARCHAR", "Project-relative path with `/` separators (absolute when outside the project)."),
        ("is_in_project", "BOOLEAN", "False when the path lies outside the project root."),
    ),
]

# --------------------------------------------------------------------------------------------
# SQL models (sql/<name>.sql), run in this order after every ingest: int_ feed the reports,
# report_ feed the exports. Formulas are documented in the SQL files and in the README.
# --------------------------------------------------------------------------------------------
# --------------------------------------------------------------------------------------------
# SQL models (sql/): marts completing the star from it, intermediate tables, reports.
# --------------------------------------------------------------------------------------------
MARTS = [
    _t(
        "dim_projects", "one row per project", ["project_id"],
        "A project is a repository when the sessions know it (every clone and worktree of it), else a git root "
        "(or working directory; Windows drive-letter case and separators folded), else the one `(no project)` "
        "bucket. Built by sql/marts/dim_projects.sql from dim_sessions.",
        ("project_id", "VARCHAR", "md5 of `repo:` + the lower-case repository, else of the normalized root path "
                                  "(first 16 hex)."),
        ("name", "VARCHAR", "Repository name, else the root folder's name, else `(no project)`."),
        ("repository", "VARCHAR", "owner/repo, when known (of the latest session that names one)."),
        ("root_path", "VARCHAR", "Normalized root path of the latest session (`/` separators, lower-case drive "
                                 "letter)."),
        ("n_sessions", "INTEGER", "Sessions in the project."),
        ("first_seen_at", "TIMESTAMPTZ", "First session start (UTC)."),
        ("last_seen_at", "TIMESTAMPTZ", "Last session end (UTC)."),
    ),
    _t(
        "dim_files", "one row per file of a project", ["file_id"],
        "Files touched by tool calls or listed in session_files. Built by sql/marts/dim_files.sql from "
        "int_session_files.",
        ("file_id", "VARCHAR", "md5 of project_id and path (first 16 hex)."),
        ("project_id", "VARCHAR", "Project of the file."),
        ("path", "VARCHAR", "Project-relative path with `/` separators (absolute when outside the project)."),
        ("extension", "VARCHAR", "File extension without the dot, lower case."),
        ("is_in_project", "BOOLEAN", "False when the path lies outside the project root."),
        ("n_sessions", "INTEGER", "Sessions that touched the file."),
    ),
]

MODELS = MARTS + [
    _t(
        "int_usage_legs", "one row per session x leg x model", ["session_id", "leg_index", "model"],
        "fct_usage_legs with the session's project and the UTC day each leg is dated by (its last request, "
        "else the leg's or the session's start): the base of the report_usage_* models.",
        ("project_id", "VARCHAR", ""), ("session_id", "VARCHAR", ""), ("leg_index", "INTEGER", ""),
        ("model", "VARCHAR", ""), ("requests", "BIGINT", ""), ("input_tokens", "BIGINT", ""),
        ("output_tokens", "BIGINT", ""), ("cache_read_tokens", "BIGINT", ""), ("cache_write_tokens", "BIGINT", ""),
        ("reasoning_tokens", "BIGINT", ""), ("premium_requests", "DECIMAL(38,6)", ""),
        ("ai_credits", "DECIMAL(38,9)", ""), ("cost_usd", "DECIMAL(38,11)", ""),
        ("cost_source", "VARCHAR", ""), ("day", "DATE", "UTC day."),
    ),
    _t(
        "int_session_days", "one row per session x UTC day with activity", ["session_id", "day"],
        "A session's activity per day, the base of report_activity_daily: kept for the changed sessions alone.",
        ("session_id", "VARCHAR", ""), ("day", "DATE", "UTC day."),
        ("n_sessions", "INTEGER", "1 on the day the session started, else 0."),
        ("n_turns", "INTEGER", "Prompts that day."), ("n_tool_calls", "INTEGER", "Tool calls started that day."),
        ("n_failed_tool_calls", "INTEGER", ""),
    ),
    _t(
        "int_stopwords", "one row per stopword", ["term"],
        "English and programming filler words left out of topics and search.",
        ("term", "VARCHAR", "Lower-case word."),
    ),
    _t(
        "int_search_docs", "one row per searchable text", ["doc_id"],
        "Prompts, answers, checkpoints and memories as documents for full-text search.",
        ("doc_id", "VARCHAR", "kind:session_id:ref."),
        ("session_id", "VARCHAR", "Session (null for memories without one)."),
        ("project_id", "VARCHAR", "Project of the session."),
        ("kind", "VARCHAR", "prompt | answer | checkpoint | memory"),
        ("ref", "VARCHAR", "turn_index, checkpoint_number or memory path."),
        ("title", "VARCHAR", "Session title, checkpoint title or memory path."),
        ("text", "VARCHAR", "The searchable text."),
        ("written_at", "TIMESTAMPTZ", "When it was written (UTC), when known."),
        ("n_terms", "INTEGER", "Document length in tokens (BM25's dl)."),
    ),
    _t(
        "int_search_terms", "one row per document x term", ["doc_id", "term"],
        "Inverted index behind `search()`.",
        ("doc_id", "VARCHAR", "Document."), ("session_id", "VARCHAR", "Session of the document."),
        ("term", "VARCHAR", "Token (see the `tokenize` macro)."),
        ("tf", "INTEGER", "Occurrences of the term in the document."),
    ),
    _t(
        "int_mention_words", "one row per session x text x word", ["session_id", "source", "ref", "word"],
        "Words of prompts and of checkpoints' important_files that could name a file (path, file name or "
        "stem); what `report_file_importance` counts as mentions. Per session, so an incremental ingest "
        "extracts the words of the changed sessions only.",
        ("source", "VARCHAR", "prompt | checkpoint"), ("project_id", "VARCHAR", "Project of the session."),
        ("session_id", "VARCHAR", ""), ("ref", "VARCHAR", "Turn index or checkpoint number."),
        ("word", "VARCHAR", "Lower-case run of `[a-z0-9_./-]`, trailing `./-` trimmed."),
    ),
    _t(
        "report_file_importance", "one row per file", ["file_id"],
        "Which files matter, per project, with the components of the score. score = 1.0*n_sessions "
        "+ 0.5*n_edits + 1.0*n_creates + 0.25*n_views + 0.5*n_days + 2.0*recency + 1.0*n_prompt_mentions "
        "+ 1.0*n_checkpoint_mentions.",
        ("project_id", "VARCHAR", "Project."), ("file_id", "VARCHAR", "File."),
        ("path", "VARCHAR", "Project-relative path."),
        ("score", "DOUBLE", "Weighted sum of the components (formula in the table comment and README)."),
        ("rank", "INTEGER", "1 = most important file of its project (ties broken by path)."),
        ("n_sessions", "INTEGER", "Sessions that touched the file."),
        ("n_edits", "INTEGER", "Edit touches (tool calls)."),
        ("n_creates", "INTEGER", "Create touches."),
        ("n_views", "INTEGER", "View touches."),
        ("n_days", "INTEGER", "Distinct UTC days with a touch."),
        ("recency", "DOUBLE", "Sum over touching sessions of 0.5^(age_days/30), age from the project's "
                              "latest activity."),
        ("n_prompt_mentions", "INTEGER", "Prompts naming the file (path, file name, or a stem of 6+ chars)."),
        ("n_checkpoint_mentions", "INTEGER", "Checkpoints whose important_files name the file."),
        ("first_seen_at", "TIMESTAMPTZ", "First touch (UTC)."), ("last_seen_at", "TIMESTAMPTZ", "Last touch (UTC)."),
    ),
    _t(
        "report_file_coupling", "one row per pair of files changed in the same sessions",
        ["file_id_a", "file_id_b"],
        "Temporal coupling (as code-maat): files edited or created in the same sessions; a session that changed "
        "more than 30 files is left out (code-maat's --max-changeset-size).",
        ("project_id", "VARCHAR", "Project."),
        ("file_id_a", "VARCHAR", "First file (smaller path)."), ("path_a", "VARCHAR", ""),
        ("file_id_b", "VARCHAR", "Second file."), ("path_b", "VARCHAR", ""),
        ("shared_sessions", "INTEGER", "Sessions that changed both (of at most 30 files each)."),
        ("n_sessions_a", "INTEGER", "Sessions that changed a (of at most 30 files each)."),
        ("n_sessions_b", "INTEGER", "Sessions that changed b (of at most 30 files each)."),
        ("degree", "DOUBLE", "100 * shared / average(n_sessions_a, n_sessions_b)."),
    ),
    _t(
        "int_topic_terms", "one row per term occurrence source", ["session_id", "source", "term"],
        "Code-aware tokens (and adjacent-pair bigrams) of prompts, session titles and checkpoint "
        "titles/overviews, stopwords removed.",
        ("project_id", "VARCHAR", ""), ("session_id", "VARCHAR", ""),
        ("source", "VARCHAR", "prompt | title | checkpoint_title | checkpoint_overview"),
        ("term", "VARCHAR", "Word or `word word` bigram."), ("n", "INTEGER", "Occurrences."),
        ("weight", "DOUBLE", "n times the source weight (titles 2, the rest 1)."),
        ("session_started_at", "TIMESTAMPTZ", "Session start (UTC)."),
    ),
    _t(
        "int_topic_project_terms", "one row per project x topic term", ["project_id", "term"],
        "Each project's topic terms summed over its sessions (its months, and its sessions without a start "
        "time): what report_topics weighs and int_topic_idf sums. Kept per project: an ingest rebuilds the rows "
        "of the projects its changed sessions belong to.",
        ("project_id", "VARCHAR", ""), ("term", "VARCHAR", ""),
        ("tf", "DOUBLE", "Sum of the source weights in the project's sessions."),
        ("n_sessions", "INTEGER", "Sessions of the project using the term."),
        ("first_seen_at", "TIMESTAMPTZ", "Start of the first of those sessions (UTC)."),
        ("last_seen_at", "TIMESTAMPTZ", "Start of the last of those sessions (UTC)."),
        ("n_project_sessions", "INTEGER", "Sessions of the project with any topic term (the same on each of "
                                          "its rows)."),
    ),
    _t(
        "int_topic_project_months", "one row per project x topic term x month", ["project_id", "term", "month"],
        "Each project's topic terms per month of session start (sessions with a start time): what "
        "report_topic_trends weighs. Kept per project, as int_topic_project_terms.",
        ("project_id", "VARCHAR", ""), ("term", "VARCHAR", ""), ("month", "DATE", "First day of the month (UTC)."),
        ("n_sessions", "INTEGER", "Sessions of the project that month using the term."),
        ("tf", "DOUBLE", "Sum of the source weights in those sessions."),
        ("first_seen_at", "TIMESTAMPTZ", "Start of the first of those sessions (UTC)."),
        ("last_seen_at", "TIMESTAMPTZ", "Start of the last of those sessions (UTC)."),
    ),
    _t(
        "int_topic_idf", "one row per topic term", ["term"],
        "Inverse document frequency of each topic term over all sessions: idf = ln(1 + N / df).",
        ("term", "VARCHAR", ""), ("df", "INTEGER", "Sessions using the term."),
        ("idf", "DOUBLE", "ln(1 + sessions with any term / df)."),
    ),
    _t(
        "report_topics", "one row per project x topic term", ["project_id", "term"],
        "What each project has been about: terms weighted tf-idf style, weight = sum(source weights) "
        "* ln(1 + N_sessions / df_sessions); top 100 per project.",
        ("project_id", "VARCHAR", ""), ("term", "VARCHAR", ""), ("weight", "DOUBLE", "See the table comment."),
        ("rank", "INTEGER", "1 = top term of the project (ties by term)."),
        ("n_sessions", "INTEGER", "Sessions of the project using the term."),
        ("first_seen_at", "TIMESTAMPTZ", "UTC."), ("last_seen_at", "TIMESTAMPTZ", "UTC."),
    ),
    _t(
        "report_topic_trends", "one row per project x topic term x month", ["project_id", "term", "month"],
        "Monthly use of each project's top 20 topic terms.",
        ("project_id", "VARCHAR", ""), ("term", "VARCHAR", ""), ("month", "DATE", "First day of the month."),
        ("n_sessions", "INTEGER", "Sessions that month using the term."),
        ("weight", "DOUBLE", "Same weighting as report_topics, within the month."),
    ),
    _t(
        "report_session_stats", "one row per session", ["session_id"],
        "Per-session statistics.",
        ("session_id", "VARCHAR", ""), ("project_id", "VARCHAR", ""), ("title", "VARCHAR", ""),
        ("client", "VARCHAR", ""), ("started_at", "TIMESTAMPTZ", "UTC."), ("duration_s", "DOUBLE", ""),
        ("n_turns", "INTEGER", ""), ("n_tool_calls", "INTEGER", ""), ("n_failed_tool_calls", "INTEGER", ""),
        ("failure_rate", "DOUBLE", "Failed / completed tool calls."),
        ("n_files", "INTEGER", "Distinct files touched."),
        ("n_files_changed", "INTEGER", "Distinct files edited or created."),
        ("n_checkpoints", "INTEGER", ""), ("requests", "BIGINT", "Model requests."),
        ("input_tokens", "BIGINT", "NULL when some model's legs do not record it (see fct_usage)."),
        ("output_tokens", "BIGINT", ""),
        ("ai_credits", "DECIMAL(38,9)", "Cost in AI credits; NULL when some part of it is unknown."),
        ("cost_usd", "DECIMAL(38,11)", ""), ("cost_source", "VARCHAR", "logged | estimated | unknown"),
        ("models", "VARCHAR[]", ""),
    ),
    _t(
        "report_tool_usage", "one row per project x tool", ["project_id", "tool_name"],
        "How often each tool is called, how often it fails and how long it takes.",
        ("project_id", "VARCHAR", ""), ("tool_name", "VARCHAR", ""),
        ("tool_family", "VARCHAR", "read | edit | create | search | shell | web | agent | mcp | other: one tool, "
                                   "whatever each client calls it."),
        ("n_calls", "INTEGER", ""), ("n_sessions", "INTEGER", ""), ("n_failed", "INTEGER", ""),
        ("failure_rate", "DOUBLE", "Failed / completed calls."),
        ("median_duration_ms", "DOUBLE", "Median start-to-completion time."),
    ),
    _t(
        "report_model_usage", "one row per month x model", ["month", "model"],
        "Token use and cost per model over time (UTC month of use, see int_usage_legs).",
        ("month", "DATE", ""), ("model", "VARCHAR", ""), ("n_sessions", "INTEGER", ""),
        ("requests", "BIGINT", ""), ("input_tokens", "BIGINT", "Sum of the known input tokens."),
        ("output_tokens", "BIGINT", ""), ("cache_read_tokens", "BIGINT", ""),
        ("ai_credits", "DECIMAL(38,9)", "Sum of the known costs."), ("cost_usd", "DECIMAL(38,11)", ""),
        ("n_legs_unknown_input", "INTEGER", "Legs not in input_tokens."),
        ("n_legs_unknown_cost", "INTEGER", "Legs not in ai_credits."),
    ),
    _t(
        "report_usage_daily", "one row per UTC day x project x model", ["day", "project_id", "model"],
        "What `python -m pipeline usage` reports: requests, tokens, AI credits and dollars. Figures sum what the "
        "legs know; the n_legs_unknown_* columns count the legs left out of a sum (a sum with a non-zero count "
        "beside it is a lower bound).",
        ("day", "DATE", "UTC day the legs are dated by (their last request)."),
        ("project_id", "VARCHAR", ""), ("model", "VARCHAR", ""),
        ("n_sessions", "INTEGER", "Sessions with usage that day."),
        ("requests", "BIGINT", "Model requests."),
        ("input_tokens", "BIGINT", "Sum of the known input tokens."),
        ("output_tokens", "BIGINT", ""), ("cache_read_tokens", "BIGINT", ""),
        ("cache_write_tokens", "BIGINT", ""), ("reasoning_tokens", "BIGINT", ""),
        ("premium_requests", "DECIMAL(38,6)", "Premium requests (legacy unit), where known."),
        ("ai_credits", "DECIMAL(38,9)", "Sum of the known costs in AI credits (logged or estimated)."),
        ("cost_usd", "DECIMAL(38,11)", "ai_credits x $0.01."),
        ("n_legs_unknown_input", "INTEGER", "Legs with requests whose input tokens no source records (not in "
                                            "input_tokens)."),
        ("n_legs_unknown_cost", "INTEGER", "Legs whose cost is unknown (not in ai_credits)."),
        ("n_legs_estimated_cost", "INTEGER", "Legs whose cost is estimated from the price table."),
    ),
    _t(
        "report_usage_weekly", "one row per ISO week x project x model", ["week", "project_id", "model"],
        "report_usage_daily by week (Monday first, UTC).",
        ("week", "DATE", "Monday of the week."), ("project_id", "VARCHAR", ""), ("model", "VARCHAR", ""),
        ("n_sessions", "INTEGER", "Sessions with usage that week."),
        ("requests", "BIGINT", "Model requests."),
        ("input_tokens", "BIGINT", "Sum of the known input tokens."),
        ("output_tokens", "BIGINT", ""), ("cache_read_tokens", "BIGINT", ""),
        ("cache_write_tokens", "BIGINT", ""), ("reasoning_tokens", "BIGINT", ""),
        ("premium_requests", "DECIMAL(38,6)", "Premium requests (legacy unit), where known."),
        ("ai_credits", "DECIMAL(38,9)", "Sum of the known costs in AI credits (logged or estimated)."),
        ("cost_usd", "DECIMAL(38,11)", "ai_credits x $0.01."),
        ("n_legs_unknown_input", "INTEGER", "Legs with requests whose input tokens no source records (not in "
                                            "input_tokens)."),
        ("n_legs_unknown_cost", "INTEGER", "Legs whose cost is unknown (not in ai_credits)."),
        ("n_legs_estimated_cost", "INTEGER", "Legs whose cost is estimated from the price table."),
    ),
    _t(
        "report_usage_monthly", "one row per month x project x model", ["month", "project_id", "model"],
        "report_usage_daily by month (UTC).",
        ("month", "DATE", "First day of the month."), ("project_id", "VARCHAR", ""), ("model", "VARCHAR", ""),
        ("n_sessions", "INTEGER", "Sessions with usage that month."),
        ("requests", "BIGINT", "Model requests."),
        ("input_tokens", "BIGINT", "Sum of the known input tokens."),
        ("output_tokens", "BIGINT", ""), ("cache_read_tokens", "BIGINT", ""),
        ("cache_write_tokens", "BIGINT", ""), ("reasoning_tokens", "BIGINT", ""),
        ("premium_requests", "DECIMAL(38,6)", "Premium requests (legacy unit), where known."),
        ("ai_credits", "DECIMAL(38,9)", "Sum of the known costs in AI credits (logged or estimated)."),
        ("cost_usd", "DECIMAL(38,11)", "ai_credits x $0.01."),
        ("n_legs_unknown_input", "INTEGER", "Legs with requests whose input tokens no source records (not in "
                                            "input_tokens)."),
        ("n_legs_unknown_cost", "INTEGER", "Legs whose cost is unknown (not in ai_credits)."),
        ("n_legs_estimated_cost", "INTEGER", "Legs whose cost is estimated from the price table."),
    ),
    _t(
        "report_activity_daily", "one row per UTC day with activity", ["day"],
        "Sessions started, prompts, tool calls and failures per day.",
        ("day", "DATE", ""), ("n_sessions", "INTEGER", "Sessions started that day."),
        ("n_turns", "INTEGER", "Prompts that day."), ("n_tool_calls", "INTEGER", "Tool calls started that day."),
        ("n_failed_tool_calls", "INTEGER", ""),
    ),
    _t(
        "report_activity_weekly", "one row per ISO week with activity", ["week"],
        "The daily activity rolled up to weeks (Monday start).",
        ("week", "DATE", "Monday of the week."), ("n_sessions", "INTEGER", ""), ("n_turns", "INTEGER", ""),
        ("n_tool_calls", "INTEGER", ""), ("n_failed_tool_calls", "INTEGER", ""),
        ("n_active_days", "INTEGER", "Days of the week with any activity."),
    ),
    _t(
        "report_open_threads", "one row per session whose latest checkpoint with next steps names them",
        ["session_id"],
        "Where each session left off: the next steps of its latest checkpoint that has any.",
        ("project_id", "VARCHAR", ""), ("session_id", "VARCHAR", ""),
        ("session_title", "VARCHAR", "dim_sessions.title."), ("checkpoint_number", "INTEGER", ""),
        ("title", "VARCHAR", "The checkpoint's title."), ("next_steps", "VARCHAR", ""),
        ("started_at", "TIMESTAMPTZ", "The session's start (UTC)."),
    ),
    _t(
        "report_session_files", "one row per session x file path", ["session_id", "path"],
        "The files each session touched, with what it did to them.",
        ("session_id", "VARCHAR", ""), ("path", "VARCHAR", "dim_files.path."),
        ("actions", "VARCHAR", "view, edit, create: the actions, comma-separated, sorted."),
        ("n_touches", "BIGINT", "Touches of the file in the session."),
        ("first_seen_at", "TIMESTAMPTZ", "First touch (UTC)."),
    ),
    _t(
        "report_people", "one row per person", ["user_name"],
        "Team mode: activity and usage per person who pushed sessions into the lake; in a machine's own warehouse "
        "one row, `(this machine)`.",
        ("user_name", "VARCHAR", "dim_sessions.user_name, else `(this machine)`."),
        ("n_machines", "INTEGER", "Machines the person pushed from."), ("n_sessions", "INTEGER", ""),
        ("n_projects", "INTEGER", ""), ("n_turns", "BIGINT", "Prompts."), ("n_tool_calls", "BIGINT", ""),
        ("n_failed_tool_calls", "BIGINT", ""), ("requests", "BIGINT", "Model requests."),
        ("output_tokens", "BIGINT", "Sum of the known output tokens."),
        ("ai_credits", "DECIMAL(38,9)", "Sum of the known costs (logged or estimated)."),
        ("cost_usd", "DECIMAL(38,11)", "ai_credits x $0.01."),
        ("first_seen_at", "TIMESTAMPTZ", ""), ("last_seen_at", "TIMESTAMPTZ", ""),
        ("n_legs_unknown_cost", "INTEGER", "Legs whose cost is unknown (not in ai_credits)."),
    ),
    _t(
        "report_people_usage_weekly", "one row per ISO week x person x model", ["week", "user_name", "model"],
        "Team mode: requests, tokens and cost per person, model and week (UTC, Monday first).",
        ("week", "DATE", "Monday of the week."), ("user_name", "VARCHAR", "As in report_people."),
        ("model", "VARCHAR", ""), ("n_sessions", "INTEGER", ""), ("requests", "BIGINT", ""),
        ("input_tokens", "BIGINT", "Sum of the known input tokens."), ("output_tokens", "BIGINT", ""),
        ("ai_credits", "DECIMAL(38,9)", ""), ("cost_usd", "DECIMAL(38,11)", ""),
        ("n_legs_unknown_input", "INTEGER", ""), ("n_legs_unknown_cost", "INTEGER", ""),
        ("n_legs_estimated_cost", "INTEGER", ""),
    ),
]

# Large texts that recur, stored once (issue 29: a 1 GB history held 5,244 copies of one 49 KB system prompt).
# Not a staging table of one source: kept by ``ingest --full`` and pruned of what no row names after each run.
TEXTS = [
    _t(
        "stg_texts", "one row per distinct stored text", ["text_key"],
        "Texts staged once however many events hold them: system prompts (`stg_events.content_key`).",
        ("text_key", "VARCHAR", "MD5 of the text's UTF-8 bytes, hex (of the redacted text)."),
        ("text", "VARCHAR", "The text, redacted."),
    ),
]

# --------------------------------------------------------------------------------------------
# Bookkeeping (dlt-style lineage).
# --------------------------------------------------------------------------------------------
BOOKKEEPING = [
    _t(
        "_runs", "one row per ingest run", ["run_id"], "Every ingest run.",
        ("run_id", "VARCHAR", "Run id (UTC time + random suffix)."),
        ("started_at", "TIMESTAMPTZ", "UTC."), ("finished_at", "TIMESTAMPTZ", "UTC."),
        ("mode", "VARCHAR", "full | incremental"),
        ("sources", "VARCHAR[]", "Source roots read, as every path is stored (a secret in a folder name redacted)."),
        ("n_files_read", "INTEGER", "Files (re)read."), ("n_files_unchanged", "INTEGER", "Files skipped as unchanged."),
        ("n_records", "BIGINT", "Records staged."), ("n_rejects", "INTEGER", "Rows added to _rejects."),
        ("n_redactions", "INTEGER", "Secrets redacted."),
        ("n_sessions_changed", "INTEGER", "Sessions whose star rows were rebuilt."),
        ("summary", "VARCHAR", "Run summary as JSON, with `phases`: the seconds spent discovering, reading, "
                               "staging, rebuilding the star, running models and checks."),
    ),
    _t(
        "_source_files", "one row per source file", ["source_path"], "Fingerprints for incremental ingest.",
        ("source_path", "VARCHAR", "Absolute path."), ("kind", "VARCHAR", "Reader that handles it."),
        ("session_id", "VARCHAR", "Session, for per-session files."),
        ("size", "BIGINT", ""), ("mtime_ns", "BIGINT", ""),
        ("fingerprint", "VARCHAR", "Size, mtime and, where the system keeps them, change time and inode (of every "
                                    "file, for a folder; size and mtime of db and -wal, for the store)."),
        ("last_good_offset", "BIGINT", "Bytes read to the end of the last complete record."),
        ("good_line", "BIGINT", "1-based line that starts at last_good_offset (append-only logs)."),
        ("tail_digest", "VARCHAR", "md5 of the 4 KiB ending at last_good_offset."),
        ("prefix_digest", "VARCHAR", "XXH3-128 of every byte before last_good_offset: proves an append-only log "
                                     "only grew (an edit before it reads the file again)."),
        ("head_digest", "VARCHAR", "md5 of the first 4 KiB: with tail_digest, checked on every run even when size "
                                   "and mtime are unchanged (a log swapped for another of the same size)."),
        ("n_records", "BIGINT", "Records staged from the file."),
        ("is_present", "BOOLEAN", "False once the file vanished from disk (its rows are kept)."),
        ("last_run_id", "VARCHAR", "Run that last read it."),
    ),
    _t(
        "_rejects", "one row per unreadable record", ["source_path", "position", "reason"],
        "Records that could not be read, with where and why; the run goes on without them.",
        ("source_path", "VARCHAR", "File."), ("position", "VARCHAR", "`line N @ byte B`, `row N` or `file`."),
        ("line_number", "BIGINT", ""), ("byte_offset", "BIGINT", ""),
        ("reason", "VARCHAR", "Why it was rejected."), ("excerpt", "VARCHAR", "First 200 characters, redacted."),
        ("_run_id", "VARCHAR", "Run that found it."),
    ),
]

BOOKKEEPING.append(_t(
    "_meta", "one row per setting", ["key"], "What the warehouse knows about itself.",
    ("key", "VARCHAR", "`format_version`: the version of what the readers stage and the star holds; "
                       "`result_chars`: how many characters of each tool output fct_tool_calls holds (0: all); "
                       "`models_digest`: what the models were last built whole by (their SQL and columns): "
                       "an ingest finding another builds them whole again."),
    ("value", "VARCHAR", ""),
))

# Bumped when a new version reads sources differently or changes a column's type: a warehouse
# written with an older format is upgraded on the next ingest (column types altered, every source
# still on disk read again, every session's star rows rebuilt; rows of sources gone from disk kept).
FORMAT_VERSION = 7  # 4: stg_events.result_head, result_chars, result_md5; _source_files.prefix_digest;
# 5: VS Code tool outputs, statuses and answering models, CLI skill messages and binary assets as staged;
# 6: fct_requests' agent, skill and per-request cost (every session's star rebuilt); 7: system prompts in stg_texts

# views over the tables, created by warehouse.ensure_schema: documented like tables, never exported
VIEWS = [_t(
    "tool_call_outputs", "one row per tool call", ["session_id", "tool_call_id"],
    "The whole output of each tool call, from the one place it is stored (stg_events; fct_tool_calls holds "
    "its start). In a lake read where it is (team mode), which has no staging rows, it is what fct_tool_calls holds.",
    ("session_id", "VARCHAR", "Session."),
    ("tool_call_id", "VARCHAR", "`toolCallId`."),
    ("result_content", "VARCHAR", "The whole `result.content`, redacted."),
    ("result_chars", "BIGINT", "Its length in characters."),
    ("result_md5", "VARCHAR", "MD5 of its UTF-8 bytes, hex."),
)]

ALL_TABLES = STAGING + TEXTS + STAR + MODELS + BOOKKEEPING
TABLES = {t.name: t for t in ALL_TABLES}


# money is DECIMAL: sums of credits and dollars stay exact (1 nano-AIU = 1e-9 credit)
DECIMAL = re.compile(r"^DECIMAL\((\d+),(\d+)\)$")


@cache
def arrow_schema(table: str) -> pa.Schema:
    import pyarrow as pa  # here, not at import: a run that reads nothing never loads pyarrow

    types = {"VARCHAR": pa.string(), "BIGINT": pa.int64(), "INTEGER": pa.int32(), "BOOLEAN": pa.bool_(),
             "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"), "DOUBLE": pa.float64(),
             "VARCHAR[]": pa.list_(pa.string()), "DATE": pa.date32()}

    def arrow_type(t: str):
        m = DECIMAL.match(t)
        return pa.decimal128(int(m.group(1)), int(m.group(2))) if m else types[t]
    return pa.schema([(c.name, arrow_type(c.type)) for c in TABLES[table].columns])


def to_arrow(table: str, rows: list[dict]) -> pa.Table:
    """Rows (dicts) as an Arrow table of the declared schema; a missing key is a null."""
    import pyarrow as pa

    schema = arrow_schema(table)
    if not rows:
        return schema.empty_table()
    # each row's values taken at once, then the columns by one transposition: a row's dict is read while it is in
    # the CPU's cache (from_pylist, and gathering a column across all the rows, walk every dict once per column)
    names = schema.names
    columns = zip(*[tuple(map(row.get, names)) for row in rows], strict=True)
    return pa.table([pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)], schema=schema)
