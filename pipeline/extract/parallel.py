"""Reading sources on every core: each worker reads one source into Arrow tables.

Workers import only the readers (no DuckDB, no polars), start with ``spawn`` (never ``fork`` a
process that holds a DuckDB connection and its threads), and hand back Arrow tables, which
travel between processes as flat buffers. Results come back batch by batch in an order fixed by the
sources (``_batches``), so what is loaded, and in which order, does not depend on the number of workers.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from ..parts import write_part
from ..processes import gc_paused, lean_worker_init, stop_pool
from ..processes import pool as worker_pool
from ..redact import Redactor, stored_path
from ..schema import INT32, INT64, TABLES, to_arrow
from ..sources import APPEND_KINDS
from .base import READERS, Context, Prior, ReadResult, Source, max_text_chars
from .events import head_and_tail_digests, prefix_digest, read_span, resume_point
from .jsonl import JOIN_BUDGET, JOIN_PARSES, Budget

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

PARALLEL_MIN_BYTES = 24 * 1024 * 1024  # less to read than this: starting workers (~1 s) costs more than it saves
BATCH_SOURCES = 64  # sources per task: one round trip and one Arrow conversion per table for all
BATCH_BYTES = 8 * 1024 * 1024  # ... or fewer, once their files add up to this much
WAVE = 4  # tasks in flight per worker: bounds the memory of results not yet loaded
WORKER_BATCH_SOURCES = 512  # a worker's batch (see read_batch's to_parts)
WORKER_BATCH_BYTES = 32 * 1024 * 1024
# ... or less, so that each worker has two batches at least: a small home's 38 MB were a 32 MB batch on one
# worker and 6 MB on the other (5 alternating runs of the real samples: median 2.92 -> 2.79 s, the same peak RSS)
WORKER_BATCH_MIN_BYTES = 4 * 1024 * 1024
# an event log with at least twice this much to read is read in parts of about this much, on every core
# (``_split``): one 500 MB log was read by one worker while the others waited
PART_BYTES = 32 * 1024 * 1024
SPLIT_KINDS = frozenset({"events", "legacy_jsonl"})  # the kinds read by ``events.read_event_log``


@dataclass
class Read:
    """What reading one source gave, but its rows (those travel in the batch's tables)."""

    source: Source
    result: ReadResult | None  # None: the source could not be read at all (see error)
    n_rows: int
    sessions: set[str]
    error: str | None
    redactions: dict[str, int]
    tail: str | None = None  # digests of an append-only log: see _digests
    prefix: str | None = None
    head: str | None = None


@dataclass
class Batch:
    """Consecutive sources read by one task: their reads, and the rows of all of them, in source order,
    as one Arrow table per staging table or, read by a worker, as Parquet parts it wrote (table, file,
    rows): the rows then never cross the process boundary."""

    reads: list[Read]
    tables: dict[str, pa.Table]
    parts: list[tuple[str, str, int]] = field(default_factory=list)

    def __getstate__(self):
        # Arrow tables cross the process boundary as IPC streams: 4x cheaper than pickling them
        return {"reads": self.reads, "tables": {name: _to_ipc(t) for name, t in self.tables.items()},
                "parts": self.parts}

    def __setstate__(self, state: dict):
        import pyarrow as pa

        self.reads, self.parts = state["reads"], state["parts"]
        self.tables = {name: pa.ipc.open_stream(buf).read_all() for name, buf in state["tables"].items()}


def _to_ipc(table: pa.Table) -> pa.Buffer:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


SPILL_BYTES = 32 * 1024 * 1024  # a large source's rows are written out once this much of it was read
_SPILLED = itertools.count()  # parts this process wrote (names unique in the run's scratch folder)


class _Spill:
    """What a reader of a large source hands over as it goes (``Context.spill``): the rows read so far,
    redacted and converted, written to Parquet parts in the scratch folder (``ReadResult.parts``) and
    dropped from memory. The main process moves the parts into its spool."""

    def __init__(self, source: Source, ctx: Context, enabled: bool):
        self.source, self.ctx, self.enabled = source, ctx, enabled
        self.n_rows, self.sessions, self.files, self.held = 0, set(), [], 0

    def __call__(self, res: ReadResult, nbytes: int, force: bool = False) -> None:
        """``nbytes``: how much of the source was read since the last call; the rows are written once
        they come from SPILL_BYTES of it (fewer, larger parts), or now (``force``)."""
        self.held += nbytes
        if self.ctx.scratch is None or (self.held < SPILL_BYTES and not force) or not any(res.rows.values()):
            return
        self.held = 0
        _redact_table_rows(res.rows, self.ctx, self.enabled)
        for table, rows in res.rows.items():
            if not rows:
                continue
            self.sessions.update(r["session_id"] for r in rows if r.get("session_id"))
            tbl = _to_arrow_safe(table, rows, lambda row, reason: _note_in(res, self.source, row, reason))
            path = os.path.join(self.ctx.scratch, f"spill-{os.getpid()}-{next(_SPILLED):06d}-{table}.parquet")
            write_part(tbl, path)
            self.files.append(path)
            res.parts.append((table, path, tbl.num_rows, 0))
            self.n_rows += tbl.num_rows
        res.rows = {}

    def discard(self) -> None:
        """The source could not be read after all: its parts go (its earlier rows are kept)."""
        for path in self.files:
            with suppress(OSError):
                os.unlink(path)


def _read_one(source: Source, prior: Prior | None, run_id: str, redact: bool,
              scratch: str | None = None) -> tuple[Read, dict[str, list[dict]]]:
    redactor = Redactor(enabled=redact)
    ctx = Context(run_id=run_id, redact=redactor, max_text=max_text_chars(), scratch=scratch)
    spill = ctx.spill = _Spill(source, ctx, redact)
    try:
        res = READERS[source.kind](source, ctx, prior)
    except Exception as exc:  # noqa: BLE001 - a reader that fails on some content: the file is one reject
        spill.discard()
        return Read(source, None, 0, set(), _failure(exc), dict(redactor.counts)), {}
    _redact_rows(res, ctx, redact)
    if res.skipped_reason:
        spill.discard()
        res.parts = []
    rows = {} if res.skipped_reason else res.rows
    res.rows = {}
    sessions = spill.sessions | {r["session_id"] for rs in rows.values() for r in rs if r.get("session_id")}
    digests = _digests(source.path, res.last_good_offset) if source.kind in APPEND_KINDS else (None, None, None)
    n_rows = spill.n_rows + sum(len(rs) for rs in rows.values())
    return Read(source, res, n_rows, sessions, None, dict(redactor.counts), *digests), rows


def _failure(exc: Exception) -> str:
    """Why a source could not be read: the file as a whole (gone, no permission, a full temp folder, ...),
    or a reader that failed on some content."""
    if isinstance(exc, OSError):
        return f"could not be read: {exc.strerror or exc}"
    return f"could not be read: {type(exc).__name__}: {exc}"


def _digests(path: str, offset: int) -> tuple[str, str, str]:
    """An append-only log's digests as ``Read`` holds them - of the 4 KiB before ``offset`` (where reading
    stopped), of everything before it, of its first 4 KiB (``events.head_and_tail_digests``, ``prefix_digest``)."""
    head, tail = head_and_tail_digests(path, offset)
    return tail, prefix_digest(path, offset), head


# Tables whose every text the readers redact themselves, with the line screen (see events.event_rows):
# of their rows only the session id and the source path are redacted here.
_SCREENED = frozenset({"stg_events", "stg_tool_requests"})


def _redact_rows(res: ReadResult, ctx: Context, enabled: bool) -> None:
    """Every text a reader produced goes through redaction before it is stored: metadata, paths,
    ids, store rows, rejects (reasons and excerpts too). Paths and ids become valid UTF-8."""
    redact = ctx.redact if enabled else (lambda v: v)
    _redact_table_rows(res.rows, ctx, enabled)
    for r in res.rejects:
        r["source_path"] = stored_path(r["source_path"], enabled)
        for key in ("reason", "excerpt"):
            if isinstance(r.get(key), str):
                r[key] = redact(r[key].encode("utf-8", "surrogatepass").decode("utf-8", "replace"))


def _redact_table_rows(tables: dict[str, list[dict]], ctx: Context, enabled: bool) -> None:
    redact = ctx.redact if enabled else (lambda v: v)
    for table, rows in tables.items():
        if table in _SCREENED:
            for row in rows:
                for key in ("session_id", "_source_path"):
                    if isinstance(row.get(key), str):
                        row[key] = stored_path(row[key], enabled)
            continue
        for row in rows:
            for key, value in row.items():
                if isinstance(value, str):
                    row[key] = stored_path(value, enabled) if key in ("_source_path", "session_id") else redact(value)


@gc_paused()
def read_batch(jobs: list[tuple[Source, Prior | None]], run_id: str, redact: bool,
               scratch: str | None = None, to_parts: bool = False) -> Batch:
    """Read the jobs' sources in order; ``to_parts`` (a worker's batch, with a ``scratch`` folder): their rows
    written to Parquet parts there instead of handed back (the main process then only moves the files:
    sending ~1 GB of rows through a pipe and writing them out again in the main process cost the 1 GB
    `events` corpus ~2 s of the read phase's 16)."""
    reads, rows = [], {}
    for src, prior in jobs:
        read, got = _read_one(src, prior, run_id, redact, scratch)
        reads.append(read)
        for table, rs in got.items():
            rows.setdefault(table, []).extend(rs)
    by_path = {stored_path(r.source.path): r for r in reads if r.result is not None}

    def note(row: dict, reason: str) -> None:
        read = by_path.get(row.get("_source_path"))
        if read is not None:
            _note_in(read.result, read.source, row, reason)
    tables = {table: _to_arrow_safe(table, rs, note) for table, rs in rows.items() if rs}
    if not (to_parts and scratch is not None):
        return Batch(reads, tables)
    parts = []
    for table, tbl in tables.items():
        path = os.path.join(scratch, f"batch-{os.getpid()}-{next(_SPILLED):06d}-{table}.parquet")
        write_part(tbl, path)
        parts.append((table, path, tbl.num_rows))
    return Batch(reads, {}, parts)


def _to_arrow_safe(table: str, rows: list[dict], note: Callable[[dict, str], None]) -> pa.Table:
    """The rows as an Arrow table; when some row has a value its column cannot hold (a reader missed
    it), the rows are converted one by one: a value out of range becomes NULL with a note, a row that
    still fails is a reject of its own (``note(row, reason)``), and every other row is kept."""
    try:
        return to_arrow(table, rows)
    except Exception:  # noqa: BLE001 - pyarrow's errors vary; the rows are examined one by one below
        pass
    import pyarrow as pa

    kept = []
    for row in rows:
        notes = _fit(table, row)
        try:
            to_arrow(table, [row])
        except Exception as exc:  # noqa: BLE001
            note(row, f"{table} row could not be stored: {type(exc).__name__}: {exc}")
            continue
        if notes:
            note(row, f"{table} row kept; {'; '.join(notes)}")
        kept.append(row)
    return to_arrow(table, kept) if kept else pa.Table.from_pylist([], schema=to_arrow(table, []).schema)


def _fit(table: str, row: dict) -> list[str]:
    """Make every value of ``row`` fit its declared column (in place); what was changed."""
    notes = []
    for col in TABLES[table].columns:
        v = row.get(col.name)
        if v is None:
            continue
        if col.type in ("INTEGER", "BIGINT"):
            lo, hi = INT32 if col.type == "INTEGER" else INT64
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                row[col.name] = None
                notes.append(f"{col.name} = {str(v)[:40]} does not fit (set to NULL)")
        elif col.type == "DOUBLE":
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v != v or v in (float("inf"), -float("inf")):
                row[col.name] = None
                notes.append(f"{col.name} = {str(v)[:40]} is not a finite number (set to NULL)")
        elif col.type == "VARCHAR":
            text = v if isinstance(v, str) else str(v)
            row[col.name] = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        elif col.type == "BOOLEAN" and not isinstance(v, bool):
            row[col.name] = None
    return notes


def _note_in(res: ReadResult, source: Source, row: dict, reason: str) -> None:
    """A reject row in ``res`` for a staged row that did not fit (at its line, when it has one)."""
    line = row.get("_source_line") if isinstance(row.get("_source_line"), int) else None
    res.reject(source.path, Redactor()(reason), line=line, offset=row.get("_source_offset") if line else None)
    res.rejects[-1]["source_path"] = stored_path(source.path)


def _to_read(src: Source, prior: Prior | None, size: int) -> int:
    """About how many bytes reading a source takes: a grown log only its new bytes."""
    if prior is not None and src.kind in APPEND_KINDS and 0 < prior.last_good_offset <= size:
        return size - prior.last_good_offset
    return size


def _batches(jobs: list[tuple[Source, Prior | None, int]], max_sources: int = BATCH_SOURCES,
             max_bytes: int = BATCH_BYTES) -> Iterator[list[tuple[Source, Prior | None]]]:
    """The jobs in batches of up to ``max_sources`` sources or ``max_bytes`` to read, in their order; a batch
    comes when it is full (or at the end), so the batches are the same on every run."""
    batch, size = [], 0
    for src, prior, nbytes in jobs:
        if batch and (len(batch) >= max_sources or size + nbytes > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append((src, prior))
        size += nbytes
    if batch:
        yield batch


@dataclass(frozen=True)
class Part:
    """A part of a large event log read beside its other parts: from byte ``start`` (the start of line
    ``line``) to ``stop`` (the end of a line; None: the end of the file)."""

    start: int
    line: int
    stop: int | None


@dataclass
class PartRead:
    """What reading one part gave: its rows as Parquet parts, its rejects, its events, where it stopped, and
    what rejoining broken events spent in it."""

    parts: list[tuple[str, str, int, int]]
    rejects: list[dict]
    n_events: int
    good_offset: int
    good_line: int
    pending_tail: bool
    more: bool
    spent: tuple[int, int]  # bytes parsed and parses, of the file's Budget
    n_rows: int
    sessions: set[str]
    redactions: dict[str, int]
    error: str | None = None


def _split(src: Source, prior: Prior | None, size: int) -> tuple[Iterator[Part], tuple[int, int, int, bool]] | None:
    """A large event log's parts, found as they are asked for (each cut at a line end about PART_BYTES after
    the last, with the number of its first line), and where reading it starts (``events.resume_point``:
    offset, line, event index, whether its rows continue those read before); None for a source read whole."""
    if src.kind not in SPLIT_KINDS or _to_read(src, prior, size) < 2 * PART_BYTES:
        return None
    try:
        begin = resume_point(src.path, prior)
    except OSError:
        return None  # the reader says what is wrong with the file
    return _parts(src.path, begin[0], begin[1]), begin


def _parts(path: str, start: int, line: int) -> Iterator[Part]:
    pos = start
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            n = max(1, (size - start) // PART_BYTES)
            fh.seek(start)
            for target in (start + (size - start) * k // n for k in range(1, n)):
                if target <= pos:
                    continue
                lines = _count_lines(fh, target - pos)  # the file from ``pos`` to ``target``
                rest = fh.readline()  # ... and to the end of the line ``target`` falls in
                if not rest.endswith(b"\n"):
                    break  # no line ends after ``target``: the last part runs to the end
                yield Part(pos, line, target + len(rest))
                pos, line = target + len(rest), line + lines + 1
    except OSError:
        pass  # the last part (from here to the end) is read as any file is, and says what is wrong
    yield Part(pos, line, None)


def _count_lines(fh: BinaryIO, nbytes: int) -> int:
    """The newlines in the next ``nbytes`` bytes of ``fh`` (read 8 MB at a time)."""
    n = 0
    while nbytes > 0:
        chunk = fh.read(min(nbytes, 8 * 1024 * 1024))
        if not chunk:
            break
        n += chunk.count(b"\n")
        nbytes -= len(chunk)
    return n


@gc_paused()
def read_part(source: Source, part: Part, run_id: str, redact: bool, scratch: str | None, first: int = 0,
              spent: tuple[int, int] = (0, 0)) -> PartRead:
    """Read one part of a large event log (its events numbered from ``first``, rejoining broken events with
    ``spent`` of the file's budget gone), every row written to Parquet parts in ``scratch``."""
    redactor = Redactor(enabled=redact)
    ctx = Context(run_id=run_id, redact=redactor, max_text=max_text_chars(), scratch=scratch)
    spill = ctx.spill = _Spill(source, ctx, redact)
    res, budget = ReadResult(), Budget()
    budget.bytes, budget.parses = budget.bytes - spent[0], budget.parses - spent[1]
    try:
        state = read_span(res, source, ctx, source.kind, part.start, part.line, first, budget, part.stop)
        spill(res, 0, force=True)
    except Exception as exc:  # noqa: BLE001 - the file is read in one go from this part on (and says what)
        spill.discard()
        return PartRead([], [], 0, part.start, part.line, False, True, (0, 0), 0, set(),
                        dict(redactor.counts), _failure(exc))
    _redact_rows(res, ctx, redact)
    return PartRead(res.parts, res.rejects, res.n_records - first, state.good_offset, state.good_line,
                    state.pending_tail, state.more, (JOIN_BUDGET - budget.bytes, JOIN_PARSES - budget.parses),
                    spill.n_rows, spill.sessions, dict(redactor.counts))


def _stitched(src: Source, parts: list[Part], begin: tuple[int, int, int, bool], reads: Iterator[PartRead],
              run_id: str, redact: bool, scratch: str | None,
              read: Callable[..., PartRead] = read_part) -> Batch:
    """One Read of a log read in parts: the parts taken in order while each ends where the next starts
    (``more`` unset) and what rejoining spent in them all stays under the file's budget - then they are what
    reading the file in one go gives, event numbers shifted by the events before them; from the first part
    that does not (a broken event across a cut, an error), the rest of the file is read in one go, by
    ``read`` (``read_part`` on a worker)."""
    res = ReadResult(appended=begin[3])
    index, spent, n_rows, sessions, counts = begin[2], (0, 0), 0, set(), {}
    taken: PartRead | None = None

    def take(got: PartRead, shift: int) -> None:
        nonlocal index, n_rows, sessions, counts, taken
        res.parts += [(t, p, n, shift) for t, p, n, _ in got.parts]
        res.rejects += got.rejects
        index, n_rows, sessions, taken = index + got.n_events, n_rows + got.n_rows, sessions | got.sessions, got
        counts = {key: counts.get(key, 0) + got.redactions.get(key, 0) for key in {*counts, *got.redactions}}

    for part, got in zip(parts, reads, strict=True):
        total = (spent[0] + got.spent[0], spent[1] + got.spent[1])
        joins = taken is None or (not taken.more and taken.good_offset == part.start and taken.good_line == part.line)
        if got.error is None and joins and total[0] < JOIN_BUDGET and total[1] < JOIN_PARSES:
            take(got, index)
            spent = total
            continue
        for later in (got, *reads):  # this part and every one after it: read again below
            for _t, path, _n, _s in later.parts:
                with suppress(OSError):
                    os.unlink(path)
        start = Part(taken.good_offset, taken.good_line, None) if taken else Part(begin[0], begin[1], None)
        why = got.error or ("rejoining broken events spent the file's budget" if joins else
                            "an event may run past a cut")
        log.debug("%s", Redactor(enabled=redact)(f"{src.path}: read in one go from line {start.line} ({why})"))
        rest = read(src, start, run_id, redact, scratch, index, spent)
        take(rest, 0)  # its events numbered from ``index`` already
        if rest.error is not None:  # as when the file is read in one go: its rows go, it is one reject
            for _t, path, _n, _s in res.parts:
                with suppress(OSError):
                    os.unlink(path)
            return Batch([Read(src, None, 0, set(), rest.error, counts)], {})
        break
    res.last_good_offset, res.good_line, res.pending_tail = taken.good_offset, taken.good_line, taken.pending_tail
    res.n_records = index
    return Batch([Read(src, res, n_rows, sessions, None, counts, *_digests(src.path, res.last_good_offset))], {})


def read_all(jobs: list[tuple[Source, Prior | None, int]], run_id: str, redact: bool,
             workers: int | None = None, scratch: str | None = None) -> Iterator[Batch]:
    """Read every job (source, what the warehouse knows of it, its size) in batches (see ``_batches``),
    on several cores when there is enough to read to be worth it."""
    workers = workers if workers is not None else min(os.cpu_count() or 1, 8)
    if workers <= 1 or sum(_to_read(src, prior, size) for src, prior, size in jobs) < PARALLEL_MIN_BYTES:
        for batch in _batches(jobs):
            yield read_batch(batch, run_id, redact, scratch)
        return
    # a worker writes each batch's rows as Parquet parts: larger batches, fewer and larger parts to load
    import multiprocessing

    pool = worker_pool(workers, multiprocessing.get_context("spawn"), lean_worker_init)
    try:
        pending: deque = deque()  # (futures, how their results become a Batch), in the jobs' order
        in_flight = 0
        total = sum(_to_read(src, prior, size) for src, prior, size in jobs)
        most = max(WORKER_BATCH_MIN_BYTES, min(WORKER_BATCH_BYTES, total // (2 * workers)))
        for task in _tasks(jobs, scratch is not None, most):
            if isinstance(task, tuple):  # a large log, read in parts (each on its way as soon as it is found)
                src, found, begin = task
                parts, futures = [], []
                for part in found:
                    parts.append(part)
                    futures.append(pool.submit(read_part, src, part, run_id, redact, scratch))
                pending.append((futures, lambda got, src=src, parts=parts, begin=begin: _stitched(
                    src, parts, begin, got, run_id, redact, scratch,
                    lambda *args: pool.submit(read_part, *args).result())))
            else:
                futures = [pool.submit(read_batch, task, run_id, redact, scratch, True)]
                pending.append((futures, lambda got: next(got)))
            in_flight += len(futures)
            while in_flight >= WAVE * workers:
                in_flight -= len(pending[0][0])
                yield _done(*pending.popleft())
        while pending:
            yield _done(*pending.popleft())
    except BaseException:
        stop_pool(pool)  # Ctrl-C or an error: the workers stop now, not after their batches
        raise
    pool.shutdown()


def _done(futures: list, make: Callable[[Iterator], Batch]) -> Batch:
    return make(f.result() for f in futures)


def _tasks(jobs: list[tuple[Source, Prior | None, int]], split_logs: bool = True,
           batch_bytes: int = WORKER_BATCH_BYTES) -> Iterator[list[tuple[Source, Prior | None]] | tuple]:
    """The jobs as a worker's tasks, in order: batches of sources (``_batches``, of up to ``batch_bytes`` to
    read), and each large event log alone, as its parts (``_split``; ``split_logs``: the parts have a scratch
    folder to be written to)."""
    run: list[tuple[Source, Prior | None, int]] = []
    for src, prior, size in jobs:
        split = _split(src, prior, size) if split_logs else None
        if split is None:
            run.append((src, prior, size))
            continue
        yield from _batches(run, WORKER_BATCH_SOURCES, batch_bytes)
        run = []
        yield (src, *split)
    yield from _batches(run, WORKER_BATCH_SOURCES, batch_bytes)
