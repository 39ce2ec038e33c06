"""Team mode: many machines' warehouses in one DuckLake, and the same models over all of it.

A lake is a DuckLake catalog - a PostgreSQL database (a team), or a local ``.sqlite`` / ``.duckdb``
file (one person's machines, through a synced folder) - with its data as parquet under a data path.
``push`` copies the star of this machine's warehouse into it (the tables the SQL models are built
from: ``schema.STAR``), each row tagged with the machine and the user. A session is pushed when it is
new or its rows changed since the last push from this machine (a digest of its rows says which), so
pushing twice changes nothing. Each push is one DuckLake transaction, retried when another machine's
push committed first; a push that is killed leaves no trace.

``lake_warehouse`` reads the whole lake into a local DuckDB warehouse (rebuilt only when the lake
has a newer snapshot) and builds the models there, so ``report --lake``, ``query --lake`` and
``usage --lake`` run the same SQL as on one machine.
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import os
import random
import re
import shutil
import socket
import subprocess
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from . import extensions
from .checks import ChecksFailed, run_checks
from .models import load_models, models_digest, projects_of, run_models
from .schema import ALL_TABLES, STAR, TABLES
from .warehouse import (
    LOCK_WAIT,
    VIEW_SQL,
    WarehouseBusy,
    check_file,
    connect,
    ensure_schema,
    key_table,
    locked,
    may_read,
    memory_limit,
    memory_limit_unless_set,
    meta,
    quiet,
    set_meta,
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


class LakeError(Exception):
    """The lake cannot be attached, or a push failed for good."""


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


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


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
        options.append(f"data_path {_quote(str(Path(data_path).expanduser().resolve()) + '/')}")
    if read_only:
        options.append("read_only")
    sql = f"attach {_quote(uri)} as {alias}" + (f" ({', '.join(options)})" if options else "")
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
            if locked(exc):
                if time.monotonic() >= deadline:
                    raise LakeError(
                        f"the lake's catalog {describe(catalog)} stayed in use by another process for {wait:g} s (a "
                        "push, a report or a maintenance of the lake: a DuckDB catalog file is open in one process "
                        "at a time); run again when it is done - a team whose machines push at once wants a "
                        "PostgreSQL catalog (see the README's Team mode)") from exc
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
    for table in LAKE_TABLES:
        cols = ", ".join(f'"{n}" {t}' for n, t in _lake_columns(table))
        con.execute(f'create table if not exists {alias}."{table}" ({cols})')
        for name, dtype in _lake_columns(table):  # a column a newer version added
            have = con.execute("select count(*) from information_schema.columns where table_catalog = ? "
                               "and table_name = ? and column_name = ?", [alias, table, name]).fetchone()[0]
            if not have:
                con.execute(f'alter table {alias}."{table}" add column "{name}" {dtype}')
    con.execute(f"""create table if not exists {alias}.lake_sessions (
        machine_id VARCHAR, user_name VARCHAR, session_id VARCHAR, digest VARCHAR, metrics_only BOOLEAN,
        pushed_at TIMESTAMPTZ)""")
    con.execute(f"""create table if not exists {alias}.lake_pushes (
        push_id VARCHAR, machine_id VARCHAR, user_name VARCHAR, pushed_at TIMESTAMPTZ, n_sessions_new INTEGER,
        n_sessions_changed INTEGER, n_sessions_unchanged INTEGER, metrics_only BOOLEAN, seconds DOUBLE)""")


def _connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB for the lake's commands, under the warehouse's memory limit (DuckDB's own default,
    80% of the machine's memory, took maintenance of a 1,000-machine lake to 3.2 GB of RSS)."""
    con = duckdb.connect(":memory:", config={"memory_limit": memory_limit(), **extensions.config()})
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
    n_rows: int = 0
    n_attempts: int = 0
    seconds: float = 0.0
    maintained: MaintainSummary | None = None

    def line(self, catalog: str) -> str:
        return (f"push to {describe(catalog)} as {self.user_name} on {self.machine_id}: "
                f"{self.n_sessions_new} new sessions, {self.n_sessions_changed} changed, "
                f"{self.n_sessions_unchanged} unchanged; {self.n_rows} rows in {self.seconds:.1f}s"
                + (f"\n{self.maintained.line(catalog)}" if self.maintained else ""))


