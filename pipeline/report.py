"""Exports: every ``dim_``, ``fct_`` and ``report_`` table to parquet for BI tools, the markdown wiki
and the static HTML site (both from one read of the warehouse)."""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import pickle
import tempfile
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import TypeVar

import duckdb
import orjson

from . import charts, parquet_join
from .schema import TABLES
from .site import search_projects, site_files
from .site import session_page as site_session_page
from .site import session_pages as site_session_pages
from .tree import MANIFEST, PENDING, TreeResult, finish, forget, inside, may_write, refused, write_files, write_tree
from .warehouse import connect, memory_limit_unless_set, release_cache
from .wiki import catalog, queries
from .wiki import pages as wiki_pages
from .wiki.catalog import build_pages
from .wiki.markdown import page_name

log = logging.getLogger(__name__)
T = TypeVar("T")
EXPORT_PREFIXES = ("dim_", "fct_", "report_")


CHUNK_BYTES = 64 * 1024 * 1024  # a table with more text than this is written in key ranges of about this much
# DuckDB's memory for the export (unless $COPILOT_WAREHOUSE_MEMORY says): a COPY streams, and a range's sort fits
# (19,600 sessions, 1.5 GB: peak RSS 789 MB under the usual 512 MB, 570 MB under this, in the same time)
EXPORT_MEMORY = "256MB"
# ... and of the export and the search index of a lake read where it is: a parquet column chunk is decompressed whole,
# and a lake's row groups of 16,384 tool calls hold ~40 MB of output each (200 machines: the export ran out of 256 MB
# reading them on two threads, and peaked at ~320 MB of RSS under 512 MB; 1,000 machines: the search index, reading
# the stored search documents, ran out of 256 MB)
LAKE_READ_MEMORY = "512MB"
LARGE_ROWS = 10_000  # tables with fewer rows are written by one COPY
ROW_GROUP = 4096  # rows per row group of a table written in ranges
SPILL_BATCH = 1024 * 1024  # bytes of a range's rows written to its spill file at once
SPILL_WAITING = 32 * 1024 * 1024  # bytes of rows waiting for their ranges' spill files, at most (about)
FILTERED_RANGES = 4  # this many changed ranges or fewer are each read by a filter; more, by one read of the table
EXPORT_STATE = ".export-ranges.json"  # in the parquet folder: each table written in ranges, as ``_Ranges.state``


def export_parquet(warehouse: str | Path, out_dir: str | Path, force: bool = False) -> TreeResult:
    """Write ``<out_dir>/<table>.parquet`` (zstd) for each exported table, sorted by its key; a file there
    that this tool did not write is left alone (``tree.may_write``; ``force`` writes over it). A large table
    is written in key ranges, and a range whose rows are those the last export wrote is copied from its
    file rather than read from the warehouse again (``_Ranges``)."""
    out_dir = Path(out_dir)
    con = connect(warehouse, read_only=True)  # first: a report that cannot start leaves no empty folder
    result = TreeResult("parquet")
    try:
        limit = _read_memory(warehouse, EXPORT_MEMORY)
        con.execute(f"set memory_limit = '{limit}'")
        out_dir.mkdir(parents=True, exist_ok=True)
        root = out_dir.resolve()
        tables = [r[0] for r in con.execute(
            "select table_name from information_schema.tables where table_schema = 'main' "
            "and table_catalog = current_database() order by table_name"
        ).fetchall() if r[0].startswith(EXPORT_PREFIXES)]
        legacy = _legacy_exports(con, out_dir, tables)
        last = _state(out_dir / EXPORT_STATE, "tables")
        last = last if isinstance(last, dict) and not force else {}
        state = {}
        for name in tables:
            key = TABLES[name].key if name in TABLES else ()
            target = out_dir / f"{name}.parquet"
            inside(target, root, out_dir)
            if not may_write(out_dir, target.name, target, result, force, legacy):
                continue
            tmp = target.with_suffix(".parquet.tmp")
            ranges = _Ranges.of(con, name, key, last.get(name), target, limit) if key else None
            if ranges is None:
                order = (" order by " + ", ".join(f'"{k}"' for k in key)) if key else ""
                con.execute(f"copy (select * from \"{name}\"{order}) to '{_q(tmp)}' "
                            "(format parquet, compression zstd)")
            elif ranges.unchanged():
                result.unchanged.append(target)
                state[name] = last[name]
                continue
            else:
                _write_in_ranges(con, name, key, ranges, tmp, target, limit)
            tmp.replace(target)
            result.written.append(target)
            if ranges is not None and (record := ranges.state(target)) is not None:
                state[name] = record
        _write_state(out_dir / EXPORT_STATE, {"tables": state})
        finish(out_dir, result)
    finally:
        con.close()
    log.info("wrote %d parquet files to %s", len(result.written), out_dir)
    return result


