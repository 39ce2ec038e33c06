"""Copilot's OpenTelemetry file export (extract/otel.py): leaf `chat` spans as per-request rows with their logged
cost, never an `invoke_agent` total or a metric; one session with the CLI's own log, filling what its events lack.
The files are built here in the CLI 1.0.89 format (more-sources.md section 3) with made-up values."""

import json
from datetime import datetime, timezone

from pipeline.extract.base import Context, Source
from pipeline.extract.otel import read_otel
from pipeline.ingest import ingest
from pipeline.redact import Redactor
from tools.synthlog import Log

from .conftest import rows

T0 = datetime(2026, 9, 23, 23, 19, tzinfo=timezone.utc)
KILLED, SHUT, ONLY = "a0000000-0000-4000-8000-000000000001", "b0000000-0000-4000-8000-000000000002", \
    "c0000000-0000-4000-8000-000000000003"


def span(sid: str, secs: float, name: str, op: str, dur: float = 2.0, **attrs) -> str:
    start = T0.timestamp() + secs
    return json.dumps({
        "type": "span", "traceId": "t" * 32, "spanId": f"{abs(hash((sid, secs, name))) % 16**16:016x}",
        "parentSpanId": "p" * 16, "name": name, "kind": 2,
        "startTime": [int(start), int(start % 1 * 1e9)], "endTime": [int(start + dur), int((start + dur) % 1 * 1e9)],
        "attributes": {"gen_ai.operation.name": op, "gen_ai.conversation.id": sid, **attrs},
        "status": {"code": 0}, "events": [],
        "resource": {"attributes": {"service.name": "github-copilot", "service.version": "1.0.89-0"}}})


def chat(sid: str, secs: float, model: str, inp, out, cache, nano, **more) -> str:
    return span(sid, secs, f"chat {model}", "chat", **{
        "gen_ai.request.model": model, "gen_ai.response.model": model, "gen_ai.usage.input_tokens": inp,
        "gen_ai.usage.output_tokens": out, "gen_ai.usage.cache_read.input_tokens": cache,
        "github.copilot.nano_aiu": nano, "github.copilot.cost": 1.0, "github.copilot.initiator": "user",
        "gen_ai.response.time_to_first_chunk": 1.5, **more})


def home_with_otel(tmp_path, extra=()):
    home = tmp_path / "home"
    for sid, shut in ((KILLED, False), (SHUT, True)):
        log = Log(sid, T0)
        log.start({"cwd": "/home/dev/api"})
        log.prompt("fix it")
        log.answer("done")
        log.answer("and more")
        if shut:
            log.shutdown(T0, 10000, nano=True)
        folder = home / "session-state" / sid
        folder.mkdir(parents=True)
        (folder / "events.jsonl").write_text(log.text())
    otel = home / "otel"
    otel.mkdir()
    lines = [
        chat(KILLED, 5, "claude-sonnet-4.6", 20000, 120, 15000, 3_500_000_000.0),
        chat(KILLED, 9, "claude-sonnet-4.6", "21000", 120, 20000, 1_200_000_000.0),
        # the agent's span repeats its children's totals: never counted
        span(KILLED, 4, "invoke_agent", "invoke_agent", dur=20, **{
            "gen_ai.usage.input_tokens": 41000, "github.copilot.nano_aiu": 4_700_000_000.0,
            "github.copilot.cost": 2.0}),
        span(KILLED, 6, "execute_tool bash", "execute_tool", **{"gen_ai.tool.name": "bash"}),
        json.dumps({"type": "metric", "name": "gen_ai.client.token.usage", "unit": "{token}",
                    "dataPoints": [{"attributes": {"gen_ai.token.type": "input"}, "value": 41000}]}),
        # a CLI before 1.0.64 named the cache attribute otherwise; a redacted count is unknown
        chat(SHUT, 5, "claude-sonnet-4.6", "[REDACTED]", "[REDACTED]", None, 2_000_000_000.0,
             **{"gen_ai.usage.cache_read_input_tokens": 900}),
        chat(ONLY, 30, "gpt-5.6-sol", 8000, 50, 0, 800_000_000.0),
        *extra,
    ]
    (otel / "copilot-otel.jsonl").write_text("\n".join(lines) + "\n")
    return home


