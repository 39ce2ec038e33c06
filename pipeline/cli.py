"""``python -m pipeline <verb>``: a thin command line over the library functions.

Each verb imports the modules it runs when it runs, so ``--help``, ``query`` and ``usage`` start
without loading the readers, and an ingest that changed nothing without polars and pyarrow.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runs import RunSummary

DEFAULT_WAREHOUSE = "data/warehouse.duckdb"  # unless $COPILOT_WAREHOUSE names another
REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE = REPO_ROOT / "data" / "sample"

log = logging.getLogger("pipeline")


def default_warehouse() -> str:
    """$COPILOT_WAREHOUSE, else data/warehouse.duckdb (relative to the current folder)."""
    return os.environ.get("COPILOT_WAREHOUSE") or DEFAULT_WAREHOUSE


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    import duckdb
    try:
        mine = version("copilot-warehouse")
    except PackageNotFoundError:
        mine = "unknown (not installed)"
    return f"copilot-warehouse {mine} (DuckDB {duckdb.__version__}, Python {sys.version.split()[0]})"


class _Version(argparse.Action):
    """--version, its text made only when asked (importlib.metadata cost every verb ~0.1 s at startup)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        print(_version())
        parser.exit()


def _common(parser: argparse.ArgumentParser, top: bool) -> None:
    """-v and -q, accepted before the verb and after it (after it, only a given flag counts)."""
    default = False if top else argparse.SUPPRESS
    parser.add_argument("-v", "--verbose", action="store_true", default=default,
                        help="log progress details to stderr (and the traceback of an internal error)")
    parser.add_argument("-q", "--quiet", action="store_true", default=default,
                        help="no progress bar and no summary; only errors")


