"""A tiny runner for the SQL models under ``sql/``.

A model is one file holding one bare SELECT, named after its table, in the folder of its layer:
``sql/intermediate/`` (``int_*``), ``sql/marts/`` (``dim_*`` built from the star), ``sql/reports/``
(``report_*``). Macros (``sql/macros/``) are created first. The build order comes from the
references: a model runs after every model and macro it names (ties: layer, then name).

Each model's result is cast to the columns and types ``schema.py`` declares, so the warehouse always
matches the declaration (a model that drops or renames a column fails loudly here).

A header line configures a model, dbt style:
- ``-- incremental: session_id``: its rows belong to one session each (or to none). An ingest that
  changed some sessions rebuilds only their rows (and the rows of no session): the runner deletes
  them, and inserts the model's SELECT with each import CTE (``x as (select * from <table>)`` at
  the top) of a table that has the column narrowed to those sessions - dbt's ``is_incremental()``,
  done by the runner, so the SQL itself stays a pure SELECT over everything that runs as it is in
  a bare DuckDB shell.
- ``-- incremental: project_id``: its rows belong to one project each, and are computed from that
  project's rows alone. An ingest rebuilds the rows of the projects the changed sessions belong to
  now (``dim_sessions``) and belonged to before (``before``, read by the caller with ``scopes_of`` before the
  star changed: a session can move to another project), the same way. An import CTE of a table without
  ``project_id`` but with ``session_id`` is narrowed to the sessions of those projects (a project's
  rows are its sessions' rows).
- ``-- incremental: user_name``: the same per person (``dim_sessions.user_name``, who pushed the session to
  team mode's lake; ``(this machine)`` where none did).
- ``-- incremental: project_month``: its rows belong to one project and month each (``project_id`` and ``month``,
  the month in UTC of the sessions' start) and are computed from the sessions of that project that started in that
  month alone. An ingest rebuilds the rows of the project months its changed sessions belong to now and before: a
  session grown today changes its project's rows of the month it started in, not those of every month before.
- ``-- incremental: doc_id``: its rows belong to one search document each (``int_search_docs``) and are computed
  from that document's row alone. An ingest rebuilds the rows of the documents whose ``int_search_docs`` row it
  changed (added, removed or different in any column): a session grown by one turn retokenizes that turn's texts,
  not the session's thousands.

A model that reads no table (a constant list) is built in a whole build alone. An ingest also tells the runner which
sessions' rows of each star table changed (``run_models``' ``moved``): a model is then rebuilt for the sessions whose
rows of what it reads changed, and left as it was when there are none.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from .schema import MODELS, TABLES, Table
from .warehouse import comment, key_table, meta, set_meta, sql_literal

log = logging.getLogger(__name__)

LAYERS = ("intermediate", "marts", "reports")  # folders of sql/ that hold models, in layer order
_CONFIG = re.compile(r"^--\s*(incremental):\s*(\S+)\s*$", re.MULTILINE)
_COMMENT = re.compile(r"--[^\n]*")
_STRING = re.compile(r"'(?:[^']|'')*'")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# an import CTE: ``x as (select * from t)``, or ``x as not materialized (...)`` where the CTE is read more than once
# and DuckDB would copy the table before reading it (it materializes such CTEs)
# (a comment may follow the parenthesis: ``-- noqa: ST03`` where a macro reads the CTE by name, which the linter misses)
_IMPORT = re.compile(r"^(\w+) as ((?:not )?materialized )?\([ \t]*(?:--[^\n]*)?\s*select \* from (\w+)\s*\)",
                     re.MULTILINE)
_TEMP_MACRO = re.compile(r"\bcreate\s+or\s+replace\s+macro\b", re.IGNORECASE)
SCOPES = {"session_id": "_scope", "project_id": "_scope_projects", "user_name": "_scope_users",
          "project_month": "_scope_project_months", "doc_id": "_scope_docs"}  # a key: its table
# a model incremental by doc_id is rebuilt for the documents whose row of this model the run changed (DOCS is
# incremental by session_id and built before it: the rows of the scope's sessions are compared before and after)
DOCS = "int_search_docs"
THIS_MACHINE = "(this machine)"  # the person of the sessions nobody pushed (as the report_people* models say it)
# a key other than session_id: a session's value of it, from dim_sessions
OF_SESSION = {"project_id": "project_id", "user_name": f"coalesce(user_name, '{THIS_MACHINE}')",
              "project_month": "project_id || '/' || strftime(timezone('UTC', started_at), '%Y-%m')"}
# a key that is no column of its models' rows: the SQL that makes it of a row's columns (as OF_SESSION of a session's)
OF_ROW = {"project_month": "project_id || '/' || strftime(month, '%Y-%m')"}
# a key's scope: the table of the sessions it holds
SCOPE_SESSIONS = {"session_id": "_scope", "doc_id": "_scope", **{key: f"{SCOPES[key]}_sessions" for key in OF_SESSION}}


def sql_dir() -> Path:
    """The repository's ``sql/`` folder (resolved when called, so a test can point elsewhere)."""
    return Path(__file__).resolve().parent.parent / "sql"


