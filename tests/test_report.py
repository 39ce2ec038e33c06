"""make report: parquet a BI tool can load, and the wiki (golden files, determinism, escaping)."""

import json
import os
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest

from pipeline.ingest import ingest
from pipeline.report import export_parquet
from pipeline.wiki import write_wiki
from pipeline.wiki.markdown import cell, code, fenced

from .conftest import REPO, rows

GOLDEN = REPO / "tests" / "golden" / "wiki"


def test_parquet_loads_in_a_fresh_duckdb_and_in_polars_with_types(sample_home, tmp_path):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    written = export_parquet(wh, tmp_path / "parquet").written
    names = sorted(p.stem for p in written)
    assert names == sorted(r[0] for r in rows(wh, "select table_name from information_schema.tables where "
                                                  "regexp_matches(table_name, '^(dim|fct|report)_')"))
    fresh = duckdb.connect()
    for p in written:
        n_wh = rows(wh, f'select count(*) from "{p.stem}"')[0][0]
        assert fresh.sql(f"select count(*) from '{p}'").fetchall()[0][0] == n_wh
        assert pl.read_parquet(p).height == n_wh
    described = fresh.sql(f"describe select * from '{tmp_path / 'parquet' / 'dim_sessions.parquet'}'").fetchall()
    types = {r[0]: r[1] for r in described}
    assert (types["started_at"], types["n_turns"], types["sources"], types["is_gone"]) == (
        "TIMESTAMP WITH TIME ZONE", "INTEGER", "VARCHAR[]", "BOOLEAN")
    schema = pl.read_parquet_schema(tmp_path / "parquet" / "report_activity_daily.parquet")
    assert schema["day"] == pl.Date and schema["n_turns"] == pl.Int32
    # timestamps are UTC-adjusted: pandas, polars and BI tools read them as UTC, not as local time
    sessions = tmp_path / "parquet" / "dim_sessions.parquet"
    assert pl.read_parquet_schema(sessions)["started_at"] == pl.Datetime("us", "UTC")
    adjusted = fresh.sql(f"select distinct logical_type from parquet_schema('{sessions}') "
                         "where name in ('started_at', 'ended_at')").fetchall()
    assert len(adjusted) == 1 and "isAdjustedToUTC=1" in adjusted[0][0]
    # sorted by key, zstd-compressed
    assert pl.read_parquet(tmp_path / "parquet" / "fct_turns.parquet").select("session_id", "turn_index").rows() == \
        sorted(rows(wh, "select session_id, turn_index from fct_turns"))
    turns = tmp_path / "parquet" / "fct_turns.parquet"
    meta = fresh.sql(f"select distinct compression from parquet_metadata('{turns}')")
    assert meta.fetchall() == [("ZSTD",)]


def _wiki(tmp_path, sample_home):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    return wh, write_wiki(wh, tmp_path / "wiki")


