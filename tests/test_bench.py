"""The benchmark harness itself (not its timings): a tiny corpus, every step runs and reports."""

import json
import shutil

from tools import bench


def test_bench_generates_a_corpus_and_runs_every_step(tmp_path, capsys):
    corpus = bench.generate(tmp_path / "corpus", 1)
    meta = json.loads((corpus / "corpus.json").read_text())
    logs = list((corpus / "copilot-home" / "session-state").glob("*/events.jsonl"))
    assert len(logs) == meta["sessions"] >= 3
    assert sum(p.stat().st_size for p in logs) >= 1024 * 1024
    assert (corpus / "copilot-home" / "session-store.db").is_file()
    assert list((corpus / "vscode-user").rglob("*.json"))
    sizes = {p: p.stat().st_size for p in logs}
    rows = bench.bench(corpus, tmp_path / "run", rounds=2)
    assert [r["step"][:3] for r in rows] == ["(a)", "(b)", "(c)", "(d)", "(e)", "(f)"]
    assert all(r["ok"] and r["seconds"] > 0 and r["rss_mb"] > 0 and r["cpu_s"] > 0 for r in rows)
    assert all(len(r["rounds"]) == 2 for r in rows)
    assert {p: p.stat().st_size for p in logs} == sizes  # the grown logs were cut back
    # each round's report was a whole one, into a new folder: the second wrote as many pages as the first
    assert (tmp_path / "run" / "report" / "site" / "index.html").is_file()
    bench.print_table(1, rows)
    out = capsys.readouterr().out
    assert "full <= 3x floor" in out and "full/floor" in out
    assert "| events, " in bench.markdown({("events", 1): rows})
    assert bench.verdict(rows)["full/floor in CPU time"].endswith(("x met", "x MISSED"))


def test_each_figure_is_the_median_of_the_rounds_and_each_ratio_of_the_rounds_own():
    # round 2 ran on a slow machine: everything took twice as long, so its ratios are round 1's; round 3's
    # full ingest alone was slow. Each ratio is the median of the rounds' own ratios, not a ratio of medians
    def round_(floor, full, cpu_full=20.0):
        names = ["(a) floor", "(b) naive", "(c) full", "(d) no-op", "(e) grown", "(f) report"]
        secs = [floor, 2 * floor, full, 0.02 * full, 0.1 * full, 0.5 * full]
        cpus = [2.0, 2.0, cpu_full, 0.1, 1.0, 5.0]
        return [{"step": n, "seconds": s, "cpu_s": c, "rss_mb": 100 + i, "ok": True}
                for i, (n, s, c) in enumerate(zip(names, secs, cpus, strict=True))]
    rounds = [round_(4, 20), round_(8, 40), round_(4, 40, cpu_full=40.0)]
    rounds[1][5]["rss_mb"] = 900
    rows = bench.combine(rounds, logs_mb=100)
    full = rows[2]
    assert full["seconds"] == 40 and full["rounds"] == [20, 40, 40]
    assert full["x_floor"] == 5.0  # the rounds' 5x, 5x and 10x
    assert full["x_naive"] == 2.5 and full["x_floor_cpu"] == 10.0  # CPU: 10x, 10x, 20x
    assert rows[4]["x_full"] == 0.1 and rows[5]["rss_mb"] == 900 and rows[0]["rss_mb"] == 100
    v = bench.verdict(rows)
    assert v["full/floor"] == "5.00x MISSED" and v["grown/full"] == "10.0% MISSED" and v["no-op/full"] == "2.0% met"
    assert v["full/floor in CPU time"] == "10.00x MISSED" and v["peak RSS"] == "900 MB met"
    rounds[2][2]["ok"] = False  # a step that failed in any round failed
    assert not bench.combine(rounds, logs_mb=100)[2]["ok"]
    assert "median of 3 rounds" in bench.markdown({("events", 100): rows})


