"""The code's layout promises: one writer per table, models as pure SELECTs in layer folders."""

import re

import duckdb

from pipeline.docs import writers
from pipeline.models import load_models
from pipeline.schema import ALL_TABLES, VIEWS

from .conftest import REPO


def test_every_table_has_exactly_one_writer():
    written = writers()
    assert set(written) == {t.name for t in ALL_TABLES + VIEWS}
    sql_files = [p.stem for p in REPO.glob("sql/*/*.sql") if p.parent.name in ("intermediate", "marts", "reports")]
    assert len(sql_files) == len(set(sql_files))  # no model written by two files


def test_models_are_in_the_folder_of_their_layer_and_built_after_what_they_reference():
    models = load_models()
    folder = {"int_": "intermediate", "dim_": "marts", "report_": "reports"}
    seen = set()
    for m in models:
        if m.layer != "macros":
            assert m.layer == next(f for p, f in folder.items() if m.name.startswith(p)), m.name
        assert m.refs <= seen, (m.name, m.refs - seen)
        seen.add(m.name)


def test_every_model_imports_what_it_reads_at_the_top_and_runs_as_it_is_in_a_bare_duckdb(sample_home, tmp_path):
    """Each table a model reads appears once, in an import CTE (``x as (select * from <table>)``, or ``x as not
    materialized (...)``) at the top; and the file runs as written on a warehouse: no temporary tables, no
    parameters."""
    from pipeline.ingest import ingest

    tables = {t.name for t in ALL_TABLES} | {"usage_rollup"}
    wh = tmp_path / "w.duckdb"
    ingest(wh, [sample_home])
    con = duckdb.connect(str(wh), read_only=True)
    for m in load_models():
        if m.layer == "macros":
            continue
        words = re.findall(r"[a-z_]+", re.sub(r"--[^\n]*|'[^']*'", "", m.sql))
        read = {w for w in words if w in tables and w != m.name}
        for table in read:
            assert words.count(table) == 1, f"{m.name} names {table} more than once"
            # (a comment may follow the parenthesis: `-- noqa: ST03` where a macro reads the CTE by name)
            assert re.search(rf"^\w+ as (?:not materialized )?\([ \t]*(?:--[^\n]*)?\n    select \* from {table}\b",
                             m.sql, re.M), \
                f"{m.name}: {table}"
        n = con.execute(f"select count(*) from ({m.sql})").fetchone()[0]
        assert n == con.execute(f'select count(*) from "{m.name}"').fetchone()[0], m.name
    con.close()
