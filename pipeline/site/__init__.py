"""The static HTML site (``DIR/site/index.html``), from the same page data as the wiki
(``wiki.queries.WikiData``): Jinja2 templates under ``templates/``, one stylesheet and one small script
under ``static/``, the wiki's SVG charts, and a prebuilt search index the search page loads - so it
opens from ``file://`` with no server and no network. Text from the history is rendered as markdown
and sanitized (``render``); everything else Jinja2 escapes.

``python -m pipeline serve`` serves the same files and adds live search (``serve``).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import orjson
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from ..wiki import catalog
from ..wiki import pages as wiki_pages
from ..wiki import queries as wiki_queries
from ..wiki.markdown import (
    fmt_cost,
    fmt_credits,
    fmt_duration,
    fmt_ms,
    fmt_num,
    fmt_premium,
    fmt_ts,
    fmt_usd,
    page_name,
    plural,
)
from ..wiki.queries import WikiData, page_plans
from .render import markdown

HERE = Path(__file__).parent
ANSWER_MAX = 20_000  # characters of an answer shown on a session page (the warehouse has all of it)
SNIPPET = 240  # characters of a search result's text
STATIC = ("site.css", "search.js", "sessions.js")


@functools.cache
def _env() -> Environment:
    """The templates' environment, made once per process: each page of a paged session was rendered with an
    environment of its own, every template compiled again (the 200,000-call session's 100 pages: ~6 s of 31)."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(ts=fmt_ts, num=fmt_num, credits=fmt_credits, usd=fmt_usd, duration=fmt_duration, ms=fmt_ms,
                       md=markdown, page=page_name)
    env.globals.update(plural=plural, premium=fmt_premium, cost=fmt_cost, unknown_note=wiki_pages.unknown_note,
                       shows_split=wiki_pages.shows_split,
                       USAGE_NOTE=wiki_pages.USAGE_NOTE)
    return env


def timeline(turn: dict, calls: list[dict]) -> list[dict]:
    """The tool calls of a prompt placed on the prompt's time span: ``offset_s`` from the prompt, and
    ``left``/``width`` in percent for the bar (calls the source does not time get no bar)."""
    start = turn["started_at"] if turn else None
    ends = [turn["ended_at"]] if turn and turn["ended_at"] else []
    for c in calls:
        if c["called_at"] is not None:
            ends.append(c["called_at"])
            if c["duration_ms"] is not None:
                ends.append(c["called_at"].timestamp() + c["duration_ms"] / 1000)
    end = max((e if isinstance(e, float) else e.timestamp()) for e in ends) if ends else None
    span = (end - start.timestamp()) if start and end else None
    out = []
    for c in calls:
        row = dict(c)
        row.update(offset_s=None, left=None, width=None)
        if start and c["called_at"] is not None:
            row["offset_s"] = max(0.0, c["called_at"].timestamp() - start.timestamp())
            if span and span > 0:
                row["left"] = round(min(100.0, 100 * row["offset_s"] / span), 2)
                dur = (c["duration_ms"] or 0) / 1000
                row["width"] = round(max(0.6, min(100 - row["left"], 100 * dur / span)), 2)
        out.append(row)
    return out


ANCHORS = {"prompt": "#prompt-{ref}", "answer": "#prompt-{ref}", "checkpoint": "#checkpoint-{ref}",
           "memory": "#memories"}


def doc_url(kind: str, session_id: str, ref: str | None, ranges: list[tuple[int, int]] | None = None,
            first: str | None = None) -> str:
    """Where a search document (int_search_docs) is shown: its session's page, at the prompt,
    checkpoint or memories it is (``ranges``: the session's pages, when it has several; a prompt or an
    answer is on the page of its turn, the rest on the first; ``first``: the session's first page, when the
    caller has it already)."""
    page = 0
    if ranges and kind in ("prompt", "answer") and ref is not None and str(ref).isdigit():
        page = wiki_pages.page_of(ranges, int(ref))
    base = first if page == 0 and first is not None else wiki_pages.session_file(session_id, page, "html")
    return base + ANCHORS.get(kind, "").format(ref=ref)


