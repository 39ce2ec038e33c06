"""End-to-end: the CLI on the bundled sample corpus, idempotency, incremental growth, bad input."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipeline.cli import main
from pipeline.ingest import ingest
from pipeline.schema import MARTS, MODELS, STAGING, STAR

from .conftest import REPO, rows, snapshot

STAR_TABLES = [t.name for t in STAR + MARTS]


def test_cli_ingest_of_the_sample_corpus(sample_home, tmp_path, capsys):
    wh = tmp_path / "w.duckdb"
    assert main(["ingest", "--copilot-home", str(sample_home), "--warehouse", str(wh)]) == 0
    out = capsys.readouterr().out
    assert "warehouse now: 8 sessions, 11 prompts, 24 tool calls, 3 checkpoints" in out
    assert "2 records rejected" in out
    sessions = rows(wh, "select title, client, n_turns, n_tool_calls, n_failed_tool_calls, n_unknown_events, "
                        "n_resumes from dim_sessions order by started_at")
    assert sessions == [
        ("Rename the token service config key", "cli", 1, 1, 0, 0, 0),
        ("Explain the token service module.", "cli", 1, 0, 0, 0, 0),
        ("Token refresh rotation", "cli", 2, 9, 1, 1, 1),
        ("Token refresh TTL bug found in CI", "cli", 1, 3, 0, 0, 0),
        ("Cart checkout button", "cli", 1, 5, 0, 0, 0),
        ("Show cart checkout totals with tax on one line", "cli", 1, 1, 0, 0, 0),  # title from the prompt
        ("Login rate limiting", "vscode", 2, 5, 0, 0, 2),
        ("Token revocation endpoint", "cli", 2, 0, 0, 0, 0),
    ]
    # the prompt itself keeps its raw U+2028
    assert rows(wh, "select count(*) from fct_turns where user_message = ?",
                ["Show cart checkout totals\u2028with tax on one line"]) == [(1,)]
    # a session that is both a folder and a store row: events win, the store copy is not counted again
    assert rows(wh, "select count(*) from fct_turns where user_message like '%store copy%'") == [(0,)]
    # WAL-only rows of session-store.db were read
    assert rows(wh, "select n_turns, sources from dim_sessions where title = 'Token revocation endpoint'") == [
        (2, ["store", "workspace_artifact"])]
    # usage: resumed legs summed (cumulative shutdowns differenced), per-request store rows, the cost logged,
    # estimated from the price table, or unknown; the killed leg of "Login rate limiting" leaves its input unknown
    assert rows(wh, "select s.title, u.model, u.requests, u.input_tokens, u.output_tokens, u.usage_source, "
                    "u.nano_aiu, u.ai_credits::varchar, u.cost_usd::varchar, u.cost_source "
                    "from fct_usage u join dim_sessions s using (session_id) "
                    "order by s.started_at") == [
        ("Rename the token service config key", "(unknown)", 1, None, None, "message_output_tokens", None, None,
         None, "unknown"),
        ("Explain the token service module.", "claude-sonnet-4.6", 1, None, 120, "message_output_tokens", None,
         None, None, "unknown"),
        # 1.0.60: per-leg shutdowns with the cost logged per model
        ("Token refresh rotation", "claude-sonnet-4.6", 6, 60000, 490, "shutdown", 12255000000, "12.255000000",
         "0.12255000000", "logged"),
        # 0.0.409: tokens but no cost: $3 / $0.30 / $15 per million input / cache read / output
        ("Token refresh TTL bug found in CI", "claude-sonnet-4.6", 3, 13500, 230, "shutdown", None,
         "4.395000000", "0.04395000000", "estimated"),
        ("Cart checkout button", "claude-sonnet-4.6", 3, 12000, 250, "shutdown", None, "3.975000000",
         "0.03975000000", "estimated"),
        ("Show cart checkout totals with tax on one line", "claude-sonnet-4.6", 2, None, 170,
         "message_output_tokens", None, None, None, "unknown"),
        # 1.0.78 on auto: cumulative shutdowns and usage checkpoints; the killed leg's cost is in the checkpoints
        ("Login rate limiting", "claude-sonnet-4.6", 4, None, 370, "message_output_tokens+shutdown+shutdown_delta",
         6029100000, "6.029100000", "0.06029100000", "logged"),
        ("Token revocation endpoint", "claude-sonnet-4.6", 3, 15000, 450, "store_usage_events", 4365000000,
         "4.365000000", "0.04365000000", "logged"),
    ]
    # Windows spellings of one file are one file, project-relative
    webapp = rows(wh, "select f.path, count(*) from dim_files f join dim_projects p using (project_id) "
                      "where p.name = 'webapp' group by 1 order by 1")
    assert webapp == [("src/api/checkout.ts", 1), ("src/components/CartView.tsx", 1)]
    assert rows(wh, "select checkpoint_number, title, source_kind from fct_checkpoints order by title") == [
        (1, "Token refresh TTL units", "folder_json"), (1, "Token refresh rotation", "folder_md"),
        (1, "Token revocation", "store")]
    assert rows(wh, "select ref_type, ref_value from fct_refs order by 1") == [("commit", "a1b2c3d4e5f6"),
                                                                             ("pr", "42")]
    assert sorted(r[0] for r in rows(wh, "select kind from fct_memories")) == [
        "plan", "session_index", "workspace_artifact"]


def test_nothing_secret_or_private_reaches_the_warehouse(sample_home, tmp_path):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    data = wh.read_bytes()
    # reasoning text, transformedContent (only it holds `<system_reminder>x`) and the planted token
    for forbidden in (b"chain of thought", b"b64opaque", b"<system_reminder>x", b"A1b2C3d4E5f6G7h8I9j0"):
        assert forbidden not in data
    assert rows(wh, "select count(*) from fct_turns where user_message like '%[REDACTED:%'") == [(1,)]
    assert rows(wh, "select n_redactions from _runs") == [(1,)]


def test_second_ingest_changes_nothing_and_full_equals_incremental(sample_home, tmp_path):
    wh = tmp_path / "w.duckdb"
    first = ingest(wh, [sample_home])
    before = snapshot(wh, STAR_TABLES + ["_rejects"])
    again = ingest(wh, [sample_home])
    assert again.n_files_read == 0 and again.n_files_unchanged == first.n_files_read
    assert snapshot(wh, STAR_TABLES + ["_rejects"]) == before
    ingest(wh, [sample_home], full=True)
    assert snapshot(wh, STAR_TABLES + ["_rejects"]) == before


def test_a_grown_log_adds_exactly_the_new_records(sample_home, tmp_path):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    log = next(p for p in sample_home.glob("session-state/*/events.jsonl") if "Cart checkout button" in
               (p.parent / "workspace.yaml").read_text())
    n_before = rows(wh, "select count(*) from stg_events")[0][0]
    sid = log.parent.name
    with open(log, "a", encoding="utf-8") as fh:
        fh.write('{"type":"user.message","data":{"content":"one more cart question"},"id":"new-1",'
                 '"timestamp":"2026-09-06T10:00:00.000Z","parentId":null}\n')
        fh.write('{"type":"assistant.message","data":{"content":"answer","toolRequests":[]},"id":"new-2",'
                 '"timestamp":"2026-09-06T10:00:05.000Z","parentId":"new-1"}\n')
    summary = ingest(wh, [sample_home])
    assert summary.n_files_read == 1 and summary.n_records == 2
    # the grown log's bookkeeping row was replaced, not added to
    assert rows(wh, "select count(*) = count(distinct source_path) from _source_files") == [(True,)]
    assert rows(wh, "select size from _source_files where source_path = ?", [str(log)]) == [(log.stat().st_size,)]
    assert rows(wh, "select count(*) from stg_events")[0][0] == n_before + 2
    assert rows(wh, "select turn_index, user_message, assistant_response from fct_turns where session_id = ? "
                    "order by turn_index", [sid])[-1] == (1, "one more cart question", "answer")
    tables = STAR_TABLES + [t.name for t in MODELS]  # per-session models were rebuilt for one session only
    incremental = snapshot(wh, tables)
    ingest(wh, [sample_home], full=True)
    assert snapshot(wh, tables) == incremental


def test_tool_calls_from_no_staged_output_are_stored_with_what_they_hold(tmp_path):
    """fill_outputs with calls none of which came from a staged output (a chat's calls without their results, as
    the hostile home has): each stored as built, and the query reads no output (an empty list of logs to read was a
    syntax error that stopped the ingest)."""
    from pipeline.load import star
    from pipeline.warehouse import connect, ensure_schema, key_table

    con = connect(tmp_path / "w.duckdb")
    ensure_schema(con)
    con.execute(f"create temp table {star._CALLS} as select * from fct_tool_calls limit 0")
    con.execute(f"insert into {star._CALLS} (session_id, tool_call_id, result_content) values ('s', 'c', 'held')")
    star.fill_outputs(con, key_table(con, "_affected", ["s"]), 4096)
    assert con.execute("select session_id, tool_call_id, result_content from fct_tool_calls").fetchall() == [
        ("s", "c", "held")]
    con.close()


def test_a_grown_session_keeps_the_star_rows_that_did_not_change(sample_home, tmp_path, monkeypatch):
    """A session read again replaces only the star rows that differ from what was stored: of its tool calls, only
    those that changed are inserted again (and have their output filled in), and what changed - a turn added, a
    tool output edited in place - is as a rebuild from scratch has it."""
    from pipeline.load import star

    inserted = []
    fill = star.fill_outputs

    def counting(con, in_affected, chars):
        inserted.append(con.execute(f"select tool_call_id from {star._CALLS} order by all").fetchall())
        fill(con, in_affected, chars)
    monkeypatch.setattr(star, "fill_outputs", counting)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    log = next(p for p in sample_home.glob("session-state/*/events.jsonl") if "Token refresh rotation" in
               (p.parent / "workspace.yaml").read_text())
    sid = log.parent.name
    calls = "select tool_call_id, result_content from fct_tool_calls where session_id = ? order by all"
    calls_before = rows(wh, calls, [sid])
    assert len(calls_before) == 9 and len(inserted[0]) == 24  # every call of the sample, on the first run
    with open(log, "a", encoding="utf-8") as fh:
        fh.write('{"type":"user.message","data":{"content":"and the refresh TTL?"},"id":"new-1",'
                 '"timestamp":"2026-09-07T10:00:00.000Z","parentId":null}\n')
    assert ingest(wh, [sample_home]).n_sessions_changed == 1
    assert inserted[1] == [] and rows(wh, calls, [sid]) == calls_before
    assert rows(wh, "select turn_index, user_message from fct_turns where session_id = ? order by all",
                [sid])[-1] == (2, "and the refresh TTL?")

    outputs = [c[1] for c in calls_before]
    edited = next(c for c in calls_before if c[1] and outputs.count(c[1]) == 1 and "Created" in c[1])
    old, new = edited[1], edited[1].swapcase()
    text = log.read_text(encoding="utf-8")
    log.write_text(text.replace(old, new), encoding="utf-8")  # its content and detailedContent; the same size
    assert ingest(wh, [sample_home]).n_sessions_changed == 1
    assert inserted[2] == [(edited[0],)]
    after = dict(rows(wh, calls, [sid]))
    assert new in after[edited[0]] and {k: v for k, v in after.items() if k != edited[0]} == {
        k: v for k, v in calls_before if k != edited[0]}
    tables = STAR_TABLES + [t.name for t in MODELS]
    incremental = snapshot(wh, tables)
    ingest(wh, [sample_home], full=True)
    assert snapshot(wh, tables) == incremental


def test_a_new_session_naming_a_folders_repository_moves_the_older_sessions_there(sample_home, tmp_path):
    # the two webapp sessions know their folder, not its repository; a session read later names it.
    # Only the new session's places are read from the staged rows (load.star.root_repositories):
    # the older sessions' come from dim_sessions, and they must still move into the repository
    import json
    import shutil

    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    webapp = "select session_id, project_id from dim_sessions where cwd = 'C:\\Users\\dev\\webapp' order by all"
    old = rows(wh, webapp)
    assert len(old) == 2 and len({p for _s, p in old}) == 1
    src = next(p.parent for p in sample_home.glob("session-state/*/workspace.yaml")
               if "Cart checkout button" in p.read_text())
    sid = "0f0f0f0f-0000-4000-8000-000000000001"
    new = sample_home / "session-state" / sid
    shutil.copytree(src, new)
    (new / "workspace.yaml").write_text(f"id: {sid}\ncwd: C:\\Users\\dev\\webapp\nrepository: acme/webapp\n"
                                        "name: Cart coupons\n", encoding="utf-8")
    lines = (new / "events.jsonl").read_text(encoding="utf-8").splitlines()
    start = json.loads(lines[0])
    start["data"]["sessionId"] = sid
    (new / "events.jsonl").write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n", encoding="utf-8")
    summary = ingest(wh, [sample_home])
    assert summary.n_sessions_changed == 3  # the new session and the two that move
    moved = rows(wh, webapp)
    assert [s for s, _p in moved] == sorted([s for s, _p in old] + [sid])
    assert len({p for _s, p in moved}) == 1 and moved[0][1] != old[0][1]
    assert rows(wh, "select repository from dim_projects where project_id = ?", [moved[0][1]]) == [("acme/webapp",)]
    tables = STAR_TABLES + [t.name for t in MODELS]
    incremental = snapshot(wh, tables)
    ingest(wh, [sample_home], full=True)
    assert snapshot(wh, tables) == incremental


def test_vanished_session_keeps_its_rows_and_is_marked_gone(sample_home, tmp_path):
    import shutil
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    folder = next(p.parent for p in sample_home.glob("session-state/*/workspace.yaml")
                  if "Cart checkout button" in p.read_text())
    shutil.rmtree(folder)
    ingest(wh, [sample_home])
    assert rows(wh, "select n_turns, is_gone from dim_sessions where title = 'Cart checkout button'") == [(1, True)]
    assert rows(wh, "select count(*) from dim_sessions where is_gone") == [(1,)]


def test_sources_are_never_modified(sample_home, tmp_path):
    def digest():
        h = hashlib.md5()
        for p in sorted(sample_home.rglob("*")):
            if p.is_file():
                h.update(p.name.encode() + p.read_bytes())
        return h.hexdigest(), sorted(str(p.relative_to(sample_home)) for p in sample_home.rglob("*"))
    before = digest()
    ingest(tmp_path / "w.duckdb", [sample_home])
    assert digest() == before


def test_missing_source_folder_is_one_clear_line_and_nonzero_exit(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pipeline", "ingest", "--copilot-home", str(tmp_path / "nope"),
                        "--warehouse", str(tmp_path / "w.duckdb")], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"error: --copilot-home {tmp_path / 'nope'}: no such folder"]


def test_unwritable_warehouse_is_a_clear_error(sample_home, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = subprocess.run([sys.executable, "-m", "pipeline", "ingest", "--copilot-home", str(sample_home),
                        "--warehouse", str(blocker / "w.duckdb")], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and r.stderr.startswith("error: cannot create the warehouse folder")


def test_demo_and_query_verbs(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    assert (out / "parquet" / "dim_sessions.parquet").exists()
    capsys.readouterr()
    assert main(["query", "--warehouse", str(out / "warehouse.duckdb"), "--format", "csv",
                 "select count(*) as n from dim_sessions"]) == 0
    assert capsys.readouterr().out == "n\n13\n"  # 8 CLI sessions and 5 more from VS Code
    assert os.path.exists(out / "warehouse.duckdb")


def test_data_dictionary_is_current():
    from pipeline.docs import dictionary
    assert (REPO / "docs" / "warehouse.md").read_text(encoding="utf-8") == dictionary()


def test_column_comments_reach_duckdb(sample_home, tmp_path):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    assert rows(wh, "select comment from duckdb_columns() where table_name = 'fct_turns' "
                    "and column_name = 'user_message'") == [
        ("What the user typed (never transformedContent), redacted; Copilot's injected tags (current_datetime, "
         "reminder, ...) removed.",)]


def test_reading_on_several_cores_loads_exactly_what_one_core_loads(sample_home, tmp_path, monkeypatch):
    from pipeline.extract import parallel
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    s1 = ingest(one, [sample_home], workers=1)
    s2 = ingest(two, [sample_home], workers=2)
    assert (s1.n_records, s1.n_rejects, s1.redactions) == (s2.n_records, s2.n_rejects, s2.redactions)
    tables = STAR_TABLES + ["stg_events", "stg_tool_requests", "_rejects"]
    assert snapshot(one, tables) == snapshot(two, tables)
    # batches of one source each, too: how sources are grouped into tasks changes nothing
    monkeypatch.setattr(parallel, "BATCH_SOURCES", 1)
    three = tmp_path / "three.duckdb"
    ingest(three, [sample_home], workers=2)
    assert snapshot(one, tables) == snapshot(three, tables)


def test_star_rows_built_from_the_trimmed_staging_pull_equal_those_from_all_of_it(sample_home, tmp_path,
                                                                                    monkeypatch):
    # tool outputs past the head the star reads (stg_events.result_head): stored once, and a
    # `view` whose output starts after 5,000 characters of white space (some not ASCII) still reads as
    # numbered lines, a file touch, exactly as when the star saw all of it
    import json

    from pipeline.load import star
    from pipeline.schema import RESULT_HEAD_CHARS as RESULT_PREFIX
    folder = sample_home / "session-state" / "long-outputs"
    folder.mkdir()
    outputs = {"a": "\n".join(f"{i}. line {i}" for i in range(1, 2000)),
               "b": " \u00a0\u2003\t\n" * 1000 + "1. numbered after white space",
               "c": "\n".join(f"entry{i}/" for i in range(3000)),
               "d": " " * (RESULT_PREFIX - 3) + "1. just inside the prefix"}
    # no extension: only the output tells a file (numbered lines) from a folder (entries)
    paths = {"a": "/w/p/a.py", "b": "/w/p/Makefile", "c": "/w/p/src", "d": "/w/p/Dockerfile"}
    events = [{"type": "session.start", "data": {"sessionId": "long-outputs", "context": {"cwd": "/w/p"}},
               "id": "0", "timestamp": "2026-10-01T00:00:00Z"},
              {"type": "user.message", "data": {"content": "read them"}, "id": "1",
               "timestamp": "2026-10-01T00:00:01Z"}]
    for k, (call, out) in enumerate(outputs.items()):
        events += [{"type": "tool.execution_start", "data": {"toolCallId": call, "toolName": "view",
                                                            "arguments": {"path": paths[call]}},
                    "id": f"s{k}", "timestamp": "2026-10-01T00:00:02Z"},
                   {"type": "tool.execution_complete", "data": {"toolCallId": call, "success": True,
                                                               "result": {"content": out}},
                    "id": f"c{k}", "timestamp": "2026-10-01T00:00:03Z"}]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    trimmed, whole = tmp_path / "trimmed.duckdb", tmp_path / "whole.duckdb"
    users = [REPO / "data" / "sample" / "vscode-user"]
    ingest(trimmed, [sample_home], users)
    from pipeline.schema import STAGING
    monkeypatch.setattr(star, "_pulls", lambda: [(t.name, t.name, f'select * from "{t.name}" where') for t in STAGING])
    ingest(whole, [sample_home], users)
    assert snapshot(trimmed, STAR_TABLES) == snapshot(whole, STAR_TABLES)
    # fct_tool_calls holds the first 4,096 characters of each, its length and MD5; the view the whole of it
    stored = {r[0]: r[1:] for r in rows(trimmed, "select tool_call_id, result_content, result_chars, result_md5 "
                                                 "from fct_tool_calls where session_id = 'long-outputs'")}
    assert stored == {k: (v[:4096], len(v), hashlib.md5(v.encode()).hexdigest()) for k, v in outputs.items()}
    assert all(len(v) > RESULT_PREFIX for v in outputs.values())
    assert dict(rows(trimmed, "select tool_call_id, result_content from tool_call_outputs "
                              "where session_id = 'long-outputs'")) == outputs
    # each output's text stored once: a short one in its head only, a long one whole beside its head
    twice, short = rows(trimmed, "select count(*) filter (where result_content is not null), count(*) from "
                                 "stg_events where result_chars is not null and length(result_head) = result_chars")[0]
    assert twice == 0 and short > 0
    assert rows(trimmed, "select count(*) from stg_events where length(result_head) < result_chars "
                         "and result_content is null") == [(0,)]
    touched = {r[0] for r in rows(trimmed, "select f.path from fct_file_touches t join dim_files f using (file_id) "
                                           "where t.session_id = 'long-outputs'")}
    assert touched == {"a.py", "Makefile", "Dockerfile"}  # c is a folder listing


def test_how_much_of_each_tool_output_fct_tool_calls_holds_is_a_setting_that_rebuilds_the_star(
        sample_home, tmp_path, monkeypatch, capsys):
    """COPILOT_WAREHOUSE_RESULT_CHARS: 4,096 unless set, 0 for all of it; changing it rebuilds every
    session's star rows on the next ingest (nothing is read again), and nothing but the cut differs."""
    import json

    from pipeline.warehouse import WarehouseError
    folder = sample_home / "session-state" / "big-output"
    folder.mkdir()
    big = "".join(f"{i:05d} {'x' * 93}\n" for i in range(100))  # 10,000 characters
    events = [{"type": "session.start", "data": {"sessionId": "big-output", "context": {"cwd": "/w/p"}},
               "id": "0", "timestamp": "2026-10-01T00:00:00Z"},
              {"type": "user.message", "data": {"content": "run it"}, "id": "1", "timestamp": "2026-10-01T00:00:01Z"},
              {"type": "tool.execution_start", "data": {"toolCallId": "t1", "toolName": "bash",
                                                       "arguments": {"command": "seq"}},
               "id": "2", "timestamp": "2026-10-01T00:00:02Z"},
              {"type": "tool.execution_complete", "data": {"toolCallId": "t1", "success": True,
                                                          "result": {"content": big}},
               "id": "3", "timestamp": "2026-10-01T00:00:03Z"}]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    wh, whole = tmp_path / "w.duckdb", tmp_path / "whole.duckdb"
    n_sessions = ingest(wh, [sample_home]).n_sessions_changed
    calls = "select * exclude (result_content) from fct_tool_calls order by all"
    cut = rows(wh, calls)

    def output(db):
        return rows(db, "select result_content, result_chars, result_md5, "
                        "(select result_content from tool_call_outputs where tool_call_id = 't1') "
                        "from fct_tool_calls where tool_call_id = 't1'")[0]

    md5 = hashlib.md5(big.encode()).hexdigest()
    assert output(wh) == (big[:4096], 10_000, md5, big)
    assert rows(wh, "select value from _meta where key = 'result_chars'") == [("4096",)]

    monkeypatch.setenv("COPILOT_WAREHOUSE_RESULT_CHARS", "0")
    summary = ingest(wh, [sample_home])
    assert summary.n_sessions_changed == n_sessions and summary.n_records == 0  # rebuilt, nothing read again
    assert output(wh) == (big, 10_000, md5, big)
    assert rows(wh, calls) == cut  # only the cut differs
    ingest(whole, [sample_home], full=True)
    assert snapshot(wh, STAR_TABLES) == snapshot(whole, STAR_TABLES)  # as a warehouse built with it
    assert ingest(wh, [sample_home]).n_sessions_changed == 0  # the setting is remembered

    monkeypatch.setenv("COPILOT_WAREHOUSE_RESULT_CHARS", "100")
    ingest(wh, [sample_home])
    assert output(wh) == (big[:100], 10_000, md5, big)
    assert rows(wh, "select count(*) = (select count(*) from fct_tool_calls) from tool_call_outputs") == [(True,)]

    monkeypatch.setenv("COPILOT_WAREHOUSE_RESULT_CHARS", "lots")
    with pytest.raises(WarehouseError, match="COPILOT_WAREHOUSE_RESULT_CHARS"):
        ingest(wh, [sample_home])
    capsys.readouterr()
    assert main(["ingest", "--copilot-home", str(sample_home), "--warehouse", str(wh)]) == 2
    assert "COPILOT_WAREHOUSE_RESULT_CHARS='lots'" in capsys.readouterr().err


