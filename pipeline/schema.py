"""Every warehouse table, declared once: columns, types, grain, key and descriptions.

The warehouse is created from these declarations (``create_sql``), the same descriptions
reach DuckDB as ``COMMENT ON`` so BI tools show them, and the README's table reference is
generated from them (``python -m pipeline docs``).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


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
        ("extra", "VARCHAR", "The rest of `data` as JSON (never reasoning text or transformedContent; "
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
        "plan.md, session index.md, store workspace artifacts and VS Code memories (session, repo and user "
        "memories; the last two have no session).",
        ("memory_id", "VARCHAR", "md5 of source path (first 16 hex)."),
        ("session_id", "VARCHAR", "Session the document belongs to."),
        ("kind", "VARCHAR", "plan | session_index | workspace_artifact | memory"),
        ("path", "VARCHAR", "Path relative to the source root."),
        ("content", "VARCHAR", "Text, redacted."),
    ),
]

# --------------------------------------------------------------------------------------------
# SQL models (sql/<name>.sql), run in this order after every ingest: int_ feed the reports,
# report_ feed the exports. Formulas are documented in the SQL files and in the README.
# --------------------------------------------------------------------------------------------
MODELS = [
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
        ("written_at", "TIMESTAMP", "When it was written (UTC), when known."),
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
        ("first_seen_at", "TIMESTAMP", "First touch (UTC)."), ("last_seen_at", "TIMESTAMP", "Last touch (UTC)."),
    ),
    _t(
        "report_file_coupling", "one row per pair of files changed in the same sessions",
        ["file_id_a", "file_id_b"],
        "Temporal coupling (as code-maat): files edited or created in the same sessions.",
        ("project_id", "VARCHAR", "Project."),
        ("file_id_a", "VARCHAR", "First file (smaller path)."), ("path_a", "VARCHAR", ""),
        ("file_id_b", "VARCHAR", "Second file."), ("path_b", "VARCHAR", ""),
        ("shared_sessions", "INTEGER", "Sessions that changed both."),
        ("n_sessions_a", "INTEGER", "Sessions that changed a."),
        ("n_sessions_b", "INTEGER", "Sessions that changed b."),
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
        ("session_started_at", "TIMESTAMP", "Session start (UTC)."),
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
        ("first_seen_at", "TIMESTAMP", "UTC."), ("last_seen_at", "TIMESTAMP", "UTC."),
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
        ("client", "VARCHAR", ""), ("started_at", "TIMESTAMP", "UTC."), ("duration_s", "DOUBLE", ""),
        ("n_turns", "INTEGER", ""), ("n_tool_calls", "INTEGER", ""), ("n_failed_tool_calls", "INTEGER", ""),
        ("failure_rate", "DOUBLE", "Failed / completed tool calls."),
        ("n_files", "INTEGER", "Distinct files touched."),
        ("n_files_changed", "INTEGER", "Distinct files edited or created."),
        ("n_checkpoints", "INTEGER", ""), ("input_tokens", "BIGINT", ""), ("output_tokens", "BIGINT", ""),
        ("models", "VARCHAR[]", ""),
    ),
    _t(
        "report_tool_usage", "one row per project x tool", ["project_id", "tool_name"],
        "How often each tool is called, how often it fails and how long it takes.",
        ("project_id", "VARCHAR", ""), ("tool_name", "VARCHAR", ""), ("n_calls", "INTEGER", ""),
        ("n_sessions", "INTEGER", ""), ("n_failed", "INTEGER", ""),
        ("failure_rate", "DOUBLE", "Failed / completed calls."),
        ("median_duration_ms", "DOUBLE", "Median start-to-completion time."),
    ),
    _t(
        "report_model_usage", "one row per month x model", ["month", "model"],
        "Token use per model over time (month of session start).",
        ("month", "DATE", ""), ("model", "VARCHAR", ""), ("n_sessions", "INTEGER", ""),
        ("requests", "BIGINT", ""), ("input_tokens", "BIGINT", ""), ("output_tokens", "BIGINT", ""),
        ("cache_read_tokens", "BIGINT", ""),
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
        ("summary", "VARCHAR", "Run summary as JSON, with `phases`: the seconds spent discovering, reading, "
                               "staging, rebuilding the star, running models and checks."),
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

ALL_TABLES = STAGING + STAR + MODELS + BOOKKEEPING
TABLES = {t.name: t for t in ALL_TABLES}


@cache
def arrow_schema(table: str) -> pa.Schema:
    import pyarrow as pa  # here, not at import: a run that reads nothing never loads pyarrow

    types = {"VARCHAR": pa.string(), "BIGINT": pa.int64(), "INTEGER": pa.int32(), "BOOLEAN": pa.bool_(),
             "TIMESTAMP": pa.timestamp("us"), "DOUBLE": pa.float64(), "VARCHAR[]": pa.list_(pa.string()),
             "DATE": pa.date32()}
    return pa.schema([(c.name, types[c.type]) for c in TABLES[table].columns])


def to_arrow(table: str, rows: list[dict]) -> pa.Table:
    """Rows (dicts) as an Arrow table of the declared schema; a missing key is a null."""
    import pyarrow as pa

    schema = arrow_schema(table)
    if not rows:
        return schema.empty_table()
    if len(schema) < 2:
        return pa.Table.from_pylist(rows, schema=schema)
    try:
        # column by column from one transposition: ~1.5x faster than from_pylist's per-cell lookups
        columns = zip(*map(operator.itemgetter(*schema.names), rows), strict=True)
    except KeyError:
        return pa.Table.from_pylist(rows, schema=schema)
    return pa.table([pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)], schema=schema)
