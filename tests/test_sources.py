"""Every source kind is declared once (pipeline/sources.py) and has its reader."""

from pipeline.extract import READERS
from pipeline.sources import APPEND_KINDS, KINDS, PRECEDENCE, VSCODE_ROW_KINDS


def test_every_declared_kind_has_a_reader_and_every_reader_a_declaration():
    assert set(READERS) == set(KINDS)


def test_what_the_declarations_say():
    assert {"events", "legacy_jsonl", "transcript", "otel"} == APPEND_KINDS
    assert {k.name for k in KINDS.values() if k.fingerprint == "sqlite"} == {"session_store", "vscode_state_db",
                                                                             "desktop_db", "agent_traces"}
    # which event log wins for one session, which checkpoint copy wins
    events = sorted((r for r in PRECEDENCE if r in {"events", "legacy_jsonl", "history_json", "chat_session",
                                                     "transcript"}), key=PRECEDENCE.get)
    assert events == ["events", "legacy_jsonl", "history_json", "chat_session", "transcript"]
    assert sorted(("store", "folder_json", "folder_md"), key=PRECEDENCE.get) == ["folder_md", "folder_json", "store"]
    assert set(VSCODE_ROW_KINDS) == {"vscode_metadata", "vscode_chat", "vscode_transcript", "vscode_index",
                                     "chat_session", "transcript", "vscode_debug_log", "vscode_traces"}
