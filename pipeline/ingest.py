"""The ingest run: discover sources, read what changed into staging, rebuild the star rows of the
sessions that changed, all in one DuckDB transaction."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from . import extract  # noqa: F401  (registers the readers)
from .checks import ChecksFailed, all_checks, run_checks
from .extract.base import READERS, Finder, Prior, Source, stat_fingerprint
from .extract.cli_home import discover_copilot_home
from .extract.parallel import Read, read_all
from .extract.store import store_fingerprint
from .extract.vscode import discover_vscode_user
from .models import per_session_models_filled, run_models
from .redact import Redactor, stored_path
from .schema import MODELS, STAGING, STAR
from .warehouse import (
    FORMAT_VERSION,
    connect,
    drop_all,
    ensure_schema,
    format_version,
    set_format_version,
    to_arrow,
    transaction,
)

if TYPE_CHECKING:  # loaded when a run has rows to move: a run that changed nothing starts faster
    import polars as pl
    import pyarrow as pa

log = logging.getLogger(__name__)

SESSION_BATCH = 1000
FACT_TABLES = [t.name for t in STAR if t.name.startswith("fct_") or t.name == "dim_sessions"]


class SourceError(Exception):
    """A named source folder does not exist or is not a folder."""


@dataclass
class RunSummary:
    run_id: str
    mode: str
    sources: list[str]
    n_files_read: int = 0
    n_files_unchanged: int = 0
    n_files_skipped: int = 0
    n_files_gone: int = 0
    n_records: int = 0
    n_rejects: int = 0
    n_pending_tails: int = 0
    n_redactions: int = 0
    n_sessions_changed: int = 0
    n_checks_run: int = 0
    redactions: dict = field(default_factory=dict)
    unknown_kinds: dict = field(default_factory=dict)
    tables: dict = field(default_factory=dict)
    phases: dict = field(default_factory=dict)  # seconds spent in each phase of the run
    seconds: float = 0.0

    def phase(self, name: str, since: float) -> float:
        """Record the seconds since ``since`` as phase ``name``; returns now."""
        now = time.perf_counter()
        self.phases[name] = round(self.phases.get(name, 0.0) + now - since, 3)
        return now

    def line(self) -> str:
        t = self.tables
        return (f"ingest {self.mode}: {self.n_files_read} files read, {self.n_files_unchanged} unchanged, "
                f"{self.n_records} records, {self.n_rejects} rejected, {self.n_redactions} secrets redacted; "
                f"{t.get('dim_sessions', 0)} sessions, {t.get('fct_turns', 0)} turns, "
                f"{t.get('fct_tool_calls', 0)} tool calls, {t.get('fct_checkpoints', 0)} checkpoints "
                f"({self.n_sessions_changed} sessions rebuilt) in {self.seconds:.1f}s")


def new_run_id(now: datetime) -> str:
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def discover(copilot_homes: Iterable[Path], vscode_users: Iterable[Path] = (),
             finder: Finder | None = None) -> list[Source]:
    """Every source under the roots; what cannot be listed or examined goes to ``finder.problems``."""
    finder = finder or Finder()
    out: list[Source] = []
    for home in copilot_homes:
        out.extend(discover_copilot_home(Path(home), finder))
    for user in vscode_users:
        out.extend(discover_vscode_user(Path(user), finder))
    return out


SPOOL_PREFIX = ".ingest-"


def _spool_folder(warehouse: str | Path) -> Path:
    """This run's private folder next to the warehouse (staged rows, copies of live databases);
    folders left by runs that were killed are removed first."""
    parent = Path(warehouse).resolve().parent
    for old in parent.glob(SPOOL_PREFIX + "*"):
        pid = old.name[len(SPOOL_PREFIX):].split("-", 1)[0]
        alive = pid.isdigit() and _alive(int(pid))
        # an older version named them without the pid: stale once a day old
        stale = not alive if pid.isdigit() else time.time() - old.stat().st_mtime > 86400
        if stale and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
            log.info("removed %s, left by an ingest that did not finish", old)
    return Path(tempfile.mkdtemp(prefix=f"{SPOOL_PREFIX}{os.getpid()}-", dir=parent))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid != os.getpid()


def check_sources(copilot_homes: Iterable[Path], vscode_users: Iterable[Path]) -> None:
    for label, paths in (("--copilot-home", copilot_homes), ("--vscode-user", vscode_users)):
        for p in paths:
            if not Path(p).exists():
                raise SourceError(f"{label} {p}: no such folder")
            if not Path(p).is_dir():
                raise SourceError(f"{label} {p}: not a folder")


def _fingerprint(src: Source) -> tuple[str, int]:
    if src.kind in ("session_store", "vscode_state_db"):
        return store_fingerprint(src.path)
    return stat_fingerprint(src.path)


def _priors(con) -> dict[str, tuple[Prior, bool, str | None]]:
    rows = con.execute("select source_path, fingerprint, size, last_good_offset, n_records, good_line, "
                       "tail_digest, is_present, session_id from _source_files").fetchall()
    return {path: (Prior(fp or "", size or 0, good or 0, n or 0, line or 1, tail), bool(present), sid)
            for path, fp, size, good, n, line, tail, present, sid in rows}


def _staged_sessions(con, path: str, session_id: str | None = None) -> set[str]:
    """Sessions with staged rows from ``path``: its own session for per-session files, else looked up."""
    if session_id:
        return {session_id}
    out: set[str] = set()
    for t in STAGING:
        rows = con.execute(f'select distinct session_id from "{t.name}" where _source_path = ? '
                           f"or starts_with(_source_path, ?)", [path, path.rstrip("/") + "/"]).fetchall()
        out.update(r[0] for r in rows if r[0])
    return out


def _all_staged_sessions(con) -> set[str]:
    out: set[str] = set()
    for t in STAGING:
        out.update(r[0] for r in con.execute(f'select distinct session_id from "{t.name}" '
                                             "where session_id is not null").fetchall())
    return out


def _delete_staged(con, path: str) -> None:
    prefix = path.rstrip("/") + "/"
    for t in STAGING:
        con.execute(f'delete from "{t.name}" where _source_path = ? or starts_with(_source_path, ?)', [path, prefix])
    _delete_rejects(con, path)


def _delete_rejects(con, path: str) -> None:
    prefix = path.rstrip("/") + "/"
    con.execute("delete from _rejects where source_path = ? or starts_with(source_path, ?)", [path, prefix])


def _insert(con, table: str, rows_or_frame) -> int:
    if isinstance(rows_or_frame, list):
        tbl = to_arrow(table, rows_or_frame)
    else:
        import pyarrow as pa

        if isinstance(rows_or_frame, pa.Table):
            tbl = rows_or_frame
        else:  # a polars frame
            from .transform.star import conform

            tbl = conform(rows_or_frame, table).to_arrow()
    if tbl.num_rows == 0:
        return 0
    con.register("_incoming", tbl)
    try:
        con.execute(f'insert into "{table}" by name select * from _incoming')
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

    def __init__(self, con, folder: Path, limit_bytes: int | None = None):
        self.con, self.folder, self.limit = con, folder, limit_bytes or self.PART_BYTES
        self.pending: dict[str, list[pa.Table]] = {}
        self.pending_rows: dict[str, list[dict]] = {}  # converted to Arrow once per part, not per call
        self.parts: dict[str, int] = {}
        self.bytes = 0
        self.replaced: dict[tuple[str, str], list] = {}  # (table, key column) -> keys whose old rows go

    def replace(self, table: str, column: str, key) -> None:
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
        import pyarrow.parquet as pq

        for table, tbl in taken.items():
            n = self.parts.get(table, 0)
            (self.folder / table).mkdir(parents=True, exist_ok=True)
            # uncompressed: written twice as fast, read back once, deleted right after
            pq.write_table(tbl, self.folder / table / f"part-{n:05d}.parquet", compression="none")
            self.parts[table] = n + 1

    def load(self) -> None:
        for (table, column), keys in self.replaced.items():  # one DELETE per table, not one per row
            self.con.execute(f'delete from "{table}" where "{column}" in (select unnest(?))', [keys])
        self.replaced = {}
        if not self.parts:  # less than one part in all (a small or incremental run): no Parquet round trip
            taken = self._take()
            for table in sorted(taken):
                _insert(self.con, table, taken[table])
            return
        self._write()
        for table in sorted(self.parts):
            glob = str(self.folder / table / "*.parquet").replace("'", "''")
            self.con.execute(f'insert into "{table}" by name select * from read_parquet(\'{glob}\')')
            shutil.rmtree(self.folder / table)
        self.parts = {}


def ingest(warehouse: str | Path, copilot_homes: list[Path], vscode_users: list[Path] | None = None, *,
           full: bool = False, redact: bool = True, now: datetime | None = None,
           progress: Callable[[int, int, str], None] | None = None, workers: int | None = None) -> RunSummary:
    vscode_users = vscode_users or []
    check_sources(copilot_homes, vscode_users)
    started = time.perf_counter()
    now = now or datetime.now(timezone.utc)
    run_id = new_run_id(now)
    roots = [str(Path(p).resolve()) for p in [*copilot_homes, *vscode_users]]
    summary = RunSummary(run_id, "full" if full else "incremental", roots)
    redactions: Counter[str] = Counter()

    con = connect(warehouse)
    spool_dir = _spool_folder(warehouse)
    scratch = spool_dir / "scratch"
    scratch.mkdir()
    def key(p: str | None) -> str | None:  # a path or id as stored: redacted, valid UTF-8
        return p if p is None else stored_path(p, redact)

    try:
        with transaction(con):
            if full:
                drop_all(con)
            # a model table this version adds (or one someone dropped) is built whole on this run,
            # even if no source changed
            created = ensure_schema(con)
            if "_runs" in created:  # a new warehouse: everything is read
                summary.mode = "full"
            new_models = {t.name for t in MODELS} & set(created)
            affected: set[str] = set()
            upgrade = not full and format_version(con, created) < FORMAT_VERSION
            if upgrade:  # rows staged by an older version: read every source again, rebuild every session
                log.warning("the warehouse was written by an older version: reading every source again and "
                            "rebuilding every session (rows of sources no longer on disk are kept)")
                con.execute("update _source_files set fingerprint = '', last_good_offset = 0, good_line = 1, "
                            "tail_digest = null")
                affected |= _all_staged_sessions(con)
            finder = Finder()
            sources = discover(copilot_homes, vscode_users, finder)
            priors = _priors(con)
            seen: set[str] = set()
            buffer = Spool(con, spool_dir / "staging")
            _record_problems(con, buffer, [key(r) for r in roots], finder.problems, key, run_id, summary)
            jobs, planned = [], []
            for src in sources:
                seen.add(key(src.path))
                plan = _plan_source(con, src, priors.get(key(src.path)), summary, affected, key, buffer, run_id)
                if plan is not None:
                    jobs.append((src, plan[2][0] if plan[2] else None, plan[1]))
                    planned.append(plan)
            mark = summary.phase("discover", started)  # finding and fingerprinting the sources
            plans = iter(planned)
            done = 0
            for batch in read_all(jobs, run_id, redact, workers, str(scratch)):
                for read in batch.reads:
                    if progress:
                        progress(done, len(jobs), read.source.path)
                    done += 1
                    redactions.update(read.redactions)
                    affected |= _apply_read(con, read, next(plans), run_id, summary, buffer, key)
                for table, tbl in batch.tables.items():  # the rows of all the batch's sources, in order
                    summary.n_records += buffer.add(table, tbl)
            mark = summary.phase("read", mark)
            buffer.load()
            affected |= _mark_gone(con, [key(r) for r in roots], seen, priors, summary)
            root_repos: dict[str, str] = {}
            if affected:  # which repository each folder is, over the whole warehouse (see star.places)
                root_repos, moved = _root_repositories(con)
                affected |= moved
            summary.n_sessions_changed = len(affected)
            mark = summary.phase("stage", mark)
            _rebuild(con, sorted(affected), spool_dir / "star", root_repos)
            mark = summary.phase("star", mark)
            if affected or new_models:
                whole = full or upgrade or new_models or not per_session_models_filled(con)
                scope = None if whole else sorted(affected)  # None: every session
                run_models(con, scope)
                mark = summary.phase("models", mark)
                failures = run_checks(con, sessions=scope)
                mark = summary.phase("checks", mark)
                if failures:
                    raise ChecksFailed(failures)
                summary.n_checks_run = len(all_checks())
            summary.n_redactions = sum(redactions.values())
            summary.redactions = dict(sorted(redactions.items()))
            for t in STAR:
                summary.tables[t.name] = con.execute(f'select count(*) from "{t.name}"').fetchone()[0]
            summary.seconds = time.perf_counter() - started
            mark = summary.phase("summary", mark)
            set_format_version(con)
            con.execute("insert into _runs (run_id, started_at, finished_at, mode, sources, n_files_read, "
                        "n_files_unchanged, n_records, n_rejects, n_redactions, n_sessions_changed, summary) "
                        "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                            run_id, now, datetime.now(timezone.utc), summary.mode, roots, summary.n_files_read,
                            summary.n_files_unchanged, summary.n_records, summary.n_rejects, summary.n_redactions,
                            summary.n_sessions_changed, orjson.dumps(summary.__dict__, default=str).decode()])
        summary.phase("commit", mark)  # logged only: _runs was written before the commit
    finally:
        con.close()
        shutil.rmtree(spool_dir, ignore_errors=True)
    log.info(summary.line())
    log.info("phases (s): %s", ", ".join(f"{k} {v:.2f}" for k, v in summary.phases.items()))
    return summary


def _record_problems(con, buffer, roots: list[str], problems: list[tuple[str, str]], key, run_id: str,
                     summary: RunSummary) -> None:
    """What discovery could not list or examine, as _rejects rows (position `folder`); last run's
    such rows under the roots read now are replaced."""
    for root in roots:
        con.execute("delete from _rejects where position = 'folder' and (source_path = ? or "
                    "starts_with(source_path, ?))", [root, root.rstrip("/") + "/"])
    rows = []
    for path, reason in problems:
        log.warning("%s: %s", key(path), reason)
        rows.append({"source_path": key(path), "position": "folder", "line_number": None, "byte_offset": None,
                     "reason": reason, "excerpt": "", "_run_id": run_id})
    summary.n_rejects += buffer.add("_rejects", rows)


def _plan_source(con, src: Source, prior_info, summary: RunSummary, affected: set[str], key, buffer: Spool,
                 run_id: str):
    """None when the source needs no reading (unchanged, or no reader, or it cannot even be examined);
    else (fingerprint, size, prior_info)."""
    try:
        fp, size = _fingerprint(src)
    except OSError as exc:  # a symlink loop, no permission, gone since discovery: a reject, tried again next run
        reason = f"cannot be examined ({exc.strerror or exc}); not read"
        log.warning("%s: %s", key(src.path), reason)
        _delete_rejects(con, key(src.path))
        summary.n_rejects += buffer.add("_rejects", [{
            "source_path": key(src.path), "position": "file", "line_number": None, "byte_offset": None,
            "reason": reason, "excerpt": "", "_run_id": run_id}])
        return None
    prior, present, _sid = prior_info if prior_info else (None, False, None)
    if prior is not None and prior.fingerprint == fp:
        summary.n_files_unchanged += 1
        if not present:  # it came back: its rows count as present again
            con.execute("update _source_files set is_present = true where source_path = ?", [key(src.path)])
            affected |= _staged_sessions(con, key(src.path), key(src.session_id))
        return None
    if src.kind not in READERS:
        summary.unknown_kinds[src.kind] = summary.unknown_kinds.get(src.kind, 0) + 1
        log.warning("%s: no reader for %s files yet; not read", key(src.path), src.kind)
        return None
    return fp, size, prior_info


def _apply_read(con, read: Read, plan, run_id: str, summary: RunSummary, buffer: Spool, key) -> set[str]:
    """Stage what a reader read from one source, replacing what an earlier run staged from it."""
    src, res = read.source, read.result
    path, sid = key(src.path), key(src.session_id)
    fp, size, prior_info = plan
    prior = prior_info[0] if prior_info else None
    before = _staged_sessions(con, path, sid) if prior is not None else set()
    if res is None:
        # a file that could not be read at all keeps the rows read from it earlier, and its old
        # fingerprint: the next run tries it again (only a read that worked records a fingerprint)
        reason = Redactor()(read.error or "could not be read")
        log.warning("%s: %s", path, reason)
        _delete_rejects(con, path)
        _insert(con, "_rejects", [{"source_path": path, "position": "file", "line_number": None,
                                   "byte_offset": None, "reason": reason, "excerpt": "", "_run_id": run_id}])
        summary.n_rejects += 1
        return set()
    if res.skipped_reason:
        summary.n_files_skipped += 1
        log.warning("%s: %s", path, res.skipped_reason)
        return set()
    unreadable = not read.n_rows and any(r["position"] == "file" for r in res.rejects)
    if prior is None:
        _delete_rejects(con, path)  # never staged before; a failed earlier read may have left its reason
    elif unreadable:
        _delete_rejects(con, path)  # keep what an earlier run read from this file
    elif not res.appended:
        _delete_staged(con, path)
    for r in res.rejects:
        r["_run_id"] = run_id
        log.warning("%s %s: %s", r["source_path"], r["position"], r["reason"])
    summary.n_rejects += buffer.add("_rejects", res.rejects)
    summary.n_pending_tails += int(res.pending_tail)
    summary.n_files_read += 1
    _record_source(buffer, prior is not None, src, fp, size, run_id, res, read.tail, key)
    return before | read.sessions | ({sid} if sid else set())


def _record_source(buffer, known, src, fp, size, run_id, res, tail, key) -> None:
    """Remember a source's fingerprint (and, for logs, where to resume) after a read that worked."""
    if known:
        buffer.replace("_source_files", "source_path", key(src.path))
    try:
        mtime = os.stat(src.path).st_mtime_ns
    except OSError:
        mtime = None
    buffer.add("_source_files", [{
        "source_path": key(src.path), "kind": src.kind, "session_id": key(src.session_id), "size": size,
        "mtime_ns": mtime, "fingerprint": fp, "last_good_offset": res.last_good_offset,
        "good_line": res.good_line, "tail_digest": tail, "n_records": res.n_records, "is_present": True,
        "last_run_id": run_id}])


