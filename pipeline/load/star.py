"""Rebuilding the star rows of the sessions that changed: pull their staging rows out of DuckDB,
build the star with ``transform.star.build_star`` (pure polars), store the rows back.

Every table the star build writes (``schema.STAR``: dim_sessions, the fct_ tables, int_session_files)
is keyed by session: a session's rows are deleted and written anew. dim_projects and dim_files are
SQL models built from these (``sql/marts/``).

The transform (polars) is imported when a star is built, not with this module: a run in which
nothing changed never loads polars.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ..checks import SHOW_ROWS, CheckFailure, ChecksFailed, key_check_sql
from ..parts import frame, write_part
from ..schema import STAGING, STAR, TABLES
from ..vocabulary import ASSISTANT_MESSAGE, ASSISTANT_USAGE, SESSION_START, SYSTEM_MESSAGE
from ..warehouse import RESULT_CHARS, RESULT_HEAD_CHARS, key_table, memory_limit_unless_set, release_cache, sql_literal
from .builder import CATEGORICAL, build_batch, warm
from .spool import Spool, insert

if TYPE_CHECKING:
    import polars as pl

# sessions whose staging rows are pulled and built at a time (README: Robustness and privacy): each batch
# costs its 14 pulls whatever its size (1 GB corpora of ~25-60 events a session, alternating runs: the star
# 5.7-6.4 -> 3.8-4.3 s on `outputs`, 11.0-12.3 -> 8.2-11.3 s on `events`, at 1,000 rather than 250; 2,000 no
# better; peak RSS the same within the noise), and what bounds a batch's memory is its events (below)
SESSION_BATCH = 1000
# ... or fewer, whose events add up to this many: a batch's events in polars take ~1 KB each at the
# star's peak, and a larger batch (one session of 200,000 tool calls: 610,000 events) is built alone,
# with no other batch pulled meanwhile
BATCH_EVENTS = 150_000
# DuckDB's memory limit while the star pulls and builds (unless $COPILOT_WAREHOUSE_MEMORY is set): its sort of
# a batch's events spills past it, and what polars holds of the batch is beside it
STAR_PULL_MEMORY = "256MB"
SESSION_TABLES = [t.name for t in STAR]
# DuckDB's memory limit while the star rows are loaded from the spool's Parquet parts (unless
# $COPILOT_WAREHOUSE_MEMORY is set): the INSERTs stream and the rows are small (a tool output's
# start), but under the usual 512 MB the load was the full ingest's peak. 1 GB `events`, alternating
# runs: peak RSS 843-879 -> 772-780 MB, the load 1.74-1.95 -> 2.04-2.23 s; 2 GB: 0.97-0.99 -> 0.84 GB
STAR_LOAD_MEMORY = "256MB"
# the events are pulled as they are stored - mostly each log's events in the order it was read (staging
# may load a log's parts out of order: see Spool._in_parallel) - and transform.star.in_session_order sorts
# only a batch whose events are not in order (an ORDER BY here held ~0.5 GB more for one session of 610,000
# events); a log's tool requests in the order it was read (the first of two with one id wins); the small
# tables sorted (`order by all`): which of two rows of one kind wins depends on no load order
_ORDER = {"stg_events": "", "stg_tool_requests": " order by session_id, _source_path, event_index, request_index"}


# what the pull takes of an event text the star reads a part of: of a system message's (stored once in stg_texts),
# the line that names the working directory (see transform.star.EVENT_TEXT_USED)
EVENT_TEXT_SQL = {
    "content": {SYSTEM_MESSAGE: r"regexp_extract(coalesce(content, (select text from stg_texts where text_key = "
                                r"content_key)), 'Current working directory: *[^\r\n]+', 0)"},
}


def _text_columns() -> dict[str, str]:
    """The SQL of each event text column the star reads: the text only for the event types whose
    text the star reads (see ``transform.star.EVENT_TEXT_USED``), else NULL."""
    from ..transform.star import EVENT_TEXT_USED  # polars, loaded only when a star is built

    def column(col: str, types: tuple[str, ...]) -> str:
        cut = "".join(f" when event_type = '{t}' then {sql}" for t, sql in EVENT_TEXT_SQL.get(col, {}).items())
        return f"case when event_type in ({', '.join(repr(t) for t in types)}) then {col}{cut} end as {col}"

    return {c: column(c, ts) for c, ts in EVENT_TEXT_USED.items()}


def _text_of(event_type: str) -> str:
    """``_text_columns`` for the rows of one event type: each column, its cut, or NULL (not fetched)."""
    from ..transform.star import EVENT_TEXT_USED

    out = []
    for col, types in EVENT_TEXT_USED.items():
        sql = col if event_type in types else EVENT_TEXT_SQL.get(col, {}).get(event_type, "null::varchar")
        out.append(f"{sql} as {col}")
    return ", ".join(out)


def _pulls() -> list[tuple[str, str, str]]:
    """What the star build selects of a batch of sessions, as (frame, table, SELECT ... FROM ... WHERE with the
    batch's condition to follow): every staging table, stg_events as two frames - the tool events, with
    their few columns (``transform.star.TOOL_EVENT_COLUMNS``), and every other event, with its texts as
    ``_text_columns`` says. Of a tool's output, only its length, MD5 (stored as it was read) and whether it
    starts with a numbered line (``transform.star.NUMBERED`` over its head): never the text of an output,
    whose vectors DuckDB would decode whole for every row a session's events share them with
    (``fill_outputs`` adds what fct_tool_calls holds of it, in SQL). Nor what the star never reads
    (lineage, envelope ids but of the requests that fall back on them)."""
    from ..transform.star import NUMBERED, TOOL_EVENT_COLUMNS, TOOL_EVENTS

    numbered = "regexp_matches(result_head, '" + NUMBERED.replace("'", "''") + "') as result_numbered"
    ids = f"case when event_type in ('{ASSISTANT_MESSAGE}', '{ASSISTANT_USAGE}') then event_id end as event_id"
    tools = ", ".join(f"'{t}'" for t in TOOL_EVENTS)
    out = [("stg_events", "stg_events",
            "select * exclude (result_content, result_head, result_chars, result_md5, parent_id, turn_id, content_key, "
            f"_source_offset, _run_id) replace ({', '.join(_text_columns().values())}, {ids}) "
            f"from stg_events where coalesce(event_type, '') not in ({tools}) and"),
           ("stg_tool_events", "stg_events", f"select {', '.join(TOOL_EVENT_COLUMNS)}, {numbered} "
                                             f"from stg_events where event_type in ({tools}) and"),
           ("stg_tool_requests", "stg_tool_requests",
            "select * exclude (_source_line, _run_id) from stg_tool_requests where")]
    return out + [(t.name, t.name, f'select * from "{t.name}" where') for t in STAGING
                  if t.name not in ("stg_events", "stg_tool_requests")]


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
            root_repos: dict[str, str] | None = None, chars: int = RESULT_CHARS, compare: bool = False,
            sessionless: bool = False, changes: dict[str, set[str | None]] | None = None) -> set[str]:
    """Replace the star rows of the affected sessions, built batch by batch (``_Builders``: on a second
    thread while the next batch is pulled, or on worker processes when there are many events); fct_tool_calls
    holds the first ``chars`` characters of each tool output (0: all of it).

    ``compare``: the stored rows of those sessions were built by this version with the same ``chars``; then only
    the rows that differ from what was built are replaced (``_store_differences``), not every row of a session.
    ``sessionless``: rows of no session were read (memories of a user or repository): their star rows are rebuilt
    even when no session changed. Returns the sessions whose star rows changed (with ``compare``: those of the
    affected sessions that differ from what was stored; else all of them). ``changes``, when given, is filled
    with the same per table: {table: the sessions whose rows of it changed}, None among them where the table's
    rows of no session were rebuilt (the memories of no session, when ``sessionless``)."""
    if changes is not None and sessionless:
        changes.setdefault("fct_memories", set()).add(None)
    if not affected:
        if sessionless:
            _rebuild_memories_of_no_session(con)
        return set()
    # the tool calls wait in a temp table: fill_outputs then adds what fct_tool_calls holds of each output
    con.execute(f"create or replace temp table {_CALLS} as select * from fct_tool_calls limit 0")
    spool = Spool(con, spool_dir, load_memory=memory_limit_unless_set(STAR_LOAD_MEMORY))
    pulls = _pulls()
    present = con.sql("select source_path, session_id from _source_files where is_present").pl()
    in_affected = key_table(con, "_star_affected", affected)
    compare = compare and con.execute(f"select exists (select 1 from dim_sessions where session_id in {in_affected})"
                                      ).fetchone()[0]
    batches, spans = _batches(con, affected, in_affected)
    pull_memory = memory_limit_unless_set(STAR_PULL_MEMORY)
    total = sum(_n_events(runs) for runs in spans.values())
    on_workers = total >= WORKERS_MIN_EVENTS and (os.cpu_count() or 1) > 1
    # a worker's parts, compared with the stored rows where they lie rather than loaded first (``_store_differences``)
    parts: dict[str, list[str]] | None = {t: [] for t in SESSION_TABLES} if compare and on_workers else None
    targets = {t: _CALLS if t == "fct_tool_calls" else (_built(t) if compare else t) for t in SESSION_TABLES}
    for table, target in targets.items():
        if target == _built(table) and parts is None:
            con.execute(f'create or replace temp table "{target}" as select * from "{table}" limit 0')
    with _Builders(con, root_repos, present, spool_dir / "batches", on_workers, len(batches)) as builders:
        for k, batch in enumerate(batches):
            large = sum(_n_events(spans.get(sid, ())) for sid in batch) > BATCH_EVENTS
            release_cache(con, pull_memory)  # what stage and the last batch read: this batch reads other blocks
            queries = batch_queries(con, pulls, batch, spans)
            for built in builders.submit(k, queries, large):
                _store(spool, built, targets, parts)
            release_cache(con, pull_memory)  # the pull's sort: not needed while the batch is built
        for built in builders.drain():
            _store(spool, built, targets, parts)
    release_cache(con)  # the usual limit again
    con.execute('drop table "_star_batch"')
    changed = set(affected)
    if compare:
        spool.load()
        changed = _store_differences(con, in_affected, parts, changes)
    else:
        for table in SESSION_TABLES:
            con.execute(f'delete from "{table}" where session_id in {in_affected}')
            if changes is not None:
                changes.setdefault(table, set()).update(affected)
        spool.load()
    fill_outputs(con, in_affected, chars)
    con.execute('drop table "_star_affected"')
    _rebuild_memories_of_no_session(con)
    return changed


def _built(table: str) -> str:
    """The temp table a star table's rows wait in when only their differences are stored."""
    return f"_star_built_{table}"


# what of a tool call is not compared: the part of its output it holds, which fill_outputs takes from the staged
# event it came from (RESULT_SOURCE) - the same text when that event's output has the same length and MD5
_NOT_COMPARED = {"fct_tool_calls": ("result_content",)}


def _store_differences(con: duckdb.DuckDBPyConnection, in_affected: str,
                       parts: dict[str, list[str]] | None = None,
                       changes: dict[str, set[str | None]] | None = None) -> set[str]:
    """Of each star table, the stored rows of the affected sessions that are not among the rows just built go, and
    the rows built that are not among those stored come in: a session grown by one event keeps its other rows
    (one 500 MB session grown by an event: the whole session's 56,000 tool calls, 8,000 turns and their texts
    deleted, inserted and their outputs filled in again before, 0.9 s of a 4.5 s run). Rows are compared whole,
    NULLs equal; a table's keys are unique and not NULL (checked), so a stored row and a built row are the same row
    when their keys match and so does every other column: they are paired by key (one join on the key's columns,
    the others compared on the pairs, rather than two anti-joins hashing every column).
    The tool calls that stay out of fct_tool_calls stay in ``_CALLS``, for fill_outputs. Returns the sessions any
    of whose rows changed.

    ``parts``: the rows built are in these Parquet parts a worker wrote (table -> files), compared where they lie
    instead of in temp tables (one session of 200,000 tool calls grown by an event: loading them first took 0.7 s
    of the comparison's 1.4). ``changes``: filled with the sessions any of whose rows changed, per table."""
    changed: set[str] = set()
    for table in SESSION_TABLES:
        mine: set[str] = set()  # the sessions whose rows of this table changed
        built = _built_rows(table, None if parts is None else parts[table])
        spec, skip = TABLES[table], _NOT_COMPARED.get(table, ())
        # rows paired by key must have one (a star that built two rows of a key would pass the checks paired so)
        repeated = con.execute(f"{key_check_sql(table, spec.key, built)} limit {SHOW_ROWS}").fetchall()
        if repeated:
            raise ChecksFailed([CheckFailure(f"unique_key_{table}", len(repeated), [*spec.key, "n_rows"], repeated)])
        on = " and ".join(f's."{c}" = b."{c}"' for c in spec.key)
        differ = " or ".join(f's."{c.name}" is distinct from b."{c.name}"' for c in spec.columns
                             if c.name not in skip and c.name not in spec.key) or "false"
        con.execute(f'create or replace temp table "{_PAIRS}" as select s._row as stored, b._file, b._row as built '
                    f'from (select rowid as _row, * from "{table}" where session_id in {in_affected}) as s '
                    f'full join {built} as b on {on} where s._row is null or b._row is null or {differ}')
        _sessions_of(con.execute(f'delete from "{table}" where rowid in (select stored from "{_PAIRS}" '
                                 'where stored is not null) returning session_id'), mine)
        cols = ", ".join(f'b."{c.name}"' for c in spec.columns)
        new = f'select {cols} from {built} as b semi join "{_PAIRS}" as p on b._file = p._file and b._row = p.built'
        if table == "fct_tool_calls":
            if parts is None:  # the built calls are in _CALLS: the ones stored alike leave it
                con.execute(f'delete from "{_CALLS}" where rowid not in (select built from "{_PAIRS}" '
                            'where built is not null)')
            else:
                con.execute(f'create or replace temp table "{_CALLS}" as {new}')
            _sessions_of(con.execute(f'select distinct session_id from "{_CALLS}"'), mine)
        else:
            _sessions_of(con.execute(f'insert into "{table}" {new} returning session_id'), mine)
        if parts is None and table != "fct_tool_calls":
            con.execute(f'drop table "{_built(table)}"')
        changed |= mine
        if changes is not None:
            changes.setdefault(table, set()).update(mine)
    con.execute(f'drop table if exists "{_PAIRS}"')
    return changed


_PAIRS = "_star_pairs"  # the rows of one table that differ: the stored row's rowid and the built row's place


def _built_rows(table: str, files: list[str] | None) -> str:
    """The rows built for ``table`` as a subquery of its columns with their place (``_file``, ``_row``): in the
    Parquet parts ``files`` a worker wrote, in its order and types, else in the temp table they were loaded into."""
    if files is None:
        name = _CALLS if table == "fct_tool_calls" else _built(table)
        return f"(select '' as _file, rowid as _row, * from \"{name}\")"
    cols = TABLES[table].cast_sql()
    if not files:
        return f"(select '' as _file, 0::bigint as _row, {cols} from \"{table}\" limit 0)"
    return (f"(select filename as _file, file_row_number as _row, {cols} from read_parquet("
            f"[{', '.join(sql_literal(f) for f in files)}], filename = true, file_row_number = true))")


def _sessions_of(result: duckdb.DuckDBPyConnection, into: set[str]) -> None:
    """The session ids a statement returned (a row each: a session of 600,000 rows that all changed returns as
    many), added to ``into`` a batch at a time."""
    while batch := result.fetchmany(65_536):
        into.update(r[0] for r in batch)


def fill_outputs(con: duckdb.DuckDBPyConnection, in_affected: str, chars: int) -> None:
    """The star's tool calls (waiting in ``_CALLS``) into fct_tool_calls, each with the first ``chars``
    characters of its output (0: all of it) from the completion event it came from (``RESULT_SOURCE``):
    its stored head (the whole output when it is short), or, past that, the output itself. Only the
    affected sessions' events are read."""
    from ..transform.star import RESULT_SOURCE

    path, line = RESULT_SOURCE
    if not con.execute(f"select exists (select 1 from {_CALLS})").fetchone()[0]:
        con.execute(f"drop table {_CALLS}")  # no call changed (a session grown by a message, say)
        return
    logs = [r[0] for r in con.execute(f"select distinct {path} from {_CALLS} where {path} is not null "
                                      f"limit {MAX_OUTPUT_LOGS + 1}").fetchall()]
    # the events of the logs the calls came from, by name when they are few: stg_events holds each log's events
    # together, so DuckDB reads the row groups that hold them and no others (a semi-join on the sessions read every
    # row group's outputs: 53 sessions grown by one event in the 1 GB `events` corpus)
    if len(logs) > MAX_OUTPUT_LOGS:
        of_logs = ""
    elif logs:
        of_logs = " and _source_path in (" + ", ".join("'" + _quote(p) + "'" for p in logs) + ")"
    else:  # no call came from a staged output (the calls of a chat without their results): none is read
        of_logs = " and false"
    whole = chars == 0 or chars > RESULT_HEAD_CHARS  # more than the head: the long outputs' whole text
    text = "coalesce(ev.result_content, ev.result_head)" if whole else "ev.result_head"
    columns = "result_content, result_head" if whole else "result_head"
    cut = text if chars == 0 else f"left({text}, {int(chars)})"
    con.execute(f"""
        insert into fct_tool_calls by name
        select calls.* replace (case when calls.{path} is null then calls.result_content else {cut} end
                                as result_content)
        from {_CALLS} as calls
        left join (select _source_path, _source_line, {columns} from stg_events
                   where session_id in {in_affected} and result_chars is not null{of_logs}) as ev
          on ev._source_path = calls.{path} and ev._source_line = calls.{line}""")
    con.execute(f"drop table {_CALLS}")


MAX_OUTPUT_LOGS = 64  # fill_outputs names the logs it reads by name up to this many (more: the session filter alone)


def batch_queries(con: duckdb.DuckDBPyConnection, pulls: list[tuple[str, str, str]], batch: list[str],
                  spans: dict[str, list[tuple[int, int]]]) -> dict[str, str]:
    """The staging queries of one batch of sessions (``_batches``), frame name -> SQL: each of ``pulls``
    (``_pulls``) for the batch's sessions, which go into the temp table ``_star_batch``, and of stg_events the
    rowid ranges that hold their events (``_span``)."""
    in_batch = key_table(con, "_star_batch", batch)
    return {name: f"{select} session_id in {in_batch}{_span(table, batch, spans)}{_ORDER.get(table, ' order by all')}"
            for name, table, select in pulls}


def pull_batch(con: duckdb.DuckDBPyConnection, queries: dict[str, str]) -> dict[str, pl.DataFrame]:
    """A batch's staging frames, as ``transform.star.build_star`` takes them, from its ``batch_queries``."""
    return {name: _pull(con, sql, CATEGORICAL.get(name, ())) for name, sql in queries.items()}


def _pull(con: duckdb.DuckDBPyConnection, sql: str, categorical: tuple[str, ...] = ()) -> pl.DataFrame:
    """A query's rows as a polars frame, streamed in batches (``parts.frame``): DuckDB never holds the whole
    result beside the frame (the pull of one session of 610,000 events peaked ~0.25 GB lower than through
    ``.pl()``)."""
    reader = con.execute(sql).to_arrow_reader(65_536)
    return frame(reader, reader.schema, categorical)


def _batches(con: duckdb.DuckDBPyConnection, affected: list[str],
             in_affected: str) -> tuple[list[list[str]], dict[str, list[tuple[int, int]]]]:
    """The affected sessions in batches of SESSION_BATCH, or fewer whose events add up to BATCH_EVENTS (a
    session with more is a batch of its own), in the order their events are stored, and for each session
    the runs of consecutive rowids its events fill in stg_events (first, last). A batch's events then lie in
    few row groups, and its pull reads those (``_span``): in batches by session id every pull read every row
    group, so the star's reading grew as the square of the corpus. A session's events are one run when its
    log was staged whole in one part; staging loads its parts in parallel (``Spool``), so a log cut between
    two row groups of a part, or read again after it grew, is two runs or more."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for sid, lo, hi in con.execute(f"""
            select session_id, min(rowid), max(rowid) from (
                select session_id, rowid, rowid - row_number() over (partition by session_id order by rowid) as run
                from stg_events where session_id in {in_affected})
            group by session_id, run order by 2""").fetchall():
        spans.setdefault(sid, []).append((lo, hi))
    last = [(1 << 63, 0)]  # sessions without events: last
    ordered = sorted(affected, key=lambda sid: (spans.get(sid, last)[0][0], sid))
    batches: list[list[str]] = []
    events = 0
    for sid in ordered:
        n = _n_events(spans.get(sid, ()))
        if not batches or len(batches[-1]) >= SESSION_BATCH or events + n > BATCH_EVENTS:
            batches.append([])
            events = 0
        batches[-1].append(sid)
        events += n
    return batches, spans


def _n_events(runs: list[tuple[int, int]] | tuple[()]) -> int:
    """How many events a session's rowid runs hold."""
    return sum(hi - lo + 1 for lo, hi in runs)


MAX_SPAN_RANGES = 64  # a pull's rowid filter names at most this many ranges (see _span)


def _span(table: str, batch: list[str], spans: dict[str, list[tuple[int, int]]]) -> str:
    """For stg_events, the rowid ranges that hold exactly the batch's events (its sessions' runs, adjacent
    ones merged), so DuckDB reads only the row groups they lie in and decodes no other session's rows; nothing
    when they are more than MAX_SPAN_RANGES ranges (then the session filter alone: every row group is read).
    A single range over sessions whose events lie far apart (a log that grew: its old rows and this run's)
    read whole outputs of rows that are not pulled (1% of the 1 GB `outputs` logs grown: the pull's peak RSS
    0.77 -> 1.09 GB)."""
    if table != "stg_events":
        return ""
    runs = sorted(r for sid in batch for r in spans.get(sid, ()))
    if not runs:
        return ""
    merged = [list(runs[0])]
    for lo, hi in runs[1:]:
        if lo == merged[-1][1] + 1:
            merged[-1][1] = hi
        else:
            merged.append([lo, hi])
    if len(merged) > MAX_SPAN_RANGES:
        return ""
    return " and (" + " or ".join(f"rowid between {lo} and {hi}" for lo, hi in merged) + ")"


_CALLS = "_star_tool_calls"  # this run's tool calls before their outputs are filled in (a temp table)


def _store(spool: Spool, star: dict, targets: dict[str, str], parts: dict[str, list[str]] | None = None) -> None:
    """A batch's star rows into the spool - frames built here, or Parquet parts a worker wrote - for the tables
    ``targets`` names: its tool calls into the temp table ``_CALLS``, where ``fill_outputs`` finds them. With
    ``parts``, a worker's parts are listed there instead (``_store_differences`` reads them where they are)."""
    for table in SESSION_TABLES:
        rows, target = star[table], targets[table]
        if isinstance(rows, tuple) and parts is not None:
            parts[table].append(rows[0])
        elif isinstance(rows, tuple):  # (Parquet part, rows), from a worker
            spool.add_part(target, *rows)
        else:
            spool.add(target, rows.to_arrow())


# With this many events to build in all, batches are built on worker processes (at most two, one batch
# each, each batch's staging rows exported to them as Parquet): the main process never holds polars
# frames of staging rows beside DuckDB, and a worker's memory is freed when its batch is built. One
# session of 200,000 tool calls (810,000 records): peak RSS 1.13 GB in one process; with a worker, the
# worker 0.92 GB and the main process 0.67 GB.
WORKERS_MIN_EVENTS = 200_000


class _Builders:
    """Where the batches' star rows are built: on a thread here (a batch is pulled while the one before is
    built: two batches of staging rows in memory at most, one when a batch is large), or, with
    ``on_workers``, on worker processes (``builder.build_batch``), to which each batch's staging rows
    are exported as Parquet parts (streamed by DuckDB). ``submit`` returns what has been built since."""

    def __init__(self, con: duckdb.DuckDBPyConnection, root_repos: dict[str, str] | None, present: pl.DataFrame,
                 folder: Path, on_workers: bool, n_batches: int = 1):
        self.con, self.root_repos, self.present, self.folder = con, root_repos or {}, present, folder
        self.pending: list = []
        if on_workers:
            import multiprocessing

            from ..processes import lean_worker_init, pool

            self.workers = min(os.cpu_count() or 1, 2)
            self.pool = pool(self.workers, multiprocessing.get_context("spawn"), lean_worker_init)
            for _ in range(min(self.workers, n_batches)):  # a worker each, importing while a batch is exported
                self.pool.submit(warm)
            folder.mkdir(parents=True, exist_ok=True)
            self.present_part = str(folder / "present.parquet")
            write_part(present.to_arrow(), self.present_part)
        else:
            self.workers, self.pool = 1, ThreadPoolExecutor(max_workers=1, thread_name_prefix="star")

    def submit(self, k: int, queries: dict[str, str], large: bool) -> list:
        """Build batch ``k`` (its staging rows: the ``queries``); returns the batches built meanwhile."""
        from ..transform.star import build_star

        done = self.drain() if large and not self.on_workers else []  # here, a large batch is built alone
        if self.on_workers:
            batch = self.folder / f"batch-{k:06d}"
            batch.mkdir()
            parts = {}
            for name, sql in queries.items():
                parts[name] = str(batch / f"{name}.parquet")
                self.con.execute(f"copy ({sql}) to '{_quote(parts[name])}' (format parquet, compression uncompressed)")
            job = (build_batch, parts, self.root_repos, self.present_part, str(batch))
        else:
            job = (build_star, pull_batch(self.con, queries), self.root_repos, self.present)
        if len(self.pending) >= self.workers:  # the batch before was built while this one was pulled
            done.append(self.pending.pop(0).result())
        self.pending.append(self.pool.submit(*job))
        del job
        if large and not self.on_workers:
            done += self.drain()
        return done

    @property
    def on_workers(self) -> bool:
        return not isinstance(self.pool, ThreadPoolExecutor)

    def drain(self) -> list:
        done = [f.result() for f in self.pending]
        self.pending = []
        return done

    def __enter__(self) -> _Builders:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_exc: object) -> None:
        if kind is None or not self.on_workers:
            self.pool.shutdown()
        else:  # an error, or Ctrl-C: the workers are stopped, not waited for
            from ..processes import stop_pool

            stop_pool(self.pool)


def _quote(path: str) -> str:
    return path.replace("'", "''")


def _rebuild_memories_of_no_session(con: duckdb.DuckDBPyConnection) -> None:
    """Memories that belong to no session (repo and user memories) are in no session batch."""
    from ..transform.star import memories, without_copies

    docs = con.sql("select * from stg_documents where session_id is null order by all").pl()  # as in a batch
    docs = without_copies(docs, con.sql("select source_path from _source_files where is_present").pl()["source_path"])
    con.execute("delete from fct_memories where session_id is null")
    if not docs.is_empty():
        insert(con, "fct_memories", memories(docs))
