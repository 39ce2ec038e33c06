from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE_HOME = REPO / "data" / "sample" / "copilot-home"
REAL = REPO.parent / "shared" / "real-samples"
# the newest batch, until it moves into real-samples/: read from either place
REAL_NEW = REPO.parent / "shared" / "real-samples-new"


# Modules make test-fast leaves out: together ~60% of the suite's time (pytest --durations=0, 2026-12-02:
# real samples 85 s, lake 82 s, bench 22 s, determinism 21 s, fuzz 21 s, memory 18 s, serve 14 s, site 11 s of 458 s)
SLOW_MODULES = frozenset({"test_real_samples", "test_lake", "test_bench", "test_determinism", "test_fuzz",
                          "test_memory", "test_serve", "test_site"})


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


def _files_of(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()} \
        if root.is_dir() else {}


@pytest.fixture(scope="session", autouse=True)
def shared_samples_stay_as_they_are():
    """No test writes beside the real samples: they are read where they lie (a store opened there in WAL mode by a
    test's own sqlite3 left a -wal and a -shm beside it; the pipeline reads a copy)."""
    before = {root: _files_of(root) for root in (REAL, REAL_NEW)}
    yield
    for root, files in before.items():
        after = _files_of(root)
        changed = sorted(set(files) ^ set(after)) + sorted(k for k in set(files) & set(after) if files[k] != after[k])
        assert not changed, f"tests changed files under {root}: {changed[:5]}"


@pytest.fixture
def sample_home(tmp_path) -> Path:
    """A private copy of the bundled sample Copilot home (tests may change it)."""
    dst = tmp_path / "copilot-home"
    shutil.copytree(SAMPLE_HOME, dst)
    return dst


def rows(warehouse, sql, params=None):
    con = duckdb.connect(str(warehouse), read_only=True)
    con.execute("set TimeZone = 'UTC'")  # timestamps are TIMESTAMPTZ: shown in UTC whatever this machine's zone
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def snapshot(warehouse, tables):
    """Every row of every table, sorted, without run lineage: equal snapshots mean identical tables."""
    con = duckdb.connect(str(warehouse), read_only=True)
    con.execute("set TimeZone = 'UTC'")
    try:
        out = {}
        for t in tables:
            cols = [r[0] for r in con.execute("select column_name from information_schema.columns "
                                              "where table_name = ? and column_name <> '_run_id'", [t]).fetchall()]
            sel = ", ".join(f'"{c}"' for c in cols)
            out[t] = sorted(map(repr, con.execute(f'select {sel} from "{t}"').fetchall()))
        return out
    finally:
        con.close()


def real(*parts) -> Path:
    p = REAL.joinpath(*parts)
    if not p.exists() and REAL_NEW.joinpath(*parts).exists():
        p = REAL_NEW.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"real samples not available at {p}")
    return p