def _mark_gone(con, roots: list[str], seen: set[str], priors, summary: RunSummary) -> set[str]:
    """Sources under the roots read now that vanished from disk: rows kept, marked not present."""
    gone: set[str] = set()
    for path, (_prior, present, sid) in priors.items():
        if path in seen or not present or os.path.exists(path):
            continue
        if not any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
            continue
        con.execute("update _source_files set is_present = false where source_path = ?", [path])
        summary.n_files_gone += 1
        gone |= _staged_sessions(con, path, sid)
    return gone


_STAGING_PROJECTION: dict[str, str] | None = None  # see _staging_projection
# the large staging tables need no order (the star sorts events by position); the small ones are
# pulled sorted (`order by all`)
_ORDER = {"stg_events": "", "stg_tool_requests": ""}


def _staging_projection() -> dict[str, str]:
    """What the star rebuild selects from each staging table (built once; star.py loads polars)."""
    global _STAGING_PROJECTION
    if _STAGING_PROJECTION is None:
        from .transform.star import EVENT_TEXT_SQL, EVENT_TEXT_USED

        def column(col: str, types: tuple[str, ...]) -> str:
            cut = "".join(f" when event_type = '{t}' then {sql}" for t, sql in EVENT_TEXT_SQL.get(col, {}).items())
            return f"case when event_type in ({', '.join(repr(t) for t in types)}) then {col}{cut} end as {col}"

        _STAGING_PROJECTION = {"stg_events": "* replace (" + ", ".join(
            column(col, types) for col, types in EVENT_TEXT_USED.items()) + ")"}
    return _STAGING_PROJECTION


