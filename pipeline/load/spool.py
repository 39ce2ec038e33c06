"""Moving rows into DuckDB: one ``insert`` of rows, Arrow tables or polars frames, and the ``Spool``
that stages a run's rows in Parquet parts so the run stays one transaction without its memory
growing with the corpus.

pyarrow and polars are imported when rows move, not with this module: each takes ~0.4 s to
import, and a run in which nothing changed (most runs) moves no rows.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ..parts import write_part
from ..schema import to_arrow
from ..warehouse import pid_alive, sql_literal

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

log = logging.getLogger(__name__)

RUN_FOLDER_PREFIX = ".ingest-"

# JSON columns of the staging tables written in one canonical form, DuckDB's (compact, keys in the
# order they were read, numbers and escapes as DuckDB writes them), whatever wrote them.
CANONICAL_JSON = {"stg_events": ("arguments", "extra"), "stg_tool_requests": ("arguments",)}


# texts stored once (stg_texts): the column of a table that names its text by key, and the text's column, NULL in
# the table where the key is set
STORED_ONCE = {"stg_events": ("content_key", "content")}

_PART_FILE = "_spool_part_file"  # the column naming each row's part, where event indexes are shifted


def insert_from(con: duckdb.DuckDBPyConnection, table: str, relation: str, shift: str = "", exclude: str = "") -> None:
    """Insert the rows of ``relation`` into ``table`` (``select_all``), the texts it stores once first: each into
    stg_texts unless there already."""
    if table in STORED_ONCE:
        key, text = STORED_ONCE[table]
        con.execute(f'insert into stg_texts select "{key}", any_value("{text}") from {relation} where "{key}" is not '
                    f'null and "{key}" not in (select text_key from stg_texts) group by "{key}"')
    con.execute(f'insert into "{table}" by name {select_all(table, relation, shift, exclude)}')


def prune_texts(con: duckdb.DuckDBPyConnection) -> None:
    """Remove from stg_texts the texts no staged row names any more (their sources read again or replaced)."""
    named = " union all ".join(f'select "{key}" from "{table}" where "{key}" is not null'
                               for table, (key, _text) in STORED_ONCE.items())
    con.execute(f"delete from stg_texts where text_key not in ({named})")


def select_all(table: str, relation: str, shift: str = "", exclude: str = "") -> str:
    """``select *`` from ``relation`` for an insert into ``table``, its JSON columns made canonical, ``shift``
    (SQL) added to its event indexes (the rows of a part of a log read beside its other parts), without
    the column ``exclude``, and without the texts stored once (``STORED_ONCE``)."""
    replace = [f'json("{c}")::varchar as "{c}"' for c in CANONICAL_JSON.get(table, ())]
    if table in STORED_ONCE:
        key, text = STORED_ONCE[table]
        replace.append(f'case when "{key}" is null then "{text}" end as "{text}"')
    if shift:
        replace.append(f'"event_index" + {shift} as "event_index"')
    dropped = f' exclude ("{exclude}")' if exclude else ""
    replaced = f" replace ({', '.join(replace)})" if replace else ""
    return f"select *{dropped}{replaced} from {relation}"


def run_folder(warehouse: str | Path) -> Path:
    """This run's private folder next to the warehouse (staged rows, copies of live databases);
    folders left by runs that were killed are removed first."""
    parent = Path(warehouse).resolve().parent
    for old in parent.glob(RUN_FOLDER_PREFIX + "*"):
        pid = old.name[len(RUN_FOLDER_PREFIX):].split("-", 1)[0]
        alive = pid.isdigit() and pid_alive(int(pid))
        # an older version named them without the pid: stale once a day old
        stale = not alive if pid.isdigit() else time.time() - old.stat().st_mtime > 86400
        if stale and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
            log.info("removed %s, left by an ingest that did not finish", old)
    return Path(tempfile.mkdtemp(prefix=f"{RUN_FOLDER_PREFIX}{os.getpid()}-", dir=parent))


def insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict] | pa.Table | pl.DataFrame) -> int:
    """Append ``rows`` to ``table`` by column name (dict rows and polars frames are cast to the
    declared columns first); returns how many."""
    import pyarrow as pa

    if isinstance(rows, list):
        tbl = to_arrow(table, rows)
    elif isinstance(rows, pa.Table):
        tbl = rows
    else:  # a polars frame
        from ..transform.star import conform

        tbl = conform(rows, table).to_arrow()
    if tbl.num_rows == 0:
        return 0
    con.register("_incoming", tbl)
    try:
        insert_from(con, table, "_incoming")
    finally:
        con.unregister("_incoming")
    return tbl.num_rows


class Spool:
    """Rows on their way into the warehouse, written to Parquet parts of about 64 MB, then loaded
    with one INSERT per table.

    DuckDB keeps the rows of many small inserts in memory until the transaction commits; one
    INSERT ... SELECT from Parquet writes them to the database file as it goes. So the run stays
    one transaction, and its memory does not grow with the size of the corpus. Rows that never
    filled a part (a small or incremental run) are inserted straight from memory.
    """

    ROW_BYTES = 256  # what a small bookkeeping row (a dict) is counted as
    PART_BYTES = 64 * 1024 * 1024
    LOAD_FILES = 64

    def __init__(self, con: duckdb.DuckDBPyConnection, folder: Path, limit_bytes: int | None = None,
                 load_memory: str | None = None):
        self.con, self.folder, self.limit = con, folder, limit_bytes or self.PART_BYTES
        self.load_memory = load_memory  # DuckDB's memory limit while the parts are loaded (None: as it is)
        self.pending: dict[str, list[pa.Table]] = {}
        self.pending_rows: dict[str, list[dict]] = {}  # converted to Arrow once per part, not per call
        self.parts: dict[str, int] = {}
        self.shifts: dict[Path, int] = {}  # parts whose event indexes are shifted as they load (``add_part``)
        self.sizes: dict[str, list[int]] = {}  # table -> [rows, bytes] of its parts
        self.bytes = 0
        self.replaced: dict[tuple[str, str], list] = {}  # (table, key column) -> keys whose old rows go

    def replace(self, table: str, column: str, key: object) -> None:
        """The row of ``table`` with this key is being written anew: its old row goes at load time."""
        self.replaced.setdefault((table, column), []).append(key)

    def add(self, table: str, rows: list[dict] | pa.Table) -> int:
        if isinstance(rows, list):
            n = len(rows)
            self.pending_rows.setdefault(table, []).extend(rows)
            self.bytes += n * self.ROW_BYTES
        else:
            n = rows.num_rows
            if n:
                self.pending.setdefault(table, []).append(rows)
                self.bytes += rows.get_total_buffer_size()
        if self.bytes >= self.limit:
            self._write()
        return n

    def _take(self) -> dict[str, pa.Table]:
        """The pending rows of each table as one Arrow table (tables as added, then dict rows)."""
        if not any(self.pending.values()) and not any(self.pending_rows.values()):
            return {}
        import pyarrow as pa

        for table, rows in self.pending_rows.items():
            if rows:
                self.pending.setdefault(table, []).append(to_arrow(table, rows))
        taken = {table: tables[0] if len(tables) == 1 else pa.concat_tables(tables)
                 for table, tables in self.pending.items() if tables}
        self.pending, self.pending_rows, self.bytes = {}, {}, 0
        return taken

    def _write(self) -> None:
        taken = self._take()
        if not taken:
            return
        for table, tbl in taken.items():
            path = self._next_part(table)
            write_part(tbl, path)
            self._count(table, path, tbl.num_rows)

    def _next_part(self, table: str) -> Path:
        n = self.parts.get(table, 0)
        (self.folder / table).mkdir(parents=True, exist_ok=True)
        self.parts[table] = n + 1
        return self.folder / table / f"part-{n:05d}.parquet"

    def add_part(self, table: str, path: str | Path, n_rows: int, shift: int = 0) -> int:
        """A Parquet part a reader wrote (``extract.parallel``, a large source read in pieces): moved in
        with the others, loaded with them, ``shift`` added to its rows' event indexes (a part of a large
        log read beside its other parts numbers its events from 0); returns how many rows it holds. Rows
        added before it are written first, so the table's rows load in the order they came."""
        if self.pending.get(table) or self.pending_rows.get(table):
            self._write()
        moved = self._next_part(table)
        os.replace(path, moved)
        self._count(table, moved, n_rows)
        if shift:
            self.shifts[moved] = shift
        return n_rows

    def _count(self, table: str, path: Path, n_rows: int) -> None:
        size = self.sizes.setdefault(table, [0, 0])
        size[0] += n_rows
        size[1] += path.stat().st_size

    def _in_parallel(self, table: str) -> bool:
        """Whether ``table``'s parts load without keeping their order: DuckDB then inserts on every thread,
        each filling row groups of its own, where an ordered INSERT builds them on one (1 GB `events` corpus,
        ~2.5 KB a row: stg_events 6.2-6.7 -> 3.2-3.7 s). Only while those row groups fit in a quarter of its
        memory limit: with ~9 KB a row (the `outputs` corpus) two of them pushed the load past 512 MB and it
        spilled (4.4-5.8 -> 7.1-8.9 s). A row's bytes are its parts' (a value repeated within a row group counts
        once there: such rows are taken for narrower than they are, and may spill). Nothing reads the tables
        in the order their rows were stored: the star puts each session's events in order itself
        (``load.star``)."""
        from ..warehouse import memory_limit, row_group_size, size_bytes

        rows, nbytes = self.sizes.get(table, (0, 0))
        threads = self.con.execute("select current_setting('threads')").fetchone()[0]
        limit = size_bytes(self.load_memory or memory_limit()) or 0
        return rows > 0 and 4 * threads * row_group_size() * nbytes / rows <= limit

    def _insert(self, table: str, files: list[Path]) -> None:
        """INSERT ``files`` into ``table``: each part's event indexes shifted as ``add_part`` was told, matched
        by its file name."""
        listed = ", ".join(sql_literal(str(f)) for f in files)
        shifts = [(f, self.shifts[f]) for f in files if self.shifts.get(f)]
        if not shifts:
            insert_from(self.con, table, f"read_parquet([{listed}])")
            return
        cases = " ".join(f"when {sql_literal(str(f))} then {int(n)}" for f, n in shifts)
        shift = f'(case "{_PART_FILE}" {cases} else 0 end)'
        insert_from(self.con, table, f"read_parquet([{listed}], filename = '{_PART_FILE}')", shift, _PART_FILE)

    def load(self) -> None:
        from ..warehouse import key_table, release_cache

        for (table, column), keys in self.replaced.items():  # one DELETE per table, not one per row
            self.con.execute(f'delete from "{table}" where "{column}" in {key_table(self.con, "_replaced", keys)}')
            self.con.execute('drop table "_replaced"')
        self.replaced = {}
        if not self.parts:  # less than one part in all (a small or incremental run): no Parquet round trip
            taken = self._take()
            for table in sorted(taken):
                insert(self.con, table, taken[table])
            return
        self._write()
        if self.load_memory:
            release_cache(self.con, self.load_memory)
        settings = self.con.cursor()  # DuckDB's settings are global; a SET in a failed transaction would fail
        try:
            for table in sorted(self.parts):
                settings.execute(f"set preserve_insertion_order = {not self._in_parallel(table)}")
                # at most LOAD_FILES parts per INSERT: DuckDB holds something of every file one reads
                # (thousands of small parts, from many large sources, ran out of memory in one)
                files = sorted((self.folder / table).glob("*.parquet"))
                for i in range(0, len(files), self.LOAD_FILES):
                    chunk = files[i:i + self.LOAD_FILES]
                    self._insert(table, chunk)
                    release_cache(self.con, self.load_memory)  # what this INSERT read is not read again here
                shutil.rmtree(self.folder / table)
        finally:
            self.sizes, self.shifts = {}, {}
            settings.execute("reset preserve_insertion_order")
            settings.close()
            if self.load_memory:
                release_cache(self.con)  # the usual limit again (set on a connection of its own)
        self.parts = {}
