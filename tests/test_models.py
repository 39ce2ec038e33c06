"""SQL models: exact rows on a hand-made warehouse, and the planted signals of the sample corpus."""

import duckdb
import pytest

from pipeline.cli import main
from pipeline.ingest import ingest
from pipeline.models import run_models
from pipeline.schema import MODELS

from .conftest import rows
from .crafted import crafted_warehouse


@pytest.fixture
def crafted(tmp_path):
    con = crafted_warehouse(tmp_path / "c.duckdb")
    run_models(con)
    yield con
    con.close()


def q(con, sql):
    return con.sql(sql).fetchall()


def test_file_importance_components_score_and_rank(crafted):
    # f1: 2 sessions, 2 edits, 2 views, 2 days; recency 0.5^(14.95 d/30) + 0.5^(3 min/30 d);
    # named in a prompt ("parser.py") and in the checkpoint's important_files. /etc/hosts is outside.
    assert q(crafted, "select * exclude (first_seen_at, last_seen_at) from report_file_importance "
                      "order by project_id, rank") == [
        ("p1", "f1", "src/parser.py", 9.9156, 1, 2, 2, 0, 2, 2, 1.7078, 1, 1),
        ("p1", "f2", "src/lexer.py", 7.416, 2, 2, 2, 0, 0, 2, 1.708, 0, 0),
        ("p2", "f3", "docs/index.md", 4.5, 1, 1, 0, 1, 0, 1, 1.0, 0, 0),
    ]


def test_file_coupling(crafted):
    assert q(crafted, "select * from report_file_coupling") == [
        ("p1", "f2", "src/lexer.py", "f1", "src/parser.py", 1, 2, 1, 66.67)]


@pytest.mark.parametrize("changed,kept", [(30, True), (31, False)])
def test_a_session_that_changed_more_than_30_files_couples_none_of_them(crafted, changed, kept):
    # code-maat's --max-changeset-size: s4 edits f1, f2 and more files of p1; it counts only up to 30 files
    extra = [(f"x{i}", f"src/gen/file{i:02d}.py") for i in range(changed - 2)]
    crafted.executemany("insert into int_session_files values ('s4', ?, 'p1', ?, true)",
                        [("f1", "src/parser.py"), ("f2", "src/lexer.py"), *extra])
    crafted.executemany("insert into fct_file_touches (session_id, file_id, action, n_touches) "
                        "values ('s4', ?, 'edit', 1)",
                        [["f1"], ["f2"], *[[f] for f, _ in extra]])
    crafted.execute("insert into dim_sessions (session_id, project_id, root_path) values ('s4', 'p1', '/r/compiler')")
    run_models(crafted)
    f1_f2 = q(crafted, "select shared_sessions, n_sessions_a, n_sessions_b from report_file_coupling "
                       "where file_id_a = 'f2' and file_id_b = 'f1'")
    n_pairs = q(crafted, "select count(*) from report_file_coupling")[0][0]
    if kept:  # s4 shares f1 and f2 with s1, and couples its 30 files pairwise
        assert f1_f2 == [(2, 3, 2)] and n_pairs == 30 * 29 // 2
    else:  # left out: as without s4
        assert f1_f2 == [(1, 2, 1)] and n_pairs == 1


def test_topics_are_code_aware_and_tf_idf_weighted(crafted):
    # "parser": title 2 + prompt 2x1 + checkpoint title 2 + overview 1 = 7, in 1 of 3 sessions: 7 * ln(4)
    assert q(crafted, "select project_id, term, weight, rank, n_sessions from report_topics "
                      "where rank <= 4 order by project_id, rank") == [
        ("p1", "parser", 9.7041, 1, 1), ("p1", "rewrite", 6.9315, 2, 1), ("p1", "parser rewrite", 5.5452, 3, 1),
        ("p1", "lexer", 3.6652, 4, 2),
        ("p2", "docs", 4.1589, 1, 1), ("p2", "docs site", 4.1589, 2, 1), ("p2", "site", 4.1589, 3, 1),
        ("p2", "index", 1.3863, 4, 1),
    ]
    # camelCase split ("lexerTokens"), stopwords ("the", "fix", "now") and 1-2 letter words dropped
    terms = {r[0] for r in q(crafted, "select term from report_topics")}
    assert {"lexer tokens", "tokens"} <= terms and not terms & {"the", "fix", "now", "py", "in"}


