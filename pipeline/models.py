"""A tiny runner for the SQL models in ``sql/``: macros first, then every model in the order
``schema.MODELS`` declares, each as ``create or replace table <name> as <select>``.

A model file is one bare SELECT whose file name is its table name. Its result is cast to the
declared columns and types, so the warehouse always matches the declaration (a model that
drops or renames a column fails loudly here instead of surprising a BI tool later).
"""

from __future__ import annotations

import logging
from pathlib import Path

from .schema import MODELS
from .warehouse import comment

log = logging.getLogger(__name__)

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
MACROS = ["tokenize", "search"]  # search() calls tokenize()


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


def run_models(con, sql_dir: Path = SQL_DIR) -> list[str]:
    """(Re)build every model table; returns their names in run order."""
    create_macros(con, sql_dir)
    built = []
    for table in MODELS:
        cols = ", ".join(f'cast("{c.name}" as {c.type}) as "{c.name}"' for c in table.columns)
        try:
            sql = model_sql(table.name, sql_dir)
            con.execute(f'create or replace table "{table.name}" as select {cols} from ({sql})')
        except ModelError:
            raise
        except Exception as exc:  # duckdb's error types vary; all of them mean this model is wrong
            raise ModelError(f"model {table.name} failed: {str(exc).splitlines()[0]}") from exc
        comment(con, table)
        built.append(table.name)
    log.info("%d models built", len(built))
    return built