def write_search(warehouse: str | Path, site_dir: Path, projects: dict[str, str], force: bool = False) -> TreeResult:
    """The site's search index (``site.search.SearchIndex``: where the last report's index is, only what changed)
    written under ``site_dir`` from a connection of its own: on a worker, beside the other pages, when there are
    workers (98,000 sessions: ~20 s and ~0.26 GB it no longer adds to the main process, which holds the page
    data). The manifest is the report's (``write_tree``)."""
    from .site.search import SearchIndex

    con = connect(warehouse, read_only=True)
    result = TreeResult("site")
    try:
        con.execute(f"set memory_limit = '{_read_memory(warehouse, REPORT_MEMORY)}'")
        index = SearchIndex(con, projects, site_dir, force)
        for files in index.files():  # a few files at a time: the index is never held whole
            write_files(files, site_dir, result, force)
        result.kept += index.kept
        index.record(refused=bool(result.refused))
    finally:
        con.close()
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


class _Ranges:
    """A table too large to sort in DuckDB's memory at once (tool outputs: a GB of text) in ranges of its first
    key column of about CHUNK_BYTES each, in key order: each range's highest value (``his``; the last range also
    takes any value above it), then the rows whose first key is NULL (sorted last) as a range of their own. Each
    range has its rows' count and a digest of them: per first-key value, the sum of DuckDB's hash of every
    column of its rows (in any order, as ``session_digests``), read in the query that sizes the values.

    The last export's ranges (``EXPORT_STATE``) are kept while none grows past four times CHUNK_BYTES, so a
    change to one session changes one range; a range with the rows and digest the last export recorded is
    copied from the file it wrote (``kept``: its row groups there), when that file is as it was recorded (size,
    change time, inode), of the same columns, format and versions. Ranges are found afresh otherwise."""

    def __init__(self, his: list, nulls: bool, rows: list[int], digests: list[str], form: str,
                 kept: dict[int, range], same_as_last: bool) -> None:
        self.his, self.nulls, self.rows, self.digests, self.form = his, nulls, rows, digests, form
        self.kept, self.same_as_last = kept, same_as_last

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection, name: str, key: tuple, last: object, target: Path,
           limit: str = EXPORT_MEMORY) -> _Ranges | None:
        """The ranges of ``name`` (None when one COPY writes it); ``last``: what the last export recorded of it,
        ``target`` the file it wrote; ``limit``: the export's memory limit."""
        import bisect

        import pyarrow as pa

        if con.execute(f'select count(*) from "{name}"').fetchone()[0] < LARGE_ROWS:
            return None
        columns = con.execute("select column_name, data_type from information_schema.columns where table_name = ? "
                              "and table_catalog = current_database() order by ordinal_position", [name]).fetchall()
        size = " + ".join(f'coalesce(strlen("{c}"), 0)' for c, t in columns if t == "VARCHAR") or "0"
        row = "hash(" + ", ".join(f'"{c}"' for c, _t in columns) + ")::hugeint"
        groups = con.execute(f'select "{key[0]}", sum({size}) + 64 * count(*), count(*), sum({row})::varchar '
                             f'from "{name}" group by 1 order by 1 nulls last').fetchall()
        release_cache(con, limit)  # what this read: not read again
        if sum(g[1] for g in groups) <= CHUNK_BYTES:
            return None
        form = f"1|{ROW_GROUP}|zstd|pyarrow {pa.__version__}|duckdb {duckdb.__version__}|{columns!r}"
        values = [g for g in groups if g[0] is not None]
        nulls = len(values) < len(groups)
        recorded = cls._recorded(last, form, target)
        for his in ([r[0] for r in recorded if r[0] is not None] if recorded else None, None):
            if his is None or not his:
                his, acc = [], 0
                for value, nbytes, _n, _h in values:  # afresh: cut where a range reaches CHUNK_BYTES
                    acc += nbytes
                    if acc >= CHUNK_BYTES:
                        his.append(value)
                        acc = 0
                if acc:
                    his.append(values[-1][0])
            n = len(his) + nulls
            nbytes, rows, digests = [0] * n, [0] * n, [hashlib.sha256() for _ in range(n)]
            many = [0] * n  # first-key values
            for value, size_, count, total in groups:
                k = len(his) if value is None else min(bisect.bisect_left(his, value), len(his) - 1)
                nbytes[k] += size_
                rows[k] += count
                many[k] += 1
                digests[k].update(f"{value!r}\0{total}\0".encode("utf-8", "surrogatepass"))
            if recorded is None or all(b <= 4 * CHUNK_BYTES or m == 1 for b, m in zip(nbytes, many, strict=True)):
                break
            recorded = None  # a kept range grew too large (and can be cut): ranges afresh
        empty = {k for k in range(len(his)) if not rows[k]}  # ranges the last export had and no row falls in now
        his = [hi for k, hi in enumerate(his) if k not in empty]
        rows = [r for k, r in enumerate(rows) if k not in empty]
        digests = [d.hexdigest()[:32] for k, d in enumerate(digests) if k not in empty]
        kept: dict[int, range] = {}
        if recorded:
            at, start = {}, 0
            for hi, n_rows, digest, groups_n in recorded:
                at[hi] = (n_rows, digest, range(start, start + groups_n))
                start += groups_n
            for k, hi in enumerate([*his, None] if nulls else his):
                if at.get(hi, (None, None))[:2] == (rows[k], digests[k]):
                    kept[k] = at[hi][2]
        same = bool(recorded) and len(kept) == len(rows) == len(recorded)
        return cls(his, nulls, rows, digests, form, kept, same)

    @staticmethod
    def _recorded(last: object, form: str, target: Path) -> list[tuple] | None:
        """What the last export recorded of the table's ranges - (highest value, rows, digest, row groups) each -
        when its file is there as that export wrote it; else None."""
        import pyarrow.parquet as pq

        if not isinstance(last, dict) or last.get("format") != form or not isinstance(last.get("ranges"), list):
            return None
        try:
            st = target.lstat()
            if not target.is_file() or target.is_symlink() or last.get("file") != [st.st_size, st.st_mtime_ns,
                                                                                     st.st_ino]:
                return None
            meta = pq.ParquetFile(target).metadata
        except (OSError, ValueError):
            return None
        out, sizes = [], [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        for entry in last["ranges"]:
            if not (isinstance(entry, list) and len(entry) == 4 and type(entry[0]) in (str, int, type(None))
                    and all(type(v) is int and v > 0 for v in (entry[1], entry[3])) and isinstance(entry[2], str)):
                return None
            out.append(tuple(entry))
        at = 0
        for _hi, n_rows, _digest, n_groups in out:
            if sum(sizes[at:at + n_groups]) != n_rows or at + n_groups > len(sizes):
                return None
            at += n_groups
        his = [hi for hi, *_ in out if hi is not None]
        try:  # ascending, as the ranges are cut: else ``bisect`` and DuckDB would put a row in different ranges
            ascending = all(a < b for a, b in zip(his, his[1:], strict=False))
        except TypeError:
            return None
        if at != len(sizes) or not ascending or len(his) + 1 < len(out) or (len(his) < len(out) and out[-1][0]
                                                                              is not None):
            return None
        return out

    def unchanged(self) -> bool:
        """Whether the file the last export wrote holds this table as it is now (not written again)."""
        return self.same_as_last

    def where(self, k: int, first: str) -> tuple[str, list]:
        """A filter on the table for range ``k``'s rows, and its parameters."""
        if k == len(self.his):
            return f"{first} is null", []
        sql, params = [], []
        if k > 0:
            sql.append(f"{first} > ?")
            params.append(self.his[k - 1])
        if k < len(self.his) - 1:
            sql.append(f"{first} <= ?")
            params.append(self.his[k])
        return " and ".join(sql) or f"{first} is not null", params

    def which(self, first: str) -> tuple[str, list]:
        """An expression of the range each row of the table falls in, and its parameters."""
        cases = "".join(f"when {first} <= ? then {k} " for k in range(len(self.his) - 1))
        rest = f"when {first} is not null then {len(self.his) - 1} " if self.his else ""
        nulls = f"when {first} is null then {len(self.his)} " if self.nulls else ""
        return f"case {cases}{rest}{nulls}end", self.his[:-1]

    def state(self, target: Path) -> dict | None:
        """What the next export reads of these ranges (``_recorded``), after ``target`` is written: None when
        the first key's values cannot be recorded as they are (neither text nor integers)."""
        import pyarrow.parquet as pq

        if any(type(hi) not in (str, int) for hi in self.his):
            return None
        meta = pq.ParquetFile(target).metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        ranges, at = [], 0
        for hi, n_rows, digest in zip([*self.his, None] if self.nulls else self.his, self.rows, self.digests,
                                      strict=True):
            n_groups, total = 0, 0
            while total < n_rows:
                total += sizes[at + n_groups]
                n_groups += 1
            ranges.append([hi, n_rows, digest, n_groups])
            at += n_groups
        st = target.lstat()
        return {"format": self.form, "file": [st.st_size, st.st_mtime_ns, st.st_ino], "ranges": ranges}


def _write_in_ranges(con: duckdb.DuckDBPyConnection, name: str, key: tuple, ranges: _Ranges, tmp: Path,
                     last_file: Path, limit: str = EXPORT_MEMORY) -> None:
    """One Parquet file sorted by the whole key, written range by range: a few changed ranges are each read by
    a filter; more are read in one pass over the table, in the order it is stored, each row appended to
    its range's spill file (Arrow IPC, lz4, in a folder beside ``tmp`` removed after), then each range,
    small enough to sort in memory, read back, sorted and written. Every range read by a filter decompressed
    every text of the table: the cost grew with the square of the table (tool calls of 98,000 sessions, 72
    ranges: 92 s; spilled: 30 s). When ``ranges`` keeps some, the changed ranges are written to a file of their
    own and joined with the kept ranges' row groups of ``last_file`` (the last export's) as they are stored."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    first = f'"{key[0]}"'
    changed = [k for k in range(len(ranges)) if k not in ranges.kept]
    filtered = len(changed) <= FILTERED_RANGES
    order_by = [(k, "ascending") for k in key]
    with tempfile.TemporaryDirectory(prefix=f".{name}-spill-", dir=tmp.parent) as spill:
        if not filtered:
            _spill(con, name, ranges.which(first), set(changed), spill, limit)
        # with ranges kept, the changed ones are written to a file of their own, then joined with the kept ones'
        # row groups as they are stored (``parquet_join``: 4.6 GB of text decoded and encoded again took 8.7 s)
        fresh = Path(spill) / "changed.parquet" if ranges.kept else tmp
        parts: list[tuple[Path, int]] = []
        sizes: list[int] = []  # the rows of each row group written to ``fresh``
        schema = con.execute(f'select * from "{name}" limit 0').to_arrow_table().schema
        writer = pq.ParquetWriter(fresh, schema, compression="zstd")
        try:
            for k in range(len(ranges)):
                if k in ranges.kept:
                    parts += [(last_file, i) for i in ranges.kept[k]]
                    continue
                if filtered:
                    where, params = ranges.where(k, first)
                    part = con.execute(f'select * from "{name}" where {where}', params).to_arrow_table()
                    release_cache(con, limit)
                else:
                    with pa.memory_map(os.path.join(spill, f"{k}.arrow")) as source:
                        part = ipc.open_stream(source).read_all()
                order = pc.sort_indices(part, order_by)  # NULLs last, as DuckDB's
                for start in range(0, len(order), ROW_GROUP):  # a row group at a time: the range is not copied
                    rows = part.take(order.slice(start, ROW_GROUP))
                    parts.append((fresh, len(sizes)))
                    sizes.append(len(rows))
                    writer.write_table(rows, row_group_size=ROW_GROUP)
                del part
        finally:
            writer.close()
            pa.default_memory_pool().release_unused()  # Arrow's allocator keeps what it freed, for the next
        if fresh == tmp:
            return
        meta = pq.read_metadata(fresh)  # one row group per write, as ``parts`` numbers them
        same = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == sizes
        if not (same and parquet_join.join(parts, tmp)):  # else (files it does not join): the rows decoded
            files = {path: pq.ParquetFile(path) for path in (last_file, fresh)}
            with pq.ParquetWriter(tmp, schema, compression="zstd") as out:
                for path, i in parts:
                    out.write_table(files[path].read_row_group(i).cast(schema), row_group_size=ROW_GROUP)
            for f in files.values():
                f.close()


def _spill(con: duckdb.DuckDBPyConnection, name: str, which: tuple[str, list], only: set[int], spill: str,
           limit: str = EXPORT_MEMORY) -> None:
    """The rows of the ranges ``only`` appended to their spill files (``<range>.arrow`` in ``spill``), in one read
    of the table in the order it is stored (``which``: the expression of a row's range, and its parameters)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc

    options = ipc.IpcWriteOptions(compression="lz4")
    spills: dict[int, ipc.RecordBatchStreamWriter] = {}
    # each range's rows wait until they make a batch of SPILL_BATCH bytes (or all that wait, SPILL_WAITING):
    # a batch read holds a few rows of each of many ranges, and compressing and reading back batches that
    # small cost more than reading the table
    waiting: dict[int, list] = {}
    sizes: dict[int, int] = {}

    def flush(k: int) -> None:
        if waiting.get(k):
            spills[k].write_batch(pa.concat_batches(waiting[k]))
        waiting[k], sizes[k] = [], 0

    try:
        for batch in con.execute(f'select *, {which[0]} as "_range" from "{name}"', which[1]).to_arrow_reader(8192):
            batch = batch.take(pc.sort_indices(batch.column("_range")))  # each range's rows together
            counts = pc.value_counts(batch.column("_range"))  # in order of first appearance: ascending
            batch, start = batch.drop_columns(["_range"]), 0
            for k, n in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True):
                rows = batch.slice(start, n)
                start += n
                if k not in only:
                    continue
                if k not in spills:
                    spills[k] = ipc.new_stream(os.path.join(spill, f"{k}.arrow"), batch.schema, options=options)
                waiting.setdefault(k, []).append(rows)
                sizes[k] = sizes.get(k, 0) + rows.nbytes
                if sizes[k] >= SPILL_BATCH:
                    flush(k)
            if sum(sizes.values()) >= SPILL_WAITING:
                for k in list(waiting):
                    flush(k)
        for k in list(waiting):
            flush(k)
    finally:
        for writer in spills.values():
            writer.close()
    release_cache(con, limit)  # nor what this read


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
        con.execute(f"set memory_limit = '{_report_memory()}'")
        step("reading pages")
        data = catalog.load(con, sessions=False)  # the sessions' parts: a chunk at a time (write_sessions)
        with PageWorkers(con, warehouse, data) as workers:
            # first, on workers: neither needs what follows (98,000 sessions, one changed: the index, begun after
            # the digests and records, was the report's last ~10 s)
            exported = workers.call(export_parquet, warehouse, out / "parquet", force)
            searched = workers.call(write_search, warehouse, site_dir, search_projects(data), force)
            digests, plans = session_digests(con, data)
            names = {sid: page_name(sid) for sid in digests}  # each session's page name, for both trees
            trees = tuple((tree, *_page_files(digests, plans, ext, names)) for tree, ext in ((wiki_dir, "md"),
                                                                                             (site_dir, "html")))
            del names
            recorded = [(tree, _recorded(tree, tree_names, own)) for tree, tree_names, own in trees]
            kept = set() if force else _unchanged(digests, recorded, [tree_names for _t, tree_names, _o in trees])
            trees = tuple((tree, own) for tree, _tree_names, own in trees)  # the files' sessions: not needed again
            todo = [s for s in data.sessions if s["session_id"] not in kept]
            kept_files = [[f for sid in sorted(kept) for f in record[sid][1]] for _tree, record in recorded]
            del recorded  # not held through the report (98,000 sessions: ~90 MB)
            workers.start_pages(len(todo))
            wiki_months = MonthPages(wiki_dir, data, digests, force)
            pages, specs = build_pages(data, with_sessions=False, kept=wiki_months.kept)  # sessions: the workers
            charts_drawn = charts.start(specs, wiki_dir, workers.pool)
            sessions_written = workers.sessions(wiki_dir, site_dir, force, todo)
            step("wiki and charts")
            svgs = charts_drawn()
            wiki_sessions, site_sessions = sessions_written()
            for files, done in zip(kept_files, (wiki_sessions, site_sessions), strict=True):
                done.kept += files  # kept as they are
            wiki_sessions.unchanged += [wiki_dir / rel for rel, text in pages.items() if text is None]
            wiki = write_tree({**{rel: text for rel, text in pages.items() if text is not None}, **svgs}, wiki_dir,
                              "wiki", done=wiki_sessions, force=force)
            step("site")
            months = MonthPages(site_dir, data, digests, force)
            for rel, text in site_files(data, svgs, months.kept):  # each page written as it is rendered
                if text is None:
                    site_sessions.unchanged.append(site_dir / rel)
                else:
                    write_files({rel: text}, site_dir, site_sessions, force)
            site_sessions.add(searched())
            site = write_tree({}, site_dir, "site", done=site_sessions, force=force)
            for (tree, own), result in zip(trees, (wiki, site), strict=True):
                _record(tree, result, digests, own)
            months.record(site)
            wiki_months.record(wiki)
            # last: with workers, the export runs beside all of the above (1 GB `events`, one session changed:
            # the wiki and the site waited ~2.8 s for it)
            step("parquet")
            parquet = exported()
    finally:
        con.close()
    if kept:
        log.info("%d of %d sessions' pages unchanged since the last report: not rendered again", len(kept),
                 len(data.sessions))
    refused(parquet, wiki, site)
    return parquet, wiki, site


# DuckDB's memory in the report's main process (unless $COPILOT_WAREHOUSE_MEMORY says): its page data, digests and
# search index read what they need in a few hundred MB, and under the usual 512 MB DuckDB kept what it read beside
# everything else (98,000 sessions: the index 0.64 -> 1.15 GB of the main process, 0.70 GB under 256 MB, 15 -> 16 s)
REPORT_MEMORY = "256MB"


def _report_memory() -> str:
    return memory_limit_unless_set(REPORT_MEMORY)


def _read_memory(warehouse: str | Path, usual: str) -> str:
    """DuckDB's memory limit for the export or the search index reading ``warehouse``: ``usual``, or
    LAKE_READ_MEMORY for a lake read where it is (a ``lake.Lake``, which opens a ``reader``); either way
    ``$COPILOT_WAREHOUSE_MEMORY`` when set."""
    return memory_limit_unless_set(LAKE_READ_MEMORY if hasattr(warehouse, "reader") else usual)


# fewer sessions are rendered here: starting the workers costs about what they save (report of 197
# sessions: 4.9-5.1 s here against 5.3-5.7 s with workers; of 518: 7.5-8.1 against 7.5-7.6 s; of
# 5,526: ~42 against ~24-34 s)
PARALLEL_MIN_SESSIONS = 500
CHUNK_SESSIONS = 250  # sessions whose page data is read and rendered at a time
_WORKER: tuple[queries.WikiData, duckdb.DuckDBPyConnection] | None = None  # a worker's page data and warehouse


def _worker_start(parent: int, data_file: str, warehouse: str | Path) -> None:
    global _WORKER
    from .processes import worker_init

    worker_init(parent)
    with open(data_file, "rb") as fh:
        _WORKER = pickle.load(fh), connect(warehouse, read_only=True)


def chunks(sessions: list[dict]) -> list[list[dict]]:
    """The sessions in groups of CHUNK_SESSIONS by session id: each group's page data is one id range,
    which the star tables (written in id order) hold in few row groups."""
    by_id = sorted(sessions, key=lambda s: s["session_id"])
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


PAGES_STATE = ".session-pages.json"  # in each tree: what each session's pages were made from, and their files


@cache
def _code_digest() -> str:
    """What renders pages besides their data: this package's code, templates and styles, and the versions of
    the libraries that render them. Another version of any of these renders every page again."""
    import jinja2

    h = hashlib.sha256(f"jinja2 {jinja2.__version__}".encode())
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".html", ".css", ".js", ".svg") and "__pycache__" not in path.parts:
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def session_digests(con: duckdb.DuckDBPyConnection,
                    data: queries.WikiData) -> tuple[dict[str, str], dict[str, list[tuple[int, int]]]]:
    """Per session, a digest of everything its wiki and site pages are made from: its rows of every session
    part the pages show (``queries.SESSION_PARTS``, the same queries), how its prompts are cut into pages,
    its row of the sessions list, its project's name and link, the site's navigation, and the code that
    renders them. Pages whose digest is the one the last report recorded are not rendered again. Also returns
    the pages of the sessions that have several (``queries.page_plans``)."""
    parts: dict[str, list[str]] = {}
    # a sum of the rows' hashes: in any order (the parts' ORDER BY sorted every session's rows with their texts:
    # 98,000 sessions 2.7 -> 1.2 s), and DuckDB's cache given back after: what it read is not read again
    for part, sql in queries.SESSION_PARTS.items():
        for sid, total in con.execute(f"select session_id, sum(hash(q)::hugeint)::varchar from "
                                      f"({queries.unordered(sql.format(where='true'))}) as q group by 1").fetchall():
            parts.setdefault(sid, []).append(f"{part}:{total}")
    release_cache(con, _report_memory())
    plans = queries.page_plans(con)
    common = hashlib.sha256(f"{_code_digest()}|{catalog.nav(data)!r}".encode("utf-8", "surrogatepass"))
    out = {}
    for s in data.sessions:
        sid, pid = s["session_id"], s["project_id"]
        project = (data.project_name.get(pid), data.project_slug.get(pid))
        h = common.copy()
        h.update(_row_bytes(s))
        h.update("|".join([repr(project), *sorted(parts.get(sid, [])), repr(plans.get(sid))]).encode(
            "utf-8", "surrogatepass"))
        out[sid] = h.hexdigest()[:32]
    return out, plans