def test_topic_trends(crafted):
    assert q(crafted, "select * from report_topic_trends where term in ('lexer', 'docs') order by all") == [
        ("p1", "lexer", __import__("datetime").date(2026, 1, 1), 2, 3.6652),
        ("p2", "docs", __import__("datetime").date(2026, 2, 1), 1, 4.1589),
    ]


def test_session_stats_tool_and_model_usage(crafted):
    assert q(crafted, "select session_id, failure_rate, n_files, n_files_changed, n_checkpoints, input_tokens, "
                      "output_tokens from report_session_stats order by 1") == [
        ("s1", 0.3333, 3, 2, 1, 1000, 100), ("s2", 0.0, 2, 1, 0, 500, 50), ("s3", None, 1, 1, 0, 800, 80)]
    assert q(crafted, "select * from report_tool_usage order by all") == [
        ("p1", "bash", "shell", 1, 1, 1, 1.0, 500.0), ("p1", "edit", "edit", 3, 2, 0, 0.0, 2000.0)]
    assert q(crafted, "select month::varchar, model, n_sessions, requests, input_tokens, output_tokens, "
                      "cache_read_tokens, ai_credits::varchar, n_legs_unknown_input, n_legs_unknown_cost "
                      "from report_model_usage order by all") == [
        ("2026-01-01", "m1", 2, 4, 1500, 150, 10, "3.500000000", 0, 0),
        ("2026-02-01", "m2", 1, 2, None, 80, None, None, 1, 1)]
    # a session's cost is known only when every model's is
    assert q(crafted, "select session_id, requests, ai_credits::varchar, cost_source from report_session_stats "
                      "order by 1") == [("s1", 3, "2.500000000", "logged"), ("s2", 1, "1.000000000", "estimated"),
                                        ("s3", 2, None, "unknown")]


def test_usage_reports_add_up_the_legs(crafted):
    # dated by the leg's last request; a sum leaves out the legs that do not know the figure and says so
    assert q(crafted, "select day::varchar, project_id, model, n_sessions, requests, input_tokens, output_tokens, "
                      "ai_credits::varchar, cost_usd::varchar, n_legs_unknown_input, n_legs_unknown_cost, "
                      "n_legs_estimated_cost from report_usage_daily order by all") == [
        ("2026-01-05", "p1", "m1", 1, 3, 1000, 100, "2.500000000", "0.02500000000", 0, 0, 0),
        ("2026-01-20", "p1", "m1", 1, 1, 500, 50, "1.000000000", "0.01000000000", 0, 0, 1),
        ("2026-02-02", "p2", "m2", 1, 2, None, 80, None, None, 1, 1, 0)]
    assert q(crafted, "select week::varchar, project_id, n_sessions, requests, ai_credits::varchar "
                      "from report_usage_weekly order by all") == [
        ("2026-01-05", "p1", 1, 3, "2.500000000"), ("2026-01-19", "p1", 1, 1, "1.000000000"),
        ("2026-02-02", "p2", 1, 2, None)]
    assert q(crafted, "select month::varchar, project_id, n_sessions, requests, input_tokens, ai_credits::varchar, "
                      "n_legs_estimated_cost from report_usage_monthly order by all") == [
        ("2026-01-01", "p1", 2, 4, 1500, "3.500000000", 1), ("2026-02-01", "p2", 1, 2, None, None, 0)]


def test_activity_daily_and_weekly(crafted):
    assert q(crafted, "select day::varchar, n_sessions, n_turns, n_tool_calls, n_failed_tool_calls "
                      "from report_activity_daily order by 1") == [
        ("2026-01-05", 1, 2, 3, 1), ("2026-01-20", 1, 1, 1, 0), ("2026-02-02", 1, 1, 0, 0)]
    assert q(crafted, "select week::varchar, n_sessions, n_turns, n_tool_calls, n_failed_tool_calls, n_active_days "
                      "from report_activity_weekly order by 1") == [
        ("2026-01-05", 1, 2, 3, 1, 1), ("2026-01-19", 1, 1, 1, 0, 1), ("2026-02-02", 1, 1, 0, 0, 1)]


