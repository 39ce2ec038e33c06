"""The ingest run, in the order it happens, in one DuckDB transaction:

discover the sources -> plan (fingerprint: which changed) -> read them (on every core) -> stage the
rows -> rebuild the star rows of the sessions that changed -> run the SQL models -> run the checks
-> record the run.

Each step lives in its own module; this one only sequences them.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from .checks import ChecksFailed, all_checks, run_checks
from .errors import SourceError
from .extract import discover
from .extract.base import Finder, Source
from .extract.parallel import read_all
from .load import star
from .load.spool import Spool, prune_texts, run_folder
from .load.state import Plan, SourceState, keep_gone, restore_gone
from .models import OF_SESSION, models_current, run_models, session_keys
from .processes import gc_paused
from .redact import store_paths, stored_path
from .runs import RunSummary, new_run_id, record_run, redact_recorded_roots
from .schema import MODELS, STAR
from .warehouse import (
    FORMAT_VERSION,
    connect,
    drop_all,
    ensure_schema,
    fill_kept_rows,
    format_version,
    key_table,
    result_chars,
    set_meta,
    stored_result_chars,
    transaction,
    writing,
)

log = logging.getLogger(__name__)


def _chars(n: int) -> str:
    return f"the first {n:,} characters" if n else "all"


def check_sources(copilot_homes: list[Path], vscode_users: list[Path]) -> None:
    for label, paths in (("--copilot-home", copilot_homes), ("--vscode-user", vscode_users)):
        for p in paths:
            if not Path(p).exists():
                raise SourceError(f"{label} {p}: no such folder")
            if not Path(p).is_dir():
                raise SourceError(f"{label} {p}: not a folder")


def ingest(warehouse: str | Path, copilot_homes: list[Path], vscode_users: list[Path] | None = None, *,
           full: bool = False, redact: bool = True, now: datetime | None = None,
           progress: Callable[[int, int, str], None] | None = None, workers: int | None = None) -> RunSummary:
    """Read what changed under the roots into ``warehouse`` in one transaction. ``progress(done, total,
    phase)`` is told each phase as it starts (total 0: not counted) and each source read."""
    vscode_users = vscode_users or []
    check_sources(copilot_homes, vscode_users)
    started = time.perf_counter()
    now = now or datetime.now(timezone.utc)
    roots = [str(Path(p).resolve()) for p in [*copilot_homes, *vscode_users]]
    # the roots as stored, as every path is (a secret in a folder's name is redacted)
    summary = RunSummary(new_run_id(now), "full" if full else "incremental",
                         [stored_path(root, redact) for root in roots])
    with ExitStack() as held:
        held.enter_context(writing(warehouse))  # this tool's readers (serve's searches) wait for the run
        held.enter_context(gc_paused())  # the run's rows and plans are no cycles (see processes.gc_paused)
        con = connect(warehouse)
        held.callback(con.close)
        folder = run_folder(warehouse)
        held.callback(shutil.rmtree, folder, ignore_errors=True)
        (folder / "scratch").mkdir()
        with transaction(con):
            found = _discover(copilot_homes, vscode_users, redact, progress)
            run = _prepare(con, folder, summary, full, redact, progress, started, found)
            plans = _plan(run, found, roots)
            _read(run, plans, workers)
            _stage(run)
            _build(run)
            _record(run, now)
        summary.phase("commit", run.mark)  # logged only: _runs was written before the commit
    log.info(summary.line())
    log.info("phases (s): %s", ", ".join(f"{k} {v:.2f}" for k, v in summary.phases.items()))
    return summary


@dataclass
class _Run:
    """What the steps of one ingest share: the connection, the staged rows and source state, the sessions
    whose star rows are rebuilt (``affected``), and the run's summary (each step a phase of it)."""

    con: duckdb.DuckDBPyConnection
    folder: Path
    summary: RunSummary
    state: SourceState
    spool: Spool
    tell: Callable[[int, int, str], None]
    full: bool
    upgrade: bool
    new_models: set[str]
    chars: int
    started: float
    mark: float
    affected: set[str] = field(default_factory=set)
    # the stored star rows were built by this version with this run's share of each tool output: the star
    # replaces only the rows that differ (load.star.rebuild)
    compare: bool = True
    root_repos: dict[str, str] = field(default_factory=dict)
    redactions: Counter = field(default_factory=Counter)

    def phase(self, name: str) -> None:
        self.mark = self.summary.phase(name, self.mark)