def _root_repositories(con) -> tuple[dict[str, str], set[str]]:
    """The repository of each folder sessions ran in, from every session's staged metadata and
    session.start, and the sessions whose project that changes (a newly read session named the
    repository of a folder that older sessions share: they move into its project)."""
    import polars as pl

    from .transform.star import choose_event_source, places, project_ids, root_repositories

    projection = _staging_projection().get("stg_events", "*")
    # the system prompt names the folder only for old logs whose session.start has no context: only
    # theirs is read (a ~56 KB text per session otherwise)
    ev = con.sql(f"""
        select {projection} from stg_events
        where event_type = 'session.start'
           or (event_type = 'system.message' and session_id not in (
                select session_id from stg_events
                where event_type = 'session.start' and json_extract_string(extra, '$.context.cwd') is not null))
    """).pl()
    where = places(con.sql("select * from stg_session_meta order by all").pl(),
                   choose_event_source(ev).sort("session_id", "event_index"))
    root_repos = root_repositories(where)
    expected = project_ids(where, root_repos)
    stored = con.sql("select session_id, project_id as stored_id from dim_sessions").pl()
    moved = expected.join(stored, on="session_id").filter(pl.col("project_id").ne_missing(pl.col("stored_id")))
    return root_repos, set(moved["session_id"].to_list())


