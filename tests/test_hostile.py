"""One bad file never stops the run: poison inputs, limits, crashes, Ctrl-C, a full disk, escapes."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

import pipeline.ingest as ingest_module
from pipeline.cli import main
from pipeline.extract import jsonl
from pipeline.ingest import ingest
from pipeline.warehouse import Interrupted, transaction

from . import poison
from .conftest import rows


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory):
    root = tmp_path_factory.mktemp("poison")
    keep = poison.build(root)
    wh = root / "w.duckdb"
    code = main(["ingest", "--copilot-home", str(root / "copilot-home"), "--vscode-user", str(root / "vscode-user"),
                 "--warehouse", str(wh), "--quiet"])
    return root, keep, wh, code


def test_every_poison_case_is_rejected_alone_and_the_run_completes(poisoned):
    root, keep, wh, code = poisoned
    assert code == 0
    kept = {r[0] for r in rows(wh, "select event_id from stg_events")}
    assert set(keep["events"]) <= kept  # every good record beside every poison
    assert rows(wh, "select user_message from fct_turns where user_message = 'good chat prompt'") == [
        ("good chat prompt",)]
    rejected = rows(wh, "select source_path, position, reason from _rejects")
    for name, _line, must_reject in poison.event_cases():
        mine = [r for r in rejected if f"/case-{name}/" in r[0]]
        if must_reject:
            assert [p for _s, p, _r in mine] == ["line 2 @ byte " + p.split("@ byte ")[1] for _s, p, _r in mine]
            assert len(mine) == 1, (name, mine)
    (extra,), = rows(wh, "select extra from stg_events where event_id = 'p' and _source_path like '%deep-500%'")
    assert extra.startswith('{"a":[[[') and "[nested deeper than 200 levels]" in extra
    reasons = " | ".join(r[2] for r in rejected)
    (extra,), = rows(wh, "select extra from stg_events where event_id = 'p' and _source_path like '%deep-2000%'")
    assert extra.startswith('{"a":[[[') and "[nested deeper than 200 levels]" in extra
    for expected in ("event kept; values nested deeper than 200 levels replaced by a marker",
                     "outputTokens is nan (set to NULL)",
                     "outputTokens = 1180591620717411303424 is out of range", "uses YAML anchors or aliases",
                     "name is not valid UTF-8", "Too many levels of symbolic links",
                     "turn_index = 2147483648 is out of range", "checkpoint_number = 9223372036854775807",
                     "workspaceFolder.timestamp = 1e+30 is no time", "`requests` is int, not a list",
                     "request 6 could not be read", "push onto something that is not a list",
                     "checkpoint not read: its number 99999999999999999999 is out of range"):
        assert expected in reasons, expected
    # the store's good rows survive its bad ones (invalid UTF-8, an integer id, absurd numbers)
    assert rows(wh, "select count(*) from stg_store_turns where _source_path like '%session-store.db'") == [(4,)]
    assert rows(wh, "select count(*) from stg_store_turns where user_message = 'good turn'") == [(1,)]


def test_a_poisoned_home_ingested_again_changes_nothing_and_reports(poisoned, tmp_path):
    root, _keep, wh, _code = poisoned
    before = rows(wh, "select count(*) from stg_events")
    assert main(["ingest", "--copilot-home", str(root / "copilot-home"), "--vscode-user", str(root / "vscode-user"),
                 "--warehouse", str(wh), "--quiet"]) == 0
    assert rows(wh, "select count(*) from stg_events") == before
    assert rows(wh, "select n_files_read from _runs order by started_at desc limit 1") == [(0,)]
    out = tmp_path / "out"
    assert main(["report", "--warehouse", str(wh), "--out", str(out), "--quiet"]) == 0
    # a session id that is not a plain name (here: not valid UTF-8, with a NUL) gets a safe page name
    assert all(p.resolve().is_relative_to(out.resolve()) for p in out.rglob("*"))


# ---------------------------------------------------------------------------------- linear time
def test_non_json_content_is_read_in_one_pass(monkeypatch):
    """Rejoining broken events is tried only where one can end and within a budget: 80,000 lines that
    start an event and never end one cost a bounded number of parses, not one per pair of lines."""
    calls = []
    real = jsonl._loads
    monkeypatch.setattr(jsonl, "_loads", lambda raw: calls.append(len(raw)) or real(raw))
    data = b"".join(b"{not json %d\n" % i for i in range(80_000)) + b'{"type":"x"}\n'
    items = list(jsonl.iter_jsonl(data))
    assert sum(isinstance(i, jsonl.Record) for i in items) == 1 and len(items) == 80_001
    assert len(calls) < 3 * 80_000 + jsonl.JOIN_PARSES and sum(calls) < 2 * len(data) + jsonl.JOIN_BUDGET
    calls.clear()
    text = b"".join(b"plain text line %d\n" % i for i in range(50_000))
    list(jsonl.iter_jsonl(text))
    assert len(calls) == 50_000  # one parse per line: no rejoining where no event can start


def test_a_huge_text_is_cut_with_its_length_and_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("COPILOT_WAREHOUSE_MAX_TEXT", "1000")
    home = tmp_path / "home"
    folder = home / "session-state" / "big"
    folder.mkdir(parents=True)
    prompt = "word " * 1000  # 5,000 characters
    (folder / "events.jsonl").write_text(json.dumps({"type": "user.message", "id": "1",
                                                     "data": {"content": prompt}}) + "\n")
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    (text,), = rows(wh, "select user_message from fct_turns")
    assert text.startswith("word word") and len(text) < 1200
    assert "5,000 characters in all, sha256 " in text
    assert rows(wh, "select reason from _rejects") == [("event kept; text of `content` of 5,000 characters cut to "
                                                        "1,000",)]


# ---------------------------------------------------------------------------------- crash hygiene
def test_a_file_that_could_not_be_read_is_read_again_next_run(sample_home, tmp_path, monkeypatch):
    wh = tmp_path / "w.duckdb"
    real = ingest_module.read_all

    def failing(jobs, *args, **kw):
        for batch in real(jobs, *args, **kw):
            for read in batch.reads:
                if read.source.kind == "session_store":
                    read.result, read.error = None, "could not be read: No space left on device"
            yield batch
    monkeypatch.setattr(ingest_module, "read_all", failing)
    ingest(wh, [sample_home])
    assert rows(wh, "select count(*) from _source_files where kind = 'session_store'") == [(0,)]
    assert rows(wh, "select reason from _rejects where source_path like '%session-store.db'") == [
        ("could not be read: No space left on device",)]
    monkeypatch.setattr(ingest_module, "read_all", real)
    again = ingest(wh, [sample_home])
    assert again.n_files_read == 1  # fixed: the store is read now, not "unchanged"
    assert rows(wh, "select count(*) from _rejects where source_path like '%session-store.db'") == [(0,)]


def test_a_folder_that_cannot_be_listed_is_a_reject_and_is_read_once_it_can(sample_home, tmp_path, monkeypatch):
    locked = next(p for p in (sample_home / "session-state").iterdir() if p.is_dir())
    real = os.scandir

    def scandir(path="."):  # what a folder without read permission does (the tests run as root)
        if not isinstance(path, int) and os.fspath(path) == str(locked):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path)
    monkeypatch.setattr(os, "scandir", scandir)
    wh = tmp_path / "w.duckdb"
    assert main(["ingest", "--copilot-home", str(sample_home), "--warehouse", str(wh), "--quiet"]) == 0
    assert rows(wh, "select position, reason from _rejects where source_path = ?", [str(locked)]) == [
        ("folder", "folder cannot be listed (Permission denied); not read")]
    assert rows(wh, "select count(*) from _source_files where source_path like ?", [f"{locked}/%"]) == [(0,)]
    n_sessions = rows(wh, "select count(*) from dim_sessions")[0][0]
    assert n_sessions > 1
    monkeypatch.setattr(os, "scandir", real)
    assert main(["ingest", "--copilot-home", str(sample_home), "--warehouse", str(wh), "--quiet"]) == 0
    assert rows(wh, "select count(*) from _rejects where source_path = ?", [str(locked)]) == [(0,)]
    assert rows(wh, "select count(*) from _source_files where source_path like ?", [f"{locked}/%"])[0][0] > 0


def test_folders_left_by_killed_runs_are_removed_and_copies_stay_in_the_run_folder(sample_home, tmp_path,
                                                                                    monkeypatch):
    wh = tmp_path / "w.duckdb"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = tmp_path / f".ingest-{dead}-abc"
    (stale / "scratch").mkdir(parents=True)
    (stale / "scratch" / "store.db").write_text("an unredacted copy left by kill -9")
    alive = tmp_path / f".ingest-{os.getppid()}-xyz"  # another ingest still running: left alone
    alive.mkdir()
    from pipeline.extract import store
    copies = []
    real = store.snapshot_copy
    monkeypatch.setattr(store, "snapshot_copy", lambda path, dest: copies.append(dest) or real(path, dest))
    ingest(wh, [sample_home])
    assert not stale.exists() and alive.exists()
    assert copies and all(Path(c).resolve().is_relative_to(tmp_path.resolve()) for c in copies)
    assert [p.name for p in tmp_path.glob(".ingest-*")] == [alive.name]  # this run's folder is gone too


def test_workers_die_with_their_parent(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, sys, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "import multiprocessing\n"
        "from pipeline.processes import worker_init\n"
        "if __name__ == '__main__':\n"
        "    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn'), initializer=worker_init)\n"
        "    pid = pool.submit(os.getpid).result()\n"
        "    pool.submit(time.sleep, 60)\n"
        "    print(pid, flush=True)\n"
        "    os.kill(os.getpid(), 9)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    pid = int(out.stdout.split()[0])
    for _ in range(100):  # the worker goes at once (prctl) or within a second (its watchdog)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if Path(f"/proc/{pid}/status").is_file() and "zombie" in Path(f"/proc/{pid}/status").read_text():
            return
        time.sleep(0.1)
    pytest.fail(f"worker {pid} outlived its killed parent")


# ---------------------------------------------------------------------------------- Ctrl-C, a full disk
def test_ctrl_c_during_the_run_is_one_line_and_keeps_the_warehouse(sample_home, tmp_path, monkeypatch, capsys):
    wh = tmp_path / "w.duckdb"
    assert main(["ingest", "--copilot-home", str(sample_home), "--warehouse", str(wh), "--quiet"]) == 0
    (sample_home / "session-state" / "new").mkdir()
    (sample_home / "session-state" / "new" / "events.jsonl").write_text('{"type":"user.message","data":{}}\n')

    def interrupt(*args, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(ingest_module.star, "rebuild", interrupt)
    assert main(["ingest", "--copilot-home", str(sample_home), "--warehouse", str(wh)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["interrupted: nothing was written; the warehouse is as it was"]
    assert rows(wh, "select count(*) from _runs") == [(1,)]


def test_ctrl_c_during_commit_waits_for_the_commit(tmp_path):
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute("create table t (x int)")
    real_execute = con.execute

    class Con:  # sends SIGINT to this process while the commit runs
        def execute(self, sql, *a):
            if sql == "commit":
                os.kill(os.getpid(), signal.SIGINT)
            return real_execute(sql, *a)
    with pytest.raises(Interrupted) as caught, transaction(Con()):
        real_execute("insert into t values (1)")
    assert caught.value.committed
    assert real_execute("select count(*) from t").fetchall() == [(1,)]


def test_ctrl_c_during_a_model_is_an_interruption_not_a_broken_model(tmp_path):
    from pipeline import models

    class Con:
        def execute(self, sql, *a):
            if "insert into" in sql:
                raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")
            return self

        def fetchall(self):
            return []
    with pytest.raises(KeyboardInterrupt):
        models.run_models(Con())


def test_a_full_disk_is_one_line_naming_the_folder(sample_home, tmp_path, monkeypatch, capsys):
    def full(self):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(ingest_module.Spool, "load", full)
    wh = tmp_path / "w.duckdb"
    assert main(["ingest", "--copilot-home", str(sample_home), "--warehouse", str(wh)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: no space left on the device of {tmp_path.resolve()}; the warehouse is as it was"]


# ---------------------------------------------------------------------------------- escapes from --out
def test_session_ids_cannot_name_files_outside_the_wiki_or_inject_markup(tmp_path):
    home, user = tmp_path / "home", tmp_path / "user"
    hist = home / "history-session-state"
    hist.mkdir(parents=True)
    (hist / "session_x_1759669955294.json").write_text(json.dumps({
        "sessionId": "../../../history-escape", "timeline": [{"type": "user", "text": "from history"}]}))
    con = sqlite3.connect(home / "session-store.db")
    con.execute("create table sessions (id text, cwd text, summary text)")
    con.execute("create table turns (id integer primary key, session_id text, turn_index int, user_message text)")
    for sid in ("../../store-escape", '<img src=x onerror="alert(1)">', "a](javascript:alert(1)) [b"):
        con.execute("insert into sessions values (?, '/p', 'store session')", [sid])
        con.execute("insert into turns (session_id, turn_index, user_message) values (?, 0, 'hi')", [sid])
    con.commit()
    con.close()
    chats = user / "workspaceStorage" / "ws" / "chatSessions"
    chats.mkdir(parents=True)
    (chats / "c.json").write_text(json.dumps({"version": 3, "sessionId": "../../../../chat-escape", "requests": [
        {"requestId": "r", "timestamp": 1788000000000, "message": {"text": "from chat"}}]}))
    wh, out = tmp_path / "w.duckdb", tmp_path / "site" / "out"
    ingest(wh, [home], [user])
    assert main(["report", "--warehouse", str(wh), "--out", str(out), "--quiet"]) == 0
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "escape" in p.name]
    assert written and all(p.resolve().is_relative_to((out / "wiki" / "sessions").resolve())
                           or p.resolve().is_relative_to((out / "site" / "sessions").resolve()) for p in written)
    index = (out / "wiki" / "index.md").read_text()
    assert "<img" not in index and "](javascript:" not in index
    html = (out / "site" / "index.html").read_text()
    assert "<img src=x" not in html and 'href="javascript' not in html
