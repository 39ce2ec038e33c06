"""What the pipeline knows about each kind of source, declared once.

A source kind is one on-disk format Copilot writes. Its declaration says which client wrote it, how
a change to it is noticed (``fingerprint``), whether a grown file is read from where the last run
stopped (``append_only``), which ``source_kind`` values its staged rows carry, and, where two
sources can say the same thing about one session, which of them wins (``precedence``: lower wins,
per row kind). Discovery (``extract/cli_home.py``, ``extract/vscode.py``) names the files of each
kind; its reader is registered with ``@reader(name)`` in ``pipeline/extract`` (``extract.READERS``).

Nothing here does I/O: the transforms read precedence from here without importing a reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SourceKind:
    name: str
    client: str  # "cli" or "vscode": who wrote it (a vscode.metadata.json in a CLI session folder is VS Code's)
    files: str  # where it lives, for people
    # "stat": size, mtime and, where the system keeps them, the time of the last change and the inode (of every file,
    # for a folder; see extract.base.stat_fingerprint); "sqlite": database + WAL
    fingerprint: str = "stat"
    append_only: bool = False  # a grown file is read from its last good offset
    row_kinds: tuple[str, ...] = ()  # the source_kind values of its stg_events / stg_session_meta rows
    precedence: dict[str, int] = field(default_factory=dict)  # row kind -> rank where sources overlap


KINDS: dict[str, SourceKind] = {k.name: k for k in (
    # Copilot CLI home (~/.copilot)
    SourceKind("events", "cli", "session-state/<id>/events.jsonl", append_only=True,
               row_kinds=("events",), precedence={"events": 0}),
    SourceKind("legacy_jsonl", "cli", "session-state/<id>.jsonl (CLI <= 0.0.3xx)",
               append_only=True,
               row_kinds=("legacy_jsonl",), precedence={"legacy_jsonl": 1}),
    SourceKind("history_json", "cli", "history-session-state/session_<id>_<ms>.json", row_kinds=("history_json",),
               precedence={"history_json": 2}),
    SourceKind("workspace_yaml", "cli", "session-state/<id>/workspace.yaml", row_kinds=("workspace_yaml",)),
    SourceKind("checkpoints", "cli", "session-state/<id>/checkpoints/ (a folder, read whole)",
               precedence={"folder_md": 0, "folder_json": 1}),
    SourceKind("plan_md", "cli", "session-state/<id>/plan.md"),
    SourceKind("session_index_md", "cli", "session-state/<id>/index.md"),
    SourceKind("session_store", "cli", "session-store.db (+ -wal)", fingerprint="sqlite", row_kinds=("store",),
               precedence={"store": 2}),
    SourceKind("orphan_wal", "cli", "session-store.db-wal without its database"),
    SourceKind("desktop_db", "cli", "data.db (the desktop app: totals per session; read in place, read-only, "
               "through an allow-list)", fingerprint="sqlite", row_kinds=("desktop",)),
    SourceKind("otel", "cli", "otel/*.jsonl (an OpenTelemetry file export: COPILOT_OTEL_FILE_EXPORTER_PATH)",
               append_only=True, row_kinds=("otel",)),
    # VS Code (a session folder's vscode.metadata.json, and the User folder)
    SourceKind("vscode_metadata", "vscode", "session-state/<id>/vscode.metadata.json", row_kinds=("vscode_metadata",)),
    SourceKind("chat_session", "vscode", "workspaceStorage/<hash>/chatSessions/<id>.json|.jsonl",
               row_kinds=("chat_session", "vscode_chat"), precedence={"chat_session": 3}),
    SourceKind("transcript", "vscode", "workspaceStorage/<hash>/GitHub.copilot-chat/transcripts/<id>.jsonl",
               append_only=True, row_kinds=("transcript", "vscode_transcript"),
               precedence={"transcript": 4}),
    SourceKind("debug_log", "vscode",
               "workspaceStorage/<hash>/GitHub.copilot-chat/debug-logs/<id>/ (a folder, read whole: main.jsonl, "
               "its sub-agent logs, models.json)", row_kinds=("vscode_debug_log",)),
    SourceKind("agent_traces", "vscode", "globalStorage/github.copilot-chat/agent-traces.db (OpenTelemetry spans in "
               "SQLite)", fingerprint="sqlite", row_kinds=("vscode_traces",)),
    SourceKind("vscode_memory", "vscode", "memory-tool/memories/**/*.md"),
    SourceKind("vscode_state_db", "vscode", "workspaceStorage/<hash>/state.vscdb", fingerprint="sqlite",
               row_kinds=("vscode_index",)),
)}

APPEND_KINDS = frozenset(k.name for k in KINDS.values() if k.append_only)
# row kind -> rank: which event log wins when one session has several (they would double count
# otherwise), which checkpoint copy wins when the folder and the store both have it
PRECEDENCE = {row: rank for k in KINDS.values() for row, rank in k.precedence.items()}
# the row kinds that make a session a VS Code one
VSCODE_ROW_KINDS = tuple(row for k in KINDS.values() if k.client == "vscode" for row in k.row_kinds)