class _Sub(argparse.ArgumentParser):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        _common(self, top=False)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline",
                                description="Turn GitHub Copilot history into a DuckDB warehouse. The warehouse "
                                            "is data/warehouse.duckdb unless --warehouse or $COPILOT_WAREHOUSE "
                                            "names another.")
    p.add_argument("--version", action=_Version, nargs=0, help="show the program's version number and exit")
    _common(p, top=True)
    sub = p.add_subparsers(dest="verb", required=True, parser_class=_Sub)

    so = sub.add_parser("sources", help="what ingest would read, from where: files, bytes and last change per "
                                        "kind (reads nothing into the warehouse)")
    so.add_argument("--copilot-home", action="append", type=Path, default=[], metavar="DIR",
                    help="a Copilot CLI home; repeatable (default: the ones ingest finds)")
    so.add_argument("--vscode-user", action="append", type=Path, default=[], metavar="DIR",
                    help="a VS Code User folder; repeatable")
    so.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table")

    ing = sub.add_parser("ingest", help="read Copilot history into the warehouse")
    ing.add_argument("--copilot-home", action="append", type=Path, default=[], metavar="DIR",
                     help="a Copilot CLI home (holds session-state/, session-store.db); repeatable")
    ing.add_argument("--vscode-user", action="append", type=Path, default=[], metavar="DIR",
                     help="a VS Code User folder (holds workspaceStorage/); repeatable")
    ing.add_argument("--warehouse", default=None, help=f"DuckDB file (default $COPILOT_WAREHOUSE, else "
                                                       f"{DEFAULT_WAREHOUSE})")
    ing.add_argument("--full", action="store_true", help="rebuild the warehouse from scratch")
    ing.add_argument("--no-redact", action="store_true",
                     help="keep secrets in the text (only for a private warehouse; off by default)")

    rep = sub.add_parser("report", help="write the HTML site (site/index.html), the markdown wiki and parquet "
                                        "for BI tools",
                         description="Writes OUT/site/ (a static HTML site: open site/index.html, or `serve` it), "
                                     "OUT/wiki/ (markdown) and OUT/parquet/ (every table, for BI tools).")
    rep.add_argument("--warehouse", default=None, help=f"DuckDB file (default {DEFAULT_WAREHOUSE}; not with --lake: "
                                                       "the lake is read where it is)")
    _lake_argument(rep)
    rep.add_argument("--out", default="data", type=Path, help="output folder: parquet/, wiki/ and site/ "
                                                              "(default data/)")
    rep.add_argument("--force", action="store_true", help="write over files in the output folders that the report "
                                                          "did not write (without it they are left alone and named)")

    demo = sub.add_parser("demo", help="ingest + report on the bundled sample corpus into data/demo/")
    demo.add_argument("--out", default=REPO_ROOT / "data" / "demo", type=Path,
                      help="where the demo's warehouse, site, wiki and parquet go (default data/demo/)")

    se = sub.add_parser("search", help="BM25 full-text search over prompts, answers, checkpoints and memories")
    se.add_argument("words")
    se.add_argument("--limit", type=int, default=10, help="results to show (default 10)")
    se.add_argument("--warehouse", default=None)
    se.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table")

    mc = sub.add_parser("mcp", help="serve the history to agents: a Model Context Protocol server over stdio "
                                    "(tools search, session, usage, query)",
                        description="A Model Context Protocol server over stdio for Copilot and other agents: "
                                    "tools search, session, usage and a read-only query over the warehouse. "
                                    "Register it in .vscode/mcp.json or ~/.copilot/mcp-config.json (see the "
                                    "README); an agent starts it, nobody runs it by hand.")
    mc.add_argument("--warehouse", default=None, help="the warehouse it reads (default data/warehouse.duckdb, or "
                                                      "$COPILOT_WAREHOUSE)")

    mo = sub.add_parser("models", help="rebuild the SQL models (sql/) and run the data checks")
    mo.add_argument("--warehouse", default=None)

    us = sub.add_parser("usage", help="requests, tokens, premium requests, AI credits and dollars by day, week, "
                                      "month, session, model, project, agent or skill")
    us.add_argument("--by", choices=["day", "week", "month", "session", "model", "project", "agent", "skill"],
                    default=None, help="what a row is (default day; with --budget, month); agent and skill count "
                                       "the single requests (fct_requests): main or the sub-agent that made each, "
                                       "and the skill last invoked in its turn")
    us.add_argument("--since", metavar="WHEN", help="first UTC day to count: YYYY-MM-DD, today, yesterday, 7d, "
                                                    "30d (the last N days), this-week, this-month, last-month")
    us.add_argument("--until", metavar="WHEN", help="last UTC day to count: YYYY-MM-DD, today, yesterday, "
                                                    "last-month")
    us.add_argument("--budget", metavar="USD", type=_amount,
                    help="say how much of this budget (in dollars) the current month (or --by day / week) has "
                         "spent; exit 1 when over")
    us.add_argument("--status", action="store_true", help="one line: today's and this month's cost")
    us.add_argument("--project", metavar="NAME", help="only this project (its name or id)")
    us.add_argument("--warehouse", default=None)
    _lake_argument(us)
    us.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table")

    q = sub.add_parser("query", help="run SQL against the warehouse")
    q.add_argument("sql")
    q.add_argument("--warehouse", default=None)
    _lake_argument(q)
    q.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table")

    sv = sub.add_parser("serve", help="serve the site (report's DIR/site) on 127.0.0.1 with live search")
    sv.add_argument("--warehouse", default=None, help=f"DuckDB file (default {DEFAULT_WAREHOUSE})")
    sv.add_argument("--out", default="data", type=Path, help="the report folder holding site/ (default data/); "
                                                             "the site is written first when it is missing")
    sv.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default 8000)")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine "
                                                       "only; the history holds your prompts)")
    sv.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                    help="a host name the server also answers for (repeatable); requests naming any other host than "
                         "--host, localhost, 127.0.0.1 or [::1] get 421")

    pu = sub.add_parser("push", help="team mode: copy this machine's sessions into a DuckLake shared by several "
                                     "machines or people")
    pu.add_argument("--lake", required=True, metavar="CATALOG",
                    help="the lake's catalog: a PostgreSQL connection string (postgres:dbname=... host=...; the "
                         "password from PGPASSWORD or ~/.pgpass) or a local .sqlite/.duckdb catalog file")
    pu.add_argument("--data-path", metavar="PATH", help="where the lake keeps its parquet files (needed by the "
                                                         "first push; recorded in the catalog)")
    pu.add_argument("--warehouse", default=None)
    pu.add_argument("--machine", help="this machine's name in the lake (default $COPILOT_WAREHOUSE_MACHINE, "
                                      "else the host name)")
    pu.add_argument("--user", help="who pushes (default $COPILOT_WAREHOUSE_USER, else git's user.name, else the "
                                   "login name)")
    pu.add_argument("--metrics-only", action="store_true",
                    help="push no prompt, answer, title, checkpoint, memory or tool text: usage and activity only")
    pu.add_argument("--force", action="store_true",
                    help="with --metrics-only: replace sessions this machine pushed with their text by their "
                         "figures alone (refused without it)")
    pu.add_argument("--no-refresh", action="store_true",
                    help="leave the lake's models as they are (a later push, `lake-refresh` or `report --lake` "
                         "brings them up to date)")

    lr = sub.add_parser("lake-refresh", help="team mode: bring the models stored in the lake up to date with its "
                                             "latest push (a push does this itself unless --no-refresh)")
    lr.add_argument("--lake", required=True, metavar="CATALOG", help="the lake's catalog, as for push")

    lm = sub.add_parser("lake-maintain", help="team mode: merge the lake's small parquet files, expire snapshots "
                                              "older than 7 days and delete the files nothing refers to (a push "
                                              "runs this itself every 50 pushes)")
    lm.add_argument("--lake", required=True, metavar="CATALOG", help="the lake's catalog, as for push")
    _finish(p, sub)
    return p


