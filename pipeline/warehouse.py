"""The DuckDB warehouse: created from the declared schema, with column comments for BI tools."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import pyarrow as pa

from .schema import ALL_TABLES, TABLES

log = logging.getLogger(__name__)

_ARROW = {"VARCHAR": pa.string(), "BIGINT": pa.int64(), "INTEGER": pa.int32(), "BOOLEAN": pa.bool_(),
          "TIMESTAMP": pa.timestamp("us"), "DOUBLE": pa.float64(), "VARCHAR[]": pa.list_(pa.string()),
          "DATE": pa.date32()}


class WarehouseError(Exception):
    """The warehouse cannot be opened or written."""


def arrow_schema(table: str) -> pa.Schema:
    return pa.schema([(c.name, _ARROW[c.type]) for c in TABLES[table].columns])


def to_arrow(table: str, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=arrow_schema(table))


def connect(path: str | Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    path = Path(path)
    if not read_only:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WarehouseError(f"cannot create the warehouse folder {path.parent}: {exc.strerror}") from exc
    elif not path.exists():
        raise WarehouseError(f"no warehouse at {path}: run `python -m pipeline ingest` first")
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except (duckdb.IOException, duckdb.Error) as exc:
        raise WarehouseError(f"cannot open the warehouse {path}: {str(exc).splitlines()[0]}") from exc


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every declared table that is missing, add declared columns that are missing."""
    existing = {r[0] for r in con.execute("select table_name from information_schema.tables "
                                          "where table_schema = 'main'").fetchall()}
    for t in ALL_TABLES:
        if t.name not in existing:
            con.execute(t.create_sql())
            comment(con, t)
            continue
        have = {r[0] for r in con.execute("select column_name from information_schema.columns "
                                          "where table_name = ?", [t.name]).fetchall()}
        for c in t.columns:
            if c.name not in have:
                con.execute(f'alter table "{t.name}" add column "{c.name}" {c.type}')


def comment(con, t) -> None:
    con.execute(f'comment on table "{t.name}" is ' + _lit(f"{t.description} Grain: {t.grain}."))
    for c in t.columns:
        if c.description:
            con.execute(f'comment on column "{t.name}"."{c.name}" is ' + _lit(c.description))


def _lit(s: str) -> str:
    # COMMENT ON takes a literal, not a parameter; quote it as SQL does
    return "'" + s.replace("'", "''") + "'"


def drop_all(con: duckdb.DuckDBPyConnection, keep: frozenset[str] = frozenset({"_runs"})) -> None:
    """Drop every declared table but the run log, which records the full rebuild too."""
    for t in ALL_TABLES:
        if t.name not in keep:
            con.execute(f'drop table if exists "{t.name}"')