def test_wiki_matches_the_golden_files(sample_home, tmp_path):
    _wh, result = _wiki(tmp_path, sample_home)
    out = tmp_path / "wiki"
    pages = sorted(str(p.relative_to(out)) for p in out.rglob("*.md") if p.name != "runs.md")
    if os.environ.get("UPDATE_GOLDEN"):
        shutil.rmtree(GOLDEN, ignore_errors=True)
        for rel in pages:
            (GOLDEN / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out / rel, GOLDEN / rel)
    golden = sorted(str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*.md"))
    assert pages == golden
    for rel in pages:
        assert (out / rel).read_text(encoding="utf-8") == (GOLDEN / rel).read_text(encoding="utf-8"), rel
    charts = sorted(p.name for p in (out / "charts").glob("*.svg"))
    assert charts == ["activity.svg", "files-acme-api-95fa9a.svg", "files-webapp-a3d783.svg", "tools.svg",
                      "topics-acme-api-95fa9a.svg"]
    runs = (out / "runs.md").read_text()
    assert runs.startswith('---\ntitle: "Ingest runs"\ntype: "runs"\nruns: 1\n---\n')
    assert "| workspace.yaml is not valid YAML | 1 |" in runs
    assert "| truncated event glued to the next event | 1 |" in runs


def test_wiki_is_deterministic_and_rewrites_nothing_unchanged(sample_home, tmp_path):
    wh, first = _wiki(tmp_path, sample_home)
    out = tmp_path / "wiki"
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    mtimes = {p: p.stat().st_mtime_ns for p in before}
    again = write_wiki(wh, out)
    assert (len(again.written), len(again.unchanged), len(again.removed)) == (0, len(first.written), 0)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert {p: p.stat().st_mtime_ns for p in before} == mtimes
    # a page an earlier report wrote for a session no longer in the warehouse is removed; a file the
    # report did not write (a user's notes) is never touched
    stale, notes = out / "sessions" / "gone-session.md", out / "sessions" / "my-notes.md"
    stale.write_text("old")
    notes.write_text("mine")
    manifest = json.loads((out / ".manifest.json").read_text())
    (out / ".manifest.json").write_text(json.dumps({"files": [*manifest["files"], "sessions/gone-session.md",
                                                               "../outside.md"]}))
    (tmp_path / "outside.md").write_text("not the wiki's")
    assert write_wiki(wh, out).removed == [stale]
    assert notes.read_text() == "mine" and (tmp_path / "outside.md").exists()


def test_pages_written_by_worker_processes_equal_the_pages_written_here(sample_home, tmp_path, monkeypatch):
    # report hands the parquet export, the search index, the charts and the session pages to worker processes when there
    # are many sessions: the same files, byte for byte (manifests included), as when this process writes
    # them all; and the session pages, read a few sessions at a time, as write_wiki's from one whole read
    from pipeline import report
    from pipeline.site.search import STATE as SEARCH_STATE

    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])

    def tree(out):  # (what each session's and month's pages and the search index were made from is the report's own
        # record: not a page)
        return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*")
                if p.is_file() and p.name not in (report.PAGES_STATE, report.MONTHS_STATE, SEARCH_STATE)}
    _parquet, wiki, site = report.run_report(wh, tmp_path / "here")
    write_wiki(wh, tmp_path / "whole")
    assert tree(tmp_path / "here" / "wiki") == tree(tmp_path / "whole")
    monkeypatch.setattr(report, "PARALLEL_MIN_SESSIONS", 0)
    monkeypatch.setattr(report, "CHUNK_SESSIONS", 3)  # several chunks, finishing in any order
    with report.connect(wh, read_only=True) as con:
        assert len(report.chunks(report.queries.load(con, sessions=False).sessions)) > 2
    made: list = []
    start, pages = report.PageWorkers.__init__, report.PageWorkers.start_pages

    def two(self, con, warehouse, data, workers=None):
        start(self, con, warehouse, data, workers=2)

    def counted(self, n_sessions):
        pages(self, n_sessions)
        made.append((self.pool, self.data_file))
    monkeypatch.setattr(report.PageWorkers, "__init__", two)
    monkeypatch.setattr(report.PageWorkers, "start_pages", counted)
    _parquet, wiki2, site2 = report.run_report(wh, tmp_path / "workers")
    assert made and made[0][0] is not None  # the workers did write them
    assert not Path(made[0][1]).exists()  # the page data they were given: removed when they are done
    assert tree(tmp_path / "here" / "parquet") == tree(tmp_path / "workers" / "parquet")
    for part in ("wiki", "site"):
        here, there = tree(tmp_path / "here" / part), tree(tmp_path / "workers" / part)
        assert here == there and sum(1 for p in here if p.startswith("sessions/")) == len(rows(
            wh, "select session_id from dim_sessions"))
    assert (len(wiki2.written), len(site2.written)) == (len(wiki.written), len(site.written))
    # again with workers: nothing rewritten; a stale session page of an earlier report is removed
    stale = tmp_path / "workers" / "site" / "sessions" / "gone.html"
    stale.write_text("old")
    manifest = tmp_path / "workers" / "site" / ".manifest.json"
    listed = json.loads(manifest.read_text())["files"]
    manifest.write_text(json.dumps({"files": [*listed, "sessions/gone.html"]}))
    _parquet, wiki3, site3 = report.run_report(wh, tmp_path / "workers")
    assert (wiki3.written, site3.written, site3.removed) == ([], [], [stale])
    assert len(site3.unchanged) + len(site3.kept) == len(site.written)
    assert json.loads(manifest.read_text())["files"] == listed