def _row_bytes(row: dict) -> bytes:
    """A session's row of the page data as bytes for its digest: JSON with sorted keys (its repr, with times and
    sorted items, took ~4 s of 98,000 sessions' digests); the repr where JSON cannot say a value."""
    try:
        return orjson.dumps(row, default=repr, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:  # an integer beyond 64 bits
        return repr(sorted(row.items(), key=repr)).encode("utf-8", "surrogatepass")


STATE_MAX_BYTES = 256 * 1024 * 1024  # a record larger than this is not read (it is not one this tool wrote)


def _recorded(tree: Path, names: dict[str, str], pages: dict[str, list[str]]) -> dict[str, tuple[str, list[str]]]:
    """What the last report recorded in ``tree`` of each session: (digest, its files), keeping only what
    a report writes - a session's own page files (``names``: a file's session; ``pages``: each session's files
    now, which a record of the digest alone stands for), by a record that is a file of its own. Anything else
    (garbled, a link, another shape) counts as no record: pages rendered."""
    sessions = _state(tree / PAGES_STATE, "sessions")
    if not isinstance(sessions, dict):
        return {}
    out = {sid: (entry, pages[sid]) for sid, entry in sessions.items() if type(entry) is str and sid in pages}
    for sid, entry in sessions.items():
        if (type(entry) is list and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], list) and entry[1]
                and all(isinstance(f, str) and names.get(f) == sid for f in entry[1])):
            out[sid] = (entry[0], entry[1])
    return out