@dataclass
class MaintainSummary:
    files_before: int = 0
    files_after: int = 0
    snapshots_expired: int = 0
    files_deleted: int = 0
    seconds: float = 0.0
    keep: str = KEEP

    def line(self, catalog: str) -> str:
        return (f"maintained {describe(catalog)}: {self.files_before:,} data files merged into {self.files_after:,}, "
                f"{self.snapshots_expired:,} snapshots older than {self.keep} expired, {self.files_deleted:,} "
                f"files deleted in {self.seconds:.1f}s")


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
         user: str | None = None, metrics_only: bool = False, force: bool = False) -> PushSummary:
    """Copy the sessions of ``warehouse`` that are new or changed since this machine's last push into the lake."""
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
            con.execute(f"attach {_quote(str(Path(warehouse).resolve()))} as wh (read_only)")
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
        attach(con, catalog, data_path=data_path)
        local = _digests(con, metrics_only)
        for attempt in range(1, RETRIES + 1):
            summary.n_attempts = attempt
            try:
                with transaction(con):
                    _push_once(con, summary, local, metrics_only, started, force)
                break
            except duckdb.TransactionException as exc:  # another machine committed first: read again, redo
                if attempt == RETRIES:
                    raise LakeError(f"push gave up after {attempt} conflicts: {str(exc).splitlines()[0]}") from exc
                log.info("push conflicted with another machine's (attempt %d); retrying", attempt)
                time.sleep(random.uniform(0.05, 0.2) * attempt)
        if summary.n_attempts > SQLITE_CROWDED and ":sqlite:" in attach_uri(catalog):
            log.warning("this push waited for %d other pushes to the SQLite catalog %s: a team that pushes at once "
                        "has outgrown it - a PostgreSQL catalog takes concurrent pushes without retries (see the "
                        "README's Team mode)", summary.n_attempts - 1, describe(catalog))
        n_pushes = con.execute("select count(*) from lake.lake_pushes").fetchone()[0]
        if summary.n_sessions_new + summary.n_sessions_changed and n_pushes % MAINTAIN_EVERY == 0:
            try:  # every MAINTAIN_EVERY pushes the push that makes the count tidies the lake
                summary.maintained = _maintain(con)
            except duckdb.Error as exc:  # another machine maintaining or pushing: the next one will
                log.info("maintenance left to a later push: %s", str(exc).splitlines()[0])
    finally:
        con.close()
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
    con.execute("call ducklake_flush_inlined_data('lake')")  # rows small pushes kept in the catalog, as files
    con.execute("call ducklake_merge_adjacent_files('lake')")
    expired = con.execute(f"call ducklake_expire_snapshots('lake', older_than => now() - interval '{keep}')"
                          ).fetchall()
    out.snapshots_expired = len(expired)
    deleted = con.execute(f"call ducklake_cleanup_old_files('lake', older_than => now() - interval '{keep}')"
                          ).fetchall()
    out.files_deleted = len(deleted)
    out.files_after = _data_files(con)
    out.seconds = time.perf_counter() - started
    log.info(out.line("the lake"))
    return out


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
    summary.n_sessions_new, summary.n_sessions_changed = len(new), len(changed)
    summary.n_sessions_unchanged = len(local) - len(new) - len(changed)
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