def test_the_lift_takes_what_the_warehouse_stores_of_each_event(tmp_path, capsys):
    # tools.lift_floor's query is a lower bound of a DuckDB-first reader only if it lifts what the readers keep:
    # one row per event, and each tool output's length and MD5 as stg_events holds them
    import duckdb

    from pipeline.ingest import ingest
    from tools import lift_floor

    corpus = bench.generate(tmp_path / "corpus", 1)
    logs = str(corpus / "copilot-home" / "session-state" / "*" / "events.jsonl")
    n, _content, _args, _extra, chars, n_md5, _head, _whole = duckdb.sql(
        lift_floor.LIFT_SQL.replace("?", "'" + logs + "'")).fetchone()
    wh = tmp_path / "w.duckdb"
    ingest(wh, [corpus / "copilot-home"])
    with duckdb.connect(str(wh), read_only=True) as con:
        stored = con.execute("select count(*), sum(result_chars), count(result_md5) from stg_events "
                             "where source_kind = 'events'").fetchone()
    assert (n, chars, n_md5) == stored and n > 100 and n_md5 > 10
    assert lift_floor.main([str(corpus), "--rounds", "1"]) == 0
    assert "lift / floor: " in capsys.readouterr().out


def test_the_lift_parses_each_line_as_it_is_not_as_a_guessed_type(tmp_path):
    # read_json guesses a type from the first 20,480 lines and converts each line to it: a key first met past them
    # failed the whole query (`onelog`'s session.shutdown), and every line was parsed, then written back as JSON
    # for each extraction (2.8x the floor where reading each line as JSON is 1.0-1.7x)
    import duckdb

    from tools import lift_floor

    log = tmp_path / "s" / "events.jsonl"
    log.parent.mkdir()
    lines = [json.dumps({"type": "user.message", "data": {"content": f"hi {i}"}}) for i in range(21_000)]
    lines.append(json.dumps({"type": "session.shutdown", "data": {"shutdownType": "routine", "content": "bye"}}))
    log.write_text("\n".join(lines) + "\n")
    n, content_chars, *_ = duckdb.sql(lift_floor.LIFT_SQL.replace("?", f"'{log}'")).fetchone()
    assert n == 21_001 and content_chars == sum(len(f"hi {i}") for i in range(21_000)) + len("bye")


def test_a_steps_cpu_time_counts_the_processes_it_started():
    # the ingest reads on worker processes: their CPU time is the step's too. The child burns 0.3 s
    # of CPU (process time, not wall time), its parent next to none
    import sys

    child = "import time\nwhile time.process_time() < 0.3: pass"
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}], check=True)"
    seconds, rss, cpu, code = bench.run([sys.executable, "-c", parent])
    assert code == 0 and cpu >= 0.3 and rss > 0


def test_a_target_whose_step_failed_is_not_measured():
    # a failed step took the seconds and memory of its failure: no target is read from it
    names = ["(a) floor", "(b) naive", "(c) full ingest", "(d) no-op", "(e) grown", "(f) report"]
    rows = [{"step": n, "ok": True, "seconds": s, "rss_mb": 100, "x_floor": s / 4, "x_naive": s / 5,
             "logs_mb": 1, "mb_per_s": 1 / s}
            for n, s in zip(names, [4, 5, 0.2, 0.2, 0.2, 30], strict=True)]
    rows[2]["ok"] = False
    v = bench.verdict(rows)
    assert v["full/floor"].endswith("not measured: (c) failed") and "met" not in v["full/floor"]
    assert all("not measured" in v[k] for k in ("peak RSS", "no-op/full", "grown/full", "report/full"))
    assert "(c) full ingest (FAILED)" in bench.markdown({("events", 1): rows})
    assert v["full/floor in CPU time"] == "not measured"  # rows of a bench that did not measure CPU time
    rows[2].update(ok=True, seconds=40, x_floor=10)
    rows[0]["cpu_s"], rows[2]["cpu_s"] = 8.0, 60.0
    v = bench.verdict(rows)
    assert v["full/floor in CPU time"] == "7.50x MISSED"
    assert v["full/floor"] == "10.00x MISSED" and v["report/full"] == "0.75x met" and v["peak RSS"] == "100 MB met"
    # the targets: 3x the floor's wall time, 4x its CPU time, a no-op within 3%
    rows[2].update(seconds=11, x_floor=2.75, cpu_s=30.0)
    rows[3]["seconds"] = 0.35
    v = bench.verdict(rows)
    assert v["full/floor"] == "2.75x met" and v["full/floor in CPU time"] == "3.75x met"
    assert v["no-op/full"] == "3.2% MISSED"


