"""Data checks: SELECTs of offending rows, run on every ingest; a failure fails the run."""

import duckdb

from pipeline import checks
from pipeline.cli import main
from pipeline.ingest import ingest

from .conftest import rows


def test_checks_pass_on_the_sample_and_catch_broken_rows(sample_home, tmp_path):
    wh = tmp_path / "w.duckdb"
    summary = ingest(wh, [sample_home])
    assert summary.n_checks_run == len(checks.all_checks()) == 39 + 5  # 39 declared keys, 5 in sql/checks
    con = duckdb.connect(str(wh))
    try:
        assert checks.run_checks(con) == []
        con.execute("insert into fct_turns (session_id, turn_index) select session_id, turn_index from fct_turns "
                    "limit 1")
        con.execute("insert into fct_refs (session_id, ref_type, ref_value) values ('ghost', 'tag', 'v1')")
        failed = {f.name: f for f in checks.run_checks(con)}
    finally:
        con.close()
    assert sorted(failed) == ["accepted_values", "fk_facts_to_sessions", "turn_indexes_are_dense",
                              "unique_key_fct_turns"]
    assert failed["accepted_values"].rows == [("fct_refs.ref_type", "tag")]
    assert failed["fk_facts_to_sessions"].rows == [("fct_refs", "ghost")]
    assert failed["unique_key_fct_turns"].columns == ["session_id", "turn_index", "n_rows"]


def test_the_lakes_refresh_checks_what_reads_a_model_one_query_at_a_time(sample_home, tmp_path):
    """The lake's refresh runs the checks that read a model (its star tables are rows whose ingests checked them),
    each in its own query; they find the same failures as all of them at once."""
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    star_alone = sorted(n for n, sql in checks.all_checks() if checks.reads_star_alone(sql))
    assert star_alone == ["accepted_values", "fk_facts_to_sessions", "turn_indexes_are_dense"]
    con = duckdb.connect(str(wh))
    try:
        assert checks.run_checks(con, together=False, models_only=True) == []
        con.execute("insert into fct_refs (session_id, ref_type, ref_value) values ('ghost', 'tag', 'v1')")
        con.execute("insert into report_topics select * from report_topics limit 1")
        con.execute("insert into dim_files select * from dim_files limit 1")
        together = {f.name: f.rows for f in checks.run_checks(con)}
        apart = {f.name: f.rows for f in checks.run_checks(con, together=False)}
        models = {f.name: f.rows for f in checks.run_checks(con, together=False, models_only=True)}
    finally:
        con.close()
    assert together == apart
    assert sorted(together) == ["accepted_values", "fk_facts_to_sessions", "unique_key_dim_files",
                                "unique_key_report_topics"]
    assert sorted(models) == ["unique_key_dim_files", "unique_key_report_topics"]


def test_a_failing_check_fails_the_run_and_leaves_the_warehouse(sample_home, tmp_path, monkeypatch, capsys):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    before = rows(wh, "select count(*) from stg_events")
    strict = tmp_path / "checks"
    strict.mkdir()
    (strict / "no_sessions_after_2026_09_10.sql").write_text(
        "select session_id, started_at from dim_sessions where started_at > timestamp '2026-09-10'")
    monkeypatch.setattr(checks, "CHECKS_DIR", strict)
    log = next(sample_home.glob("session-state/*/events.jsonl"))
    with open(log, "a") as fh:
        fh.write('{"type":"user.message","data":{"content":"more"},"id":"x1","timestamp":"2026-09-30T00:00:00Z"}\n')
    assert main(["ingest", "--copilot-home", str(sample_home), "--warehouse", str(wh), "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "check no_sessions_after_2026_09_10 failed: 2 offending rows" in err
    assert rows(wh, "select count(*) from stg_events") == before  # rolled back


def test_an_incremental_run_checks_the_keys_of_per_session_tables_on_the_changed_sessions(sample_home, tmp_path):
    """Rows of unchanged sessions were checked by the run that wrote them; a key of a star table or a
    per-session model never spans sessions, so the changed sessions' rows are what can break it - and rows
    of no session, always checked."""
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    con = duckdb.connect(str(wh))
    try:
        changed, other = [r[0] for r in con.execute(
            "select distinct session_id from fct_tool_calls where session_id in (select session_id from "
            "int_topic_terms) order by 1 limit 2").fetchall()]
        for table in ("int_topic_terms", "fct_tool_calls"):
            con.execute(f"insert into {table} select * from {table} where session_id = ? limit 1", [changed])
        in_scope = {f.name for f in checks.run_checks(con, sessions=[changed])}
        out_of_scope = {f.name for f in checks.run_checks(con, sessions=[other])}
        everything = {f.name for f in checks.run_checks(con)}
        con.execute("insert into fct_turns by name select * replace (null as session_id) from fct_turns limit 1")
        sessionless = {f.name for f in checks.run_checks(con, sessions=[other])}
    finally:
        con.close()
    assert in_scope == everything == {"unique_key_int_topic_terms", "unique_key_fct_tool_calls"}
    assert out_of_scope == set()
    assert "unique_key_fct_turns" in sessionless
