"""Rebuilding the star rows of the sessions that changed: pull their staging rows out of DuckDB,
build the star with ``transform.star.build_star`` (pure polars), store the rows back.

Every table the star build writes (``schema.STAR``: dim_sessions, the fct_ tables, int_session_files)
is keyed by session: a session's rows are deleted and written anew. dim_projects and dim_files are
SQL models built from these (``sql/marts/``).

The transform (polars) is imported when a star is built, not with this module: a run in which
nothing changed never loads polars.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ..schema import STAGING, STAR
from ..vocabulary import SESSION_START, SYSTEM_MESSAGE
from ..warehouse import RESULT_CHARS, RESULT_HEAD_CHARS, key_table, memory_limit_unless_set, release_cache
from .spool import Spool, insert

if TYPE_CHECKING:
    import polars as pl

SESSION_BATCH = 250  # sessions whose staging rows are pulled and built at a time (README: Robustness and privacy)
SESSION_TABLES = [t.name for t in STAR]
# DuckDB's memory limit while the star rows are loaded from the spool's Parquet parts (unless
# $COPILOT_WAREHOUSE_MEMORY is set): the INSERTs stream and the rows are small (a tool output's
# start), but under the usual 512 MB the load was the full ingest's peak. 1 GB `events`, alternating
# runs: peak RSS 843-879 -> 772-780 MB, the load 1.74-1.95 -> 2.04-2.23 s; 2 GB: 0.97-0.99 -> 0.84 GB
STAR_LOAD_MEMORY = "256MB"
# the large staging tables need no order (the star sorts events by position); the small ones are
# pulled sorted (`order by all`), so which of two rows of one kind wins does not depend on load order
_ORDER = {"stg_events": "", "stg_tool_requests": ""}


def _text_columns() -> dict[str, str]:
    """The SQL of each event text column the star reads: the text only for the event types whose
    text the star reads (see ``transform.star.EVENT_TEXT_USED``), else NULL."""
    from ..transform.star import EVENT_TEXT_SQL, EVENT_TEXT_USED  # polars, loaded only when a star is built

    def column(col: str, types: tuple[str, ...]) -> str:
        cut = "".join(f" when event_type = '{t}' then {sql}" for t, sql in EVENT_TEXT_SQL.get(col, {}).items())
        return f"case when event_type in ({', '.join(repr(t) for t in types)}) then {col}{cut} end as {col}"

    return {c: column(c, ts) for c, ts in EVENT_TEXT_USED.items()}


def _text_of(event_type: str) -> str:
    """``_text_columns`` for the rows of one event type: each column, its cut, or NULL (not fetched)."""
    from ..transform.star import EVENT_TEXT_SQL, EVENT_TEXT_USED

    out = []
    for col, types in EVENT_TEXT_USED.items():
        sql = col if event_type in types else EVENT_TEXT_SQL.get(col, {}).get(event_type, "null::varchar")
        out.append(f"{sql} as {col}")
    return ", ".join(out)


def _staging_projection() -> dict[str, str]:
    """What the star build selects from each staging table: of stg_events the event texts as
    ``_text_columns`` says, and of a tool's output only its length, MD5 (stored as it was read) and
    whether it starts with a numbered line (``transform.star.NUMBERED`` over its head): never the text
    of an output, whose vectors DuckDB would decode whole for every row a session's events share them
    with (``fill_outputs`` adds what fct_tool_calls holds of it, in SQL)."""
    from ..transform.star import NUMBERED

    numbered = "regexp_matches(result_head, '" + NUMBERED.replace("'", "''") + "') as result_numbered"
    return {"stg_events": "* exclude (result_content, result_head) replace (" + ", ".join(_text_columns().values())
                          + "), " + numbered}


def root_repositories(con: duckdb.DuckDBPyConnection,
                      affected: set[str] | None = None) -> tuple[dict[str, str], set[str]]:
    """The repository of each folder sessions ran in, from every session's staged metadata and
    session.start, and the sessions whose project that changes (a newly read session named the
    repository of a folder that older sessions share: they move into its project).

    ``affected``: the sessions whose staged rows changed on this run (None: any may have). When they
    are fewer than half the sessions stored, only their places are read from the staged rows; every
    other session's place is the one its dim_sessions row holds, which the star built from the same
    staged rows (``transform.star.places`` in both): the polars work is the changed sessions', not
    every session's (1% of the 1 GB `events` logs grown, three alternating runs: the stage phase
    0.58-0.65 -> 0.41-0.49 s). DuckDB still reads the event types of every row group.
    """
    import polars as pl

    from ..transform.star import choose_event_source, places, project_ids
    from ..transform.star import root_repositories as repositories_of

    n_stored = con.execute("select count(*) from dim_sessions").fetchone()[0]
    scoped = affected is not None and 2 * len(affected) < n_stored
    in_scope = key_table(con, "_places_of", sorted(affected)) if scoped else ""
    only = f" and session_id in {in_scope}" if scoped else ""
    # the session.start of every session, and the system prompt (which names the folder) only of old
    # logs whose session.start has no context. Only the columns read below are selected, and a text
    # only where it is read: a session.start lies in every row group, and fetching a text column for
    # it decompressed the whole column (1 GB corpus: 1.0 -> 0.1 s)
    base = "session_id, source_kind, _source_path, event_index, event_type"
    ev = con.sql(f"select {base}, {_text_of(SESSION_START)} from stg_events "
                 f"where event_type = '{SESSION_START}'{only}").pl()
    without = con.execute(f"""
        select distinct session_id from stg_events where event_type = '{SYSTEM_MESSAGE}'{only} and session_id not in (
            select session_id from stg_events
            where event_type = '{SESSION_START}' and json_extract_string(extra, '$.context.cwd') is not null{only})
    """).fetchall()
    if without:
        in_old = key_table(con, "_no_context", [r[0] for r in without])
        prompts = con.sql(f"select {base}, {_text_of(SYSTEM_MESSAGE)} from stg_events "
                          f"where event_type = '{SYSTEM_MESSAGE}' and session_id in {in_old}").pl()
        ev = pl.concat([ev, prompts])
        con.execute('drop table "_no_context"')
    where = places(con.sql(f"select * from stg_session_meta where true{only} order by all").pl(),
                   choose_event_source(ev).sort("session_id", "event_index"))
    others = f"where session_id not in {in_scope}" if scoped else ""
    stored = con.sql(f"select session_id, cwd, git_root, repository, project_id as stored_id from dim_sessions "
                     f"{others}").pl()
    if scoped:
        where = pl.concat([where.select("session_id", "cwd", "git_root", "repository"),
                           stored.select("session_id", "cwd", "git_root", "repository")])
        con.execute('drop table "_places_of"')
    root_repos = repositories_of(where)
    expected = project_ids(where, root_repos)
    moved = expected.join(stored.select("session_id", "stored_id"), on="session_id").filter(
        pl.col("project_id").ne_missing(pl.col("stored_id")))
    return root_repos, set(moved["session_id"].to_list())


def rebuild(con: duckdb.DuckDBPyConnection, affected: list[str], spool_dir: Path,
            root_repos: dict[str, str] | None = None, chars: int = RESULT_CHARS) -> None:
    """Replace the star rows of the affected sessions, built batch by batch; fct_tool_calls holds the
    first ``chars`` characters of each tool output (0: all of it).

    A batch's star rows are built on a second thread while the next batch is pulled out of DuckDB
    and the one before is stored (polars and DuckDB release the GIL): the phase keeps both cores
    busy instead of one, with at most two batches of staging rows in memory.
    """
    if not affected:
        return
    from ..transform.star import build_star

    # the tool calls wait in a temp table: fill_outputs then adds what fct_tool_calls holds of each output
    con.execute(f"create or replace temp table {_CALLS} as select * from fct_tool_calls limit 0")
    spool = Spool(con, spool_dir, load_memory=memory_limit_unless_set(STAR_LOAD_MEMORY))
    projection = _staging_projection()
    present = con.sql("select source_path, session_id from _source_files where is_present").pl()
    in_affected = key_table(con, "_star_affected", affected)
    batches, spans = _batches(con, affected, in_affected)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="star") as builder:
        building = None
        for batch in batches:
            release_cache(con)  # what stage and the last batch read: this batch reads other blocks
            in_batch = key_table(con, "_star_batch", batch)
            stg = {t.name: con.sql(f'select {projection.get(t.name, "*")} from "{t.name}" '
                                   f"where session_id in {in_batch}{_span(t.name, batch, spans)}"
                                   f"{_ORDER.get(t.name, ' order by all')}").pl()
                   for t in STAGING}
            built = building.result() if building is not None else None
            building = builder.submit(build_star, stg, root_repos, present)
            del stg
            if built is not None:
                _store(spool, built)
        if building is not None:
            _store(spool, building.result())
    for table in SESSION_TABLES:
        con.execute(f'delete from "{table}" where session_id in {in_affected}')
    con.execute('drop table "_star_batch"')
    spool.load()
    fill_outputs(con, in_affected, chars)
    con.execute('drop table "_star_affected"')
    _rebuild_memories_of_no_session(con)


def fill_outputs(con: duckdb.DuckDBPyConnection, in_affected: str, chars: int) -> None:
    """The star's tool calls (waiting in ``_CALLS``) into fct_tool_calls, each with the first ``chars``
    characters of its output (0: all of it) from the completion event it came from (``RESULT_SOURCE``):
    its stored head, or, past that, the output itself. Only the affected sessions' events are read."""
    from ..transform.star import RESULT_SOURCE

    path, line = RESULT_SOURCE
    text = ("ev.result_content" if chars == 0 or chars > RESULT_HEAD_CHARS else "ev.result_head")
    cut = text if chars == 0 else f"left({text}, {int(chars)})"
    con.execute(f"""
        insert into fct_tool_calls by name
        select calls.* replace (case when calls.{path} is null then calls.result_content else {cut} end
                                as result_content)
        from {_CALLS} as calls
        left join (select _source_path, _source_line, {text.removeprefix("ev.")} from stg_events
                   where session_id in {in_affected} and result_chars is not null) as ev
          on ev._source_path = calls.{path} and ev._source_line = calls.{line}""")
    con.execute(f"drop table {_CALLS}")


