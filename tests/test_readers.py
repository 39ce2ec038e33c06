"""Readers on small fixtures that mirror the on-disk layout."""

import os
import sqlite3

from pipeline.extract.base import Context, Source
from pipeline.extract.cli_home import read_checkpoints, read_workspace_yaml
from pipeline.extract.store import read_session_store
from pipeline.ingest import ingest
from pipeline.redact import Redactor

from .conftest import rows


def ctx():
    return Context(run_id="r1", redact=Redactor())


def test_workspace_yaml_name_block_scalar_and_quotes(tmp_path):
    cases = {
        "name: Fix login\ncwd: /x\n": ("Fix login", None, "/x"),
        "summary: |-\n  Two line\n  summary\ncwd: '/y'\n": (None, "Two line\nsummary", "/y"),
        'name: "quoted: title"\ncreated_at: "2026-01-01 10:00:00"\n': ("quoted: title", None, None),
    }
    for i, (text, want) in enumerate(cases.items()):
        p = tmp_path / f"{i}.yaml"
        p.write_text(text)
        res = read_workspace_yaml(Source(str(p), "workspace_yaml", "s"), ctx(), None)
        row = res.rows["stg_session_meta"][0]
        assert (row["title"], row["summary"], row["cwd"]) == want
        assert res.rejects == []


def test_malformed_workspace_yaml_is_rejected_and_salvaged(tmp_path):
    p = tmp_path / "workspace.yaml"
    p.write_text("cwd: /work\nname: [oops\nbranch: main\n")
    res = read_workspace_yaml(Source(str(p), "workspace_yaml", "s"), ctx(), None)
    assert res.rejects[0]["position"] == "file" and "not valid YAML" in res.rejects[0]["reason"]
    row = res.rows["stg_session_meta"][0]
    assert (row["cwd"], row["branch"], row["title"]) == ("/work", "main", None)


def test_a_salvaged_quoted_value_has_its_quoting_undone_and_its_secret_redacted(tmp_path):
    """A file YAML cannot parse is read line by line: a quoted value keeps none of its escapes (its quotes
    stripped alone left `key=\\"...\\`, whose secret the rules could not see as a quoted value)."""
    p = tmp_path / "workspace.yaml"
    p.write_text('cwd: "/work/api ConnectionString=\\"Data Source=db;Password=Xk2v9Pq7\\""\n'
                 "name: 'it''s'\nsummary: |-\n bad: [\n  oops\nbranch: \"main\n")
    res = read_workspace_yaml(Source(str(p), "workspace_yaml", "s"), ctx(), None)
    assert "not valid YAML" in res.rejects[0]["reason"]
    row = res.rows["stg_session_meta"][0]
    assert row["cwd"] == '/work/api ConnectionString="Data Source=db;Password=Xk2v9Pq7"'
    assert (row["title"], row["branch"]) == ("it's", "main")  # a quote never closed: stripped, as before
    p.write_text('cwd: /work\nname: [oops\nextra_setting: ConnectionString="Data Source=db;Password=Xk2v9Pq7"\n')
    doc = read_workspace_yaml(Source(str(p), "workspace_yaml", "s"), ctx(), None).rows["stg_session_meta"][0]
    assert '"extra_setting":"ConnectionString=\\"Data Source=db;Password=Xk2v9Pq7\\""' in doc["extra"]  # plain
    redacted = Redactor()(row["cwd"])
    assert "Xk2v9Pq7" not in redacted and "[REDACTED:secret_value]" in redacted


def test_markdown_in_a_quoted_name_is_no_alias_and_real_anchors_are_refused(tmp_path):
    # the CLI writes the whole first prompt as the name: `**ACS**` is bold text, `\r\n` escapes a line break
    p = tmp_path / "a.yaml"
    p.write_text('name: "Use **ACS** naming\\r\\nand *this* too"\ncwd: c:\\x\n')
    res = read_workspace_yaml(Source(str(p), "workspace_yaml", "s"), ctx(), None)
    assert res.rejects == [] and res.rows["stg_session_meta"][0]["title"] == "Use **ACS** naming\r\nand *this* too"
    for text in ("a: &x [1, 2]\nb: *x\n", "name: *undefined\n"):
        p.write_text(text)
        res = read_workspace_yaml(Source(str(p), "workspace_yaml", "s"), ctx(), None)
        assert "anchors or aliases" in res.rejects[0]["reason"], text


def test_checkpoint_sections_whose_tags_do_not_pair_keep_their_text(tmp_path):
    cp = tmp_path / "checkpoints"
    cp.mkdir()
    # CLI 1.0.7x: <overview> closed by </history>, the history without its opening tag
    (cp / "001-x.md").write_text("<overview>\nThe goal.\n</history>\n1. Step one\n2. Step two\n</history>\n"
                                 "<work_done>\nDone.\n</work_done>\n")
    row = read_checkpoints(Source(str(cp), "checkpoints", "s"), ctx(), None).rows["stg_checkpoints"][0]
    assert (row["overview"], row["history"], row["work_done"]) == ("The goal.", "1. Step one\n2. Step two", "Done.")


