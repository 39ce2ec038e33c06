"""Memory bounded by what a run reads, not by what lies around it: an incremental ingest of a history of
large tool outputs succeeds under a small DuckDB memory limit (the star reads the length, MD5 and head of
each output, never its text: DuckDB decodes whole 2,048-row vectors of a column, and a vector of ~50 KB
outputs is ~100 MB)."""

from __future__ import annotations

import json
import random
import shutil
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


def _homes(tmp_path: Path) -> tuple[list[Path], list[Path]]:
    """The sample corpus and the poison corpus (events broken over lines, glued, damaged...)."""
    from . import poison
    from .conftest import REPO

    poison.build(tmp_path / "poison")
    return ([REPO / "data" / "sample" / "copilot-home", tmp_path / "poison" / "copilot-home"],
            [REPO / "data" / "sample" / "vscode-user", tmp_path / "poison" / "vscode-user"])


def test_a_log_read_in_pieces_gives_what_a_whole_read_gives(tmp_path, monkeypatch):
    """Logs are read a window at a time (extract.jsonl.windows), and a large log's rows leave the reader as
    Parquet parts as it goes (extract.parallel._Spill): with windows of 700 bytes and parts every 2 KB, every
    table - rejects, resume offsets and line numbers included - is the one a whole read gives."""
    from pipeline.extract import jsonl, parallel
    from tools.compare import differences

    homes, users = _homes(tmp_path)
    ingest(tmp_path / "whole.duckdb", homes, users, workers=1)
    spilled = []
    real = parallel._Spill.__call__

    def counted(self, res, nbytes):
        before = len(res.parts)
        real(self, res, nbytes)
        spilled.append(len(res.parts) - before)
    monkeypatch.setattr(jsonl, "WINDOW_BYTES", 700)
    monkeypatch.setattr(parallel, "SPILL_BYTES", 2048)
    monkeypatch.setattr(parallel._Spill, "__call__", counted)
    ingest(tmp_path / "pieces.duckdb", homes, users, workers=1)
    assert sum(spilled) > 5  # rows did leave as parts
    assert differences(tmp_path / "whole.duckdb", tmp_path / "pieces.duckdb") == []


def test_star_rows_built_on_worker_processes_equal_those_built_here(tmp_path, monkeypatch):
    """With many events to build, each batch's staging rows go to a worker process as Parquet and its star
    rows come back so (load/star.py _Builders): the same tables as built on the thread here."""
    from pipeline.load import star
    from tools.compare import differences

    homes, users = _homes(tmp_path)
    ingest(tmp_path / "here.duckdb", homes, users)
    monkeypatch.setattr(star, "WORKERS_MIN_EVENTS", 0)
    monkeypatch.setattr(star, "SESSION_BATCH", 5)  # several batches in flight
    built = []
    real = star._Builders.submit

    def counted(self, k, queries, large):
        built.append(self.on_workers)
        return real(self, k, queries, large)
    monkeypatch.setattr(star._Builders, "submit", counted)
    ingest(tmp_path / "workers.duckdb", homes, users)
    assert len(built) > 3 and all(built)  # several batches, each built on a worker
    assert differences(tmp_path / "here.duckdb", tmp_path / "workers.duckdb") == []


