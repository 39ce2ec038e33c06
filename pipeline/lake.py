"""Team mode: many machines' warehouses in one DuckLake, and the same models over all of it.

A lake is a DuckLake catalog - a PostgreSQL database (a team), or a local ``.sqlite`` / ``.duckdb``
file (one person's machines, through a synced folder) - with its data as parquet under a data path.
``push`` copies the star of this machine's warehouse into it (the tables the SQL models are built
from: ``schema.STAR``), each row tagged with the machine and the user. A session is pushed when it is
new or its rows changed since the last push from this machine (a digest of its rows says which), so
pushing twice changes nothing. Each push is one DuckLake transaction, retried when another machine's
push committed first; a push that is killed leaves no trace.

The models live in the lake too (``refresh``): after a push, they are brought up to date from the
sessions it changed, in the lake's schema of this version's models. ``report --lake``, ``query --lake``
and ``usage --lake`` read the lake where it is (``lake_reader``: every table of a warehouse by its name,
the star as views of the lake's parquet files, the models as its model tables), so they run the same SQL
as on one machine with no copy of the lake on disk.
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import os
import random
import re
import socket
import subprocess
import time
import uuid
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from . import extensions
from .checks import ChecksFailed, run_checks
from .errors import LakeError
from .models import ModelError, load_models, models_digest, run_models, scopes_of
from .schema import ALL_TABLES, STAR, TABLES
from .warehouse import (
    FLOCK,
    LOCK_WAIT,
    VIEW_SQL,
    WarehouseBusy,
    check_file,
    key_table,
    lock_exclusively,
    locked,
    may_read,
    memory_limit,
    memory_limit_unless_set,
    private_temp_directory,
    quiet,
    sql_literal,
    transaction,
)

log = logging.getLogger(__name__)

LAKE_TABLES = [t.name for t in STAR]
TAGS = ("machine_id", "user_name")
# what --metrics-only leaves out: every text a person or a model wrote (prompts, answers, titles made
# from prompts, checkpoints, memories, tool arguments and output, and the output's fingerprint)
TEXT_COLUMNS = {
    "dim_sessions": ("title", "summary"),
    "fct_turns": ("user_message", "assistant_response"),
    "fct_tool_calls": ("arguments", "result_content", "result_md5", "error_message"),
    "fct_checkpoints": ("title", "overview", "history", "work_done", "technical_details", "important_files",
                        "next_steps"),
    "fct_memories": ("content",),
}
RETRIES = 30
MAINTAIN_EVERY = 50  # pushes between two maintenances a push runs itself (lake_pushes counts them)
KEEP = "7 days"  # snapshots younger than this stay (time travel), and files scheduled for deletion as long
# DuckLake options every lake of this tool has (set by a push or a maintenance that finds them otherwise):
# - target_file_size, the size merged files grow to (default 512 MB): a merge holds what it writes in memory,
#   so 200 pushes' small files of fct_tool_calls merged at the default ran out of DuckDB's 512 MB (at 32 MB:
#   908 MB peak RSS; at 16 MB: 779 MB, 1,800 files into 30 in 9.7 s);
# - parquet_row_group_size, rows per row group (default 122,880): a reader decodes a row group's column
#   whole, and 122,880 tool calls with 4,096 characters of output each took the copy of a 200-machine lake
#   out of memory (the warehouse's own row groups: 16,384 rows, see warehouse.row_group_size).
LAKE_OPTIONS = {"target_file_size": "16000000", "parquet_row_group_size": "16384"}
SQLITE_CROWDED = 5  # conflicts in one push to a .sqlite catalog past which the push recommends PostgreSQL
SQLITE_CROWDED_WAIT = 60.0  # or seconds it waited for its turn (other machines' pushes and refreshes)
# how long a push, refresh or maintenance of a .sqlite catalog waits for the writers ahead of it
# ($COPILOT_WAREHOUSE_LOCK_WAIT when set): a refresh of a large lake takes minutes
TURN_WAIT = 900.0


# ------------------------------------------------------------------------------------ catalog
# user:password@ in a postgresql:// URI (libpq reads URIs as well as key=value strings), percent-encoded or not
_URI_PASSWORD = re.compile(r"://[^/?#@\s]*:[^/?#@\s]*@|://[^/?#\s]*%3a[^/?#\s]*@", re.IGNORECASE)


def attach_uri(catalog: str) -> str:
    """The DuckLake ATTACH string of a catalog: ``postgres:...`` (a connection string), or the path of
    a local catalog file (``.sqlite`` / ``.db`` for SQLite, anything else a DuckDB file)."""
    if re.search(r"\bpassword\s*=", catalog, re.IGNORECASE) or _URI_PASSWORD.search(catalog):
        raise LakeError("the catalog names a password: give it in PGPASSWORD or ~/.pgpass instead, never on the "
                        "command line")
    if catalog.startswith(("postgres:", "postgresql:")):
        return "ducklake:postgres:" + catalog.split(":", 1)[1]
    path = str(Path(catalog).expanduser().resolve())
    if path.endswith((".sqlite", ".sqlite3", ".db")):
        return f"ducklake:sqlite:{path}"
    return f"ducklake:{path}"


def describe(catalog: str) -> str:
    """The catalog as logs show it: a connection string without its user and host details beyond the name."""
    if catalog.startswith(("postgres:", "postgresql:")):
        conninfo = catalog.split(":", 1)[1]
        db = re.search(r"\bdbname\s*=\s*([^\s&]+)", conninfo)
        if db is None and "://" in conninfo:  # postgresql://[user@]host[:port]/dbname[?options]
            db = re.match(r"[a-z]+://[^/?#]*/([^/?#\s]+)", conninfo, re.IGNORECASE)
        return f"postgres database {db.group(1) if db else '?'}"
    return str(Path(catalog).expanduser())


@contextmanager
def _turn(catalog: str):
    """The block as the one writer of a SQLite catalog (its value: the seconds waited for the others): an advisory
    lock on a file beside it (``<catalog>.writer``), waited for. Writers of a SQLite catalog that retried into each
    other instead livelocked on a loaded machine: a refresh's transaction (seconds of models) failed on the catalog
    locked by another push's attempt, and that push's attempts failed on the catalog locked by the refresh, until
    one gave up (6 pushes at once: 1 landed, 145 retries, 360 s). Other catalogs need no turn: PostgreSQL takes
    concurrent transactions (and refreshes hold a lease), a DuckDB catalog file is open in one process at a time;
    without ``fcntl`` (Windows) nor does this."""
    uri = attach_uri(catalog)
    if not FLOCK or not uri.startswith("ducklake:sqlite:"):
        yield 0.0
        return
    gate = Path(uri.removeprefix("ducklake:sqlite:") + ".writer")
    try:
        fd = os.open(gate, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:  # a folder this user may only read (a refresh that finds nothing to write): no turn
        log.info("no writers' turn for %s (%s): conflicts are retried", describe(catalog), exc.strerror)
        yield 0.0
        return
    try:
        wait = float(os.environ.get("COPILOT_WAREHOUSE_LOCK_WAIT") or TURN_WAIT)
        try:
            waited = lock_exclusively(fd, wait, lambda: log.info(
                "another push, refresh or maintenance is writing the lake's SQLite catalog %s: waiting for its turn",
                describe(catalog)))
        except OSError as exc:  # a file system that takes no locks (some network shares): no turn
            log.info("no writers' turn for %s (%s): conflicts are retried", describe(catalog), exc.strerror)
            waited = 0.0
        if waited is None:
            raise LakeError(
                f"another push, refresh or maintenance kept writing the lake's SQLite catalog {describe(catalog)} "
                f"for {wait:g} s: run again when it is done - a team whose machines push at once wants a PostgreSQL "
                "catalog (see the README's Team mode)")
        yield waited
    finally:
        os.close(fd)  # the lock goes with the descriptor


def _busy(exc: Exception) -> bool:
    """Whether a DuckDB error says a SQLite catalog is locked by another machine's transaction (SQLite takes one
    writer at a time): wait and try again, as for a conflict."""
    return "database is locked" in str(exc)


def attach(con: duckdb.DuckDBPyConnection, catalog: str, *, data_path: str | Path | None = None,
           read_only: bool = False, alias: str = "lake") -> None:
    """Attach the lake as ``alias``. The data path is needed only when the lake is created; DuckLake
    records it in the catalog, so later attaches find it there."""
    uri = attach_uri(catalog)
    names = ["ducklake"] + (["postgres_scanner"] if ":postgres:" in uri else []) + (
        ["sqlite_scanner"] if ":sqlite:" in uri else [])
    extensions.load(con, *names)
    options = []
    if data_path is not None:
        Path(data_path).expanduser().mkdir(parents=True, exist_ok=True)
        options.append(f"data_path {sql_literal(str(Path(data_path).expanduser().resolve()) + '/')}")
    if read_only:
        options.append("read_only")
    sql = f"attach {sql_literal(uri)} as {alias}" + (f" ({', '.join(options)})" if options else "")
    wait = float(os.environ.get("COPILOT_WAREHOUSE_LOCK_WAIT") or LOCK_WAIT)
    deadline, waited = time.monotonic() + wait, False
    attempt = 0
    while True:
        attempt += 1
        try:
            con.execute(sql)
            return
        except duckdb.Error as exc:
            if "data_path is not set" in str(exc):
                raise LakeError(f"the lake {describe(catalog)} does not exist yet: its first push needs "
                                "--data-path DIR, the folder its parquet files go in (recorded in the catalog "
                                "for every later push and report)") from exc
            # a DuckDB catalog file is open in one process at a time: another push or report of the lake has it
            # (DuckDB's lock), so this one waits its turn, up to $COPILOT_WAREHOUSE_LOCK_WAIT seconds (else 60)
            if locked(exc) or _busy(exc):
                if time.monotonic() >= deadline:
                    raise LakeError(
                        f"the lake's catalog {describe(catalog)} stayed in use by another process for {wait:g} s (a "
                        "push, a report or a maintenance of the lake: a DuckDB catalog file is open in one process "
                        "at a time, a SQLite one written by one at a time); run again when it is done - a team "
                        "whose machines push at once wants a PostgreSQL catalog (see the README's Team mode)") from exc
                if not waited:
                    log.info("the lake's catalog %s is in use by another process: waiting for it", describe(catalog))
                    waited = True
                time.sleep(0.1)
                continue
            # machines that attach a new lake at once race to create its catalog tables: one wins, the
            # others find them made when they try again
            if "initialize DuckLake" not in str(exc) or attempt >= 10:
                raise LakeError(f"cannot attach the lake {describe(catalog)}: {str(exc).splitlines()[0]}") from exc
            time.sleep(random.uniform(0.1, 0.3) * attempt)


def _lake_columns(table: str) -> list[tuple[str, str]]:
    """A lake table: the warehouse table's columns, after the tags (which dim_sessions holds itself)."""
    own = [(c.name, c.type) for c in TABLES[table].columns]
    return [(t, "VARCHAR") for t in TAGS if t not in dict(own)] + own


