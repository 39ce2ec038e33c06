"""Exports: every ``dim_``, ``fct_`` and ``report_`` table to parquet for BI tools, the markdown wiki
and the static HTML site (both from one read of the warehouse)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from .schema import TABLES
from .tree import TreeResult
from .warehouse import connect
from .wiki import queries, write_wiki

log = logging.getLogger(__name__)
EXPORT_PREFIXES = ("dim_", "fct_", "report_")


def export_parquet(warehouse: str | Path, out_dir: str | Path) -> list[Path]:
    """Write ``<out_dir>/<table>.parquet`` (zstd) for each exported table, sorted by its key."""
    out_dir = Path(out_dir)
    con = connect(warehouse, read_only=True)  # first: a report that cannot start leaves no empty folder
    written = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        tables = [r[0] for r in con.execute(
            "select table_name from information_schema.tables where table_schema = 'main' order by table_name"
        ).fetchall() if r[0].startswith(EXPORT_PREFIXES)]
        for name in tables:
            key = TABLES[name].key if name in TABLES else ()
            order = (" order by " + ", ".join(f'"{k}"' for k in key)) if key else ""
            target = out_dir / f"{name}.parquet"
            tmp = target.with_suffix(".parquet.tmp")
            con.execute(f"copy (select * from \"{name}\"{order}) to '{_q(tmp)}' "
                        "(format parquet, compression zstd)")
            tmp.replace(target)
            written.append(target)
    finally:
        con.close()
    log.info("wrote %d parquet files to %s", len(written), out_dir)
    return written


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
