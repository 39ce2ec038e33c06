"""Exports: every ``dim_``, ``fct_`` and ``report_`` table to parquet for BI tools."""

from __future__ import annotations

import logging
from pathlib import Path

from .schema import TABLES
from .warehouse import connect
from .wiki import WikiResult, write_wiki

log = logging.getLogger(__name__)
EXPORT_PREFIXES = ("dim_", "fct_", "report_")


def export_parquet(warehouse: str | Path, out_dir: str | Path) -> list[Path]:
    """Write ``<out_dir>/<table>.parquet`` (zstd) for each exported table, sorted by its key."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    con = connect(warehouse, read_only=True)
    written = []
    try:
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


def run_report(warehouse: str | Path, out: str | Path) -> tuple[list[Path], WikiResult]:
    """``out/parquet/<table>.parquet`` and the wiki under ``out/wiki/``."""
    out = Path(out)
    parquet = export_parquet(warehouse, out / "parquet")
    wiki = write_wiki(warehouse, out / "wiki")
    return parquet, wiki


def _q(p: Path) -> str:
    return str(p).replace("'", "''")