def test_an_incremental_run_on_workers_stores_what_one_here_stores(tmp_path, monkeypatch):
    """An incremental run whose batches were built on workers compares their Parquet parts with the stored rows
    where they lie (load/star.py _store_differences): grown, cut and rewritten logs give the warehouse and the
    rebuilt sessions that the same run built here gives."""
    from pipeline.load import star
    from tools.compare import differences

    homes, users = _homes(tmp_path)
    home = tmp_path / "home"
    shutil.copytree(homes[0], home)
    homes = [home, homes[1]]
    for name in ("here", "workers"):
        ingest(tmp_path / f"{name}.duckdb", homes, users)
    logs = sorted(home.glob("session-state/*/events.jsonl"))
    assert len(logs) >= 3
    with open(logs[0], "a", encoding="utf-8") as fh:  # grown: a prompt, a tool call and its failure
        for event in ({"type": "user.message", "data": {"content": "and the tests?"}},
                      {"type": "tool.execution_start", "data": {"toolCallId": "grown-call", "toolName": "view",
                                                                "arguments": {"path": "tests/test_x.py"}}},
                      {"type": "tool.execution_complete", "data": {"toolCallId": "grown-call", "success": False,
                                                                   "error": {"message": "no such file"}}}):
            fh.write(json.dumps({**event, "id": f"grown-{event['type']}", "timestamp": "2026-11-01T00:00:00Z"}) + "\n")
    lines = logs[1].read_text(encoding="utf-8").splitlines(keepends=True)
    logs[1].write_text("".join(lines[: len(lines) // 2]), encoding="utf-8")  # cut: its later turns and calls go
    text = logs[2].read_text(encoding="utf-8")
    logs[2].write_text(text.replace('"success":true', '"success":false', 1).replace(
        '"success": true', '"success": false', 1), encoding="utf-8")  # rewritten: a call now failed
    here = ingest(tmp_path / "here.duckdb", homes, users)
    monkeypatch.setattr(star, "WORKERS_MIN_EVENTS", 0)
    monkeypatch.setattr(star, "SESSION_BATCH", 1)  # a batch, and parts, per session
    compared = []
    real = star._store_differences

    def on_parts(con, in_affected, parts=None, changes=None):
        compared.append(parts is not None and all(parts.values()))
        return real(con, in_affected, parts, changes)
    monkeypatch.setattr(star, "_store_differences", on_parts)
    workers = ingest(tmp_path / "workers.duckdb", homes, users)
    assert compared == [True]  # the rows built on workers were compared where they lie
    assert here.n_sessions_changed == workers.n_sessions_changed >= 3
    assert differences(tmp_path / "here.duckdb", tmp_path / "workers.duckdb") == []
    ingest(tmp_path / "fresh.duckdb", homes, users)  # ... and both are what a fresh ingest of the files gives
    assert differences(tmp_path / "fresh.duckdb", tmp_path / "workers.duckdb") == []


def test_star_rows_built_from_staged_events_in_any_stored_order_are_the_same(tmp_path, monkeypatch):
    """Staging loads its parts in parallel (load/spool.py: insertion order not kept), so one log's events may lie
    in several runs of rows, out of order. The star's pulls read exactly the runs of a batch's sessions
    (load/star.py _span) and put each session's events back in order: built again from events stored shuffled
    in runs of 7 rows, every star table is the one built from them in order."""
    from pipeline.load import star
    from pipeline.warehouse import connect, transaction
    from tools.compare import differences

    homes, users = _homes(tmp_path)
    ingest(tmp_path / "ordered.duckdb", homes, users)
    shutil.copy(tmp_path / "ordered.duckdb", tmp_path / "shuffled.duckdb")
    con = connect(tmp_path / "shuffled.duckdb")
    with transaction(con):
        con.execute("create temp table shuffled as select * from stg_events order by hash(rowid // 7), rowid desc")
        con.execute("delete from stg_events")
        con.execute("insert into stg_events select * from shuffled")
    sessions = [sid for (sid,) in con.execute("select distinct session_id from stg_events order by 1").fetchall()]
    monkeypatch.setattr(star, "SESSION_BATCH", 3)
    filters = []
    real = star._span

    def seen(table, batch, spans):
        out = real(table, batch, spans)
        if table == "stg_events":
            filters.append(out)
        return out
    monkeypatch.setattr(star, "_span", seen)
    with transaction(con):
        affected = [sid for (sid,) in con.execute("select session_id from dim_sessions").fetchall()]
        root_repos, _moved = star.root_repositories(con)
        runs = star._batches(con, affected, "(select session_id from dim_sessions)")[1]
        star.rebuild(con, affected, tmp_path / "star", root_repos)
    con.close()
    assert len(sessions) > 10 and sum(len(r) > 1 for r in runs.values()) > 5  # sessions in several runs
    assert any(" or " in f for f in filters) and "" in filters  # ranges read, and a batch past MAX_SPAN_RANGES
    assert differences(tmp_path / "ordered.duckdb", tmp_path / "shuffled.duckdb") == []


def test_staged_parts_load_on_every_thread_only_while_their_row_groups_fit_the_memory_limit(tmp_path):
    """The spool inserts a table's parts without keeping their order (on every thread, each filling row groups of
    its own) when those row groups fit in a quarter of DuckDB's memory limit, else in order; every row arrives
    either way."""
    import pyarrow as pa

    from pipeline.load.spool import Spool
    from pipeline.parts import write_part
    from pipeline.warehouse import connect, ensure_schema, size_bytes

    con = connect(tmp_path / "w.duckdb")
    ensure_schema(con)
    con.execute("set threads = 2")
    con.execute("set memory_limit = '512MB'")
    chosen = {}
    for name, text in (("short", "x" * 100), ("long", "y" * 20_000)):
        spool = Spool(con, tmp_path / name)
        rows = [{"source_path": f"/{name}/{i}", "kind": "events", "size": i} for i in range(3000)]
        for i in range(0, 3000, 1000):
            part = tmp_path / f"{name}-{i}.parquet"
            tbl = pa.Table.from_pylist([{**r, "fingerprint": f"{r['size']}{text}"} for r in rows[i:i + 1000]])
            write_part(tbl, part)
            spool.add_part("_source_files", part, tbl.num_rows)
        chosen[name] = spool._in_parallel("_source_files")
        spool.load()
        assert con.execute("select count(*), sum(size) from _source_files where source_path like ?",
                           [f"/{name}/%"]).fetchone() == (3000, sum(range(3000)))
    assert chosen == {"short": True, "long": False}
    assert con.execute("select current_setting('preserve_insertion_order')").fetchone()[0] is True  # set back
    assert size_bytes("512MB") == 512_000_000 and size_bytes("1.5 GiB") == 1.5 * 2**30 and size_bytes("x") is None


def test_a_large_log_read_in_parts_on_every_core_gives_what_one_read_gives(tmp_path, monkeypatch, caplog):
    """A large event log is cut at line ends into parts read on every core (extract.parallel._split), each
    numbering its events from 0, and stitched in order: with parts of ~300 bytes, every log of the sample and
    the poison corpus (events broken over lines and glued, garbage, BOMs, unterminated last lines) cut
    everywhere - inside broken events too, where the rest of the log is read in one go - every table, event
    indexes, rejects, resume offsets and line numbers included, is the one a single read gives; and again after
    the logs grew (the parts of the new bytes)."""
    import logging

    from pipeline.extract import parallel
    from tools.compare import differences

    homes, users = _homes(tmp_path)
    ingest(tmp_path / "whole.duckdb", homes, users, workers=1)
    monkeypatch.setattr(parallel, "PART_BYTES", 300)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    stitched = []
    real = parallel._stitched

    def counted(src, parts, *args):
        got = real(src, parts, *args)
        stitched.append(len(parts))
        return got
    monkeypatch.setattr(parallel, "_stitched", counted)
    with caplog.at_level(logging.DEBUG, logger="pipeline.extract.parallel"):
        ingest(tmp_path / "parts.duckdb", homes, users, workers=2)
    assert len(stitched) > 5 and max(stitched) > 5  # logs were read in parts, some in many
    assert "an event may run past a cut" in caplog.text  # ... and some read on in one go from a broken event
    assert differences(tmp_path / "whole.duckdb", tmp_path / "parts.duckdb") == []

    # the logs grow (a complete event, then a broken one and an unterminated tail): only the new bytes are
    # read, in parts where they are large enough
    grown = sorted(p for p in (tmp_path / "poison").rglob("*.jsonl") if p.stat().st_size > 600)[:6]
    for i, log_file in enumerate(grown):  # the poison corpus's (the sample corpus is the repository's)
        with open(log_file, "ab") as fh:
            fh.write(b"\n".join(
                b'{"type":"user.message","data":{"content":"grown %d %d"},"id":"g%d-%d","timestamp":'
                b'"2027-01-01T00:00:%02d.000Z"}' % (i, k, i, k, k % 60) for k in range(40)) + b"\n")
            fh.write(b'{"type":"assistant.message","data":{"content":"line one\nline two"}}\n{"type":"user.mes')
    assert grown
    stitched.clear()
    ingest(tmp_path / "parts.duckdb", homes, users, workers=2)
    ingest(tmp_path / "whole.duckdb", homes, users, workers=1)
    assert stitched  # the grown logs' new bytes were read in parts
    assert differences(tmp_path / "whole.duckdb", tmp_path / "parts.duckdb") == []


def test_parts_of_a_log_are_read_again_in_one_go_from_where_rejoining_would_overspend(tmp_path, monkeypatch,
                                                                                     caplog):
    """Rejoining broken events (and splitting glued ones) has one budget per file: parts read beside each
    other each spend their own, so the parts are taken only while what they spent in all stays under it, and
    from the part where it would not, the log is read in one go with what is left (extract.parallel._stitched).
    With a budget that runs out halfway through a log of glued events, the stitched read - rows, event
    indexes, rejects, where it stopped - is the single read's."""
    import logging

    import pyarrow.parquet as pq

    from pipeline.extract import jsonl, parallel
    from pipeline.extract.base import Source

    lines = []
    for i in range(60):  # events, and every other one a truncated event glued to a whole one (split, at a cost)
        lines.append(b'{"type":"user.message","data":{"content":"prompt %d %s"},"id":"u%d","timestamp":'
                     b'"2026-01-01T00:00:%02d.000Z"}' % (i, b"x" * 300, i, i % 60))
        if i % 2 == 0:
            lines.append(b'{"type":"assistant.message","data":{"content":"cut sho{"type":"assistant.message",'
                         b'"data":{"content":"whole %d"},"id":"a%d"}' % (i, i))
    log_file = tmp_path / "events.jsonl"
    log_file.write_bytes(b"\n".join(lines) + b"\n")
    src = Source(str(log_file), "events", "s1")
    monkeypatch.setattr(jsonl, "JOIN_BUDGET", 1000)  # ~12 of the 30 glued lines
    monkeypatch.setattr(parallel, "JOIN_BUDGET", 1000)
    monkeypatch.setattr(parallel, "PART_BYTES", 400)
    scratch = tmp_path / "scratch"
    scratch.mkdir()

    def rows(parts: list[tuple[str, str, int, int]]) -> list[dict]:
        out = []
        for table, path, _n, shift in parts:
            for row in pq.read_table(path).to_pylist():
                out.append({**row, "event_index": row["event_index"] + shift, "_table": table})
        return out

    one = parallel.read_part(src, parallel.Part(0, 1, None), "r", True, str(scratch))
    split = parallel._split(src, None, log_file.stat().st_size)
    assert split is not None
    found, begin = split
    parts = list(found)
    with caplog.at_level(logging.DEBUG, logger="pipeline.extract.parallel"):
        batch = parallel._stitched(src, parts, begin, (parallel.read_part(src, p, "r", True, str(scratch))
                                                       for p in parts), "r", True, str(scratch))
    (read,) = batch.reads
    assert len(parts) > 8 and one.spent[0] >= 1000  # the budget ran out in the single read
    assert "rejoining broken events spent the file's budget" in caplog.text
    assert rows(read.result.parts) == rows(one.parts)
    assert read.result.rejects == one.rejects and any("not valid JSON" in r["reason"] for r in one.rejects)
    assert (read.result.n_records, read.result.last_good_offset, read.result.good_line) == \
        (one.n_events, one.good_offset, one.good_line)