class ModelError(Exception):
    """A model file is missing, references in a cycle, or does not produce its declared columns."""


@dataclass(frozen=True)
class Model:
    name: str
    layer: str  # intermediate | marts | reports | macros
    path: Path
    sql: str
    refs: frozenset[str]  # the models and macros it names
    incremental: str | None = None  # the column whose value scopes an incremental build (session_id)
    reads: frozenset[str] = frozenset()  # the tables (star and models) it names

    @property
    def table(self) -> Table | None:
        return TABLES.get(self.name)


def _refs(sql: str, names: set[str], own: str) -> frozenset[str]:
    text = _STRING.sub("''", _COMMENT.sub("", sql))
    return frozenset(w for w in _WORD.findall(text) if w in names and w != own)


def load_models(root: Path | None = None) -> list[Model]:
    """Every macro and model under ``root`` (default: ``sql/``), in build order."""
    root = root or sql_dir()
    files = [("macros", p) for p in sorted((root / "macros").glob("*.sql"))]
    files += [(layer, p) for layer in LAYERS for p in sorted((root / layer).glob("*.sql"))]
    names = {p.stem for _layer, p in files}
    declared = {t.name for t in MODELS}
    found = {p.stem for layer, p in files if layer != "macros"}
    if declared - found:
        raise ModelError(f"models declared in schema.py without a file under {root}: {sorted(declared - found)}")
    if found - declared:
        raise ModelError(f"model files not declared in schema.py: {sorted(found - declared)}")
    models = []
    for layer, path in files:
        sql = path.read_text(encoding="utf-8").strip().rstrip(";")
        config = dict(_CONFIG.findall(sql))
        if config.get("incremental", "session_id") not in SCOPES:
            raise ModelError(f"{path}: incremental by {config['incremental']}: a model can be incremental by "
                             f"{' or '.join(SCOPES)}")
        models.append(Model(path.stem, layer, path, sql, _refs(sql, names, path.stem), config.get("incremental"),
                            _refs(sql, set(TABLES), path.stem)))
    return build_order(models)


def build_order(models: list[Model]) -> list[Model]:
    """Each model after what it references; among those ready, macros first, then by layer and name."""
    rank = {layer: i for i, layer in enumerate(("macros", *LAYERS))}
    by_name = {m.name: m for m in models}
    waiting = {m.name: set(m.refs) for m in models}
    done: list[Model] = []
    while waiting:
        ready = sorted((by_name[n] for n, deps in waiting.items() if not deps),
                       key=lambda m: (rank[m.layer], m.name))
        if not ready:
            raise ModelError(f"models reference each other in a cycle: {sorted(waiting)}")
        nxt = ready[0]
        done.append(nxt)
        del waiting[nxt.name]
        for deps in waiting.values():
            deps.discard(nxt.name)
    return done


