"""The DuckDB warehouse: created from the declared schema, with column comments for BI tools."""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from . import extensions
from .schema import (  # noqa: F401  (re-exported)
    ALL_TABLES,
    FORMAT_VERSION,
    MODELS,
    RESULT_HEAD_CHARS,
    VIEWS,
    Table,
    arrow_schema,
    to_arrow,
)

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


def memory_limit() -> str:
    """DuckDB's memory limit: ``$COPILOT_WAREHOUSE_MEMORY`` (e.g. ``4GB``), else 512 MB. DuckDB may
    otherwise take 80% of RAM and hold a whole ingest's rows in memory; past this it spills to a
    temporary folder next to the warehouse. What an ingest keeps under the limit is mostly a cache of
    the table blocks it read: 1 GB cached more of them and ran no faster (1 GB corpora, two rounds:
    full ingest 24.2-24.9 s against 25.8-28.6 s on `outputs`, 31.2-36.6 s against 35.0-36.7 s on
    `events`; peak RSS 1.29-1.49 against 1.72-1.97 GB, 1.41-1.60 against 1.69-1.74 GB)."""
    return os.environ.get("COPILOT_WAREHOUSE_MEMORY", "512MB")


_PROCESS_TEMP: dict[int, str] = {}
_MADE: list[tuple[int, str]] = []  # (pid, folder) of the spill folders named by this process
_SWEPT: set[int] = set()
TEMP_FOLDER = re.compile(r"copilot-warehouse-(\d+)-[0-9a-f]{8}")


