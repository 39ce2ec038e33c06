"""Memory bounded by what a run reads, not by what lies around it: an incremental ingest of a history of
large tool outputs succeeds under a small DuckDB memory limit (the star reads the length, MD5 and head of
each output, never its text: DuckDB decodes whole 2,048-row vectors of a column, and a vector of ~50 KB
outputs is ~100 MB)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from pipeline.ingest import ingest

from .conftest import rows


def _big_output_home(root: Path, sessions: int = 24, calls: int = 100, output_chars: int = 50_000) -> Path:
    """A Copilot home whose events are nearly all completions of tool calls with ~50 KB outputs, as in
    agent sessions that read whole files (make bench's `outputs` shape, denser)."""
    rng = random.Random(5)
    home = root / "copilot-home"
    for s in range(sessions):
        sid = f"0000big{s:04d}-0000-4000-8000-000000000000"
        folder = home / "session-state" / sid
        folder.mkdir(parents=True)
        events = [{"type": "session.start", "data": {"sessionId": sid, "context": {"cwd": f"/w/p{s % 3}"}},
                   "id": "e0", "timestamp": "2026-10-01T00:00:00.000Z"},
                  {"type": "user.message", "data": {"content": f"read every file of part {s}"}, "id": "e1",
                   "timestamp": "2026-10-01T00:00:01.000Z"},
                  {"type": "assistant.message", "data": {"content": "", "toolRequests": [
                      {"toolCallId": f"c{s}-{k}", "name": "view", "arguments": {"path": f"/w/p{s % 3}/f{k}.py"}}
                      for k in range(calls)]}, "id": "e2", "timestamp": "2026-10-01T00:00:02.000Z"}]
        for k in range(calls):
            text = "".join(f"{i + 1}. {rng.getrandbits(64):x} = {rng.getrandbits(64):x}\n"
                           for i in range(output_chars // 40))
            events.append({"type": "tool.execution_complete", "data": {
                "toolCallId": f"c{s}-{k}", "success": True, "result": {"content": text}},
                "id": f"c{k}", "timestamp": "2026-10-01T00:00:03.000Z"})
        (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return home


def test_an_incremental_run_of_grown_big_output_logs_succeeds_under_a_small_memory_limit(tmp_path, monkeypatch):
    home = _big_output_home(tmp_path)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    logs = sorted(home.glob("session-state/*/events.jsonl"))
    for log in logs[::6]:  # a few sessions grow by one event: their star rows are rebuilt
        with open(log, "a") as fh:
            fh.write(json.dumps({"type": "session.info", "data": {"message": "grown"}, "id": "g",
                                 "timestamp": "2026-10-02T00:00:00.000Z"}) + "\n")
    monkeypatch.setenv("COPILOT_WAREHOUSE_MEMORY", "128MB")
    summary = ingest(wh, [home])
    assert summary.n_records == len(logs[::6]) and summary.n_sessions_changed == len(logs[::6])
    outputs = [json.loads(line)["data"]["result"]["content"] for log in logs for line in log.open()
               if '"tool.execution_complete"' in line]
    assert rows(wh, "select count(*), count(result_md5), min(result_chars), max(result_chars), "
                    "max(length(result_content)) from fct_tool_calls") == [
        (len(outputs), len(outputs), min(map(len, outputs)), max(map(len, outputs)), 4096)]