def test_search_is_bm25_over_every_kind_of_text(crafted):
    assert q(crafted, "select doc_id, kind, n_terms from int_search_docs order by 1") == [
        ("answer:s1:0", "answer", 1), ("answer:s2:0", "answer", 3), ("answer:s3:0", "answer", 1),
        ("checkpoint:s1:1", "checkpoint", 10), ("memory:mem1", "memory", 7), ("prompt:s1:0", "prompt", 6),
        ("prompt:s1:1", "prompt", 4), ("prompt:s2:0", "prompt", 6), ("prompt:s3:0", "prompt", 5)]
    # the lengths come from the term counts (the text is tokenized once): the same as tokenizing again
    assert q(crafted, "select count(*) from int_search_docs where n_terms <> len(tokenize(text))") == [(0,)]
    assert q(crafted, "select score, kind, session_id, ref from search('lexer tokens')") == [
        (3.1572, "prompt", "s1", "1"), (1.2383, "answer", "s2", "0"), (0.9504, "prompt", "s2", "0")]
    assert q(crafted, "select kind, ref from search('mkdocs', k := 1)") == [("memory", "docs/plan.md")]
    assert q(crafted, "select count(*) from search('nothing matches this')") == [(0,)]


def test_the_sample_corpus_plants_are_found(sample_home, tmp_path, capsys):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    assert rows(wh, "select p.name, r.path from report_file_importance r join dim_projects p using (project_id) "
                    "where r.rank = 1 order by 1") == [
        ("acme-api", "src/auth/token_service.py"), ("webapp", "src/components/CartView.tsx")]
    top3 = rows(wh, "select p.name, list(r.term order by r.rank) from report_topics r "
                    "join dim_projects p using (project_id) where r.rank <= 3 and p.name != '(no project)' "
                    "group by 1 order by 1")
    assert "token refresh" in top3[0][1] and "cart checkout" in top3[1][1]
    # the search() macro lives in the warehouse: a plain DuckDB connection can call it
    con = duckdb.connect(str(wh), read_only=True)
    try:
        hits = con.sql("select kind, text from search('revocation design', k := 1)").fetchall()
    finally:
        con.close()
    assert hits[0][0] == "memory" and "redis" in hits[0][1]
    assert main(["search", "revocation design", "--warehouse", str(wh), "--limit", "1",
                 "--format", "csv"]) == 0
    assert "Revocation design" in capsys.readouterr().out
    assert main(["search", "qqqzzz", "--warehouse", str(wh)]) == 1


def test_models_verb_rebuilds_after_a_sql_change(sample_home, tmp_path, capsys):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    assert main(["models", "--warehouse", str(wh)]) == 0
    assert f"{len(MODELS)} tables rebuilt, checks passed" in capsys.readouterr().out


def test_topic_terms_per_source(crafted):
    # s2's title "Fix lexer" is a real title, not its prompt cut short: it counts, with weight 2
    assert q(crafted, "select source, term, n, weight from int_topic_terms where session_id = 's2' "
                      "order by source, term") == [
        ("prompt", "bug", 1, 1.0), ("prompt", "lexer", 1, 1.0), ("prompt", "lexer bug", 1, 1.0),
        ("prompt", "tokenizer", 1, 1.0), ("title", "lexer", 1, 2.0)]
    assert q(crafted, "select count(*) from int_stopwords where term in ('the', 'fix', 'file', 'py')") == [(4,)]
    assert q(crafted, "select term, tf from int_search_terms where doc_id = 'prompt:s1:1' order by 1") == [
        ("lexer", 1), ("now", 1), ("the", 1), ("tokens", 1)]


def test_a_build_logs_its_time_and_its_slowest_models(tmp_path, caplog):
    import re

    from pipeline.models import SLOWEST

    con = crafted_warehouse(tmp_path / "c.duckdb")
    with caplog.at_level("INFO", logger="pipeline.models"):
        built = run_models(con)
    con.close()
    line = next(r.getMessage() for r in caplog.records if "models built" in r.getMessage())
    m = re.fullmatch(rf"{len(built)} models built \(full\) in (\d+\.\d\d)s; slowest: (.+)", line)
    assert m, line
    named = [re.fullmatch(r"(\w+) (\d+\.\d\d)s", part).groups() for part in m.group(2).split(", ")]
    assert len(named) == SLOWEST and {n for n, _ in named} <= set(built)
    secs = [float(s) for _, s in named]
    assert secs == sorted(secs, reverse=True) and sum(secs) <= float(m.group(1)) + 0.01 * SLOWEST