def test_star_rows_are_the_same_whether_built_in_one_batch_or_many(sample_home, tmp_path, monkeypatch):
    """Batches of sessions are pulled, built on a second thread and stored in turn: many batches
    in flight give the rows one batch gives."""
    from pipeline.load import star

    one, many = tmp_path / "one.duckdb", tmp_path / "many.duckdb"
    users = [REPO / "data" / "sample" / "vscode-user"]
    s1 = ingest(one, [sample_home], users)
    monkeypatch.setattr(star, "SESSION_BATCH", 2)
    s2 = ingest(many, [sample_home], users)
    assert s1.n_sessions_changed == s2.n_sessions_changed > 6  # several batches of two
    assert snapshot(one, STAR_TABLES) == snapshot(many, STAR_TABLES)


def test_a_per_session_model_new_to_the_warehouse_is_built_for_every_session(sample_home, tmp_path, caplog):
    """A version that adds or changes a model finds the models' digest of the last whole build another: the next
    incremental ingest builds the models for all sessions, not just the changed ones. A model that is empty
    because nothing made rows for it (no file coupled with another) does not make every ingest whole."""
    import logging

    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    full = snapshot(wh, ["int_mention_words", "report_file_importance"])
    assert full["int_mention_words"]  # the sample has words that could name files
    con = duckdb.connect(str(wh))
    con.execute("delete from int_mention_words")  # as a version whose SQL made no rows there would find it
    con.execute("update _meta set value = 'another' where key = 'models_digest'")
    con.close()
    log = next(iter(sample_home.glob("session-state/*/events.jsonl")))

    def grow(n):
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f'{{"type":"session.info","data":{{"message":"touched"}},"id":"x-{n}",'
                     '"timestamp":"2026-09-06T10:00:00.000Z"}\n')

    grow(1)
    with caplog.at_level(logging.INFO, logger="pipeline.models"):
        summary = ingest(wh, [sample_home])
    assert summary.n_sessions_changed == 1 and "models built (full)" in caplog.text
    assert snapshot(wh, ["int_mention_words", "report_file_importance"]) == full
    con = duckdb.connect(str(wh))
    con.execute("delete from report_file_coupling")  # empty, as in a home whose sessions never coupled two files
    con.close()
    grow(2)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pipeline.models"):
        ingest(wh, [sample_home])
    assert "models built (incremental)" in caplog.text


