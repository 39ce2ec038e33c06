"""One ingest run: its id, what it did (``RunSummary``, printed and kept as ``_runs.summary``), and
its row in ``_runs``."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

import duckdb
import orjson


def new_run_id(now: datetime) -> str:
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


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
    n_not_sessions: int = 0  # ids rebuilt that are no session (an empty VS Code chat, a file naming none)
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
        """This run's counts, then the warehouse's totals after it (two lines)."""
        t = self.tables

        def n(k: int, word: str) -> str:
            return f"{k:,} {word if k == 1 else word + 's'}"
        return (f"ingest {self.mode}: read {n(self.n_files_read, 'file')} ({self.n_files_unchanged:,} unchanged), "
                f"{n(self.n_records, 'record')}, {self.n_rejects:,} rejected, {n(self.n_redactions, 'secret')} "
                f"redacted, {n(self.n_sessions_changed, 'session')} rebuilt"
                + (f", {self.n_not_sessions:,} {'id' if self.n_not_sessions == 1 else 'ids'} that "
                   f"{'is' if self.n_not_sessions == 1 else 'are'} no session (empty chats) left out"
                   if self.n_not_sessions else "") + f" in {self.seconds:.1f}s\n"
                f"  warehouse now: {n(t.get('dim_sessions', 0), 'session')}, {n(t.get('fct_turns', 0), 'prompt')}, "
                f"{n(t.get('fct_tool_calls', 0), 'tool call')}, {n(t.get('fct_checkpoints', 0), 'checkpoint')}")


def record_run(con: duckdb.DuckDBPyConnection, summary: RunSummary, started_at: datetime) -> None:
    """The run's row in ``_runs`` (written inside the run's transaction)."""
    con.execute("insert into _runs (run_id, started_at, finished_at, mode, sources, n_files_read, "
                "n_files_unchanged, n_records, n_rejects, n_redactions, n_sessions_changed, summary) "
                "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                    summary.run_id, started_at, datetime.now(timezone.utc), summary.mode, summary.sources,
                    summary.n_files_read, summary.n_files_unchanged, summary.n_records, summary.n_rejects,
                    summary.n_redactions, summary.n_sessions_changed,
                    orjson.dumps(summary.__dict__, default=str).decode()])


def redact_recorded_roots(con: duckdb.DuckDBPyConnection) -> int:
    """The roots earlier versions recorded in ``_runs`` as given (``sources`` and the summary's copy), stored as
    every path is now: a secret in a folder's name redacted. Returns the runs rewritten."""
    from .redact import stored_path

    roots = [r[0] for r in con.execute("select distinct unnest(sources) from _runs").fetchall() if r[0] is not None]
    changed = 0
    for root in roots:
        stored = stored_path(root)
        if stored == root:
            continue
        was, now = orjson.dumps(root).decode()[1:-1], orjson.dumps(stored).decode()[1:-1]  # as the summary spells it
        changed += len(con.execute(
            "update _runs set sources = list_transform(sources, s -> case when s = $1 then $2 else s end), "
            "summary = replace(summary, $3, $4) where list_contains(sources, $1) returning run_id",
            [root, stored, was, now]).fetchall())
    return changed