def ensure_lake_schema(con: duckdb.DuckDBPyConnection, alias: str = "lake") -> None:
    _ensure_options(con, alias)
    created = []
    for table in LAKE_TABLES:
        cols = ", ".join(f'"{n}" {t}' for n, t in _lake_columns(table))
        if not con.execute("select count(*) from information_schema.tables where table_catalog = ? "
                           "and table_name = ?", [alias, table]).fetchone()[0]:
            con.execute(f'create table {alias}."{table}" ({cols})')
            created.append(table)
        for name, dtype in _lake_columns(table):  # a column a newer version added
            have = con.execute("select count(*) from information_schema.columns where table_catalog = ? "
                               "and table_name = ? and column_name = ?", [alias, table, name]).fetchone()[0]
            if not have:
                con.execute(f'alter table {alias}."{table}" add column "{name}" {dtype}')
    _ensure_sorted(con, alias, created)
    con.execute(f"""create table if not exists {alias}.lake_sessions (
        machine_id VARCHAR, user_name VARCHAR, session_id VARCHAR, digest VARCHAR, metrics_only BOOLEAN,
        pushed_at TIMESTAMPTZ)""")
    con.execute(f"""create table if not exists {alias}.lake_pushes (
        push_id VARCHAR, machine_id VARCHAR, user_name VARCHAR, pushed_at TIMESTAMPTZ, n_sessions_new INTEGER,
        n_sessions_changed INTEGER, n_sessions_unchanged INTEGER, metrics_only BOOLEAN, seconds DOUBLE)""")


def _ensure_sorted(con: duckdb.DuckDBPyConnection, alias: str = "lake", created: list[str] | tuple[str, ...] = ()
                   ) -> None:
    """Each lake table with a session_id sorted by it (DuckLake's sorted tables: each push's files, and the files a
    maintenance merges, are written in session order), so a row group holds a narrow range of sessions and a
    reader's filter on a session, or a range of them, skips the others' (a report reads its pages a range of
    sessions at a time; a refresh, the changed sessions' rows). Files written before keep their order until a
    maintenance merges them. Set once: a later push finds it set (``created``: tables this transaction made, which
    the catalog's committed record does not hold yet)."""
    meta_db = f"__ducklake_metadata_{alias}"
    tables = dict(con.execute(
        f"select t.table_name, count(s.table_id) > 0 from {meta_db}.ducklake_table as t "
        f"left join {meta_db}.ducklake_sort_info as s on s.table_id = t.table_id and s.end_snapshot is null "
        "where t.end_snapshot is null group by 1").fetchall())
    for table in LAKE_TABLES:
        unsorted = table in created or tables.get(table) is False
        if unsorted and any(c.name == "session_id" for c in TABLES[table].columns):
            con.execute(f'alter table {alias}."{table}" set sorted by (session_id asc)')