def test_checkpoints_markdown_and_json_shapes(tmp_path):
    cp = tmp_path / "checkpoints"
    cp.mkdir()
    (cp / "index.md").write_text("| # | Title | File |\n|---|---|---|\n| 1 | First step | 001-first-step.md |\n")
    (cp / "001-first-step.md").write_text("<overview>\nOver\n</overview>\n<next_steps>\n- a\n</next_steps>\n")
    (cp / "002-second.md").write_text("# Second thing\n<work_done>done</work_done>\n")
    (cp / "c0ffee.json").write_text('{"title": "From JSON", "overview": "o", "important_files": "- a.py"}')
    res = read_checkpoints(Source(str(cp), "checkpoints", "s"), ctx(), None)
    got = [(r["checkpoint_number"], r["source_kind"], r["title"], r["overview"], r["work_done"], r["next_steps"],
            r["important_files"]) for r in res.rows["stg_checkpoints"]]
    assert got == [(1, "folder_md", "First step", "Over", None, "- a", None),
                   (2, "folder_md", "Second thing", None, "done", None, None),
                   (3, "folder_json", "From JSON", "o", None, None, "- a.py")]


def _wal_store(path):
    con = sqlite3.connect(path)
    con.execute("pragma journal_mode=wal")
    con.execute("pragma wal_autocheckpoint=0")
    con.execute("create table sessions (id text primary key, cwd text, summary text, created_at text)")
    con.execute("create table turns (id integer primary key, session_id text, turn_index int, user_message text,"
                " assistant_response text, timestamp text)")
    con.commit()
    con.execute("pragma wal_checkpoint(TRUNCATE)")
    con.execute("insert into sessions values ('s1', '/p', 'only in the wal', '2026-01-01 00:00:00')")
    con.execute("insert into turns values (1, 's1', 0, 'hi', 'hello', '2026-01-01T00:00:01Z')")
    con.commit()
    return con  # kept open: the rows stay in the -wal file


def test_store_rows_only_in_the_wal_are_read_and_the_source_is_untouched(tmp_path):
    db = tmp_path / "session-store.db"
    writer = _wal_store(db)
    try:
        assert os.path.getsize(f"{db}-wal") > 0
        before = {p: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes()) for p in tmp_path.iterdir()}
        res = read_session_store(Source(str(db), "session_store"), ctx(), None)
        after = {p: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes()) for p in tmp_path.iterdir()}
        assert before == after
        assert [r["summary"] for r in res.rows["stg_session_meta"]] == ["only in the wal"]
        assert [(r["turn_index"], r["user_message"]) for r in res.rows["stg_store_turns"]] == [(0, "hi")]
        # tables this store version lacks degrade to nothing instead of failing
        assert "stg_store_usage" not in res.rows and res.rejects == []
        # and the writer can still write: nothing was locked
        writer.execute("insert into turns values (2, 's1', 1, 'more', 'ok', null)")
        writer.commit()
    finally:
        writer.close()


def test_store_with_missing_columns_and_a_corrupt_store(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    con = sqlite3.connect(home / "session-store.db")
    con.execute("create table sessions (id text primary key)")  # an old store: almost no columns
    con.execute("insert into sessions values ('old')")
    con.commit()
    con.close()
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select session_id, n_turns, cwd from dim_sessions") == [("old", 0, None)]
    (home / "session-store.db").write_bytes(b"this is not a database at all" * 100)
    summary = ingest(wh, [home])
    assert summary.n_rejects == 1
    assert rows(wh, "select position, reason like 'session-store.db could not be read%' from _rejects") == [
        ("file", True)]
    # the rows read earlier are kept until the store is readable again
    assert rows(wh, "select session_id from dim_sessions") == [("old",)]


def test_unknown_event_types_and_fields_are_kept_not_fatal(tmp_path):
    home = tmp_path / "home"
    folder = home / "session-state" / "s9"
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text(
        '{"type":"user.message","data":{"content":"hi","brandNewField":{"x":1}},"id":"1","timestamp":"2026-01-01T00:00:00Z"}\n'
        '{"type":"quantum.entangled","data":{"spin":"up"},"id":"2","timestamp":"2026-01-01 00:00:05"}\n')
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select n_events, n_unknown_events, n_turns, started_at::varchar, ended_at::varchar "
                    "from dim_sessions") == [(2, 1, 1, "2026-01-01 00:00:00+00", "2026-01-01 00:00:05+00")]
    assert rows(wh, "select extra from stg_events order by event_index") == [
        ('{"brandNewField":{"x":1}}',), ('{"spin":"up"}',)]


def test_a_metadata_rows_extra_has_its_secrets_redacted_and_still_parses(tmp_path):
    """vscode.metadata.json's other keys go to stg_session_meta.extra as JSON text, redacted as text: a line
    break in a value is written `\\n` there, so `...\\npassword: <secret>` named `npassword`, no secret (a
    planted secret reached the warehouse this way), and the JSON must still parse once redacted."""
    import json

    from pipeline.extract.parallel import read_batch

    folder = tmp_path / "s1"
    folder.mkdir()
    meta = folder / "vscode.metadata.json"
    meta.write_text(json.dumps({"worktreeProperties": {
        "branchName": "feat/x\npassword: Zq9mk2Lw8xQ\n", "apiToken": "Zq9 mk2 Lw8xQ", "baseBranch": "main"}}))
    batch = read_batch([(Source(str(meta), "vscode_metadata", "s1"), None)], "r", True)
    extra = batch.tables["stg_session_meta"].column("extra")[0].as_py()
    assert "Zq9" not in extra
    assert json.loads(extra)["worktreeProperties"] == {
        "apiToken": "[REDACTED:secret_value]", "baseBranch": "main",
        "branchName": "feat/x\npassword: [REDACTED:secret_value]\n"}
