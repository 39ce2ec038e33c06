"""Exports: every ``dim_``, ``fct_`` and ``report_`` table to parquet for BI tools, the markdown wiki
and the static HTML site (both from one read of the warehouse)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import duckdb

from .schema import TABLES
from .tree import TreeResult
from .warehouse import connect
from .wiki import queries, write_wiki

log = logging.getLogger(__name__)
EXPORT_PREFIXES = ("dim_", "fct_", "report_")


CHUNK_BYTES = 64 * 1024 * 1024  # a table with more text than this is written in key ranges of about this much
LARGE_ROWS = 10_000  # tables with fewer rows are written by one COPY


def export_parquet(warehouse: str | Path, out_dir: str | Path) -> list[Path]:
    """Write ``<out_dir>/<table>.parquet`` (zstd) for each exported table, sorted by its key."""
    out_dir = Path(out_dir)
    con = connect(warehouse, read_only=True)  # first: a report that cannot start leaves no empty folder
    written = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        tables = [r[0] for r in con.execute(
            "select table_name from information_schema.tables where table_schema = 'main' "
            "and table_catalog = current_database() order by table_name"
        ).fetchall() if r[0].startswith(EXPORT_PREFIXES)]
        for name in tables:
            key = TABLES[name].key if name in TABLES else ()
            target = out_dir / f"{name}.parquet"
            tmp = target.with_suffix(".parquet.tmp")
            ranges = _ranges(con, name, key[0]) if key else None
            if ranges is None:
                order = (" order by " + ", ".join(f'"{k}"' for k in key)) if key else ""
                con.execute(f"copy (select * from \"{name}\"{order}) to '{_q(tmp)}' "
                            "(format parquet, compression zstd)")
            else:
                _write_in_ranges(con, name, key, ranges, tmp)
            tmp.replace(target)
            written.append(target)
    finally:
        con.close()
    log.info("wrote %d parquet files to %s", len(written), out_dir)
    return written


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


def run_report(warehouse: str | Path, out: str | Path,
               progress: Callable[[str], None] | None = None) -> tuple[list[Path], TreeResult, TreeResult]:
    """``out/parquet/<table>.parquet``, the wiki under ``out/wiki/`` and the site under ``out/site/``;
    ``progress`` is told each step as it starts."""
    from .site import write_site

    step = progress or (lambda _what: None)
    out = Path(out)
    step("parquet")
    parquet = export_parquet(warehouse, out / "parquet")
    con = connect(warehouse, read_only=True)
    try:
        step("reading pages")
        data = queries.load(con)
        svgs: dict[str, str] = {}
        step("wiki and charts")
        wiki = write_wiki(warehouse, out / "wiki", data=data, charts_out=svgs)
        step("site")
        site = write_site(con, data, svgs, out / "site")
    finally:
        con.close()
    return parquet, wiki, site


def _q(p: Path) -> str:
    return str(p).replace("'", "''")