def test_an_ingest_that_changed_nothing_loads_neither_polars_nor_pyarrow(sample_home, tmp_path):
    """Cheap start-up: the libraries that move rows are imported only when there are rows to move."""
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    code = ("import sys; from pipeline.cli import main; "
            f"rc = main(['ingest', '--copilot-home', {str(sample_home)!r}, '--warehouse', {str(wh)!r}, '--quiet']); "
            "print(rc, sorted(m for m in ('polars', 'pyarrow', 'duckdb') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[-2] == "0 ['duckdb']", out.stdout + out.stderr


def test_an_older_warehouse_gets_the_declared_tables_and_columns_it_lacks(sample_home, tmp_path):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    con = duckdb.connect(str(wh))
    con.execute("alter table fct_turns drop column interaction_id")
    con.execute("drop table report_model_usage")
    con.close()
    before = rows(wh, "select count(*) from fct_turns")
    summary = ingest(wh, [sample_home])  # no source changed
    assert summary.n_files_read == 0
    assert rows(wh, "select count(*) from information_schema.columns where table_name = 'fct_turns' "
                    "and column_name = 'interaction_id'") == [(1,)]
    assert rows(wh, "select count(*) from fct_turns") == before
    # the dropped model is back, and built (not left empty until some source changes)
    assert rows(wh, "select count(*) from report_model_usage")[0][0] > 0



def test_a_warehouse_of_an_older_format_is_read_again_and_equals_a_new_one(sample_home, tmp_path):
    """An upgrade reads every source still on disk again, whole, and rebuilds every session; the rows of a
    source gone from disk are kept and get the new columns in SQL (format 4: stg_events.result_head,
    result_chars, result_md5), so the warehouse equals one built anew from the same files."""
    from pipeline.schema import FORMAT_VERSION

    wh, fresh = tmp_path / "w.duckdb", tmp_path / "fresh.duckdb"
    ingest(wh, [sample_home])
    n_sources = rows(wh, "select count(*) from _source_files")[0][0]
    con = duckdb.connect(str(wh))  # as version 3 left it: no result facts, format 3
    con.execute("update stg_events set result_content = coalesce(result_content, result_head), "
                "result_head = null, result_chars = null, result_md5 = null")
    con.execute("update _meta set value = '3' where key = 'format_version'")
    con.close()
    ingest(fresh, [sample_home])  # built anew from the same files
    logs = sorted(sample_home.glob("session-state/*/events.jsonl"), key=lambda p: -p.read_text().count("result"))
    logs[0].unlink()  # its rows stay (its session is gone from disk): they get the new columns in SQL
    summary = ingest(wh, [sample_home])
    assert summary.n_files_read == n_sources - 1 and summary.n_records > 0
    assert rows(wh, "select value from _meta where key = 'format_version'") == [(str(FORMAT_VERSION),)]
    assert rows(wh, "select count(*) from stg_events where result_content is not null and result_md5 is null") \
        == [(0,)]
    facts = ("select result_content, result_head, result_chars, result_md5 from stg_events "
             "where result_md5 is not null order by all")
    assert rows(wh, facts) == rows(fresh, facts) and len(rows(fresh, facts)) > 10
    for table in STAR_TABLES:  # the same rows, but for which sessions are gone from disk
        sql = f'select *{" exclude (is_gone)" if table == "dim_sessions" else ""} from "{table}" order by all'
        assert rows(wh, sql) == rows(fresh, sql), table


def test_rows_spooled_through_parquet_parts_equal_rows_inserted_directly(sample_home, tmp_path, monkeypatch):
    """A large run writes its rows to Parquet parts and loads them with one INSERT per table; a run
    with less than a part's worth inserts them from memory. Both give the same warehouse. A part's
    row groups hold about parts.PART_ROW_GROUP_BYTES each (DuckDB reads a row group whole)."""
    import pyarrow.parquet as pq

    from pipeline.load.spool import Spool

    users = [REPO / "data" / "sample" / "vscode-user"]
    direct, parts = tmp_path / "direct.duckdb", tmp_path / "parts.duckdb"
    ingest(direct, [sample_home], users)
    loaded_parts, groups = [], []
    real_load = Spool.load

    def load(self):
        loaded_parts.append(sum(self.parts.values()))
        self._write()
        for part in self.folder.glob("stg_events/*.parquet"):
            meta = pq.ParquetFile(part).metadata
            groups.append((meta.num_rows, meta.num_row_groups))
        real_load(self)

    monkeypatch.setattr(Spool, "PART_BYTES", 1)  # every add writes a part
    from pipeline import parts as part_files
    monkeypatch.setattr(part_files, "PART_ROW_GROUP_BYTES", 2048)
    monkeypatch.setattr(Spool, "load", load)
    ingest(parts, [sample_home], users)
    assert sum(loaded_parts) > 10  # the Parquet path was taken
    # parts of many events are cut into row groups (the sample's events average ~400 bytes in Arrow)
    assert any(n_rows > 20 for n_rows, _ in groups)
    assert all(n_groups >= n_rows // 20 for n_rows, n_groups in groups), groups
    tables = STAR_TABLES + ["stg_events", "stg_tool_requests", "stg_session_meta", "_rejects"]
    assert snapshot(direct, tables) == snapshot(parts, tables)
    bookkeeping = "select * exclude (last_run_id) from _source_files order by source_path"
    assert rows(direct, bookkeeping) == rows(parts, bookkeeping)


def test_duckdbs_own_progress_bar_is_off_on_every_connection(tmp_path):
    """DuckDB draws a progress bar on the terminal during any query over 2 s unless told not to; the
    pipeline's connections never do (`--quiet` means quiet; the CLI draws its own, on a TTY). In a
    process of its own: whether DuckDB's default is on depends on what the process did before."""
    script = f"""
import duckdb
from pipeline import warehouse
setting = "select current_setting('enable_progress_bar')"
print(duckdb.connect().execute(setting).fetchone()[0])
for read_only in (False, True):
    con = warehouse.connect({str(tmp_path / "w.duckdb")!r}, read_only=read_only)
    print(con.execute(setting).fetchone()[0])
    con.close()
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    default, *ours = out.stdout.split()
    if default != "True":
        pytest.skip("DuckDB's progress bar is off by default in this environment")
    assert ours == ["False", "False"]


def test_connections_that_may_run_at_once_spill_to_folders_of_their_own(tmp_path, monkeypatch):
    """DuckDB spills an in-memory database to ``.tmp`` in the working folder and a read-only file to ``<file>.tmp``,
    under one file name in every process: processes spilling at once (pushes to one lake, a report's page workers)
    read each other's blocks. Each such connection gets its own folder, made when it spills and gone when it
    closes (a file read twice in one process is one instance: one folder); the writer (one at a time, by the file's
    lock) keeps ``<file>.tmp``."""
    import tempfile

    from pipeline import lake, warehouse

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "system-tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.setattr(warehouse, "_PROCESS_TEMP", {})  # this process's folder, as if new (earlier tests made one)
    (tmp_path / "system-tmp").mkdir()
    db = tmp_path / "w.duckdb"
    writer = warehouse.connect(db)
    writer.execute("create table t as select 1 as i")
    folder = "select current_setting('temp_directory')"
    assert writer.execute(folder).fetchone()[0] == f"{db}.tmp"
    writer.close()
    cons = [warehouse.connect(db, read_only=True), warehouse.connect(db, read_only=True), lake._connect(),
            lake._connect()]
    folders = [c.execute(folder).fetchone()[0] for c in cons]
    assert folders[0] == folders[1]  # one DuckDB instance in this process: one folder
    assert len(set(folders[1:])) == len(cons) - 1
    assert all(Path(f).parent == tmp_path / "system-tmp" for f in folders), folders
    spill = cons[2]
    spill.execute("set memory_limit = '48MB'")
    spill.execute("set threads = 1")
    assert spill.execute("select count(*), min(s) from (select md5(i::varchar) || md5((i + 1)::varchar) as s "
                         "from range(1500000) r(i) order by s)").fetchone()[0] == 1_500_000
    assert Path(folders[2]).is_dir()  # it spilled there (DuckDB makes the folder when it first spills)
    for con in cons:
        con.close()
    assert not Path(folders[2]).exists()
    assert not (tmp_path / ".tmp").exists()


def test_spill_folders_left_behind_are_removed_by_their_process_or_the_next_one(tmp_path):
    """DuckDB does not always remove a spill folder it made (pushes at once left empty ones under /tmp): a process
    removes the folders it named when it exits, whether or not it closed its connections, and the first one of a
    process removes those of processes that are gone (a killed one's), never a running one's."""
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    left = system_tmp / f"copilot-warehouse-{dead}-0123abcd"  # a killed process's
    (left / "sub").mkdir(parents=True)
    running = system_tmp / f"copilot-warehouse-{os.getpid()}-89abcdef"  # this pytest process's (alive)
    running.mkdir()
    other = system_tmp / "copilot-warehouse-pg-x1y2"  # not a spill folder
    other.mkdir()
    script = """
import os
from pipeline import lake
con = lake._connect()
con.execute("set memory_limit = '48MB'")
con.execute("set threads = 1")
con.execute("select count(*) from (select md5(i::varchar) || md5((i + 1)::varchar) as s from range(1500000) r(i) "
            "order by s)").fetchall()
print(con.execute("select current_setting('temp_directory')").fetchone()[0])
os.makedirs(con.execute("select current_setting('temp_directory')").fetchone()[0], exist_ok=True)
# exits with the connection open
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "TMPDIR": str(system_tmp)})
    used = Path(out.stdout.strip())
    assert used.parent == system_tmp
    assert not used.exists() and not left.exists()
    assert running.exists() and other.exists()


def test_release_cache_gives_back_duckdbs_memory_and_keeps_the_limit(tmp_path, monkeypatch):
    """The star rebuild gives back the memory DuckDB keeps after reading (warehouse.release_cache)."""
    from pipeline import warehouse

    if not os.path.exists("/proc/self/status"):
        pytest.skip("reads the resident set size from /proc")

    def rss_mb():
        with open("/proc/self/status") as fh:
            return int(fh.read().split("VmRSS:")[1].split()[0]) // 1024
    db = tmp_path / "w.duckdb"
    con = warehouse.connect(db)
    con.execute("create table t as select i, repeat('x', 200) || i as s from range(2000000) r(i)")
    con.close()
    con = warehouse.connect(db)
    start = rss_mb()
    con.execute("select count(distinct s) from t").fetchall()  # ~400 MB of text read, hashed, freed
    limit = con.execute("select current_setting('memory_limit')").fetchone()[0]
    held = rss_mb() - start
    assert held > 150
    warehouse.release_cache(con)
    assert rss_mb() - start < held / 2
    assert con.execute("select current_setting('memory_limit')").fetchone()[0] == limit
    # asked for less than what is in use: nothing changes, nothing fails
    con.execute("create temp table keep as select * from t")
    monkeypatch.setattr(warehouse, "CACHE_FLOOR", "1KB")
    warehouse.release_cache(con)
    assert con.execute("select current_setting('memory_limit')").fetchone()[0] == limit
    assert con.execute("select count(*) from keep").fetchone()[0] == 2_000_000
    # set back to a lower limit than usual (the star's load, Spool.load_memory): when DuckDB holds more
    # than that, the usual limit; else that one
    warehouse.release_cache(con, "1KB")
    assert con.execute("select current_setting('memory_limit')").fetchone()[0] == limit
    con.execute("drop table keep")
    monkeypatch.setattr(warehouse, "CACHE_FLOOR", "64MB")
    warehouse.release_cache(con, "256MB")
    other = duckdb.connect()
    other.execute("set memory_limit = '256MB'")
    lowered = other.execute("select current_setting('memory_limit')").fetchone()[0]
    assert con.execute("select current_setting('memory_limit')").fetchone()[0] == lowered != limit
    con.close()


def test_a_user_memory_changed_alone_reaches_the_star_and_the_search_index(tmp_path):
    """A user or repository memory belongs to no session: edited when no session changed, its fct_memories row
    and its search document still change (they stayed as the first run left them), as a rebuild has them."""
    import shutil

    for name in ("copilot-home", "vscode-user"):
        shutil.copytree(REPO / "data" / "sample" / name, tmp_path / name)
    home, user = tmp_path / "copilot-home", tmp_path / "vscode-user"
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home], [user])
    memory = user / "globalStorage" / "github.copilot-chat" / "memory-tool" / "memories" / "preferences.md"
    with open(memory, "a", encoding="utf-8") as fh:
        fh.write("- Run make lint before every commit.\n")
    summary = ingest(wh, [home], [user])
    assert (summary.n_files_read, summary.n_sessions_changed) == (1, 0)
    assert rows(wh, "select count(*) from fct_memories where session_id is null and content like '%make lint%'") \
        == [(1,)]
    assert rows(wh, "select count(*) from int_search_docs where kind = 'memory' and text like '%make lint%'") == [(1,)]
    tables = STAR_TABLES + [t.name for t in MODELS]
    incremental = snapshot(wh, tables)
    ingest(wh, [home], [user], full=True)
    assert snapshot(wh, tables) == incremental