# The prebuilt search index, in files a search loads as it needs them (``search.js``): a page opened from
# ``file://`` cannot fetch(), so each is a script that hands its part to the page. ``search/index.js``: how the
# index is cut, and the kind of each document; ``search/terms-K.js``: the postings of the terms of shard K;
# ``search/docs-J.js``: the documents of chunk J. One index file of every term and document was 49 MB at 19,600
# sessions (a browser loaded it whole for any search) and took ~0.6 GB of the report's memory to build.
SEARCH_DIR = "search"
SHARD_BYTES = 256 * 1024  # about this much of postings per term shard
MAX_SHARDS = 4096
CHUNK_DOCS = 500  # documents per chunk: a page of 50 results loads at most 50 chunks
GROUP_BYTES = 8 * 1024 * 1024  # about this much of postings built by one query (the memory it takes: ~0.2 GB)
POSTING_BYTES = 12  # the text of one posting ("position,weight,"), about
# a term's shard: a polynomial hash of its code points, which search.js computes alike (`shardOf`)
_SHARD_OF_TERM = ("list_reduce(list_transform(str_split(term, ''), c -> unicode(c)::bigint), "
                  "(h, c) -> (h * 31 + c) % 1000003, 0::bigint)")


def shard_of(term: str, shards: int) -> int:
    """The shard of ``term`` among ``shards``: what ``_SHARD_OF_TERM`` and search.js compute."""
    h = 0
    for ch in term:
        h = (h * 31 + ord(ch)) % 1000003
    return h % shards


def _script(statement: str) -> str:
    """``statement`` as a script file; "</" in its JSON cannot end a script early."""
    return f"{statement};\n".replace("</", "<\\/")


def _js(call: str, *values: str) -> str:
    """A script that calls ``call`` with JSON ``values``."""
    return _script(f"{call}({','.join(values)})")