def _page_files(sessions: Iterable[str], plans: dict[str, list[tuple[int, int]]], ext: str,
                names: dict[str, str]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The session page files of a tree (``ext``: its pages' extension) as {file: its session} and {session:
    its files, sorted}; ``plans``: the pages of the sessions that have several (``session_digests``), ``names``
    each session's page name (``page_name``: 1.1 s of 98,000 sessions' slugs, made once for both trees)."""
    files_of: dict[str, str] = {}
    pages: dict[str, list[str]] = {}
    file = wiki_pages.session_file
    for sid in sessions:
        name = names[sid]
        ranges = plans.get(sid)
        if ranges:
            files = sorted(file(sid, page, ext, name) for page in range(max(1, len(ranges))))
            for f in files:
                files_of[f] = sid
        else:
            files = [file(sid, 0, ext, name)]
            files_of[files[0]] = sid
        pages[sid] = files
    return files_of, pages


def _state(path: Path, key: str) -> object:
    """``key`` of a record a report wrote (``PAGES_STATE``, ``MONTHS_STATE``); None when there is none to read -
    a link, a file too large to be one, garbled, another shape."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > STATE_MAX_BYTES:
            return None
        return orjson.loads(path.read_bytes()).get(key)  # 98,000 sessions' record: json 0.59 s, orjson ~0.15
    except (OSError, ValueError, AttributeError):
        return None


