"""The static site: sanitizing, the pages it writes, and - in a real browser (Debian's chromium driven
by Playwright) - following links, searching, and a hostile prompt rendered inert. Browser tests skip
when chromium or Playwright is missing, unless COPILOT_TEST_BROWSER=required (CI sets it).

``make screenshots`` runs the browser tests with SITE_SCREENSHOTS=data/screenshots: the README's images.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.ingest import ingest
from pipeline.site import timeline
from pipeline.site.render import markdown
from pipeline.wiki import pages
from pipeline.wiki.markdown import quoted, safe_markdown

from .conftest import REPO, SAMPLE_HOME, rows

VSCODE_USER = REPO / "data" / "sample" / "vscode-user"
HOSTILE = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 1">',
    "[click me](javascript:window.__pwned=1)",
    "[ref][1]\n\n[1]: javascript:window.__pwned=1",
    "<javascript:window.__pwned=1>",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '<a href="javascript:window.__pwned=1">raw link</a>',
    "<svg onload=window.__pwned=1>",
    "<!-- comment --><iframe src=//evil.example></iframe>",
    "![remote](https://evil.example/pixel.png)",
]


# ------------------------------------------------------------------------------ sanitizing (no browser)
class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_from_the_history_renders_inert(text):
    parser = _Tags()
    parser.feed(str(markdown(text)))
    for tag, attrs in parser.tags:  # the elements a browser would build
        assert tag not in {"script", "img", "iframe", "svg", "object", "embed", "style"}
        assert not [a for a in attrs if a.startswith("on") or a == "style"]
        assert not re.match(r"\s*(javascript|data|vbscript|file):", attrs.get("href", ""), re.I)


def test_markdown_keeps_what_the_assistant_wrote():
    html = str(markdown("# Plan\n\n- one\n- **two**\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```py\nx = 1 < 2\n```\n"
                        "[docs](https://example.com/a)"))
    assert "<h1>Plan</h1>" in html and "<strong>two</strong>" in html and "<td>1</td>" in html
    assert '<code class="language-py">x = 1 &lt; 2' in html
    assert '<a href="https://example.com/a" rel="noopener noreferrer nofollow">docs</a>' in html
    assert "more characters in the warehouse" in str(markdown("x" * 50, limit=10))


def test_wiki_markdown_is_kept_as_markdown_but_inert():
    text = ("## Steps\n\n1. run `a < b`\n<script>x()</script>\n[l](javascript:alert(1))\n"
            "[r]: vbscript:x\n```\n<b>code</b>\n```\n\n    <i>indented code</i>")
    out = safe_markdown(text)
    assert "## Steps" in out and "`a < b`" in out  # code spans keep their text
    assert "&lt;script>x()&lt;/script>" in out
    assert "](#blocked-javascript:alert(1))" in out and "[r]: #blocked-vbscript:x" in out
    assert "```\n<b>code</b>\n```" in out and "    <i>indented code</i>" in out
    assert quoted("a\n\nb") == "> a\n>\n> b"


def test_timeline_places_calls_on_the_prompt_span():
    from datetime import datetime, timedelta, timezone

    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    turn = {"started_at": t0, "ended_at": t0 + timedelta(seconds=100)}
    calls = [{"called_at": t0 + timedelta(seconds=50), "duration_ms": 25_000},
             {"called_at": None, "duration_ms": None}]
    placed = timeline(turn, calls)
    assert (placed[0]["offset_s"], placed[0]["left"], placed[0]["width"]) == (50.0, 50.0, 25.0)
    assert placed[1]["left"] is None and placed[1]["offset_s"] is None


# ------------------------------------------------------------------------------ the demo site
def _hostile_home(tmp_path: Path) -> Path:
    home = tmp_path / "copilot-home"
    shutil.copytree(SAMPLE_HOME, home)
    folder = home / "session-state" / "hostile-session"
    folder.mkdir()
    (folder / "workspace.yaml").write_text("summary: '<img src=x onerror=window.__pwned=1> hostile'\n"
                                           "cwd: /home/dev/evil\n")
    events = [{"type": "session.start", "data": {"sessionId": "hostile-session"}, "id": "0",
               "timestamp": "2026-10-01T00:00:00Z"},
              {"type": "user.message", "data": {"content": "\n".join(HOSTILE)}, "id": "1",
               "timestamp": "2026-10-01T00:00:01Z"},
              {"type": "assistant.message", "data": {"messageId": "m", "content": "\n\n".join(HOSTILE),
                                                     "toolRequests": []}, "id": "2",
               "timestamp": "2026-10-01T00:00:02Z"},
              {"type": "user.message", "data": {"content": "修复登录页面的错误，重写登录页面"}, "id": "3",
               "timestamp": "2026-10-01T00:01:00Z"}]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return home


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The sample corpus plus a session of hostile text and one of Chinese prompts."""
    tmp = tmp_path_factory.mktemp("site")
    wh, out = tmp / "w.duckdb", tmp / "out"
    ingest(wh, [_hostile_home(tmp)], [VSCODE_USER])
    assert main(["report", "--warehouse", str(wh), "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """What `make demo` writes (the README's screenshots are of it)."""
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--out", str(out), "--quiet"]) == 0
    return out


def test_the_site_has_every_page_and_no_network(site):
    root = site / "site"
    sessions = list((root / "sessions").glob("*.html"))
    assert (root / "index.html").is_file() and (root / "search.html").is_file() and len(sessions) == 14
    for name in ("files.html", "topics.html", "usage.html", "runs.html", "sessions.html", "failures.html",
                 "static/site.css", "static/sessions.js", "search/index.js", "search/docs-0.js", "search/terms-0.js",
                 "charts/activity.svg"):
        assert (root / name).is_file(), name
    assert list((root / "months").glob("*.html")) and list((root / "projects").glob("*.html"))
    for page in root.rglob("*.html"):
        parser = _Tags()
        parser.feed(page.read_text())
        for tag, attrs in parser.tags:
            target = attrs.get("src") or attrs.get("href") or ""
            if tag in {"script", "img", "link"}:  # what a browser loads by itself: only the site's own files
                assert target and "//" not in target and ":" not in target, f"{page}: {tag} {target}"
            target = target.split("#")[0].split("?")[0]
            if target and ":" not in target and "//" not in target:
                assert (page.parent / target).resolve().is_file(), f"{page.name}: broken link {target}"


def test_each_page_is_declared_once_and_both_the_wiki_and_the_site_are_built_from_the_list(site, monkeypatch):
    # wiki.catalog.PAGES: a page's wiki writer, site template and place in the navigation, all in one entry
    import duckdb

    from pipeline.wiki import catalog

    root, wiki = site / "site", site / "wiki"
    nav = re.search(r"<nav>(.*?)</nav>", (root / "files.html").read_text(), re.S).group(1)
    assert re.findall(r'href="([^"]+)">([^<]+)<', nav) == [
        (href, label) for label, href in [("Sessions", "sessions.html"), ("Projects", "index.html#projects"),
                                          ("Files", "files.html"), ("Topics", "topics.html"), ("Usage", "usage.html"),
                                          ("Failures", "failures.html"), ("Runs", "runs.html")]]
    for p in catalog.PAGES:  # every single page in both trees (people only with several people)
        if p.each is catalog._one and p.name != "people":
            assert (root / f"{p.name}.html").is_file() == bool(p.site), p.name
            assert (wiki / f"{p.name}.md").is_file() == bool(p.wiki), p.name
    index = (wiki / "index.md").read_text()
    with duckdb.connect(str(site.parent / "w.duckdb"), read_only=True) as con:
        listed = catalog.listed(catalog.load(con))
    assert [label for label, _file, _about in listed] == ["Sessions", "Files", "Topics", "Usage", "Failures", "Runs"]
    for label, file, about in listed:
        assert f"- [{label}]({file}): {about}" in index
    assert "| month | sessions | prompts | tool calls | failed | cost |" in (wiki / "sessions.md").read_text()
    failures = (wiki / "failures.md").read_text()
    assert "pytest tests/test_token_refresh.py" in failures and "## Prompts: " in failures
    assert "## Per project" in (wiki / "usage.md").read_text()
    # a page added to the list is in both trees and in the navigation, and nothing else is touched
    extra = catalog.Page("extra", "Extra", "a page declared in one place", wiki=lambda d, c: "# Extra\n",
                         site="runs.html", values=lambda d, c: d.page_data["runs"])
    monkeypatch.setattr(catalog, "PAGES", (*catalog.PAGES, extra))
    out = site.parent / "extra"
    assert main(["report", "--warehouse", str(site.parent / "w.duckdb"), "--out", str(out), "--quiet"]) == 0
    assert (out / "wiki" / "extra.md").read_text() == "# Extra\n" and (out / "site" / "extra.html").is_file()
    assert '<a href="extra.html">Extra</a>' in (out / "site" / "index.html").read_text()
    assert "- [Extra](extra.md): a page declared in one place" in (out / "wiki" / "index.md").read_text()


def test_a_failed_tool_call_shows_its_error(site):
    page = (site / "site" / "sessions" / "dd47978c-bf05-5f0e-ae2a-1880e2c4898a.html").read_text()
    failed = re.search(r'<li class="call failed">.*?</li>', page, re.S).group(0)
    assert "bash" in failed and "pytest tests/test_token_refresh.py" in failed and "1 failed" in failed


def test_cjk_prompts_get_topics_and_search(site):
    wh = site.parent / "w.duckdb"
    import duckdb
    con = duckdb.connect(str(wh), read_only=True)
    terms = {r[0] for r in con.execute("select term from report_topics t join dim_sessions s using (project_id) "
                                       "where s.session_id = 'hostile-session'").fetchall()}
    hits = con.execute("select session_id from search('登录页面')").fetchall()
    con.close()
    assert {"登录", "页面"} <= terms
    assert hits[0][0] == "hostile-session"


# ------------------------------------------------------------------------------ in a real browser
def _browser():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if not exe or sync_playwright is None:
        if os.environ.get("COPILOT_TEST_BROWSER") == "required":
            pytest.fail("the browser tests are required here but chromium or playwright is missing")
        pytest.skip("no chromium or playwright for the browser tests")
    return exe, sync_playwright


@pytest.fixture(scope="module")
def page():
    exe, sync_playwright = _browser()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        pg = context.new_page()
        pg.errors = []
        pg.on("pageerror", lambda e: pg.errors.append(str(e)))
        pg.on("dialog", lambda d: (pg.errors.append("dialog: " + d.message), d.dismiss()))
        requests = []
        pg.on("request", lambda r: requests.append(r.url))
        pg.requests = requests
        yield pg
        browser.close()


def _shot(page, name: str, tmp: Path) -> None:
    folder = Path(os.environ.get("SITE_SCREENSHOTS") or tmp)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=name not in ("index", "index-phone", "session-phone"))


def test_browse_from_the_index_to_a_session_and_back(demo, page, tmp_path):
    index = (demo / "site" / "index.html").resolve().as_uri()
    page.goto(index)
    assert page.title() == "Overview · Copilot history"
    _shot(page, "index", tmp_path)
    page.click("text=Token refresh rotation")
    assert page.url.endswith("/sessions/dd47978c-bf05-5f0e-ae2a-1880e2c4898a.html")
    failed = page.locator("li.call.failed")
    assert failed.count() == 1 and "1 failed" in failed.inner_text()
    _shot(page, "session", tmp_path)
    page.click(".crumbs >> text=acme-api")
    assert "/projects/acme-api-" in page.url and page.locator("main > h1").inner_text() == "acme-api"
    _shot(page, "project", tmp_path)
    page.go_back()
    page.go_back()
    assert page.url == index
    page.click("ul.months >> text=2026-09")
    assert page.locator("main > h1").inner_text() == "Sessions of 2026-09"
    n = rows(demo / "warehouse.duckdb", "select count(*) from dim_sessions where strftime(started_at, '%Y-%m') = "
                                        "'2026-09'")[0][0]
    assert n > 1 and page.locator("table.sessions tbody tr").count() == n
    assert not page.errors and all(u.startswith("file://") for u in page.requests)


def test_search_from_a_file_url(demo, site, page, tmp_path):
    page.goto((demo / "site" / "index.html").resolve().as_uri())
    page.fill(".quick-search input", "token refresh")
    page.press(".quick-search input", "Enter")
    page.wait_for_selector("#results li")
    assert "results (index)" in page.inner_text("#status")
    first = page.locator("#results li a").first
    assert first.inner_text() == "Token refresh rotation"
    _shot(page, "search", tmp_path)
    from playwright.sync_api import expect

    page.uncheck("input[value=checkpoint]")
    expect(page.locator("#results")).not_to_contain_text("· checkpoint")
    page.goto((site / "site" / "search.html").resolve().as_uri())  # the site with Chinese prompts
    page.fill("#q", "登录页面")
    expect(page.locator("#status")).to_contain_text("1 result (index)")
    page.locator("#results li a").first.click()
    page.wait_for_url("**/sessions/hostile-session.html#prompt-1")
    assert not page.errors


def test_the_index_in_many_files_ranks_as_search_does(site, page, tmp_path, monkeypatch):
    """The prebuilt index cut into many shards and chunks (as an organisation's is): the page loads only the
    files a search needs and ranks as the warehouse's search() does, for every kind of word."""
    from pipeline.serve import search
    from pipeline.site import search as site_module
    from pipeline.warehouse import connect

    wh = site.parent / "w.duckdb"
    monkeypatch.setattr(site_module, "SHARD_BYTES", 512)
    monkeypatch.setattr(site_module, "CHUNK_DOCS", 3)
    monkeypatch.setattr(site_module, "GROUP_BYTES", 4096)  # several queries build the postings
    out = tmp_path / "out"
    assert main(["report", "--warehouse", str(wh), "--out", str(out), "--quiet"]) == 0
    index = out / "site" / "search"
    meta = json.loads((index / "index.js").read_text().split("=", 1)[1].rstrip(";\n"))
    con = connect(wh, read_only=True)
    try:
        n_docs, terms = con.execute("select (select count(*) from int_search_docs), "
                                    "(select list(distinct term order by term) from int_search_terms)").fetchone()
        # the shard of each term as the report computed it in SQL, and as shard_of (and search.js) computes it
        for shard, term in con.execute(f"select {site_module._SHARD_OF_TERM} % {meta['shards']}, term "
                                       "from (select distinct term from int_search_terms)").fetchall():
            assert site_module.shard_of(term, meta["shards"]) == shard, term
    finally:
        con.close()
    assert meta["docs"] == n_docs == len(meta["doc_kinds"]) and meta["shards"] >= 16
    assert len(list(index.glob("docs-*.js"))) == -(-n_docs // 3)
    assert len(list(index.glob("terms-*.js"))) == meta["shards"]
    assert not (out / "site" / "search-index.js").exists()
    page.goto((out / "site" / "search.html").resolve().as_uri())
    queries = ["token refresh", "登录页面", "the", "test", terms[len(terms) // 2], terms[-1], "qzxwvnohit"]
    for q in queries:
        got = page.evaluate("q => copilotSearch.search(q, 50)", q)
        want = search(wh, q, 50)
        assert [(h["kind"], h["url"], h["title"], h["snippet"], h["project"]) for h in got] == \
            [(h["kind"], h["url"], h["title"], h["snippet"], h["project"]) for h in want], q
        assert all(abs(g["score"] - w["score"]) < 0.005 for g, w in zip(got, want, strict=True)), q
    assert search(wh, queries[-1], 50) == [] and len(search(wh, queries[0], 50)) > 10
    loaded = {u.rsplit("/", 1)[1].split("?")[0] for u in page.requests if "/search/" in u}
    assert "index.js" in loaded and len(loaded) < meta["shards"] + len(list(index.glob("docs-*.js")))
    assert not page.errors


def test_a_report_after_a_change_rewrites_the_index_files_the_change_is_in(site, page, tmp_path, monkeypatch):
    """One session's documents changed, another's gone, then back: each report appends the documents that changed
    or came at new positions, leaves their old positions dead and keeps the chunks and shards that hold neither;
    the page ranks as search() does after each, and as the index built whole (--force) from the same warehouse."""
    import duckdb

    from pipeline.serve import search
    from pipeline.site import search as site_module

    monkeypatch.setattr(site_module, "SHARD_BYTES", 512)
    monkeypatch.setattr(site_module, "CHUNK_DOCS", 3)
    monkeypatch.setattr(site_module, "GROUP_BYTES", 4096)
    wh, out = tmp_path / "w.duckdb", tmp_path / "out"
    shutil.copy(site.parent / "w.duckdb", wh)
    index, state_file = out / "site" / "search", out / "site" / site_module.STATE

    def report(*flags: str) -> tuple[dict, dict]:
        before = {p.name: p.stat().st_mtime_ns for p in index.iterdir()} if index.is_dir() else {}
        assert main(["report", "--warehouse", str(wh), "--out", str(out), "--quiet", *flags]) == 0
        meta = json.loads((index / "index.js").read_text().split("=", 1)[1].rstrip(";\n"))
        kept = {n for n, t in before.items() if (index / n).is_file() and (index / n).stat().st_mtime_ns == t}
        return meta, {"kept": kept, "state": json.loads(state_file.read_text())}

    def ranks_as_search(meta: dict) -> None:
        page.goto((out / "site" / "search.html").resolve().as_uri())
        for q in ["token refresh", "test", "zebraquux", "the", *words[:3]]:
            got = page.evaluate("q => copilotSearch.search(q, 50)", q)
            want = search(wh, q, 50)
            assert [(h["kind"], h["url"], h["title"], h["snippet"], h["project"]) for h in got] == \
                [(h["kind"], h["url"], h["title"], h["snippet"], h["project"]) for h in want], q
            assert all(abs(g["score"] - w["score"]) < 0.0005 for g, w in zip(got, want, strict=True)), q
        assert not page.errors

    meta, first = report()
    with duckdb.connect(str(wh), read_only=True) as con:
        (changed, gone), n_docs = con.execute(
            "select list(session_id order by n desc, session_id)[1:2] from (select session_id, count(*) as n "
            "from int_search_docs where session_id is not null group by 1)").fetchone()[0], \
            con.execute("select count(*) from int_search_docs").fetchone()[0]
        words = [r[0] for r in con.execute("select term from int_search_terms where session_id = ? "
                                           "group by term order by count(*) desc, term limit 3", [gone]).fetchall()]
        gone_docs = con.execute("select * from int_search_docs where session_id = ?", [gone]).fetchall()
        gone_terms = con.execute("select * from int_search_terms where session_id = ?", [gone]).fetchall()
    assert meta["docs"] == meta["live"] == n_docs and "-" not in meta["doc_kinds"]
    with duckdb.connect(str(wh)) as con:  # a title and a word of one session changed; another session's gone
        con.execute("update int_search_docs set title = 'retitled', n_terms = n_terms + 3 where session_id = ?",
                    [changed])
        con.execute("insert into int_search_terms select doc_id, session_id, 'zebraquux', 3 from int_search_docs "
                    "where session_id = ? order by doc_id limit 1", [changed])
        con.execute("delete from int_search_docs where session_id = ?", [gone])
        con.execute("delete from int_search_terms where session_id = ?", [gone])
    meta, second = report()
    n_changed = first["state"]["sessions"][changed][1]
    n_gone = first["state"]["sessions"][gone][1]
    assert meta["docs"] == n_docs + n_changed and meta["live"] == n_docs - n_gone
    assert meta["doc_kinds"].count("-") == n_changed + n_gone and gone not in second["state"]["sessions"]
    assert second["state"]["sessions"][changed][0] == n_docs  # appended
    n_files = len(list(index.iterdir()))
    assert {"index.js", "ranks.js"} - second["kept"] and 0 < len(second["kept"]) < n_files
    ranks_as_search(meta)
    with duckdb.connect(str(wh)) as con:  # the gone session back: appended again
        con.executemany("insert into int_search_docs values (" + ", ".join("?" * len(gone_docs[0])) + ")", gone_docs)
        con.executemany("insert into int_search_terms values (?, ?, ?, ?)", gone_terms)
    meta, third = report()
    assert meta["docs"] == n_docs + n_changed + n_gone and meta["live"] == n_docs
    assert third["state"]["sessions"][gone][0] == n_docs + n_changed
    ranks_as_search(meta)
    meta, whole = report("--force")  # built whole: the same results from positions in order
    assert meta["docs"] == meta["live"] == n_docs and "-" not in meta["doc_kinds"]
    ranks_as_search(meta)
    meta, again = report()  # nothing changed: every file as it was, the version too
    assert again["kept"] >= {p.name for p in index.iterdir()} - {"index.js", "ranks.js"}
    assert again["state"]["version"] == whole["state"]["version"]


def test_the_index_snippets_and_times_are_those_of_the_whole_text(site, tmp_path):
    """A snippet is collapsed from the start of a text when that makes one, else from the whole text; either way
    it is the whole text's whitespace collapsed and cut, as search() shows it; a time is printed as fmt_ts does,
    a year before 1000 too."""
    import duckdb

    from pipeline.site import search as site_module
    from pipeline.warehouse import connect
    from pipeline.wiki.markdown import fmt_ts

    wh = tmp_path / "w.duckdb"
    shutil.copy(site.parent / "w.duckdb", wh)
    n = site_module.SNIPPET
    texts = [" \n\t" * (2 * n) + "needle " * 10,  # the start collapses to one space: the whole text is needed
             "word\t\t\n " * n, "x" * (5 * n), " " * (4 * n) + "y", "short  text\n", "", None]
    with duckdb.connect(str(wh)) as con:
        ids = [r[0] for r in con.execute("select doc_id from int_search_docs order by coalesce(session_id, ''), doc_id "
                                         "limit ?",
                                         [len(texts)]).fetchall()]
        for i, (doc, text) in enumerate(zip(ids, texts, strict=False)):
            con.execute("update int_search_docs set text = ?, written_at = case when ? then "
                        "timestamptz '0999-03-04 05:06:07+00' else written_at end where doc_id = ?", [text, i % 2, doc])
    con = connect(wh, read_only=True)
    try:
        want = con.execute(f"""select left(regexp_replace(coalesce(text, ''), '\\s+', ' ', 'g'), {n}), written_at
                               from int_search_docs order by coalesce(session_id, ''), doc_id""").fetchall()
        index = site_module.SearchIndex(con, {}, tmp_path / "site")
        got = [row for files in index.files() for name, text in files.items() if "docs-" in name
               for row in json.loads(text[text.index("["):text.rindex("]") + 1])]
    finally:
        con.close()
    assert len(got) == len(want) and any(w[1] and w[1].year < 1000 for w in want)
    assert [(g[4], g[3]) for g in got] == [(snippet, fmt_ts(at)) for snippet, at in want]
    assert got[0][4] == " needle needle needle needle needle needle needle needle needle needle "[:n]


def test_the_sessions_page_lists_the_latest_and_every_session_is_in_its_month(site, tmp_path, monkeypatch):
    """An organisation's history: the sessions page lists the latest SESSIONS_LISTED (its filters offer what they
    hold) and links the months, whose pages hold every session."""
    from pipeline.warehouse import connect
    from pipeline.wiki import catalog

    wh = site.parent / "w.duckdb"
    monkeypatch.setattr(catalog, "SESSIONS_LISTED", 5)
    out = tmp_path / "out"
    assert main(["report", "--warehouse", str(wh), "--out", str(out), "--quiet"]) == 0
    con = connect(wh, read_only=True)
    try:
        ids = [r[0] for r in con.execute("select session_id from dim_sessions "
                                         "order by started_at desc nulls last, session_id").fetchall()]
    finally:
        con.close()
    root = out / "site"
    page = (root / "sessions.html").read_text()
    rows = re.findall(r'<tr data-started=.*?href="sessions/([^"]+)\.html"', page, re.S)
    assert len(ids) > 5 and len(rows) == 5
    assert f"The latest 5 sessions of {len(ids)}" in page
    months = re.findall(r'href="(months/[^"]+\.html)"', page.split("The latest", 1)[1].split("</p>", 1)[0])
    assert months and all((root / m).is_file() for m in months)
    listed_months = set(re.findall(r'<option>(\d{4}-\d{2})</option>', page))
    assert listed_months == {m for m in re.findall(r'data-month="([^"]+)"', page) if m != "undated"}
    in_months = "".join(p.read_text() for p in (root / "months").glob("*.html"))
    assert all(f"sessions/{pages.page_name(sid)}.html" in in_months for sid in ids)


def test_a_hostile_prompt_renders_inert(site, page):
    page.goto((site / "site" / "sessions" / "hostile-session.html").resolve().as_uri())
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    main_html = page.inner_html("main")
    assert page.locator("main script, main img, main iframe, main svg:not(.bar)").count() == 0
    assert page.locator("main a[href^='javascript'], main a[href^='data']").count() == 0
    assert "window.__pwned = 1</script>" not in main_html  # shown as text, escaped
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in main_html
    for link in page.locator("main .answer a").all():
        link.click()
    assert page.evaluate("window.__pwned") is None and not page.errors


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_adds_live_search(site, page):
    import uvicorn

    from pipeline.serve import app

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app(site / "site", site.parent / "w.duckdb"), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(100):
            if server.started:
                break
            time.sleep(0.05)
        api = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/search?q=token+refresh&k=3"))
        assert len(api) == 3 and api[0]["score"] >= api[1]["score"] >= api[2]["score"]
        assert api[0]["url"].startswith("sessions/")
        page.goto(f"http://127.0.0.1:{port}/search.html?q=token%20refresh")
        page.wait_for_selector("#results li")
        assert "(live)" in page.inner_text("#status")
        assert page.locator("#results li a").first.inner_text() == api[0]["title"]
        page.locator("#results li a").first.click()
        assert page.locator("main > h1").inner_text() == api[0]["title"]
        # the warehouse gone while serving: one clear 503, and the page searches its prebuilt index
        (site.parent / "w.duckdb").rename(site.parent / "moved.duckdb")
        try:
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/search?q=token")
            assert err.value.code == 503 and "live search unavailable" in err.value.read().decode()
            page.goto(f"http://127.0.0.1:{port}/search.html?q=token%20refresh")
            page.wait_for_selector("#results li")
            assert "(index)" in page.inner_text("#status")
        finally:
            (site.parent / "moved.duckdb").rename(site.parent / "w.duckdb")
    finally:
        server.should_exit = True
        thread.join(10)


def test_the_overview_leads_with_cost_at_any_width_and_in_the_dark(demo, page, tmp_path):
    """Money first: this month's and the month before's cost above the fold, each month's cost, a cost column in
    the session lists; at 420 px wide no page scrolls sideways (its tables do, in their box); dark when the
    system is."""
    index = (demo / "site" / "index.html").resolve().as_uri()
    wh = demo / "warehouse.duckdb"
    latest, usd = rows(wh, "select strftime(month, '%Y-%m'), sum(cost_usd) from report_usage_monthly "
                           "group by 1 order by 1 desc limit 1")[0]
    browser = page.context.browser  # one Playwright per module: the page fixture's, in contexts of their own
    contexts = []
    try:
        contexts.append(browser.new_context(viewport={"width": 1400, "height": 900}))
        wide = contexts[-1].new_page()
        wide.goto(index)
        card = wide.locator(".cards.money .card").first
        assert card.bounding_box()["y"] < 900  # above the fold
        assert f"${usd:,.2f}" in card.inner_text() and latest in card.inner_text()
        assert wide.locator("h2#cost").bounding_box()["y"] < wide.locator("h2#sessions").bounding_box()["y"]
        assert wide.locator("table.bars tbody tr").count() == rows(
            wh, "select count(distinct month) from report_usage_monthly")[0][0]
        assert "cost" in wide.locator("table.sessions thead").inner_text()
        for width in (420,):
            contexts.append(browser.new_context(viewport={"width": width, "height": 900}))
            narrow = contexts[-1].new_page()
            for name, url in (("index-phone", index), ("session-phone", (
                    demo / "site" / "sessions" / "dd47978c-bf05-5f0e-ae2a-1880e2c4898a.html").resolve().as_uri())):
                narrow.goto(url)
                assert narrow.evaluate("document.documentElement.scrollWidth") <= width, url
                _shot(narrow, name, tmp_path)
        contexts.append(browser.new_context(color_scheme="dark", viewport={"width": 1400, "height": 900}))
        dark = contexts[-1].new_page()
        dark.goto(index)
        bg = dark.evaluate("getComputedStyle(document.documentElement).backgroundColor")
        assert bg == "rgb(13, 17, 23)", bg
        light = wide.evaluate("getComputedStyle(document.documentElement).backgroundColor")
        assert light == "rgb(255, 255, 255)"
    finally:
        for context in contexts:
            context.close()


def test_the_sessions_page_sorts_and_filters_and_failures_are_a_click_away(demo, page):
    wh = demo / "warehouse.duckdb"
    n_all, n_prompted = rows(wh, "select count(*), count(*) filter (where n_turns > 0) from dim_sessions")[0]
    page.goto((demo / "site" / "index.html").resolve().as_uri())
    page.click(".cards a.card.bad")  # the red "failed" card
    assert page.url.endswith("/failures.html")
    n_failed = rows(wh, "select count(*) from fct_tool_calls where not is_success")[0][0]
    assert page.locator("h2#tool-calls").inner_text() == f"Tool calls: {n_failed}"
    assert "pytest tests/test_token_refresh.py" in page.locator("main").inner_text()
    page.click("header.top >> text=Sessions")
    assert page.url.endswith("/sessions.html")
    visible = page.locator("#all-sessions tbody tr:not([hidden])")
    assert page.locator("#all-sessions tbody tr").count() == n_all and visible.count() == n_prompted
    page.check("input[name=empty]")  # sessions without a prompt, hidden by default
    assert visible.count() == n_all
    page.uncheck("input[name=empty]")
    page.select_option("select[name=project]", "webapp")
    n_webapp = rows(wh, "select count(*) from dim_sessions join dim_projects using (project_id) "
                        "where name = 'webapp' and n_turns > 0")[0][0]
    assert 0 < visible.count() == n_webapp < n_prompted
    assert all(t == "webapp" for t in visible.locator("td:nth-child(3)").all_inner_texts())
    page.select_option("select[name=project]", "")
    page.check("input[name=failed]")
    assert visible.count() == rows(wh, "select count(*) from dim_sessions where n_turns > 0 and "
                                       "n_failed_tool_calls + n_errors > 0")[0][0]
    page.uncheck("input[name=failed]")
    page.click("th[data-sort=prompts]")  # most prompts first
    counts = [int(x) for x in visible.locator("td:nth-child(4)").all_inner_texts()]
    assert counts == sorted(counts, reverse=True)
    page.click("th[data-sort=prompts]")
    counts = [int(x) for x in visible.locator("td:nth-child(4)").all_inner_texts()]
    assert counts == sorted(counts)
    assert not page.errors


def test_a_long_pasted_prompt_is_collapsed_and_a_short_one_is_not(tmp_path):
    sid = "0a0a0a0a-1111-2222-3333-444444444444"
    folder = tmp_path / "home" / "session-state" / sid
    folder.mkdir(parents=True)
    pasted = "please look at this log:\n" + "\n".join(f"line {i} of a pasted stack trace" for i in range(60))
    events = [{"type": "session.start", "data": {"sessionId": sid, "context": {"cwd": "/w"}}, "id": "e0",
               "timestamp": "2026-09-01T09:00:00Z"},
              {"type": "user.message", "data": {"content": pasted}, "id": "e1", "timestamp": "2026-09-01T09:00:01Z"},
              {"type": "assistant.message", "data": {"content": "ok"}, "id": "e2", "timestamp": "2026-09-01T09:00:02Z"},
              {"type": "user.message", "data": {"content": "thanks"}, "id": "e3", "timestamp": "2026-09-01T09:01:00Z"}]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    wh, out = tmp_path / "w.duckdb", tmp_path / "out"
    ingest(wh, [tmp_path / "home"])
    assert main(["report", "--warehouse", str(wh), "--out", str(out), "--quiet"]) == 0
    html = (out / "site" / "sessions" / f"{sid}.html").read_text()
    long = re.search(r'<details class="user long"><summary>(.*?)</summary><pre>(.*?)</pre></details>', html, re.S)
    assert long and "61 lines" in long.group(1) and "please look at this log:" in long.group(1)
    assert "line 59 of a pasted stack trace" in long.group(2)  # all of it, one click away
    assert '<div class="user"><pre>thanks</pre></div>' in html
