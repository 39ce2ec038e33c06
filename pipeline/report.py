"""Exports: every ``dim_``, ``fct_`` and ``report_`` table to parquet for BI tools, the markdown wiki
and the static HTML site (both from one read of the warehouse)."""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import duckdb

from . import charts
from .schema import TABLES
from .site import build_site, search_index
from .site import session_page as site_session_page
from .site import session_pages as site_session_pages
from .tree import MANIFEST, PENDING, TreeResult, finish, forget, inside, may_write, refused, write_files, write_tree
from .warehouse import connect
from .wiki import catalog, queries
from .wiki import pages as wiki_pages
from .wiki.catalog import build_pages

log = logging.getLogger(__name__)
T = TypeVar("T")
EXPORT_PREFIXES = ("dim_", "fct_", "report_")


CHUNK_BYTES = 64 * 1024 * 1024  # a table with more text than this is written in key ranges of about this much
LARGE_ROWS = 10_000  # tables with fewer rows are written by one COPY


def export_parquet(warehouse: str | Path, out_dir: str | Path, force: bool = False) -> TreeResult:
    """Write ``<out_dir>/<table>.parquet`` (zstd) for each exported table, sorted by its key; a file there
    that this tool did not write is left alone (``tree.may_write``; ``force`` writes over it)."""
    out_dir = Path(out_dir)
    con = connect(warehouse, read_only=True)  # first: a report that cannot start leaves no empty folder
    result = TreeResult("parquet")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        root = out_dir.resolve()
        tables = [r[0] for r in con.execute(
            "select table_name from information_schema.tables where table_schema = 'main' "
            "and table_catalog = current_database() order by table_name"
        ).fetchall() if r[0].startswith(EXPORT_PREFIXES)]
        legacy = _legacy_exports(con, out_dir, tables)
        for name in tables:
            key = TABLES[name].key if name in TABLES else ()
            target = out_dir / f"{name}.parquet"
            inside(target, root, out_dir)
            if not may_write(out_dir, target.name, target, result, force, legacy):
                continue
            tmp = target.with_suffix(".parquet.tmp")
            ranges = _ranges(con, name, key[0]) if key else None
            if ranges is None:
                order = (" order by " + ", ".join(f'"{k}"' for k in key)) if key else ""
                con.execute(f"copy (select * from \"{name}\"{order}) to '{_q(tmp)}' "
                            "(format parquet, compression zstd)")
            else:
                _write_in_ranges(con, name, key, ranges, tmp)
            tmp.replace(target)
            result.written.append(target)
        finish(out_dir, result)
    finally:
        con.close()
    log.info("wrote %d parquet files to %s", len(result.written), out_dir)
    return result


def _legacy_exports(con: duckdb.DuckDBPyConnection, out_dir: Path, tables: list[str]) -> frozenset[str]:
    """In a folder without a manifest (written by a version before them), the files taken as this tool's:
    ``<table>.parquet`` with the columns of that table, as that version wrote it."""
    import pyarrow.parquet as pq

    if (out_dir / MANIFEST).exists() or (out_dir / PENDING).exists():
        return frozenset()
    ours = set()
    for name in tables:
        path = out_dir / f"{name}.parquet"
        if not path.is_file() or path.is_symlink():
            continue
        columns = [r[0] for r in con.execute("select column_name from information_schema.columns where table_name = ? "
                                             "and table_catalog = current_database() order by ordinal_position",
                                             [name]).fetchall()]
        try:
            if pq.read_schema(path).names == columns:
                ours.add(path.name)
        except (OSError, ValueError):  # not parquet: not ours
            continue
    return frozenset(ours)


def _ranges(con: duckdb.DuckDBPyConnection, name: str, first: str) -> list[tuple] | None:
    """For a table too large to sort in DuckDB's memory at once (tool outputs: a GB of text), ranges of
    its first key column of about CHUNK_BYTES each, in key order; None for a table one COPY writes."""
    if con.execute(f'select count(*) from "{name}"').fetchone()[0] < LARGE_ROWS:
        return None
    texts = [r[0] for r in con.execute("select column_name from information_schema.columns where table_name = ? "
                                       "and data_type = 'VARCHAR'", [name]).fetchall()]
    size = " + ".join(f'coalesce(strlen("{c}"), 0)' for c in texts) or "0"
    groups = con.execute(f'select "{first}", sum({size}) + 64 * count(*) from "{name}" group by 1 '
                         f'order by 1 nulls last').fetchall()
    if sum(g[1] for g in groups) <= CHUNK_BYTES:
        return None
    ranges, lo, acc = [], None, 0
    for i, (value, nbytes) in enumerate(groups):
        if value is None:  # NULLs sort last: a range of their own
            if lo is not None:
                ranges.append((lo, groups[i - 1][0]))
                lo, acc = None, 0
            ranges.append((None, None))
            continue
        lo = value if lo is None else lo
        acc += nbytes
        if acc >= CHUNK_BYTES:
            ranges.append((lo, value))
            lo, acc = None, 0
    if lo is not None:
        ranges.append((lo, groups[-1][0] if groups[-1][0] is not None else groups[-2][0]))
    return ranges