@dataclass
class _Found:
    """The sources found under the roots, as each is stored (``paths``: redacted, valid UTF-8), and what the
    search met (``finder``: each file's stat, the folders it could not read)."""

    sources: list[Source]
    paths: set[str]
    finder: Finder


def _discover(copilot_homes: list[Path], vscode_users: list[Path], redact: bool,
              progress: Callable[[int, int, str], None] | None) -> _Found:
    """The sources under the roots, found before the warehouse is touched: a full run keeps the rows of the
    sources it will not find (``keep_gone``), which it can only tell by what it finds when a stored path is
    no path on disk (redacted, or not valid UTF-8)."""
    if progress:
        progress(0, 0, "finding sources")
    finder = Finder()
    sources = discover(copilot_homes, vscode_users, finder)
    store_paths([src.path for src in sources], redact)  # redacted at once: each plan's key looks it up
    return _Found(sources, {stored_path(src.path, redact) for src in sources}, finder)


def _prepare(con: duckdb.DuckDBPyConnection, folder: Path, summary: RunSummary, full: bool, redact: bool,
             progress: Callable[[int, int, str], None] | None, started: float, found: _Found) -> _Run:
    """The warehouse ready for the run: its schema, a full run's clean slate (but for the rows of sources
    gone from disk), and what must be rebuilt whatever changed (rows of an older format, another share of
    each tool output kept in fct_tool_calls)."""
    kept: list[str] = []
    if full:  # from scratch, but for what nothing can read again: the rows of sources gone from disk
        kept = keep_gone(con, found.paths)
        drop_all(con)
    # a model this version adds (or one someone dropped) is built whole on this run, even if no source changed
    created = ensure_schema(con)
    if kept:
        restore_gone(con)
    if "_runs" in created:  # a new warehouse: everything is read
        summary.mode = "full"
    elif redact and (n := redact_recorded_roots(con)):
        log.info("%d earlier runs' roots stored redacted, as every path is now", n)
    spool = Spool(con, folder / "staging")
    run = _Run(con, folder, summary, SourceState(con, spool, summary, redact), spool,
               progress or (lambda _done, _total, _phase: None), full,
               upgrade=not full and format_version(con, created) < FORMAT_VERSION,
               new_models={t.name for t in MODELS} & set(created), chars=result_chars(), started=started,
               mark=started,
               affected=set(kept))
    if run.upgrade:  # rows staged by an older version: read every source again, rebuild every session
        log.warning("the warehouse was written by an older version: reading every source again and "
                    "rebuilding every session (rows of sources no longer on disk are kept)")
        run.state.forget_fingerprints()
        run.affected |= run.state.all_staged_sessions()
    held = stored_result_chars(con)
    if "_runs" not in created and not full and held != run.chars:
        log.warning("fct_tool_calls now holds %s of each tool output (it held %s): rebuilding every "
                    "session's star rows", _chars(run.chars), _chars(held))
        run.affected |= run.state.all_staged_sessions()
    run.compare = not (full or run.upgrade or held != run.chars)
    return run


def _plan(run: _Run, found: _Found, roots: list[str]) -> list[Plan]:
    """Plan what to read of the sources found: which changed since the last run (their fingerprints)."""
    run.state.record_problems(roots, found.finder.problems)
    plans: list[Plan] = []
    for src in found.sources:
        plan, came_back = run.state.plan(src, found.finder.stats.get(src.path))
        run.affected |= came_back
        if plan is not None:
            plans.append(plan)
    run.phase("discover")
    return plans


def _read(run: _Run, plans: list[Plan], workers: int | None) -> None:
    """Read the planned sources on every core, spooling their rows in order."""
    jobs = [(p.source, p.prior, p.size) for p in plans]
    done = 0
    plan_of = {p.source: p for p in plans}
    run.tell(0, len(jobs), "reading")
    for batch in read_all(jobs, run.summary.run_id, run.state.redact, workers, str(run.folder / "scratch")):
        for read in batch.reads:
            run.redactions.update(read.redactions)
            run.affected |= run.state.apply(read, plan_of[read.source])
            for table, part, n_rows, shift in read.result.parts if read.result else ():
                run.summary.n_records += run.spool.add_part(table, part, n_rows, shift)
            done += 1
            run.tell(done, len(jobs), "reading")
        for table, rows in batch.tables.items():  # the rows of all the batch's sources, in order
            run.summary.n_records += run.spool.add(table, rows)
        for table, part, n_rows in batch.parts:  # ... or the parts a worker wrote them to
            run.summary.n_records += run.spool.add_part(table, part, n_rows)
    run.phase("read")