def test_a_scope_of_few_keys_is_listed_in_the_sql_and_of_many_read_from_its_table():
    """The scope of an incremental build is written into the SQL as literals while it is small (DuckDB skips the
    files and row groups outside a list, not outside a subquery), quotes doubled; a large scope, or one holding a
    character that is not printable, is read from its table."""
    import pipeline.models as models_module
    from pipeline.warehouse import key_table

    con = duckdb.connect()
    key_table(con, "_few", ["s2", "it's", "s1"])
    assert models_module._keys(con, "_few") == "('it''s', 's1', 's2')"
    assert con.execute("select count(*) from (select 'it''s' as k) where k in ('it''s', 's1', 's2')").fetchone() == (1,)
    key_table(con, "_many", [f"s{i}" for i in range(models_module.INLINE_KEYS + 1)])
    assert models_module._keys(con, "_many") == '(select key from "_many")'
    key_table(con, "_odd", ["s1", "a\nb"])
    assert models_module._keys(con, "_odd") == '(select key from "_odd")'
    key_table(con, "_none", [])
    assert models_module._keys(con, "_none") == '(select key from "_none")'
    con.close()


def test_an_incremental_build_leaves_a_model_that_reads_no_table_as_the_whole_build_made_it(sample_home, tmp_path):
    """int_stopwords is a constant list: an incremental build does not make it again (a whole build does)."""
    from pipeline.models import load_models

    assert [m.name for m in load_models() if m.layer != "macros" and not m.reads] == ["int_stopwords"]
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    n = rows(wh, "select count(*) from int_stopwords")[0][0]
    con = duckdb.connect(str(wh))
    con.execute("delete from int_stopwords where term = 'the'")
    sessions = [r[0] for r in con.execute("select session_id from dim_sessions order by 1 limit 1").fetchall()]
    run_models(con, sessions)
    assert con.execute("select count(*) from int_stopwords").fetchone() == (n - 1,)
    run_models(con)
    assert con.execute("select count(*) from int_stopwords").fetchone() == (n,)
    con.close()


def test_a_session_grown_by_a_prompt_retokenizes_that_prompt_alone(sample_home, tmp_path, monkeypatch):
    """int_search_terms is incremental by document: an ingest rebuilds the terms of the documents whose
    int_search_docs row it changed - one new prompt here - and the index is the one a fresh ingest builds."""
    import json

    from pipeline import models
    from tools.compare import differences

    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    log = max(sample_home.glob("session-state/*/events.jsonl"), key=lambda p: p.stat().st_size)
    sid = log.parent.name
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "user.message", "data": {"content": "retokenize nothing else, please"},
                             "id": "grown-prompt", "timestamp": "2026-11-01T00:00:00.000Z"}) + "\n")
    scoped = []
    real = models._changed_docs

    def seen(con, keys):
        out = real(con, keys)
        scoped.append(sorted(r[0] for r in con.execute(f'select key from "{models.SCOPES["doc_id"]}"').fetchall()))
        return out
    monkeypatch.setattr(models, "_changed_docs", seen)
    ingest(wh, [sample_home])
    n_turns = rows(wh, "select count(*) from fct_turns where session_id = ?", [sid])[0][0]
    assert scoped == [[f"prompt:{sid}:{n_turns - 1}"]]
    assert rows(wh, "select count(*) from int_search_terms where doc_id = ? and term = 'retokenize'",
                [f"prompt:{sid}:{n_turns - 1}"]) == [(1,)]
    ingest(tmp_path / "fresh.duckdb", [sample_home])
    assert differences(wh, tmp_path / "fresh.duckdb") == []