def _write_in_ranges(con: duckdb.DuckDBPyConnection, name: str, key: tuple, ranges: list[tuple], tmp: Path) -> None:
    """One Parquet file written range by range (each range sorted by the whole key: the file is too)."""
    import pyarrow.parquet as pq

    order = ", ".join(f'"{k}"' for k in key)
    first = key[0]
    writer = None
    try:
        for lo, hi in ranges:
            where, params = ((f'"{first}" is null', []) if lo is None else
                             (f'"{first}" between ? and ?', [lo, hi]))
            reader = con.execute(f'select * from "{name}" where {where} order by {order}', params) \
                .to_arrow_reader(4096)
            for batch in reader:
                if writer is None:
                    writer = pq.ParquetWriter(tmp, batch.schema, compression="zstd")
                writer.write_batch(batch, row_group_size=4096)
    finally:
        if writer is not None:
            writer.close()


def run_report(warehouse: str | Path, out: str | Path, progress: Callable[[str], None] | None = None,
               force: bool = False) -> tuple[TreeResult, TreeResult, TreeResult]:
    """``out/parquet/<table>.parquet``, the wiki under ``out/wiki/`` and the site under ``out/site/``;
    ``progress`` is told each step as it starts. A file there that the report did not write is left as
    it is and named when the rest is written (``OutputError``), unless ``force``.

    With many sessions the parquet files, the charts and the session pages (most of the wiki and the
    site) are written, drawn and rendered by worker processes (``PageWorkers``) while this one builds
    the other pages; the parquet export's DuckDB memory is then in a worker, not beside the page data."""
    step = progress or (lambda _what: None)
    out = Path(out)
    wiki_dir, site_dir = out / "wiki", out / "site"
    con = connect(warehouse, read_only=True)  # first: a report that cannot start leaves no empty folder
    forget()
    try:
        step("reading pages")
        data = catalog.load(con, sessions=False)  # the sessions' parts: a chunk at a time (write_sessions)
        with PageWorkers(con, warehouse, data) as workers:
            exported = workers.call(export_parquet, warehouse, out / "parquet", force)
            pages, specs = build_pages(data, with_sessions=False)  # the session pages: by the workers
            charts_drawn = charts.start(specs, wiki_dir, workers.pool)
            sessions_written = workers.sessions(wiki_dir, site_dir, force)
            step("parquet")
            parquet = exported()
            step("wiki and charts")
            svgs = charts_drawn()
            wiki_sessions, site_sessions = sessions_written()
            wiki = write_tree({**pages, **svgs}, wiki_dir, "wiki", done=wiki_sessions, force=force)
            step("site")
            site = write_tree(build_site(data, svgs, search_index(con, data), with_sessions=False), site_dir, "site",
                              done=site_sessions, force=force)
    finally:
        con.close()
    refused(parquet, wiki, site)
    return parquet, wiki, site


# fewer sessions are rendered here: starting the workers costs about what they save (report of 197
# sessions: 4.9-5.1 s here against 5.3-5.7 s with workers; of 518: 7.5-8.1 against 7.5-7.6 s; of
# 5,526: ~42 against ~24-34 s)
PARALLEL_MIN_SESSIONS = 500
CHUNK_SESSIONS = 250  # sessions whose page data is read and rendered at a time
_WORKER: tuple[queries.WikiData, duckdb.DuckDBPyConnection] | None = None  # a worker's page data and warehouse


def _worker_start(parent: int, blob: bytes, warehouse: str) -> None:
    global _WORKER
    from .processes import worker_init

    worker_init(parent)
    _WORKER = pickle.loads(blob), connect(warehouse, read_only=True)


def chunks(data: queries.WikiData) -> list[list[dict]]:
    """The sessions in groups of CHUNK_SESSIONS by session id: each group's page data is one id range,
    which the star tables (written in id order) hold in few row groups."""
    by_id = sorted(data.sessions, key=lambda s: s["session_id"])
    return [by_id[i:i + CHUNK_SESSIONS] for i in range(0, len(by_id), CHUNK_SESSIONS)]