# ------------------------------------------------------------------------------------ reading the lake
def default_cache(catalog: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.sha256(attach_uri(catalog).encode()).hexdigest()[:12]
    return Path(base) / "copilot-warehouse" / f"lake-{digest}.duckdb"


def lake_warehouse(catalog: str, path: str | Path | None = None, hold: ExitStack | None = None) -> Path:
    """A local warehouse holding the whole lake, with the models built over it; rebuilt only when the
    lake has a snapshot newer than the one it was built from. A session pushed by several machines
    (a home copied between them) counts once: the latest push's rows. ``hold``: the copy is read until it
    closes (a shared lock on it: a refresh meanwhile is written beside it, not in it)."""
    path = Path(path) if path else default_cache(catalog)
    con = _connect()
    try:
        attach(con, catalog, read_only=True)
        snapshot = str(con.execute("select max(snapshot_id) from ducklake_snapshots('lake')").fetchone()[0])
        snapshot += ":" + models_digest()  # a version with other models or columns rebuilds the copy
        has_tables = con.execute("select count(*) from information_schema.tables where table_catalog = 'lake' "
                                 "and table_name = 'lake_sessions'").fetchone()[0]
        n_sessions = con.execute("select count(*) from lake.lake_sessions").fetchone()[0] if has_tables else 0
    finally:
        con.close()
    if not has_tables:
        raise LakeError(f"the lake {describe(catalog)} holds nothing yet: `push` to it first")
    with _building(path):  # two `report --lake` at once: one builds the copy, the other waits and reads it
        have = _copy_snapshot(path)
        if have != snapshot and not _refresh_copy(catalog, path, have, snapshot):
            _build_copy(catalog, path, snapshot, n_sessions)
        if hold is not None:  # read from here on: a refresh meanwhile leaves this copy as it is
            hold.enter_context(_reading(path))
    return path


REFRESH_SHARE = 0.25  # past this share of the lake's sessions changed since the copy, it is built anew


def _refresh_copy(catalog: str, path: Path, have: str | None, snapshot: str) -> bool:
    """Bring the copy from the lake snapshot it holds to ``snapshot`` by what changed between them: the sessions
    whose ``lake_sessions`` rows a push added or deleted since (DuckLake's table changes) get their rows anew,
    and the models are rebuilt for those sessions alone (as an ingest does for the sessions it changed).
    False - build the copy anew - when there is no copy, the models or columns changed, the copy's snapshot
    has been expired, or too much changed. The copy is refreshed in place, in one transaction, when no process
    reads it; else in a file beside it that replaces it when done, so a report reading it meanwhile reads the
    one before (``_updating``)."""
    if not have or have.split(":")[1:] != snapshot.split(":")[1:]:
        return False
    old, new = int(have.split(":")[0]), int(snapshot.split(":")[0])
    con = _connect()
    try:
        attach(con, catalog, read_only=True)
        try:
            changed = [r[0] for r in con.execute(
                "select distinct session_id from ducklake_table_changes('lake', 'main', 'lake_sessions', ?, ?)",
                [old + 1, new]).fetchall()]
        except duckdb.Error as exc:  # e.g. the copy's snapshot was expired: what changed is not known
            log.info("the lake's copy is built anew: %s", str(exc).splitlines()[0])
            return False
        n_sessions = con.execute("select count(*) from lake.lake_sessions").fetchone()[0]
    finally:
        con.close()
    if len(changed) > REFRESH_SHARE * n_sessions:
        return False
    with _updating(path) as con:
        attach(con, catalog, read_only=True)
        before = projects_of(con, changed)  # a session can move: its old project's model rows change too
        scope = key_table(con, "_refreshed", changed)
        for table in LAKE_TABLES:
            con.execute(f'delete from "{table}" where coalesce(session_id, \'\') in {scope}')
        _fill_from_lake(con, catalog, f"select * from ({_CHOSEN}) where session_id in {scope}")
        con.execute('drop table "_refreshed"')
        _models_and_checks(con, snapshot, sorted(s for s in changed if s), before)
    log.info("the lake's copy refreshed from snapshot %d to %d: %d sessions changed", old, new, len(changed))
    return True


_CHOSEN = """
select machine_id, session_id from (
    select machine_id, session_id, row_number() over (
        partition by session_id order by pushed_at desc, machine_id) as rn
    from lake.lake_sessions) where rn = 1"""  # the latest push of each session (a copied home counts once)


def lake_reader(catalog: str) -> duckdb.DuckDBPyConnection:
    """A connection that reads the lake in place: no copy on disk, memory bounded by DuckDB's limit (as
    a warehouse's). Every table of a warehouse is there by its name: the star tables are views over the
    lake's parquet files (the latest push of each session; filters and aggregates reach the files), the
    models views of their SQL over them (computed when a query names them), every other table empty.
    ``query --lake`` and ``usage --lake`` read it; ``report --lake`` still builds the local copy."""
    con = _connect()
    try:
        con.execute("set TimeZone = 'UTC'")
        attach(con, catalog, read_only=True)
        if not con.execute("select count(*) from information_schema.tables where table_catalog = 'lake' "
                           "and table_name = 'lake_sessions'").fetchone()[0]:
            raise LakeError(f"the lake {describe(catalog)} holds nothing yet: `push` to it first")
        con.execute(f"create table _lake_chosen as {_CHOSEN}")
        for table in LAKE_TABLES:
            cols = ", ".join(f't."{c.name}"' for c in TABLES[table].columns)
            con.execute(f'create view "{table}" as select {cols} from lake."{table}" as t semi join _lake_chosen '
                        "as c on c.machine_id = t.machine_id and c.session_id = coalesce(t.session_id, '')")
        models = load_models()
        views = {*LAKE_TABLES, *(m.name for m in models)}
        for t in ALL_TABLES:  # every other table, empty (no comments: this database lives for one command)
            if t.name not in views:
                con.execute(t.create_sql())
        for model in models:
            if model.layer == "macros":
                con.execute(model.sql)
                continue
            cols = ", ".join(f'cast("{c.name}" as {c.type}) as "{c.name}"' for c in model.table.columns)
            con.execute(f'create view "{model.name}" as select {cols} from ({model.sql})')
        for name, sql in VIEW_SQL.items():
            con.execute(f'create view "{name}" as {sql}')
        return con
    except BaseException:
        con.close()
        raise


@contextmanager
def _building(path: Path):
    """Exclusive use of a lake's local copy while it is checked and rebuilt (``fcntl`` where there is one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _copy_snapshot(path: Path) -> str | None:
    """The lake snapshot the local copy holds (None: no copy yet, or an empty file). A file that holds
    anything else - this machine's own warehouse, another database - is never replaced by the copy."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    con = connect(path, read_only=True)  # a SQLite or other file: one line, from check_file
    try:
        tables = {r[0] for r in con.execute("select table_name from information_schema.tables "
                                            "where table_catalog = current_database()").fetchall()}
        if not tables:
            return None
        snapshot = meta(con, "lake_snapshot") if "_meta" in tables else None
        if snapshot is None:
            ingested = "_source_files" in tables and con.execute("select count(*) from _source_files").fetchone()[0]
            what = "this machine's own ingest" if ingested else "tables that are not a copy of a lake"
            raise LakeError(f"{path} holds {what}: the lake's copy is never written over it; give --warehouse "
                            "a file of its own for the copy, or leave --warehouse out (a copy in ~/.cache)")
        return snapshot
    finally:
        con.close()


# DuckDB's memory while the whole lake is copied and its models built (unless $COPILOT_WAREHOUSE_MEMORY says): below
# the usual 512 MB, so that the process that builds it, Python and the model build's own allocations included,
# stays under 1 GB at 1,000 machines
COPY_MEMORY = "384MB"


# from this many sessions in the lake, the copy is built in a process of its own (``_build_copy``)
APART_SESSIONS = 10_000


def _build_copy(catalog: str, path: Path, snapshot: str, n_sessions: int = 0) -> None:
    """The whole lake into a new local warehouse, with the models built over it, in place of ``path``. With
    ``n_sessions`` of APART_SESSIONS or more, in a process of its own: what DuckDB and the interpreter took while
    building it goes back to the system when that process ends, instead of staying under the report that reads
    the copy next (in one process, a first `report --lake` peaked above both the build and the report alone)."""
    if n_sessions < APART_SESSIONS:
        _build_copy_here(catalog, str(path), snapshot)
    else:
        _build_copy_apart(catalog, str(path), snapshot)


def _build_copy_apart(catalog: str, path: str, snapshot: str) -> None:
    """``_build_copy_here`` in a process of its own (spawned), waited for: its error is raised here."""
    import multiprocessing

    from .processes import pool, stop_pool

    apart = pool(1, multiprocessing.get_context("spawn"), _apart_start, (logging.getLogger().getEffectiveLevel(),))
    try:
        apart.submit(_build_copy_here, catalog, path, snapshot).result()
    except BaseException:
        stop_pool(apart)  # Ctrl-C or an error: the build stops now (its half-built file goes with the next)
        raise
    apart.shutdown()


def _apart_start(parent: int, level: int) -> None:
    """A process that builds the lake's copy: a worker (``processes.worker_init``) that logs what the command
    logs (``level``: its root logger's), to the same stderr."""
    from .processes import log_to_stderr, worker_init

    worker_init(parent)
    log_to_stderr(level, level <= logging.INFO)


def _build_copy_here(catalog: str, path: str, snapshot: str) -> None:
    """``_build_copy`` in this process."""
    with _writing_copy(Path(path)) as con:
        con.execute(f"set memory_limit = '{memory_limit_unless_set(COPY_MEMORY)}'")
        ensure_schema(con)
        attach(con, catalog, read_only=True)
        _fill_from_lake(con, catalog, _CHOSEN)
        _models_and_checks(con, snapshot)


def _readers(path: Path) -> Path:
    """The lock file that the processes reading a lake's copy hold shared (``_reading``)."""
    return path.with_name(path.name + ".readers")


def _open_readers(path: Path, without: str) -> int | None:
    """The copy's readers lock, open (None: no ``fcntl`` here, or a file that cannot be opened - a folder, no
    permission - which is logged as what is done ``without`` it)."""
    try:
        import fcntl  # noqa: F401 - only where there is one
    except ImportError:
        return None
    try:
        return os.open(_readers(path), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        log.info("the lake's copy is %s: %s: %s", without, _readers(path), exc.strerror)
        return None


@contextmanager
def _reading(path: Path):
    """A shared lock on the copy's readers lock for as long as the copy is read (``fcntl`` where there is one)."""
    fd = _open_readers(path, "read without its readers lock")
    if fd is None:
        yield
        return
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


@contextmanager
def _updating(path: Path):
    """A connection to the copy to bring it up to date, in one transaction: the copy itself when no process reads
    it (the readers lock taken exclusively, without waiting), else a copy of it beside it (``_writing_copy``). In
    place, a failure rolls the transaction back and leaves the copy as it was; beside it, the copy of the whole
    warehouse file cost the refresh ~1 s at 50 machines, and grows with the lake."""
    # without the lock (no fcntl, or a file that cannot be opened) nobody can be known not to read it: beside it
    fd = _open_readers(path, "refreshed beside it")
    try:
        in_place = False
        if fd is not None:
            import fcntl

            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                in_place = True
            except BlockingIOError:  # a report, `serve` or `mcp` reads the copy: it keeps reading the one it has
                log.info("the lake's copy is being read: refreshed beside it")
        if not in_place:
            with _writing_copy(path, start_from=path) as con:
                yield con
            return
        con = connect(path)
        try:
            with transaction(con):
                yield con
        finally:
            con.close()
    finally:
        if fd is not None:
            os.close(fd)


@contextmanager
def _writing_copy(path: Path, start_from: Path | None = None):
    """A connection to a warehouse beside the copy (empty, or a copy of ``start_from``), in one transaction: it
    replaces the copy when the block ends, so a report reading the copy meanwhile reads the one before, and is
    removed (with its write-ahead log) when the block fails."""
    tmp = path.with_name(path.name + ".building")
    tmp.unlink(missing_ok=True)
    if start_from is not None:
        shutil.copyfile(start_from, tmp)
    con = connect(tmp)
    try:
        with transaction(con):
            yield con
    except BaseException:
        con.close()
        for left in (tmp, tmp.with_name(tmp.name + ".wal")):
            left.unlink(missing_ok=True)
        raise
    con.close()
    tmp.replace(path)


def _fill_from_lake(con: duckdb.DuckDBPyConnection, catalog: str, chosen: str) -> None:
    """Each lake table's rows of the pushes ``chosen`` selects (machine_id, session_id) into the copy's table."""
    con.execute(f"create temp table chosen as {chosen}")
    for table in LAKE_TABLES:
        cols = ", ".join(f't."{c.name}"' for c in TABLES[table].columns)
        try:
            con.execute(f'insert into "{table}" select {cols} from lake."{table}" as t join chosen as c '
                        "on c.machine_id = t.machine_id and c.session_id = coalesce(t.session_id, '')")
        except duckdb.Error as exc:
            raise _unreadable(catalog, table, exc) from exc
    con.execute("drop table chosen")


def _models_and_checks(con: duckdb.DuckDBPyConnection, snapshot: str, sessions: list[str] | None = None,
                       projects: list[str] | tuple[str, ...] = ()) -> None:
    """The models over the copy (of ``sessions`` only, the incremental ones, when given, and of the projects they
    belong to now and ``projects``, those they belonged to before), the checks, and the snapshot the copy now
    holds."""
    run_models(con, sessions, projects=projects)
    failures = run_checks(con, sessions=sessions)
    if failures:
        raise ChecksFailed(failures)
    set_meta(con, "lake_snapshot", snapshot)


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