def test_topic_months_are_rebuilt_for_the_project_months_of_the_changed_sessions(sample_home, tmp_path, monkeypatch):
    """int_topic_project_months is incremental by project and month: a session grown by a prompt rebuilds its
    project's rows of the month it started in, not the project's other months; a session whose start moves to
    another month rebuilds both months (where it started before and now). Every table as a fresh ingest has it."""
    import json

    from pipeline import models
    from tools.compare import differences

    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    months = "strftime(timezone('UTC', started_at), '%Y-%m')"
    # a log of a project that has sessions in another month too
    log, project, month = next(
        (p, *found[0]) for p in sorted(sample_home.glob("session-state/*/events.jsonl"))
        if (found := rows(wh, f"select project_id, {months} from dim_sessions s where session_id = ? and exists ("
                              f"select 1 from dim_sessions o where o.project_id = s.project_id and "
                              f"strftime(timezone('UTC', o.started_at), '%Y-%m') <> "
                              f"strftime(timezone('UTC', s.started_at), '%Y-%m'))", [p.parent.name])))
    other = rows(wh, "select distinct month from int_topic_project_months where project_id = ? "
                     "and strftime(month, '%Y-%m') <> ?", [project, month])
    assert other  # the project's other months have topic rows, which the runs below leave alone
    monkeypatch.setattr(models, "WHOLE_SHARE", 2)  # the sample's months hold most of its few sessions
    scopes = []
    build = models._build

    def recorded(con, model, keys, *args, **kwargs):
        if model.name == "int_topic_project_months" and keys:
            scopes.append(keys[models.SCOPES["project_month"]])
        return build(con, model, keys, *args, **kwargs)
    monkeypatch.setattr(models, "_build", recorded)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "user.message", "data": {"content": "monthly topics stay put"},
                             "id": "grown-month", "timestamp": f"{month}-20T00:00:00.000Z"}) + "\n")
    ingest(wh, [sample_home])
    assert scopes == [f"('{project}/{month}')"]
    ingest(tmp_path / "fresh.duckdb", [sample_home])
    assert differences(wh, tmp_path / "fresh.duckdb") == []

    scopes.clear()  # the session's every time a month earlier, edited in place: it started a month earlier too
    year, mon = map(int, month.split("-"))
    earlier = f"{year - (mon == 1)}-{(mon - 2) % 12 + 1:02d}"
    log.write_text(log.read_text(encoding="utf-8").replace(f'"{month}-', f'"{earlier}-'), encoding="utf-8")
    ingest(wh, [sample_home])
    assert rows(wh, f"select {months} from dim_sessions where session_id = ?", [log.parent.name]) == [(earlier,)]
    assert scopes == [f"('{project}/{earlier}', '{project}/{month}')"]
    ingest(tmp_path / "fresh2.duckdb", [sample_home])
    assert differences(wh, tmp_path / "fresh2.duckdb") == []


def test_a_model_whose_inputs_did_not_move_is_left_as_it_was(sample_home, tmp_path, monkeypatch):
    """A session that only ended (a session.shutdown appended) changes its dim_sessions row, not its prompts or
    files: the models that read neither - topics, file importance and coupling, files - are left as they were, and
    the per-session ones it feeds record that their rows did not change. A prompt that names one of the session's
    files then rebuilds file importance (its mentions moved). Each time every table is a fresh ingest's."""
    import json

    from pipeline import models
    from tools.compare import differences

    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    log = max(sample_home.glob("session-state/*/events.jsonl"), key=lambda p: p.stat().st_size)
    sid = log.parent.name
    path = rows(wh, "select f.path from report_file_importance f join dim_sessions s using (project_id) "
                    "where s.session_id = ? order by f.rank limit 1", [sid])[0][0]
    built = []
    build = models._build

    def recorded(con, model, *args, **kwargs):
        if model.layer != "macros":
            built.append(model.name)
        return build(con, model, *args, **kwargs)
    monkeypatch.setattr(models, "_build", recorded)
    last = rows(wh, "select max(ts) from stg_events where session_id = ?", [sid])[0][0]
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "session.shutdown", "data": {"shutdownType": "routine"}, "id": "ended",
                             "timestamp": last}) + "\n")
    ingest(wh, [sample_home])
    assert "dim_sessions" not in built and "int_topic_terms" in built and "int_mention_words" in built
    left = {"int_topic_project_months", "int_topic_project_terms", "int_topic_idf", "report_topics",
            "report_topic_trends", "dim_files", "report_file_coupling", "report_file_importance",
            "report_session_files", "int_search_terms"}
    assert left.isdisjoint(built), left & set(built)
    ingest(tmp_path / "fresh.duckdb", [sample_home])
    assert differences(wh, tmp_path / "fresh.duckdb") == []

    built.clear()
    name = path.rsplit("/", 1)[-1]
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "user.message", "data": {"content": f"one more look at {name} please"},
                             "id": "mention", "timestamp": last}) + "\n")
    ingest(wh, [sample_home])
    assert {"report_file_importance", "int_topic_project_months", "int_search_terms"} <= set(built)
    assert "report_file_coupling" not in built  # no file was touched
    ingest(tmp_path / "fresh2.duckdb", [sample_home])
    assert differences(wh, tmp_path / "fresh2.duckdb") == []
