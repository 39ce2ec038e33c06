"""Every page of the wiki and the site, declared once.

A ``Page`` names what it reads from the warehouse (``query``; most pages read the shared ``WikiData``),
how the wiki writes it (``wiki``: a pure function to markdown), which site template renders it
(``site``, given ``values``), whether and where it is in the navigation (the order of ``PAGES``), and
when it exists at all (``shown``). ``build_pages`` (the wiki) and ``site.site_files`` both walk this one
list, the site's navigation bar and the wiki overview's list of pages come from it too: a new page is an
entry here and its two templates.

A page of a family (a project, a month) is one entry whose ``each`` names its members. The session pages
are the one family kept out: ``report`` renders them a chunk at a time on worker processes, a page per
range of prompts (``pages.session_pages``, ``site.session_pages``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import duckdb

from .markdown import month_range
from .pages import (
    LATEST_SESSIONS,
    TOP_FILES,
    days_page,
    failures_page,
    files_page,
    index_page,
    is_day,
    month_days,
    month_of,
    month_page,
    month_pages,
    month_stem,
    people_page,
    project_page,
    runs_page,
    session_pages,
    sessions_page,
    topics_page,
    usage_page,
)
from .queries import WikiData, failures, rejects, runs
from .queries import load as load_shared


@dataclass
class Context:
    """What several pages need and is worked out once per build: the projects with a topic chart and the
    top topic of each."""

    charted: set[str] = field(default_factory=set)
    top_topic: dict[str, str] = field(default_factory=dict)


def _one(_data: WikiData, _ctx: Context) -> Iterable[tuple[str, dict]]:
    return [("", {})]


def _nothing(_data: WikiData, _ctx: Context, **_kw: object) -> dict:
    return {}


@dataclass(frozen=True)
class Page:
    name: str  # the file (``name.md``, ``name.html``), or the folder of a family
    label: str  # in the navigation and the wiki overview's list
    about: str = ""  # one line, in the wiki overview's list ("" for pages not listed there)
    wiki: Callable[..., str] | None = None  # (data, ctx, **member) -> markdown; None: a site-only page
    site: str | None = None  # the site's template; None: a wiki-only page
    values: Callable[..., dict] = _nothing  # (data, ctx, **member) -> what the template is given
    query: Callable[[duckdb.DuckDBPyConnection], object] | None = None  # its own data: ``data.page_data[name]``
    shown: Callable[[WikiData], bool] = lambda _data: True
    nav: bool = True  # a link in the site's navigation bar
    anchor: str = ""  # a place on another page rather than a page (Projects: the overview's table)
    each: Callable[[WikiData, Context], Iterable[tuple[str, dict]]] = _one  # a family: (path stem, member)

    def path(self, stem: str, ext: str) -> str:
        return f"{stem or self.name}.{ext}"


def _project_members(data: WikiData, ctx: Context) -> Iterable[tuple[str, dict]]:
    return [(f"projects/{data.project_slug[p['project_id']]}", {"p": p}) for p in data.projects]


def _project_values(data: WikiData, ctx: Context, p: dict) -> dict:
    pid = p["project_id"]
    return {"p": p, "slug": data.project_slug[pid], "topic_chart": pid in ctx.charted,
            "sessions": [x for x in data.sessions if x["project_id"] == pid], "usage": data.project_usage[pid]}


def _month_members(data: WikiData, _ctx: Context) -> Iterable[tuple[str, dict]]:
    """Each page of each month (or day of a month listed by day), then the page of each month listed by day."""
    listing = month_pages(data.sessions)
    return [*((month_stem(m, i), {"month": m, "page": i, "pages": pages, "days": None})
              for m, pages in listing.items() for i in range(len(pages))),
            *((month_stem(m, 0), {"month": m, "page": 0, "pages": [], "days": days})
              for m, days in month_days(listing).items())]


# The site's sessions page lists the latest this many sessions (its filters and sorting work on them, in the page);
# every session is on the month pages, a page per MONTH_PAGE of them. 19,600 sessions made a 13 MB page (a
# team's lake of 200 machines); 10,000 make ~6.5 MB.
SESSIONS_LISTED = 10_000


def _sessions_values(data: WikiData, _ctx: Context) -> dict:
    listed = data.sessions[:SESSIONS_LISTED]  # latest first
    names = {x["project_id"]: data.project_name.get(x["project_id"], x["project_id"]) for x in listed}
    return {"listed": listed, "n_empty": sum(1 for x in listed if not x["n_turns"]),
            "projects": sorted(set(names.values())), "clients": sorted({x["client"] for x in listed}),
            "month_names": sorted({x["started_at"].strftime("%Y-%m") for x in listed if x["started_at"]},
                                  reverse=True),
            "models": sorted({m for x in listed for m in (x["models"] or [])})}


def _runs_query(con: duckdb.DuckDBPyConnection) -> dict:
    return {"runs": runs(con), "rejects": rejects(con)}


PAGES: tuple[Page, ...] = (
    Page("index", "Overview", nav=False,
         wiki=lambda d, c: index_page(d, c.top_topic, listed(d)),
         site="index.html", values=lambda d, c: {"top_topic": c.top_topic, "latest": d.sessions[:LATEST_SESSIONS]}),
    Page("sessions", "Sessions", "every session by month, with its cost",
         wiki=lambda d, c: sessions_page(d), site="sessions.html", values=_sessions_values),
    Page("projects", "Projects", anchor="#projects",
         wiki=lambda d, c, p: project_page(d, p, p["project_id"] in c.charted),
         site="project.html", values=_project_values, each=_project_members),
    Page("files", "Files", "the most important files of each project and the files that change together",
         wiki=lambda d, c: files_page(d), site="files.html"),
    Page("topics", "Topics", "what each project has been about, month by month",
         wiki=lambda d, c: topics_page(d, c.charted), site="topics.html",
         values=lambda d, c: {"charted": c.charted}),
    Page("usage", "Usage", "tokens, AI credits and dollars per week, model and project",
         wiki=lambda d, c: usage_page(d), site="usage.html"),
    Page("failures", "Failures", "prompts that errored or were cancelled and tool calls that failed",
         query=failures, wiki=lambda d, c: failures_page(d.page_data["failures"]),
         site="failures.html", values=lambda d, c: {"failures": d.page_data["failures"]}),
    Page("people", "People", "who did what, and what it cost", shown=lambda d: len(d.people) > 1,
         wiki=lambda d, c: people_page(d), site="people.html"),
    Page("runs", "Runs", "when the warehouse was loaded, what it read and what it rejected",
         query=_runs_query, wiki=lambda d, c: runs_page(d.page_data["runs"]),
         site="runs.html", values=lambda d, c: d.page_data["runs"]),
    Page("search", "Search", nav=False, site="search.html"),
    Page("months", "Months", nav=False,
         wiki=lambda d, c, month, page, pages, days: days_page(month, days) if days else month_page(d, month, pages,
                                                                                                    page),
         site="month.html", values=lambda d, c, month, page, pages, days: {
             "month": month, "page": page, "pages": pages, "days": days,
             "up": month_of(month) if is_day(month) else None,
             "n": sum(x["n"] for x in days) if days else sum(len(x) for x in pages)},
         each=_month_members),
)


def listed(data: WikiData) -> list[tuple[str, str, str]]:
    """The pages the wiki overview lists: (label, file, about)."""
    return [(p.label, p.path("", "md"), p.about) for p in PAGES if p.wiki and p.about and p.shown(data)]


def nav(data: WikiData) -> list[tuple[str, str]]:
    """The site's navigation bar: (label, link from the site's root)."""
    return [(p.label, f"index.html{p.anchor}" if p.anchor else p.path("", "html"))
            for p in PAGES if p.nav and p.shown(data)]


def load(con: duckdb.DuckDBPyConnection, sessions: bool = True) -> WikiData:
    """What the pages show: the shared page data (``queries.load``) and each page's own (``Page.query``)."""
    data = load_shared(con, sessions)
    data.page_data.update({p.name: p.query(con) for p in PAGES if p.query})
    return data