def test_the_real_samples_step_ingests_every_home_and_user_folder(tmp_path):
    """The small-home target is measured on real samples: every copilot-home and vscode-user* folder of the
    samples' root is named, and the median of the full ingests and the largest peak RSS are read."""
    from .conftest import REPO

    root = tmp_path / "samples"
    shutil.copytree(REPO / "data" / "sample" / "copilot-home", root / "a" / "copilot-home")
    shutil.copytree(REPO / "data" / "sample" / "vscode-user", root / "b" / "vscode-user-oss")
    (root / "c" / "notes").mkdir(parents=True)
    assert bench.real_sources(root) == ["--copilot-home", str(root / "a" / "copilot-home"),
                                        "--vscode-user", str(root / "b" / "vscode-user-oss")]
    real = bench.bench_real(tmp_path / "run", root, runs=1)
    assert real["ok"] and real["seconds"] > 0 and real["rss_mb"] > 0 and real["noop_seconds"] > 0
    assert real["mb"] > 0 and "real samples (" in bench.markdown({}, real)
    assert bench.bench_real(tmp_path / "none", tmp_path / "absent") is None


def test_the_one_log_and_the_many_calls_shapes_are_one_session_each(tmp_path, monkeypatch):
    # make bench's shapes for memory bounded by a record: one large log, one session of many tool calls
    monkeypatch.setattr(bench, "ONELOG_MB", 1)
    monkeypatch.setattr(bench, "CALLS", 300)
    for shape in ("onelog", "calls"):
        corpus = bench.generate(tmp_path / shape, 0, shape=shape)
        logs = list((corpus / "copilot-home" / "session-state").glob("*/events.jsonl"))
        assert len(logs) == 1
        lines = logs[0].read_text().splitlines()
        if shape == "calls":
            assert sum('"tool.execution_complete"' in line for line in lines) == 300
        else:
            assert logs[0].stat().st_size >= 1024 * 1024
        rows = bench.bench(corpus, tmp_path / f"run-{shape}", rounds=1)
        assert all(r["ok"] for r in rows)
        assert bench.label(shape, rows).startswith(shape)


def test_the_lake_bench_grows_a_lake_and_times_every_command(tmp_path):
    # two sizes of a tiny lake on a local catalog: every step runs and succeeds, the lake holds each
    # machine's sessions under their own ids, the replicated texts are each machine's own, and the
    # concurrent pushes all land
    from pipeline import lake
    from tools import lake_bench

    result = lake_bench.bench([2, 4], "sqlite", 1, 2, 2, tmp_path / "lake")
    steps = [(r["machines"], r["step"]) for r in result["rows"]]
    assert (4, "query --lake: report_usage_monthly") in steps and (2, "report --lake") in steps
    assert (2, "report --lake after a one-session push") in steps
    assert (4, "lake-refresh (the models built whole)") in steps
    assert (4, "report --lake") not in steps  # --report-max 2
    assert all(r["ok"] for r in result["rows"]), [r for r in result["rows"] if not r["ok"]]
    assert result["rows"][-1]["succeeded"] == 2
    per_machine = result["sessions_per_machine"]
    # and, pushed at 2 machines, the probe's one session and the one pushed before the second report
    assert result["facts"][4]["sessions"] == 4 * per_machine + 2
    con = lake._connect()
    lake.attach(con, str(tmp_path / "lake" / "lake.sqlite"), read_only=True)
    sessions = con.execute("select machine_id, count(distinct session_id) from lake.dim_sessions "
                           "where machine_id like 'm%' group by 1").fetchall()
    assert len(sessions) == 4 and {n for _m, n in sessions} == {per_machine}
    assert con.execute("select count(*) from lake.dim_sessions where machine_id = 'm00001' and "
                       "not starts_with(title, 'm00001 ')").fetchone() == (0,)
    # the models in the lake follow its latest push: the concurrent pushes' refreshes included
    assert con.execute("select count(distinct session_id) from lake.lake_sessions").fetchone()[0] == \
        con.execute(f"select count(*) from lake.{lake.models_schema()}.report_session_stats").fetchone()[0]
    con.close()
    assert "| 4 |" in lake_bench.markdown(result)


