"""Team mode: three machines push into one DuckLake at once; the lake holds exactly their rows, and the
models over it equal one warehouse of all three homes. Re-pushing changes nothing; a killed push
leaves no trace; --metrics-only pushes no text; local catalog files work for one person."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import duckdb
import pytest

from pipeline import extensions, lake
from pipeline.cli import main
from pipeline.ingest import ingest
from pipeline.schema import MODELS, STAR

from . import pg
from .conftest import REPO, SAMPLE_HOME
from .conftest import rows as rows_of
from .machines import MACHINES, write_machines

TAGS = {"machine_id", "user_name"}


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory):
    """A PostgreSQL server: CI's (.ci/run starts one), else one of our own when PostgreSQL is installed."""
    server = os.environ.get("COPILOT_TEST_POSTGRES")
    if server:
        yield server
        return
    if pg.binaries() is None:
        pytest.skip("PostgreSQL is not installed")
    folder = Path(tempfile.mkdtemp(prefix="copilot-warehouse-pg-"))  # not under pytest's root-only folder:
    try:                                                              # the server runs as the postgres user
        yield pg.start(folder)
    finally:
        pg.stop(folder)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    """The three homes, each machine's warehouse, and one warehouse of all three homes ingested together."""
    root = tmp_path_factory.mktemp("machines")
    homes = write_machines(root)
    warehouses = {}
    for name, home in homes.items():
        warehouses[name] = root / f"{name}.duckdb"
        ingest(warehouses[name], [home])
    together = root / "together.duckdb"
    ingest(together, list(homes.values()))
    return root, homes, warehouses, together


def _push(catalog: str, warehouse: Path, machine: str, *extra: str, driver: str | None = None) -> subprocess.Popen:
    cmd = [sys.executable] + (["-c", driver] if driver else ["-m", "pipeline"])
    cmd += ["push", "--lake", catalog, "--warehouse", str(warehouse), "--machine", machine, "--user", f"u-{machine}",
            *extra]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lake(catalog: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config=extensions.config())
    lake.attach(con, catalog, read_only=True)
    return con


def _snapshot(catalog: str) -> int:
    con = _lake(catalog)
    try:
        return con.execute("select max(snapshot_id) from ducklake_snapshots('lake')").fetchone()[0]
    finally:
        con.close()


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list:
    return sorted(map(repr, con.execute(sql).fetchall()))


def _equal_warehouses(a: Path, b: Path, tables: list[str]) -> list[str]:
    """Tables whose rows differ (the team-mode tags aside)."""
    con = duckdb.connect()
    con.execute(f"attach '{a}' as a (read_only)")
    con.execute(f"attach '{b}' as b (read_only)")
    differ = []
    for t in tables:
        cols = [r[0] for r in con.execute("select column_name from information_schema.columns where table_catalog = "
                                          "'b' and table_name = ?", [t]).fetchall() if r[0] not in TAGS]
        sel = ", ".join(f'"{c}"' for c in cols)
        if _rows(con, f'select {sel} from a."{t}"') != _rows(con, f'select {sel} from b."{t}"'):
            differ.append(t)
    con.close()
    return differ


def _seen(catalog: str, path: Path, computed: bool = False) -> Path:
    """What a reader of the lake sees (``lake.lake_reader``), every star and model table, written to a DuckDB file
    for ``_equal_warehouses``; ``computed``: the models as views of their SQL, as when the lake's stored models
    are behind its latest push."""
    real = lake._refreshed_from
    if computed:
        lake._refreshed_from = lambda *_a, **_k: None
    try:
        con = lake.lake_reader(catalog)
    finally:
        lake._refreshed_from = real
    try:
        con.execute(f"attach '{path}' as seen")
        for t in [t.name for t in STAR + MODELS]:
            con.execute(f'create table seen."{t}" as select * from "{t}"')
    finally:
        con.close()
    return path