def test_only_chat_spans_become_requests_with_their_figures(tmp_path):
    home = home_with_otel(tmp_path, extra=["{not json", '{"type": "span", "name": "chat x", "attributes": '
                                                         '{"gen_ai.operation.name": "chat"}}'])
    path = home / "otel" / "copilot-otel.jsonl"
    res = read_otel(Source(str(path), "otel", None, str(home)), Context(run_id="r", redact=Redactor()), None)
    got = [(r["session_id"][:1], r["model"], r["input_tokens"], r["output_tokens"], r["cache_read_tokens"],
            r["nano_aiu"], r["request_multiplier"], r["ttft_ms"], r["duration_ms"])
           for r in res.rows["stg_otel_requests"]]
    assert got == [("a", "claude-sonnet-4.6", 20000, 120, 15000, 3_500_000_000, 1.0, 1500, 2000),
                   ("a", "claude-sonnet-4.6", 21000, 120, 20000, 1_200_000_000, 1.0, 1500, 2000),
                   ("b", "claude-sonnet-4.6", None, None, 900, 2_000_000_000, 1.0, 1500, 2000),
                   ("c", "gpt-5.6-sol", 8000, 50, 0, 800_000_000, 1.0, 1500, 2000)]
    assert [r["reason"].split(":")[0] for r in res.rejects] == ["line is not valid JSON",
                                                                 "chat span names no session (gen_ai.conversation.id)"]


def test_otel_fills_what_the_events_lack_and_counts_nothing_twice(tmp_path):
    home = home_with_otel(tmp_path)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    # the killed leg (no shutdown): its two requests and exact cost from the spans, not the messages' output alone
    assert rows(wh, "select token_source, cost_source, requests, input_tokens, nano_aiu from fct_usage_legs "
                    "where session_id = ?", [KILLED]) == [("otel", "logged", 2, 41000, 4_700_000_000)]
    # a leg with a shutdown keeps the shutdown's figures; the span is its request row
    assert rows(wh, "select token_source, requests from fct_usage_legs where session_id = ?", [SHUT]) == [
        ("shutdown", 2)]
    assert rows(wh, "select source, count(*) from fct_requests where session_id = ? group by 1", [SHUT]) == [
        ("otel", 1)]
    # a session known only from its spans is one, dated by them
    assert rows(wh, "select client, started_at is not null, sources from dim_sessions where session_id = ?",
                [ONLY]) == [("cli", True, ["otel"])]
    assert rows(wh, "select sources from dim_sessions where session_id = ?", [KILLED]) == [(["events", "otel"],)]
    assert rows(wh, "select count(*) from dim_sessions") == [(3,)]


