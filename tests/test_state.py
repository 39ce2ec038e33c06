"""What the warehouse remembers of each source (load/state.py) never misses a change nor counts a file twice:
an edit in place before where reading stopped, a log swapped for another of the same size and mtime, any source
edited with its mtime set back, a rebuild from scratch after a session folder was deleted, a home named twice or
through a link."""

from __future__ import annotations

import json
import os
import shutil

from pipeline.ingest import ingest

from .conftest import SAMPLE_HOME, rows

PROMPT = "deploy with password=hunter2hunter2 to staging"


def _home(tmp_path, prompts=(PROMPT, "and then run the tests")):
    home = tmp_path / "copilot-home"
    folder = home / "session-state" / "11111111-2222-4333-8444-555555555555"
    folder.mkdir(parents=True)
    events = [{"type": "session.start", "data": {"sessionId": folder.name, "context": {"cwd": "/w/app"}},
               "id": "e0", "timestamp": "2026-10-01T09:00:00.000Z"}]
    for k, text in enumerate(prompts):
        events += [{"type": "user.message", "data": {"content": text}, "id": f"u{k}",
                    "timestamp": f"2026-10-01T09:{k + 1:02d}:00.000Z"},
                   {"type": "assistant.message", "data": {"content": f"done {k}"}, "id": f"a{k}",
                    "timestamp": f"2026-10-01T09:{k + 1:02d}:30.000Z"}]
    log = folder / "events.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    return home, log


def _prompts(wh):
    return [r[0] for r in rows(wh, "select user_message from fct_turns order by turn_index")]


def test_an_edit_in_place_before_where_reading_stopped_reads_the_log_again(tmp_path):
    # a password scrubbed in place (same length, as `sed -i` does) 8 KB before the end: the mtime changed, the
    # size did not; and an edit at the head plus an append
    home, log = _home(tmp_path, prompts=(PROMPT, *(f"step {k}: " + "refactor the parser " * 20 for k in range(30))))
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home], redact=False)
    assert _prompts(wh)[0] == PROMPT
    log.write_text(log.read_text().replace("hunter2hunter2", "**************"))
    summary = ingest(wh, [home], redact=False)
    assert summary.n_files_read == 1 and summary.n_records == 63  # read whole again, not as a grown log
    assert _prompts(wh)[0] == PROMPT.replace("hunter2hunter2", "**************")
    assert rows(wh, "select count(*) from stg_events where content like '%hunter2%'") == [(0,)]
    text = log.read_text().replace("deploy with", "DEPLOY with")
    log.write_text(text + json.dumps({"type": "user.message", "data": {"content": "one more"}, "id": "u9",
                                      "timestamp": "2026-10-01T09:09:00.000Z"}) + "\n")
    summary = ingest(wh, [home], redact=False)
    assert summary.n_records == 64 and _prompts(wh)[0].startswith("DEPLOY") and _prompts(wh)[-1] == "one more"
    assert rows(wh, "select count(*) from stg_events") == [(64,)]  # no row read twice