def models_digest(root: Path | None = None) -> str:
    """What the model tables are made by: the SQL of every macro and model, and the declared columns."""
    h = hashlib.sha256(repr([(t.name, [(c.name, c.type) for c in t.columns]) for t in TABLES.values()]).encode())
    for model in load_models(root):
        h.update(model.sql.encode())
    return h.hexdigest()[:16]


def models_current(con: duckdb.DuckDBPyConnection, root: Path | None = None) -> bool:
    """Whether the models were last built whole by these models (the digest a whole build records in ``_meta``).
    If not - a version added or changed a model, or the warehouse predates the record - an ingest builds them
    whole, not for the changed sessions. (An incremental model may be empty: a home whose sessions never changed
    two files together has no file coupling.)"""
    return meta(con, MODELS_META) == models_digest(root)


MODELS_META = "models_digest"  # the _meta key of the models' digest at their last whole build


def scopes_of(con: duckdb.DuckDBPyConnection, sessions: list[str] | set[str]) -> dict[str, list[str]]:
    """The projects, people and project months ``sessions`` belong to in ``dim_sessions`` (``{"project_id": [...],
    "user_name": [...], ...}``; read before their star rows change: where they belonged, which ``run_models`` needs
    beside where they belong now)."""
    found = session_keys(con, sessions).values()
    return {key: sorted({values[i] for values in found} - {None}) for i, key in enumerate(OF_SESSION)}


def session_keys(con: duckdb.DuckDBPyConnection, sessions: list[str] | set[str]) -> dict[str, tuple]:
    """Each of ``sessions``' keys in ``dim_sessions`` (its project, person and project month: ``OF_SESSION``'s
    values in order); a session not there is left out. Read before and after the star changes, they tell the
    sessions that moved (``run_models``' ``relocated``)."""
    sessions = sorted(s for s in sessions if s)
    if not sessions:
        return {}
    keys = key_table(con, "_of_sessions", sessions)
    found = {r[0]: tuple(r[1:]) for r in con.execute(
        f"select session_id, {', '.join(OF_SESSION.values())} from dim_sessions where session_id in {keys}"
    ).fetchall()}
    con.execute('drop table "_of_sessions"')
    return found


