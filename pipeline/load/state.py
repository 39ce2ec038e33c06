"""What the warehouse remembers of each source, and staging the rows read from it.

``_source_files`` holds each source's fingerprint (and, for append-only logs, where to resume);
``_rejects`` what could not be read in it; the ``stg_*`` tables the rows read from it. A source is
*planned* for reading when its fingerprint changed; *applying* a read replaces what an earlier run
staged from it (or appends, for a grown log) and records its new fingerprint - only for a read that
worked, so a source that could not be read is tried again next run. A source gone from disk keeps
its rows and is marked not present.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import duckdb

from ..extract import READERS, fingerprint
from ..extract.base import CHANGE_TIME, Prior, Source, stat_fingerprint
from ..extract.events import head_and_tail_digests
from ..extract.parallel import Read
from ..redact import Redactor, stored_path
from ..runs import RunSummary
from ..schema import BOOKKEEPING, STAGING
from ..sources import APPEND_KINDS, KINDS
from ..warehouse import key_table
from .spool import Spool, insert

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Known:
    """A source as the last run that read it left it."""

    prior: Prior
    is_present: bool
    session_id: str | None


@dataclass(frozen=True)
class Plan:
    """A source to read in this run: its fingerprint now, its size, and what is known of it."""

    source: Source
    fingerprint: str
    size: int
    known: Known | None

    @property
    def prior(self) -> Prior | None:
        return self.known.prior if self.known else None


def keep_gone(con: duckdb.DuckDBPyConnection, found: set[str]) -> list[str]:
    """Before a rebuild from scratch (``ingest --full``): the staged rows, rejects and bookkeeping of the sources
    gone from disk, set aside in temp tables (``restore_gone`` puts them back), since nothing can read them
    again; returns the sessions they hold. A session whose folder was deleted is kept by --full as by any run.
    ``found``: the sources the run found, as stored: a stored path that is no path on disk (redacted, or a name not
    valid UTF-8) is gone when the run did not find it."""
    have = {r[0] for r in con.execute("select table_name from information_schema.tables where table_schema = 'main' "
                                      "and table_catalog = current_database()").fetchall()}
    if "_source_files" not in have:
        return []
    gone = [p for (p,) in con.execute("select source_path from _source_files").fetchall()
            if p not in found and not os.path.exists(p)]
    if not gone:
        return []
    # a folder source's rows name the file in it they came from (a checkpoint's): those go with the folder
    folders = tuple(path.rstrip("/") + "/" for path in gone)
    for t in STAGING:
        if t.name in have:
            gone += [p for (p,) in con.execute(f'select distinct _source_path from "{t.name}" where _source_path '
                                               "not in (select source_path from _source_files)").fetchall()
                     if p is not None and p.startswith(folders)]
    in_gone = key_table(con, "_gone", gone)
    sessions: set[str] = set()
    for t in [*STAGING, *(t for t in BOOKKEEPING if t.name in ("_source_files", "_rejects"))]:
        if t.name not in have:
            continue
        column = "source_path" if t.name in ("_source_files", "_rejects") else "_source_path"
        con.execute(f'create or replace temp table "_kept_{t.name}" as select * from "{t.name}" '
                    f'where "{column}" in {in_gone}')
        if "session_id" in (c.name for c in t.columns):
            sessions.update(r[0] for r in con.execute(f'select distinct session_id from "_kept_{t.name}" '
                                                      "where session_id is not null").fetchall())
    con.execute('drop table "_gone"')
    log.warning("rebuilding from scratch keeps %d session(s) whose files are gone from disk (%d files): nothing "
                "could read them again", len(sessions), len(gone))
    return sorted(sessions)


def restore_gone(con: duckdb.DuckDBPyConnection) -> None:
    """The rows ``keep_gone`` set aside, back in the tables created anew (their sources marked not present)."""
    kept = {r[0] for r in con.execute("select table_name from duckdb_tables() where temporary").fetchall()}
    for t in [*STAGING, *(t for t in BOOKKEEPING if t.name in ("_source_files", "_rejects"))]:
        if f"_kept_{t.name}" in kept:
            con.execute(f'insert into "{t.name}" by name select * from "_kept_{t.name}"')
            con.execute(f'drop table "_kept_{t.name}"')
    con.execute("update _source_files set is_present = false")


def _swapped(src: Source, prior: Prior) -> bool:
    """An append-only log whose size and mtime are as the last run left them but whose first 4 KiB or the 4
    KiB before where reading stopped are not (a file put in its place with its mtime restored): read again.
    Two reads of 4 KiB per log and run, from one open, where its fingerprint cannot tell (no ``CHANGE_TIME``:
    Windows); other sources are taken at their size and mtime."""
    if CHANGE_TIME or src.kind not in APPEND_KINDS or not prior.head_digest:
        return False
    try:
        return head_and_tail_digests(src.path, prior.last_good_offset) != (prior.head_digest, prior.tail_digest)
    except OSError:
        return True


def _recorded_before(src: Source, st: os.stat_result | None, recorded: str) -> bool:
    """Whether ``recorded`` is the fingerprint an earlier version took of ``src`` as it is now: size and mtime only,
    as it took of every source but the append-only logs. Such a source is unchanged since; its fingerprint is
    recorded anew (``SourceState.flush``) instead of the source being read again (every workspace.yaml, chat and
    checkpoint folder of the warehouse, and each of their sessions' star rebuilt)."""
    if not CHANGE_TIME or src.kind in APPEND_KINDS or KINDS[src.kind].fingerprint != "stat":
        return False
    try:
        return stat_fingerprint(src.path, st, change_time=False)[0] == recorded
    except OSError:
        return False


def _under(path: str) -> tuple[str, str]:
    """Parameters matching ``path`` itself and everything under it (a folder source's files)."""
    return path, path.rstrip("/") + "/"


class SourceState:
    """The run's view of ``_source_files``, ``_rejects`` and the staging tables."""

    def __init__(self, con: duckdb.DuckDBPyConnection, spool: Spool, summary: RunSummary, redact: bool):
        self.con, self.spool, self.summary, self.redact = con, spool, summary, redact
        self.known = self._known()
        self.seen: set[str] = set()
        # a source whose rows belong to no session was read (a user or repository memory): the star rows of no
        # session (load.star.rebuild) and the models' rows of no session are rebuilt, whatever session changed
        self.sessionless_changed = False
        self._old_rejects: list[str] = []  # sources whose earlier _rejects rows go (see flush)
        self._fingerprints: list[tuple[str, str]] = []  # unchanged sources' fingerprints recorded anew (see flush)

    def key(self, path: str | None) -> str | None:
        """A path or id as stored: redacted, valid UTF-8."""
        return path if path is None else stored_path(path, self.redact)

    def _known(self) -> dict[str, Known]:
        rows = self.con.execute("select source_path, fingerprint, size, last_good_offset, n_records, good_line, "
                                "tail_digest, prefix_digest, head_digest, is_present, session_id "
                                "from _source_files").fetchall()
        return {path: Known(Prior(fp or "", size or 0, good or 0, n or 0, line or 1, tail, prefix, head),
                            bool(present), sid)
                for path, fp, size, good, n, line, tail, prefix, head, present, sid in rows}

    # ------------------------------------------------------------------------------ rejects
    def _reject(self, path: str, position: str, reason: str) -> None:
        log.warning("%s: %s", path, reason)
        self.summary.n_rejects += self.spool.add("_rejects", [{
            "source_path": path, "position": position, "line_number": None, "byte_offset": None,
            "reason": reason, "excerpt": "", "_run_id": self.summary.run_id}])

    def delete_rejects(self, path: str) -> None:
        """The _rejects rows an earlier run wrote for ``path`` (and what lies under it) go, in one
        DELETE for the run's sources (``flush``): one per source costs a full run seconds."""
        self._old_rejects.append(path)

    def flush(self) -> None:
        """Record the fingerprints ``plan`` took anew of unchanged sources, and delete the _rejects rows
        ``delete_rejects`` named: before any row is inserted into _rejects directly, and before the spool loads the
        run's own."""
        if self._fingerprints:
            import pyarrow as pa

            from ..warehouse import temp_table

            paths, fps = zip(*self._fingerprints, strict=True)
            temp_table(self.con, "_fingerprints", pa.table({"path": list(paths), "fp": list(fps)}))
            self.con.execute('update _source_files set fingerprint = f.fp from "_fingerprints" as f '
                             "where _source_files.source_path = f.path")
            self.con.execute('drop table "_fingerprints"')
            self._fingerprints = []
        if not self._old_rejects:
            return
        paths = key_table(self.con, "_old_rejects", [p for path in self._old_rejects for p in _under(path)])
        self.con.execute(f"""delete from _rejects where source_path in {paths} or exists (
                             select 1 from "_old_rejects" o where right(o.key, 1) = '/'
                             and starts_with(_rejects.source_path, o.key))""")
        self.con.execute('drop table "_old_rejects"')
        self._old_rejects = []

    def record_problems(self, roots: list[str], problems: list[tuple[str, str]]) -> None:
        """What discovery could not list or examine, as _rejects rows (position `folder`); the
        previous run's such rows under the roots read now are replaced."""
        for root in roots:
            self.con.execute("delete from _rejects where position = 'folder' and (source_path = ? or "
                             "starts_with(source_path, ?))", _under(self.key(root)))
        for path, reason in problems:
            self._reject(self.key(path), "folder", reason)

    # ------------------------------------------------------------------------------ staged rows
    def staged_sessions(self, path: str, session_id: str | None = None) -> set[str]:
        """Sessions with staged rows from ``path``: its own session for per-session files, else looked up."""
        if session_id:
            return {session_id}
        out: set[str] = set()
        for t in STAGING:
            rows = self.con.execute(f'select distinct session_id from "{t.name}" where _source_path = ? '
                                    "or starts_with(_source_path, ?)", _under(path)).fetchall()
            out.update(r[0] for r in rows if r[0])
        return out

    def all_staged_sessions(self) -> set[str]:
        out: set[str] = set()
        for t in STAGING:
            out.update(r[0] for r in self.con.execute(f'select distinct session_id from "{t.name}" '
                                                      "where session_id is not null").fetchall())
        return out

    def _delete_staged(self, path: str) -> None:
        for t in STAGING:
            self.con.execute(f'delete from "{t.name}" where _source_path = ? or starts_with(_source_path, ?)',
                             _under(path))
        self.delete_rejects(path)

    # ------------------------------------------------------------------------------ planning
    def plan(self, src: Source, st: os.stat_result | None = None) -> tuple[Plan | None, set[str]]:
        """Whether ``src`` needs reading (a Plan, or None: unchanged, no reader, or it cannot even be
        examined) and the sessions to rebuild anyway (those of a source that came back unchanged). ``st``: its
        stat, taken as it was discovered."""
        path = self.key(src.path)
        self.seen.add(path)
        try:
            fp, size = fingerprint(src, st)
        except OSError as exc:  # a symlink loop, no permission, gone since discovery: tried again next run
            self.delete_rejects(path)
            self._reject(path, "file", f"cannot be examined ({exc.strerror or exc}); not read")
            return None, set()
        known = self.known.get(path)
        same = known is not None and known.prior.fingerprint == fp
        if known is not None and not same and _recorded_before(src, st, known.prior.fingerprint):
            self._fingerprints.append((path, fp))  # unchanged since an earlier version fingerprinted it
            same = True
        if same and not _swapped(src, known.prior):
            self.summary.n_files_unchanged += 1
            if not known.is_present:  # it came back: its rows count as present again
                self.con.execute("update _source_files set is_present = true where source_path = ?", [path])
                return None, self.staged_sessions(path, self.key(src.session_id))
            return None, set()
        if src.kind not in READERS:
            self.summary.unknown_kinds[src.kind] = self.summary.unknown_kinds.get(src.kind, 0) + 1
            log.warning("%s: no reader for %s files yet; not read", path, src.kind)
            return None, set()
        return Plan(src, fp, size, known), set()

    def forget_fingerprints(self) -> None:
        """Every source is read again, and read whole, on this run (an upgrade from an older format)."""
        self.con.execute("update _source_files set fingerprint = '', last_good_offset = 0, good_line = 1, "
                         "tail_digest = null, prefix_digest = null, head_digest = null")
        self.known = self._known()

    # ------------------------------------------------------------------------------ applying a read
    def apply(self, read: Read, plan: Plan) -> set[str]:
        """Stage what a reader read from one source, replacing what an earlier run staged from it;
        returns the sessions whose star rows must be rebuilt."""
        src, res = read.source, read.result
        path, sid = self.key(src.path), self.key(src.session_id)
        before = self.staged_sessions(path, sid) if plan.prior is not None else set()
        if res is None:
            # a file that could not be read at all keeps the rows read from it earlier, and its old
            # fingerprint: the next run tries it again (only a read that worked records a fingerprint)
            reason = Redactor()(read.error or "could not be read")
            log.warning("%s: %s", path, reason)
            self.delete_rejects(path)
            self.flush()
            insert(self.con, "_rejects", [{"source_path": path, "position": "file", "line_number": None,
                                           "byte_offset": None, "reason": reason, "excerpt": "",
                                           "_run_id": self.summary.run_id}])
            self.summary.n_rejects += 1
            return set()
        if res.skipped_reason:
            self.summary.n_files_skipped += 1
            log.warning("%s: %s", path, res.skipped_reason)
            return set()
        unreadable = not read.n_rows and any(r["position"] == "file" for r in res.rejects)
        if plan.prior is None:
            self.delete_rejects(path)  # never staged before; a failed earlier read may have left its reason
        elif unreadable:
            self.delete_rejects(path)  # keep what an earlier run read from this file
        elif not res.appended:
            self._delete_staged(path)
        for r in res.rejects:
            r["_run_id"] = self.summary.run_id
            log.warning("%s %s: %s", r["source_path"], r["position"], r["reason"])
        self.summary.n_rejects += self.spool.add("_rejects", res.rejects)
        self.summary.n_pending_tails += int(res.pending_tail)
        self.summary.n_files_read += 1
        self._record(plan, read)
        if res.appended and not read.n_rows and plan.known is not None and plan.known.is_present:
            # a log read on from where it stopped that gave nothing new (its time touched, or a last line still
            # being written): its sessions' staged rows are as they were, and so are their star rows
            return set()
        sessions = before | read.sessions | ({sid} if sid else set())
        self.sessionless_changed |= not sessions
        return sessions

    def _record(self, plan: Plan, read: Read) -> None:
        """Remember a source's fingerprint (and, for logs, where to resume) after a read that worked."""
        src, res = plan.source, read.result
        if plan.known is not None:
            self.spool.replace("_source_files", "source_path", self.key(src.path))
        try:
            mtime = os.stat(src.path).st_mtime_ns
        except OSError:
            mtime = None
        self.spool.add("_source_files", [{
            "source_path": self.key(src.path), "kind": src.kind, "session_id": self.key(src.session_id),
            "size": plan.size, "mtime_ns": mtime, "fingerprint": plan.fingerprint,
            "last_good_offset": res.last_good_offset, "good_line": res.good_line, "tail_digest": read.tail,
            "prefix_digest": read.prefix, "head_digest": read.head,
            "n_records": res.n_records, "is_present": True, "last_run_id": self.summary.run_id}])

    # ------------------------------------------------------------------------------ gone sources
    def mark_gone(self) -> set[str]:
        """Sources that vanished from disk, under the roots read now or any other (a home moved elsewhere: its
        rows are read again from there, and ``transform.star.without_copies`` counts them once): rows kept,
        marked not present; returns their sessions. A path stored redacted cannot be looked for: it stays as
        it was until its root is read again."""
        gone: set[str] = set()
        for path, known in self.known.items():
            if path in self.seen or not known.is_present or "[REDACTED:" in path or os.path.exists(path):
                continue
            self.con.execute("update _source_files set is_present = false where source_path = ?", [path])
            self.summary.n_files_gone += 1
            gone |= self.staged_sessions(path, known.session_id)
        return gone

    def present_sources(self):
        """(source_path, session_id) of every source on disk, as a polars frame (for dim_sessions.is_gone)."""
        return self.con.sql("select source_path, session_id from _source_files where is_present").pl()
