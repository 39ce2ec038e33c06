"""The desktop app's data.db (extract/desktop.py): read in place and read-only, nothing written beside it, no
credential ever read - the database here is made up, with fake tokens in the tables that hold real ones."""

import os
import sqlite3

import pytest

from pipeline.extract.desktop import open_read_only
from pipeline.ingest import ingest

from .conftest import rows

TOKEN = "gho_FAKEfakeFAKEfakeFAKEfakeFAKEfake0000"  # a made-up token in the app's credential columns


def make_db(path, wal_open=False):
    con = sqlite3.connect(path)
    con.execute("pragma journal_mode=wal")
    con.executescript(f"""
        create table accounts (id integer primary key, login text, access_token text);
        insert into accounts values (1, 'dev', '{TOKEN}');
        create table settings (key text, github_access_token text);
        insert into settings values ('auth', '{TOKEN}');
        create table sessions (id text primary key, title text, mode text, model text, agent text, created_at integer,
            updated_at integer, total_input_tokens integer, total_output_tokens integer, total_cached_tokens integer,
            total_reasoning_tokens integer, total_nano_aiu integer, secret_notes text);
        insert into sessions values ('d1', 'Plan the release', 'agent', 'claude-sonnet-4.6', null, 1790000000000,
            1790000600000, 120000, 3000, 90000, 0, 4200000000, '{TOKEN}');
        create table session_context_usage (session_id text, ts_ms integer, current_tokens integer,
            token_limit integer);
        insert into session_context_usage values ('d1', 1790000100000, 40000, 200000);
    """)
    con.commit()
    if wal_open:
        return con  # kept open: its -wal and -shm stay beside the database
    con.close()
    return None


@pytest.mark.parametrize("wal_open", [False, True], ids=["closed", "app running"])
def test_data_db_is_read_in_place_and_nothing_appears_beside_it(tmp_path, wal_open):
    home = tmp_path / "home"
    home.mkdir()
    db = home / "data.db"
    held = make_db(db, wal_open)
    try:
        before = sorted(os.listdir(home))
        assert ("data.db-wal" in before) == wal_open
        wh = tmp_path / "w.duckdb"
        ingest(wh, [home])
        assert sorted(os.listdir(home)) == before  # no -wal, -shm or copy made by the reader
    finally:
        if held is not None:
            held.close()
    assert rows(wh, "select session_id, title, started_at is not null, sources from dim_sessions") == [
        ("d1", "Plan the release", True, ["desktop"])]
    # its only usage record: the totals, one leg with the logged cost
    assert rows(wh, "select token_source, cost_source, input_tokens, nano_aiu, requests from fct_usage_legs") == [
        ("desktop_totals", "logged", 120000, 4200000000, None)]
    assert rows(wh, "select current_tokens from stg_desktop_context") == [(40000,)]
    # no credential anywhere in the warehouse
    con = __import__("duckdb").connect(str(wh), read_only=True)
    for (table,) in con.execute("select table_name from information_schema.tables where table_schema = 'main' "
                                "and table_type = 'BASE TABLE'").fetchall():
        text = con.execute(f'select count(*) from "{table}" as t where t::varchar like ?', [f"%{TOKEN}%"]).fetchone()
        assert text == (0,), table
    con.close()


def test_sqlite_itself_refuses_every_column_outside_the_allow_list(tmp_path):
    db = tmp_path / "data.db"
    make_db(db)
    con = open_read_only(str(db))
    try:
        assert con.execute("select title from sessions").fetchall() == [("Plan the release",)]
        for sql in ("select access_token from accounts", "select * from settings", "select secret_notes from sessions",
                    "select * from sessions", "pragma table_info(accounts)"):
            with pytest.raises(sqlite3.DatabaseError, match="prohibited|not authorized"):
                con.execute(sql).fetchall()
        with pytest.raises(sqlite3.DatabaseError):
            con.execute("insert into sessions (id) values ('x')")
    finally:
        con.close()
    assert sorted(os.listdir(tmp_path)) == ["data.db"]


def test_events_and_totals_of_one_session_count_once(tmp_path):
    # a desktop session with its events: the events' figures, the totals only as metadata
    from datetime import datetime, timezone

    from tools.synthlog import Log

    home = tmp_path / "home"
    home.mkdir()
    make_db(home / "data.db")
    log = Log("d1", datetime(2026, 9, 21, 14, tzinfo=timezone.utc))
    log.start({"cwd": "/home/dev/app"})
    log.prompt("ship it")
    log.answer("shipped")
    log.shutdown(datetime(2026, 9, 21, 14, tzinfo=timezone.utc), 5000, nano=True)
    (home / "session-state" / "d1").mkdir(parents=True)
    (home / "session-state" / "d1" / "events.jsonl").write_text(log.text())
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select title, sources from dim_sessions") == [("Plan the release", ["desktop", "events"])]
    assert rows(wh, "select token_source, requests, input_tokens from fct_usage_legs") == [("shutdown", 1, 5000)]