def run_models(con: duckdb.DuckDBPyConnection, sessions: list[str] | None = None,
               root: Path | None = None, before: dict[str, list[str]] | None = None,
               temp_macros: bool = False, moved: dict[str, set[str | None]] | None = None,
               relocated: dict[str, set[str]] | None = None) -> list[str]:
    """(Re)build every macro and model in the connection's current schema; ``sessions`` limits the incremental
    models to the rows of those sessions, and of the projects and people they belong to now and ``before``
    (``scopes_of`` the sessions before the change) - None: everything. ``temp_macros``: the macros made in this
    connection alone (a lake's models: its transaction writes the lake and nothing else). Returns the names of the
    models (not macros) in build order.

    ``moved`` (with ``sessions``): of each star table, the sessions whose rows of it changed (None among them: its
    rows of no session). Then a model is rebuilt only for the sessions whose rows of what it reads moved - for
    their rows, projects, people, project months - and not at all when none did; a model read by others records
    which sessions' rows of it its build changed (compared before and after), and the others count every session
    it was rebuilt for. ``relocated``: by key (``OF_SESSION``), the sessions whose value of it changed (or that
    came or went): a model kept by that key is rebuilt for them whatever it reads, and ``before`` needs to name
    only their keys. None: every model is rebuilt for all ``sessions``."""
    seconds: dict[str, float] = {}  # of each model (not macro) built, in build order
    keys: dict[str, str | None] = {}  # each scope table's keys as SQL (None: its models built whole)
    made: list[str] = []  # the scope tables made, dropped at the end
    if sessions is not None:
        keys = _scopes(con, sessions, before, "", made)
        con.execute(f'create or replace temp table "{SCOPES["doc_id"]}" (key varchar)')  # filled after DOCS
        made.append(SCOPES["doc_id"])
        keys[SCOPES["doc_id"]] = _keys(con, SCOPES["doc_id"])
    tables = {r[0] for r in con.execute("select table_name from duckdb_tables() where schema_name = current_schema() "
                                        "and database_name = current_database()").fetchall()}
    docs_before = sessions is not None and DOCS in tables
    if docs_before:
        made.append(_rows_of_scope(con, DOCS, keys))
    elif sessions is not None:
        keys[SCOPES["doc_id"]] = None  # no documents to compare with: the models by document are built whole
    models = load_models(root)
    # what moved: the star tables' sessions given, each model's as it is built (None: every model built for all)
    changed_in = None if moved is None or sessions is None else {t: set(v) for t, v in moved.items()}
    everyone, relocated = set(sessions or ()) | {None}, relocated or {}
    # the per-session models others read, compared before and after their build - for a scope of few sessions:
    # comparing every session's rows costs more than building them (the 1 GB `events` corpus: 1.2 s for four)
    compared = {m.name for m in models if m.incremental == "session_id" and m.name != DOCS
                and any(m.name in other.reads for other in models)} if len(everyone) <= INLINE_KEYS else set()
    skipped: list[str] = []
    narrower: dict[frozenset[str], dict[str, str | None]] = {}  # the scopes made for some of the sessions
    for model in models:
        started = time.perf_counter()
        use, whose = keys, everyone  # the scopes this model is built for, and the sessions its build may change
        if changed_in is not None and model.layer != "macros" and model.name in tables:
            inputs = set(relocated.get(model.incremental, ())).union(
                *(changed_in.get(r, ()) for r in model.reads)) & everyone
            if not inputs:  # nothing it reads changed (or it reads nothing: a constant): its rows stay as they are
                changed_in[model.name] = set()
                if model.reads:
                    skipped.append(model.name)
                    continue
            whose = inputs | {None}
            # for some of the sessions: scopes of their own, when they leave out more than half of them (making
            # the scope tables costs as much as rebuilding a few more sessions' rows)
            subset = frozenset(s for s in inputs if s is not None)
            if model.incremental not in (None, "doc_id") and 2 * len(subset) <= len(sessions):
                if subset not in narrower:
                    narrower[subset] = {**_scopes(con, sorted(subset), before, f"_{len(made)}", made),
                                        SCOPES["doc_id"]: keys[SCOPES["doc_id"]]}
                use = narrower[subset]
        try:
            rows_before = _rows_of_scope(con, model.name, use) if changed_in is not None \
                and model.name in compared and model.name in tables else None
            _build(con, model, use, model.name in tables, temp_macros)
            if changed_in is not None and model.layer != "macros" and model.reads:
                changed_in[model.name] = whose if rows_before is None else _changed_sessions(
                    con, model, use, rows_before)
            if model.name == DOCS and docs_before:
                keys[SCOPES["doc_id"]], docs_of = _changed_docs(con, keys)
                if changed_in is not None:
                    changed_in[DOCS] = docs_of
        except ModelError:
            raise
        except duckdb.InterruptException as exc:  # Ctrl-C during a model: an interruption, not a broken model
            raise KeyboardInterrupt from exc
        except Exception as exc:  # duckdb's error types vary; all of them mean this model is wrong
            raise ModelError(f"model {model.name} failed: {str(exc).splitlines()[0]}") from exc
        if model.layer != "macros":
            seconds[model.name] = time.perf_counter() - started
    if sessions is not None:
        for table in made:
            con.execute(f'drop table if exists "{table}"')
    elif "_meta" in tables:
        set_meta(con, MODELS_META, models_digest(root))
    slowest = sorted(seconds.items(), key=lambda kv: -kv[1])[:SLOWEST]
    log.info("%d models built (%s) in %.2fs%s; slowest: %s", len(seconds),
             "incremental" if sessions is not None else "full", sum(seconds.values()),
             f", {len(skipped)} left as they were (nothing they read changed)" if skipped else "",
             ", ".join(f"{name} {secs:.2f}s" for name, secs in slowest))
    return list(seconds)