def test_a_log_swapped_for_another_of_the_same_size_and_mtime_is_read_again(tmp_path):
    home, log = _home(tmp_path, prompts=("first version of the prompt", "and then run the tests"))
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    stat = log.stat()
    log.write_text(log.read_text().replace("first version", "other version"))  # the same size
    os.utime(log, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and its mtime restored
    assert (log.stat().st_size, log.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert ingest(wh, [home]).n_files_read == 1
    assert _prompts(wh)[0] == "other version of the prompt"
    assert ingest(wh, [home]).n_files_read == 0  # and not again


def test_an_edit_in_the_middle_of_a_log_with_its_mtime_set_back_is_read_again(tmp_path):
    """A log's fingerprint holds its change time and inode: an edit anywhere in it - not only in the first 4 KiB
    or the 4 KiB before where reading stopped, which is all a content check reads - is seen, and a log nobody
    wrote to is neither opened nor read (no digest is taken of it)."""
    from pipeline.extract import events

    home, log = _home(tmp_path, prompts=[f"step {k}: " + "refactor the parser " * 20 for k in range(40)])
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    stat = log.stat()
    text = log.read_text()
    middle = text.index("step 20:")
    assert 4096 < middle < len(text) - 4096
    log.write_text(text[:middle] + "STEP" + text[middle + 4:])  # the same size
    os.utime(log, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert ingest(wh, [home]).n_files_read == 1
    assert _prompts(wh)[20].startswith("STEP 20:")
    opened = []
    real = events.head_and_tail_digests
    events.head_and_tail_digests = lambda *a: opened.append(a) or real(*a)
    try:
        assert ingest(wh, [home]).n_files_read == 0 and opened == []
    finally:
        events.head_and_tail_digests = real


def _with_vscode(sample_home):
    """The bundled sample's VS Code User folder, copied beside the home (tests change its files)."""
    vscode = sample_home.parent / "vscode-user"
    shutil.copytree(SAMPLE_HOME.parent / "vscode-user", vscode)
    return vscode


def test_an_edit_in_place_of_any_source_with_its_mtime_set_back_is_read_again(sample_home, tmp_path):
    """Not only the logs: a workspace.yaml, a checkpoint in its folder and a VS Code chat edited in place, their size
    kept and their mtime set back, are read again (their fingerprints hold the change time and inode too), and the
    warehouse is the one a full ingest of the edited files makes."""
    vscode = _with_vscode(sample_home)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home], [vscode])
    workspace = next(sample_home.glob("session-state/*/workspace.yaml"))
    checkpoint = next(sample_home.glob("session-state/*/checkpoints/*.md"))
    chat = next(vscode.glob("workspaceStorage/*/chatSessions/*.json*"))
    for path in (workspace, checkpoint, chat):
        data, st = path.read_bytes(), path.stat()
        at = next(k for k in range(len(data) // 2, len(data)) if data[k:k + 1].islower())  # a letter past the middle
        path.write_bytes(data[:at] + data[at:at + 1].upper() + data[at + 1:])  # the same size
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert ingest(wh, [sample_home], [vscode]).n_files_read == 3
    assert ingest(wh, [sample_home], [vscode]).n_files_read == 0
    whole = tmp_path / "whole.duckdb"
    ingest(whole, [sample_home], [vscode])
    from tools.compare import differences
    assert differences(whole, wh) == []


def test_a_warehouse_whose_fingerprints_hold_size_and_mtime_only_reads_nothing_again(sample_home, tmp_path):
    """Earlier versions fingerprinted every source but the logs by size and mtime alone: such a fingerprint, where it
    still matches, is taken as unchanged and recorded anew - no source is read again, and the next run finds the new
    fingerprints as they are."""
    from pipeline.extract.base import stat_fingerprint
    from pipeline.sources import APPEND_KINDS, KINDS

    vscode = _with_vscode(sample_home)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home], [vscode])
    stored = rows(wh, "select source_path, kind, fingerprint from _source_files order by all")
    legacy = [(stat_fingerprint(path, change_time=False)[0], path) for path, kind, _fp in stored
              if kind not in APPEND_KINDS and KINDS[kind].fingerprint == "stat"]
    assert len(legacy) > 10
    import duckdb
    con = duckdb.connect(str(wh))
    con.executemany("update _source_files set fingerprint = ? where source_path = ?", legacy)
    con.close()
    assert ingest(wh, [sample_home], [vscode]).n_files_read == 0
    assert rows(wh, "select source_path, kind, fingerprint from _source_files order by all") == stored
    assert ingest(wh, [sample_home], [vscode]).n_files_read == 0


def test_a_home_moved_elsewhere_counts_once(sample_home, tmp_path):
    """A Copilot home and VS Code User folder moved to another place, then ingested from there into the same
    warehouse: the old places' files are gone from disk (marked so, though their root was not named again) and their
    rows kept, and every star and model table is what a fresh ingest of the new place makes - before, the store's
    file touches counted twice and each memory was two."""
    from pipeline.schema import MODELS, STAR
    from tools.compare import differences

    old = tmp_path / "old"
    old.mkdir()
    shutil.move(str(sample_home), str(old / "copilot-home"))
    shutil.copytree(SAMPLE_HOME.parent / "vscode-user", old / "vscode-user")
    wh = tmp_path / "w.duckdb"
    ingest(wh, [old / "copilot-home"], [old / "vscode-user"])
    new = tmp_path / "new"
    shutil.move(str(old), str(new))
    moved = ingest(wh, [new / "copilot-home"], [new / "vscode-user"])
    assert moved.n_files_gone == moved.n_files_read > 20
    assert rows(wh, "select count(*) from dim_sessions where is_gone") == [(0,)]
    fresh = tmp_path / "fresh.duckdb"
    ingest(fresh, [new / "copilot-home"], [new / "vscode-user"])
    kept = {t.name for t in STAR} | {t.name for t in MODELS}
    others = {r[0] for r in rows(wh, "select table_name from information_schema.tables")} - kept
    assert differences(fresh, wh, skip_tables=others) == []
    assert rows(wh, "select count(*) from fct_memories") == rows(fresh, "select count(*) from fct_memories")


def test_where_a_file_keeps_no_change_time_a_swapped_log_is_found_by_its_content(tmp_path, monkeypatch):
    """Windows' st_ctime is a creation time: there a log's fingerprint is its size and mtime, and a log whose
    size and mtime are as recorded has its head and tail checked instead."""
    from pipeline.extract import base
    from pipeline.load import state

    monkeypatch.setattr(base, "CHANGE_TIME", False)
    monkeypatch.setattr(state, "CHANGE_TIME", False)
    test_a_log_swapped_for_another_of_the_same_size_and_mtime_is_read_again(tmp_path)
    home = tmp_path / "copilot-home"
    assert rows(tmp_path / "w.duckdb", "select count(*) from _source_files where fingerprint like '%:%:%'") == [(0,)]
    assert ingest(tmp_path / "w.duckdb", [home]).n_files_read == 0


def test_a_rebuild_from_scratch_keeps_a_session_whose_folder_was_deleted(sample_home, tmp_path):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    before = rows(wh, "select session_id, n_turns, n_tool_calls from dim_sessions order by all")
    folder = next(p.parent for p in sample_home.glob("session-state/*/workspace.yaml")
                  if "Cart checkout button" in p.read_text())
    shutil.rmtree(folder)
    summary = ingest(wh, [sample_home], full=True)
    assert summary.mode == "full"
    assert rows(wh, "select session_id, n_turns, n_tool_calls from dim_sessions order by all") == before
    assert rows(wh, "select title from dim_sessions where is_gone") == [("Cart checkout button",)]
    # and a later incremental run keeps it as well
    ingest(wh, [sample_home])
    assert rows(wh, "select session_id, n_turns, n_tool_calls from dim_sessions order by all") == before


def test_a_rebuild_from_scratch_keeps_the_checkpoints_of_a_deleted_session_folder(sample_home, tmp_path):
    """A checkpoint's rows name the file in the checkpoints folder they came from, not the folder (the source): a
    --full run after the session folder was deleted lost them while it kept the session. Every table is as the
    incremental run after the deletion left it."""
    from tools.compare import differences

    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    folder = next(p.parent.parent for p in sample_home.glob("session-state/*/checkpoints/*.md"))
    checkpoints = "select session_id, checkpoint_number, title from fct_checkpoints order by all"
    before = rows(wh, checkpoints)
    assert any(sid == folder.name for sid, _n, _t in before)
    shutil.rmtree(folder)
    ingest(wh, [sample_home])
    incremental = tmp_path / "incremental.duckdb"
    shutil.copy(wh, incremental)
    assert ingest(wh, [sample_home], full=True).mode == "full"
    assert rows(wh, checkpoints) == before
    assert differences(incremental, wh) == []


def test_a_home_named_twice_or_through_a_link_is_read_once(sample_home, tmp_path):
    once, twice, linked = tmp_path / "once.duckdb", tmp_path / "twice.duckdb", tmp_path / "linked.duckdb"
    ingest(once, [sample_home])
    ingest(twice, [sample_home, sample_home])
    link = tmp_path / "home-link"
    link.symlink_to(sample_home, target_is_directory=True)
    ingest(linked, [sample_home, link])
    figures = ("select count(*), sum(n_turns), sum(n_tool_calls) from dim_sessions",
               "select sum(ai_credits), sum(requests) from fct_usage",
               "select count(*) from stg_events")
    for sql in figures:
        assert rows(twice, sql) == rows(once, sql) == rows(linked, sql), sql
    # a session folder linked into the home from elsewhere in it: one session, once
    folder = next(p for p in (sample_home / "session-state").iterdir() if p.is_dir())
    (sample_home / "session-state" / "linked-session").symlink_to(folder, target_is_directory=True)
    again = tmp_path / "again.duckdb"
    ingest(again, [sample_home])
    for sql in figures:
        assert rows(again, sql) == rows(once, sql), sql


def test_a_log_touched_or_still_being_written_rebuilds_nothing(tmp_path):
    """A log read on from where it stopped that gave no new row - its mtime touched (a copy, a restore), or a
    last line Copilot is still writing - leaves its session's star rows as they are; the line once finished,
    and a log that comes back after it was gone, do rebuild it."""
    home, log = _home(tmp_path)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    star = "select session_id, n_turns, n_events, is_gone from dim_sessions"
    before = rows(wh, star)
    later = log.stat().st_mtime_ns + 5_000_000_000
    os.utime(log, ns=(later, later))
    summary = ingest(wh, [home])
    assert (summary.n_files_read, summary.n_records, summary.n_sessions_changed) == (1, 0, 0)
    assert rows(wh, star) == before
    line = json.dumps({"type": "user.message", "data": {"content": "a third prompt"}, "id": "u9",
                       "timestamp": "2026-10-01T09:09:00.000Z"})
    with open(log, "a") as fh:
        fh.write(line[:30])  # half an event, no line break yet
    summary = ingest(wh, [home])
    assert (summary.n_records, summary.n_sessions_changed) == (0, 0) and rows(wh, star) == before
    with open(log, "a") as fh:
        fh.write(line[30:] + "\n")
    summary = ingest(wh, [home])
    assert summary.n_sessions_changed == 1 and _prompts(wh)[-1] == "a third prompt"
    moved = log.with_name("elsewhere.jsonl")
    log.rename(moved)
    ingest(wh, [home])
    assert rows(wh, "select is_gone from dim_sessions") == [(True,)]
    moved.rename(log)
    os.utime(log, ns=(later + 10**10, later + 10**10))  # back, and touched: read on from where it stopped
    summary = ingest(wh, [home])
    assert summary.n_sessions_changed == 1 and rows(wh, "select is_gone from dim_sessions") == [(False,)]