# what `--help` of each verb ends with: a line or two to copy
EXAMPLES = {
    "sources": ["python -m pipeline sources", "python -m pipeline sources --copilot-home ~/.copilot --format json"],
    "ingest": ["python -m pipeline ingest", "python -m pipeline ingest --copilot-home ~/.copilot "
               "--vscode-user ~/.config/Code/User"],
    "report": ["python -m pipeline report   # then open data/site/index.html",
               "python -m pipeline report --lake team.sqlite --out team/"],
    "demo": ["python -m pipeline demo"],
    "search": ["python -m pipeline search 'refresh token' --limit 5"],
    "mcp": ["python -m pipeline mcp --warehouse ~/copilot/data/warehouse.duckdb   # started by an agent"],
    "models": ["python -m pipeline models"],
    "usage": ["python -m pipeline usage --by month --since last-month",
              "python -m pipeline usage --by session --since 7d",
              "python -m pipeline usage --by agent --since this-month   # main and each sub-agent",
              "python -m pipeline usage --budget 20 --by month   # exit 1 when over",
              "python -m pipeline usage --status                 # one line for a status bar"],
    "query": ["python -m pipeline query \"select title, n_turns from dim_sessions order by started_at desc limit 5\"",
              "python -m pipeline query --format csv \"select * from fct_usage\" > usage.csv"],
    "serve": ["python -m pipeline serve   # then open http://127.0.0.1:8000/"],
    "push": ["python -m pipeline push --lake team.sqlite --data-path /shared/lake   # the first push",
             "python -m pipeline push --lake team.sqlite --metrics-only"],
    "lake-maintain": ["python -m pipeline lake-maintain --lake team.sqlite   # e.g. nightly, from any one machine"],
    "lake-refresh": ["python -m pipeline lake-refresh --lake team.sqlite   # after pushes with --no-refresh"],
}
# help of the options several verbs share, where a verb gives none of its own
_SHARED_HELP = {
    "--warehouse": f"the warehouse, a DuckDB file (default $COPILOT_WAREHOUSE, else {DEFAULT_WAREHOUSE})",
    "--format": "how to print the rows: table (default), csv, json or markdown",
    "--out": "the output folder",
}


def _finish(p: argparse.ArgumentParser, sub: argparse._SubParsersAction) -> None:
    """Every option of every verb with its help, and each verb's --help ending with examples."""
    for name, parser in sub.choices.items():
        for action in parser._actions:
            if action.help is None and action.option_strings:
                action.help = _SHARED_HELP.get(action.option_strings[-1], "")
        if name in EXAMPLES:
            parser.formatter_class = argparse.RawDescriptionHelpFormatter
            parser.epilog = "examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES[name])


def _lake_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", metavar="CATALOG", help="team mode: the whole lake instead of this machine's "
                                                          "warehouse (models built over every push)")


def _warehouse(args: argparse.Namespace) -> str | Path | object:
    """The warehouse a reading verb reads: this machine's, or the lake read in place (``lake.Lake``, pinned at its
    latest snapshot; its models brought up to date first when pushes left them behind)."""
    if getattr(args, "lake", None):
        from .lake import LakeError, reading
        if args.warehouse:
            raise LakeError("--lake reads the lake where it is: leave --warehouse out")
        return reading(args.lake, refresh_models=True)
    return args.warehouse or default_warehouse()