def _connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB for the lake's commands, under the warehouse's memory limit (DuckDB's own default,
    80% of the machine's memory, took maintenance of a 1,000-machine lake to 3.2 GB of RSS), spilling to a folder
    of its own (machines pushing at once, a report's page workers)."""
    con = duckdb.connect(":memory:", config={"memory_limit": memory_limit(), "temp_directory": private_temp_directory(),
                                             **extensions.config()})
    quiet(con)
    return con


# ------------------------------------------------------------------------------------ who pushes
def default_machine() -> str:
    return os.environ.get("COPILOT_WAREHOUSE_MACHINE") or socket.gethostname() or "machine"


def default_user() -> str:
    if os.environ.get("COPILOT_WAREHOUSE_USER"):
        return os.environ["COPILOT_WAREHOUSE_USER"]
    try:
        name = subprocess.run(["git", "config", "user.name"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        name = ""
    return name or getpass.getuser()


# ------------------------------------------------------------------------------------ push
@dataclass
class PushSummary:
    machine_id: str
    user_name: str
    n_sessions_new: int = 0
    n_sessions_changed: int = 0
    n_sessions_unchanged: int = 0
    loose_memories: bool = False  # memories of no session (workspace or user memories) new or changed
    n_rows: int = 0
    n_attempts: int = 0
    seconds: float = 0.0
    maintained: MaintainSummary | None = None
    refreshed: RefreshSummary | None = None
    refresh_error: str | None = None  # the push is in the lake, its models were not refreshed: why
    snapshot: int | None = None  # the lake's snapshot once the push committed (its own, or one after it)

    @property
    def pushed_any(self) -> bool:
        return bool(self.n_sessions_new or self.n_sessions_changed or self.loose_memories)

    def line(self, catalog: str) -> str:
        return (f"push to {describe(catalog)} as {self.user_name} on {self.machine_id}: "
                f"{self.n_sessions_new} new sessions, {self.n_sessions_changed} changed, "
                f"{self.n_sessions_unchanged} unchanged"
                + (", memories of no session" if self.loose_memories else "")
                + f"; {self.n_rows} rows in {self.seconds:.1f}s"
                + (f"\n{self.maintained.line(catalog)}" if self.maintained else "")
                + (f"\n{self.refreshed.line(catalog)}" if self.refreshed else "")
                + (f"\nthe models were not refreshed: {self.refresh_error} (`lake-refresh` tries again)"
                   if self.refresh_error else ""))


@dataclass
class MaintainSummary:
    files_before: int = 0
    files_after: int = 0
    snapshots_expired: int = 0
    files_deleted: int = 0
    models_dropped: int = 0  # model schemas of versions nobody refreshed for longer than ``keep``
    seconds: float = 0.0
    keep: str = KEEP

    def line(self, catalog: str) -> str:
        # the count may grow: the rows DuckLake held in the catalog are written out as files first
        return (f"maintained {describe(catalog)}: data files {self.files_before:,} -> {self.files_after:,} (inlined "
                "rows written out, small files merged), "
                f"{self.snapshots_expired:,} snapshots older than {self.keep} expired, {self.files_deleted:,} "
                "files deleted" + (f", the models of {self.models_dropped} other version"
                                   + ("s" if self.models_dropped != 1 else "") + " dropped"
                                   if self.models_dropped else "") + f" in {self.seconds:.1f}s")


def _digests(con: duckdb.DuckDBPyConnection, metrics_only: bool) -> dict[str, str]:
    """Per session (memories of no session under ''), a digest of its rows in every lake table."""
    sums: dict[str, list[str]] = {}
    for table in LAKE_TABLES:
        for sid, total in con.execute(f'select coalesce(session_id, \'\'), sum(hash(t)::hugeint)::varchar '
                                      f'from wh."{table}" as t group by 1').fetchall():
            sums.setdefault(sid, []).append(f"{table}:{total}")
    return {sid: hashlib.sha256("|".join(sorted(parts) + [f"metrics_only:{metrics_only}"]).encode()).hexdigest()
            for sid, parts in sums.items()}


def _select(table: str, metrics_only: bool) -> str:
    """The columns pushed from a warehouse table: the tags, then its own (its texts NULL with --metrics-only)."""
    hidden = TEXT_COLUMNS.get(table, ()) if metrics_only else ()
    cols = ["$machine as machine_id", "$user as user_name"]
    cols += [f'null::{c.type} as "{c.name}"' if c.name in hidden else f'"{c.name}"'
             for c in TABLES[table].columns if c.name not in TAGS]
    return ", ".join(cols)


def push(warehouse: str | Path, catalog: str, *, data_path: str | Path | None = None, machine: str | None = None,
         user: str | None = None, metrics_only: bool = False, force: bool = False,
         refresh_models: bool = True) -> PushSummary:
    """Copy the sessions of ``warehouse`` that are new or changed since this machine's last push into the lake,
    then (``refresh_models``) bring the lake's models up to date with it (``refresh``). A refresh that fails leaves
    the push as it is (committed) and is said in the summary: the next push, `lake-refresh` or `report --lake` does
    it."""
    started = time.perf_counter()
    summary = PushSummary(machine or default_machine(), user or default_user())
    if not Path(warehouse).exists():
        raise LakeError(f"no warehouse at {warehouse}: run `python -m pipeline ingest` first")
    check_file(warehouse)
    may_read(warehouse)  # an ingest writing it: busy, in one line
    con = _connect()
    try:
        con.execute("set TimeZone = 'UTC'")
        try:
            con.execute(f"attach {sql_literal(str(Path(warehouse).resolve()))} as wh (read_only)")
        except duckdb.Error as exc:
            if locked(exc):
                raise WarehouseBusy(f"{warehouse} is being written by another process: push when it is done") \
                    from exc
            raise
        missing = [t for t in LAKE_TABLES if not con.execute(
            "select count(*) from information_schema.tables where table_catalog = 'wh' and table_name = ?",
            [t]).fetchone()[0]]
        if missing:  # checked before the lake is attached: a lake is never created for nothing
            raise LakeError(f"{warehouse} is not a warehouse of this tool (no {missing[0]}): push the one "
                            "`ingest` wrote")
        with _turn(catalog) as waited:  # the one writer of a SQLite catalog meanwhile
            attach(con, catalog, data_path=data_path)
            local = _digests(con, metrics_only)
            for attempt in range(1, RETRIES + 1):
                summary.n_attempts = attempt
                try:
                    with transaction(con):
                        _push_once(con, summary, local, metrics_only, started, force)
                    break
                except duckdb.Error as exc:  # another machine committed first (or holds the SQLite catalog): redo
                    if not isinstance(exc, duckdb.TransactionException) and not _busy(exc):
                        raise
                    if attempt == RETRIES:
                        raise LakeError(f"push gave up after {attempt} conflicts: {str(exc).splitlines()[0]}") \
                            from exc
                    log.info("push conflicted with another machine's (attempt %d); retrying", attempt)
                    time.sleep(random.uniform(0.05, 0.2) * attempt)
            if (summary.n_attempts > SQLITE_CROWDED or waited > SQLITE_CROWDED_WAIT) and \
                    ":sqlite:" in attach_uri(catalog):
                log.warning("this push waited %.0f s and retried %d times for other pushes to the SQLite catalog %s: "
                            "a team that pushes at once has outgrown it - a PostgreSQL catalog takes concurrent pushes "
                            "(see the README's Team mode)", waited, summary.n_attempts - 1, describe(catalog))
            summary.snapshot = _snapshot(con)
            n_pushes = con.execute("select count(*) from lake.lake_pushes").fetchone()[0]
            if summary.pushed_any and n_pushes % MAINTAIN_EVERY == 0:
                try:  # every MAINTAIN_EVERY pushes the push that makes the count tidies the lake
                    summary.maintained = _maintain(con)
                except duckdb.Error as exc:  # another machine maintaining or pushing: the next one will
                    log.info("maintenance left to a later push: %s", str(exc).splitlines()[0])
    finally:
        con.close()
    if refresh_models and summary.pushed_any:
        try:
            summary.refreshed = refresh(catalog, summary.machine_id, covering=summary.snapshot)
        except (LakeError, ChecksFailed, ModelError, duckdb.Error) as exc:
            summary.refresh_error = " ".join(str(exc).split())[:300]
            log.warning("the push is in the lake, but its models were not refreshed: %s (`lake-refresh` tries "
                        "again)", summary.refresh_error)
    summary.seconds = time.perf_counter() - started
    log.info(summary.line(catalog))
    return summary


def maintain(catalog: str, keep: str = KEEP) -> MaintainSummary:
    """Write the rows small pushes kept in the catalog (DuckLake's inlining) to files, merge the lake's small
    parquet files, expire snapshots older than ``keep`` and delete the files nothing refers to any more
    (scheduled for deletion longer than ``keep`` ago). Safe beside pushes and readers: merged
    files stay until a later cleanup, and a conflict leaves the lake as it was."""
    con = _connect()
    try:
        with _turn(catalog):
            attach(con, catalog)
            return _maintain(con, keep)
    finally:
        con.close()


def _ensure_options(con: duckdb.DuckDBPyConnection, alias: str = "lake") -> None:
    """The lake's options as LAKE_OPTIONS says (written only when one differs: a lake's later pushes only read)."""
    have = dict(con.execute(f"select option_name, value from ducklake_options('{alias}')").fetchall())
    for name, value in LAKE_OPTIONS.items():
        if have.get(name) != value:  # a size takes a unit: bytes
            con.execute(f"call {alias}.set_option('{name}', " + (f"'{value}B')" if name.endswith("_size") and
                                                                 "row_group" not in name else f"{value})"))


def _data_files(con: duckdb.DuckDBPyConnection) -> int:
    """The lake's live data files (the catalog's own record of them)."""
    return con.execute("select count(*) from __ducklake_metadata_lake.ducklake_data_file "
                       "where end_snapshot is null").fetchone()[0]


def _maintain(con: duckdb.DuckDBPyConnection, keep: str = KEEP) -> MaintainSummary:
    started = time.perf_counter()
    if not re.fullmatch(r"\d+ (seconds|minutes|hours|days)", keep):
        raise LakeError(f"keep {keep!r}: a number of seconds, minutes, hours or days")
    out = MaintainSummary(files_before=_data_files(con), keep=keep)
    _ensure_options(con)
    _ensure_sorted(con)  # a lake of an earlier version: the files merged from here on are in session order
    if _has_table(con, "lake_refreshing"):  # the leases of refreshes that ended or lapsed (another's running stays)
        with suppress(duckdb.TransactionException):  # a refresh giving its lease back at the same moment
            con.execute("delete from lake.lake_refreshing where expires_at < now()")
    # the merge on one thread: it writes the merged rows in session order (sorted tables), and each thread sorts
    # row groups of its own - on two threads a 1,000-machine lake's first maintenance peaked at 1.07 GB of RSS, on
    # one 0.73 GB in the same time (9.7 and 9.1 s)
    threads = con.execute("select current_setting('threads')").fetchone()[0]
    con.execute("set threads = 1")
    try:
        con.execute("call ducklake_flush_inlined_data('lake')")  # rows small pushes kept in the catalog, as files
        con.execute("call ducklake_merge_adjacent_files('lake')")
    finally:
        con.execute(f"set threads = {int(threads)}")
    expired = con.execute(f"call ducklake_expire_snapshots('lake', older_than => now() - interval '{keep}')"
                          ).fetchall()
    out.snapshots_expired = len(expired)
    deleted = con.execute(f"call ducklake_cleanup_old_files('lake', older_than => now() - interval '{keep}')"
                          ).fetchall()
    out.files_deleted = len(deleted)
    out.models_dropped = _drop_stale_models(con, keep)
    out.files_after = _data_files(con)
    out.seconds = time.perf_counter() - started
    log.info(out.line("the lake"))
    return out


def _drop_stale_models(con: duckdb.DuckDBPyConnection, keep: str) -> int:
    """Drop the model schemas of other versions than this one that nothing refreshed for longer than ``keep`` (a
    version nobody on the team runs any more); a version that comes back builds its models whole again."""
    if not _has_table(con, "lake_models"):
        return 0
    mine = models_digest()
    stale = [r[0] for r in con.execute(
        f"select models_digest from lake.lake_models group by 1 having max(refreshed_at) < now() - interval '{keep}'"
    ).fetchall() if r[0] != mine and re.fullmatch(r"[0-9a-f]+", r[0] or "")]
    for digest in stale:
        with transaction(con):
            con.execute(f'drop schema if exists lake."{models_schema(digest)}" cascade')
            con.execute("delete from lake.lake_models where models_digest = ?", [digest])
    return len(stale)


def _push_once(con: duckdb.DuckDBPyConnection, summary: PushSummary, local: dict[str, str],
               metrics_only: bool, started: float, force: bool = False) -> None:
    ensure_lake_schema(con)
    known = dict(con.execute("select session_id, digest from lake.lake_sessions where machine_id = ?",
                             [summary.machine_id]).fetchall())
    if metrics_only and not force:
        with_text = con.execute("select count(*) from lake.lake_sessions where machine_id = ? and not metrics_only",
                                [summary.machine_id]).fetchone()[0]
        if with_text:
            raise LakeError(f"{with_text:,} session{'s' if with_text != 1 else ''} of {summary.machine_id} "
                            f"{'are' if with_text != 1 else 'is'} in the lake with their text: --metrics-only would "
                            "replace them with their figures alone (no titles, prompts, answers). Add --force to "
                            "do that, or push without --metrics-only")
    new = sorted(s for s in local if s not in known)
    changed = sorted(s for s in local if s in known and known[s] != local[s])
    summary.loose_memories = "" in new or "" in changed  # '' holds memories of no session: not a session
    summary.n_sessions_new = len([s for s in new if s])
    summary.n_sessions_changed = len([s for s in changed if s])
    summary.n_sessions_unchanged = len([s for s in local if s]) - summary.n_sessions_new - summary.n_sessions_changed
    todo = new + changed
    summary.n_rows = 0
    if todo:
        import pyarrow as pa

        # the sessions to push in a temp table: a list parameter costs DuckDB 1.5 ~0.2 ms per element
        # in every query that names it (a first push of thousands of sessions)
        pushing = key_table(con, "_push_sessions", todo)
        params = {"machine": summary.machine_id, "user": summary.user_name}
        in_scope = f"coalesce(session_id, '') in {pushing}"
        for table in LAKE_TABLES:
            con.execute(f'delete from lake."{table}" where machine_id = $machine and {in_scope}',
                        {"machine": summary.machine_id})
            con.execute(f'insert into lake."{table}" by name select {_select(table, metrics_only)} '
                        f'from wh."{table}" where {in_scope}', params)
            summary.n_rows += con.execute(f'select count(*) from wh."{table}" where {in_scope}').fetchone()[0]
        con.execute(f"delete from lake.lake_sessions where machine_id = $machine and session_id in {pushing}",
                    {"machine": summary.machine_id})
        now = datetime.now(timezone.utc)
        con.register("_pushed", pa.table({
            "machine_id": [summary.machine_id] * len(todo), "user_name": [summary.user_name] * len(todo),
            "session_id": todo, "digest": [local[s] for s in todo], "metrics_only": [metrics_only] * len(todo),
            "pushed_at": pa.array([now] * len(todo), pa.timestamp("us", tz="UTC"))}))
        try:
            con.execute("insert into lake.lake_sessions by name select * from _pushed")
        finally:
            con.unregister("_pushed")
        con.execute('drop table "_push_sessions"')
    if not todo:
        return  # nothing new: the lake is left as it was (no snapshot)
    con.execute("insert into lake.lake_pushes values (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        hashlib.sha256(f"{summary.machine_id}:{time.time_ns()}".encode()).hexdigest()[:16], summary.machine_id,
        summary.user_name, datetime.now(timezone.utc), summary.n_sessions_new, summary.n_sessions_changed,
        summary.n_sessions_unchanged, metrics_only, round(time.perf_counter() - started, 3)])


# ------------------------------------------------------------------------------------ the lake's models
# The models of a lake live in it: schema ``models_<digest>`` of the lake holds every model table, built by these
# models (``models.models_digest``: a version with other models or columns has a schema of its own, so two versions
# on one team never rebuild each other's), over the latest push of each session. ``lake_models`` records each
# refresh: the snapshot of the star it read. A refresh and its record are one transaction, so a reader that reads
# both at one snapshot reads models made from the star it pins (``lake_reader``).
REFRESH_SHARE = 0.25  # past this share of the sessions changed since the last refresh, the models are built whole
# DuckDB's memory while the models are built (unless $COPILOT_WAREHOUSE_MEMORY says): the usual 512 MB. The lake's copy
# built them under 384 MB; read from the lake's parquet and written to it, the whole build at 1,000 machines ran out
# of 384 MB (int_search_docs, int_topic_terms), and under 512 MB took 47 s at 0.79 GB of peak RSS
REFRESH_MEMORY = "512MB"
# a refresh running holds a lease row in lake_refreshing; others wait for it instead of computing the same models
# at once (16 pushes at once into 1,000 machines each computed for ~100 s on two cores, 265 s in all). A lease
# lapses after LEASE_FACTOR times the usual refresh's seconds (the median of the last five), at least
# LEASE_MIN_SECONDS (a machine that died holding it); a waiter looks again every LEASE_POLL seconds.
LEASE_FACTOR = 4
LEASE_MIN_SECONDS = 120.0
LEASE_POLL = 1.0
APART_SESSIONS = 10_000  # from this many sessions in the lake, a report's refresh runs in a process of its own


def models_schema(digest: str | None = None) -> str:
    """The lake schema that holds the models of ``digest`` (default: this version's)."""
    return f"models_{digest or models_digest()}"


@dataclass
class RefreshSummary:
    star_snapshot: int = 0  # the lake snapshot the models now follow
    n_sessions: int = 0  # sessions whose rows the refresh followed (every session, when built whole)
    full: bool = False  # built whole: the first refresh, another version's models, too much changed
    up_to_date: bool = False  # nothing changed since the last refresh (or this push's): nothing written
    covered: bool = False  # the refresh of another push included this one (later pushes refresh themselves)
    n_attempts: int = 0
    waited: float = 0.0  # seconds spent waiting for other refreshes: their leases, a SQLite catalog's turn
    seconds: float = 0.0

    def line(self, catalog: str) -> str:
        if self.up_to_date:
            return (f"the models of {describe(catalog)} follow " + ("this push" if self.covered else "its latest push")
                    + f" (snapshot {self.star_snapshot})")
        how = "built whole over" if self.full else "refreshed for"
        return (f"the models of {describe(catalog)} {how} {self.n_sessions:,} session"
                f"{'s' if self.n_sessions != 1 else ''} (snapshot {self.star_snapshot}) in {self.seconds:.1f}s")


def _snapshot(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("select max(snapshot_id) from ducklake_snapshots('lake')").fetchone()[0])


def _has_table(con: duckdb.DuckDBPyConnection, table: str, schema: str = "main") -> bool:
    return bool(con.execute("select count(*) from information_schema.tables where table_catalog = 'lake' "
                            "and table_schema = ? and table_name = ?", [schema, table]).fetchone()[0])


def _refreshed_from(con: duckdb.DuckDBPyConnection, digest: str, at: int | None = None) -> int | None:
    """The star snapshot the lake's models of ``digest`` were last refreshed from, as the lake was at snapshot
    ``at`` (default: now); None when they never were."""
    if not _has_table(con, "lake_models"):
        return None
    version = f" at (version => {int(at)})" if at is not None else ""
    try:
        found = con.execute(f"select max(star_snapshot) from lake.lake_models{version} where models_digest = ?",
                            [digest]).fetchone()[0]
    except duckdb.Error:  # the table did not exist yet at ``at``
        return None
    return None if found is None else int(found)


def _follows(con: duckdb.DuckDBPyConnection, digest: str, at: int) -> int | None:
    """The star snapshot the lake's stored models of ``digest`` were refreshed from, when no push changed a session
    after it up to snapshot ``at`` (they follow the lake as it is at ``at``); else None."""
    last = _refreshed_from(con, digest, at)
    return last if last is not None and _changed_since(con, last, at) == [] else None


def _changed_since(con: duckdb.DuckDBPyConnection, old: int, new: int) -> list[str] | None:
    """The sessions that pushes after snapshot ``old`` up to ``new`` added, replaced or deleted (DuckLake's table
    changes of ``lake_sessions``); None when that is not known any more (``old`` was expired)."""
    if old >= new:
        return []
    try:
        return sorted({r[0] for r in con.execute(
            "select distinct session_id from ducklake_table_changes('lake', 'main', 'lake_sessions', ?, ?)",
            [old + 1, new]).fetchall()})
    except duckdb.Error as exc:
        log.info("what changed in the lake since snapshot %d is not known: %s", old, str(exc).splitlines()[0])
        return None


def _chosen(at: int) -> str:
    """The latest push of each session at snapshot ``at`` (a home copied between machines counts once)."""
    return f"""
select machine_id, session_id from (
    select machine_id, session_id, row_number() over (
        partition by session_id order by pushed_at desc, machine_id) as rn
    from lake.main.lake_sessions at (version => {int(at)})) where rn = 1"""


def _star_views(con: duckdb.DuckDBPyConnection, at: int) -> None:
    """Each star table in this connection's own database, as a view of the lake's rows at snapshot ``at`` of the
    latest push of each session (filters and aggregates reach the parquet files). A column this version declares
    that the lake has not got yet (no push of this version so far) reads as NULL."""
    con.execute(f"create or replace temp table _lake_chosen as {_chosen(at)}")
    for table in LAKE_TABLES:
        version = f"at (version => {int(at)})"
        have = set(con.sql(f'select * from lake."{table}" {version} limit 0').columns)
        cols = ", ".join(f't."{c.name}"' if c.name in have else f'null::{c.type} as "{c.name}"'
                         for c in TABLES[table].columns)
        con.execute(f'create or replace view memory.main."{table}" as select {cols} from lake.main."{table}" as t '
                    f"{version} semi join temp.main._lake_chosen as c "
                    "on c.machine_id = t.machine_id and c.session_id = coalesce(t.session_id, '')")


def refresh(catalog: str, machine: str | None = None, covering: int | None = None) -> RefreshSummary:
    """Bring the lake's models (this version's) up to date with its latest push: the models of the sessions that
    pushes changed since the last refresh, and of the projects they belong to now and belonged to then (as an
    ingest does for the sessions it changed); built whole the first time, or when more than REFRESH_SHARE of the
    sessions changed, or what changed is not known (the last refresh's snapshot was expired). One DuckLake
    transaction with its record in ``lake_models``; when another refresh committed first, this one reads again -
    usually to find there is nothing left to do. ``covering``: the snapshot of the push this refresh is for - once
    a refresh from that snapshot or a later one is in the lake (another machine's, pushed at the same time), this
    one stops: the pushes after it have refreshes of their own (16 machines pushing at once each redid the others'
    refreshes: 134.5 s in all). On a PostgreSQL catalog a refresh running holds a lease (``lake_refreshing``) and
    another waits for it to end before it looks again, instead of computing the same models at once."""
    started = time.perf_counter()
    con = _connect()
    try:
        con.execute("set TimeZone = 'UTC'")
        con.execute(f"set memory_limit = '{memory_limit_unless_set(REFRESH_MEMORY)}'")
        with _turn(catalog) as waited:  # the one writer of a SQLite catalog meanwhile
            attach(con, catalog)
            if not _has_table(con, "lake_sessions"):
                raise LakeError(f"the lake {describe(catalog)} holds nothing yet: `push` to it first")
            summary = RefreshSummary(waited=waited)
            for attempt in range(1, RETRIES + 1):
                summary = RefreshSummary(n_attempts=attempt, waited=summary.waited)
                try:
                    _refresh_once(con, catalog, summary, machine or default_machine(), started, covering)
                    break
                except duckdb.Error as exc:  # another refresh (or a maintenance) committed first, or holds SQLite
                    if not (isinstance(exc, duckdb.TransactionException) and re.search(
                            r"conflict|failed to commit|locked", str(exc), re.IGNORECASE)) and not _busy(exc):
                        raise
                    if attempt == RETRIES:
                        raise LakeError(f"the lake's models were not refreshed after {attempt} conflicts: "
                                        f"{str(exc).splitlines()[0]}") from exc
                    log.info("refresh conflicted with another (attempt %d); reading again", attempt)
                    time.sleep(random.uniform(0.05, 0.2) * attempt)
    finally:
        con.close()
    summary.seconds = time.perf_counter() - started
    log.info(summary.line(catalog))
    return summary


def _refresh_once(con: duckdb.DuckDBPyConnection, catalog: str, summary: RefreshSummary, machine: str,
                  started: float, covering: int | None = None) -> None:
    """What changed, read first; the star views made in this connection (a DuckLake transaction writes
    to the lake alone); then the models and their record written in one transaction."""
    digest = models_digest()
    schema = models_schema(digest)
    if not _has_table(con, "lake_models"):
        con.execute("""create table if not exists lake.lake_models (
            models_digest VARCHAR, star_snapshot BIGINT, refreshed_at TIMESTAMPTZ, machine_id VARCHAR,
            n_sessions INTEGER, full_build BOOLEAN, seconds DOUBLE)""")
    # leases on a PostgreSQL catalog (a team's): a DuckLake connection waiting on a SQLite catalog kept other
    # machines from attaching it ("database is locked"), and a DuckDB catalog file is one process's at a time
    leases = attach_uri(catalog).startswith("ducklake:postgres:")
    if leases and not _has_table(con, "lake_refreshing"):
        con.execute("""create table if not exists lake.lake_refreshing (
            lease_id VARCHAR, models_digest VARCHAR, star_snapshot BIGINT, machine_id VARCHAR,
            started_at TIMESTAMPTZ, expires_at TIMESTAMPTZ)""")
    lease = None
    while True:
        now = _snapshot(con)
        last = _refreshed_from(con, digest)
        changed = None if last is None else _changed_since(con, last, now)
        summary.star_snapshot = now
        if changed == [] or (covering is not None and last is not None and last >= covering):
            summary.up_to_date, summary.star_snapshot, summary.covered = True, last, changed != []
            return
        if not leases:
            break
        holder = _lease_held(con, digest)
        if holder is None:  # none running: take the lease; of machines that took one at the same moment, the
            lease = _take_lease(con, digest, now, machine)  # first one's refresh runs, the others wait for it
            holder = _lease_held(con, digest)
            if holder is None or holder[0] == lease:
                break
            _give_back(con, catalog, lease)
            lease = None
        if not summary.waited:
            log.info("another refresh is running (%s, from snapshot %d): waiting for it", holder[1], holder[2])
        time.sleep(LEASE_POLL * random.uniform(0.8, 1.2))
        summary.waited = time.perf_counter() - started
    try:
        _compute(con, catalog, summary, digest, schema, now, last, changed, machine, started)
    finally:
        if lease is not None:
            _give_back(con, catalog, lease)


def _give_back(con: duckdb.DuckDBPyConnection, catalog: str, lease: str) -> None:
    """End a lease, whether its refresh was recorded or failed (the others stop waiting for it). On a connection of
    its own when this one cannot (still full after running out of memory); a lease not given back lapses."""
    delete = "delete from lake.lake_refreshing where lease_id = ?"
    try:
        con.execute(delete, [lease])
    except duckdb.Error:
        other = _connect()
        try:
            attach(other, catalog)
            other.execute(delete, [lease])
        except duckdb.Error as exc:
            log.info("the refresh's lease was not given back (it lapses): %s", str(exc).splitlines()[0])
        finally:
            other.close()


def _lease_held(con: duckdb.DuckDBPyConnection, digest: str) -> tuple[str, str, int] | None:
    """The lease, machine and star snapshot of the refresh of ``digest`` running now: the first lease taken that
    has not lapsed and whose refresh is not recorded yet (``lake_models`` from its snapshot or a later one); None
    when there is none."""
    found = con.execute("""
        select r.lease_id, r.machine_id, r.star_snapshot from lake.lake_refreshing as r
        where r.models_digest = $digest and r.expires_at > now()
          and not exists (select 1 from lake.lake_models as m
                          where m.models_digest = $digest and m.star_snapshot >= r.star_snapshot)
        order by r.started_at, r.lease_id limit 1""", {"digest": digest}).fetchone()
    return None if found is None else (found[0], found[1], int(found[2]))


def _take_lease(con: duckdb.DuckDBPyConnection, digest: str, at: int, machine: str) -> str:
    """Say in the lake that this machine refreshes ``digest`` from snapshot ``at`` (committed at once, so that the
    others see it); the lease lapses after LEASE_FACTOR times the usual refresh's seconds (the median of the last
    five: one that waited on a busy machine is not the usual)."""
    usual = con.execute("select median(seconds) from (select seconds from lake.lake_models where models_digest = ? "
                        "order by refreshed_at desc limit 5)", [digest]).fetchone()[0]
    seconds = max(LEASE_MIN_SECONDS, LEASE_FACTOR * float(usual or 0))
    lease = uuid.uuid4().hex
    con.execute("insert into lake.lake_refreshing values (?, ?, ?, ?, now(), now() + to_seconds(?))",
                [lease, digest, at, machine, seconds])
    return lease


def _compute(con: duckdb.DuckDBPyConnection, catalog: str, summary: RefreshSummary, digest: str, schema: str,
             now: int, last: int | None, changed: list[str] | None, machine: str, started: float) -> None:
    """The models of what changed from snapshot ``last`` to ``now`` (or whole), and their record, in one
    transaction."""
    n_sessions, n_real = con.execute(f"select count(*), count(*) filter (where session_id <> '') "
                                     f"from ({_chosen(now)})").fetchone()  # '': memories of no session
    summary.full = changed is None or len(changed) > REFRESH_SHARE * n_sessions
    before: dict[str, list[str]] = {}
    try:
        if not summary.full:
            _star_views(con, last)  # the projects and people of the changed sessions then (a session can move)
            before = scopes_of(con, changed)
        _star_views(con, now)
    except duckdb.Error as exc:
        raise _unreadable(catalog, None, exc) from exc
    sessions = None if summary.full else [s for s in changed if s]
    summary.n_sessions = n_real if summary.full else len(sessions)
    try:
        with transaction(con):
            if _refreshed_from(con, digest) != last:
                raise duckdb.TransactionException("conflict: another refresh committed first")
            if summary.full:  # made anew: emptying every model table (DELETE) held their deleted rows in memory,
                # and a whole build over 200 machines ran out of 384 MB; a reader of an earlier snapshot still
                # reads the tables it pinned (time travel)
                con.execute(f'drop schema if exists lake."{schema}" cascade')
            con.execute(f'create schema if not exists lake."{schema}"')
            con.execute(f'use lake."{schema}"')
            con.execute(f"set search_path = 'lake.{schema},memory.main'")  # the models here, then the star views
            try:
                run_models(con, sessions, before=before, temp_macros=True)
                failures = run_checks(con, sessions=sessions, together=False, models_only=True)
            except duckdb.TransactionException:
                raise
            except (duckdb.Error, ModelError) as exc:  # a data file of the lake that cannot be read: named
                cause = exc.__cause__ if isinstance(exc, ModelError) else exc
                found = _unreadable(catalog, None, cause) if isinstance(cause, duckdb.Error) else exc
                if isinstance(found, LakeError):
                    raise found from exc
                raise
            if failures:
                raise ChecksFailed(failures)
            con.execute("insert into lake.main.lake_models values (?, ?, ?, ?, ?, ?, ?)", [
                digest, now, datetime.now(timezone.utc), machine, summary.n_sessions, summary.full,
                round(time.perf_counter() - started, 3)])
    finally:  # after the commit or the rollback (an aborted transaction takes no statement)
        con.execute("use memory.main")
        con.execute("reset search_path")


def refresh_apart(catalog: str) -> RefreshSummary:
    """``refresh`` in a process of its own (spawned), waited for: what DuckDB and the interpreter took while
    building the models goes back to the system when that process ends, instead of staying under the report
    that reads the lake next (in one process, a first `report --lake` of a large lake peaked above both)."""
    import multiprocessing

    from .processes import pool, stop_pool

    apart = pool(1, multiprocessing.get_context("spawn"), _apart_start, (logging.getLogger().getEffectiveLevel(),))
    try:
        summary = apart.submit(refresh, catalog).result()
    except BaseException:
        stop_pool(apart)  # Ctrl-C or an error: the refresh stops now (its transaction is never committed)
        raise
    apart.shutdown()
    return summary


def _apart_start(parent: int, level: int) -> None:
    """A process that refreshes the lake's models: a worker (``processes.worker_init``) that logs what the command
    logs (``level``: its root logger's), to the same stderr."""
    from .processes import log_to_stderr, worker_init

    worker_init(parent)
    log_to_stderr(level, level <= logging.INFO)


# ------------------------------------------------------------------------------------ reading the lake
@dataclass(frozen=True)
class Lake:
    """The lake as a reading verb reads it, in place of a warehouse file: ``warehouse.connect`` opens its
    ``reader`` (``lake_reader`` at ``snapshot``, so that every process of one report reads the same lake)."""
    catalog: str
    snapshot: int | None = None

    def reader(self) -> duckdb.DuckDBPyConnection:
        return lake_reader(self.catalog, self.snapshot)

    def __str__(self) -> str:
        return f"the lake {describe(self.catalog)}"


def reading(catalog: str, refresh_models: bool = False) -> Lake:
    """The lake pinned at its latest snapshot, for a verb that reads it from several connections (``report``). With
    ``refresh_models``, its models are first brought up to date when pushes since the last refresh left them
    behind (a lake of APART_SESSIONS or more in a process of its own)."""
    con = _connect()
    try:
        attach(con, catalog, read_only=True)
        if not _has_table(con, "lake_sessions"):
            raise LakeError(f"the lake {describe(catalog)} holds nothing yet: `push` to it first")
        now = _snapshot(con)
        behind = _follows(con, models_digest(), now) is None
        n_sessions = con.execute("select count(*) from lake.lake_sessions").fetchone()[0] if behind else 0
    finally:
        con.close()
    if not (behind and refresh_models):
        return Lake(catalog, now)
    (refresh_apart if n_sessions >= APART_SESSIONS else refresh)(catalog)
    con = _connect()  # the snapshot the refresh made
    try:
        attach(con, catalog, read_only=True)
        return Lake(catalog, _snapshot(con))
    finally:
        con.close()


def lake_reader(catalog: str, at: int | None = None) -> duckdb.DuckDBPyConnection:
    """A connection that reads the lake in place, as the lake was at snapshot ``at`` (default: its latest): no
    copy on disk, memory bounded by DuckDB's limit (as a warehouse's). Every table of a warehouse is there by its
    name: the star tables are views over the lake's parquet files (the latest push of each session; filters and
    aggregates reach the files); the models are the lake's own model tables when they follow its latest push
    (the star then read at the snapshot they were refreshed from), else views of their SQL over the star
    (computed when a query names them); every other table is empty."""
    con = _connect()
    try:
        con.execute("set TimeZone = 'UTC'")
        attach(con, catalog, read_only=True)
        if not _has_table(con, "lake_sessions"):
            raise LakeError(f"the lake {describe(catalog)} holds nothing yet: `push` to it first")
        now = int(at) if at is not None else _snapshot(con)
        digest = models_digest()
        last = _follows(con, digest, now)
        stored = last is not None
        if not stored:
            log.info("the lake's models are behind its latest push (`lake-refresh` brings them up to date): "
                     "computed as a query names them")
        try:
            _star_views(con, last if stored else now)
        except duckdb.Error as exc:
            raise _unreadable(catalog, None, exc) from exc
        models = load_models()
        views = {*LAKE_TABLES, *(m.name for m in models)}
        for t in ALL_TABLES:  # every other table, empty (no comments: this database lives for one command)
            if t.name not in views:
                con.execute(t.create_sql())
        schema = models_schema(digest)
        for model in models:  # in build order: a macro after the tables it reads
            if model.layer == "macros":
                con.execute(model.sql)
                continue
            if stored:
                con.execute(f'create view "{model.name}" as select * from lake."{schema}"."{model.name}" '
                            f"at (version => {now})")
                continue
            con.execute(f'create view "{model.name}" as select {model.table.cast_sql()} from ({model.sql})')
        for name, sql in VIEW_SQL.items():
            con.execute(f'create view "{name}" as {sql}')
        return con
    except BaseException:
        con.close()
        raise


def _unreadable(catalog: str, table: str | None, exc: duckdb.Error) -> Exception:
    """One line for a lake data file that cannot be read (gone, truncated, garbled): which file, and why.
    The file is the one DuckDB's message names, else the first of the table's files (of every lake table's,
    when ``table`` is None) whose size is not the one the catalog recorded or that does not read; none
    found, the error is DuckDB's own."""
    message = str(exc).splitlines()[0]
    named = re.search("'([^']+[.]parquet)'|\"([^\"]+[.]parquet)\"", message)
    if named:
        file = named.group(1) or named.group(2)
        reason = re.sub(r"^[A-Za-z ]*Error: ", "", message).replace(f"'{file}'", "").replace(f'"{file}"', "")
        reason = re.sub(r"\s+:", ":", reason.replace(" at end of file", "")).strip(" :")
        table = table or next((t for t in LAKE_TABLES if f"/{t}/" in file), None)
    else:
        for candidate in [table] if table else LAKE_TABLES:
            file, reason = _bad_file(catalog, candidate)
            if file is not None:
                table = candidate
                break
        else:
            return exc
    return LakeError(f"the lake {describe(catalog)} has a data file of {table or 'a table'} that cannot be read: "
                     f"{file} ({reason}); push again from the machine that wrote it, or restore the file")


def read_error(catalog: str, exc: Exception) -> LakeError | None:
    """What a failed query of the lake read in place (``lake_reader``) was: a data file of the lake that
    cannot be read (a LakeError naming it), or None - the query's own error."""
    if not isinstance(exc, duckdb.Error) or isinstance(exc, (duckdb.ParserException, duckdb.BinderException,
                                                             duckdb.CatalogException)):
        return None
    found = _unreadable(catalog, None, exc)
    return found if isinstance(found, LakeError) else None


def _bad_file(catalog: str, table: str) -> tuple[str | None, str]:
    """The first data file of a lake table that is not as the catalog recorded it or does not read (on a
    connection of its own: the failed one's transaction is aborted)."""
    con = _connect()
    try:
        attach(con, catalog, read_only=True)
        files = con.execute("select data_file, data_file_size_bytes, delete_file, delete_file_size_bytes "
                            "from ducklake_list_files('lake', ?)", [table]).fetchall()
        return _first_bad(con, files)
    except (duckdb.Error, LakeError):
        return None, ""
    finally:
        con.close()


def _first_bad(con: duckdb.DuckDBPyConnection, files: list[tuple]) -> tuple[str | None, str]:
    for data_file, data_size, delete_file, delete_size in files:
        for file, size in ((data_file, data_size), (delete_file, delete_size)):
            if not file:
                continue
            try:
                have = os.path.getsize(file)
            except OSError as err:
                return file, err.strerror or "cannot be opened"
            if size is not None and have != size:
                return file, f"{have:,} bytes where the catalog recorded {size:,}"
            try:
                con.execute("select * from read_parquet(?)", [file]).fetch_arrow_table()
            except duckdb.Error as err:
                return file, re.sub(r"^[A-Za-z ]*Error: ", "", str(err).splitlines()[0])
    return None, ""