def private_temp_directory(per_process: bool = False) -> str:
    """A spill folder of this connection's own, for a connection that is not the warehouse's writer: DuckDB's
    default is ``.tmp`` in the working folder for an in-memory database (``<file>.tmp`` beside a file opened read-
    only), and every process names its spill file the same there (``duckdb_temp_storage_DEFAULT-0.tmp``). Two of
    them spilling at once read each other's blocks: sixteen pushes to one lake at once gave out-of-memory errors
    for blocks of 1-4 GiB and segmentation faults. Under the system's temporary folder (``$TMPDIR``); DuckDB makes
    it when it first spills. It does not always remove it (16 pushes at once left 13 empty ones), so the process
    removes the folders it named when it exits, and the first call of a process removes those of processes that
    are gone (killed). ``per_process``: one folder for the whole process (a file opened read-only twice in one
    process is one DuckDB instance, which refuses a second connection with other settings)."""
    import secrets
    import tempfile

    root = Path(tempfile.gettempdir())
    pid = os.getpid()
    if pid not in _SWEPT:
        _SWEPT.add(pid)
        _sweep(root)
        if len(_SWEPT) == 1:  # once: a forked child runs its parent's handler, which removes its own pid's folders
            atexit.register(_remove_made)

    def new() -> str:
        path = str(root / f"copilot-warehouse-{pid}-{secrets.token_hex(4)}")
        _MADE.append((pid, path))
        return path
    if not per_process:
        return new()
    if pid not in _PROCESS_TEMP:
        _PROCESS_TEMP[pid] = new()
    return _PROCESS_TEMP[pid]


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs and is not this one (a folder named by this pid before is a dead one's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid != os.getpid()


def _sweep(root: Path) -> None:
    """Remove the spill folders of processes that are gone."""
    try:
        found = list(root.iterdir())
    except OSError:
        return
    for path in found:
        m = TEMP_FOLDER.fullmatch(path.name)
        if m and not pid_alive(int(m.group(1))) and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


def _remove_made() -> None:
    for pid, path in _MADE:
        if pid == os.getpid():
            shutil.rmtree(path, ignore_errors=True)


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def size_bytes(size: str) -> int | None:
    """A size as DuckDB's settings take it (``512MB``, ``1.5 GiB``) in bytes; None when it is none."""
    text = size.strip().upper()
    number = text.rstrip("KMGTIB ")
    try:
        value = float(number)
    except ValueError:
        return None
    unit = text[len(number):].strip()
    return int(value * _UNITS[unit]) if unit in _UNITS and value >= 0 else None


CACHE_FLOOR = "64MB"


def memory_limit_unless_set(cap: str) -> str:
    """DuckDB's memory limit for a step that needs little of it: ``cap``, unless
    ``$COPILOT_WAREHOUSE_MEMORY`` is set (then that)."""
    return os.environ.get("COPILOT_WAREHOUSE_MEMORY", cap)


def release_cache(con: duckdb.DuckDBPyConnection, limit: str | None = None) -> None:
    """Give back the memory DuckDB keeps after its queries: lowering its memory limit for a moment makes
    it evict the cached blocks nothing holds (they are in the database file or its temp folder) and
    return the memory its allocator kept to the system; the limit is then set back. The star rebuild
    calls it before each batch: what the stage and the batch before read is not read again, and
    keeping it held ~0.45 GB of peak RSS (1 GB `events` corpus: 1.54 -> 1.10 GB). When more than
    ``CACHE_FLOOR`` is in use, DuckDB refuses the lower limit and nothing is evicted. The limit set back
    is ``limit`` (None, or when DuckDB holds more than that: ``memory_limit()``)."""
    # on a connection of its own: a SET that fails inside the run's transaction aborts the transaction
    # (DuckDB 1.5, when what it holds cannot be freed for the lower limit: seen after an upgrade's
    # UPDATE); the limit is global, so it applies to ``con`` all the same
    own = con.cursor()
    try:
        try:
            own.execute(f"set memory_limit = '{CACHE_FLOOR}'")
        except duckdb.Error:
            log.debug("DuckDB holds more than %s: its cache is left as it is", CACHE_FLOOR)
        finally:
            try:
                own.execute(f"set memory_limit = '{limit or memory_limit()}'")
            except duckdb.Error:  # it holds more than ``limit``
                own.execute(f"set memory_limit = '{memory_limit()}'")
    finally:
        own.close()
    _trim()


def _trim() -> None:
    """Memory the C allocator holds free goes back to the system (glibc keeps what DuckDB and the Arrow
    conversions free in its arenas: RSS that nothing uses)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


ROW_GROUP_SIZE = 16_384


def row_group_size() -> int:
    """Rows per row group of the tables a writing connection stores: ``$COPILOT_WAREHOUSE_ROW_GROUP_SIZE``,
    else 16,384. DuckDB's default (122,880) buffers that many rows of a table before writing them: with
    tool outputs of ~45 KB, gigabytes, so a 1 GB memory limit spills and writes everything twice
    (1 GB `outputs` corpus: full ingest 57 -> 45 s, stage 13.6 -> 7.2 s, commit 10.3 -> 4.8 s; the
    `events` corpus the same within the noise)."""
    value = os.environ.get("COPILOT_WAREHOUSE_ROW_GROUP_SIZE", "")
    return int(value) if value.isdigit() and int(value) >= 2048 else ROW_GROUP_SIZE


RESULT_CHARS = 4096


def result_chars() -> int:
    """How many characters of each tool output fct_tool_calls holds: ``$COPILOT_WAREHOUSE_RESULT_CHARS``,
    else 4,096; 0 keeps all of it. The whole output is stored once, in stg_events (the view
    ``tool_call_outputs`` gives it): a copy in fct_tool_calls doubled the warehouse on a corpus of
    large outputs, and filling it in was a join that took a third of the ingest."""
    value = os.environ.get("COPILOT_WAREHOUSE_RESULT_CHARS", "").strip()
    if not value:
        return RESULT_CHARS
    if not value.isdigit():
        raise WarehouseError(f"COPILOT_WAREHOUSE_RESULT_CHARS={value!r}: give a number of characters (0: all)")
    return int(value)


def stored_result_chars(con: duckdb.DuckDBPyConnection) -> int:
    """The ``result_chars`` the star rows were built with (0, all of it, before the setting existed)."""
    return meta_int(con, "result_chars", 0)


def meta(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    """The value ``_meta`` holds for ``key``, or None."""
    row = con.execute("select value from _meta where key = ?", [key]).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def meta_int(con: duckdb.DuckDBPyConnection, key: str, default: int) -> int:
    """The number ``_meta`` holds for ``key``; ``default`` when it holds none."""
    value = meta(con, key)
    return int(value) if value and value.isdigit() else default


def set_meta(con: duckdb.DuckDBPyConnection, key: str, value: object) -> None:
    con.execute("delete from _meta where key = ?", [key])
    con.execute("insert into _meta values (?, ?)", [key, str(value)])


# the whole output of each tool call, from the one place it is stored (stg_events.result_content, or its
# result_head when that holds it whole; a lake read where it is (team mode) has no staging rows: there it is what
# fct_tool_calls holds); declared in schema.VIEWS
VIEW_SQL = {"tool_call_outputs": """
select c.session_id, c.tool_call_id, coalesce(e.result_content, e.result_head, c.result_content) as result_content,
       c.result_chars, c.result_md5
from fct_tool_calls as c
left join stg_events as e on e._source_path = c.result_source_path and e._source_line = c.result_source_line
"""}


# What an upgrade computes in SQL for the staged rows it cannot read again (their source is gone from
# disk; every other source is read again): stg_events.result_head/_chars/_md5 (format 4), what the star
# reads of a tool output instead of the whole of it. The head is the first RESULT_HEAD_CHARS characters,
# or, when the first two less are white space, up to the first two others (as extract.events.result_facts).
_WS = r"[\t\n\x0B\f\r\x{85}\pZ]*"
_HEAD = (f"case when length(result_content) <= {RESULT_HEAD_CHARS} then result_content "
         f"when regexp_full_match(left(result_content, {RESULT_HEAD_CHARS - 2}), '{_WS}') "
         f"then left(result_content, length(regexp_extract(result_content, '^{_WS}')) + 2) "
         f"else left(result_content, {RESULT_HEAD_CHARS}) end")
UPGRADE_SQL = [f"update stg_events set result_head = {_HEAD}, result_chars = length(result_content), "
               "result_md5 = md5(result_content) where result_content is not null and result_md5 is null",
               # an output its head holds whole is stored there only, as the reader stores it
               "update stg_events set result_content = null "
               "where result_content is not null and length(result_head) = result_chars"]


def fill_kept_rows(con: duckdb.DuckDBPyConnection) -> None:
    """After an upgrade read every source again: the new columns of the rows kept from sources gone from disk."""
    for sql in UPGRADE_SQL:
        con.execute(sql)


def key_table(con: duckdb.DuckDBPyConnection, name: str, values: list) -> str:
    """A temp table ``name`` of one VARCHAR column ``key`` holding ``values``; returns the subquery
    that selects them (``(select key from name)``). A long list passed as a query parameter costs
    DuckDB 1.5 ~0.2 ms per element in every query that names it (5,000 sessions: 1.1 s a query);
    a table of them costs that once, through Arrow (``temp_table``)."""
    import pyarrow as pa

    temp_table(con, name, pa.table({"key": pa.array([None if v is None else str(v) for v in values], pa.string())}))
    return f'(select key from "{name}")'


def temp_table(con: duckdb.DuckDBPyConnection, name: str, rows: pa.Table) -> None:
    """A temp table ``name`` holding ``rows`` (their columns and types), in place of any of that name."""
    con.register("_temp_rows", rows)
    try:
        con.execute(f'create or replace temp table "{name}" as select * from _temp_rows')
    finally:
        con.unregister("_temp_rows")


class WarehouseError(Exception):
    """The warehouse cannot be opened or written."""


class WarehouseBusy(WarehouseError):
    """Another process is writing the warehouse."""


# How long a writer waits for readers to let go of the warehouse file (DuckDB lets one process write it,
# and none do while another has it open): $COPILOT_WAREHOUSE_LOCK_WAIT seconds, else 60
LOCK_WAIT = 60.0


def _gate(path: str | Path) -> Path:
    """The writer's gate beside a warehouse: a writer holds it exclusively for its whole run, and this tool's
    readers do not open the warehouse meanwhile - so a busy `serve` never keeps an ingest out."""
    return Path(f"{path}.writer")


@contextmanager
def writing(path: str | Path):
    """Hold the warehouse's writer gate for the block: this tool's readers stop opening the warehouse (they
    say it is busy; `serve` answers from its prebuilt index), those reading now finish, and a second writer is
    refused with one line. Without ``fcntl`` (Windows), the block runs without the gate."""
    if not FLOCK:
        yield
        return
    gate = _gate(path)
    try:
        gate.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WarehouseError(f"cannot create the warehouse folder {gate.parent}: {exc.strerror}") from exc
    try:
        fd = os.open(gate, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise WarehouseError(f"cannot create {gate}: {exc.strerror}") from exc
    try:
        if lock_exclusively(fd, 2.0) is None:  # a reader holds the gate shared for a moment only
            raise WarehouseBusy(f"another process is writing {path} (an ingest, or `models`): run again when it is "
                                "done")
        yield
    finally:
        os.close(fd)  # the lock goes with the descriptor


FLOCK = importlib.util.find_spec("fcntl") is not None  # advisory file locks: POSIX, not Windows


def lock_exclusively(fd: int, wait: float, waiting: Callable[[], None] | None = None) -> float | None:
    """An exclusive advisory lock (``flock``) on the open file ``fd``, waited for up to ``wait`` seconds: the seconds
    waited (0.0: at once), or None when another process still held it. ``waiting`` is called once, when the wait
    starts. OSError: the file system takes no locks. The lock goes when ``fd`` is closed."""
    import fcntl

    asked, waited = time.monotonic(), False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return time.monotonic() - asked if waited else 0.0
        except BlockingIOError:
            if time.monotonic() - asked > wait:
                return None
            if not waited and waiting is not None:
                waiting()
            waited = True
            time.sleep(0.02)


def may_read(path: str | Path) -> None:
    """A reader's look at the writer's gate: busy while a writer holds it."""
    try:
        import fcntl
    except ImportError:
        return
    try:
        fd = os.open(_gate(path), os.O_RDONLY)
    except OSError:
        return  # never written by this version, or not ours to read: DuckDB's own lock still applies
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise WarehouseBusy(f"an ingest is writing {path}: run again when it is done") from None
    finally:
        os.close(fd)


def locked(exc: Exception) -> bool:
    """Whether a DuckDB error says another process holds the file."""
    return "Could not set lock" in str(exc) or "Conflicting lock" in str(exc)


def quiet(con: duckdb.DuckDBPyConnection) -> None:
    """No progress bar of DuckDB's own: it is on by default and drew on the terminal during any query
    over 2 s (a `report --quiet` of the 1 GB `events` warehouse showed one); the CLI draws its own, on a
    TTY. A connection setting (DuckDB refuses it in ``connect``'s config)."""
    con.execute("set enable_progress_bar = false")


def check_file(path: str | Path) -> None:
    """A file given as the warehouse must be a DuckDB database (or empty): DuckDB would open a SQLite file
    through its sqlite extension and fail later on a missing table, or write its own tables into it."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except FileNotFoundError:
        return
    except IsADirectoryError as exc:
        raise WarehouseError(f"{path} is a folder, not a warehouse file (give a .duckdb file)") from exc
    except OSError as exc:
        raise WarehouseError(f"cannot read the warehouse {path}: {exc.strerror}") from exc
    if not head or head[8:12] == b"DUCK":
        return
    kind = ("is a SQLite database, not a warehouse" if head.startswith(b"SQLite format 3") else
            "is a Parquet file, not a warehouse" if head.startswith(b"PAR1") else "is not a DuckDB database")
    raise WarehouseError(f"{path} {kind}: give --warehouse a DuckDB file (.duckdb) of its own")


def connect(path: str | Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to the warehouse. A reader first looks at the writer's gate (``writing``) and is told the
    warehouse is busy while an ingest writes it; a writer waits up to LOCK_WAIT seconds for readers that
    have the file open (this tool's finish their query; another program's may not)."""
    reader = getattr(path, "reader", None)
    if reader is not None:  # a lake read where it is (``lake.Lake``), in place of a warehouse file
        if not read_only:
            raise WarehouseError(f"{path} is read where it is: nothing here writes it")
        return reader()
    path = Path(path)
    if not read_only:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WarehouseError(f"cannot create the warehouse folder {path.parent}: {exc.strerror}") from exc
    elif not path.exists():
        raise WarehouseError(f"no warehouse at {path}: run `python -m pipeline ingest` first")
    else:
        may_read(path)
    check_file(path)
    wait = float(os.environ.get("COPILOT_WAREHOUSE_LOCK_WAIT") or LOCK_WAIT)
    deadline = time.monotonic() + (0.0 if read_only else wait)
    while True:
        try:
            return _open(path, read_only)
        except WarehouseBusy:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def _open(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    try:
        settings = {"memory_limit": memory_limit(), **extensions.config()}
        if os.environ.get("COPILOT_WAREHOUSE_THREADS"):
            settings["threads"] = int(os.environ["COPILOT_WAREHOUSE_THREADS"])
        if read_only:  # readers at once (a report's page workers) each spill to a folder of their own
            con = duckdb.connect(str(path), read_only=True,
                                 config={**settings, "temp_directory": private_temp_directory(per_process=True)})
        else:
            # the row group size is an option of ATTACH: an in-memory connection attaches the file (its
            # spill folder where DuckDB puts a file database's: next to it)
            con = duckdb.connect(":memory:", config={**settings, "temp_directory": f"{path}.tmp"})
            quoted = str(path).replace("'", "''")
            try:
                con.execute(f"attach '{quoted}' as warehouse (row_group_size {row_group_size()})")
            except BaseException:
                con.close()
                raise
            con.execute("use warehouse")
        # every timestamp is TIMESTAMPTZ: shown, cast to a date and truncated in UTC whatever the machine's zone
        con.execute("set TimeZone = 'UTC'")
        quiet(con)
        return con
    except (duckdb.IOException, duckdb.Error) as exc:
        if locked(exc):
            raise WarehouseBusy(f"{path} is open in another process that writes it, or (for a writer) reads it: "
                                "run again when it is done") from exc
        if "version number" in str(exc) and "newer version" in str(exc):
            raise WarehouseError(
                f"the warehouse {path} was written by a newer DuckDB than this version uses ({duckdb.__version__}, "
                "pinned so that the DuckLake extensions load offline): move it aside and run `ingest` to rebuild it "
                "from your Copilot history (sessions no longer on disk are only in the old file, which DuckDB "
                ">= 2.0 opens)") from exc
        raise WarehouseError(f"cannot open the warehouse {path}: {str(exc).splitlines()[0]}") from exc


class Interrupted(KeyboardInterrupt):
    """Ctrl-C; ``committed`` says whether the run's transaction was committed before it came."""

    def __init__(self, committed: bool = False):
        super().__init__()
        self.committed = committed


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection):
    """All or nothing: commit when the block ends, roll back if anything in it fails. Ctrl-C during
    the commit is held until the commit is done, then raised as ``Interrupted(committed=True)``."""
    con.execute("begin transaction")
    try:
        yield con
    except BaseException:
        with suppress(duckdb.Error):  # an interrupted query may leave nothing to roll back: DuckDB did it
            con.execute("rollback")
        raise
    with _sigint_held() as held:
        con.execute("commit")
    if held:
        raise Interrupted(committed=True)


@contextmanager
def _sigint_held():
    """SIGINT recorded instead of raised for the duration (main thread only)."""
    import signal
    import threading

    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield got
    finally:
        signal.signal(signal.SIGINT, previous)


def ensure_schema(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Create every declared table that is missing, add declared columns that are missing and give
    columns whose declared type changed their new type. Returns the names of the tables it created."""
    existing: dict[str, dict[str, str]] = {}
    for table, column, dtype in con.execute("select table_name, column_name, data_type from information_schema.columns "
                                            "where table_schema = 'main' and table_catalog = current_database()"
                                            ).fetchall():  # one query for all tables
        existing.setdefault(table, {})[column] = dtype
    created = []
    for t in ALL_TABLES:
        if t.name not in existing:
            con.execute(t.create_sql())
            comment(con, t)
            created.append(t.name)
            continue
        have = existing[t.name]
        for c in t.columns:
            if c.name not in have:
                con.execute(f'alter table "{t.name}" add column "{c.name}" {c.type}')
            elif _type_name(have[c.name]) != _type_name(c.type):
                # e.g. TIMESTAMP -> TIMESTAMPTZ: the naive values were UTC, and the session's zone is UTC
                con.execute(f'alter table "{t.name}" alter column "{c.name}" type {c.type}')
    for v in VIEWS:
        con.execute(f'create or replace view "{v.name}" as {VIEW_SQL[v.name]}')
        comment(con, v, "view")
    return created


_TYPE_ALIASES = {"TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ", "TIMESTAMP_US": "TIMESTAMP"}


def _type_name(dtype: str) -> str:
    d = dtype.upper().strip()
    return _TYPE_ALIASES.get(d, d)


def format_version(con: duckdb.DuckDBPyConnection, created: list[str]) -> int:
    """The format the warehouse's rows were written in: the current one for a new warehouse,
    1 for one written before ``_meta`` existed."""
    if "_runs" in created:  # a new warehouse
        return FORMAT_VERSION
    return meta_int(con, "format_version", 1)


def comment(con: duckdb.DuckDBPyConnection, t: Table, kind: str = "table") -> None:
    con.execute(f'comment on {kind} "{t.name}" is ' + sql_literal(f"{t.description} Grain: {t.grain}."))
    for c in t.columns:
        if c.description:
            con.execute(f'comment on column "{t.name}"."{c.name}" is ' + sql_literal(c.description))


def sql_literal(s: str) -> str:
    """``s`` as an SQL string literal, quoted as SQL does (for what takes no parameter: COMMENT ON, ATTACH, a
    path read by a table function, a list of keys written into a query)."""
    return "'" + s.replace("'", "''") + "'"


def drop_all(con: duckdb.DuckDBPyConnection, keep: frozenset[str] = frozenset({"_runs", "stg_texts"})) -> None:
    """Drop every declared table but the run log, which records the full rebuild too, and the texts stored once
    (the rows kept of sources gone from disk may name some; the run prunes the others: ``spool.prune_texts``)."""
    for v in VIEWS:
        con.execute(f'drop view if exists "{v.name}"')
    for t in ALL_TABLES:
        if t.name not in keep:
            con.execute(f'drop table if exists "{t.name}"')
