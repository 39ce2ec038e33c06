"""Every warehouse table, declared once: columns, types, grain, key and descriptions.

The warehouse is created from these declarations (``create_sql``), the same descriptions
reach DuckDB as ``COMMENT ON`` so BI tools show them, and the README's table reference is
generated from them (``python -m pipeline docs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


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

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def create_sql(self) -> str:
        cols = ",\n  ".join(f'"{c.name}" {c.type}' for c in self.columns)
        return f'create table if not exists "{self.name}" (\n  {cols}\n)'


def _t(name, grain, key, description, *cols):
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
        "Every event read from events.jsonl, flat legacy session logs and legacy history files; "
        "fields the star schema uses are lifted into columns, the rest stays in `extra` (JSON).",
        ("session_id", "VARCHAR", "Copilot session id."),
        ("source_kind", "VARCHAR", "events | legacy_jsonl | history_json"),
        ("event_index", "BIGINT", "0-based position of the event in its file."),
        ("event_id", "VARCHAR", "Envelope `id`."),
        ("parent_id", "VARCHAR", "Envelope `parentId`."),
        ("event_type", "VARCHAR", "Envelope `type`, e.g. `user.message`."),
        ("ts", "VARCHAR", "Envelope `timestamp` as written."),
        ("agent_id", "VARCHAR", "Envelope `agentId` for subagent events."),
        ("content", "VARCHAR", "Message text (user.message content, assistant.message content, ...)."),
        ("model", "VARCHAR", "Model named by the event."),
        ("interaction_id", "VARCHAR", "`interactionId`."),
        ("turn_id", "VARCHAR", "`turnId`."),
        ("tool_call_id", "VARCHAR", "`toolCallId` of tool events."),
        ("tool_name", "VARCHAR", "`toolName` of tool events."),
        ("arguments", "VARCHAR", "Tool arguments as JSON text."),
        ("success", "BOOLEAN", "`success` of tool.execution_complete."),
        ("error_message", "VARCHAR", "Error message of a failed tool call or session.error."),
        ("result_content", "VARCHAR", "`result.content` of a completed tool call."),
        ("parent_tool_call_id", "VARCHAR", "`parentToolCallId` (inside subagents)."),
        ("mcp_server_name", "VARCHAR", "`mcpServerName` of MCP tool calls."),
        ("output_tokens", "BIGINT", "`outputTokens` of assistant.message."),
        ("request_id", "VARCHAR", "`requestId` of assistant.message."),
        ("extra", "VARCHAR", "The rest of `data` as JSON (never reasoning text or transformedContent)."),
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
        ("arguments", "VARCHAR", "Arguments as JSON text."),
        ("ts", "VARCHAR", "Timestamp of the assistant.message."),
        ("model", "VARCHAR", "Model of the assistant.message."),
        ("mcp_server_name", "VARCHAR", "`mcpServerName`."),
        ("_source_path", "VARCHAR", "File the row was read from."),
        ("_source_line", "BIGINT", "Line of the assistant.message."),
        ("_run_id", "VARCHAR", "Ingest run that wrote the row."),
    ),
    _t(
        "stg_session_meta", "one row per metadata record about a session", ["_source_path"],
        "Session metadata from workspace.yaml, vscode.metadata.json and session-store.db `sessions`.",
        ("session_id", "VARCHAR", "Copilot session id."),
        ("source_kind", "VARCHAR", "workspace_yaml | vscode_metadata | store"),
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
        "plan.md, root index.md and store workspace artifacts.",
        ("session_id", "VARCHAR", "Copilot session id."),
        ("kind", "VARCHAR", "plan | session_index | workspace_artifact | memory"),
        ("path", "VARCHAR", "Path of the document, relative to its source root."),
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
        ("input_tokens", "BIGINT", ""), ("output_tokens", "BIGINT", ""),
        ("cache_read_tokens", "BIGINT", ""), ("cache_write_tokens", "BIGINT", ""),
        ("reasoning_tokens", "BIGINT", ""), ("created_at", "VARCHAR", "As written."),
        ("_source_path", "VARCHAR", "Database file."), ("_run_id", "VARCHAR", ""),
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
        ("client", "VARCHAR", "Where the session came from: cli | vscode."),
        ("sources", "VARCHAR[]", "Every source kind the session was read from, sorted."),
        ("cwd", "VARCHAR", "Working directory as written by Copilot."),
        ("git_root", "VARCHAR", "Git root, when known."),
        ("repository", "VARCHAR", "owner/repo, when known."),
        ("branch", "VARCHAR", "Git branch at session start."),
        ("copilot_version", "VARCHAR", "CLI version from session.start."),
        ("started_at", "TIMESTAMP", "UTC start of the session."),
        ("ended_at", "TIMESTAMP", "UTC time of the last event (or last update)."),
        ("duration_s", "DOUBLE", "ended_at - started_at in seconds."),
        ("n_turns", "INTEGER", "User prompts (fct_turns rows)."),
        ("n_tool_calls", "INTEGER", "Tool calls (fct_tool_calls rows)."),
        ("n_failed_tool_calls", "INTEGER", "Tool calls whose completion reported success = false."),
        ("n_events", "INTEGER", "Events read for the session (all types, incl. unknown)."),
        ("n_unknown_events", "INTEGER", "Events of a type this version does not model (kept in stg_events)."),
        ("n_resumes", "INTEGER", "session.resume events."),
        ("models", "VARCHAR[]", "Models used, sorted."),
        ("is_gone", "BOOLEAN", "True when no source file of the session is on disk any more."),
    ),
    _t(
        "dim_projects", "one row per project", ["project_id"],
        "A project is a git root (or working directory); Windows drive-letter case and separators folded.",
        ("project_id", "VARCHAR", "md5 of the normalized root path (first 16 hex)."),
        ("name", "VARCHAR", "Repository name, else the root folder's name."),
        ("repository", "VARCHAR", "owner/repo, when known."),
        ("root_path", "VARCHAR", "Normalized root path (`/` separators, lower-case drive letter)."),
        ("n_sessions", "INTEGER", "Sessions in the project."),
        ("first_seen_at", "TIMESTAMP", "First session start (UTC)."),
        ("last_seen_at", "TIMESTAMP", "Last session end (UTC)."),
    ),
    _t(
        "dim_files", "one row per file of a project", ["file_id"],
        "Files touched by tool calls or listed in session_files.",
        ("file_id", "VARCHAR", "md5 of project_id and path (first 16 hex)."),
        ("project_id", "VARCHAR", "Project of the file."),
        ("path", "VARCHAR", "Project-relative path with `/` separators (absolute when outside the project)."),
        ("extension", "VARCHAR", "File extension without the dot, lower case."),
        ("is_in_project", "BOOLEAN", "False when the path lies outside the project root."),
        ("n_sessions", "INTEGER", "Sessions that touched the file."),
    ),
    _t(
        "fct_turns", "one row per user prompt", ["session_id", "turn_index"],
        "User prompts with the assistant's visible answer until the next prompt.",
        ("session_id", "VARCHAR", "Session."),
        ("turn_index", "INTEGER", "0-based, in order."),
        ("user_message", "VARCHAR", "What the user typed (never transformedContent), redacted."),
        ("assistant_response", "VARCHAR", "Non-empty assistant.message texts of the turn, joined by a blank line."),
        ("started_at", "TIMESTAMP", "UTC time of the prompt."),
        ("ended_at", "TIMESTAMP", "UTC time of the turn's last event."),
        ("interaction_id", "VARCHAR", "`interactionId` of the prompt."),
        ("model", "VARCHAR", "Model of the turn's last assistant message."),
        ("n_assistant_messages", "INTEGER", "assistant.message events in the turn."),
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
        ("tool_name", "VARCHAR", "Tool name."),
        ("mcp_server_name", "VARCHAR", "MCP server, for MCP tools."),
        ("arguments", "VARCHAR", "Arguments as JSON text, redacted."),
        ("file_id", "VARCHAR", "File the call touched (dim_files), when it names one."),
        ("action", "VARCHAR", "view | edit | create when the call touched a file."),
        ("is_success", "BOOLEAN", "Completion's `success`; null when the call never completed."),
        ("error_message", "VARCHAR", "Error of a failed call."),
        ("result_content", "VARCHAR", "`result.content` (what the model saw), redacted."),
        ("model", "VARCHAR", "Model that requested the call."),
        ("parent_tool_call_id", "VARCHAR", "Enclosing subagent call."),
        ("requested_at", "TIMESTAMP", "UTC time of the assistant.message that requested it."),
        ("started_at", "TIMESTAMP", "UTC tool.execution_start (else request time)."),
        ("completed_at", "TIMESTAMP", "UTC tool.execution_complete."),
        ("duration_ms", "BIGINT", "completed_at - started_at."),
    ),
    _t(
        "fct_file_touches", "one row per session x file x action", ["session_id", "file_id", "action"],
        "Which files a session viewed, edited or created.",
        ("session_id", "VARCHAR", "Session."),
        ("file_id", "VARCHAR", "File."),
        ("action", "VARCHAR", "view | edit | create"),
        ("n_touches", "INTEGER", "Tool calls (or session_files rows) behind the touch."),
        ("first_seen_at", "TIMESTAMP", "UTC time of the first touch."),
        ("last_seen_at", "TIMESTAMP", "UTC time of the last touch."),
    ),
    _t(
        "fct_checkpoints", "one row per checkpoint", ["session_id", "checkpoint_number"],
        "Checkpoint summaries (folder markdown or JSON preferred over session-store.db).",
        ("session_id", "VARCHAR", ""), ("checkpoint_number", "INTEGER", "1-based."),
        ("title", "VARCHAR", ""), ("overview", "VARCHAR", ""), ("history", "VARCHAR", ""),
        ("work_done", "VARCHAR", ""), ("technical_details", "VARCHAR", ""),
        ("important_files", "VARCHAR", ""), ("next_steps", "VARCHAR", ""),
        ("created_at", "TIMESTAMP", "UTC, when known (store row or compaction event)."),
        ("source_kind", "VARCHAR", "folder_md | folder_json | store"),
    ),
    _t(
        "fct_refs", "one row per session x ref", ["session_id", "ref_type", "ref_value"],
        "Commits, pull requests and issues a session referred to.",
        ("session_id", "VARCHAR", ""), ("ref_type", "VARCHAR", "commit | pr | issue"),
        ("ref_value", "VARCHAR", "SHA or number."), ("turn_index", "INTEGER", ""),
        ("created_at", "TIMESTAMP", "UTC."), ("source_kind", "VARCHAR", "store | attachment"),
    ),
    _t(
        "fct_usage", "one row per session x model", ["session_id", "model"],
        "Token usage. Per-request store rows win; else session.shutdown modelMetrics (legs summed, "
        "a leg counted once); else assistant.message outputTokens.",
        ("session_id", "VARCHAR", ""), ("model", "VARCHAR", ""),
        ("requests", "BIGINT", "API requests."),
        ("input_tokens", "BIGINT", "Input tokens (cache-inclusive, as Copilot reports them)."),
        ("output_tokens", "BIGINT", ""), ("cache_read_tokens", "BIGINT", ""),
        ("cache_write_tokens", "BIGINT", ""), ("reasoning_tokens", "BIGINT", ""),
        ("premium_requests", "DOUBLE", "Premium request cost from modelMetrics.requests.cost."),
        ("usage_source", "VARCHAR", "store_usage_events | shutdown | message_output_tokens"),
    ),
    _t(
        "fct_memories", "one row per memory / plan file", ["memory_id"],
        "plan.md, session index.md and workspace artifacts.",
        ("memory_id", "VARCHAR", "md5 of source path (first 16 hex)."),
        ("session_id", "VARCHAR", "Session the document belongs to."),
        ("kind", "VARCHAR", "plan | session_index | workspace_artifact | memory"),
        ("path", "VARCHAR", "Path relative to the source root."),
        ("content", "VARCHAR", "Text, redacted."),
    ),
]

# --------------------------------------------------------------------------------------------
# Bookkeeping (dlt-style lineage).
# --------------------------------------------------------------------------------------------
BOOKKEEPING = [
    _t(
        "_runs", "one row per ingest run", ["run_id"], "Every ingest run.",
        ("run_id", "VARCHAR", "Run id (UTC time + random suffix)."),
        ("started_at", "TIMESTAMP", "UTC."), ("finished_at", "TIMESTAMP", "UTC."),
        ("mode", "VARCHAR", "full | incremental"),
        ("sources", "VARCHAR[]", "Source roots read."),
        ("n_files_read", "INTEGER", "Files (re)read."), ("n_files_unchanged", "INTEGER", "Files skipped as unchanged."),
        ("n_records", "BIGINT", "Records staged."), ("n_rejects", "INTEGER", "Rows added to _rejects."),
        ("n_redactions", "INTEGER", "Secrets redacted."),
        ("n_sessions_changed", "INTEGER", "Sessions whose star rows were rebuilt."),
        ("summary", "VARCHAR", "Run summary as JSON."),
    ),
    _t(
        "_source_files", "one row per source file", ["source_path"], "Fingerprints for incremental ingest.",
        ("source_path", "VARCHAR", "Absolute path."), ("kind", "VARCHAR", "Reader that handles it."),
        ("session_id", "VARCHAR", "Session, for per-session files."),
        ("size", "BIGINT", ""), ("mtime_ns", "BIGINT", ""),
        ("fingerprint", "VARCHAR", "Size and mtime (of every file, for a folder; of db and -wal, for the store)."),
        ("last_good_offset", "BIGINT", "Bytes read to the end of the last complete record."),
        ("good_line", "BIGINT", "1-based line that starts at last_good_offset (append-only logs)."),
        ("tail_digest", "VARCHAR", "md5 of the 4 KiB ending at last_good_offset: proves a log only grew."),
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

ALL_TABLES = STAGING + STAR + BOOKKEEPING
TABLES = {t.name: t for t in ALL_TABLES}
