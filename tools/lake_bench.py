"""``make bench-lake``: team mode at organisation scale - N machines in one DuckLake, and what each
command costs as N grows.

    python -m tools.lake_bench [--machines 50,200,1000] [--catalog postgres|sqlite|duckdb] [--size-mb 20]
                               [--concurrent 16] [--report-max 50] [--dir data/bench/lake]

One machine's history (``tools.bench``'s ``events`` shape, --size-mb of logs: ~5 sessions per MB) is
ingested and pushed for real; the lake then grows to each N by copying that machine's rows in SQL under
new machine ids and session ids, each text prefixed with its machine's id (``replicate``: pushing 1,000
machines one by one would take the bench ~15 minutes and measure the same rows), and is maintained
(``lake-maintain``) as a team's lake is. At
each N, each command in its own process (wall time, peak RSS from ``wait4``):
  refresh   ``lake-refresh`` after the lake grew (the models built whole in the lake: the grown rows bypassed push);
  push      a new machine's push of one session, with the refresh of the lake's models it causes;
  query     ``query --lake`` of a count over dim_sessions, and of report_usage_monthly (a model stored in the lake);
  usage     ``usage --lake --by month``;
  report    ``report --lake`` (read where the lake is; only up to --report-max machines), then again after
            another machine pushed one session (its push refreshed the models from what changed).
Then --concurrent machines push one session each at once: each push's exit and its conflict retries.
PostgreSQL (the catalog a team uses) is started by the bench when ``initdb`` is installed (tests/pg.py).
Results: printed, and as the markdown table the README quotes, ``DIR/results.md`` (``results.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from pipeline import lake
from tools.bench import generated, run

REPO = Path(__file__).resolve().parent.parent
BASE = "m00000"  # the machine pushed for real; the others are its rows under other ids


def _pipeline(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline", *args]


def _step(name: str, cmd: list[str], n: int, rows: list[dict]) -> dict:
    secs, rss, cpu, code = run(cmd)
    row = {"machines": n, "step": name, "seconds": round(secs, 2), "rss_mb": round(rss), "cpu_s": round(cpu, 2),
           "ok": code == 0}
    rows.append(row)
    print(f"  {n:>5} machines  {name:<44} {secs:7.2f} s  {rss:6.0f} MB{'' if code == 0 else '  FAILED'}",
          flush=True)
    return row


def replicate(catalog: str, have: int, want: int, batch: int = 50) -> None:
    """Machines ``have`` .. ``want - 1`` of the lake: BASE's rows under their ids (sessions renamed
    ``<id>~<machine>``), ``batch`` machines per transaction (a file per table each, as after maintenance)."""
    con = lake._connect()
    try:
        con.execute("set memory_limit = '4GB'")  # the bench's own writing, not a command measured
        lake.attach(con, catalog)
        for lo in range(have, want, batch):
            hi = min(want, lo + batch)
            ids = f"(select 'm' || lpad(i::varchar, 5, '0') as machine_id from range({lo}, {hi}) as r(i))"
            con.execute("begin")
            for table in [*lake.LAKE_TABLES, "lake_sessions"]:
                # each machine's texts its own (as people's are), so that parquet does not store them once
                texts = "".join(f", m.machine_id || ' ' || t.{c} as {c}" for c in lake.TEXT_COLUMNS.get(table, ()))
                con.execute(f"""
                    insert into lake."{table}" by name
                    select t.* replace (m.machine_id as machine_id, 'u-' || m.machine_id as user_name,
                                        t.session_id || '~' || m.machine_id as session_id{texts})
                    from lake."{table}" as t cross join {ids} as m
                    where t.machine_id = '{BASE}'""")
            con.execute("commit")
    finally:
        con.close()


def _lake_facts(catalog: str) -> dict:
    """Sessions, live parquet files and their size in the lake."""
    con = lake._connect()
    try:
        lake.attach(con, catalog, read_only=True)
        n_sessions = con.execute("select count(*) from lake.lake_sessions").fetchone()[0]
        files = [f for t in lake.LAKE_TABLES
                 for (f,) in con.execute("select data_file from ducklake_list_files('lake', ?)", [t]).fetchall()]
        size = sum(os.path.getsize(f) for f in files if os.path.exists(f))
        return {"sessions": n_sessions, "files": len(files), "data_mb": round(size / 1e6)}
    finally:
        con.close()


def _one_session_home(corpus: Path, out: Path, k: int) -> Path:
    """A home holding session ``k`` of the corpus alone, under a session id of its own."""
    sessions = sorted((corpus / "copilot-home" / "session-state").iterdir())
    src = sessions[k % len(sessions)]
    home = out / f"home-{k}" / "copilot-home"
    if not home.exists():
        dest = home / "session-state" / f"probe-{k:05d}-{src.name[:8]}"
        dest.mkdir(parents=True)
        text = (src / "events.jsonl").read_text(encoding="utf-8").replace(src.name, dest.name)
        (dest / "events.jsonl").write_text(text, encoding="utf-8")
    return home


def _catalog(kind: str, out: Path) -> tuple[str, Callable[[], object]]:
    if kind == "postgres":
        from tests import pg

        if pg.binaries() is None:
            raise SystemExit("PostgreSQL is not installed (initdb not found): --catalog sqlite, or install it")
        folder = Path(f"/tmp/copilot-warehouse-lake-bench-pg-{os.getpid()}")
        server = pg.start(folder)
        name = f"lake_{int(time.time())}"
        catalog = pg.create_database(server, name)
        return catalog, lambda: (pg.stop(folder), shutil.rmtree(folder, ignore_errors=True))
    path = out / f"lake.{'sqlite' if kind == 'sqlite' else 'duckdb'}"
    return str(path), lambda: None


def bench(machines: list[int], kind: str, size_mb: int, concurrent: int, report_max: int, out: Path) -> dict:
    if out.exists():
        for p in out.glob("lake*"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        shutil.rmtree(out / "homes", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    corpus = generated(out / f"corpus-{size_mb}mb", size_mb, "events")
    wh = out / "machine.duckdb"
    if not wh.exists():
        subprocess.run(_pipeline("ingest", "--copilot-home", str(corpus / "copilot-home"), "--warehouse", str(wh),
                                 "--quiet"), cwd=REPO, check=True)
    catalog, stop = _catalog(kind, out)
    data = out / "lake-data"
    rows: list[dict] = []
    facts: dict[int, dict] = {}
    try:
        _step("first push of a machine (all its sessions)",
              _pipeline("push", "--lake", catalog, "--data-path", str(data), "--warehouse", str(wh), "--machine",
                        BASE, "--user", f"u-{BASE}", "--quiet"), 1, rows)
        have = 1
        for n in machines:
            started = time.perf_counter()
            _apart(replicate, catalog, have, n)
            have = n
            print(f"  {n:>5} machines  (lake grown in {time.perf_counter() - started:.1f} s)", flush=True)
            _step("lake-maintain", _pipeline("lake-maintain", "--lake", catalog, "--quiet"), n, rows)
            _step("lake-refresh (the models built whole)", _pipeline("lake-refresh", "--lake", catalog, "--quiet"),
                  n, rows)
            facts[n] = _apart(_lake_facts, catalog)
            home = _one_session_home(corpus, out / "homes", n % 50)
            one = out / f"one-{n}.duckdb"
            subprocess.run(_pipeline("ingest", "--copilot-home", str(home), "--warehouse", str(one), "--quiet"),
                           cwd=REPO, check=True)
            _step("push of one new session (and its refresh)", _pipeline(
                "push", "--lake", catalog, "--warehouse", str(one), "--machine", f"probe-{n}", "--quiet"), n, rows)
            _step("query --lake: sessions and prompts", _pipeline(
                "query", "--lake", catalog, "select count(*), sum(n_turns) from dim_sessions"), n, rows)
            _step("query --lake: report_usage_monthly", _pipeline(
                "query", "--lake", catalog, "select * from report_usage_monthly"), n, rows)
            _step("usage --lake --by month", _pipeline("usage", "--lake", catalog, "--by", "month"), n, rows)
            if n <= report_max:
                report = _pipeline("report", "--lake", catalog, "--out", str(out / f"lake-report-{n}"), "--quiet")
                _step("report --lake", report, n, rows)
                home = _one_session_home(corpus, out / "homes", 60 + n % 40)
                again = out / f"again-{n}.duckdb"
                subprocess.run(_pipeline("ingest", "--copilot-home", str(home), "--warehouse", str(again),
                                         "--quiet"), cwd=REPO, check=True)
                subprocess.run(_pipeline("push", "--lake", catalog, "--warehouse", str(again), "--machine",
                                         f"again-{n}", "--quiet"), cwd=REPO, check=True)
                _step("report --lake after a one-session push", report, n, rows)
        if concurrent:
            rows += _concurrent(catalog, corpus, out, concurrent, have)
    finally:
        stop()
    return {"catalog": kind, "size_mb": size_mb, "sessions_per_machine": _apart(_sessions, wh), "facts": facts,
            "rows": rows}


def _apart(fn: Callable, *args: object) -> object:
    """``fn(*args)`` in a process of its own: this process stays small, so the steps it starts report their
    own peak RSS (see tools.bench.generated)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def _sessions(wh: Path) -> int:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute("select count(*) from dim_sessions").fetchone()[0]
    finally:
        con.close()


