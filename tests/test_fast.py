"""The DuckDB reader of event logs (pipeline/extract/fast.py) gives the warehouse the Python reader
gives: built both ways (``COPILOT_WAREHOUSE_FAST_READ=0`` / ``1``) from the sample corpus, every real
sample and a damaged corpus (CLI event logs and VS Code transcripts), every table is compared row for row."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import duckdb
import pytest

from pipeline.ingest import ingest

from . import poison
from .conftest import REAL, REPO

SKIP_TABLES = {"_runs"}
SKIP_COLUMNS = {"_run_id", "last_run_id"}


def _differences(a: Path, b: Path) -> list[str]:
    """Tables whose rows differ between two warehouses (EXCEPT ALL both ways), as readable lines."""
    con = duckdb.connect()
    con.execute(f"attach '{a}' as a (read_only)")
    con.execute(f"attach '{b}' as b (read_only)")
    out = []
    try:
        tables = [r[0] for r in con.execute("select table_name from information_schema.tables where table_catalog = "
                                            "'a' and table_type = 'BASE TABLE' order by 1").fetchall()]
        assert len(tables) > 30
        for t in tables:
            if t in SKIP_TABLES:
                continue
            cols = [r[0] for r in con.execute("select column_name from information_schema.columns where "
                                              "table_catalog = 'a' and table_name = ? order by ordinal_position",
                                              [t]).fetchall()]
            sel = ", ".join(f'"{c}"' for c in cols if c not in SKIP_COLUMNS)
            only_a = con.execute(f'select count(*) from (select {sel} from a."{t}" except all '
                                 f'select {sel} from b."{t}")').fetchone()[0]
            only_b = con.execute(f'select count(*) from (select {sel} from b."{t}" except all '
                                 f'select {sel} from a."{t}")').fetchone()[0]
            if only_a or only_b:
                out.append(f"{t}: {only_a} rows only with the Python reader, {only_b} only with DuckDB's")
    finally:
        con.close()
    return out


def _both(tmp_path: Path, homes: list[Path], users: list[Path], monkeypatch, caplog) -> dict[str, int]:
    """Ingest both ways; assert the warehouses are identical; return what the DuckDB reader did."""
    for flag in ("0", "1"):
        monkeypatch.setenv("COPILOT_WAREHOUSE_FAST_READ", flag)
        with caplog.at_level(logging.INFO, logger="pipeline.extract.fast"):
            caplog.clear()
            ingest(tmp_path / f"fast{flag}.duckdb", homes, users)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("DuckDB reader")]
    assert len(said) == 1, said
    logs, sql, python, whole = map(int, re.findall(r"\d+", said[0]))
    assert _differences(tmp_path / "fast0.duckdb", tmp_path / "fast1.duckdb") == []
    return {"logs": logs, "sql_lines": sql, "python_lines": python, "whole": whole}


def _logs(homes: list[Path], users: list[Path]) -> list[Path]:
    """The event logs (CLI logs and VS Code transcripts) the DuckDB reader is given."""
    return [*(p for h in homes for p in [*h.glob("session-state/*/events.jsonl"), *h.glob("session-state/*.jsonl")]),
            *(p for u in users for p in u.glob("workspaceStorage/*/GitHub.copilot-chat/transcripts/*.jsonl"))]


def _lines(path: Path) -> int:
    return sum(1 for line in path.read_bytes().split(b"\n") if line.strip())


def test_the_sample_corpus_is_the_same_both_ways(tmp_path, monkeypatch, caplog):
    sample = REPO / "data" / "sample"
    got = _both(tmp_path, [sample / "copilot-home"], [sample / "vscode-user"], monkeypatch, caplog)
    logs = _logs([sample / "copilot-home"], [sample / "vscode-user"])
    assert len([p for p in logs if p.parent.name == "transcripts"]) == 2
    assert got["logs"] + got["whole"] == len(logs)
    assert got["sql_lines"] > 100  # the bulk is SQL's


def test_every_real_sample_is_the_same_both_ways(tmp_path, monkeypatch, caplog):
    if not REAL.exists():
        pytest.skip(f"real samples not available at {REAL}")
    homes = sorted(REAL.glob("*/copilot-home")) + sorted(REAL.glob("*/fixtures/copilot-home"))
    users = sorted(REAL.glob("*/vscode-user"))
    got = _both(tmp_path, homes, users, monkeypatch, caplog)
    logs = _logs(homes, users)
    assert any(p.parent.name == "transcripts" for p in logs)
    assert got["logs"] + got["whole"] == len(logs)
    # most real lines are read by SQL; the rest (a possible secret, a field of an odd type) by Python
    assert got["sql_lines"] > got["python_lines"] > 0
    assert got["sql_lines"] + got["python_lines"] <= sum(_lines(p) for p in logs)


def _crafted_events() -> bytes:
    """Lines that exercise every branch of the SQL conversion, and some it must leave to Python."""
    def ev(etype, data=None, **envelope):
        obj = {"type": etype, "id": envelope.pop("id", f"id-{etype}"), "timestamp": "2026-09-01T10:00:00.000Z",
               **envelope}
        if data is not None:
            obj["data"] = data
        return json.dumps(obj, ensure_ascii=False)

    lines = [
        ev("session.start", {"sessionId": "s", "context": {"cwd": "/home/dev/p"}, "startTime": "2026-09-01T10:00:00Z"}),
        ev("user.message", {"content": "ünïcödé \u2028 line sep \u001f ctrl \"quoted\" back\\slash /slash",
                            "transformedContent": "never stored", "attachments": [{"path": "/a/b.py"}]}),
        ev("assistant.reasoning", {"reasoningId": "r1", "content": "secret thoughts", "reasoningText": "x"}),
        ev("assistant.message", {"content": "", "model": "m", "outputTokens": 12, "interactionId": "i", "turnId": "t",
                                 "requestId": "rq", "apiCallId": "", "serviceRequestId": "svc", "messageId": "m1",
                                 "reasoningOpaque": "enc", "encryptedContent": "enc",
                                 "toolRequests": [{"toolCallId": "c1", "name": "view", "arguments": {"path": "/x"}},
                                                  {"id": "c2", "function": {"name": "edit",
                                                                            "arguments": {"old": 1.5e20}}},
                                                  {"toolCallId": "", "id": "c3", "name": "", "arguments": None,
                                                   "function": {"name": "grep", "arguments": {"q": "z"}}},
                                                  "not an object", 7]},
           agentId=None, ephemeral=True),
        ev("tool.execution_start", {"toolCallId": "c1", "toolName": "view", "arguments": {"path": "/x", "n": 0.1}}),
        ev("tool.execution_complete", {"toolCallId": "c1", "success": True,
                                       "result": {"content": "same", "detailedContent": "same", "kind": "text"}}),
        ev("tool.execution_complete", {"toolCallId": "c2", "name": "edit", "success": False,
                                       "result": {"content": "short", "detailedContent": "longer"},
                                       "error": {"message": "failed", "code": "E1", "extra": None}}),
        ev("tool.execution_complete", {"toolCallId": "c3", "result": "plain text result", "error": "plain error"}),
        ev("skill.invoked", {"name": "not a tool name", "toolCallId": "c4"}),
        ev("session.error", {"message": "boom", "errorType": "x"}),
        ev("session.info", None),
        ev("session.info", {"message": "nothing else", "_envelope": {"agentId": "inner"}}, agentId="a1"),
        ev("session.shutdown", {"modelMetrics": {"m": {"requests": {"count": 3, "cost": 1.0},
                                                       "usage": {"inputTokens": 10, "outputTokens": 2}}},
                                "totalNanoAiu": 123456789012, "shutdownType": "routine"}),
        # left to Python: a key twice, numbers the parsers read differently, odd types
        '{"type":"user.message","id":"dup","data":{"content":"first","content":"second"}}',
        ev("assistant.message", {"content": "a", "outputTokens": "42"}),
        ev("assistant.message", {"content": "a", "outputTokens": 42.0}),
        ev("tool.execution_start", {"toolCallId": "c5", "toolName": "bash", "arguments": "{\"command\": \"ls\"}"}),
        ev("user.message", {"content": [{"type": "text", "text": "part one"}, "part two"]}),
        ev("user.message", {"content": "nested forbidden", "meta": {"inner": {"reasoningText": "deep"}}}),
        ev("user.message", {"content": "my token is ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2}),
    ]
    return ("\n".join(lines) + "\n").encode()


def _crafted_transcript() -> bytes:
    """A VS Code transcript as Copilot Chat writes it (``copilot-formats.md``: the CLI envelope, a
    7-type subset, ``toolRequests[].arguments`` a JSON string, ``session.start`` with vscodeVersion)."""
    lines = [
        {"type": "session.start", "data": {"sessionId": "t", "version": 1, "producer": "copilot-agent",
                                           "copilotVersion": "0.45.0", "vscodeVersion": "1.110.0",
                                           "startTime": "2026-09-15T09:00:00.000Z"},
         "id": "e0", "timestamp": "2026-09-15T09:00:00.000Z", "parentId": None},
        {"type": "user.message", "data": {"content": "read it", "attachments": []}, "id": "e1",
         "timestamp": "2026-09-15T09:00:01.000Z", "parentId": "e0"},
        {"type": "assistant.turn_start", "data": {"turnId": "0"}, "id": "e2", "timestamp": "2026-09-15T09:00:02.000Z"},
        {"type": "assistant.message", "data": {"messageId": "m1", "content": "", "toolRequests": [
            {"toolCallId": "c1", "name": "read_file", "arguments": "{\"filePath\":\"/w/app/a.py\"}",
             "type": "function"}]},
         "id": "e3", "timestamp": "2026-09-15T09:00:03.000Z"},
        {"type": "tool.execution_start", "data": {"toolCallId": "c1", "toolName": "read_file",
                                                  "arguments": {"filePath": "/w/app/a.py"}},
         "id": "e4", "timestamp": "2026-09-15T09:00:04.000Z"},
        {"type": "tool.execution_complete", "data": {"toolCallId": "c1", "success": True}, "id": "e5",
         "timestamp": "2026-09-15T09:00:05.000Z"},
        {"type": "assistant.turn_end", "data": {"turnId": "0"}, "id": "e6", "timestamp": "2026-09-15T09:00:06.000Z"},
    ]
    return "".join(json.dumps(e) + "\n" for e in lines).encode()


def test_a_damaged_corpus_is_the_same_both_ways(tmp_path, monkeypatch, caplog):
    root = tmp_path / "poison"
    poison.build(root)
    crafted = root / "copilot-home" / "session-state" / "crafted-all-branches"
    crafted.mkdir(parents=True)
    (crafted / "events.jsonl").write_bytes(_crafted_events())
    shutil.copytree(crafted, root / "copilot-home" / "session-state" / "crafted-again")
    # a trailing comma: DuckDB reads the line, Python rejects it, so the whole log is the Python reader's
    comma = root / "copilot-home" / "session-state" / "crafted-comma"
    comma.mkdir()
    (comma / "events.jsonl").write_bytes(b'{"type":"user.message","id":"comma","data":{"content":"x",},}\n'
                                         + _crafted_events())
    # VS Code transcripts: the CLI envelope, a tool request's arguments as a JSON string; one damaged
    transcripts = root / "vscode-user" / "workspaceStorage" / "ws1" / "GitHub.copilot-chat" / "transcripts"
    transcripts.mkdir(parents=True)
    (transcripts / "t-clean.jsonl").write_bytes(_crafted_transcript())
    (transcripts / "t-damaged.jsonl").write_bytes(_crafted_transcript() + b'{"type":"user.message","data":\xff}\n')
    got = _both(tmp_path, [root / "copilot-home"], [root / "vscode-user"], monkeypatch, caplog)
    # not JSON, an array line, random bytes, invalid UTF-8, the trailing comma: the Python reader's
    assert got["whole"] >= 6
    assert got["python_lines"] >= 2 * 7  # the crafted lines left to Python, in both copies
    assert got["sql_lines"] >= 2 * 13
    con = duckdb.connect(str(tmp_path / "fast1.duckdb"), read_only=True)
    try:
        stored = " ".join(str(v) for r in con.execute("select * from stg_events").fetchall() for v in r)
    finally:
        con.close()
    for never in ("never stored", "secret thoughts", "enc", "deep", "a1B2c3D4e5F6g7H8i9J0"):
        assert f'"{never}"' not in stored and f" {never} " not in stored, never


def test_a_log_read_by_duckdb_resumes_where_it_stopped(tmp_path, monkeypatch, caplog):
    """A CLI log and a transcript read whole by the DuckDB reader, then appended to: the next ingest
    reads only the new events, from the offset and line each reader stored, and both warehouses are
    identical to each other and to a full ingest of the grown files."""
    corpus = tmp_path / "sample"
    shutil.copytree(REPO / "data" / "sample", corpus)
    homes, users = [corpus / "copilot-home"], [corpus / "vscode-user"]
    got = _both(tmp_path, homes, users, monkeypatch, caplog)  # fast0 / fast1.duckdb
    assert got["whole"] == 1  # the damaged log only: the two below were DuckDB's
    log_ = corpus / "copilot-home" / "session-state" / "a0627783-207c-5204-84bf-c1aa568c644c" / "events.jsonl"
    transcript = next(users[0].glob("workspaceStorage/*/GitHub.copilot-chat/transcripts/*.jsonl"))
    lines = {p: _lines(p) for p in (log_, transcript)}
    for path, n in lines.items():
        with path.open("a") as f:
            f.write(json.dumps({"type": "user.message", "data": {"content": f"appended to {path.name}"},
                                "id": f"appended-{n}", "timestamp": "2026-10-01T00:00:00.000Z"}) + "\n")
    for flag in ("0", "1"):
        monkeypatch.setenv("COPILOT_WAREHOUSE_FAST_READ", flag)
        summary = ingest(tmp_path / f"fast{flag}.duckdb", homes, users)
        assert summary.n_records == 2  # the two new events, nothing read again
    monkeypatch.setenv("COPILOT_WAREHOUSE_FAST_READ", "1")
    ingest(tmp_path / "full.duckdb", homes, users, full=True)
    assert _differences(tmp_path / "fast0.duckdb", tmp_path / "fast1.duckdb") == []
    assert _differences(tmp_path / "fast1.duckdb", tmp_path / "full.duckdb") == []
    con = duckdb.connect(str(tmp_path / "fast1.duckdb"), read_only=True)
    try:
        for path, n in lines.items():
            stored = con.execute("select max(event_index), count(*) from stg_events where _source_path = ?",
                                 [str(path.resolve())]).fetchone()
            assert stored == (n, n + 1), path  # event indexes 0..n, the appended one last
            assert con.execute("select good_line, last_good_offset from _source_files where source_path = ?",
                               [str(path.resolve())]).fetchone() == (n + 2, path.stat().st_size)
    finally:
        con.close()
