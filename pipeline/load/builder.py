"""Building a batch's star rows on a worker process (``load/star.py`` decides when): the batch's staging
rows come as Parquet parts the main process exported, and its star rows go back as Parquet parts for the
spool. The worker holds polars and the batch; the main process holds DuckDB: neither process holds both,
and the largest session's star is built in a process whose memory is freed when it is done.

No DuckDB here: a worker imports polars, pyarrow and the transforms only.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..parts import read_part, write_part
from ..processes import gc_paused

# a frame's columns read as polars categoricals: the path of the log, 4 bytes a row instead of ~140
CATEGORICAL = {name: ("_source_path",) for name in ("stg_events", "stg_tool_events", "stg_tool_requests")}


def warm() -> None:
    """What a new worker imports before it builds: run as the pool starts, while the main process still exports
    the first batch's staging rows (one session of 200,000 tool calls: ~0.5 s of a worker's start and imports,
    ~0.8 s of export)."""
    import pyarrow.parquet  # noqa: F401

    from ..transform import star  # noqa: F401 - polars with it


@gc_paused()
def build_batch(parts: dict[str, str], root_repos: dict[str, str], present_part: str, out: str) -> dict:
    """The star rows of the batch whose staging rows are in ``parts`` (frame name -> Parquet file), written
    to Parquet parts under ``out``: {table: (file, rows)}. ``present_part``: the sources on disk."""
    from ..transform.star import build_star

    stg = {name: read_part(path, CATEGORICAL.get(name, ())) for name, path in parts.items()}
    for path in parts.values():
        os.unlink(path)
    star = build_star(stg, root_repos, read_part(present_part))
    del stg
    written = {}
    for table, rows in star.items():
        path = Path(out) / f"{table}.parquet"
        write_part(rows.to_arrow(), path)
        written[table] = (str(path), rows.height)
    return written