def _scopes(con: duckdb.DuckDBPyConnection, sessions: list[str], before: dict[str, list[str]] | None, suffix: str,
            made: list[str]) -> dict[str, str | None]:
    """The scope tables of an incremental build for ``sessions`` (their names with ``suffix``, added to ``made``):
    the sessions, and for each key of a session (``OF_SESSION``) the keys they have now and ``before``, and the
    sessions that have those keys. Returns each scope as the SQL that lists its keys (``_keys``), by the tables'
    names without the suffix; None where a key's scope holds half the sessions or more (built whole)."""
    key_table(con, "_scope" + suffix, sessions)
    made.append("_scope" + suffix)
    now = scopes_of(con, sessions)
    for key, of in OF_SESSION.items():
        key_table(con, SCOPES[key] + suffix, sorted(set((before or {}).get(key, ())) | set(now[key])))
        con.execute(f'create or replace temp table "{SCOPE_SESSIONS[key]}{suffix}" as select session_id as key '
                    f'from dim_sessions where {of} in (select key from "{SCOPES[key]}{suffix}") or {of} is null')
        made += [SCOPES[key] + suffix, SCOPE_SESSIONS[key] + suffix]
    keys = {table: _keys(con, table + suffix) for table in {*SCOPES.values(), *SCOPE_SESSIONS.values()}
            if table != SCOPES["doc_id"]}
    n_sessions = con.execute("select count(*) from dim_sessions").fetchone()[0]
    for key in OF_SESSION:  # a scope of most sessions (a home's few projects, its one person): built whole
        if WHOLE_SHARE * n_sessions <= con.execute(f'select count(*) from "{SCOPE_SESSIONS[key]}{suffix}"'
                                                   ).fetchone()[0]:
            keys[SCOPES[key]] = None
    return keys


def _scoped_rows(name: str, keys: dict[str, str | None]) -> str:
    """The rows of per-session model ``name`` that an incremental build for ``keys`` replaces: those of the scope's
    sessions and of no session."""
    scope = keys[SCOPES["session_id"]]
    return (f'select * from "{name}" where session_id in {scope} '
            f'union all select * from "{name}" where session_id is null')


def _rows_of_scope(con: duckdb.DuckDBPyConnection, name: str, keys: dict[str, str | None]) -> str:
    """Keep the rows of per-session model ``name`` that its build for ``keys`` will replace, in a temp table (its
    name returned), to tell afterwards what the build changed (``_changed_sessions``, ``_changed_docs``)."""
    table = f"_before_{name}"
    con.execute(f'create or replace temp table "{table}" as {_scoped_rows(name, keys)}')
    return table


def _changed_sessions(con: duckdb.DuckDBPyConnection, model: Model, keys: dict[str, str | None],
                      before: str) -> set[str | None]:
    """The sessions (None: rows of no session) whose rows of a per-session model differ from those kept in table
    ``before`` (added, removed or changed in any column)."""
    found = {r[0] for r in con.execute(
        f"select distinct session_id from ({_differing(before, _scoped_rows(model.name, keys))})").fetchall()}
    con.execute(f'drop table "{before}"')
    return found


def _differing(before: str, now: str) -> str:
    """The rows that are in table ``before`` and not in query ``now`` or the other way round, as often as they
    differ (EXCEPT ALL both ways)."""
    return f'(select * from "{before}" except all ({now})) union all (({now}) except all select * from "{before}")'


def _changed_docs(con: duckdb.DuckDBPyConnection, keys: dict[str, str | None]) -> tuple[str, set[str | None]]:
    """The documents whose DOCS row the build added, removed or changed (against the rows ``_rows_of_scope`` kept),
    into the doc scope table: its keys, and the sessions of those documents (None: a document of no session)."""
    con.execute('create or replace temp table "_docs_changed" as select doc_id, session_id from '
                f'({_differing(f"_before_{DOCS}", _scoped_rows(DOCS, keys))})')
    con.execute(f'insert into "{SCOPES["doc_id"]}" select distinct doc_id from "_docs_changed"')
    sessions = {r[0] for r in con.execute('select distinct session_id from "_docs_changed"').fetchall()}
    con.execute('drop table "_docs_changed"')
    return _keys(con, SCOPES["doc_id"]), sessions