def _stage(run: _Run) -> None:
    """Load the spooled rows into staging; mark the sources gone from disk; which repository each folder is."""
    run.tell(0, 0, "staging rows")
    run.state.flush()
    run.spool.load()
    if run.upgrade:
        fill_kept_rows(run.con)
    run.affected |= run.state.mark_gone()
    if run.affected or run.full:  # staged rows were replaced: the texts only they named go
        prune_texts(run.con)
    if run.affected:  # which repository each folder is, over the whole warehouse (see transform.star.places)
        run.root_repos, moved = star.root_repositories(run.con, None if run.full or run.upgrade else run.affected)
        run.affected |= moved
    run.summary.n_sessions_changed = len(run.affected)
    run.phase("stage")


def _build(run: _Run) -> None:
    """The star rows of the sessions that changed, then the SQL models and the checks."""
    run.tell(0, 0, "star schema")
    sessionless = run.state.sessionless_changed
    prior = session_keys(run.con, run.affected)  # a session can move: its old project's model rows change too
    changes: dict[str, set[str | None]] = {}  # of each star table, the sessions whose rows of it changed
    changed = star.rebuild(run.con, sorted(run.affected), run.folder / "star", run.root_repos, run.chars,
                           run.compare, sessionless, changes)
    if run.affected:  # ids no session answers to: an empty chat, a file that names none (said in the summary)
        kept = key_table(run.con, "_rebuilt", sorted(run.affected))
        run.summary.n_sessions_changed = run.con.execute(
            f"select count(*) from dim_sessions where session_id in {kept}").fetchone()[0]
        run.summary.n_not_sessions = len(run.affected) - run.summary.n_sessions_changed
        run.con.execute('drop table "_rebuilt"')
    run.phase("star")
    # the models read the star only: a session read again whose star rows are as they were (a workspace's chat
    # index rewritten for one of its chats re-stages them all) changes none of their rows
    if not (changed or run.new_models or sessionless):
        return
    whole = run.full or run.upgrade or run.new_models or not models_current(run.con)
    scope = None if whole else sorted(changed)  # None: every session
    run.tell(0, 0, "SQL models")
    now, gone = session_keys(run.con, run.affected), (None,) * len(OF_SESSION)
    # by key, the sessions whose value of it changed (moved, came or went), and their values before
    relocated = {key: {s for s in run.affected if prior.get(s, gone)[i] != now.get(s, gone)[i]}
                 for i, key in enumerate(OF_SESSION)}
    before = {key: sorted({prior[s][i] for s in relocated[key] if s in prior} - {None})
              for i, key in enumerate(OF_SESSION)}
    run_models(run.con, scope, before=before, moved=changes, relocated=relocated)
    run.phase("models")
    run.tell(0, 0, "data checks")
    failures = run_checks(run.con, sessions=scope)
    run.phase("checks")
    if failures:
        raise ChecksFailed(failures)
    run.summary.n_checks_run = len(all_checks())


def _record(run: _Run, now: datetime) -> None:
    """The run's summary and meta, written in the run's transaction."""
    summary, con = run.summary, run.con
    summary.n_redactions = sum(run.redactions.values())
    summary.redactions = dict(sorted(run.redactions.items()))
    facts = [t.name for t in STAR if t.name.startswith("fct_")]
    for t in ["dim_sessions", "dim_projects", "dim_files", *facts]:
        summary.tables[t] = con.execute(f'select count(*) from "{t}"').fetchone()[0]
    summary.seconds = time.perf_counter() - run.started
    run.phase("summary")
    set_meta(con, "format_version", FORMAT_VERSION)
    set_meta(con, "result_chars", run.chars)
    record_run(con, summary, now)
    run.tell(0, 0, "committing")