def _rebuild(con, affected: list[str], spool_dir: Path, root_repos: dict[str, str] | None = None) -> None:
    """Replace the star rows of the affected sessions (built batch by batch), then the dimensions.

    A batch's star rows are built on a second thread while the next batch is pulled out of DuckDB
    and the one before is stored (polars and DuckDB release the GIL): the phase keeps both cores
    busy instead of one, with at most two batches of staging rows in memory.
    """
    if not affected:
        return
    from .transform.star import build_star

    spool = Spool(con, spool_dir)
    projection = _staging_projection()
    batches = [affected[i:i + SESSION_BATCH] for i in range(0, len(affected), SESSION_BATCH)]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="star") as builder:
        building = None
        for batch in batches:
            # rows in a fixed order: which of two rows of one kind wins must not depend on load order
            stg = {t.name: con.sql(f'select {projection.get(t.name, "*")} from "{t.name}" '
                                   f"where session_id in (select unnest(?)){_ORDER.get(t.name, ' order by all')}",
                                   params=[batch]).pl() for t in STAGING}
            built = building.result() if building is not None else None
            building = builder.submit(build_star, stg, root_repos)
            del stg
            if built is not None:
                _store_star(con, spool, built)
        if building is not None:
            _store_star(con, spool, building.result())
    for table in FACT_TABLES:
        con.execute(f'delete from "{table}" where session_id in (select unnest(?))', [affected])
    spool.load()
    _rebuild_unowned_memories(con)
    _refresh_dimensions(con)