def _reader(args: argparse.Namespace):
    """A read-only connection for a verb that only queries: this machine's warehouse, or the lake read in
    place (``lake.lake_reader``: no local copy)."""
    if getattr(args, "lake", None):
        from .lake import lake_reader
        return lake_reader(args.lake)
    from .warehouse import connect
    return connect(args.warehouse or default_warehouse(), read_only=True)


def _amount(text: str):
    from decimal import Decimal, InvalidOperation
    try:
        value = Decimal(text.strip().lstrip("$"))
    except InvalidOperation as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount like 20 or 12.50") from exc
    if not value.is_finite() or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount like 20 or 12.50")
    return value


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # the CLI's own form (`warning: ...`); -v names the logger too
    from .processes import log_to_stderr

    log_to_stderr(logging.INFO if args.verbose else logging.WARNING, args.verbose)
    if args.quiet and not args.verbose:
        logging.getLogger().setLevel(logging.ERROR)
    from .checks import ChecksFailed
    from .errors import LakeError, OutputError, ServeError, SourceError
    from .extensions import ExtensionError
    from .models import ModelError
    from .warehouse import WarehouseError
    try:
        verbs = {"ingest": cmd_ingest, "report": cmd_report, "demo": cmd_demo, "query": cmd_query,
                 "search": cmd_search, "models": cmd_models, "usage": cmd_usage, "push": cmd_push,
                 "lake-maintain": cmd_lake_maintain, "lake-refresh": cmd_lake_refresh,
                 "serve": cmd_serve, "sources": cmd_sources, "mcp": cmd_mcp}
        return verbs[args.verb](args)
    except (SourceError, WarehouseError, LakeError, ExtensionError, OutputError, ServeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ModelError as exc:
        print(f"error: {exc}; the {_left(args)} left as it was", file=sys.stderr)
        return 3
    except ChecksFailed as exc:
        print(f"error: data checks failed; the {_left(args)} left as it was\n{exc}", file=sys.stderr)
        return 3
    except BrokenPipeError:  # `query ... | head`: the reader had enough; nothing is wrong
        _quiet_stdout()
        return 0
    except KeyboardInterrupt as exc:  # Ctrl-C, wherever it came: one line, exit 130
        print(_interrupted(args.verb, getattr(exc, "committed", False)), file=sys.stderr)
        return 130
    except BaseException as exc:  # noqa: BLE001 - everything else is one line too (-v logs the traceback)
        return _failure(args, exc)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: its pipe is closed, and Python's flush at exit would fail on it again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


_WRITERS = {"ingest": "the warehouse is as it was", "demo": "the warehouse is as it was",
            "models": "the warehouse is as it was", "report": "the pages written so far are kept"}


def _interrupted(verb: str, committed: bool) -> str:
    if committed:
        return "interrupted after the run was committed: the warehouse holds it"
    return "interrupted: " + ("nothing was written; " + _WRITERS[verb] if verb in _WRITERS else "stopped")


def _left(args: argparse.Namespace) -> str:
    """What a failed model or check left as it was: the warehouse, or (team mode) the lake's models."""
    return "lake's models were" if getattr(args, "lake", None) else "warehouse was"


def _failure(args: argparse.Namespace, exc: BaseException) -> int:
    """One line for what stopped a verb; exit 2 when the machine is at fault (a full disk, no
    memory, a file it cannot write), 1 for anything else (a bug: -v shows the traceback)."""
    import duckdb

    if isinstance(exc, SystemExit):
        raise exc
    kept = _WRITERS.get(args.verb, "")
    if getattr(args, "lake", None) and args.verb != "push":  # a data file of the lake that cannot be read: which
        from .lake import read_error

        if (unreadable := read_error(args.lake, exc)) is not None:
            print(f"error: {unreadable}" + (f"; {kept}" if kept else ""), file=sys.stderr)
            return 2
    text = " ".join(str(exc).split())
    folder = getattr(exc, "filename", None) or _target(args)
    if (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or "No space left on device" in text:
        print(f"error: no space left on the device of {folder}" + (f"; {kept}" if kept else ""), file=sys.stderr)
        return 2
    if isinstance(exc, (MemoryError, duckdb.OutOfMemoryException)):
        print("error: out of memory (set COPILOT_WAREHOUSE_MEMORY, e.g. 4GB, to give DuckDB more)"
              + (f"; {kept}" if kept else ""), file=sys.stderr)
        return 2
    if isinstance(exc, (OSError, duckdb.IOException)):
        what = exc.strerror if isinstance(exc, OSError) and exc.strerror else text
        print(f"error: {what}: {folder}" + (f"; {kept}" if kept else ""), file=sys.stderr)
        return 2
    if args.verbose:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    print(f"error: {type(exc).__name__}: {text[:300]}" + (f"; {kept}" if kept else "")
          + " (an internal error: run with -v for the traceback)", file=sys.stderr)
    return 1


def _target(args: argparse.Namespace) -> str:
    for name in ("out", "warehouse"):
        value = getattr(args, name, None)
        if value:
            return str(Path(value).resolve().parent if name == "warehouse" else Path(value).resolve())
    return str(Path.cwd())


class _Bar:
    """The progress bar of a verb: one line on stderr, labelled with the phase (a bar where the phase
    counts files, the time spent where it does not); on a TTY only, off with -q. Log lines printed
    meanwhile go above it (tqdm's logging redirect), not through it."""

    def __init__(self, unit: str = "file"):
        from tqdm import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        self.bar = tqdm(total=None, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True,
                        bar_format="{desc}")
        self.redirect = logging_redirect_tqdm(tqdm_class=tqdm)
        self.redirect.__enter__()
        self.label = None

    def __call__(self, done: int, total: int, label: str) -> None:
        if label != self.label:
            self.label = label
            self.bar.reset(total=total or None)
            self.bar.total = total or None
            self.bar.bar_format = None if total else "{desc}… {elapsed}"
            self.bar.set_description_str(label, refresh=False)
        self.bar.n = done
        self.bar.refresh()

    def step(self, label: str) -> None:
        self(0, 0, label)

    def close(self) -> None:
        self.bar.close()
        self.redirect.__exit__(None, None, None)


def _progress(quiet: bool) -> _Bar | None:
    if quiet or not sys.stderr.isatty():
        return None
    try:
        return _Bar()
    except ImportError:  # tqdm is the optional [progress] extra
        return None


def _sources(args: argparse.Namespace) -> tuple[list[Path], list[Path]]:
    homes, users = list(args.copilot_home), list(args.vscode_user)
    if homes or users:
        return homes, users  # any source flag turns discovery off
    from .extract.cli_home import default_copilot_homes
    from .extract.vscode import default_vscode_users
    homes, users = default_copilot_homes(os.environ), default_vscode_users(os.environ)
    if not homes and not users:
        log.warning("no Copilot history found: no CLI home ($COPILOT_HOME, $XDG_STATE_HOME/.copilot, ~/.copilot) "
                    "and no VS Code User folder")
    return homes, users


def run_ingest(warehouse: str | Path, homes: list[Path], users: list[Path], *, full: bool = False,
               redact: bool = True, quiet: bool = False) -> RunSummary:
    from .ingest import ingest
    from .inventory import warnings
    for line in warnings(homes, users):
        print(f"warning: {line}", file=sys.stderr)
    bar = _progress(quiet)
    try:
        summary = ingest(warehouse, homes, users, full=full, redact=redact, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    if not quiet:
        print(summary.line())
        if summary.n_rejects:
            print(f"  {summary.n_rejects:,} record{'s' if summary.n_rejects != 1 else ''} rejected: "
                  "see `select * from _rejects`")
        if summary.n_files_skipped:
            print(f"  {summary.n_files_skipped} sources busy, skipped; the next run retries them")
        if summary.n_pending_tails:
            print(f"  {summary.n_pending_tails} logs end in an unfinished line (live session?); read next run")
    return summary


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return ""


def cmd_sources(args: argparse.Namespace) -> int:
    from .ingest import check_sources
    from .inventory import inventory, warnings
    from .output import write
    from .sources import KINDS
    homes, users = _sources(args)
    check_sources(homes, users)
    for line in warnings(homes, users):
        print(f"warning: {line}", file=sys.stderr)
    rows, problems = inventory(homes, users)
    write(["root", "kind", "files", "size", "bytes", "last_change", "what"],
          [[r.root, r.kind, r.files, _size(r.bytes), r.bytes, r.newest, KINDS[r.kind].files if r.kind in KINDS else ""]
           for r in rows], args.format)
    if not args.quiet:
        roots = [*homes, *users]
        total = sum(r.bytes for r in rows)
        print(f"{sum(r.files for r in rows):,} sources ({_size(total)}) under {len(roots)} "
              f"folder{'s' if len(roots) != 1 else ''}" + (f"; {len(problems)} could not be listed or examined "
                                                            "(ingest records each in _rejects)" if problems else ""),
              file=sys.stderr)
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from .processes import numpy_kept_out

    numpy_kept_out()  # nothing an ingest does needs it (see processes.numpy_kept_out)
    homes, users = _sources(args)
    run_ingest(_warehouse(args), homes, users, full=args.full, redact=not args.no_redact, quiet=args.quiet)
    return 0


def _report(warehouse: str | Path, out: Path, quiet: bool, force: bool = False) -> None:
    from .report import run_report
    bar = _progress(quiet)
    try:
        parquet, wiki, site = run_report(warehouse, out, progress=bar.step if bar else None, force=force)
    finally:
        if bar is not None:
            bar.close()
    if not quiet:
        print(f"report: {len(parquet.written)} parquet files in {out / 'parquet'}")
        print(wiki.line(out / "wiki") + f"; start at {out / 'wiki' / 'index.md'}")
        print(site.line(out / "site") + f"; open {(out / 'site' / 'index.html').resolve()}")


def cmd_report(args: argparse.Namespace) -> int:
    _report(_warehouse(args), Path(args.out), args.quiet, args.force)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve import listen, serve
    sock = listen(args.host, args.port)  # first: a port in use is told before any work
    warehouse, out = _warehouse(args), Path(args.out)
    if not (out / "site" / "index.html").is_file():
        _report(warehouse, out, args.quiet)
    if not args.quiet:
        print(f"serving {out / 'site'} at http://{args.host}:{args.port}/ (live search over {warehouse}; the "
              "pages are rebuilt when an ingest changes it); Ctrl-C stops")
    serve(out / "site", warehouse, host=args.host, port=args.port, allow_hosts=args.allow_host, sock=sock, out=out)
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from .lake import push
    summary = push(args.warehouse or default_warehouse(), args.lake, data_path=args.data_path,
                   machine=args.machine, user=args.user, metrics_only=args.metrics_only, force=args.force,
                   refresh_models=not args.no_refresh)
    if not args.quiet:
        print(summary.line(args.lake))
    return 0


def cmd_lake_refresh(args: argparse.Namespace) -> int:
    from .lake import refresh
    summary = refresh(args.lake)
    if not args.quiet:
        print(summary.line(args.lake))
    return 0


def cmd_lake_maintain(args: argparse.Namespace) -> int:
    from .lake import maintain
    summary = maintain(args.lake)
    if not args.quiet:
        print(summary.line(args.lake))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    out = Path(args.out)
    warehouse = out / "warehouse.duckdb"
    for old in (warehouse, warehouse.with_name(warehouse.name + ".wal")):  # the demo always starts afresh
        old.unlink(missing_ok=True)  # (and a file an older DuckDB wrote cannot stop it)
    if not args.verbose:  # the planted damages are explained below, not logged as warnings
        logging.getLogger("pipeline.load").setLevel(logging.ERROR)
    from .processes import numpy_kept_out, numpy_let_in

    numpy_kept_out()
    run_ingest(warehouse, [SAMPLE / "copilot-home"], [SAMPLE / "vscode-user"], full=True, quiet=args.quiet)
    if not args.quiet:
        _explain_damages(warehouse)
    numpy_let_in()  # the report's charts are drawn with matplotlib
    _report(warehouse, out, args.quiet)
    if not args.quiet:
        # the python that ran this and the warehouse, as typed from here (.venv/bin/python)
        print(f"try:  {_below(Path(sys.executable), Path.cwd())} -m pipeline query "
              f"--warehouse {_below(warehouse.resolve(), Path.cwd())} "
              "\"select title, n_turns, n_tool_calls from dim_sessions order by started_at\"")
        print(f"open in a browser: {(out / 'site' / 'index.html').resolve()}")
    return 0


def _below(path: Path, folder: Path) -> Path:
    """``path`` relative to ``folder`` when it is inside it, else as it is."""
    return path.relative_to(folder) if path.is_relative_to(folder) else path


def _explain_damages(warehouse: Path) -> None:
    """The sample corpus is damaged on purpose; say so, and what the run did with each damage."""
    from .warehouse import connect
    con = connect(warehouse, read_only=True)
    try:
        rows = con.execute("select source_path, line_number, reason from _rejects "
                           "order by source_path, line_number nulls first").fetchall()
    finally:
        con.close()
    if not rows:
        return
    print(f"The sample corpus has {len(rows)} damaged record{'s' if len(rows) != 1 else ''} planted on purpose: each "
          "became one row in _rejects, and the rest of its file was read:")
    for path, line, reason in rows:
        path = _below(Path(path), SAMPLE)
        short = re.sub(r"\s\([^()]{30,}\)", "", reason)  # without the parser's long details
        print(f"  - {path}" + (f" line {line}" if line else "") + f": {short}")
    print("  Your own history gets the same treatment: `python -m pipeline query \"select * from _rejects\"`.")


def cmd_search(args: argparse.Namespace) -> int:
    from .warehouse import connect
    if args.limit < 1:
        print("error: --limit must be at least 1", file=sys.stderr)
        return 2
    from .output import write
    con = connect(_warehouse(args), read_only=True)
    try:
        rel = con.sql("select score, kind, session_id, ref, title, written_at, "
                      "left(regexp_replace(text, '\\s+', ' ', 'g'), 160) as snippet "
                      "from search(?, k := ?)", params=[args.words, args.limit])
        columns, rows = rel.columns, rel.fetchall()
    finally:
        con.close()
    if not rows:
        print(f"no matches for {args.words!r}", file=sys.stderr)
        return 1
    write(columns, rows, args.format)
    return 0


def cmd_usage(args: argparse.Namespace) -> int:
    import duckdb

    from .usage_report import (
        UsageError,
        budget,
        period_end,
        period_start,
        render,
        status_line,
        terminal_width,
        usage_table,
    )
    today = datetime.now(timezone.utc).date()
    try:
        since = period_start(args.since, today) if args.since else None
        until = period_end(args.until, today) if args.until else None
    except ValueError:
        print(f"error: --since / --until {args.since or args.until!r}: a date like 2026-09-01, today, yesterday, "
              "7d, this-month or last-month", file=sys.stderr)
        return 2
    con = _reader(args)
    try:
        if args.status:
            print(status_line(con, today))
            return 0
        if args.budget is not None:
            line, over = budget(con, args.budget, args.by or "month", today)
            print(line)
            return 1 if over else 0
        table = usage_table(con, args.by or "day", since, until, args.project)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except duckdb.Error as exc:
        if getattr(args, "lake", None):
            from .lake import read_error
            if (unreadable := read_error(args.lake, exc)) is not None:
                raise unreadable from exc
        if not isinstance(exc, duckdb.CatalogException):
            raise
        print(f"error: {args.warehouse or default_warehouse()} has no usage tables yet: run `python -m pipeline "
              "ingest`, which upgrades a warehouse an older version wrote", file=sys.stderr)
        return 2
    finally:
        con.close()
    sys.stdout.write(render(table, args.format, terminal_width() if args.format == "table" else None))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp_server import serve_stdio
    serve_stdio(_warehouse(args))
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from .checks import ChecksFailed, run_checks
    from .models import run_models
    from .warehouse import connect, transaction, writing
    warehouse = _warehouse(args)
    with writing(warehouse):
        con = connect(warehouse)
        try:
            with transaction(con):
                built = run_models(con)
                failures = run_checks(con)
                if failures:
                    raise ChecksFailed(failures)
        finally:
            con.close()
    print(f"models: {len(built)} tables rebuilt, checks passed")
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from .output import write
    con = _reader(args)
    try:
        try:
            rel = con.sql(args.sql)
            if rel is None:
                return 0
            columns = rel.columns
            rel.execute()
        except Exception as exc:  # duckdb raises many error types; all are the user's SQL ...
            if getattr(args, "lake", None):  # ... but a data file of the lake that cannot be read
                from .lake import read_error
                if (unreadable := read_error(args.lake, exc)) is not None:
                    raise unreadable from exc
            print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 1
        write(columns, _batches(rel), args.format)
    finally:
        con.close()
    return 0


def _batches(rel: object, size: int = 10_000):
    while batch := rel.fetchmany(size):
        yield from batch