def test_the_models_run_for_the_sessions_whose_star_rows_changed(sample_home, tmp_path, monkeypatch):
    """A session read again whose star rows come out as they were (its workspace.yaml rewritten as it was) sends
    nothing through the models; a session that grew sends itself only."""
    import pipeline.ingest as ingest_module

    scopes = []
    run_models = ingest_module.run_models
    monkeypatch.setattr(ingest_module, "run_models",
                        lambda con, scope, before, **kw: scopes.append(scope) or run_models(con, scope, before=before,
                                                                                            **kw))
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    assert scopes == [None]  # a new warehouse: every model whole
    yaml = next(p for p in sample_home.glob("session-state/*/workspace.yaml") if "Token refresh rotation" in
                p.read_text())
    yaml.write_bytes(yaml.read_bytes())  # the same bytes, a new mtime: read and staged again
    summary = ingest(wh, [sample_home])
    assert (summary.n_files_read, summary.n_sessions_changed) == (1, 1) and scopes == [None]
    with open(yaml.parent / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"type":"user.message","data":{"content":"and the refresh TTL?"},"id":"new-1",'
                 '"timestamp":"2026-09-07T10:00:00.000Z","parentId":null}\n')
    ingest(wh, [sample_home])
    assert scopes == [None, [yaml.parent.name]]
    tables = STAR_TABLES + [t.name for t in MODELS]
    incremental = snapshot(wh, tables)
    ingest(wh, [sample_home], full=True)
    assert snapshot(wh, tables) == incremental