def test_the_grown_event_comes_a_second_after_the_last_one(tmp_path):
    """bench.grow appends its prompt after the log's last event, as Copilot appends (one dated before the session
    started moved the session to another month); a log whose end names no time gets the fixed date."""
    home = tmp_path / "home"
    log = home / "session-state" / "s1" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"type": "session.start", "data": {}, "timestamp": "2029-12-31T23:59:59.500Z"}\n'
                   '{"type": "assistant.message", "data": {"content": "x"}, "timestamp": "2029-12-31T23:59:59.900Z"}\n')
    other = home / "session-state" / "s2" / "events.jsonl"
    other.parent.mkdir(parents=True)
    other.write_text('{"type": "session.start", "data": {}}\n')
    undo = bench.grow(home, fraction=1.0)
    assert sorted(p.name for p, _ in undo) == ["events.jsonl", "events.jsonl"]
    assert json.loads(log.read_text().splitlines()[-1])["timestamp"] == "2030-01-01T00:00:00.000Z"
    assert json.loads(other.read_text().splitlines()[-1])["timestamp"] == "2027-01-01T00:00:00.000Z"


def test_the_star_in_sql_builds_the_stars_tool_calls_and_turns(tmp_path, capsys):
    # tools.star_sql's timing compares like with like only if its SQL builds the rows the star builds: on the
    # bench's CLI logs, every tool call and turn the same, and a changed row is found
    import duckdb

    from pipeline.ingest import ingest
    from tools import star_sql

    corpus = bench.generate(tmp_path / "corpus", 1)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [corpus / "copilot-home"], [corpus / "vscode-user"])
    assert star_sql.main([str(wh), "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "fct_tool_calls: 0 rows of the SQL core not in the star, 0 of the star not in the SQL core" in out
    assert "fct_turns: 0 rows" in out and "SQL / polars" in out
    with duckdb.connect(str(wh)) as con:
        n_calls, n_turns = con.execute("select (select count(*) from fct_tool_calls), (select count(*) from fct_turns)"
                                       ).fetchone()
        assert n_calls > 100 and n_turns > 10
        con.execute("update fct_tool_calls set duration_ms = duration_ms + 1 where tool_call_id = "
                    "(select min(tool_call_id) from fct_tool_calls)")
    assert star_sql.main([str(wh), "--rounds", "0"]) == 1
    assert "fct_tool_calls: 1 rows of the SQL core not in the star, 1 of the star" in capsys.readouterr().out


def test_the_star_in_sql_says_what_it_cannot_read(tmp_path, capsys):
    from tools import star_sql

    assert star_sql.main([str(tmp_path / "none.duckdb")]) == 2
    assert "no such warehouse" in capsys.readouterr().err
    (tmp_path / "bad.duckdb").write_bytes(b"not a database")
    assert star_sql.main([str(tmp_path / "bad.duckdb")]) == 2
    err = capsys.readouterr().err
    assert "bad.duckdb" in err and "Traceback" not in err