def _concurrent(catalog: str, corpus: Path, out: Path, k: int, n: int) -> list[dict]:
    """``k`` machines push one session each at once: each exit, and the conflict retries they took."""
    procs = []
    for i in range(k):
        home = _one_session_home(corpus, out / "homes", 100 + i)
        one = out / f"concurrent-{i}.duckdb"
        subprocess.run(_pipeline("ingest", "--copilot-home", str(home), "--warehouse", str(one), "--quiet"),
                       cwd=REPO, check=True)
        procs.append(one)
    logs = [out / f"concurrent-{i}.log" for i in range(k)]
    started = time.perf_counter()
    running = []
    for i, one in enumerate(procs):
        # each push's output to a file kept beside the lake: a pipe read only after the wait would block a
        # verbose push, and a failed push's reason would be lost
        with logs[i].open("w") as log:
            running.append(subprocess.Popen(_pipeline("push", "--lake", catalog, "--warehouse", str(one),
                                                      "--machine", f"at-once-{i}", "-v"), cwd=REPO,
                                            stdout=log, stderr=subprocess.STDOUT))
    codes = [p.wait() for p in running]
    seconds = time.perf_counter() - started
    results = [(code, log.read_text(encoding="utf-8", errors="replace")) for code, log in zip(codes, logs, strict=True)]
    for (code, err), log in zip(results, logs, strict=True):
        if code:
            tail = "\n      ".join(err.strip().splitlines()[-6:])
            print(f"  push {log.stem} failed (exit {code}; {log}):\n      {tail}", flush=True)
    retries = sum(len(re.findall(r"push conflicted", err)) for _code, err in results)
    ok = sum(code == 0 for code, _err in results)
    print(f"  {n:>5} machines  {k} pushes at once: {ok} succeeded, {retries} conflict retries, {seconds:.1f} s")
    return [{"machines": n, "step": f"{k} pushes of one session at once", "seconds": round(seconds, 2),
             "rss_mb": None, "cpu_s": None, "ok": ok == k, "succeeded": ok, "retries": retries}]


