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
from datetime import datetime, timezone
from pathlib import Path

from .checks import ChecksFailed, all_checks, run_checks
from .extract import discover
from .extract.base import Finder
from .extract.parallel import read_all
from .load import star
from .load.spool import Spool, run_folder
from .load.state import Plan, SourceState, keep_gone, restore_gone
from .models import incremental_models_filled, run_models
from .runs import RunSummary, new_run_id, record_run
from .schema import MODELS, STAR
from .warehouse import (
    FORMAT_VERSION,
    connect,
    drop_all,
    ensure_schema,
    fill_kept_rows,
    format_version,
    result_chars,
    set_meta,
    stored_result_chars,
    transaction,
    writing,
)

log = logging.getLogger(__name__)


def _chars(n: int) -> str:
    return f"the first {n:,} characters" if n else "all"


class SourceError(Exception):
    """A named source folder does not exist or is not a folder."""


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
    tell = progress or (lambda _done, _total, _phase: None)
    check_sources(copilot_homes, vscode_users)
    started = time.perf_counter()
    now = now or datetime.now(timezone.utc)
    roots = [str(Path(p).resolve()) for p in [*copilot_homes, *vscode_users]]
    summary = RunSummary(new_run_id(now), "full" if full else "incremental", roots)
    redactions: Counter[str] = Counter()

    with ExitStack() as held:
        held.enter_context(writing(warehouse))  # this tool's readers (serve's searches) wait for the run
        con = connect(warehouse)
        held.callback(con.close)
        folder = run_folder(warehouse)
        held.callback(shutil.rmtree, folder, ignore_errors=True)
        (folder / "scratch").mkdir()
        with transaction(con):
            kept: list[str] = []
            if full:  # from scratch, but for what nothing can read again: the rows of sources gone from disk
                kept = keep_gone(con)
                drop_all(con)
            # a model this version adds (or one someone dropped) is built whole on this run, even if no source changed
            created = ensure_schema(con)
            if kept:
                restore_gone(con)
            if "_runs" in created:  # a new warehouse: everything is read
                summary.mode = "full"
            new_models = {t.name for t in MODELS} & set(created)
            spool = Spool(con, folder / "staging")
            state = SourceState(con, spool, summary, redact)
            affected: set[str] = set(kept)
            upgrade = not full and format_version(con, created) < FORMAT_VERSION
            if upgrade:  # rows staged by an older version: read every source again, rebuild every session
                log.warning("the warehouse was written by an older version: reading every source again and "
                            "rebuilding every session (rows of sources no longer on disk are kept)")
                state.forget_fingerprints()
                affected |= state.all_staged_sessions()
            chars, held = result_chars(), stored_result_chars(con)
            if "_runs" not in created and not full and held != chars:
                log.warning("fct_tool_calls now holds %s of each tool output (it held %s): rebuilding every "
                            "session's star rows", _chars(chars), _chars(held))
                affected |= state.all_staged_sessions()

            # discover and plan: which sources changed since the last run
            tell(0, 0, "finding sources")
            finder = Finder()
            sources = discover(copilot_homes, vscode_users, finder)
            state.record_problems(roots, finder.problems)
            plans: list[Plan] = []
            for src in sources:
                plan, came_back = state.plan(src)
                affected |= came_back
                if plan is not None:
                    plans.append(plan)
            mark = summary.phase("discover", started)

            # read them (on every core) and stage their rows
            jobs = [(p.source, p.prior, p.size) for p in plans]
            done = 0
            plan_of = {p.source: p for p in plans}
            tell(0, len(jobs), "reading")
            for batch in read_all(jobs, summary.run_id, redact, workers, str(folder / "scratch")):
                for read in batch.reads:
                    redactions.update(read.redactions)
                    affected |= state.apply(read, plan_of[read.source])
                    for table, part, n_rows in read.result.parts if read.result else ():
                        summary.n_records += spool.add_part(table, part, n_rows)
                    done += 1
                    tell(done, len(jobs), "reading")
                for table, rows in batch.tables.items():  # the rows of all the batch's sources, in order
                    summary.n_records += spool.add(table, rows)
            mark = summary.phase("read", mark)
            tell(0, 0, "staging rows")
            state.flush()
            spool.load()
            if upgrade:
                fill_kept_rows(con)
            affected |= state.mark_gone(roots)
            root_repos: dict[str, str] = {}
            if affected:  # which repository each folder is, over the whole warehouse (see transform.star.places)
                root_repos, moved = star.root_repositories(con, None if full or upgrade else affected)
                affected |= moved
            summary.n_sessions_changed = len(affected)
            mark = summary.phase("stage", mark)

            # the star rows of the sessions that changed, then the SQL models and the checks
            tell(0, 0, "star schema")
            star.rebuild(con, sorted(affected), folder / "star", root_repos, chars)
            mark = summary.phase("star", mark)
            if affected or new_models:
                whole = full or upgrade or new_models or not incremental_models_filled(con)
                scope = None if whole else sorted(affected)  # None: every session
                tell(0, 0, "SQL models")
                run_models(con, scope)
                mark = summary.phase("models", mark)
                tell(0, 0, "data checks")
                failures = run_checks(con, sessions=scope)
                mark = summary.phase("checks", mark)
                if failures:
                    raise ChecksFailed(failures)
                summary.n_checks_run = len(all_checks())

            # record the run
            summary.n_redactions = sum(redactions.values())
            summary.redactions = dict(sorted(redactions.items()))
            facts = [t.name for t in STAR if t.name.startswith("fct_")]
            counted = ["dim_sessions", "dim_projects", "dim_files", *facts]
            for t in counted:
                summary.tables[t] = con.execute(f'select count(*) from "{t}"').fetchone()[0]
            summary.seconds = time.perf_counter() - started
            mark = summary.phase("summary", mark)
            set_meta(con, "format_version", FORMAT_VERSION)
            set_meta(con, "result_chars", chars)
            record_run(con, summary, now)
            tell(0, 0, "committing")
        summary.phase("commit", mark)  # logged only: _runs was written before the commit

    log.info(summary.line())
    log.info("phases (s): %s", ", ".join(f"{k} {v:.2f}" for k, v in summary.phases.items()))
    return summary
