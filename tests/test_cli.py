"""The command line as a user meets it: every item found by trying it (issue: a CLI without rough edges)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.ingest import ingest

from .conftest import REPO, SAMPLE_HOME

PY = sys.executable


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    wh = tmp_path_factory.mktemp("cli") / "w.duckdb"
    ingest(wh, [SAMPLE_HOME])
    return wh


def run(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "pipeline", *args], capture_output=True, text=True, cwd=cwd or REPO,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_query_prints_any_duckdb_type_and_iso_timestamps(warehouse, capsys):
    sql = ("select ended_at - started_at as took, started_at, models, 1.5::decimal(10, 2) as d, "
           "'00000000-0000-0000-0000-000000000001'::uuid as u, '\\x01'::blob as b, "
           "170141183460469231731687303715884105727::hugeint as big, {'a': 1} as s "
           "from dim_sessions where session_id = 'dd47978c-bf05-5f0e-ae2a-1880e2c4898a'")
    outputs = {}
    for fmt in ("table", "csv", "json", "markdown"):
        assert main(["query", sql, "--warehouse", str(warehouse), "--format", fmt]) == 0
        outputs[fmt] = capsys.readouterr().out
    assert json.loads(outputs["json"]) == [{"took": "02:10:00", "started_at": "2026-09-01T09:00:00Z",
                                            "models": ["claude-sonnet-4.6"], "d": "1.50",
                                            "u": "00000000-0000-0000-0000-000000000001", "b": "\\x01",
                                            "big": 170141183460469231731687303715884105727, "s": {"a": 1}}]
    for fmt in ("table", "csv", "markdown"):  # the same text in every format
        assert "02:10:00" in outputs[fmt] and "2026-09-01T09:00:00Z" in outputs[fmt], fmt
    assert "shape:" not in outputs["table"] and "str" not in outputs["table"].splitlines()[1]


def test_table_says_when_it_cut(warehouse, capsys):
    assert main(["query", "select range as n, repeat('x', 100) as t from range(250)", "--warehouse",
                 str(warehouse)]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 202 and "first 200 rows shown" in err and "text longer than 60" in err
    assert main(["query", "select range as n from range(250)", "--warehouse", str(warehouse),
                 "--format", "csv"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 251


def test_table_aligns_by_the_columns_a_text_takes_in_a_terminal(warehouse, capsys):
    """A Chinese, Japanese or Korean character takes two columns, a combining mark none: the table pads and cuts
    by those columns, so the next column starts at the same place on every line."""
    from wcwidth import wcswidth

    sql = ("select * from (values ('資訊', 1), ('javax', 22), ('cafe\u0301', 333), (repeat('語', 45), 4), "
           "(repeat('e\u0301', 300), 5)) as t(term, n)")
    assert main(["query", sql, "--warehouse", str(warehouse)]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert [wcswidth(line) for line in lines[2:]] == [wcswidth(lines[0])] * 5  # every row as wide as the header
    assert lines[3].startswith("javax ") and "…" in lines[5] and "…" in lines[6]
    assert max(wcswidth(line.rsplit("  ", 1)[0].rstrip()) for line in lines[2:]) <= 60  # cut to 60 columns
    assert "text longer than 60" in err


def test_version_and_flags_before_or_after_the_verb(warehouse):
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("copilot-warehouse ") and "DuckDB 1.5.5" in \
        version.stdout
    for args in (["-q", "query", "select 42 as x", "--warehouse", str(warehouse)],
                 ["query", "select 42 as x", "--warehouse", str(warehouse), "-q"],
                 ["query", "-v", "select 42 as x", "--warehouse", str(warehouse)],
                 ["--verbose", "query", "select 42 as x", "--warehouse", str(warehouse), "--quiet"]):
        r = run(*args)
        assert r.returncode == 0 and "42" in r.stdout, (args, r.stderr)


def test_copilot_warehouse_sets_the_default_from_any_folder(warehouse, tmp_path):
    r = run("query", "select count(*) as n from dim_sessions", cwd=tmp_path,
            env={"COPILOT_WAREHOUSE": str(warehouse), "PYTHONPATH": str(REPO)})
    assert r.returncode == 0 and r.stdout.split()[-1] == "8", r.stderr
    assert not (tmp_path / "data").exists()


def test_sources_lists_what_ingest_would_read(tmp_path):
    r = run("sources", "--copilot-home", str(SAMPLE_HOME), "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = {x["kind"]: x for x in json.loads(r.stdout)}
    assert rows["events"]["files"] == len(list(SAMPLE_HOME.glob("session-state/*/events.jsonl")))
    assert rows["events"]["bytes"] == sum(p.stat().st_size for p in SAMPLE_HOME.glob("session-state/*/events.jsonl"))
    assert rows["session_store"]["bytes"] == sum(p.stat().st_size for p in SAMPLE_HOME.glob("session-store.db*"))
    assert rows["events"]["last_change"].endswith("Z")
    assert all(" " not in key for key in rows["events"])  # keys a script can name


def test_a_folder_above_the_right_one_is_named(tmp_path):
    home = tmp_path / "home"
    shutil.copytree(SAMPLE_HOME, home / ".copilot")
    (home / ".config" / "Code" / "User" / "workspaceStorage").mkdir(parents=True)
    for verb in ("sources", "ingest"):
        args = [verb, "--copilot-home", str(home), "--vscode-user", str(home / ".config" / "Code")]
        if verb == "ingest":
            args += ["--warehouse", str(tmp_path / "w.duckdb")]
        r = run(*args)
        assert r.returncode == 0
        assert f"did you mean {home / '.copilot'}?" in r.stderr, r.stderr
        assert f"did you mean {home / '.config' / 'Code' / 'User'}?" in r.stderr
    r = run("sources", "--copilot-home", str(home / ".copilot"))
    assert "warning" not in r.stderr


def test_ingest_summary_separates_the_run_from_the_warehouse(tmp_path):
    wh = tmp_path / "w.duckdb"
    first = run("ingest", "--copilot-home", str(SAMPLE_HOME), "--warehouse", str(wh))
    again = run("ingest", "--copilot-home", str(SAMPLE_HOME), "--warehouse", str(wh))
    assert first.stdout.startswith("ingest full: read ") and again.stdout.startswith("ingest incremental: read 0 files")
    assert "  warehouse now: 8 sessions," in first.stdout and "  warehouse now: 8 sessions," in again.stdout


def test_a_report_that_cannot_start_writes_nothing(tmp_path):
    r = run("report", "--warehouse", str(tmp_path / "missing.duckdb"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "no warehouse" in r.stderr and not (tmp_path / "out").exists()


def test_demo_explains_its_planted_damages_and_ends_with_the_site(tmp_path):
    r = run("demo", "--out", str(tmp_path / "demo"))
    assert r.returncode == 0 and "warning" not in r.stderr.lower(), r.stderr
    assert "3 damaged records planted on purpose" in r.stdout
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == f"open in a browser: {(tmp_path / 'demo' / 'site' / 'index.html').resolve()}"
    hint = next(line for line in lines if line.startswith("try:  "))[len("try:  "):]
    tried = subprocess.run(hint, shell=True, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert tried.returncode == 0 and "Token refresh rotation" in tried.stdout, tried.stderr


def test_make_help_shows_values():
    if not shutil.which("make"):
        pytest.skip("no make")
    r = subprocess.run(["make", "-s", "help", "WAREHOUSE=/tmp/elsewhere.duckdb"], capture_output=True, text=True,
                       cwd=REPO, timeout=60)
    assert "$(" not in r.stdout and "/tmp/elsewhere.duckdb" in r.stdout


def test_make_sample_is_byte_reproducible(tmp_path):
    from tools import sample

    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        subprocess.run([PY, "-m", "tools.sample", str(out)], cwd=REPO, check=True, capture_output=True, timeout=120)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    # and the committed corpus is what the generator writes
    for rel in files:
        assert (a / rel).read_bytes() == (REPO / "data" / "sample" / rel).read_bytes(), rel
    assert sample.WAL_SALT  # the salts are fixed, and the WAL stays valid: its last rows are read
    import sqlite3
    shutil.copytree(a / "copilot-home", tmp_path / "copy")
    con = sqlite3.connect(tmp_path / "copy" / "session-store.db")
    assert con.execute("select count(*) from sessions").fetchone()[0] == 2
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    con.close()


def test_a_reader_that_stops_early_ends_the_pipe_quietly(warehouse):
    # `query ... | head`: the pipe closes while rows are still being written. The table (200 rows, a few KB) may
    # all fit in the pipe before `head` exits - then its note that more rows were left out is said, and nothing
    # else (a loaded machine did that now and then); whichever comes first, no error and no traceback
    r = subprocess.run(f'"{PY}" -m pipeline query --warehouse "{warehouse}" '
                       '"select range from range(200000)" | head -1; exit ${PIPESTATUS[0]}', shell=True,
                       capture_output=True, text=True, cwd=REPO, timeout=120, executable="/bin/bash")
    assert r.stdout.strip() == "range" or r.stdout.startswith("range")
    assert r.returncode == 0
    assert r.stderr in ("", "(the first 200 rows shown; more not shown: --format csv or json prints every row)\n")
    # ... and 1.3 MB of CSV never fits: the pipe surely breaks while rows are written
    r = subprocess.run(f'"{PY}" -m pipeline query --warehouse "{warehouse}" --format csv '
                       '"select range from range(200000)" | head -1; exit ${PIPESTATUS[0]}', shell=True,
                       capture_output=True, text=True, cwd=REPO, timeout=120, executable="/bin/bash")
    assert (r.returncode, r.stderr) == (0, "")


def test_warnings_read_like_the_cli_and_one_reject_is_one_record(tmp_path):
    home = tmp_path / "home"
    folder = home / "session-state" / "96ef38f0-9d09-45c3-8124-6448c36090ed"
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text(
        '{"type":"session.start","data":{"sessionId":"96ef38f0-9d09-45c3-8124-6448c36090ed"},"id":"a",'
        '"timestamp":"2026-01-01T00:00:00Z"}\n{broken\n')
    wh = tmp_path / "w.duckdb"
    r = run("ingest", "--copilot-home", str(home), "--warehouse", str(wh))
    assert r.returncode == 0 and "  1 record rejected: see" in r.stdout, r.stdout
    # a log warning (another share of each tool output kept) in the CLI's own form; -v names the logger
    r = run("ingest", "--copilot-home", str(home), "--warehouse", str(wh), env={"COPILOT_WAREHOUSE_RESULT_CHARS": "0"})
    assert r.stderr.startswith("warning: fct_tool_calls now holds all of each tool output"), r.stderr
    r = run("-v", "ingest", "--copilot-home", str(home), "--warehouse", str(wh),
            env={"COPILOT_WAREHOUSE_RESULT_CHARS": "100"})
    assert "WARNING pipeline.ingest: fct_tool_calls now holds" in r.stderr


def test_every_option_has_help_and_every_verb_an_example(capsys):
    from pipeline.cli import _parser
    sub = next(a for a in _parser()._actions if isinstance(a, __import__("argparse")._SubParsersAction))
    for name, parser in sub.choices.items():
        bare = [a.option_strings for a in parser._actions if a.option_strings and not (a.help or "").strip()]
        assert bare == [], (name, bare)
        with pytest.raises(SystemExit):
            main([name, "--help"])
        text = capsys.readouterr().out
        assert "examples:\n  python -m pipeline " + name in text, name
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert "site/index.html" in capsys.readouterr().out