SUMMARY = [("lake-refresh (the models built whole)", "models built whole"),
           ("push of one new session (and its refresh)", "one-session push and its refresh"),
           ("query --lake: sessions and prompts", "`query --lake` (a count)"),
           ("query --lake: report_usage_monthly", "`query --lake` (a model)"),
           ("usage --lake --by month", "`usage --lake`"),
           ("lake-maintain", "`lake-maintain`"),
           ("report --lake", "`report --lake`"),
           ("report --lake after a one-session push", "`report --lake` after a push")]


def summary(result: dict) -> str:
    """One row per lake size, one column per command: seconds and peak RSS (the README's table)."""
    facts = {int(n): f for n, f in result["facts"].items()}  # keys are text once read back from results.json
    sizes = sorted(facts)
    lines = ["| machines | sessions | lake data (files) | " + " | ".join(label for _s, label in SUMMARY) + " |",
             "|---" * (3 + len(SUMMARY)) + "|"]
    for n in sizes:
        f = facts[n]
        cells = []
        for step, _label in SUMMARY:
            row = next((r for r in result["rows"] if r["machines"] == n and r["step"] == step), None)
            cells.append("-" if row is None else "failed" if not row["ok"] else
                         f"{row['seconds']:.1f} s, {row['rss_mb'] / 1000:.2f} GB")
        lines.append(f"| {n:,} | {f['sessions']:,} | {f['data_mb']:,} MB ({f['files']}) | " + " | ".join(cells)
                     + " |")
    together = [r for r in result["rows"] if "succeeded" in r]
    for r in together:
        lines += ["", f"{r['step']} into the lake of {r['machines']:,} machines: {r['succeeded']} succeeded, "
                      f"{r['retries']} conflict retries, {r['seconds']:.1f} s in all."]
    return "\n".join(lines) + "\n"


def markdown(result: dict) -> str:
    lines = [f"Catalog: {result['catalog']}; each machine {result['sessions_per_machine']} sessions "
             f"({result['size_mb']} MB of logs).", "",
             "| machines | sessions | lake data | parquet files | step | seconds | peak RSS MB |",
             "|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        f = result["facts"].get(row["machines"], {})
        step = row["step"] + ("" if row["ok"] else " (failed)")
        if "succeeded" in row:
            step += f": {row['succeeded']} succeeded, {row['retries']} conflict retries"
        lines.append(f"| {row['machines']:,} | {f.get('sessions', '') and format(f['sessions'], ',')} | "
                     f"{f.get('data_mb', '') and str(f['data_mb']) + ' MB'} | {f.get('files', '')} | {step} | "
                     f"{row['seconds']} | {row['rss_mb'] if row['rss_mb'] is not None else ''} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.lake_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--machines", default="50,200,1000", help="lake sizes to measure, in machines (ascending)")
    from tests import pg
    ap.add_argument("--catalog", choices=("postgres", "sqlite", "duckdb"),
                    default="postgres" if pg.binaries() else "sqlite")
    ap.add_argument("--size-mb", type=int, default=20, help="each machine's logs (default 20: ~100 sessions)")
    ap.add_argument("--concurrent", type=int, default=16, help="machines that push at once at the end")
    ap.add_argument("--report-max", type=int, default=50, help="run report --lake up to this many machines")
    ap.add_argument("--dir", type=Path, default=REPO / "data" / "bench" / "lake")
    args = ap.parse_args(argv)
    machines = sorted(int(x) for x in args.machines.split(","))
    result = bench(machines, args.catalog, args.size_mb, args.concurrent, args.report_max, args.dir)
    (args.dir / "results.json").write_text(json.dumps(result, indent=2))
    (args.dir / "results.md").write_text(summary(result) + "\n" + markdown(result))
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
