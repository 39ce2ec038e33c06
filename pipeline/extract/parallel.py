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
from typing import TYPE_CHECKING

from ..redact import Redactor
from ..schema import to_arrow
from .base import APPEND_KINDS, READERS, Context, Prior, ReadResult, Source
from .events import tail_digest

if TYPE_CHECKING:
    import pyarrow as pa

PARALLEL_MIN_BYTES = 24 * 1024 * 1024  # less to read than this: starting workers (~1 s) costs more than it saves
BATCH_SOURCES = 64  # sources per task: one round trip and one Arrow conversion per table for all
BATCH_BYTES = 8 * 1024 * 1024  # ... or fewer, once their files add up to this much
WAVE = 4  # tasks in flight per worker: bounds the memory of results not yet loaded


@dataclass
class Read:
    """What reading one source gave, but its rows (those travel in the batch's tables)."""

    source: Source
    result: ReadResult | None  # None: the source could not be read at all (see error)
    n_rows: int
    sessions: set[str]
    error: str | None
    redactions: dict[str, int]
    tail: str | None = None  # digest proving an append-only log only grew (see events.tail_digest)


@dataclass
class Batch:
    """Consecutive sources read by one task: their reads, and the rows of all of them as one Arrow
    table per staging table, in source order."""

    reads: list[Read]
    tables: dict[str, pa.Table]

    def __getstate__(self):
        # Arrow tables cross the process boundary as IPC streams: 4x cheaper than pickling them
        return {"reads": self.reads, "tables": {name: _to_ipc(t) for name, t in self.tables.items()}}

    def __setstate__(self, state):
        import pyarrow as pa

        self.reads = state["reads"]
        self.tables = {name: pa.ipc.open_stream(buf).read_all() for name, buf in state["tables"].items()}


def _to_ipc(table: pa.Table) -> pa.Buffer:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _read_one(source: Source, prior: Prior | None, run_id: str, redact: bool) -> tuple[Read, dict[str, list[dict]]]:
    redactor = Redactor(enabled=redact)
    ctx = Context(run_id=run_id, redact=redactor)
    try:
        res = READERS[source.kind](source, ctx, prior)
    except (OSError, ValueError, UnicodeError) as exc:
        return Read(source, None, 0, set(), f"could not be read: {type(exc).__name__}: {exc}",
                    dict(redactor.counts)), {}
    rows = {} if res.skipped_reason else res.rows
    res.rows = {}
    sessions = {r["session_id"] for rs in rows.values() for r in rs if r.get("session_id")}
    tail = tail_digest(source.path, res.last_good_offset) if source.kind in APPEND_KINDS else None
    n_rows = sum(len(rs) for rs in rows.values())
    return Read(source, res, n_rows, sessions, None, dict(redactor.counts), tail), rows


def read_batch(jobs: list[tuple[Source, Prior | None]], run_id: str, redact: bool) -> Batch:
    reads, rows = [], {}
    for src, prior in jobs:
        read, got = _read_one(src, prior, run_id, redact)
        reads.append(read)
        for table, rs in got.items():
            rows.setdefault(table, []).extend(rs)
    return Batch(reads, {table: to_arrow(table, rs) for table, rs in rows.items() if rs})


def _to_read(src: Source, prior: Prior | None, size: int) -> int:
    """About how many bytes reading a source takes: a grown log only its new bytes."""
    if prior is not None and src.kind in APPEND_KINDS and 0 < prior.last_good_offset <= size:
        return size - prior.last_good_offset
    return size


def _batches(jobs: list[tuple[Source, Prior | None, int]]) -> Iterator[list[tuple[Source, Prior | None]]]:
    batch, size = [], 0
    for src, prior, nbytes in jobs:
        if batch and (len(batch) >= BATCH_SOURCES or size + nbytes > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append((src, prior))
        size += nbytes
    if batch:
        yield batch


def read_all(jobs: list[tuple[Source, Prior | None, int]], run_id: str, redact: bool,
             workers: int | None = None) -> Iterator[Batch]:
    """Read every job (source, what the warehouse knows of it, its size), in order, in batches of
    consecutive sources; on several cores when there are enough of them to be worth it."""
    workers = workers if workers is not None else min(os.cpu_count() or 1, 8)
    if workers <= 1 or sum(_to_read(src, prior, size) for src, prior, size in jobs) < PARALLEL_MIN_BYTES:
        for batch in _batches(jobs):
            yield read_batch(batch, run_id, redact)
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: deque = deque()
        for batch in _batches(jobs):
            pending.append(pool.submit(read_batch, batch, run_id, redact))
            if len(pending) >= WAVE * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