def test_store_schema_v6_columns_are_read(tmp_path):
    # session-store.db schema 6 (CLI 1.0.80): time to first token, finish reason, the billed model, the price
    # breakdown - made-up rows in the columns the CLI writes
    import sqlite3

    home = tmp_path / "home"
    home.mkdir()
    con = sqlite3.connect(home / "session-store.db")
    con.executescript("""
        create table sessions (id text primary key, cwd text, created_at text, updated_at text);
        insert into sessions values ('v6', '/srv/app', '2026-09-01T10:00:00Z', '2026-09-01T10:05:00Z');
        create table assistant_usage_events (id integer primary key, session_id text, turn_index integer,
            agent_id text, parent_tool_call_id text, model text, input_tokens integer, output_tokens integer,
            cache_read_tokens integer, cache_write_tokens integer, reasoning_tokens integer, total_nano_aiu integer,
            request_multiplier real, duration_ms integer, time_to_first_token_ms integer,
            inter_token_latency_ms real, initiator text, api_endpoint text, reasoning_effort text,
            finish_reason text, content_filter_triggered integer, token_details_json text,
            copilot_usage_model text, created_at text);
        insert into assistant_usage_events values (1, 'v6', 0, null, null, 'gpt-5.6-sol', 1200, 80, 0, 0, 0,
            840000000, 1.0, 2100, 650, 12.5, 'user', '/responses', 'medium', 'stop', 0,
            '[{"tokenType":"input","tokenCount":1200,"batchSize":1000000,"costPerBatch":500000000000},
              {"tokenType":"output","tokenCount":80,"batchSize":1000000,"costPerBatch":3000000000000}]',
            'gpt-5.6-sol', '2026-09-01T10:01:00Z');
    """)
    con.commit()
    con.close()
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select time_to_first_token_ms, finish_reason, copilot_usage_model, reasoning_effort "
                    "from stg_store_usage") == [(650, "stop", "gpt-5.6-sol", "medium")]
    assert rows(wh, "select source, ttft_ms, duration_ms, nano_aiu, cost_source from fct_requests") == [
        ("store_usage_events", 650, 2100, 840000000, "logged")]
    # the price breakdown is kept as written: its parts sum to the logged cost
    details, total = rows(wh, "select token_details, total_nano_aiu from stg_store_usage")[0]
    assert sum(d["tokenCount"] * d["costPerBatch"] // d["batchSize"] for d in json.loads(details)) == total


def test_a_home_with_only_an_otel_folder_or_the_app_s_database_is_a_copilot_home(tmp_path):
    from pipeline.inventory import warnings

    (tmp_path / "a" / "otel").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "data.db").write_bytes(b"")
    (tmp_path / "c").mkdir()
    assert [w.split(":")[0] for w in warnings([tmp_path / "a", tmp_path / "b", tmp_path / "c"], [])] == [
        f"--copilot-home {tmp_path / 'c'}"]


def test_an_export_is_read_a_window_at_a_time_and_no_span_is_lost_between_windows(tmp_path, monkeypatch):
    from pipeline.extract import jsonl

    home = home_with_otel(tmp_path)
    path = home / "otel" / "copilot-otel.jsonl"
    whole = read_otel(Source(str(path), "otel", None, str(home)), Context(run_id="r", redact=Redactor()), None)
    monkeypatch.setattr(jsonl, "WINDOW_BYTES", 700)  # several windows, lines cut across them
    assert path.stat().st_size > 3 * 700
    windowed = read_otel(Source(str(path), "otel", None, str(home)), Context(run_id="r", redact=Redactor()), None)
    assert windowed.rows == whole.rows and windowed.rejects == whole.rejects == []
    assert windowed.last_good_offset == path.stat().st_size


def test_a_grown_export_is_read_from_where_the_last_run_stopped(tmp_path):
    # an export only grows: the next run reads its new lines (a line still being written waits for the next run),
    # and the warehouse is the one a first read of the whole file gives
    from tools.compare import differences

    home = home_with_otel(tmp_path)
    path = home / "otel" / "copilot-otel.jsonl"
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    n0 = rows(wh, "select count(*) from stg_otel_requests")[0][0]
    later = chat(ONLY, 60, "gpt-5.6-sol", 9000, 60, 0, 900_000_000.0)
    newcomer = "d0000000-0000-4000-8000-000000000004"
    unfinished = chat(newcomer, 90, "gpt-5.6-sol", 1000, 10, 0, 100_000_000.0)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(later + "\n" + unfinished[:-20])
    assert ingest(wh, [home]).n_pending_tails == 1  # the unfinished line waits for the next run
    # the new line read, the lines before it not again (their rows kept: staged once, not twice)
    assert rows(wh, "select count(*), count(distinct _run_id) from stg_otel_requests") == [(n0 + 1, 2)]
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(unfinished[-20:] + "\n")
    ingest(wh, [home])
    assert rows(wh, "select count(*), count(distinct _run_id) from stg_otel_requests") == [(n0 + 2, 3)]
    fresh = tmp_path / "fresh.duckdb"
    ingest(fresh, [home])
    assert differences(fresh, wh, skip_tables={"_source_files", "_meta"}) == []
    assert rows(wh, "select started_at < ended_at, n_turns from dim_sessions where session_id = ?", [ONLY]) == [
        (True, 0)]
    assert rows(wh, "select count(*) from fct_requests where session_id = ?", [newcomer]) == [(1,)]