@pytest.mark.parametrize("scope", ["listed", "table", "whole"])
def test_a_session_that_moves_to_another_project_leaves_its_old_project_rebuilt(sample_home, tmp_path, monkeypatch,
                                                                                 scope):
    """The per-project models (topics, file importance and coupling, tool and model usage, files, projects) rebuild
    the projects of the changed sessions alone - where the sessions belong now and where they belonged before: a
    session whose folder changed leaves its old project's rows as a full rebuild has them, not with its terms and
    files still counted there. The same with the scope's keys written into the SQL (few), read from its table
    (many), or with the per-project and per-person models built whole (a scope of most sessions)."""
    import pipeline.ingest as ingest_module
    import pipeline.models as models_module

    monkeypatch.setattr(models_module, "WHOLE_SHARE", 0 if scope == "whole" else 2)
    if scope == "table":
        monkeypatch.setattr(models_module, "INLINE_KEYS", 0)

    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    yaml = next(p for p in sample_home.glob("session-state/*/workspace.yaml")
                if "Token refresh TTL bug" in p.read_text())
    sid = yaml.parent.name
    old = rows(wh, "select project_id from dim_sessions where session_id = ?", [sid])[0][0]
    others = {r[0] for r in rows(wh, "select distinct project_id from dim_sessions where project_id <> ?", [old])}
    old_topics = rows(wh, "select count(*) from report_topics where project_id = ?", [old])[0][0]
    assert old_topics and rows(wh, "select count(*) from report_file_importance where project_id = ?", [old])[0][0]
    scopes = []
    run_models = ingest_module.run_models
    monkeypatch.setattr(ingest_module, "run_models",
                        lambda con, scope, before, **kw: scopes.append((scope, before["project_id"])) or run_models(
                            con, scope, before=before, **kw))
    log = yaml.parent / "events.jsonl"  # its session.start names the folder and repository: edited in place
    text = log.read_text(encoding="utf-8")
    for key, was, now in (("cwd", "/home/dev/acme-api", "/home/dev/billing"),
                          ("gitRoot", "/home/dev/acme-api", "/home/dev/billing"),
                          ("repository", "acme/acme-api", "acme/billing")):
        assert f'"{key}": "{was}"' in text
        text = text.replace(f'"{key}": "{was}"', f'"{key}": "{now}"')
    log.write_text(text, encoding="utf-8")
    ingest(wh, [sample_home])
    new = rows(wh, "select project_id from dim_sessions where session_id = ?", [sid])[0][0]
    assert new != old and new not in others
    assert scopes == [([sid], [old])]  # the project it left, read before its star rows changed
    tables = STAR_TABLES + [t.name for t in MODELS]
    incremental = snapshot(wh, tables)
    assert rows(wh, "select count(*) from report_topics where project_id = ?", [new])[0][0]
    ingest(wh, [sample_home], full=True)
    assert snapshot(wh, tables) == incremental


