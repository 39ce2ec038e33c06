"""Rows on their way into DuckDB as Parquet parts, written by the processes that made them (readers of large
sources, the star's builders) and loaded by the spool (``load/spool.py``); and read back as polars frames.

pyarrow and polars are imported when they are used: a run in which nothing changed moves no rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

PART_ROW_GROUP_BYTES = 4 * 1024 * 1024


def write_part(tbl: pa.Table, path: str | os.PathLike) -> None:
    """``tbl`` as a Parquet part: uncompressed (written twice as fast, read back once, deleted right
    after), in row groups of about PART_ROW_GROUP_BYTES - DuckDB reads a row group whole, and pyarrow's
    default (a million rows) made each 64 MB part one group that DuckDB's INSERT held while it wrote (1 GB
    `outputs` corpus: the INSERT of stg_events 5.0 -> 2.7 s, peak RSS 1.17 -> 0.59 GB)."""
    import pyarrow.parquet as pq

    rows = max(1, tbl.num_rows * PART_ROW_GROUP_BYTES // max(1, tbl.nbytes))
    pq.write_table(tbl, path, compression="none", row_group_size=rows)


def frame(batches: Iterable[pa.RecordBatch], schema: pa.Schema, categorical: tuple[str, ...] = ()) -> pl.DataFrame:
    """Arrow record batches as one polars frame, converted batch by batch (the whole Arrow result is never
    beside the frame): the ``categorical`` columns (a long text repeated on every row, as a log's path) as
    polars categoricals, and a column with no value in any row as one null (a column of nulls still takes
    16 bytes a row as text)."""
    import polars as pl

    frames = [pl.from_arrow(b).with_columns(pl.col(categorical).cast(pl.Categorical)) for b in batches]
    if not frames:
        return pl.from_arrow(schema.empty_table()).with_columns(pl.col(categorical).cast(pl.Categorical))
    df = pl.concat(frames, rechunk=False) if len(frames) > 1 else frames[0]
    empty = [name for name, n in zip(df.columns, df.null_count().row(0), strict=True) if n == df.height]
    return df.with_columns(pl.lit(None, df.schema[name]).alias(name) for name in empty) if empty else df


def read_part(path: str | os.PathLike, categorical: tuple[str, ...] = ()) -> pl.DataFrame:
    """A Parquet part as a polars frame (``frame``), read a row group at a time."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as part:
        return frame(part.iter_batches(65_536), part.schema_arrow, categorical)