def _store_star(con, spool: Spool, star: dict[str, pl.DataFrame]) -> None:
    from .transform.star import conform

    for table in FACT_TABLES:
        spool.add(table, conform(star[table], table).to_arrow())
    _upsert(con, "dim_files", star["_files"], "file_id")


def _rebuild_unowned_memories(con) -> None:
    """Memories that belong to no session (repo and user memories) are not in any session batch."""
    from .transform.star import memories

    docs = con.sql("select * from stg_documents where session_id is null").pl()
    con.execute("delete from fct_memories where session_id is null")
    if not docs.is_empty():
        _insert(con, "fct_memories", memories(docs))


def _upsert(con, table: str, frame: pl.DataFrame, key: str) -> None:
    if frame.is_empty():
        return
    con.register("_incoming_keys", frame.select(key).to_arrow())
    try:
        con.execute(f'delete from "{table}" where "{key}" in (select "{key}" from _incoming_keys)')
    finally:
        con.unregister("_incoming_keys")
    _insert(con, table, frame)


def _refresh_dimensions(con) -> None:
    con.execute("""
        delete from dim_files where file_id not in (
            select file_id from fct_file_touches union select file_id from fct_tool_calls where file_id is not null)
    """)
    con.execute("""
        update dim_files set
            n_sessions = coalesce((select count(distinct t.session_id) from fct_file_touches t
                                   where t.file_id = dim_files.file_id), 0),
            extension = lower(nullif(regexp_extract(path, '(?:^|/)[^/.][^/]*\\.([A-Za-z0-9]+)$', 1), ''))
    """)
    # every project row from its sessions, with ties broken by a fixed order: the same sessions give
    # the same dim_projects whatever order the files were read in
    con.execute("delete from dim_projects")
    con.execute("""
        insert into dim_projects
        with latest as (
            select
                project_id,
                first(repository order by started_at desc nulls last, session_id)
                    filter (where repository is not null and repository <> '') as repository,
                first(root_path order by started_at desc nulls last, session_id)
                    filter (where root_path is not null and root_path <> '') as root_path,
                count(*)::integer as n_sessions,
                min(started_at) as first_seen_at,
                max(coalesce(ended_at, started_at)) as last_seen_at
            from dim_sessions
            group by project_id
        )
        select
            project_id,
            coalesce(
                nullif(regexp_extract(rtrim(repository, '/'), '[^/]*$'), ''),
                nullif(regexp_extract(rtrim(root_path, '/'), '[^/]*$'), ''),
                nullif(root_path, ''),
                '(no project)'
            ) as name,
            repository, root_path, n_sessions, first_seen_at, last_seen_at
        from latest
    """)
    con.execute("""
        update dim_sessions set is_gone = session_id not in (
            select f.session_id from _source_files f where f.is_present and f.session_id is not null
            union
            select m.session_id from stg_session_meta m join _source_files f
              on f.source_path = m._source_path and f.is_present
            union
            select t.session_id from stg_store_turns t join _source_files f
              on f.source_path = t._source_path and f.is_present
            union
            select e.session_id from stg_events e join _source_files f
              on f.source_path = e._source_path and f.is_present
        )
    """)