def test_a_long_session_is_paged_and_every_prompt_is_on_one_page(sample_home, tmp_path, monkeypatch):
    # pages of at most 2 prompts, closed before 3 tool calls: report's pages, read a page at a time,
    # equal those built from one whole read; every prompt is on exactly one page, where search links to it
    import re

    from pipeline import report
    from pipeline import site as site_module
    from pipeline.wiki import pages, queries

    monkeypatch.setattr(queries, "PAGE_PROMPTS", 2)
    monkeypatch.setattr(queries, "PAGE_CALLS", 3)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    report.run_report(wh, tmp_path / "out")
    write_wiki(wh, tmp_path / "whole")
    wiki = {p.relative_to(tmp_path / "out" / "wiki").as_posix(): p.read_text()
            for p in (tmp_path / "out" / "wiki").rglob("*.md")}
    assert wiki == {p.relative_to(tmp_path / "whole").as_posix(): p.read_text()
                    for p in (tmp_path / "whole").rglob("*.md")}
    with report.connect(wh, read_only=True) as con:
        data = report.queries.load(con)
    html = {p.relative_to(tmp_path / "out" / "site").as_posix(): p.read_text()
            for p in (tmp_path / "out" / "site" / "sessions").rglob("*.html")}
    assert html == site_module.session_pages(data, data.sessions)
    turns = rows(wh, "select session_id, turn_index, n_tool_calls from fct_turns order by all")
    expected = {}
    for sid, turn, _calls in turns:
        expected.setdefault(sid, []).append(turn)
    paged = 0
    for sid, indexes in expected.items():
        name = pages.page_name(sid)
        site_pages = [p for p in html if p == f"sessions/{name}.html" or p.startswith(f"sessions/{name}/")]
        wiki_pages = [p for p in wiki if p == f"sessions/{name}.md" or p.startswith(f"sessions/{name}/")]
        shown = sorted(int(n) for p in site_pages for n in re.findall(r'id="prompt-(\d+)"', html[p]))
        assert shown == indexes  # each prompt once
        prompts = [re.split(r"^## (?!Prompts)", w.split("## Prompts\n", 1)[1], flags=re.M)[0]
                   for w in (wiki[p] for p in wiki_pages)]
        assert sorted(int(n) - 1 for text in prompts for n in re.findall(r"^### (\d+)\. ", text, re.M)) == indexes
        assert len(site_pages) == len(wiki_pages) == max(1, len(queries.page_ranges(
            [(t, c) for s, t, c in turns if s == sid])))
        paged += len(site_pages) > 1
    assert paged >= 2
    index = "".join(p.read_text() for p in (tmp_path / "out" / "site" / "search").glob("docs-*.js"))
    assert index
    for url in set(re.findall(r'"(sessions/[^"#]+\.html)#prompt-(\d+)"', index)):
        assert f'id="prompt-{url[1]}"' in html[url[0]]


def test_text_from_prompts_cannot_break_a_page(sample_home, tmp_path):
    assert fenced("a ``` b ```` c") == "`````text\na ``` b ```` c\n`````"
    assert cell("a | b <script>x</script> *y* [l](u)\nz") == \
        "a \\| b \\<script\\>x\\</script\\> \\*y\\* \\[l\\](u) z"
    assert code("a|b") == "`a\\|b`" and code("x`y") == "``x`y``"
    folder = sample_home / "session-state" / "evil"
    folder.mkdir()
    (folder / "workspace.yaml").write_text("name: '| broken <b>table</b> ```'\ncwd: /home/dev/evil\n")
    (folder / "events.jsonl").write_text(
        '{"type":"user.message","data":{"content":"```\\n# not a heading\\n<img src=x onerror=alert(1)>"},'
        '"id":"1","timestamp":"2026-10-01T00:00:00Z"}\n')
    wh, _ = _wiki(tmp_path, sample_home)
    page = (tmp_path / "wiki" / "sessions" / "evil.md").read_text()
    assert "# \\| broken \\<b\\>table\\</b\\> \\`\\`\\`\n" in page
    assert "````text\n```\n# not a heading\n<img src=x onerror=alert(1)>\n````" in page
    index = (tmp_path / "wiki" / "index.md").read_text()
    assert "[\\| broken \\<b\\>table\\</b\\> \\`\\`\\`](sessions/evil.md)" in index


def test_charts_are_reused_when_their_data_did_not_change(sample_home, tmp_path, monkeypatch):
    from pipeline import charts
    wh, _ = _wiki(tmp_path, sample_home)

    def no_drawing(*_args):
        raise AssertionError("a chart was drawn again although its data did not change")
    monkeypatch.setattr(charts, "_draw", no_drawing)
    assert write_wiki(wh, tmp_path / "wiki").written == []
    svg = (tmp_path / "wiki" / "charts" / "tools.svg").read_text()
    assert svg.splitlines()[1].startswith("<!-- chart-data: ") and "<text" in svg


def test_report_of_an_empty_warehouse_says_so(tmp_path):
    empty = tmp_path / "home"
    empty.mkdir()
    wh = tmp_path / "w.duckdb"
    ingest(wh, [empty])
    result = write_wiki(wh, tmp_path / "wiki")
    assert sorted(p.name for p in result.written if p.suffix == ".md") == [
        "failures.md", "files.md", "index.md", "runs.md", "sessions.md", "topics.md", "usage.md"]
    assert "No Copilot history in this warehouse yet" in (tmp_path / "wiki" / "index.md").read_text()
    assert len(export_parquet(wh, tmp_path / "parquet").written) == 28