def test_a_home_under_a_folder_named_with_a_token_is_rebuilt_by_full_and_its_roots_stored_redacted(tmp_path, caplog):
    """Every path is stored redacted, so a stored path under a folder named with a token is no path on disk:
    `--full` took each such source for gone, kept its rows and read nothing again (and warned that its sessions'
    files were gone). It reads them all, as any full run does; and the roots a run records (`_runs.sources`, the
    summary) are stored redacted too, those an earlier version recorded as given rewritten on the next run."""
    import logging
    import shutil

    token = "ghp_" + "Zq9mk2Lw8xQ7" * 3
    home = tmp_path / token / "copilot-home"
    shutil.copytree(REPO / "data" / "sample" / "copilot-home", home)
    wh, fresh = tmp_path / "w.duckdb", tmp_path / "fresh.duckdb"
    first = ingest(wh, [home])
    assert first.n_files_read > 0 and first.sources == [str(tmp_path / "[REDACTED:github_token]" / "copilot-home")]
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        again = ingest(wh, [home], full=True)
    assert (again.n_files_read, again.n_files_unchanged) == (first.n_files_read, 0)
    assert not [r for r in caplog.records if "gone from disk" in r.getMessage()]
    ingest(fresh, [home])
    tables = STAR_TABLES + [t.name for t in MODELS] + [t.name for t in STAGING]
    assert snapshot(wh, tables) == snapshot(fresh, tables)
    con = duckdb.connect(str(wh))  # as an earlier version recorded the roots: as given
    con.execute("update _runs set sources = [?], summary = replace(summary, '[REDACTED:github_token]', ?)",
                [str(home), token])
    con.close()
    assert rows(wh, "select count(*) from _runs where summary like ? and list_contains(sources, ?)",
                [f"%{token}%", str(home)]) == [(2,)]
    ingest(wh, [home])
    con = duckdb.connect(str(wh), read_only=True)
    leaks = [(t, c) for t, c in con.execute("select table_name, column_name from information_schema.columns "
                                            "where table_schema = 'main'").fetchall()
             if con.execute(f'select count(*) from "{t}" where "{c}"::varchar like ?', [f"%{token}%"]).fetchone()[0]]
    con.close()
    assert leaks == []
    assert rows(wh, "select count(*) from _runs where summary like '%[REDACTED:github_token]%'") == [(3,)]