def context(data: WikiData, specs: dict[str, tuple]) -> Context:
    return Context(charted={p["project_id"] for p in data.projects
                            if f"charts/topics-{data.project_slug[p['project_id']]}.svg" in specs},
                   top_topic={pid: ts[0]["term"] for pid, ts in data.topics.items() if ts})


def chart_specs(data: WikiData) -> dict[str, tuple]:
    """Every chart as {relative path: (charts function, arguments)} (drawn by ``charts``)."""
    specs: dict[str, tuple] = {}
    for p in data.projects:
        pid, s = p["project_id"], data.project_slug[p["project_id"]]
        top = data.files.get(pid, [])[:TOP_FILES]
        if top:
            specs[f"charts/files-{s}.svg"] = ("horizontal_bars", (
                [f["path"] for f in top], [f["score"] for f in top], f"Most important files: {p['name']}", "score"))
        months = month_range({t["month"] for t in data.trends.get(pid, [])})
        if len(months) > 1:
            terms = [t["term"] for t in data.topics.get(pid, [])[:5]]
            by = {(t["term"], t["month"]): t["weight"] for t in data.trends[pid]}
            specs[f"charts/topics-{s}.svg"] = ("term_trends", (
                months, {term: [by.get((term, m), 0.0) for m in months] for term in terms},
                f"Top topics by month: {p['name']}"))
    weekly = data.weekly
    specs["charts/activity.svg"] = ("weekly_activity", (
        [w["week"] for w in weekly], [w["n_turns"] for w in weekly], [w["n_tool_calls"] for w in weekly],
        [w["n_failed_tool_calls"] for w in weekly]))
    if data.tools:
        specs["charts/tools.svg"] = ("horizontal_bars", (
            [t["tool_name"] for t in data.tools], [t["n"] for t in data.tools], "Tool calls by tool", "calls",
            [t["f"] for t in data.tools], "failed"))
    return specs


def build_pages(data: WikiData, with_sessions: bool = True, kept: Callable[[str, str, dict], bool] | None = None
                ) -> tuple[dict[str, str | None], dict[str, tuple]]:
    """Every wiki page as {relative path: content} and every chart as {relative path: (chart name,
    arguments)}: a pure function of what ``load`` read. Without the session pages when ``with_sessions``
    is False (``report``'s workers write them: ``pages.session_pages``). A page of a family that ``kept`` says
    is as the last report wrote it (told the family, its path and its member) is not rendered: its content is
    None."""
    specs = chart_specs(data)
    ctx = context(data, specs)
    out: dict[str, str | None] = {}
    for page in PAGES:
        if page.wiki and page.shown(data):
            for stem, member in page.each(data, ctx):
                rel = page.path(stem, "md")
                out[rel] = None if kept is not None and stem and kept(page.name, rel, member) else \
                    page.wiki(data, ctx, **member)
    if with_sessions:
        out.update(session_pages(data, data.sessions))
    return out, specs


def site_pages(data: WikiData, svgs: dict[str, str]) -> Iterable[tuple[str, str, dict]]:
    """Every site page but the sessions' as (template, relative path, values): ``site.site_files`` renders
    them."""
    ctx = context(data, svgs)
    for page in PAGES:
        if page.site and page.shown(data):
            for stem, member in page.each(data, ctx):
                yield page.site, page.path(stem, "html"), page.values(data, ctx, **member)