SLOWEST = 5  # models named, with their seconds, in the log line of a build (`-v`)
INLINE_KEYS = 256  # a scope of at most this many keys is written into the SQL as a list
# a model kept per project or person is built whole when the scope's projects or people hold this share of the
# sessions: narrowing each table to most of its rows costs more than reading them all
WHOLE_SHARE = 0.5


def _keys(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """The SQL that lists the keys of scope ``table``: its keys as literals when there are few, else a subquery
    of the table. DuckDB pushes a list of literals into the scan (files and row groups outside it are skipped),
    not a subquery: a lake's view of a star table hid the subquery from its scan, so one session's search
    documents read all 228,000 prompts of 1,000 machines (0.47-0.63 s; listed, 0.15-0.23 s)."""
    found = con.execute(f'select key from "{table}" where key is not null order by key '
                        f'limit {INLINE_KEYS + 1}').fetchall()
    if not found or len(found) > INLINE_KEYS or any(not k.isprintable() for (k,) in found):
        return f'(select key from "{table}")'
    return "(" + ", ".join(sql_literal(k) for (k,) in found) + ")"


def narrowed(sql: str, key: str, scope: str, sessions: str | None = None) -> str:
    """``sql`` with each import CTE of a table that has column ``key`` narrowed to the rows whose ``key`` is in
    ``scope`` (SQL that lists the keys: ``_keys``) or is NULL: two scans, ``in`` and ``is null`` (one scan of both,
    ``or``, cannot use the semi join: a delete of one session's rows from 8.8 M search terms 0.21 -> 0.02 s). With
    ``sessions`` (SQL that lists the sessions in ``scope``), a table without ``key`` but with ``session_id`` is
    narrowed to those sessions."""
    def narrow(m: re.Match) -> str:
        cte, materialized, table = m.group(1), m.group(2) or "", m.group(3)
        columns = {c.name for c in TABLES[table].columns} if table in TABLES else set()
        column, keys = (key, scope) if key in columns else ("session_id", sessions) if "session_id" in columns else (
            None, None)
        if column and keys:
            return (f"{cte} as {materialized}(\n    select * from {table} where \"{column}\" in {keys}"
                    f"\n    union all select * from {table} where \"{column}\" is null\n)")
        return m.group(0)
    return _IMPORT.sub(narrow, sql)


def _build(con: duckdb.DuckDBPyConnection, model: Model, scopes: dict[str, str | None], exists: bool = True,
           temp_macros: bool = False) -> None:
    """Build ``model``: whole, or (``scopes``: each scope table's keys, see ``_keys``; None: a scope built whole)
    for the scope's keys."""
    if model.layer == "macros":
        con.execute(_TEMP_MACRO.sub("create or replace temp macro", model.sql) if temp_macros else model.sql)
        return
    table = model.table
    cols = table.cast_sql()
    select = f"select {cols} from ({model.sql})"
    if scopes and exists and not model.reads:  # a constant: as the last whole build left it
        return
    if scopes and model.incremental and scopes[SCOPES[model.incremental]] is not None:
        key = model.incremental
        of_row = OF_ROW.get(key, f'"{key}"')
        scope = scopes[SCOPES[key]]  # the scope's keys (run_models filled its table)
        in_scope = f'{of_row} is null or {of_row} in {scope}'
        scoped = f"select {cols} from ({narrowed(model.sql, key, scope, scopes[SCOPE_SESSIONS[key]])})"
        con.execute(f'delete from "{model.name}" where {of_row} in {scope}')
        if key not in table.key:  # a key column holds no NULL (the checks): no row of no session or project
            con.execute(f'delete from "{model.name}" where {of_row} is null')
        con.execute(f'insert into "{model.name}" select * from ({scoped}) where {in_scope}')
    else:  # the declared table, with its comments, emptied and filled (re-commenting every column of every
        # model after a `create or replace` took 0.15 s of a small home's 0.6 s of models)
        if not exists:
            con.execute(table.create_sql())
            comment(con, table)
        con.execute(f'delete from "{model.name}"')
        con.execute(f'insert into "{model.name}" {select}')