def test_large_tables_written_in_key_ranges_equal_one_copy(sample_home, tmp_path, monkeypatch):
    """A table too large for one sort in DuckDB's memory (a GB of tool outputs) is written range by
    range, through spill files; forced here on every table (two stored against their key's order), the
    files hold the same rows, order and types as one COPY, and nothing else is left in the folder."""
    from pipeline import report

    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    with duckdb.connect(str(wh)) as con:  # stored against the key's order: each range gathers rows from all over
        for name in ("fct_tool_calls", "fct_turns"):
            con.execute(f"create temp table r as select * from {name} order by session_id desc nulls first")
            con.execute(f"delete from {name}")
            con.execute(f"insert into {name} select * from r")
            con.execute("drop table r")
    whole = export_parquet(wh, tmp_path / "whole").written
    monkeypatch.setattr(report, "LARGE_ROWS", 1)
    monkeypatch.setattr(report, "CHUNK_BYTES", 300)
    monkeypatch.setattr(report, "SPILL_BATCH", 200)  # a range's rows spilled as they reach 200 bytes,
    monkeypatch.setattr(report, "SPILL_WAITING", 2000)  # or with every range's when all wait for 2,000
    ranged = export_parquet(wh, tmp_path / "ranged").written
    con = duckdb.connect()
    con.execute("set TimeZone = 'UTC'")
    multi = 0
    for a, b in zip(whole, ranged, strict=True):
        assert a.name == b.name
        assert con.execute(f"describe select * from '{a}'").fetchall() == \
            con.execute(f"describe select * from '{b}'").fetchall(), a.name
        assert con.execute(f"select * from '{a}'").fetchall() == con.execute(f"select * from '{b}'").fetchall(), a.name
        if a.name in {"fct_tool_calls.parquet", "fct_turns.parquet", "stg_events.parquet"}:
            multi += len(report._Ranges.of(duckdb.connect(str(wh), read_only=True), a.name[:-8], ("session_id",), None,
                                           a) or []) > 1
    assert multi >= 2  # the tables with most text really were written in several ranges
    assert sorted(p.name for p in (tmp_path / "ranged").iterdir()) == sorted(  # the spill folders are gone
        [".export-ranges.json", ".manifest.json", *(p.name for p in ranged)])


def _rows(path: Path) -> list:
    con = duckdb.connect()
    con.execute("set TimeZone = 'UTC'")
    return con.execute(f"select * from '{path}'").fetchall()


def test_an_export_copies_the_ranges_whose_rows_did_not_change(sample_home, tmp_path, monkeypatch):
    """The next export of a table written in ranges reads from the warehouse only the ranges whose rows changed
    and copies the rest from the file it wrote; its files hold what a first export of the same warehouse does.
    A file the same as the last export's is not written at all, and a file changed in place is written whole."""
    from pipeline import report

    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    monkeypatch.setattr(report, "LARGE_ROWS", 1)
    monkeypatch.setattr(report, "CHUNK_BYTES", 300)
    out, decoded = tmp_path / "out", tmp_path / "decoded"  # decoded: where files are not joined as stored
    export_parquet(wh, out)
    export_parquet(wh, decoded)
    calls = out / "fct_tool_calls.parquet"
    con = duckdb.connect(str(wh), read_only=True)
    ranges = report._Ranges.of(con, "fct_tool_calls", ("session_id", "tool_call_id"),
                               report._state(out / report.EXPORT_STATE, "tables")["fct_tool_calls"], calls)
    con.close()
    assert len(ranges) >= 4 and len(ranges.kept) == len(ranges) and ranges.unchanged()
    again = export_parquet(wh, out)
    assert calls in again.unchanged and calls not in again.written  # nothing changed: not written

    with duckdb.connect(str(wh)) as con:  # one session's call changed, one session's calls gone
        sid, other = con.execute("select session_id from fct_tool_calls group by 1 order by count(*) desc, 1 "
                                 "limit 2").fetchall()
        con.execute("update fct_tool_calls set result_chars = result_chars + 1 where session_id = ? and "
                    "tool_call_id = (select min(tool_call_id) from fct_tool_calls where session_id = ?)", [sid[0]] * 2)
        con.execute("delete from fct_tool_calls where session_id = ?", [other[0]])
    read = []
    real = report._write_in_ranges

    def spy(con, name, key, ranges, tmp, last, limit):
        read.append((name, len(ranges) - len(ranges.kept), len(ranges)))
        return real(con, name, key, ranges, tmp, last, limit)

    monkeypatch.setattr(report, "_write_in_ranges", spy)
    result = export_parquet(wh, out)
    assert calls in result.written
    changed, total = next((c, t) for name, c, t in read if name == "fct_tool_calls")
    assert 1 <= changed <= 2 < total  # the two sessions' ranges read again, the rest copied
    read.clear()
    monkeypatch.setattr(report.parquet_join, "join", lambda parts, out: False)
    assert decoded / "fct_tool_calls.parquet" in export_parquet(wh, decoded).written
    assert next(c for name, c, _t in read if name == "fct_tool_calls") == changed
    fresh = export_parquet(wh, tmp_path / "fresh")
    for path in fresh.written:
        assert _rows(path) == _rows(out / path.name) == _rows(decoded / path.name), path.name
    monkeypatch.undo()
    monkeypatch.setattr(report, "LARGE_ROWS", 1)
    monkeypatch.setattr(report, "CHUNK_BYTES", 300)

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    edited = tmp_path / "edited.parquet"  # the same row groups, one value changed in each
    with pq.ParquetFile(calls) as before, pq.ParquetWriter(edited, before.schema_arrow) as writer:
        for i in range(before.num_row_groups):
            group = before.read_row_group(i)
            chars = group.column("result_chars")
            writer.write_table(group.set_column(group.schema.get_field_index("result_chars"), "result_chars",
                                                pc.add(chars, 1)))
    edited.replace(calls)  # as a user or another program may change the file in place
    export_parquet(wh, out)
    assert _rows(calls) == _rows(tmp_path / "fresh" / "fct_tool_calls.parquet")


