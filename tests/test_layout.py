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


def _imported_modules(module: str, path, modules: dict) -> set[str]:
    """The pipeline modules ``module`` (at ``path``) imports anywhere in it: at the top, in a function, for types."""
    import ast

    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rsplit(".", 1)[0]
            named = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            found.add(named)
            found.update(f"{named}.{a.name}" for a in node.names)  # `from . import usage`: a module
    return {m for m in found if m in modules and m != module}


def test_no_module_of_the_pipeline_imports_one_that_imports_it_back():
    # one owner per step (issue 29): no import circle, whether the import is at the top or deferred into a function
    import graphlib

    modules = {}
    for path in (REPO / "pipeline").rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {m: _imported_modules(m, p, modules) for m, p in modules.items()}
    assert len(graph) > 50 and graph["pipeline.load.star"] >= {"pipeline.transform.star", "pipeline.warehouse"}
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        raise AssertionError(f"an import circle through {', '.join(sorted(set(e.args[1])))}") from None
    assert order.index("pipeline.transform.star") < order.index("pipeline.load.star")
