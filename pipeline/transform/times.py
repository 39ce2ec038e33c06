"""Time columns as the star writes them: every spelling Copilot uses, parsed to UTC."""

from __future__ import annotations

import polars as pl

UTC_TS = pl.Datetime("us", "UTC")


def parse_ts(expr: pl.Expr) -> pl.Expr:
    """Mixed timestamp spellings (ISO-8601 with Z or offset, `YYYY-MM-DD HH:MM:SS`, epoch ms) -> UTC."""
    s = expr.cast(pl.String).str.strip_chars()
    iso = s.str.replace(r"^(\d{4}-\d\d-\d\d) ", "${1}T").str.replace(r"Z$", "+00:00")
    with_tz = iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us", time_zone="UTC")
    naive = iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us")
    epoch = pl.when(s.str.contains(r"^\d{12,14}$")).then(
        pl.from_epoch(s.cast(pl.Int64, strict=False), time_unit="ms"))
    return pl.coalesce(with_tz, naive.dt.replace_time_zone("UTC"), epoch.dt.replace_time_zone("UTC")).cast(UTC_TS)