def test_a_topic_trend_over_years_labels_at_most_eight_months():
    # one label per month ran into each other past a year or so (100 months: unreadable)
    import re
    from datetime import date

    from pipeline import charts
    months = [date(2026 + i // 12, i % 12 + 1, 1) for i in range(100)]
    svg = charts.term_trends(months, {"session": [i % 7 for i in range(100)]}, "Top topics by month: p")
    few = charts.term_trends(months[:6], {"session": [1, 2, 3, 2, 1, 0]}, "few")
    assert len(set(re.findall(r"20\d\d-\d\d", few))) == 6  # each month labelled while they fit
    assert len(set(re.findall(r"20\d\d-\d\d", svg))) <= 8


# ------------------------------------------------------------------------------ the output folder
def test_a_file_the_report_did_not_write_is_never_written_over(sample_home, tmp_path, capsys):
    """A user's own index.md, files.md, index.html and parquet file in the output folder: the report writes
    the rest, leaves these as they are and names them (exit 2) - on every run, until --force."""
    from pipeline.cli import main

    wh, out = tmp_path / "w.duckdb", tmp_path / "out"
    ingest(wh, [sample_home])
    mine = {out / "wiki" / "index.md": b"# my notes\n", out / "wiki" / "files.md": b"my files\n",
            out / "site" / "index.html": b"<p>my page</p>\n", out / "parquet" / "dim_sessions.parquet": b"PAR1mine"}
    for path, data in mine.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for _run in range(2):
        assert main(["report", "--warehouse", str(wh), "--out", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "(and 3 more) was not written by the report" in err and "--force" in err, err
        assert {p: p.read_bytes() for p in mine} == mine
        assert (out / "site" / "search.html").is_file() and (out / "wiki" / "topics.md").is_file()
        assert (out / "parquet" / "fct_turns.parquet").is_file()
        for tree in ("wiki", "site", "parquet"):
            listed = json.loads((out / tree / ".manifest.json").read_text())["files"]
            assert not {p.relative_to(out / tree).as_posix() for p in mine if p.parent == out / tree} & set(listed)
    assert main(["report", "--warehouse", str(wh), "--out", str(out), "--quiet", "--force"]) == 0
    assert all(p.read_bytes() != data for p, data in mine.items())
    assert main(["report", "--warehouse", str(wh), "--out", str(out), "--quiet"]) == 0  # the report's own now


def test_a_report_killed_before_its_manifest_owns_what_it_wrote(sample_home, tmp_path, monkeypatch):
    """Pages written by a run that died before listing them (kill -9) are the report's: the next run
    writes over them, and removes those it no longer writes."""
    from pipeline import report, tree

    wh, out = tmp_path / "w.duckdb", tmp_path / "out"
    ingest(wh, [sample_home])

    def killed(*_args, **_kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(report, "finish", killed)  # the parquet export dies first
        m.setattr(tree, "finish", killed)
        with pytest.raises(KeyboardInterrupt):
            report.run_report(wh, out)
    assert not (out / "parquet" / ".manifest.json").exists() and (out / "parquet" / ".manifest.pending").exists()
    (out / "wiki").mkdir(parents=True, exist_ok=True)
    (out / "wiki" / "index.md").write_text("stale page of the killed run\n")
    with (out / "wiki" / ".manifest.pending").open("a") as fh:
        fh.write("index.md\nold-page.md\n")
    (out / "wiki" / "old-page.md").write_text("a page the killed run wrote, not written any more\n")
    _parquet, wiki, _site = report.run_report(wh, out)
    assert "stale" not in (out / "wiki" / "index.md").read_text()
    assert not (out / "wiki" / "old-page.md").exists() and out / "wiki" / "old-page.md" in wiki.removed
    assert not list(out.rglob(".manifest.pending"))


def test_a_link_out_of_the_output_folder_is_one_line(sample_home, tmp_path, capsys):
    from pipeline.cli import main

    wh, out, elsewhere = tmp_path / "w.duckdb", tmp_path / "out", tmp_path / "elsewhere"
    ingest(wh, [sample_home])
    elsewhere.mkdir()
    (out / "wiki").mkdir(parents=True)
    (out / "wiki" / "sessions").symlink_to(elsewhere, target_is_directory=True)
    assert main(["report", "--warehouse", str(wh), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{out / 'wiki' / 'sessions'} is a link to {elsewhere}" in err, err
    assert not list(elsewhere.iterdir())


def test_a_report_renders_again_only_the_sessions_whose_pages_changed(sample_home, tmp_path, caplog):
    # each session's pages are rendered again only when what they are made from changed (its rows, its place
    # in the lists, the code): after one session grew, its pages alone; the trees then equal a report written
    # anew, byte for byte. A page file removed by hand, a garbled record or other code: rendered again
    import logging

    from pipeline import report
    from pipeline.site.search import SEARCH_DIR
    from pipeline.site.search import STATE as SEARCH_STATE
    from pipeline.wiki.markdown import page_name

    from .search_index import static_search

    def tree(out):  # the search index: compared by what it finds (a change's documents are appended to it)
        return {rel: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name not in (
            report.PAGES_STATE, report.MONTHS_STATE, SEARCH_STATE)
            and not (rel := p.relative_to(out).as_posix()).startswith(SEARCH_DIR + "/")}

    def finds(site):
        return [static_search(site, [t]) for t in words] + [static_search(site, words[:3] + ["question"])]

    def kept_line():
        lines = [r.getMessage() for r in caplog.records if "sessions' pages unchanged" in r.getMessage()]
        caplog.clear()
        return lines[-1] if lines else None
    wh, out = tmp_path / "w.duckdb", tmp_path / "out"
    ingest(wh, [sample_home])
    n = len(rows(wh, "select session_id from dim_sessions"))
    with caplog.at_level(logging.INFO, logger="pipeline.report"):
        report.run_report(wh, out)
        assert kept_line() is None  # the first report renders every page
        _p, wiki, site = report.run_report(wh, out)
        assert kept_line() == f"{n} of {n} sessions' pages unchanged since the last report: not rendered again"
        assert (wiki.written, site.written, wiki.removed, site.removed) == ([], [], [], [])

        log = sorted(sample_home.glob("session-state/*/events.jsonl"))[0]
        sid = log.parent.name
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"type": "user.message", "data": {"content": "one more question"}, "id": "more-1",
                                 "timestamp": "2026-09-30T10:00:00.000Z"}) + "\n")
        ingest(wh, [sample_home])
        _p, wiki, site = report.run_report(wh, out)
        assert kept_line() == f"{n - 1} of {n} sessions' pages unchanged since the last report: not rendered again"
        assert any(p.name.startswith(page_name(sid)) for p in site.written), site.written
        assert not [p for p in site.written if p.parent.name == "sessions" and not p.name.startswith(
            page_name(sid))]
        report.run_report(wh, tmp_path / "anew")
        for part in ("wiki", "site"):
            assert tree(out / part) == tree(tmp_path / "anew" / part), part
        words = [r[0] for r in rows(wh, "select term from int_search_terms group by term order by count(*) desc, term "
                                        "limit 30")] + ["one", "more", "question"]
        assert finds(out / "site") == finds(tmp_path / "anew" / "site") and any(finds(out / "site"))
        found = [hit for hit in static_search(out / "site", ["question"]) if hit[4] == "one more question"]
        assert found and found[0][:2] == ("prompt", f"sessions/{page_name(sid)}.html#prompt-{found[0][1][-1]}")

        page = next((out / "site" / "sessions").glob(page_name(sid) + "*.html"))
        page.unlink()
        report.run_report(wh, out)
        assert page.is_file() and kept_line().startswith(f"{n - 1} of {n}")
        (out / "site" / report.PAGES_STATE).write_text("{not json")
        report.run_report(wh, out)
        assert kept_line() is None
        # a record that names files a report never writes there, or of another shape: not taken
        state = json.loads((out / "site" / report.PAGES_STATE).read_text())
        digest = state["sessions"][sid]  # the digest alone: its files are the session's pages
        assert isinstance(digest, str) and len(digest) == 32
        state["sessions"] = {sid: [digest, ["../../../escape.html"]], "x": 5, "y": ["d", [1]], "../z": digest}
        (out / "site" / report.PAGES_STATE).write_text(json.dumps(state))
        report.run_report(wh, out)
        assert kept_line() is None  # every other session had no record: rendered
        assert not [f for f in json.loads((out / "site" / ".manifest.json").read_text())["files"] if ".." in f]
        report._code_digest.cache_clear()
        real = report._code_digest
        report._code_digest = lambda: "another version"
        try:
            report.run_report(wh, out)
        finally:
            report._code_digest = real
        assert kept_line() is None
    for part in ("wiki", "site"):
        assert tree(out / part) == tree(tmp_path / "anew" / part), part
    assert finds(out / "site") == finds(tmp_path / "anew" / "site")


def test_a_busy_month_is_listed_by_day_and_a_change_renders_its_day_alone(sample_home, tmp_path, monkeypatch):
    """A month of more than DAY_SPLIT pages lists its days (wiki and site), each day's sessions on pages of their
    own: every session is on its day's pages, and a session grown renders its day's pages and its month's page,
    in the site and the wiki, not the month's other days (a team's month of 98,000 sessions had 981 pages, all
    rendered for one change)."""
    import re

    from pipeline import report
    from pipeline.wiki import pages

    monkeypatch.setattr(pages, "DAY_SPLIT", 0)  # every month listed by day, a session a page
    monkeypatch.setattr(pages, "MONTH_PAGE", 1)
    seen: dict[str, bool] = {}
    kept = report.MonthPages.kept

    def spy(self, template, rel, values):
        answer = kept(self, template, rel, values)
        if template in ("month.html", "months"):  # the site's pages, the wiki's
            seen[rel] = answer
        return answer
    monkeypatch.setattr(report.MonthPages, "kept", spy)
    wh, out = tmp_path / "w.duckdb", tmp_path / "out"
    ingest(wh, [sample_home])
    report.run_report(wh, out)
    days = dict(rows(wh, "select session_id, strftime(started_at, '%Y-%m-%d') from dim_sessions "
                         "where started_at is not null"))
    assert len(set(days.values())) >= 2
    site, wiki = out / "site" / "months", out / "wiki" / "months"
    for day in set(days.values()):
        month_html, month_md = (site / f"{day[:7]}.html").read_text(), (wiki / f"{day[:7]}.md").read_text()
        assert f'href="../months/{day}.html"' in month_html and f"]({'../months/' + day}.md)" in month_md
        on_day = "".join(p.read_text() for p in site.glob(f"{day}*.html"))
        assert sorted(re.findall(r'href="\.\./sessions/([^"/]+)\.html"', on_day)) == \
            sorted(pages.page_name(sid) for sid, d in days.items() if d == day)
        assert f'href="../months/{day[:7]}.html"' in (site / f"{day}.html").read_text()  # up to its month

    log = next(p for p in sorted(sample_home.glob("session-state/*/events.jsonl")) if p.parent.name in days)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "user.message", "data": {"content": "one more question"}, "id": "more-1",
                             "timestamp": "2026-09-30T10:00:00.000Z"}) + "\n")
    ingest(wh, [sample_home])
    seen.clear()
    report.run_report(wh, out)
    day = days[log.parent.name]
    rendered = {rel for rel, k in seen.items() if not k}
    assert rendered == {f"months/{day[:7]}.html", f"months/{day[:7]}.md",
                        *(rel for rel in seen if rel.startswith(f"months/{day}"))}
    assert len(seen) > len(rendered) and any(rel.endswith(".md") for rel in rendered)
    report.run_report(wh, tmp_path / "anew")
    for rel in seen:
        tree = "site" if rel.endswith(".html") else "wiki"
        assert (out / tree / rel).read_bytes() == (tmp_path / "anew" / tree / rel).read_bytes(), rel
        assert (out / tree / rel).is_file()


def test_month_and_day_keys_are_those_the_pages_link():
    # the keys name the month and day pages; a session page links its month by strftime, which prints a year
    # before 1000 unpadded: the keys do the same, and a day's month is found whatever the year's width
    from datetime import datetime, timezone

    from pipeline.wiki import pages

    for at in (datetime(2026, 1, 5, 7, tzinfo=timezone.utc), datetime(999, 3, 4, tzinfo=timezone.utc),
               datetime(12, 11, 30)):
        s = {"started_at": at}
        assert pages.month_key(s) == at.strftime("%Y-%m") and pages.day_key(s) == at.strftime("%Y-%m-%d")
        assert pages.is_day(pages.day_key(s)) and not pages.is_day(pages.month_key(s))
        assert pages.month_of(pages.day_key(s)) == pages.month_key(s) == pages.month_of(pages.month_key(s))
    assert pages.month_key({"started_at": None}) == "undated" and not pages.is_day("undated")


def test_a_month_page_is_rendered_again_only_when_what_it_shows_changed(sample_home, tmp_path, monkeypatch):
    # a month page shows its sessions' rows, which page of how many, the month's count and the months it
    # links: one session grown renders its month's pages alone, and the site equals one written anew; a page
    # removed by hand or a garbled record: rendered again
    from pipeline import report

    seen: dict[str, bool] = {}
    kept = report.MonthPages.kept

    def spy(self, template, rel, values):
        answer = kept(self, template, rel, values)
        if template == "month.html":
            seen[rel] = answer
        return answer
    monkeypatch.setattr(report.MonthPages, "kept", spy)

    def run(out):
        seen.clear()
        _p, _w, site = report.run_report(wh, out)
        return dict(seen), site
    wh, out = tmp_path / "w.duckdb", tmp_path / "out"
    ingest(wh, [sample_home])
    first, _site = run(out)
    assert len(first) >= 2 and not any(first.values())  # nothing recorded yet: every month page rendered
    again, site = run(out)
    assert again.keys() == first.keys() and all(again.values()) and site.written == []
    assert all((out / "site" / rel) in site.unchanged for rel in again)  # kept: listed, not removed

    starts = dict(rows(wh, "select session_id, strftime(started_at, '%Y-%m') from dim_sessions"))
    log = sorted(sample_home.glob("session-state/*/events.jsonl"))[0]
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "user.message", "data": {"content": "one more question"}, "id": "more-1",
                             "timestamp": "2026-09-30T10:00:00.000Z"}) + "\n")
    ingest(wh, [sample_home])
    grown, site = run(out)
    month = starts[log.parent.name]
    assert {rel for rel, k in grown.items() if not k} == {rel for rel in grown if rel.startswith(f"months/{month}")}
    assert any(rel.startswith(f"months/{month}") for rel in grown) and any(grown.values())
    report.run_report(wh, tmp_path / "anew")
    for rel in grown:
        assert (out / "site" / rel).read_bytes() == (tmp_path / "anew" / "site" / rel).read_bytes(), rel
    assert "<span class=\"muted\">" not in (out / "site" / next(iter(grown))).read_text().split('class="months"')[1]

    page = out / "site" / next(rel for rel, k in grown.items() if k)
    page.unlink()
    removed, _site = run(out)
    assert page.is_file()
    assert [rel for rel, k in removed.items() if not k] == [page.relative_to(out / "site").as_posix()]
    (out / "site" / report.MONTHS_STATE).write_text("{not json")
    garbled, _site = run(out)
    assert not any(garbled.values())


def test_the_digests_read_each_session_part_unsorted_and_whole(sample_home, tmp_path):
    """The digests sum the hashes of the rows the session pages show: every part's own ORDER BY is dropped
    (sorting every row with its texts for a sum), and nothing else of the query."""
    from pipeline.warehouse import connect
    from pipeline.wiki import queries

    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    with connect(wh, read_only=True) as con:
        for part, sql in queries.SESSION_PARTS.items():
            whole = sql.format(where="true")
            bare = queries.unordered(whole)
            assert bare != whole and " order by " not in bare.rsplit(")", 1)[-1].lower(), part
            assert sorted(map(repr, con.execute(bare).fetchall())) == sorted(map(repr, con.execute(whole).fetchall()))
    assert queries.unordered("select string_agg(x, ',' order by y) from t") == \
        "select string_agg(x, ',' order by y) from t"
