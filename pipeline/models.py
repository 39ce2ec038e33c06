"""A tiny runner for the SQL models in ``sql/``: macros first, then every model in the order
``schema.MODELS`` declares, each as ``create or replace table <name> as <select>``.

A model file is one bare SELECT whose file name is its table name. Its result is cast to the
declared columns and types, so the warehouse always matches the declaration (a model that
drops or renames a column fails loudly here instead of surprising a BI tool later).
``sql/after/<name>.sql``, when it exists, is one statement run right after model ``<name>``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb

from .schema import MODELS
from .warehouse import comment

log = logging.getLogger(__name__)

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
MACROS = ["tokenize", "search", "usage_rollup"]  # search() calls tokenize()
# Models whose rows belong to one session each: an incremental ingest rebuilds only the rows of the
# sessions it changed (their SQL reads the temporary table _model_scope); the others are rebuilt whole.
PER_SESSION = {"int_search_docs", "int_search_terms", "int_topic_terms", "int_mention_words"}


def per_session_models_filled(con) -> bool:
    """Whether every per-session model has rows. One without is new to this warehouse (a version
    added it) or was emptied: then an ingest builds the models whole, not for the changed sessions."""
    return all(con.execute(f'select exists (select 1 from "{name}")').fetchall()[0][0] for name in PER_SESSION)


class ModelError(Exception):
    """A model file is missing or does not produce its declared columns."""


def model_sql(name: str, sql_dir: Path = SQL_DIR) -> str:
    path = sql_dir / f"{name}.sql"
    if not path.is_file():
        raise ModelError(f"model {name}: no file {path}")
    return path.read_text(encoding="utf-8").strip().rstrip(";")


def create_macros(con, sql_dir: Path = SQL_DIR) -> None:
    for name in MACROS:
        con.execute((sql_dir / "macros" / f"{name}.sql").read_text(encoding="utf-8").strip().rstrip(";"))


def run_models(con, sessions: list[str] | None = None, sql_dir: Path = SQL_DIR) -> list[str]:
    """(Re)build every model table; ``sessions`` limits per-session models to those sessions'
    rows (None: everything). Returns the names in run order."""
    create_macros(con, sql_dir)
    incremental = sessions is not None
    if incremental:
        con.execute("create or replace temp table _model_scope as select unnest(?::varchar[]) as session_id",
                    [sessions])
    else:
        con.execute("create or replace temp table _model_scope as select session_id from dim_sessions")
    built = []
    for table in MODELS:
        cols = ", ".join(f'cast("{c.name}" as {c.type}) as "{c.name}"' for c in table.columns)
        try:
            sql = model_sql(table.name, sql_dir)
            select = f"select {cols} from ({sql})"
            if incremental and table.name in PER_SESSION:
                con.execute(f'delete from "{table.name}" where session_id is null '
                            f"or session_id in (select session_id from _model_scope)")
                con.execute(f'insert into "{table.name}" {select}')
            else:
                con.execute(f'create or replace table "{table.name}" as {select}')
                comment(con, table)
            after = sql_dir / "after" / f"{table.name}.sql"
            if after.is_file():  # a statement that completes an earlier model from this one
                con.execute(after.read_text(encoding="utf-8").strip().rstrip(";"))
        except ModelError:
            raise
        except duckdb.InterruptException as exc:  # Ctrl-C during a model: an interruption, not a broken model
            raise KeyboardInterrupt from exc
        except Exception as exc:  # duckdb's error types vary; all of them mean this model is wrong
            raise ModelError(f"model {table.name} failed: {str(exc).splitlines()[0]}") from exc
        built.append(table.name)
    con.execute("drop table _model_scope")
    log.info("%d models built (%s)", len(built), "incremental" if incremental else "full")
    return built