def test_three_machines_push_at_once_and_the_lake_reports_like_one_warehouse(pg_server, machines, tmp_path):
    root, _homes, warehouses, together = machines
    catalog = pg.create_database(pg_server, f"lake_{uuid.uuid4().hex[:8]}")
    data = tmp_path / "lake-data"
    pushes = {m: _push(catalog, wh, m, "--data-path", str(data)) for m, wh in warehouses.items()}
    for m, proc in pushes.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (m, err)
        assert f"{len(MACHINES[m])} new sessions" in out

    # the lake holds each machine's rows, tagged, and nothing else
    con = _lake(catalog)
    for t in (t.name for t in STAR):
        cols = ", ".join(f'"{c.name}"' for c in next(x for x in STAR if x.name == t).columns if c.name not in TAGS)
        lake_rows = _rows(con, f'select {cols} from lake."{t}"')
        union = []
        for wh in warehouses.values():
            w = duckdb.connect(str(wh), read_only=True)
            union += _rows(w, f'select {cols} from "{t}"')
            w.close()
        assert lake_rows == sorted(union), t
    assert con.execute("select machine_id, user_name, count(*) from lake.dim_sessions group by all order by 1"
                       ).fetchall() == [("ci-runner", "u-ci-runner", 1), ("desktop", "u-desktop", 2),
                                        ("laptop", "u-laptop", 2)]
    con.close()

    # report --lake (the data path comes from the catalog): the same models as one warehouse of all three, read
    # from the lake where it is (the models the pushes refreshed)
    out = tmp_path / "report"
    assert main(["report", "--lake", catalog, "--out", str(out), "--quiet"]) == 0
    seen = _seen(catalog, tmp_path / "seen.duckdb")
    per_person = {"report_people", "report_people_usage_weekly"}  # one person in `together`, three in the lake
    assert _equal_warehouses(seen, together, [t.name for t in STAR + MODELS if t.name not in per_person]) == []
    con = duckdb.connect(str(seen), read_only=True)
    assert con.execute("select user_name, n_sessions, n_turns from report_people order by 1").fetchall() == [
        ("u-ci-runner", 1, 1), ("u-desktop", 2, 2), ("u-laptop", 2, 3)]
    totals = "select sum(requests), sum(output_tokens), sum(ai_credits) from report_people_usage_weekly"
    assert con.execute(totals).fetchall() == duckdb.connect(str(together), read_only=True).execute(totals).fetchall()
    # the shared repository is one project with every machine's sessions and files
    assert con.execute("select name, n_sessions from dim_projects where repository = 'acme/shared'").fetchall() == [
        ("shared", 4)]
    assert con.execute("select path, n_sessions from dim_files where path = 'src/parser.py'").fetchall() == [
        ("src/parser.py", 3)]
    con.close()
    assert "u-laptop" in (out / "wiki" / "people.md").read_text()
    assert len(list((out / "parquet").glob("*.parquet"))) > 20

    # pushing again changes nothing: no new snapshot
    before = _snapshot(catalog)
    for m, wh in warehouses.items():
        proc = _push(catalog, wh, m)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and "0 new sessions, 0 changed" in out, err
    assert _snapshot(catalog) == before

    # a push killed before its commit leaves the lake as it was; the next push goes through
    home = write_machines(root / "fourth")["laptop"]
    fourth = root / "fourth.duckdb"
    ingest(fourth, [home])
    killer = ("import os, sys\nimport pipeline.lake as lake\nreal = lake._push_once\n"
              "def killed(*a, **k):\n    real(*a, **k)\n    os.kill(os.getpid(), 9)\n"
              "lake._push_once = killed\nfrom pipeline.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    proc = _push(catalog, fourth, "fourth", driver=killer)
    proc.communicate(timeout=300)
    assert proc.returncode == -9
    assert _snapshot(catalog) == before
    con = _lake(catalog)
    assert con.execute("select count(*) from lake.dim_sessions where machine_id = 'fourth'").fetchone() == (0,)
    con.close()
    proc = _push(catalog, fourth, "fourth")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "2 new sessions" in out, err


def test_one_persons_machines_through_local_catalog_files(machines, tmp_path):
    _root, _homes, warehouses, _together = machines
    for catalog in (tmp_path / "lake.duckdb", tmp_path / "lake.sqlite"):
        for m in ("laptop", "desktop"):
            assert main(["push", "--lake", str(catalog), "--data-path", str(tmp_path / f"{catalog.suffix}-data"),
                         "--warehouse", str(warehouses[m]), "--machine", m, "--user", "ana", "--quiet"]) == 0
        con = lake.lake_reader(str(catalog))
        assert con.execute("select user_name, n_machines, n_sessions from report_people").fetchall() == [("ana", 2, 4)]
        con.close()


def test_a_large_lakes_models_are_refreshed_in_a_process_of_its_own_as_they_are_here(machines, tmp_path, monkeypatch,
                                                                                     capfd, caplog):
    """From APART_SESSIONS sessions in the lake, the refresh a report needs runs in a process of its own (its memory
    goes back to the system before the report reads the lake): the models it stores are those computed over the
    lake as it is, what it logs is on the command's stderr (-v), and a failure there is raised here, as its own
    error, and stores nothing."""
    _root, _homes, warehouses, _together = machines
    catalog = str(tmp_path / "lake.duckdb")
    for m, wh in warehouses.items():
        assert main(["push", "--lake", catalog, "--data-path", str(tmp_path / "data"), "--warehouse", str(wh),
                     "--machine", m, "--user", f"u-{m}", "--no-refresh", "--quiet"]) == 0
    computed = _seen(catalog, tmp_path / "computed.duckdb", computed=True)
    monkeypatch.setattr(lake, "APART_SESSIONS", 5)  # this lake's sessions: the refresh goes to a process of its own
    apart = []
    spawned = lake.refresh_apart

    def counted(*args):
        apart.append(args)
        return spawned(*args)
    monkeypatch.setattr(lake, "refresh_apart", counted)
    caplog.set_level(logging.INFO)  # as -v sets it
    capfd.readouterr()
    lake.reading(catalog, refresh_models=True)
    assert len(apart) == 1
    assert re.search(r"^INFO pipeline\.models: \d+ models built \(full\)", capfd.readouterr().err, re.M)  # its own
    stored = _seen(catalog, tmp_path / "stored.duckdb")
    assert _equal_warehouses(computed, stored, [t.name for t in STAR + MODELS]) == []
    lake.reading(catalog, refresh_models=True)  # up to date: nothing to refresh
    assert len(apart) == 1
    # what fails in that process fails here with its error, and stores nothing: a data file gone (the sample home:
    # enough turns that DuckLake writes them to a parquet file)
    catalog, warehouse = str(tmp_path / "sample-lake.duckdb"), tmp_path / "sample.duckdb"
    ingest(warehouse, [SAMPLE_HOME])
    assert main(["push", "--lake", catalog, "--data-path", str(tmp_path / "sample-data"), "--warehouse",
                 str(warehouse), "--machine", "laptop", "--user", "ana", "--no-refresh", "--quiet"]) == 0
    gone = sorted((tmp_path / "sample-data").rglob("fct_turns/*.parquet"))[0]
    gone.unlink()
    with pytest.raises(lake.LakeError, match=gone.name):
        lake.reading(catalog, refresh_models=True)
    assert len(apart) == 2
    con = _lake(catalog)
    assert con.execute("select count(*) from information_schema.tables where table_catalog = 'lake' "
                       "and table_schema like 'models_%'").fetchone() == (0,)
    con.close()


def test_failed_checks_raised_in_a_worker_arrive_with_their_failures():
    import pickle

    from pipeline.checks import CheckFailure, ChecksFailed

    failed = ChecksFailed([CheckFailure("fk_facts_to_sessions", 2, ["session_id"], [("a",), ("b",)])])
    again = pickle.loads(pickle.dumps(failed))
    assert again.failures == failed.failures and str(again) == str(failed)


def test_query_and_usage_read_the_lake_in_place_the_same_whether_its_models_are_stored_or_behind(
        machines, tmp_path, monkeypatch, capsys):
    """`query --lake` and `usage --lake` copy nothing: the star tables are views over the lake's files; the models
    are the lake's own tables when they follow its latest push, else views of their SQL. Both give every star and
    model table the same rows, and the two verbs print the same."""
    _root, _homes, warehouses, _together = machines
    catalog = str(tmp_path / "lake.duckdb")
    for m, wh in warehouses.items():
        assert main(["push", "--lake", catalog, "--data-path", str(tmp_path / "data"), "--warehouse", str(wh),
                     "--machine", m, "--user", f"u-{m}", "--no-refresh", "--quiet"]) == 0
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    files_before = sorted(tmp_path.rglob("*"))
    computed = _seen(catalog, tmp_path / "computed.duckdb", computed=True)
    capsys.readouterr()
    argvs = (["query", "select user_name, n_sessions, n_turns from report_people order by 1"],
             ["usage", "--by", "month"], ["usage", "--by", "model"])
    behind = []
    for argv in argvs:
        assert main([*argv, "--lake", catalog]) == 0
        behind.append(capsys.readouterr().out)
    assert sorted(tmp_path.rglob("*")) == sorted([*files_before, computed])  # nothing written but our own file
    assert main(["lake-refresh", "--lake", catalog]) == 0
    assert "built whole over 5 sessions" in capsys.readouterr().out
    stored = _seen(catalog, tmp_path / "stored.duckdb")
    assert _equal_warehouses(computed, stored, [t.name for t in STAR + MODELS]) == []
    assert rows_of(stored, "select count(*) from dim_sessions") == [(5,)]
    for argv, out in zip(argvs, behind, strict=True):
        assert main([*argv, "--lake", catalog]) == 0
        assert capsys.readouterr().out == out and out.strip(), argv


@pytest.mark.parametrize("share", [1.0, 0.0], ids=["from what changed", "whole"])
def test_the_lake_models_follow_each_push_and_equal_ones_computed_over_the_whole_lake(machines, tmp_path, caplog,
                                                                                       monkeypatch, share):
    """Each push refreshes the lake's models: the first builds them whole; later ones (a session that grew, a new
    machine's session) take only the rows of the sessions they changed, and of their projects (DuckLake's table
    changes of lake_sessions since the last refresh) - or whole, past REFRESH_SHARE; the laptop's second push names
    another person, whose rows take its sessions from the first. Every model then equals the models computed over
    the whole lake; a reader pinned at an earlier snapshot still reads the lake as it was."""
    _root, homes, warehouses, _together = machines
    catalog = str(tmp_path / "lake.duckdb")
    monkeypatch.setattr(lake, "REFRESH_SHARE", share)

    def push(machine: str, wh: Path, user: str = "") -> lake.PushSummary:
        return lake.push(wh, catalog, data_path=tmp_path / "data", machine=machine, user=user or f"u-{machine}")
    for m in ("laptop", "desktop"):
        first = push(m, warehouses[m])
        assert first.refreshed is not None and first.refreshed.full == (m == "laptop" or share == 0.0)
    before = lake.reading(catalog)
    home = tmp_path / "laptop-home"
    shutil.copytree(homes["laptop"], home)
    grown = tmp_path / "laptop.duckdb"
    ingest(grown, [home])
    log = sorted(home.glob("session-state/*/events.jsonl"))[0]
    with open(log, "a", encoding="utf-8") as fh:
        fh.write('{"type":"user.message","data":{"content":"and the lexer too"},"id":"grown-2",'
                 '"timestamp":"2026-10-05T12:00:00.000Z"}\n')
    ingest(grown, [home])
    with caplog.at_level(logging.INFO, logger="pipeline.lake"):
        summaries = [push("laptop", grown, "ana"), push("ci-runner", warehouses["ci-runner"])]
    # the laptop's two sessions (read from another folder: their rows name it), then the CI runner's one
    assert [(s.refreshed.full, s.refreshed.n_sessions) for s in summaries] == (
        [(False, 2), (False, 1)] if share else [(True, 4), (True, 5)])
    assert push("ci-runner", warehouses["ci-runner"]).refreshed is None  # nothing new: nothing refreshed
    stored = _seen(catalog, tmp_path / "stored.duckdb")
    assert _equal_warehouses(stored, _seen(catalog, tmp_path / "computed.duckdb", computed=True),
                             [t.name for t in STAR + MODELS]) == []
    assert rows_of(stored, "select count(*) from fct_turns where user_message = 'and the lexer too'") == [(1,)]
    assert rows_of(stored, "select user_name, n_sessions from report_people order by 1") == [
        ("ana", 2), ("u-ci-runner", 1), ("u-desktop", 2)]
    con = before.reader()  # as one report's processes read the lake: at the snapshot it started at
    try:
        assert con.execute("select user_name, n_sessions from report_people order by 1").fetchall() == [
            ("u-desktop", 2), ("u-laptop", 2)]
        assert con.execute("select count(*) from fct_turns where user_message = 'and the lexer too'").fetchone() == (0,)
    finally:
        con.close()


def test_a_pushs_refresh_stops_once_another_refresh_covered_its_push(machines, tmp_path):
    """Machines pushing at once: the refresh of a push that another machine's refresh already included stops there
    (the pushes after it refresh themselves) instead of redoing the others' work."""
    _root, _homes, warehouses, _together = machines
    catalog = str(tmp_path / "lake.duckdb")
    first = lake.push(warehouses["laptop"], catalog, data_path=tmp_path / "data", machine="laptop", user="a")
    later = lake.push(warehouses["desktop"], catalog, machine="desktop", user="b", refresh_models=False)
    covered = lake.refresh(catalog, "laptop", covering=first.snapshot)  # the laptop's push is refreshed already
    assert covered.up_to_date and covered.covered and "follow this push" in covered.line(catalog)
    refreshed = lake.refresh(catalog, "desktop", covering=later.snapshot)  # the desktop's is not
    assert not refreshed.up_to_date and refreshed.star_snapshot >= later.snapshot
    assert lake.refresh(catalog).up_to_date


def test_a_refresh_waits_for_the_one_running_and_stops_if_it_covered_its_push(pg_server, machines, tmp_path,
                                                                               monkeypatch):
    """Machines pushing at once: one refresh runs (its lease row in lake_refreshing) and the others wait for it
    instead of computing the same models at once; a waiter whose push the running refresh included stops there, one
    whose push it did not include (or whose holder gave up) computes; a lease that lapsed is not waited for."""
    import threading

    _root, _homes, warehouses, _together = machines
    catalog = pg.create_database(pg_server, f"lake_{uuid.uuid4().hex[:8]}")  # a team's catalog
    monkeypatch.setattr(lake, "LEASE_POLL", 0.05)
    lake.push(warehouses["laptop"], catalog, data_path=tmp_path / "data", machine="laptop", user="a")
    later = lake.push(warehouses["desktop"], catalog, machine="desktop", user="b", refresh_models=False)
    digest = lake.models_digest()

    def write(sql: str, params: list) -> None:  # as another machine
        con = duckdb.connect(config=extensions.config())
        lake.attach(con, catalog)
        con.execute(sql, params)
        con.close()

    def hold(lease: str, at: int, lapses: str = "10 minutes") -> None:
        write(f"insert into lake.lake_refreshing values (?, ?, ?, 'elsewhere', now(), now() + interval '{lapses}')",
              [lease, digest, at])

    # the moment a refresh finds another's lease held (and so waits for it), not a time guessed: a busy machine
    # took longer than a second to get there, and the "elsewhere" row below came before it waited
    waiting = threading.Event()
    held = lake._lease_held

    def lease_held(con, digest):
        got = held(con, digest)
        if got is not None and got[1] == "elsewhere":
            waiting.set()
        return got
    monkeypatch.setattr(lake, "_lease_held", lease_held)

    def refresh_in_thread(machine: str, covering: int) -> tuple[threading.Thread, list]:
        done: list = []
        waiting.clear()
        thread = threading.Thread(target=lambda: done.append(lake.refresh(catalog, machine, covering=covering)))
        thread.start()
        return thread, done

    hold("lapsed", later.snapshot, lapses="-1 second")  # a machine that died holding it: not waited for
    hold("running", later.snapshot)
    thread, done = refresh_in_thread("desktop", later.snapshot)
    assert waiting.wait(60) and thread.is_alive() and not done  # waiting for "elsewhere"
    write("delete from lake.lake_refreshing where lease_id = ?", ["running"])  # it gave up: this one computes
    thread.join(60)
    assert done and not done[0].up_to_date and done[0].star_snapshot >= later.snapshot and done[0].waited > 0

    third = lake.push(warehouses["ci-runner"], catalog, machine="ci-runner", user="c", refresh_models=False)
    hold("covering", third.snapshot)
    thread, done = refresh_in_thread("ci-runner", third.snapshot)
    assert waiting.wait(60) and thread.is_alive()
    # the running refresh is recorded from a snapshot that includes the waiter's push: it stops, nothing computed
    write("insert into lake.lake_models values (?, ?, now(), 'elsewhere', 1, false, 1.0)", [digest, third.snapshot])
    thread.join(60)
    assert done and done[0].up_to_date and done[0].star_snapshot == third.snapshot and done[0].waited > 0
    con = _lake(catalog)
    left = con.execute("select lease_id from lake.lake_refreshing order by 1").fetchall()
    con.close()
    assert left == [("covering",), ("lapsed",)]  # the refresh that ran gave its own lease back


def test_a_push_whose_refresh_fails_stays_pushed_and_says_so(machines, tmp_path, monkeypatch, capsys):
    from pipeline.models import ModelError

    _root, _homes, warehouses, _together = machines
    catalog = str(tmp_path / "lake.duckdb")

    def broken(*_a, **_k):
        raise ModelError("model report_topics failed: as a test breaks it")
    monkeypatch.setattr(lake, "run_models", broken)
    assert main(["push", "--lake", catalog, "--data-path", str(tmp_path / "data"), "--warehouse",
                 str(warehouses["laptop"]), "--machine", "laptop"]) == 0
    out = capsys.readouterr().out
    assert "2 new sessions" in out and "the models were not refreshed: model report_topics failed" in out
    assert "lake-refresh" in out
    monkeypatch.undo()
    con = lake.lake_reader(catalog)  # behind: computed, with the pushed sessions
    assert con.execute("select count(*) from dim_sessions").fetchone() == (2,)
    con.close()
    assert main(["lake-refresh", "--lake", catalog]) == 0
    assert "built whole over 2 sessions" in capsys.readouterr().out
    assert main(["lake-refresh", "--lake", catalog]) == 0
    assert "follow its latest push" in capsys.readouterr().out


def test_a_session_that_grew_replaces_its_rows_in_the_lake(tmp_path):
    home = write_machines(tmp_path / "homes")["laptop"]
    wh, catalog = tmp_path / "w.duckdb", str(tmp_path / "lake.duckdb")
    ingest(wh, [home])
    assert main(["push", "--lake", catalog, "--data-path", str(tmp_path / "data"), "--warehouse", str(wh),
                 "--machine", "laptop", "--user", "ana", "--quiet"]) == 0
    log = sorted(home.glob("session-state/*/events.jsonl"))[0]
    with open(log, "a", encoding="utf-8") as fh:
        fh.write('{"type":"user.message","data":{"content":"one more thing"},"id":"grown-1",'
                 '"timestamp":"2026-10-05T12:00:00.000Z"}\n')
    ingest(wh, [home])
    summary = lake.push(wh, catalog, machine="laptop", user="ana")
    assert (summary.n_sessions_new, summary.n_sessions_changed, summary.n_sessions_unchanged) == (0, 1, 1)
    con = _lake(catalog)
    w = duckdb.connect(str(wh), read_only=True)
    for table in ("dim_sessions", "fct_turns", "fct_tool_calls"):
        n_lake = con.execute(f'select count(*) from lake."{table}"').fetchone()
        assert n_lake == w.execute(f'select count(*) from "{table}"').fetchone(), table  # replaced, not added
    assert con.execute("select count(*) from lake.fct_turns where user_message = 'one more thing'").fetchone() == (1,)
    con.close()
    w.close()


def test_two_reports_of_the_lake_at_once_both_succeed(machines, tmp_path):
    """Two `report --lake` started together after pushes that left the models behind: both refresh them, one
    commits first and the other finds nothing left to do (or reads the lake as it was when it started); each
    writes the whole report, and nothing is copied."""
    _root, _homes, warehouses, _together = machines
    catalog = str(tmp_path / "lake.sqlite")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for round_, machine in enumerate(["laptop", "desktop", None]):
        if machine:
            assert main(["push", "--lake", catalog, "--data-path", str(tmp_path / "data"), "--warehouse",
                         str(warehouses[machine]), "--machine", machine, "--user", "ana", "--no-refresh",
                         "--quiet"]) == 0
        procs = [subprocess.Popen([sys.executable, "-m", "pipeline", "report", "--lake", catalog, "--out",
                                   str(tmp_path / f"out-{round_}-{i}"), "--quiet"], cwd=REPO, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
        results = [(p.wait(300), p.communicate()[1]) for p in procs]
        assert [code for code, _err in results] == [0, 0], results
        n = 4 if machine is None else {"laptop": 2, "desktop": 4}[machine]
        for i in range(2):
            sessions = tmp_path / f"out-{round_}-{i}" / "parquet" / "dim_sessions.parquet"
            assert duckdb.sql(f"select count(*) from '{sessions}'").fetchone() == (n,)
    assert not list((tmp_path / "cache").rglob("*.duckdb"))  # no copy (the extensions and fonts are cached)
    con = _lake(catalog)
    assert con.execute("select count(*), count(distinct star_snapshot) from lake.lake_models").fetchone() == (2, 2)
    con.close()


@pytest.mark.parametrize("damage", ["truncated", "garbled", "gone"])
def test_a_damaged_data_file_in_the_lake_is_one_line_naming_it(tmp_path, capsys, damage):
    """The sample home: enough turns that DuckLake writes them to a parquet file (a few rows stay inlined in
    the catalog)."""
    catalog, warehouse = str(tmp_path / "lake.duckdb"), tmp_path / "w.duckdb"
    ingest(warehouse, [SAMPLE_HOME])
    assert main(["push", "--lake", catalog, "--data-path", str(tmp_path / "data"), "--warehouse",
                 str(warehouse), "--machine", "laptop", "--user", "ana", "--quiet"]) == 0
    file = sorted((tmp_path / "data").rglob("fct_turns/*.parquet"))[0]
    data = file.read_bytes()
    if damage == "truncated":
        file.write_bytes(data[: len(data) // 2])
    elif damage == "garbled":
        middle = (bytes(range(256)) * (len(data) // 256 + 1))[: len(data) - 12]
        file.write_bytes(data[:4] + middle + data[-8:])  # the size the catalog recorded, the bytes not
    else:
        file.unlink()
    for argv in (["report", "--lake", catalog, "--out", str(tmp_path / "out")],
                 ["query", "select count(*) from fct_turns", "--lake", catalog]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(file) in err and "fct_turns" in err and "internal error" not in err, err


def test_report_lake_reads_the_lake_where_it_is_and_refuses_a_warehouse_beside_it(machines, tmp_path, capsys):
    """`report --lake L --warehouse W`: one line, W neither read nor written (before, W was the lake's local copy)."""
    _root, _homes, warehouses, _together = machines
    catalog = str(tmp_path / "lake.duckdb")
    own = tmp_path / "own.duckdb"
    shutil.copy(warehouses["laptop"], own)
    assert main(["push", "--lake", catalog, "--data-path", str(tmp_path / "data"), "--warehouse", str(own),
                 "--machine", "laptop", "--user", "ana", "--quiet"]) == 0
    before = own.read_bytes()
    assert main(["report", "--lake", catalog, "--warehouse", str(own), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "leave --warehouse out" in err, err
    assert own.read_bytes() == before and not (tmp_path / "out").exists()


def test_a_sqlite_file_as_the_warehouse_is_one_line_and_changes_nothing(tmp_path, capsys):
    import sqlite3

    db = tmp_path / "history.sqlite"
    con = sqlite3.connect(db)
    con.execute("create table notes (body text)")
    con.execute("insert into notes values ('mine')")
    con.commit()
    con.close()
    before = db.read_bytes()
    catalog = tmp_path / "lake.duckdb"
    for argv in (["report", "--warehouse", str(db), "--out", str(tmp_path / "out")],
                 ["push", "--lake", str(catalog), "--data-path", str(tmp_path / "data"), "--warehouse", str(db)],
                 ["ingest", "--warehouse", str(db), "--copilot-home", str(SAMPLE_HOME)],
                 ["query", "select 1", "--warehouse", str(db)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is a SQLite database, not a warehouse" in err, err
    assert db.read_bytes() == before
    assert not catalog.exists() and not (tmp_path / "data").exists() and not (tmp_path / "out").exists()


def test_metrics_only_pushes_no_text(machines, tmp_path):
    _root, _homes, warehouses, _together = machines
    catalog = str(tmp_path / "metrics.duckdb")
    assert main(["push", "--lake", catalog, "--data-path", str(tmp_path / "data"), "--warehouse",
                 str(warehouses["laptop"]), "--metrics-only", "--quiet"]) == 0
    con = _lake(catalog)
    for table, columns in lake.TEXT_COLUMNS.items():
        for column in columns:
            assert con.execute(f'select count("{column}") from lake."{table}"').fetchone() == (0,), (table, column)
    assert con.execute("select count(*), sum(requests) from lake.fct_usage").fetchone()[0] > 0
    assert con.execute("select count(*) from lake.fct_turns").fetchone()[0] == 3  # the turns are there, not their text
    con.close()
    # switching to full text pushes every session again
    assert main(["push", "--lake", catalog, "--warehouse", str(warehouses["laptop"]), "--quiet"]) == 0
    con = _lake(catalog)
    assert con.execute("select count(user_message) from lake.fct_turns").fetchone() == (3,)
    con.close()


@pytest.mark.parametrize("catalog", [
    "postgres:dbname=lake host=127.0.0.1 password=hunter2secret",
    "postgres:postgresql://ana:hunter2secret@127.0.0.1/lake",
    "postgres:postgres://ana:hunter2secret@127.0.0.1:5432/lake?sslmode=disable",
    "postgres:postgresql://ana%3Ahunter2secret@127.0.0.1/lake",
    "postgresql:postgresql://127.0.0.1/lake?user=ana&password=hunter2secret",
])
def test_a_password_on_the_command_line_is_refused_and_never_printed(machines, tmp_path, capsys, catalog):
    _root, _homes, warehouses, _together = machines
    for argv in (["push", "--lake", catalog, "--warehouse", str(warehouses["laptop"])],
                 ["report", "--lake", catalog, "--out", str(tmp_path / "out")],
                 ["query", "select 1", "--lake", catalog]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "PGPASSWORD" in err and "hunter2secret" not in err, err
    assert not (tmp_path / "out").exists()


def test_a_postgres_uri_is_named_by_its_database():
    assert lake.describe("postgres:postgresql://ana@db.example:5432/team_lake?sslmode=require") == \
        "postgres database team_lake"
    assert lake.attach_uri("postgres:postgresql://ana@db.example/team_lake") == \
        "ducklake:postgres:postgresql://ana@db.example/team_lake"



def test_a_warehouse_written_by_a_newer_duckdb_says_what_to_do(tmp_path, monkeypatch, capsys):
    """DuckDB is pinned to 1.5.5 for the extensions: a file an earlier version wrote with DuckDB 2.x
    cannot be read, and the message says why and what to do."""
    wh = tmp_path / "w.duckdb"
    wh.write_bytes(b"\0" * 8 + b"DUCK" + b"written by duckdb 2")  # a DuckDB file's magic bytes

    def newer(*args, **kwargs):
        raise duckdb.IOException("IO Error: Trying to read a database file with version number 999, but we can only "
                                 "read versions between 64 and 68.\nThe database file was created with an newer "
                                 "version of DuckDB.")
    monkeypatch.setattr(duckdb, "connect", newer)
    assert main(["query", "select 1", "--warehouse", str(wh)]) == 2
    err = capsys.readouterr().err
    assert "written by a newer DuckDB" in err and "move it aside and run `ingest`" in err


def test_the_first_push_names_data_path_and_metrics_only_never_strips_text_silently(tmp_path, capsys):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [SAMPLE_HOME])
    catalog = str(tmp_path / "lake.sqlite")
    assert main(["push", "--lake", catalog, "--warehouse", str(wh), "--machine", "m1"]) == 2
    err = capsys.readouterr().err
    assert "its first push needs --data-path DIR" in err and "DATA_PATH" not in err
    data = str(tmp_path / "data")
    assert main(["push", "--lake", catalog, "--data-path", data, "--warehouse", str(wh), "--machine", "m1"]) == 0
    titled = rows_of(wh, "select count(title) from dim_sessions")[0][0]
    # a metrics-only push over sessions pushed with their text: refused, the lake keeps every title
    assert main(["push", "--lake", catalog, "--warehouse", str(wh), "--machine", "m1", "--metrics-only"]) == 2
    assert "in the lake with their text" in capsys.readouterr().err
    con = duckdb.connect(config=extensions.config())
    try:
        lake.attach(con, catalog, read_only=True)
        assert con.execute("select count(title) from lake.dim_sessions").fetchone()[0] == titled > 0
    finally:
        con.close()
    assert main(["push", "--lake", catalog, "--warehouse", str(wh), "--machine", "m1", "--metrics-only",
                 "--force"]) == 0
    con = duckdb.connect(config=extensions.config())
    try:
        lake.attach(con, catalog, read_only=True)
        assert con.execute("select count(title) from lake.dim_sessions").fetchone()[0] == 0
    finally:
        con.close()


def test_maintenance_merges_files_expires_snapshots_and_keeps_every_row(machines, tmp_path, monkeypatch, capsys):
    _root, homes, warehouses, _together = machines
    catalog, data = str(tmp_path / "lake.sqlite"), tmp_path / "data"
    con = duckdb.connect(config=extensions.config())
    lake.attach(con, catalog, data_path=data)
    con.execute("call lake.set_option('data_inlining_row_limit', 0)")  # small pushes write files, as large ones do
    con.close()
    for m in warehouses:
        assert main(["push", "--lake", catalog, "--data-path", str(data), "--warehouse", str(warehouses[m]),
                     "--machine", m, "--user", m, "--quiet"]) == 0
    con = _lake(catalog)
    before = {t: _rows(con, f'select * from lake."{t}"') for t in lake.LAKE_TABLES}
    con.close()
    parquet_before = len(list(data.rglob("*.parquet")))
    summary = lake.maintain(catalog, keep="0 seconds")
    assert summary.files_after < summary.files_before and summary.snapshots_expired > 0
    assert summary.files_deleted > 0 and len(list(data.rglob("*.parquet"))) < parquet_before
    con = _lake(catalog)
    assert {t: _rows(con, f'select * from lake."{t}"') for t in lake.LAKE_TABLES} == before  # every row kept
    con.close()
    # the models of another version that nothing refreshed for longer than `keep` are dropped; this version's stay
    con = duckdb.connect(config=extensions.config())
    lake.attach(con, catalog)
    con.execute("create schema lake.models_0123456789abcdef")
    con.execute("create table lake.models_0123456789abcdef.report_topics (term VARCHAR)")
    con.execute("insert into lake.lake_models values ('0123456789abcdef', 1, now() - interval 1 hour, 'old', 1, "
                "true, 0.1)")
    con.close()
    assert lake.maintain(catalog, keep="30 minutes").models_dropped == 1
    con = _lake(catalog)
    schemas = {r[0] for r in con.execute("select schema_name from information_schema.schemata "
                                         "where catalog_name = 'lake'").fetchall()}
    assert lake.models_schema() in schemas and "models_0123456789abcdef" not in schemas
    assert con.execute("select distinct models_digest from lake.lake_models").fetchall() == [
        (lake.models_schema().removeprefix("models_"),)]
    con.close()
    # the verb, and a push that makes the count maintains the lake itself
    assert main(["lake-maintain", "--lake", catalog]) == 0
    assert "small files merged" in capsys.readouterr().out
    monkeypatch.setattr(lake, "MAINTAIN_EVERY", 4)
    wh = tmp_path / "again.duckdb"
    ingest(wh, [homes["laptop"]])
    log = sorted(homes["laptop"].glob("session-state/*/events.jsonl"))[0]
    shutil.copyfile(log, tmp_path / "log.bak")
    try:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write('{"type":"user.message","data":{"content":"and another"},"id":"grown-2",'
                     '"timestamp":"2026-10-06T12:00:00.000Z"}\n')
        ingest(wh, [homes["laptop"]])
    finally:
        shutil.copyfile(tmp_path / "log.bak", log)
    pushed = lake.push(wh, catalog, machine="laptop", user="laptop")  # the 4th push (three machines pushed first)
    assert pushed.n_sessions_changed == 1 and pushed.maintained is not None


def test_a_crowded_sqlite_catalog_recommends_postgresql(machines, tmp_path, monkeypatch, caplog):
    _root, _homes, warehouses, _together = machines
    catalog = str(tmp_path / "lake.sqlite")
    real = lake._push_once
    conflicts = iter(range(lake.SQLITE_CROWDED + 1))

    def crowded(*args, **kwargs):  # as if other machines committed first, SQLITE_CROWDED + 1 times
        if next(conflicts, None) is not None:
            raise duckdb.TransactionException("Transaction conflict: another push committed first")
        return real(*args, **kwargs)
    monkeypatch.setattr(lake, "_push_once", crowded)
    monkeypatch.setattr(lake.time, "sleep", lambda _s: None)
    with caplog.at_level("WARNING", logger="pipeline.lake"):
        summary = lake.push(warehouses["laptop"], catalog, data_path=tmp_path / "data", machine="laptop", user="a")
    assert summary.n_attempts == lake.SQLITE_CROWDED + 2 and summary.n_sessions_new > 0
    assert "has outgrown it - a PostgreSQL catalog" in caplog.text



def test_writers_of_a_sqlite_catalog_take_turns_instead_of_retrying_into_each_other(machines, tmp_path, monkeypatch,
                                                                                   caplog, capsys):
    """Pushes, refreshes and maintenances of a SQLite catalog wait for the writer ahead of them (a lock file beside the
    catalog) and then run once; retrying into each other instead, 6 pushes at once on a loaded machine livelocked
    with a refresh: 1 of 6 landed, after 360 s. Past $COPILOT_WAREHOUSE_LOCK_WAIT the wait is one line."""
    import threading

    _root, _homes, warehouses, _together = machines
    catalog = str(tmp_path / "lake.sqlite")
    lake.push(warehouses["laptop"], catalog, data_path=tmp_path / "data", machine="laptop", user="a")
    assert (tmp_path / "lake.sqlite.writer").exists()

    def waits_its_turn(fn, *args, **kwargs):
        done = []
        with lake._turn(catalog) as waited:  # another writer's turn, held by this test
            assert waited == 0.0
            worker = threading.Thread(target=lambda: done.append(fn(*args, **kwargs)))
            worker.start()
            worker.join(1.0)
            assert worker.is_alive() and not done  # waiting, not retrying nor failing
        worker.join(60)
        assert done
        return done[0]

    with caplog.at_level("INFO", logger="pipeline.lake"):
        pushed = waits_its_turn(lake.push, warehouses["desktop"], catalog, machine="desktop", user="b",
                                refresh_models=False)
        assert pushed.n_attempts == 1 and pushed.n_sessions_new > 0
        refreshed = waits_its_turn(lake.refresh, catalog, "desktop")
        assert not refreshed.up_to_date and refreshed.n_attempts == 1 and refreshed.waited > 0  # it waited its turn
        maintained = waits_its_turn(lake.maintain, catalog, "0 seconds")
        assert maintained.snapshots_expired > 0
    assert caplog.text.count("waiting for its turn") == 3 and "conflicted" not in caplog.text

    monkeypatch.setenv("COPILOT_WAREHOUSE_LOCK_WAIT", "0.3")
    capsys.readouterr()
    with lake._turn(catalog):
        assert main(["push", "--lake", catalog, "--warehouse", str(warehouses["ci-runner"]), "--machine", "ci-runner",
                     "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kept writing the lake's SQLite catalog" in err[0] and "for 0.3 s" in err[0], err
    with lake._turn(str(tmp_path / "other.duckdb")) as waited:  # a DuckDB catalog file has DuckDB's own lock
        assert waited == 0.0 and not (tmp_path / "other.duckdb.writer").exists()
    assert main(["push", "--lake", catalog, "--warehouse", str(warehouses["ci-runner"]), "--machine", "ci-runner",
                 "--quiet"]) == 0
    # no turn to be had (a folder this user may only read; here the lock file cannot be opened): a refresh that
    # finds nothing to write still succeeds, as before there were turns
    gate = tmp_path / "lake.sqlite.writer"
    gate.unlink()
    gate.mkdir()
    assert lake.refresh(catalog).up_to_date
    gate.rmdir()

    def no_locks(_fd, _how):  # a share whose file system takes no locks
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert lake.refresh(catalog).up_to_date


_HOLD = """
import sys, time, duckdb
from pipeline import extensions, lake
con = duckdb.connect(config=extensions.config())
lake.attach(con, sys.argv[1])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_a_duckdb_catalog_in_use_by_another_process_is_waited_for(machines, tmp_path, monkeypatch, capsys):
    """A DuckDB catalog file is open in one process at a time: a push (or a reader) while another process has the
    lake open waits for it and succeeds; past $COPILOT_WAREHOUSE_LOCK_WAIT it is one line saying why (before:
    DuckDB's lock error, the push lost)."""
    _root, _homes, warehouses, _together = machines
    catalog = str(tmp_path / "lake.duckdb")
    assert main(["push", "--lake", catalog, "--data-path", str(tmp_path / "data"), "--warehouse",
                 str(warehouses["laptop"]), "--machine", "laptop", "--quiet"]) == 0

    def hold(seconds: float) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", _HOLD, catalog, str(seconds)], cwd=REPO,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "held"
        return proc

    monkeypatch.setenv("COPILOT_WAREHOUSE_LOCK_WAIT", "0.5")
    holder = hold(5)
    try:
        assert main(["push", "--lake", catalog, "--warehouse", str(warehouses["desktop"]), "--machine", "desktop",
                     "--quiet"]) == 2
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stayed in use by another process for 0.5 s" in err[0] and "PostgreSQL" in err[0], err

    monkeypatch.setenv("COPILOT_WAREHOUSE_LOCK_WAIT", "60")
    for verb in (["push", "--lake", catalog, "--warehouse", str(warehouses["desktop"]), "--machine", "desktop",
                  "--quiet"], ["query", "--lake", catalog, "select count(*) from dim_sessions"]):
        holder = hold(1.5)
        try:
            assert main(verb) == 0
        finally:
            holder.wait()
        assert holder.returncode == 0  # it held the lake to the end: the verb waited for it
    con = _lake(catalog)
    assert con.execute("select count(distinct machine_id) from lake.lake_sessions").fetchone()[0] == 2
    con.close()


def test_the_lake_tables_are_written_in_session_order(tmp_path):
    """Every lake table with a session_id is a DuckLake sorted table (set by the push that creates it): each data
    file holds its rows in session order, so a reader's filter on a session or a range of them skips row groups
    of the others. The sample home: enough turns that DuckLake writes them to a parquet file."""
    catalog, warehouse = str(tmp_path / "lake.duckdb"), tmp_path / "w.duckdb"
    ingest(warehouse, [SAMPLE_HOME])
    assert main(["push", "--lake", catalog, "--data-path", str(tmp_path / "data"), "--warehouse", str(warehouse),
                 "--machine", "laptop", "--user", "ana", "--quiet"]) == 0
    con = _lake(catalog)
    sorted_by = dict(con.execute(
        "select t.table_name, e.expression from __ducklake_metadata_lake.ducklake_table as t "
        "join __ducklake_metadata_lake.ducklake_sort_info as s on s.table_id = t.table_id and s.end_snapshot is null "
        "join __ducklake_metadata_lake.ducklake_sort_expression as e on e.sort_id = s.sort_id "
        "where t.end_snapshot is null").fetchall())
    con.close()
    assert sorted_by == {t.name: "session_id" for t in STAR if any(c.name == "session_id" for c in t.columns)}
    files = sorted((tmp_path / "data").rglob("fct_turns/*.parquet"))
    assert files
    for file in files:
        ids = [r[0] for r in duckdb.sql(f"select session_id from read_parquet('{file}', file_row_number = true) "
                                        "order by file_row_number").fetchall()]
        assert ids == sorted(ids) and len(set(ids)) > 1, file
    # a second push sets nothing again (no change of the catalog for it)
    before = _snapshot(catalog)
    assert main(["push", "--lake", catalog, "--warehouse", str(warehouse), "--machine", "laptop", "--quiet"]) == 0
    assert _snapshot(catalog) == before


def test_a_push_counts_sessions_and_says_memories_of_no_session_apart(tmp_path):
    """The sample's workspace memories belong to no session: they are pushed, but are not a session."""
    wh, catalog = tmp_path / "w.duckdb", str(tmp_path / "lake.duckdb")
    ingest(wh, [SAMPLE_HOME], vscode_users=[SAMPLE_HOME.parent / "vscode-user"])
    n_sessions = rows_of(wh, "select count(*) from dim_sessions")[0][0]
    n_loose = rows_of(wh, "select count(*) from fct_memories where session_id is null")[0][0]
    assert n_sessions > 0 and n_loose > 0
    summary = lake.push(wh, catalog, data_path=tmp_path / "data", machine="laptop", user="ana")
    assert (summary.n_sessions_new, summary.loose_memories) == (n_sessions, True)
    assert f"{n_sessions} new sessions, 0 changed, 0 unchanged, memories of no session;" in summary.line(catalog)
    assert summary.refreshed.full and summary.refreshed.n_sessions == n_sessions  # ... and the models' line too
    again = lake.push(wh, catalog, machine="laptop", user="ana")
    assert (again.n_sessions_new, again.n_sessions_unchanged, again.loose_memories) == (0, n_sessions, False)
    assert again.refreshed is None
    con = _lake(catalog)
    assert con.execute("select count(*) from lake.fct_memories where session_id is null").fetchone()[0] == n_loose
