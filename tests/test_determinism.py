"""The same files give the same warehouse: whatever order they are found and read in."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import duckdb

import pipeline.ingest as ingest_module
from pipeline.ingest import ingest

from .conftest import REAL, rows
from .test_vscode import SAMPLE_USER

RUN_COLUMNS = {"_run_id", "last_run_id", "run_id"}


def _tables(wh: Path) -> dict[str, list]:
    """Every row of every table but the run log, sorted, without the columns that name the run."""
    con = duckdb.connect(str(wh), read_only=True)
    con.execute("set TimeZone = 'UTC'")
    try:
        out = {}
        for (table,) in con.execute("select table_name from information_schema.tables "
                                    "where table_schema = 'main' and table_name <> '_runs' order by 1").fetchall():
            cols = [c for (c,) in con.execute("select column_name from information_schema.columns where "
                                              "table_name = ? order by ordinal_position", [table]).fetchall()
                    if c not in RUN_COLUMNS]
            sel = ", ".join(f'"{c}"' for c in cols)
            out[table] = sorted(map(repr, con.execute(f'select {sel} from "{table}"').fetchall()))
        return out
    finally:
        con.close()


def _website_home(tmp_path: Path) -> Path:
    """A folder session of repository acme/website, and store-only sessions: one that knows the repository
    but no folder, one that knows neither."""
    home = tmp_path / "website-home"
    folder = home / "session-state" / "w0"
    folder.mkdir(parents=True)
    (folder / "workspace.yaml").write_text("cwd: /home/dev/website\nrepository: acme/website\nname: Site\n")
    con = sqlite3.connect(home / "session-store.db")
    con.execute("create table sessions (id text primary key, cwd text, repository text, host_type text, "
                "branch text, summary text, created_at text, updated_at text)")
    con.execute("create table turns (id integer primary key, session_id text, turn_index integer, "
                "user_message text, assistant_response text, timestamp text)")
    con.executemany("insert into sessions values (?, ?, ?, 'github', 'main', ?, ?, ?)", [
        ("w1", None, "acme/website", "Store only, repository known", "2026-09-02 10:00:00", "2026-09-02 10:05:00"),
        ("w2", None, None, "Store only, nothing known", "2026-09-03 10:00:00", "2026-09-03 10:05:00")])
    con.executemany("insert into turns (session_id, turn_index, user_message, assistant_response, timestamp) "
                    "values (?, 0, 'build the site', 'built', ?)", [("w1", "2026-09-02 10:01:00"),
                                                                     ("w2", "2026-09-03 10:01:00")])
    con.commit()
    con.close()
    return home


def test_the_same_files_give_the_same_warehouse_in_any_order(sample_home, tmp_path, monkeypatch):
    user = tmp_path / "vscode-user"
    shutil.copytree(SAMPLE_USER, user)
    homes = [sample_home, _website_home(tmp_path)]
    homes += [REAL / f / "copilot-home" for f in ("mitchwindoo-github-copilot", "softwaresalt-agent-engram",
                                                   "XEFF09-dotfiles") if (REAL / f / "copilot-home").is_dir()]
    first = tmp_path / "first.duckdb"
    ingest(first, homes, [user])
    want = _tables(first)
    assert rows(first, "select s.session_id, p.name from dim_sessions s join dim_projects p using (project_id) "
                       "where s.session_id in ('w0', 'w1', 'w2') order by 1") == [
        ("w0", "website"), ("w1", "website"), ("w2", "(no project)")]

    discover = ingest_module.discover
    for seed in (1, 2, 3):
        def shuffled(copilot_homes, vscode_users=(), finder=None, _seed=seed):
            sources = discover(list(reversed(copilot_homes)), vscode_users, finder)
            random.Random(_seed).shuffle(sources)
            return sources
        monkeypatch.setattr(ingest_module, "discover", shuffled)
        again = tmp_path / f"shuffled-{seed}.duckdb"
        ingest(again, homes, [user], workers=1 if seed % 2 else 2)
        got = _tables(again)
        assert got.keys() == want.keys()
        for table in want:
            assert got[table] == want[table], (seed, table)


def test_a_folder_joins_its_repository_project_when_a_later_session_names_it(tmp_path):
    home = tmp_path / "home"
    first = home / "session-state" / "a1"
    first.mkdir(parents=True)
    (first / "workspace.yaml").write_text("cwd: /home/dev/site\nname: Before the repository was known\n")
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select name, n_sessions from dim_projects") == [("site", 1)]
    later = home / "session-state" / "a2"
    later.mkdir(parents=True)
    (later / "workspace.yaml").write_text("cwd: /home/dev/site\nrepository: acme/website\nname: Later\n")
    summary = ingest(wh, [home])
    assert summary.n_sessions_changed == 2  # the new session, and the older one that moves with it
    assert rows(wh, "select name, repository, root_path, n_sessions from dim_projects") == [
        ("website", "acme/website", "/home/dev/site", 2)]
    assert _tables(wh) == _tables(_full(home, tmp_path))


def _full(home: Path, tmp_path: Path) -> Path:
    wh = tmp_path / "full.duckdb"
    ingest(wh, [home], full=True)
    return wh