def search_files(con: duckdb.DuckDBPyConnection, projects: dict[str, str]) -> Iterator[dict[str, str]]:
    """The search index's files (``search/...``), a few at a time: every search document (prompts, answers,
    checkpoints, memories) with a snippet, and per term the documents holding it with their BM25 weight - the
    weights of the warehouse's ``search()`` macro (k1 = 1.2, b = 0.75), so the page ranks as ``serve`` and
    ``search`` do. Neither the documents nor the postings are held whole here or in DuckDB; ``index.js``
    comes last, with a digest of the others (the version a page asks for: no page mixes two reports).
    ``projects``: the project name of each session the site has pages for (``search_projects``)."""
    dump = functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.blake2b(digest_size=8)
    n_docs, n_postings = con.execute("select (select count(*) from int_search_docs), "
                                     "(select count(*) from int_search_terms)").fetchone()
    shards = 1
    while shards < MAX_SHARDS and shards * SHARD_BYTES < n_postings * POSTING_BYTES:
        shards *= 2
    plans = page_plans(con)  # the sessions of several pages: a prompt is on the page of its turn
    kinds: list[str] = []
    codes: list[str] = []
    # the snippet: the text's whitespace collapsed, cut; collapsed from its first 4 x SNIPPET characters when that
    # makes a snippet (the same one: a prefix collapses to a prefix of the whole), not from every whole answer
    # (422,000 documents of 236 MB: 3.2 -> 2.2 s)
    collapse = "regexp_replace({}, '\\s+', ' ', 'g')"
    head = collapse.format(f"left(coalesce(text, ''), {4 * SNIPPET})")
    # the time as fmt_ts prints it, by DuckDB (in UTC, as every connection): the datetime of each of 422,000
    # documents cost ~2 s to make and print; fmt_ts does a year before 1000 (it does not pad it)
    cursor = con.execute(f"""
        select kind, session_id, ref, title, strftime(written_at, '%Y-%m-%d %H:%M') as written,
               case when year(written_at) < 1000 then written_at end as odd_at,
               case when length(head) >= {SNIPPET} or length(coalesce(text, '')) <= {4 * SNIPPET}
                    then left(head, {SNIPPET})
                    else left({collapse.format("coalesce(text, '')")}, {SNIPPET}) end as snippet
        from (select *, {head} as head from int_search_docs) order by doc_id""")
    chunk = 0
    # the last session seen: its first page (None: the site has none) and its pages' plan (doc_id,
    # kind:session:ref, orders a session's documents of one kind together)
    at: tuple[str | None, str | None, list[tuple[int, int]] | None] = (None, None, None)
    while batch := cursor.fetchmany(CHUNK_DOCS):
        rows = []
        for kind, sid, ref, title, written, odd_at, snippet in batch:
            if kind not in kinds:
                kinds.append(kind)
            codes.append(_CODES[kinds.index(kind)])
            if sid != at[0]:
                at = (sid, wiki_pages.session_file(sid, 0, "html") if sid in projects else None, plans.get(sid))
            url = "" if at[1] is None else doc_url(kind, sid, ref, at[2], at[1])
            rows.append([kind, url, title or sid or ref or "", fmt_ts(odd_at) if odd_at else written or "", snippet,
                         projects.get(sid, "")])
        # orjson writes these lists of strings as json.dumps(ensure_ascii=False) does, 5x faster
        text = _js("searchDocs", str(chunk), orjson.dumps(rows).decode())
        digest.update(text.encode())
        yield {f"{SEARCH_DIR}/docs-{chunk}.js": text}
        chunk += 1
    groups = max(1, min(shards, -(-n_postings * POSTING_BYTES // GROUP_BYTES)))
    per_group = -(-shards // groups)
    try:
        con.execute("""
            create or replace temp table _search_positions as
            select doc_id, n_terms, row_number() over (order by doc_id) - 1 as i from int_search_docs""")
        con.execute(f"""
            create or replace temp table _search_shards as
            select term, {_SHARD_OF_TERM} % {shards} as shard, count(*) as df from int_search_terms group by term""")
        # every posting's shard, position and weight, joined once and stored in shard order, so that each group's
        # query reads its shards' rows alone (98,000 sessions, 8.8 M postings in 13 groups: each group joining the
        # whole of int_search_terms took 9.5 s, this 3.4 s)
        con.execute("""
            create or replace temp table _search_postings as
            with corpus as (select count(*) as n, avg(n_terms) as avg_terms from int_search_docs)
            select s.shard, t.term, p.i,
                   round(bm25_weight(t.tf, s.df, p.n_terms, corpus.n, corpus.avg_terms), 3) as weight
            from int_search_terms t join _search_shards s using (term) join _search_positions p using (doc_id)
                 cross join corpus
            order by s.shard""")
        for first in range(0, shards, per_group):
            # a DOUBLE rounded to 3 places prints as Python's json does (every such value checked in -2000..2000)
            postings = con.execute(f"""
                select shard, term, string_agg(i::varchar || ',' || weight::varchar, ',' order by i)
                from _search_postings where shard between {first} and {first + per_group - 1}
                group by shard, term order by shard, term""").fetchall()
            by_shard: dict[int, list[str]] = {k: [] for k in range(first, min(shards, first + per_group))}
            for shard, term, text in postings:
                by_shard[shard].append(f"{dump(term)}:[{text}]")
            del postings
            files = {}
            for shard, terms in by_shard.items():
                files[f"{SEARCH_DIR}/terms-{shard}.js"] = text = _js("searchTerms", str(shard),
                                                                     "{" + ",".join(terms) + "}")
                digest.update(text.encode())
            yield files
    finally:
        con.execute("drop table if exists _search_positions")
        con.execute("drop table if exists _search_shards")
        con.execute("drop table if exists _search_postings")
    meta = {"version": digest.hexdigest(), "shards": shards, "chunk": CHUNK_DOCS, "docs": n_docs, "kinds": kinds,
            "doc_kinds": "".join(codes)}
    yield {f"{SEARCH_DIR}/index.js": _script("window.SEARCH_META = " + dump(meta))}


def search_projects(data: WikiData) -> dict[str, str]:
    """What ``search_files`` needs of the page data: each session's project name (a result links its session)."""
    return {s["session_id"]: data.project_name.get(s["project_id"], "") for s in data.sessions}


_CODES = "0123456789abcdefghijklmnopqrstuvwxyz"  # a document's kind in ``doc_kinds``: its place in ``kinds``


def _renderer(data: WikiData, svgs: dict[str, str]):
    """``render(template, path, **values) -> text``: a page with what every page shows (the nav)."""
    env = _env()
    nav_months = wiki_pages.month_counts(wiki_pages.month_pages(data.sessions))
    common = {"data": data, "nav": catalog.nav(data), "months": nav_months, "svgs": svgs,
              "project_url": lambda pid, root: f"{root}projects/{data.project_slug.get(pid, pid)}.html",
              "session_url": lambda sid, root: f"{root}sessions/{page_name(sid)}.html",
              "month_url": lambda m, page, root: f"{root}{wiki_pages.month_file(m, page, 'html')}"}

    def render(name: str, rel: str, **kw: object) -> str:
        return env.get_template(name).render(root="../" * rel.count("/"), **common, **kw)
    return render


def session_pages(data: WikiData, sessions: list[dict]) -> dict[str, str]:
    """The pages of each of ``sessions`` as {relative path: text} (``data`` holds all their turns; no chart
    is drawn on one)."""
    render = _renderer(data, {})
    files = {}
    for s in sessions:
        ranges = wiki_pages.session_ranges(data, s["session_id"])
        for page in range(max(1, len(ranges))):
            files.update(session_page(data, s, page, ranges, render))
    return files


def _listed(turn: dict | None, calls: list[dict]) -> dict:
    """A prompt and its tool calls as its page lists them: on a timeline, at most PAGE_CALLS of them (the
    failed ones first among those past it, up to FAILED_PER_PROMPT), with how many are left out."""
    limit, total = wiki_queries.PAGE_CALLS, len(calls)
    n_failed = sum(c["is_success"] is False for c in calls)
    if total > limit:
        late_failed = [c for c in calls[limit:] if c["is_success"] is False][:wiki_pages.FAILED_PER_PROMPT]
        calls = calls[:limit] + late_failed
    return {"turn": turn, "calls": timeline(turn, calls), "n_calls": total, "n_failed": n_failed,
            "n_hidden": total - len(calls)}


def session_page(data: WikiData, s: dict, page: int, ranges: list[tuple[int, int]],
                 render: Callable[..., str] | None = None) -> dict[str, str]:
    """Page ``page`` of a session (``ranges``: its pages, ``wiki.queries.page_ranges``; none: one page) as
    {relative path: text}: the first page with what the session is and its first prompts, each other page
    the prompts of its range."""
    render = render or _renderer(data, {})
    sid = s["session_id"]
    first, last = ranges[page] if ranges else (None, None)
    by_turn = data.calls_by_turn(sid)
    prompts = [_listed(t, by_turn.get(t["turn_index"], [])) for t in data.turns.get(sid, [])
               if first is None or first <= t["turn_index"] <= last]
    rel = wiki_pages.session_file(sid, page, "html")
    up = "../" * rel.count("/")
    shown = sorted({0, len(ranges) - 1, *range(max(0, page - 2), min(len(ranges), page + 3))}) if ranges else []
    pager = []
    for k in shown:  # the first and last pages and those around this one, a gap where pages are left out
        if pager and k > pager[-1]["n"]:
            pager.append({"gap": True})
        first_turn, last_turn = ranges[k]
        pager.append({"n": k + 1, "url": up + wiki_pages.session_file(sid, k, "html"), "here": k == page,
                      "first": first_turn + 1, "last": last_turn + 1, "gap": False})
    before = _listed(None, by_turn.get(None, [])) if page == 0 else None
    return {rel: render("session.html", rel, s=s, prompts=prompts, before=before, answer_max=ANSWER_MAX,
                        page_index=page, pager=pager, n_pages=len(ranges),
                        prev=up + wiki_pages.session_file(sid, page - 1, "html") if page > 0 else None,
                        next=up + wiki_pages.session_file(sid, page + 1, "html") if page + 1 < len(ranges) else None,
                        range=(ranges[page][0] + 1, ranges[page][1] + 1) if ranges else None)}


def site_files(data: WikiData, svgs: dict[str, str],
               kept: Callable[[str, str, dict], bool] | None = None) -> Iterator[tuple[str, str | None]]:
    """Every file of the site but the sessions' pages (``session_pages``, which ``report``'s workers write) and
    the search index's (``search_files``), one at a time as (relative path, text): a pure function of the page
    data, its pages those of ``wiki.catalog.PAGES``. One at a time: the month pages of 98,000 sessions are
    85 MB of HTML, which a dict of every page held until the last was rendered. A page ``kept`` says is as
    the last report wrote it (told its template, path and values) is not rendered: its text is None."""
    render = _renderer(data, svgs)
    for template, rel, values in catalog.site_pages(data, svgs):
        yield rel, None if kept is not None and kept(template, rel, values) else render(template, rel, **values)
    for name in STATIC:
        yield f"static/{name}", (HERE / "static" / name).read_text(encoding="utf-8")
    yield from svgs.items()