def _batches(con: duckdb.DuckDBPyConnection, affected: list[str],
             in_affected: str) -> tuple[list[list[str]], dict[str, tuple[int, int, int]]]:
    """The affected sessions in batches of SESSION_BATCH in the order their events are stored, and for
    each session the first and last rowid of its events in stg_events and how many there are. A batch's
    events then lie in few row groups, and its pull reads those (``_span``): in batches by session id
    every pull read every row group, so the star's reading grew as the square of the corpus."""
    spans = {sid: (lo, hi, n) for sid, lo, hi, n in con.execute(
        f"select session_id, min(rowid), max(rowid), count(*) from stg_events where session_id in {in_affected} "
        "group by session_id").fetchall()}
    last = (1 << 63, 0, 0)  # sessions without events: last
    ordered = sorted(affected, key=lambda sid: (spans.get(sid, last)[0], sid))
    return [ordered[i:i + SESSION_BATCH] for i in range(0, len(ordered), SESSION_BATCH)], spans


def _span(table: str, batch: list[str], spans: dict[str, tuple[int, int, int]]) -> str:
    """For stg_events, the rowid range that holds the batch's events when they fill at least half of it
    (a full ingest: each batch's events are one stretch of rows), so DuckDB skips the row groups outside
    it; nothing otherwise. DuckDB reads every column of every row in a rowid range before the session
    filter: the range of sessions whose events lie far apart (a log that grew: its old rows and this
    run's) read whole outputs of rows that are not pulled (1% of the 1 GB `outputs` logs grown: the
    pull's peak RSS 0.77 -> 1.09 GB)."""
    if table != "stg_events":
        return ""
    held = [spans[sid] for sid in batch if sid in spans]
    if not held:
        return ""
    lo, hi = min(s[0] for s in held), max(s[1] for s in held)
    if 2 * sum(s[2] for s in held) < hi - lo + 1:
        return ""
    return f" and rowid between {lo} and {hi}"


_CALLS = "_star_tool_calls"  # this run's tool calls before their outputs are filled in (a temp table)


def _store(spool: Spool, star: dict[str, pl.DataFrame]) -> None:
    """A batch's star rows into the spool; its tool calls into the temp table ``_CALLS``, where
    ``fill_outputs`` finds them."""
    for table in SESSION_TABLES:
        spool.add(_CALLS if table == "fct_tool_calls" else table, star[table].to_arrow())


def _rebuild_memories_of_no_session(con: duckdb.DuckDBPyConnection) -> None:
    """Memories that belong to no session (repo and user memories) are in no session batch."""
    from ..transform.star import memories

    docs = con.sql("select * from stg_documents where session_id is null").pl()
    con.execute("delete from fct_memories where session_id is null")
    if not docs.is_empty():
        insert(con, "fct_memories", memories(docs))
