"""Real-world damage, end to end: every complete record is kept, every loss is a _rejects row."""

import json

from pipeline.extract import store as store_mod
from pipeline.ingest import ingest

from .conftest import rows


def _ev(i, etype="user.message", content="q", ts="2026-01-01T00:00:00.000Z"):
    return json.dumps({"type": etype, "data": {"content": content}, "id": f"e{i}", "timestamp": ts,
                       "parentId": None})


def _session(home, sid, events: bytes | None = None, workspace: str | None = None):
    folder = home / "session-state" / sid
    folder.mkdir(parents=True, exist_ok=True)
    if events is not None:
        (folder / "events.jsonl").write_bytes(events)
    if workspace is not None:
        (folder / "workspace.yaml").write_text(workspace)
    return folder


def test_live_session_partial_last_line_is_picked_up_once_complete(tmp_path):
    home = tmp_path / "home"
    line1, line2 = _ev(1, content="first"), _ev(2, "assistant.message", "answer")
    folder = _session(home, "live", (line1 + "\n" + line2[:25]).encode())
    (folder / "inuse.4242.lock").write_text("4242")
    wh = tmp_path / "w.duckdb"
    s1 = ingest(wh, [home])
    assert (s1.n_rejects, s1.n_pending_tails, s1.n_records) == (0, 1, 1)
    (folder / "events.jsonl").write_bytes((line1 + "\n" + line2 + "\n").encode())
    s2 = ingest(wh, [home])
    assert (s2.n_rejects, s2.n_pending_tails, s2.n_records) == (0, 0, 1)
    assert rows(wh, "select user_message, assistant_response from fct_turns") == [("first", "answer")]
    assert rows(wh, "select count(*) from _rejects") == [(0,)]


def test_empty_log_and_a_folder_with_only_workspace_yaml(tmp_path):
    home = tmp_path / "home"
    _session(home, "empty", b"", "name: Empty log\ncwd: /p\n")
    _session(home, "yaml-only", None, "name: Never used\ncwd: /p\ncreated_at: 2026-02-01 10:00:00\n")
    wh = tmp_path / "w.duckdb"
    s = ingest(wh, [home])
    assert s.n_rejects == 0
    assert rows(wh, "select session_id, title, n_turns, started_at::varchar from dim_sessions order by 1") == [
        ("empty", "Empty log", 0, None), ("yaml-only", "Never used", 0, "2026-02-01 10:00:00+00")]


def test_malformed_side_files_do_not_stop_the_session(tmp_path):
    home = tmp_path / "home"
    folder = _session(home, "s", (_ev(1) + "\n").encode(), "cwd: /p\nname: [broken\n")
    (folder / "vscode.metadata.json").write_text('{"customTitle": "half')
    cp = folder / "checkpoints"
    cp.mkdir()
    (cp / "bad.json").write_text("{nope")
    wh = tmp_path / "w.duckdb"
    s = ingest(wh, [home])
    assert s.n_rejects == 3
    assert rows(wh, "select n_turns, cwd from dim_sessions") == [(1, "/p")]
    reasons = sorted(r[0].split(" (")[0].split(":")[0] for r in rows(wh, "select reason from _rejects"))
    assert reasons == ["file is not valid JSON", "file is not valid JSON", "workspace.yaml is not valid YAML"]


def test_a_store_that_keeps_changing_is_skipped_and_retried(tmp_path, monkeypatch):
    import sqlite3
    home = tmp_path / "home"
    home.mkdir()
    con = sqlite3.connect(home / "session-store.db")
    con.execute("create table sessions (id text primary key, summary text)")
    con.execute("insert into sessions values ('s1', 'from the store')")
    con.commit()
    con.close()
    ticks = iter(range(1000))
    real_fp = store_mod.store_fingerprint
    monkeypatch.setattr(store_mod, "store_fingerprint", lambda p: (f"{next(ticks)}", real_fp(p)[1]))
    monkeypatch.setattr(store_mod.time, "sleep", lambda s: None)
    wh = tmp_path / "w.duckdb"
    s = ingest(wh, [home])
    assert (s.n_files_skipped, s.n_rejects) == (1, 0)
    assert rows(wh, "select count(*) from _source_files") == [(0,)]  # not fingerprinted: retried next run
    monkeypatch.setattr(store_mod, "store_fingerprint", real_fp)
    s = ingest(wh, [home])
    assert s.n_files_skipped == 0
    assert rows(wh, "select session_id, title from dim_sessions") == [("s1", "from the store")]


def test_mixed_timestamp_formats_are_utc(tmp_path):
    home = tmp_path / "home"
    lines = [_ev(1, ts="2026-03-01T10:00:00.250Z"), _ev(2, "assistant.message", "a", "2026-03-01 10:00:05"),
             _ev(3, content="q2", ts="2026-03-01T12:00:10+02:00")]
    _session(home, "t", ("\n".join(lines) + "\n").encode())
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select started_at::varchar from fct_turns order by turn_index") == [
        ("2026-03-01 10:00:00.25+00",), ("2026-03-01 10:00:10+00",)]