def _write_state(path: Path, state: dict) -> None:
    """A record for the next report (what ``_state`` reads), through a temporary file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        data = orjson.dumps(state)
    except TypeError:  # an integer beyond 64 bits (a first key's value in EXPORT_STATE)
        data = json.dumps(state, separators=(",", ":")).encode("utf-8")
    tmp.write_bytes(data)
    tmp.replace(path)


def _unchanged(digests: dict[str, str], recorded: list[tuple[Path, dict[str, tuple[str, list[str]]]]],
               names: list[dict[str, str]]) -> set[str]:
    """The sessions whose pages are as the last report made them in every tree (``recorded``: each tree and its
    record; ``names``: each tree's page files and their sessions): the same digest, and every file it listed
    still there. The files are compared as sets, the missing ones named by their session (98,000 sessions: a test
    of each file of each session took 0.64 s)."""
    kept: set[str] | None = None
    for (tree, record), tree_names in zip(recorded, names, strict=True):
        same = {sid for sid, (digest, _files) in record.items() if digests.get(sid) == digest}
        # every file a record lists is a page file of its session now (``_recorded``): those missing are found
        # among all of them
        missing = tree_names.keys() - _files_in(tree, {f.rpartition("/")[0] for f in tree_names})
        same.difference_update(tree_names[f] for f in missing)
        kept = same if kept is None else kept & same
    return kept or set()


def _files_in(tree: Path, folders: set[str]) -> set[str]:
    """The files (or links to files) directly in each of ``folders`` (relative to ``tree``), by their relative
    paths: one listing of each folder rather than a Path and a stat per page file (0.26 s of a report of 5,348
    sessions whose pages were all unchanged). A folder that cannot be listed holds none."""
    found: set[str] = set()
    for folder in folders:
        try:
            with os.scandir(tree / folder) as entries:
                found.update(f"{folder}/{e.name}" if folder else e.name for e in entries if e.is_file())
        except OSError:
            continue
    return found


def _record(tree: Path, result: TreeResult, digests: dict[str, str], pages: dict[str, list[str]]) -> None:
    """Each session's digest and the files its pages are in this tree, for the next report - the digest alone
    when they are all its pages (``pages``: each session's files; 98,000 sessions' record read in 1.6 s, each file
    of it checked); written last, so a report stopped halfway renders again what it had not recorded."""
    prefix = str(tree) + os.sep
    present = set(result.kept)
    for path in (*result.written, *result.unchanged):
        text = str(path)  # the path relative to the tree by its text: Path.relative_to took 0.27 s for 10,700 files
        present.add(text[len(prefix):].replace(os.sep, "/") if text.startswith(prefix)
                    else path.relative_to(tree).as_posix())
    sessions: dict[str, object] = {}
    for sid in sorted(pages):  # a session's files here are among its pages (``names`` holds no others)
        files, digest = pages[sid], digests.get(sid)
        if digest is None:
            continue
        there = files if len(files) == 1 and files[0] in present else [f for f in files if f in present]
        if there:
            sessions[sid] = digest if len(there) == len(files) else [digest, there]
    state = {"sessions": sessions}
    _write_state(tree / PAGES_STATE, state)


MONTHS_STATE = ".month-pages.json"  # in the site: what each month page was made from


class MonthPages:
    """The month pages of the site or the wiki (``tree``) rendered again only when what they show changed: a
    digest of each page - its sessions' digests (``session_digests``: their rows in the lists, their projects, the
    navigation and the code), which page of how many, the month's count and the months it links, or a month's
    days and their totals - recorded in the tree (``MONTHS_STATE``) after the report. A session added to a month
    changes that month's pages alone, or its day's and its month's page (98,000 sessions: 981 pages rendered in
    6-12 s to find one month's changed)."""

    def __init__(self, tree: Path, data: queries.WikiData, digests: dict[str, str], force: bool) -> None:
        self.tree, self.digests, self.now = tree, digests, {}
        self.months = [m for m, _n in wiki_pages.month_counts(wiki_pages.month_pages(data.sessions))]
        self.before = {} if force else self._read()

    def _read(self) -> dict[str, str]:
        pages = _state(self.tree / MONTHS_STATE, "pages")
        return {k: v for k, v in pages.items() if isinstance(k, str) and isinstance(v, str)} \
            if isinstance(pages, dict) else {}

    def kept(self, family: str, rel: str, values: dict) -> bool:
        """Whether the month page ``rel`` is as the last report wrote it (``family``: the site's template or the
        wiki's family; any other page: rendered)."""
        if family not in ("month.html", "months"):
            return False
        days = values["days"]
        members = days or [self.digests.get(s["session_id"], "") for s in values["pages"][values["page"]]]
        n = sum(d["n"] for d in days) if days else sum(len(p) for p in values["pages"])
        text = repr([self.months, values["month"], values["page"], len(values["pages"]), n, members])
        self.now[rel] = digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        path = self.tree / rel
        return self.before.get(rel) == digest and path.is_file() and not path.is_symlink()

    def record(self, result: TreeResult) -> None:
        """The digests of the month pages the tree now holds as this report made them, for the next report."""
        prefix = str(self.tree) + os.sep
        there = {str(p)[len(prefix):].replace(os.sep, "/") for p in (*result.written, *result.unchanged)
                 if str(p).startswith(prefix + "months" + os.sep)}
        state = {"pages": {rel: d for rel, d in sorted(self.now.items()) if rel in there}}
        _write_state(self.tree / MONTHS_STATE, state)


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
    """Worker processes for the report, one per core (at most 4), when the warehouse holds many sessions and
    there are two cores or more (``spawn``, as the ingest's readers: never ``fork`` a process that holds
    DuckDB). ``other``: two workers without the page data, started at once, for work that needs DuckDB's memory
    beside it - the parquet export and the search index. ``pool``: the page workers, started by ``start_pages``
    when many sessions' pages are to be rendered: the page data without the sessions' parts is sent once to
    each, and each reads the parts of the sessions it renders from the warehouse. Otherwise (None) the work is
    done here, with ``con``."""

    def __init__(self, con: duckdb.DuckDBPyConnection, warehouse: str | Path, data: queries.WikiData,
                 workers: int | None = None):
        self.con, self.warehouse, self.data, self.pool, self.other, self.data_file = \
            con, warehouse, data, None, None, None
        self.workers = workers or min(os.cpu_count() or 1, 4)
        if self.workers >= 2 and len(data.sessions) >= PARALLEL_MIN_SESSIONS:
            from .processes import pool

            self.other = pool(2, multiprocessing.get_context("spawn"))

    def start_pages(self, n_sessions: int) -> None:
        """Start the page workers when ``n_sessions`` pages are many to render."""
        if self.other is None or n_sessions < PARALLEL_MIN_SESSIONS:
            return
        from .processes import pool

        # the page data goes to the workers through a file: the pool keeps its workers' arguments for as long
        # as it runs, and the pickle of 98,000 sessions is 44 MB
        with tempfile.NamedTemporaryFile("wb", prefix="copilot-report-", suffix=".pickle", delete=False) as fh:
            try:
                pickle.dump(self.data, fh, protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException:  # a full disk, say: no file left behind
                fh.close()
                os.unlink(fh.name)
                raise
        self.data_file = fh.name
        self.pool = pool(self.workers, multiprocessing.get_context("spawn"), _worker_start,
                         (self.data_file, self.warehouse))

    def call(self, fn: Callable[..., T], *args: object) -> Callable[[], T]:
        """``fn(*args)`` on a worker without the page data (here, at once, without workers); returns
        what waits for its result."""
        if self.other is None:
            result = fn(*args)
            return lambda: result
        return self.other.submit(fn, *args).result

    def sessions(self, wiki_dir: Path, site_dir: Path, force: bool = False,
                 sessions: list[dict] | None = None) -> Callable[[], tuple[TreeResult, TreeResult]]:
        """Begin writing the wiki and site pages of ``sessions`` (default: every session); returns the function
        that waits for them."""
        parts = chunks(self.data.sessions if sessions is None else sessions)
        if self.pool is None:
            return lambda: _merged(write_sessions(self.con, self.data, part, wiki_dir, site_dir, force)
                                   for part in parts)
        futures = [self.pool.submit(_write_chunk, part, wiki_dir, site_dir, force) for part in parts]
        # in order: the same lists whatever finished first
        return lambda: _merged(future.result() for future in futures)

    def __enter__(self) -> PageWorkers:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_exc: object) -> None:
        from .processes import stop_pool

        try:
            for pool in (self.pool, self.other):
                if pool is None:
                    continue
                if kind is None:
                    pool.shutdown()
                else:  # an error, or Ctrl-C: the workers are stopped, not waited for
                    stop_pool(pool)
        finally:
            if self.data_file is not None:
                os.unlink(self.data_file)


def _q(p: Path) -> str:
    return str(p).replace("'", "''")