def write_sessions(con: duckdb.DuckDBPyConnection, data: queries.WikiData, part: list[dict], wiki_dir: Path,
                   site_dir: Path, force: bool = False) -> tuple[TreeResult, TreeResult]:
    """The wiki and site pages of the sessions ``part`` (a group of ``chunks``), their page data read
    from the warehouse, written where they changed (``tree.write_files``; ``write_tree`` lists them in
    the manifests). The page data of only these sessions is in memory at once, and of a session of several
    pages (``wiki.queries.page_ranges``) the prompts and tool calls of one page."""
    wiki, site = TreeResult("wiki"), TreeResult("site")
    first, last = part[0]["session_id"], part[-1]["session_id"]
    plans = queries.page_plans(con, first, last)
    data = queries.with_sessions(con, data, first, last, frozenset(plans))
    single = [s for s in part if s["session_id"] not in plans]
    write_files(wiki_pages.session_pages(data, single), wiki_dir, wiki, force)
    write_files(site_session_pages(data, single), site_dir, site, force)
    for s in part:
        ranges = plans.get(s["session_id"])
        for page, (first_turn, last_turn) in enumerate(ranges or ()):
            page_data = queries.with_page(con, data, s["session_id"], first_turn, last_turn, page == 0)
            write_files({wiki_pages.session_file(s["session_id"], page, "md"):
                         wiki_pages.session_page(page_data, s, page, ranges)}, wiki_dir, wiki, force)
            write_files(site_session_page(page_data, s, page, ranges), site_dir, site, force)
    return wiki, site


def _merged(written: Iterable[tuple[TreeResult, TreeResult]]) -> tuple[TreeResult, TreeResult]:
    """The wiki and site files that chunks of sessions wrote, as one result per tree."""
    wiki, site = TreeResult("wiki"), TreeResult("site")
    for w, s in written:
        wiki.add(w)
        site.add(s)
    return wiki, site


def _write_chunk(part: list[dict], wiki_dir: Path, site_dir: Path, force: bool) -> tuple[TreeResult, TreeResult]:
    assert _WORKER is not None, "a worker started by PageWorkers"
    data, con = _WORKER
    return write_sessions(con, data, part, wiki_dir, site_dir, force)


class PageWorkers:
    """Worker processes for the report's pages, one per core (at most 4): the page data without the
    sessions' parts is sent once to each, and each reads the parts of the sessions it renders from the
    warehouse (``spawn``, as the ingest's readers: never ``fork`` a process that holds DuckDB). ``pool``
    is None with few sessions or one core: the pages are then rendered here, with ``con``."""

    def __init__(self, con: duckdb.DuckDBPyConnection, warehouse: str | Path, data: queries.WikiData,
                 workers: int | None = None):
        self.con, self.data, self.pool, self.other = con, data, None, None
        workers = workers or min(os.cpu_count() or 1, 4)
        if workers < 2 or len(data.sessions) < PARALLEL_MIN_SESSIONS:
            return
        from .processes import pool

        blob = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)
        spawn = multiprocessing.get_context("spawn")
        self.pool = pool(workers, spawn, _worker_start, (blob, str(warehouse)))
        # one more worker, without the page data, for work that needs DuckDB's memory beside it
        self.other = pool(1, spawn)

    def call(self, fn: Callable[..., T], *args: object) -> Callable[[], T]:
        """``fn(*args)`` on the worker without the page data (here, at once, without workers); returns
        what waits for its result."""
        if self.pool is None:
            result = fn(*args)
            return lambda: result
        return self.other.submit(fn, *args).result

    def sessions(self, wiki_dir: Path, site_dir: Path,
                 force: bool = False) -> Callable[[], tuple[TreeResult, TreeResult]]:
        """Begin writing every session's wiki and site page; returns the function that waits for them."""
        if self.pool is None:
            return lambda: _merged(write_sessions(self.con, self.data, part, wiki_dir, site_dir, force)
                                   for part in chunks(self.data))
        futures = [self.pool.submit(_write_chunk, part, wiki_dir, site_dir, force) for part in chunks(self.data)]
        # in order: the same lists whatever finished first
        return lambda: _merged(future.result() for future in futures)

    def __enter__(self) -> PageWorkers:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_exc: object) -> None:
        if self.pool is None:
            return
        from .processes import stop_pool

        for pool in (self.pool, self.other):
            if kind is None:
                pool.shutdown()
            else:  # an error, or Ctrl-C: the workers are stopped, not waited for
                stop_pool(pool)


def _q(p: Path) -> str:
    return str(p).replace("'", "''")
