"""The static HTML site (``DIR/site/index.html``), from the same page data as the wiki
(``wiki.queries.WikiData``): Jinja2 templates under ``templates/``, one stylesheet and one small script
under ``static/``, the wiki's SVG charts, and a prebuilt search index the search page loads - so it
opens from ``file://`` with no server and no network. Text from the history is rendered as markdown
and sanitized (``render``); everything else Jinja2 escapes.

``python -m pipeline serve`` serves the same files and adds live search (``serve``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

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
from ..wiki.queries import WikiData
from .render import markdown

HERE = Path(__file__).parent
ANSWER_MAX = 20_000  # characters of an answer shown on a session page (the warehouse has all of it)
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


def search_projects(data: WikiData) -> dict[str, str]:
    """What the search index (``search.SearchIndex``) needs of the page data: each session's project name (a
    result links its session)."""
    return {s["session_id"]: data.project_name.get(s["project_id"], "") for s in data.sessions}



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
    the search index's (``search.SearchIndex``), one at a time as (relative path, text): a pure function of the page
    data, its pages those of ``wiki.catalog.PAGES``. One at a time: the month pages of 98,000 sessions are
    85 MB of HTML, which a dict of every page held until the last was rendered. A page ``kept`` says is as
    the last report wrote it (told its template, path and values) is not rendered: its text is None."""
    render = _renderer(data, svgs)
    for template, rel, values in catalog.site_pages(data, svgs):
        yield rel, None if kept is not None and kept(template, rel, values) else render(template, rel, **values)
    for name in STATIC:
        yield f"static/{name}", (HERE / "static" / name).read_text(encoding="utf-8")
    yield from svgs.items()
