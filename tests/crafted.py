"""A small hand-made warehouse (the tables the star build writes) for testing the SQL models row by row;
dim_projects and dim_files are models too, built from these."""

from datetime import datetime as dt

import duckdb

from pipeline.warehouse import ensure_schema

T = dt.fromisoformat

ROWS = {
    "dim_sessions": [
        # session_id, project_id, root, title, client, started_at, ended_at, duration, turns, calls, failed, models
        ("s1", "p1", "/r/compiler", "Parser rewrite", "cli", T("2026-01-05 10:00"), T("2026-01-05 10:30"), 1800.0, 2,
         3, 1, ["m1"]),
        ("s2", "p1", "/r/compiler", "Fix lexer", "cli", T("2026-01-20 09:00"), T("2026-01-20 09:10"), 600.0, 1, 1, 0,
         ["m1"]),
        ("s3", "p2", "/r/docs", "Docs site", "vscode", T("2026-02-02 12:00"), T("2026-02-02 12:05"), 300.0, 1, 0, 0,
         ["m2"]),
    ],
    "int_session_files": [
        ("s1", "f1", "p1", "src/parser.py", True), ("s1", "f2", "p1", "src/lexer.py", True),
        ("s1", "f4", "p1", "/etc/hosts", False), ("s2", "f1", "p1", "src/parser.py", True),
        ("s2", "f2", "p1", "src/lexer.py", True), ("s3", "f3", "p2", "docs/index.md", True),
    ],
    "fct_file_touches": [
        ("s1", "f1", "edit", 2, T("2026-01-05 10:05"), T("2026-01-05 10:10")),
        ("s1", "f1", "view", 1, T("2026-01-05 10:01"), T("2026-01-05 10:01")),
        ("s1", "f2", "edit", 1, T("2026-01-05 10:20"), T("2026-01-05 10:20")),
        ("s1", "f4", "view", 1, T("2026-01-05 10:02"), T("2026-01-05 10:02")),
        ("s2", "f2", "edit", 1, T("2026-01-20 09:05"), T("2026-01-20 09:05")),
        ("s2", "f1", "view", 1, T("2026-01-20 09:02"), T("2026-01-20 09:02")),
        ("s3", "f3", "create", 1, T("2026-02-02 12:01"), T("2026-02-02 12:01")),
    ],
    "fct_turns": [
        ("s1", 0, "Rewrite the parser in parser.py", "Done.", T("2026-01-05 10:00"), T("2026-01-05 10:12")),
        ("s1", 1, "now the lexerTokens", None, T("2026-01-05 10:15"), T("2026-01-05 10:30")),
        ("s2", 0, "fix lexer bug in the tokenizer", "Fixed the lexer.", T("2026-01-20 09:00"), T("2026-01-20 09:10")),
        ("s3", 0, "write the docs site index", "Written.", T("2026-02-02 12:00"), T("2026-02-02 12:05")),
    ],
    "fct_tool_calls": [
        ("s1", "c1", 0, "edit", "edit", T("2026-01-05 10:05"), 2000, True, "f1"),
        ("s1", "c2", 1, "bash", "shell", T("2026-01-05 10:16"), 500, False, None),
        ("s1", "c3", 1, "edit", "edit", T("2026-01-05 10:20"), 1000, True, "f2"),
        ("s2", "c4", 0, "edit", "edit", T("2026-01-20 09:05"), 3000, True, "f2"),
    ],
    "fct_checkpoints": [
        ("s1", 1, "Parser rewrite", "Rewrote the recursive descent parser", "- src/parser.py", T("2026-01-05 10:25")),
    ],
    "fct_usage": [
        # session, model, requests, input, output, cache read, credits, usd, cost source
        ("s1", "m1", 3, 1000, 100, 10, "2.5", "0.025", "logged"), ("s2", "m1", 1, 500, 50, 0, "1", "0.01", "estimated"),
        ("s3", "m2", 2, 800, 80, 0, None, None, "unknown"),
    ],
    "fct_usage_legs": [
        # session, leg, model, used at, requests, input, output, cache read, credits, usd, cost source
        ("s1", 1, "m1", T("2026-01-05 10:12"), 2, 600, 60, 10, "1.5", "0.015", "logged"),
        ("s1", 2, "m1", T("2026-01-05 10:30"), 1, 400, 40, 0, "1", "0.01", "logged"),
        ("s2", 1, "m1", T("2026-01-20 09:10"), 1, 500, 50, 0, "1", "0.01", "estimated"),
        ("s3", 1, "m2", T("2026-02-02 12:05"), 2, None, 80, None, None, None, "unknown"),
    ],
    "fct_memories": [("mem1", "s3", "plan", "docs/plan.md", "Plan: build the docs site with mkdocs")],
}

COLUMNS = {
    "dim_sessions": "session_id, project_id, root_path, title, client, started_at, ended_at, duration_s, n_turns, "
                    "n_tool_calls, n_failed_tool_calls, models",
    "int_session_files": "session_id, file_id, project_id, path, is_in_project",
    "fct_file_touches": "session_id, file_id, action, n_touches, first_seen_at, last_seen_at",
    "fct_turns": "session_id, turn_index, user_message, assistant_response, started_at, ended_at",
    "fct_tool_calls": "session_id, tool_call_id, turn_index, tool_name, tool_family, started_at, duration_ms, "
                      "is_success, file_id",
    "fct_checkpoints": "session_id, checkpoint_number, title, overview, important_files, created_at",
    "fct_usage": "session_id, model, requests, input_tokens, output_tokens, cache_read_tokens, ai_credits, cost_usd, "
                 "cost_source",
    "fct_usage_legs": "session_id, leg_index, model, used_at, requests, input_tokens, output_tokens, "
                      "cache_read_tokens, ai_credits, cost_usd, cost_source",
    "fct_memories": "memory_id, session_id, kind, path, content",
}


def crafted_warehouse(path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    con.execute("set TimeZone = 'UTC'")  # the naive times above are UTC
    ensure_schema(con)
    for table, rows in ROWS.items():
        marks = ", ".join("?" for _ in COLUMNS[table].split(","))
        con.executemany(f"insert into {table} ({COLUMNS[table]}) values ({marks})", rows)
    return con
