"""Reading sources on every core: each worker reads one source into Arrow tables.

Workers import only the readers (no DuckDB, no polars), start with ``spawn`` (never ``fork`` a
process that holds a DuckDB connection and its threads), and hand back Arrow tables, which
travel between processes as flat buffers. Results come back in source order, so what is
loaded, and in which order, does not depend on the number of workers.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from ..redact import Redactor
from ..schema import to_arrow
from .base import APPEND_KINDS, READERS, Context, Prior, ReadResult, Source
from .events import tail_digest

PARALLEL_MIN_SOURCES = 16  # below this, starting workers costs more than it saves
WAVE = 64  # sources in flight at once: bounds the memory of results not yet loaded


@dataclass
class Read:
    source: Source
    result: ReadResult | None  # None: the source could not be read at all (see error)
    tables: dict[str, pa.Table]
    sessions: set[str]
    error: str | None
    redactions: dict[str, int]
    tail: str | None = None  # digest proving an append-only log only grew (see events.tail_digest)


def read_one(source: Source, prior: Prior | None, run_id: str, redact: bool) -> Read:
    redactor = Redactor(enabled=redact)
    ctx = Context(run_id=run_id, redact=redactor)
    try:
        res = READERS[source.kind](source, ctx, prior)
    except (OSError, ValueError, UnicodeError) as exc:
        return Read(source, None, {}, set(), f"could not be read: {type(exc).__name__}: {exc}",
                    dict(redactor.counts))
    sessions = {r["session_id"] for rows in res.rows.values() for r in rows if r.get("session_id")}
    tables = {table: to_arrow(table, rows) for table, rows in res.rows.items()}
    res.rows = {}
    tail = tail_digest(source.path, res.last_good_offset) if source.kind in APPEND_KINDS else None
    return Read(source, res, tables, sessions, None, dict(redactor.counts), tail)


def read_all(jobs: list[tuple[Source, Prior | None]], run_id: str, redact: bool,
             workers: int | None = None) -> Iterator[Read]:
    """Read every job, in order; on several cores when there are enough of them to be worth it."""
    workers = workers if workers is not None else min(os.cpu_count() or 1, 8)
    if workers <= 1 or len(jobs) < PARALLEL_MIN_SOURCES:
        for src, prior in jobs:
            yield read_one(src, prior, run_id, redact)
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: deque = deque()
        for src, prior in jobs:
            pending.append(pool.submit(read_one, src, prior, run_id, redact))
            if len(pending) >= WAVE:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
