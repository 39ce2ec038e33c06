"""The site's prebuilt search index: files a search page loads as it needs them (``static/search.js``), so it
searches from ``file://`` with no server. A page opened from ``file://`` cannot fetch(), so each file is a script
that hands its part to the page:

- ``search/index.js``: how the index is cut, the kind of each document position (``-``: a position no document
  holds any more), the number of documents and their mean length in terms;
- ``search/terms-K.js``: per term of shard K, its postings - (position, term frequency, document length) each;
- ``search/docs-J.js``: the documents at positions J x CHUNK_DOCS onwards (null where none is);
- ``search/ranks.js``: each position's rank by kind, session and place (a prompt's turn, a memory's path), which
  breaks ties between equal scores as ``serve`` does.

The page computes each posting's BM25 weight from these and the counts (k1 = 1.2, b = 0.75: the ``bm25_weight``
macro), so it ranks as ``search()`` and ``serve`` do. Weights in the files would change with every document added
(the number of documents and their mean length are in each), and every file with them.

A report after a change writes the index again only where the change is (``SearchIndex``): a session whose
documents changed has its old positions left dead and its documents appended at new positions; the chunks and
shards that hold them are rewritten, the rest kept. A shard not rewritten may still hold postings of dead
positions, which the page skips (the term's document frequency counts live positions only). The index is built
whole when there is no record of the last one (``STATE``), a file of it changed since, the shards would be cut
otherwise, more than DEAD_SHARE of its positions are dead, or this code or the models changed.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import duckdb
import orjson

from ..models import models_digest
from ..warehouse import temp_table
from ..wiki import pages as wiki_pages
from ..wiki.markdown import fmt_ts
from ..wiki.queries import page_plans
from . import doc_url

log = logging.getLogger(__name__)

SEARCH_DIR = "search"
STATE = ".search-index.json"  # in the site: what the index's positions hold, for the next report
SNIPPET = 240  # characters of a search result's text
SHARD_BYTES = 256 * 1024  # about this much of postings per term shard
MAX_SHARDS = 4096
CHUNK_DOCS = 500  # documents per chunk: a page of 50 results loads at most 50 chunks
GROUP_BYTES = 8 * 1024 * 1024  # about this much of postings built by one query (the memory it takes: ~0.2 GB)
POSTING_BYTES = 14  # the text of one posting ("position,tf,length,"), about
DEAD = "-"  # a dead position's kind in doc_kinds
DEAD_SHARE = 0.25  # past this share of dead positions, the index is built whole again
STATE_MAX_BYTES = 512 * 1024 * 1024
# a term's shard: a polynomial hash of its code points, which search.js computes alike (`shardOf`)
_SHARD_OF_TERM = ("list_reduce(list_transform(str_split(term, ''), c -> unicode(c)::bigint), "
                  "(h, c) -> (h * 31 + c) % 1000003, 0::bigint)")
_CODES = "0123456789abcdefghijklmnopqrstuvwxyz"  # a document's kind in ``doc_kinds``: its place in ``kinds``
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"
# a document's group: its session, or none (memories of a user or a repository)
_GROUP = "coalesce(session_id, '')"


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


def _parsed(text: str) -> object:
    """The JSON a ``_js`` file hands over (its second argument)."""
    return orjson.loads(text[text.index(",") + 1:text.rindex(")")])


def _form() -> str:
    """What the files are made by: this module, the page's script and the models (a tokenizer changed: every
    posting); another form builds the index whole."""
    h = hashlib.sha256(f"{CHUNK_DOCS}|{SHARD_BYTES}|{MAX_SHARDS}|{SNIPPET}|{models_digest()}".encode())
    here = Path(__file__).resolve().parent
    for path in (here / "search.py", here / "static" / "search.js", here.parent / "wiki" / "pages.py"):
        h.update(path.read_bytes())
    return h.hexdigest()[:32]


class SearchIndex:
    """The index's files for one report (``files``), and what it keeps of the last one's (``kept``); ``record``
    writes what the next report starts from, once the files are written."""

    def __init__(self, con: duckdb.DuckDBPyConnection, projects: dict[str, str], site_dir: Path,
                 force: bool = False) -> None:
        self.con, self.projects, self.site_dir = con, projects, site_dir
        self.plans = page_plans(con)  # the sessions of several pages: a prompt is on the page of its turn
        self.kept: list[str] = []
        self.form = _form()
        self.n_docs, self.n_postings, self.avg_terms = con.execute(
            "select (select count(*) from int_search_docs), (select count(*) from int_search_terms), "
            "(select avg(n_terms) from int_search_docs)").fetchone()
        self.shards = 1
        while self.shards < MAX_SHARDS and self.shards * SHARD_BYTES < self.n_postings * POSTING_BYTES:
            self.shards *= 2
        self.groups = self._groups()
        self.last = None if force else self._last()
        self.whole = self.last is None
        self.written: dict[str, str] = {}  # of this report's files, each one's digest (for the version)
        self.n_changed = len(self.groups)  # groups whose documents changed, came or went

    # -- what changed ---------------------------------------------------------------------------------------
    def _groups(self) -> dict[str, list]:
        """Per group (a session, or "" for documents of none): [its documents, a digest of everything its
        entries in the index are made from - its documents, their pages and project]."""
        out = {}
        for grp, n, total in self.con.execute(
                f"select {_GROUP}, count(*), sum(hash(doc_id, kind, ref, title, text, written_at, n_terms)"
                f"::hugeint)::varchar from int_search_docs group by 1").fetchall():
            sid = grp or None
            url = (self.plans.get(grp), grp in self.projects, self.projects.get(grp)) if sid else None
            out[grp] = [n, hashlib.sha256(f"{n}|{total}|{url!r}".encode("utf-8", "surrogatepass")).hexdigest()[:32]]
        return out

    def _last(self) -> dict | None:
        """The last report's record when this report can build on it: made by this form, the same shards, every
        file of the index as it was written, and not too many positions dead after this change; else None."""
        path = self.site_dir / STATE
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > STATE_MAX_BYTES:
                return None
            state = orjson.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        try:
            if state["form"] != self.form or state["shards"] != self.shards:
                return None
            sessions, files, positions = state["sessions"], state["files"], int(state["positions"])
            kinds, version = list(state["kinds"]), str(state["version"])
            if not _sound(sessions, positions, kinds, files):
                return None
            have = {}
            with os.scandir(self.site_dir / SEARCH_DIR) as entries:
                for e in entries:
                    if e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        have[e.name] = [st.st_size, st.st_mtime_ns]
            if any(have.get(name) != stat for name, stat in files.items()):
                return None
        except (OSError, KeyError, TypeError, ValueError, AttributeError):
            return None
        changed = [g for g, (n, digest) in self.groups.items()
                   if g not in sessions or sessions[g][1] != n or sessions[g][2] != digest]
        appended = sum(self.groups[g][0] for g in changed)
        if positions + appended and (positions + appended - self.n_docs) > DEAD_SHARE * (positions + appended):
            return None
        return {"sessions": sessions, "positions": positions, "kinds": kinds, "version": version, "changed": changed,
                "files": files}

    # -- the files ------------------------------------------------------------------------------------------
    def files(self) -> Iterator[dict[str, str]]:
        """The files to write, a few at a time: the index is never held whole, here or in DuckDB."""
        con = self.con
        try:
            if self.whole:
                self.starts = {}
                self.positions = 0
                for grp, (n, _digest) in sorted(self.groups.items()):
                    self.starts[grp] = self.positions
                    self.positions += n
                self.kinds: list[str] = []
                new = sorted(self.groups)
            else:
                last = self.last
                self.kinds = last["kinds"]
                self.starts = {g: v[0] for g, v in last["sessions"].items() if g in self.groups}
                self.positions = last["positions"]
                new = sorted(last["changed"])
                gone = [g for g in last["sessions"] if g not in self.groups or g in last["changed"]]
                dead = [(last["sessions"][g][0], last["sessions"][g][1]) for g in gone]
                self.n_changed = len(set(gone) | set(new))
                for grp in new:
                    self.starts[grp] = self.positions
                    self.positions += self.groups[grp][0]
            self.live = bytearray(self.positions)
            for grp, start in self.starts.items():
                self.live[start:start + self.groups[grp][0]] = b"\1" * self.groups[grp][0]
            _starts(con, "_search_new", {g: self.starts[g] for g in new})
            con.execute(f"""
                create or replace temp table _search_positions as
                select d.doc_id, d.n_terms, s.start + row_number() over (partition by d.grp order by d.doc_id) - 1 as i
                from (select doc_id, n_terms, {_GROUP} as grp from int_search_docs) as d
                join _search_new as s using (grp)""")
            con.execute("drop table _search_new")
            if self.whole:
                yield from self._docs_whole()
                yield from self._terms_whole()
            else:
                yield from self._docs_changed(dead)
                yield from self._terms_changed()
            yield from self._ranks()
        finally:
            for table in ("_search_new", "_search_starts", "_search_positions", "_search_shards", "_search_postings"):
                con.execute(f"drop table if exists {table}")

    def _out(self, name: str, text: str) -> dict[str, str]:
        self.written[name] = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        return {f"{SEARCH_DIR}/{name}": text}

    def _doc_rows(self) -> Iterator[list[tuple[int, list]]]:
        """The documents at the positions of _search_positions, in order, a chunk's worth at a time: (position,
        [kind, url, title, time, snippet, project]) each."""
        # the snippet: the text's whitespace collapsed, cut; collapsed from its first 4 x SNIPPET characters when
        # that makes a snippet (the same one: a prefix collapses to a prefix of the whole), not from every whole
        # answer (422,000 documents of 236 MB: 3.2 -> 2.2 s)
        collapse = "regexp_replace({}, '\\s+', ' ', 'g')"
        head = collapse.format(f"left(coalesce(text, ''), {4 * SNIPPET})")
        # the time as fmt_ts prints it, by DuckDB (in UTC, as every connection): the datetime of each of 422,000
        # documents cost ~2 s to make and print; fmt_ts does a year before 1000 (it does not pad it)
        cursor = self.con.execute(f"""
            select i, kind, session_id, ref, title, strftime(written_at, '%Y-%m-%d %H:%M') as written,
                   case when year(written_at) < 1000 then written_at end as odd_at,
                   case when length(head) >= {SNIPPET} or length(coalesce(text, '')) <= {4 * SNIPPET}
                        then left(head, {SNIPPET})
                        else left({collapse.format("coalesce(text, '')")}, {SNIPPET}) end as snippet
            from (select p.i, d.*, {head} as head
                  from int_search_docs as d join _search_positions as p using (doc_id)) order by i""")
        # the last session seen: its first page (None: the site has none) and its pages' plan
        at: tuple[str | None, str | None, list[tuple[int, int]] | None] = (None, None, None)
        while batch := cursor.fetchmany(CHUNK_DOCS):
            rows = []
            for i, kind, sid, ref, title, written, odd_at, snippet in batch:
                if sid != at[0]:
                    at = (sid, wiki_pages.session_file(sid, 0, "html") if sid in self.projects else None,
                          self.plans.get(sid))
                url = "" if at[1] is None else doc_url(kind, sid, ref, at[2], at[1])
                rows.append((i, [kind, url, title or sid or ref or "", fmt_ts(odd_at) if odd_at else written or "",
                                 snippet, self.projects.get(sid, "")]))
            yield rows

    def _docs_text(self, chunk: int, docs: list) -> dict[str, str]:
        # orjson writes these lists of strings as json.dumps(ensure_ascii=False) does, 5x faster
        return self._out(f"docs-{chunk}.js", _js("searchDocs", str(chunk), orjson.dumps(docs).decode()))

    def _docs_whole(self) -> Iterator[dict[str, str]]:
        chunk, docs = 0, []
        for rows in self._doc_rows():
            for _i, row in rows:
                docs.append(row)
                if len(docs) == CHUNK_DOCS:
                    yield self._docs_text(chunk, docs)
                    chunk, docs = chunk + 1, []
        if docs:
            yield self._docs_text(chunk, docs)

    def _docs_changed(self, dead: list[tuple[int, int]]) -> Iterator[dict[str, str]]:
        """The chunks that hold a position that died or a document appended, each read and patched in turn (the
        appended documents come a chunk at a time, in order: after every dead position's chunk or in it); the
        others kept."""
        died: dict[int, list[range]] = {}  # per chunk, its positions that died
        for start, n in dead:
            for chunk in range(start // CHUNK_DOCS, (start + n - 1) // CHUNK_DOCS + 1):
                died.setdefault(chunk, []).append(range(max(start, chunk * CHUNK_DOCS),
                                                        min(start + n, (chunk + 1) * CHUNK_DOCS)))
        appended = self._appended_chunks()
        at = next(appended, None)
        for chunk in range(-(-self.positions // CHUNK_DOCS)):
            name = f"docs-{chunk}.js"
            rows: dict[int, list] = {}
            if at is not None and at[0] == chunk:
                rows, at = at[1], next(appended, None)
            if chunk not in died and not rows:
                self.kept.append(f"{SEARCH_DIR}/{name}")
                continue
            docs: list = []
            if name in self.last["files"]:
                docs = _parsed((self.site_dir / SEARCH_DIR / name).read_text(encoding="utf-8"))
            first = chunk * CHUNK_DOCS
            docs += [None] * (min(CHUNK_DOCS, self.positions - first) - len(docs))
            for span in died.get(chunk, ()):
                for i in span:
                    docs[i - first] = None
            for i, row in rows.items():
                docs[i - first] = row
            yield self._docs_text(chunk, docs)

    def _appended_chunks(self) -> Iterator[tuple[int, dict[int, list]]]:
        """(chunk, {position: document}) of the documents at the positions of _search_positions, a chunk at a time
        in order."""
        chunk, rows = -1, {}
        for batch in self._doc_rows():
            for i, row in batch:
                if i // CHUNK_DOCS != chunk:
                    if rows:
                        yield chunk, rows
                    chunk, rows = i // CHUNK_DOCS, {}
                rows[i] = row
        if rows:
            yield chunk, rows

    def _terms_text(self, shard: int, terms: dict[str, str]) -> dict[str, str]:
        body = ",".join(f"{orjson.dumps(term).decode()}:[{terms[term]}]" for term in sorted(terms))
        return self._out(f"terms-{shard}.js", _js("searchTerms", str(shard), "{" + body + "}"))

    def _postings(self) -> Iterator[list[tuple[int, str, str]]]:
        """(shard, term, its postings as text) of the documents at the positions of _search_positions, by shard,
        a group of shards at a time."""
        con, shards = self.con, self.shards
        only = "" if self.whole else " semi join _search_positions using (doc_id)"
        con.execute(f"""
            create or replace temp table _search_shards as
            select term, {_SHARD_OF_TERM} % {shards} as shard
            from (select distinct term from int_search_terms{only})""")
        # every posting's shard and position, joined once and stored in shard order, so that each group's query
        # reads its shards' rows alone (98,000 sessions, 8.8 M postings in 13 groups: each group joining the whole
        # of int_search_terms took 9.5 s, this 3.4 s)
        con.execute("""
            create or replace temp table _search_postings as
            select s.shard, t.term, p.i, t.tf, p.n_terms
            from int_search_terms t join _search_shards s using (term) join _search_positions p using (doc_id)
            order by s.shard""")
        n = con.execute("select count(*) from _search_postings").fetchone()[0]
        groups = max(1, min(shards, -(-n * POSTING_BYTES // GROUP_BYTES)))
        per_group = -(-shards // groups)
        for first in range(0, shards, per_group):
            yield con.execute(f"""
                select shard, term, string_agg(i::varchar || ',' || tf::varchar || ',' || n_terms::varchar, ','
                                               order by i)
                from _search_postings where shard between {first} and {first + per_group - 1}
                group by shard, term order by shard, term""").fetchall()

    def _terms_whole(self) -> Iterator[dict[str, str]]:
        written: set[int] = set()
        for postings in self._postings():
            by_shard: dict[int, dict[str, str]] = {}
            for shard, term, text in postings:
                by_shard.setdefault(shard, {})[term] = text
            del postings
            written.update(by_shard)
            yield {name: text for shard, terms in by_shard.items()
                   for name, text in self._terms_text(shard, terms).items()}
        empty = {}
        for shard in range(self.shards):  # a shard no term falls in: an empty one, as the page loads every shard
            if shard not in written:
                empty.update(self._terms_text(shard, {}))
        if empty:
            yield empty

    def _terms_changed(self) -> Iterator[dict[str, str]]:
        """The shards that hold a term of an appended document, each read, its dead positions' postings dropped
        and the new ones added; the others kept."""
        live = self.live
        touched = set()
        for postings in self._postings():
            by_shard: dict[int, dict[str, str]] = {}
            for shard, term, text in postings:
                by_shard.setdefault(shard, {})[term] = text
            del postings
            files = {}
            for shard, new in by_shard.items():
                touched.add(shard)
                name = f"terms-{shard}.js"
                old = _parsed((self.site_dir / SEARCH_DIR / name).read_text(encoding="utf-8")) \
                    if name in self.last["files"] else {}
                terms: dict[str, str] = {}
                for term, post in old.items():
                    kept = [x for k in range(0, len(post), 3) if live[post[k]] for x in post[k:k + 3]]
                    if kept:
                        terms[term] = ",".join(map(str, kept))
                for term, text in new.items():  # appended positions come after every position there
                    terms[term] = f"{terms[term]},{text}" if term in terms else text
                files.update(self._terms_text(shard, terms))
            yield files
        self.kept += [f"{SEARCH_DIR}/terms-{k}.js" for k in range(self.shards) if k not in touched]

    def _ranks(self) -> Iterator[dict[str, str]]:
        """``ranks.js`` and ``index.js``: every position's kind and its document's rank among equal scores (these
        change with any document added), and the counts."""
        con = self.con
        width = 1
        while 36 ** width < self.n_docs:
            width += 1
        for (kind,) in con.execute("select distinct kind from int_search_docs order by 1").fetchall():
            if kind not in self.kinds:
                self.kinds.append(kind)
        code = "case kind " + " ".join(f"when '{k.replace(chr(39), chr(39) * 2)}' then '{_CODES[n]}'"
                                       for n, k in enumerate(self.kinds)) + " end" if self.kinds else "null"
        digits = " || ".join(f"substr('{_B36}', (rank // {36 ** k} % 36)::bigint + 1, 1)"
                             for k in reversed(range(width)))
        _starts(con, "_search_starts", self.starts)
        # every position's kind and rank (in the order serve lists equal scores in: kind, session, place), in DuckDB:
        # one string each (a Python loop over 422,000 documents: 1.3 s)
        doc_kinds, ranks = con.execute(f"""
            with d as (
                select s.start + row_number() over (partition by d.grp order by d.doc_id) - 1 as i, d.kind,
                       row_number() over (order by d.kind, d.session_id, d.ref, d.doc_id) - 1 as rank
                from (select doc_id, kind, session_id, ref, {_GROUP} as grp from int_search_docs) as d
                join _search_starts as s using (grp))
            select coalesce(string_agg(coalesce({code}, '{DEAD}'), '' order by p.i), ''),
                   coalesce(string_agg(coalesce({digits}, '{"0" * width}'), '' order by p.i), '')
            from range({self.positions}) as p(i) left join d using (i)""").fetchone()
        yield self._out("ranks.js", _js("searchRanks", orjson.dumps(ranks).decode()))
        version = hashlib.blake2b(digest_size=8)
        if not self.whole:
            version.update(self.last["version"].encode())
        for name in sorted(self.written):
            version.update(f"{name}:{self.written[name]}\0".encode())
        # nothing changed: the version stays (a page keeps the files it loaded)
        self.version = self.last["version"] if not self.whole and not self.n_changed else version.hexdigest()
        meta = {"version": self.version, "shards": self.shards, "chunk": CHUNK_DOCS, "docs": self.positions,
                "live": self.n_docs, "avg_terms": self.avg_terms or 0.0, "kinds": self.kinds,
                "doc_kinds": doc_kinds, "rank_width": width}
        yield {f"{SEARCH_DIR}/index.js": _script("window.SEARCH_META = " + orjson.dumps(meta).decode())}

    def record(self, refused: bool = False) -> None:
        """What the next report builds on: each group's positions and digest, and every file of the index as it
        is now (its size and time); none when a file of it was ``refused`` (not this tool's to write)."""
        (self.site_dir / STATE).unlink(missing_ok=True)
        if refused:
            return
        files = {}
        n_chunks = -(-self.positions // CHUNK_DOCS)
        names = [f"docs-{k}.js" for k in range(n_chunks)] + [f"terms-{k}.js" for k in range(self.shards)] + \
            ["ranks.js", "index.js"]
        for name in names:
            try:
                st = os.stat(self.site_dir / SEARCH_DIR / name, follow_symlinks=False)
            except OSError:
                return  # not all written (refused): no record, the next report builds the index whole
            files[name] = [st.st_size, st.st_mtime_ns]
        state = {"form": self.form, "shards": self.shards, "positions": self.positions, "kinds": self.kinds,
                 "version": self.version, "files": files,
                 "sessions": {g: [self.starts[g], *self.groups[g]] for g in sorted(self.starts)}}
        tmp = self.site_dir / (STATE + ".tmp")
        tmp.write_bytes(orjson.dumps(state))
        tmp.replace(self.site_dir / STATE)
        if not self.whole:
            log.info("search index: the documents of %d sessions changed or went, %d of %d files kept",
                     self.n_changed, len(self.kept), len(names))


def _sound(sessions: object, positions: int, kinds: list, files: object) -> bool:
    """Whether a record's positions are what this module writes: each group's [start, documents, digest] within
    the positions and no two overlapping, at most 36 kinds, each file a [size, time]."""
    if not (isinstance(sessions, dict) and isinstance(files, dict) and 0 <= positions < 1 << 40
            and len(kinds) <= len(_CODES) and all(isinstance(k, str) for k in kinds)):
        return False
    spans = []
    for entry in sessions.values():
        if not (isinstance(entry, list) and len(entry) == 3 and all(type(v) is int for v in entry[:2])
                and isinstance(entry[2], str) and entry[0] >= 0 and entry[1] >= 1 and entry[0] + entry[1] <= positions):
            return False
        spans.append((entry[0], entry[1]))
    spans.sort()
    if any(a + n > b for (a, n), (b, _m) in zip(spans, spans[1:], strict=False)):
        return False
    return all(isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v) for v in files.values())


def _starts(con: duckdb.DuckDBPyConnection, name: str, starts: dict[str, int]) -> None:
    """A temp table ``name`` of (grp, start): each group's first position."""
    import pyarrow as pa

    temp_table(con, name, pa.table({"grp": pa.array(list(starts), pa.string()),
                                    "start": pa.array(list(starts.values()), pa.int64())}))
