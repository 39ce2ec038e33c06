"""The markdown wiki: ``index.md``, a page per project and per session, ``files.md``,
``topics.md`` and ``runs.md``, with SVG charts under ``charts/``.

Pages have YAML front matter and relative links that work on GitHub and in Obsidian. The
same warehouse gives the same bytes; a page whose bytes did not change is not rewritten, and
pages of sessions no longer in the warehouse are removed. Every text a person or a model
wrote is escaped (table cells) or fenced (prompts, answers, checkpoints), so markdown or HTML
inside it cannot break a page.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import charts
from .warehouse import connect

log = logging.getLogger(__name__)

ANSWER_MAX = 2000
RECENT_SESSIONS = 10
TOP_FILES = 10
TOP_TERMS = 15
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#!~])")


@dataclass
class WikiResult:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)

    def line(self, out: Path) -> str:
        return (f"wiki: {len(self.written)} pages written, {len(self.unchanged)} unchanged, "
                f"{len(self.removed)} removed in {out}")


# ------------------------------------------------------------------------------------ markdown helpers
def cell(value) -> str:
    """A value safe inside a table cell: one line, markdown and HTML characters escaped."""
    if value is None:
        return ""
    text = " ".join(str(value).split())
    return _MD_SPECIAL.sub(r"\\\1", text)


def code(value) -> str:
    """An inline code span (a path, a run id) safe in a table cell."""
    if value is None:
        return ""
    text = " ".join(str(value).split()).replace("|", "\\|")
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fenced(text: str | None, info: str = "text") -> str:
    """Text in a code fence longer than any backtick run inside it: nothing in it is interpreted."""
    text = (text or "").rstrip("\n")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def front_matter(meta: dict) -> str:
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000) + "---\n"


def table(headers: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def link(text: str, target: str) -> str:
    return f"[{cell(text)}]({target})"


def fmt_ts(ts) -> str:
    return ts.strftime("%Y-%m-%d %H:%M") if ts else ""


def fmt_num(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:,.2f}" if v != int(v) else f"{int(v):,}"
    return f"{v:,}"


def fmt_credits(v) -> str:
    return "" if v is None else f"{v:,.2f}"


def fmt_usd(v) -> str:
    return "" if v is None else f"${v:,.2f}"


def unknown_note(r: dict) -> str:
    """What a usage sum leaves out (see report_usage_daily)."""
    parts = []
    if r.get("n_legs_unknown_input"):
        parts.append(f"input of {r['n_legs_unknown_input']} leg{'s' if r['n_legs_unknown_input'] != 1 else ''} "
                     "unknown")
    if r.get("n_legs_unknown_cost"):
        parts.append(f"cost of {r['n_legs_unknown_cost']} leg{'s' if r['n_legs_unknown_cost'] != 1 else ''} "
                     "unknown")
    if r.get("n_legs_estimated_cost"):
        parts.append(f"{r['n_legs_estimated_cost']} estimated")
    return "; ".join(parts)


USAGE_WEEKS = 12
USAGE_NOTE = ("AI credits and dollars (1 credit = $0.01) are what Copilot logged where its logs have them, "
              "estimated from the price table where only the tokens are known; a leg of a session whose tokens "
              "or cost no source records is left out of a sum and counted in the last column.")


def usage_section(weeks: list[dict], models: list[dict], heading: str = "##") -> list[str]:
    """Cost per week (the latest weeks) and per model, from report_usage_weekly rows."""
    if not weeks:
        return [f"{heading} Usage and cost\n", "No model usage recorded.\n"]
    total_credits = sum((w["ai_credits"] or 0) for w in weeks)
    total_usd = sum((w["cost_usd"] or 0) for w in weeks)
    parts = [f"{heading} Usage and cost\n",
             f"{fmt_num(sum(w['requests'] or 0 for w in weeks))} model requests, "
             f"{fmt_num(sum(w['output_tokens'] or 0 for w in weeks))} output tokens, "
             f"{fmt_credits(total_credits)} AI credits ({fmt_usd(total_usd)}) known. {USAGE_NOTE}\n",
             f"{heading}# Per week\n",
             table(["week", "requests", "input", "output", "cache read", "AI credits", "USD", "left out"],
                   [[w["week"].isoformat(), fmt_num(w["requests"]), fmt_num(w["input_tokens"]),
                     fmt_num(w["output_tokens"]), fmt_num(w["cache_read_tokens"]), fmt_credits(w["ai_credits"]),
                     fmt_usd(w["cost_usd"]), cell(unknown_note(w))] for w in weeks[-USAGE_WEEKS:]]) + "\n"]
    if len(weeks) > USAGE_WEEKS:
        parts.append(f"{len(weeks) - USAGE_WEEKS} earlier weeks: `python -m pipeline usage --by week`.\n")
    parts += [f"{heading}# Per model\n",
              table(["model", "sessions", "requests", "input", "output", "AI credits", "USD", "left out"],
                    [[cell(m["model"]), fmt_num(m["n_sessions"]), fmt_num(m["requests"]), fmt_num(m["input_tokens"]),
                      fmt_num(m["output_tokens"]), fmt_credits(m["ai_credits"]), fmt_usd(m["cost_usd"]),
                      cell(unknown_note(m))] for m in models]) + "\n"]
    return parts


def month_range(months) -> list:
    """Every month from the first to the last given, so quiet months show as zeros."""
    if not months:
        return []
    first, last = min(months), max(months)
    out, m = [], first
    while m <= last:
        out.append(m)
        m = m.replace(year=m.year + 1, month=1) if m.month == 12 else m.replace(month=m.month + 1)
    return out


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", (text or "").lower()).strip("-")
    return s[:40] or "project"


_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def page_name(session_id: str) -> str:
    """The file name (without .md) of a session's page: the id itself when it is a plain name (every
    id Copilot writes is), else a slug of it and a hash, so that no id (``../../x``, markup, a NUL)
    can name a file outside the wiki or break a link."""
    if _SAFE_NAME.fullmatch(session_id) and ".." not in session_id:
        return session_id
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{slug(session_id)[:40]}-{digest}"


# ------------------------------------------------------------------------------------ data
class Data:
    """Everything the pages need, read once from the warehouse, in a fixed order."""

    def __init__(self, con):
        self.con = con
        self.projects = self._rows("""
            select p.project_id, p.name, p.repository, p.root_path, p.n_sessions, p.first_seen_at, p.last_seen_at
            from dim_projects p order by p.last_seen_at desc nulls last, p.name, p.project_id""")
        self.sessions = self._rows("""
            select s.session_id, s.project_id, s.title, s.summary, s.client, s.sources, s.cwd, s.repository,
                   s.branch, s.copilot_version, s.started_at, s.ended_at, s.duration_s, s.n_turns, s.n_tool_calls,
                   s.n_failed_tool_calls, s.models, s.is_gone
            from dim_sessions s order by s.started_at desc nulls last, s.session_id""")
        self.project_slug = {p["project_id"]: f"{slug(p['name'])}-{p['project_id'][:6]}" for p in self.projects}
        self.project_name = {p["project_id"]: p["name"] for p in self.projects}

    def usage(self, project_id: str | None = None) -> tuple[list[dict], list[dict]]:
        """(per week, per model) usage sums, of one project or of all (report_usage_weekly / int_usage_legs)."""
        where, params = ("where project_id = ?", [project_id]) if project_id else ("", None)
        weeks = self._rows(f"""
            select week, sum(requests) as requests, sum(input_tokens) as input_tokens,
                   sum(output_tokens) as output_tokens, sum(cache_read_tokens) as cache_read_tokens,
                   sum(ai_credits) as ai_credits, sum(cost_usd) as cost_usd,
                   sum(n_legs_unknown_input) as n_legs_unknown_input, sum(n_legs_unknown_cost) as n_legs_unknown_cost,
                   sum(n_legs_estimated_cost) as n_legs_estimated_cost
            from report_usage_weekly {where} group by week order by week""", params)
        models = self._rows(f"""
            select model, count(distinct session_id) as n_sessions, sum(requests) as requests,
                   sum(input_tokens) as input_tokens, sum(output_tokens) as output_tokens,
                   sum(ai_credits) as ai_credits, sum(cost_usd) as cost_usd,
                   count(*) filter (where input_tokens is null and requests > 0) as n_legs_unknown_input,
                   count(*) filter (where cost_source = 'unknown') as n_legs_unknown_cost,
                   count(*) filter (where cost_source = 'estimated') as n_legs_estimated_cost
            from int_usage_legs {where} group by model
            order by sum(ai_credits) desc nulls last, sum(requests) desc, model""", params)
        return weeks, models

    def _rows(self, sql, params=None) -> list[dict]:
        rel = self.con.sql(sql, params=params) if params else self.con.sql(sql)
        cols = rel.columns
        return [dict(zip(cols, r, strict=True)) for r in rel.fetchall()]

    def by_session(self, sql) -> dict[str, list[dict]]:
        out = defaultdict(list)
        for r in self._rows(sql):
            out[r["session_id"]].append(r)
        return out

    def by_project(self, sql) -> dict[str, list[dict]]:
        out = defaultdict(list)
        for r in self._rows(sql):
            out[r["project_id"]].append(r)
        return out


def _project_link(data: Data, project_id: str, prefix: str) -> str:
    name = data.project_name.get(project_id, project_id)
    return link(name, f"{prefix}projects/{data.project_slug.get(project_id, project_id)}.md")


def _session_link(s: dict, prefix: str) -> str:
    return link(s["title"] or s["session_id"], f"{prefix}sessions/{page_name(s['session_id'])}.md")


# ------------------------------------------------------------------------------------ pages
def index_page(data: Data, top_topic: dict[str, str]) -> str:
    totals = data._rows("""
        select count(*) as n_sessions, sum(n_turns) as n_turns, sum(n_tool_calls) as n_calls,
               sum(n_failed_tool_calls) as n_failed, min(started_at) as first_at, max(ended_at) as last_at
        from dim_sessions""")[0]
    parts = [front_matter({"title": "Copilot history", "type": "index", "sessions": totals["n_sessions"],
                           "projects": len(data.projects)}),
             "# Copilot history\n",
             "No Copilot history in this warehouse yet: run `python -m pipeline ingest`, then `report`.\n"
             if not totals["n_sessions"] else
             f"{fmt_num(totals['n_sessions'])} sessions in {len(data.projects)} projects, "
             f"{fmt_ts(totals['first_at'])} to {fmt_ts(totals['last_at'])} (UTC): "
             f"{fmt_num(totals['n_turns'] or 0)} prompts, {fmt_num(totals['n_calls'] or 0)} tool calls "
             f"({fmt_num(totals['n_failed'] or 0)} failed); model usage and cost below.\n",
             "![Activity per week](charts/activity.svg)\n",
             "## Pages\n",
             "- [Files](files.md): the most important files of each project and the files that change together",
             "- [Topics](topics.md): what each project has been about, month by month",
             "- [Ingest runs](runs.md): when the warehouse was loaded, what it read and what it rejected\n",
             "![Tool calls by tool](charts/tools.svg)\n",
             *usage_section(*data.usage()),
             "## Projects\n",
             table(["project", "sessions", "first active", "last active", "top topic"],
                   [[_project_link(data, p["project_id"], ""), fmt_num(p["n_sessions"]), fmt_ts(p["first_seen_at"]),
                     fmt_ts(p["last_seen_at"]), cell(top_topic.get(p["project_id"], ""))] for p in data.projects]),
             "\n## Sessions\n",
             table(["started (UTC)", "session", "project", "prompts", "tool calls", "client"],
                   [[fmt_ts(s["started_at"]), _session_link(s, ""), _project_link(data, s["project_id"], ""),
                     fmt_num(s["n_turns"]), fmt_num(s["n_tool_calls"]), cell(s["client"])] for s in data.sessions])]
    return "\n".join(parts) + "\n"


def project_page(data: Data, p: dict, files: list[dict], topics: list[dict], threads: list[dict],
                 has_topic_chart: bool) -> str:
    pid, s = p["project_id"], data.project_slug[p["project_id"]]
    sessions = [x for x in data.sessions if x["project_id"] == pid]
    parts = [front_matter({"title": p["name"], "type": "project", "project_id": pid, "repository": p["repository"],
                           "root_path": p["root_path"], "sessions": p["n_sessions"],
                           "first_seen_at": fmt_ts(p["first_seen_at"]), "last_seen_at": fmt_ts(p["last_seen_at"])}),
             f"# {cell(p['name'])}\n", "[All projects](../index.md)\n",
             f"Root {code(p['root_path'])}" + (f", repository {cell(p['repository'])}" if p["repository"] else "")
             + f". {fmt_num(p['n_sessions'])} sessions, {fmt_num(sum(x['n_turns'] for x in sessions))} prompts, "
               f"{fmt_num(sum(x['n_tool_calls'] for x in sessions))} tool calls, "
               f"{fmt_ts(p['first_seen_at'])} to {fmt_ts(p['last_seen_at'])} (UTC).\n"]
    parts.append("## Top files\n")
    if files:
        parts.append(f"![Most important files](../charts/files-{s}.svg)\n")
        parts.append(table(["rank", "file", "score", "sessions", "edits", "creates", "views"],
                           [[str(f["rank"]), code(f['path']), fmt_num(f["score"]), fmt_num(f["n_sessions"]),
                             fmt_num(f["n_edits"]), fmt_num(f["n_creates"]), fmt_num(f["n_views"])]
                            for f in files[:TOP_FILES]]))
        parts.append("\nScore components for every file: [files](../files.md).\n")
    else:
        parts.append("No file touches recorded.\n")
    parts.append("## Topics\n")
    if topics:
        parts.append(", ".join(f"**{cell(t['term'])}** ({fmt_num(t['n_sessions'])})" for t in topics[:TOP_TERMS])
                     + "\n")
        if has_topic_chart:
            parts.append(f"![Topic trends](../charts/topics-{s}.svg)\n")
    else:
        parts.append("No topics yet.\n")
    parts.extend(usage_section(*data.usage(pid)))
    parts.append("## Open threads\n")
    if threads:
        parts.append("Next steps from each session's latest checkpoint, newest first.\n")
        for t in threads:
            sess = {"session_id": t["session_id"], "title": t["session_title"]}
            parts.append(f"### {_session_link(sess, '../')}: {cell(t['title'])}\n")
            parts.append(fenced(t["next_steps"]) + "\n")
    else:
        parts.append("No checkpoint lists next steps.\n")
    parts.append("## Recent sessions\n")
    parts.append(table(["started (UTC)", "session", "prompts", "tool calls", "failed"],
                       [[fmt_ts(x["started_at"]), _session_link(x, "../"), fmt_num(x["n_turns"]),
                         fmt_num(x["n_tool_calls"]), fmt_num(x["n_failed_tool_calls"])]
                        for x in sessions[:RECENT_SESSIONS]]))
    if len(sessions) > RECENT_SESSIONS:
        parts.append(f"\n{len(sessions) - RECENT_SESSIONS} older sessions: see [the index](../index.md).")
    return "\n".join(parts) + "\n"


def session_page(data: Data, s: dict, turns, checkpoints, files, refs, usage, memories) -> str:
    meta = {"title": s["title"] or s["session_id"], "type": "session", "session_id": s["session_id"],
            "project": data.project_name.get(s["project_id"]), "client": s["client"],
            "started_at": fmt_ts(s["started_at"]), "ended_at": fmt_ts(s["ended_at"]),
            "copilot_version": s["copilot_version"], "models": list(s["models"] or []),
            "sources": list(s["sources"] or [])}
    if s["is_gone"]:
        meta["gone_from_disk"] = True
    rows = [["project", _project_link(data, s["project_id"], "../")],
            ["started / ended (UTC)", f"{fmt_ts(s['started_at'])} / {fmt_ts(s['ended_at'])}"],
            ["duration", f"{fmt_num(round(s['duration_s'] or 0))} s"],
            ["working directory", code(s['cwd']) if s["cwd"] else ""],
            ["repository / branch", f"{cell(s['repository'])} {('/ ' + cell(s['branch'])) if s['branch'] else ''}"],
            ["Copilot", f"{cell(s['client'])} {cell(s['copilot_version'])}"],
            ["prompts / tool calls / failed", f"{s['n_turns']} / {s['n_tool_calls']} / {s['n_failed_tool_calls']}"],
            ["read from", cell(", ".join(s["sources"] or []))]]
    parts = [front_matter(meta), f"# {cell(s['title'] or s['session_id'])}\n",
             f"[Index](../index.md) · {_project_link(data, s['project_id'], '../')}\n"]
    if s["is_gone"]:
        parts.append("> Copilot no longer has this session on disk; the warehouse kept it.\n")
    if s["summary"] and s["summary"] != s["title"]:
        parts.append(fenced(s["summary"]) + "\n")
    parts.append(table(["field", "value"], rows) + "\n")
    if usage:
        parts.append("## Tokens and cost\n")
        parts.append(table(["model", "requests", "input", "output", "cache read", "AI credits", "USD", "cost",
                            "tokens from"],
                           [[cell(u["model"]), fmt_num(u["requests"]), fmt_num(u["input_tokens"]),
                             fmt_num(u["output_tokens"]), fmt_num(u["cache_read_tokens"]),
                             fmt_credits(u["ai_credits"]), fmt_usd(u["cost_usd"]), cell(u["cost_source"]),
                             cell(u["usage_source"])] for u in usage]) + "\n")
        parts.append("An empty figure is one no source records (a leg without a shutdown has no input tokens). "
                     "Per leg: `fct_usage_legs`.\n")
    if checkpoints:
        parts.append("## Checkpoints\n")
        for c in checkpoints:
            parts.append(f"### {c['checkpoint_number']}. {cell(c['title'])}\n")
            for key, label in (("overview", "Overview"), ("work_done", "Work done"),
                               ("technical_details", "Technical details"), ("important_files", "Important files"),
                               ("next_steps", "Next steps")):
                if c[key]:
                    parts.append(f"**{label}**\n\n{fenced(c[key])}\n")
    parts.append("## Prompts\n")
    if not turns:
        parts.append("No prompts recorded.\n")
    for t in turns:
        parts.append(f"### {t['turn_index'] + 1}. {fmt_ts(t['started_at'])}"
                     + (f" · {t['n_tool_calls']} tool calls" if t["n_tool_calls"] else "") + "\n")
        parts.append(fenced(t["user_message"]) + "\n")
        answer = t["assistant_response"]
        if answer:
            if len(answer) > ANSWER_MAX:
                answer = answer[:ANSWER_MAX] + f"\n… ({len(answer) - ANSWER_MAX:,} more characters in fct_turns)"
            parts.append("Answer:\n\n" + fenced(answer) + "\n")
    if files:
        parts.append("## Files\n")
        parts.append(table(["file", "actions", "touches", "first seen (UTC)"],
                           [[code(f['path']), cell(f["actions"]), fmt_num(f["n_touches"]),
                             fmt_ts(f["first_seen_at"])] for f in files]) + "\n")
    if refs:
        parts.append("## References\n")
        parts.append("\n".join(f"- {cell(r['ref_type'])} {cell(r['ref_value'])}" for r in refs) + "\n")
    if memories:
        parts.append("## Plans and memories\n")
        for m in memories:
            parts.append(f"### {code(m['path'])} ({cell(m['kind'])})\n\n{fenced(m['content'], 'markdown')}\n")
    return "\n".join(parts)


def files_page(data: Data, files: dict[str, list[dict]], coupling: dict[str, list[dict]]) -> str:
    parts = [front_matter({"title": "Files", "type": "files"}), "# Files\n", "[Index](index.md)\n",
             "score = 1.0·sessions + 0.5·edits + 1.0·creates + 0.25·views + 0.5·days + 2.0·recency "
             "+ 1.0·prompt mentions + 1.0·checkpoint mentions; recency sums 0.5^(age in days / 30) over the "
             "sessions that touched the file, age counted from the project's latest touch.\n"]
    for p in data.projects:
        pid = p["project_id"]
        if not files.get(pid) and not coupling.get(pid):
            continue
        parts.append(f"## {_project_link(data, pid, '')}\n")
        if files.get(pid):
            parts.append(table(["rank", "file", "score", "sessions", "edits", "creates", "views", "days", "recency",
                                "prompt mentions", "checkpoint mentions", "last seen (UTC)"],
                               [[str(f["rank"]), code(f['path']), fmt_num(f["score"]),
                                 fmt_num(f["n_sessions"]), fmt_num(f["n_edits"]), fmt_num(f["n_creates"]),
                                 fmt_num(f["n_views"]), fmt_num(f["n_days"]), fmt_num(f["recency"]),
                                 fmt_num(f["n_prompt_mentions"]), fmt_num(f["n_checkpoint_mentions"]),
                                 fmt_ts(f["last_seen_at"])] for f in files[pid][:50]]) + "\n")
        if coupling.get(pid):
            parts.append("**Changed together** (sessions that edited or created both)\n")
            parts.append(table(["file", "file", "shared sessions", "degree %"],
                               [[code(c['path_a']), code(c['path_b']), fmt_num(c["shared_sessions"]),
                                 fmt_num(c["degree"])] for c in coupling[pid][:20]]) + "\n")
    return "\n".join(parts)


def topics_page(data: Data, topics: dict[str, list[dict]], trends: dict[str, list[dict]],
                charted: set[str]) -> str:
    parts = [front_matter({"title": "Topics", "type": "topics"}), "# Topics\n", "[Index](index.md)\n",
             "Words and word pairs of prompts, titles and checkpoints, weighted by how much a project uses them "
             "and how rare they are across all sessions (tf-idf).\n"]
    for p in data.projects:
        pid = p["project_id"]
        if not topics.get(pid):
            continue
        parts.append(f"## {_project_link(data, pid, '')}\n")
        if pid in charted:
            parts.append(f"![Topic trends](charts/topics-{data.project_slug[pid]}.svg)\n")
        parts.append(table(["rank", "term", "weight", "sessions", "first seen (UTC)", "last seen (UTC)"],
                           [[str(t["rank"]), cell(t["term"]), fmt_num(t["weight"]), fmt_num(t["n_sessions"]),
                             fmt_ts(t["first_seen_at"]), fmt_ts(t["last_seen_at"])] for t in topics[pid][:TOP_TERMS]])
                     + "\n")
        months = month_range({t["month"] for t in trends.get(pid, [])})
        if len(months) > 1:
            top = [t["term"] for t in topics[pid][:5]]
            by = {(t["term"], t["month"]): t["n_sessions"] for t in trends[pid]}
            parts.append("Sessions per month using the top terms:\n")
            parts.append(table(["term"] + [m.strftime("%Y-%m") for m in months],
                               [[cell(term)] + [fmt_num(by.get((term, m), 0)) for m in months] for term in top])
                         + "\n")
    return "\n".join(parts)


def runs_page(data: Data) -> str:
    runs = data._rows("""select run_id, started_at, mode, n_files_read, n_files_unchanged, n_records, n_rejects,
                                n_redactions, n_sessions_changed from _runs order by started_at desc, run_id desc""")
    rejects = data._rows("""select regexp_replace(reason, ' \\(.*$', '') as reason, count(*) as n
                            from _rejects group by 1 order by 2 desc, 1""")
    parts = [front_matter({"title": "Ingest runs", "type": "runs", "runs": len(runs)}), "# Ingest runs\n",
             "[Index](index.md)\n",
             table(["run", "started (UTC)", "mode", "files read", "unchanged", "records", "rejected", "redacted",
                    "sessions rebuilt"],
                   [[code(r['run_id']), fmt_ts(r["started_at"]), cell(r["mode"]), fmt_num(r["n_files_read"]),
                     fmt_num(r["n_files_unchanged"]), fmt_num(r["n_records"]), fmt_num(r["n_rejects"]),
                     fmt_num(r["n_redactions"]), fmt_num(r["n_sessions_changed"])] for r in runs]) + "\n",
             "## Rejected records now in `_rejects`\n"]
    parts.append(table(["reason", "records"], [[cell(r["reason"]), fmt_num(r["n"])] for r in rejects]) + "\n"
                 if rejects else "None.\n")
    return "\n".join(parts)


# ------------------------------------------------------------------------------------ build
def build_pages(con) -> tuple[dict[str, str], dict[str, tuple]]:
    """Every page as {relative path: content} and every chart as {relative path: (function, args)};
    a pure function of the warehouse."""
    data = Data(con)
    files = data.by_project("select * from report_file_importance order by project_id, rank")
    coupling = data.by_project("""select * from report_file_coupling
                                  order by project_id, degree desc, shared_sessions desc, path_a, path_b""")
    topics = data.by_project("select * from report_topics order by project_id, rank")
    trends = data.by_project("select * from report_topic_trends order by project_id, month, term")
    threads = data.by_project("""
        with latest as (
            select c.*, row_number() over (partition by c.session_id order by c.checkpoint_number desc) as rn
            from fct_checkpoints c where c.next_steps is not null)
        select s.project_id, l.session_id, s.title as session_title, l.title, l.next_steps, s.started_at
        from latest l join dim_sessions s using (session_id)
        where l.rn = 1 order by s.started_at desc nulls last, l.session_id""")
    turns = data.by_session("select * from fct_turns order by session_id, turn_index")
    checkpoints = data.by_session("select * from fct_checkpoints order by session_id, checkpoint_number")
    session_files = data.by_session("""
        select t.session_id, f.path, string_agg(t.action, ', ' order by t.action) as actions,
               sum(t.n_touches) as n_touches, min(t.first_seen_at) as first_seen_at
        from fct_file_touches t join dim_files f using (file_id)
        group by t.session_id, f.path order by t.session_id, min(t.first_seen_at), f.path""")
    refs = data.by_session("select * from fct_refs order by session_id, ref_type, ref_value")
    usage = data.by_session("select * from fct_usage order by session_id, model")
    memories = data.by_session("select * from fct_memories where session_id is not null "
                               "order by session_id, kind, path")

    pages: dict[str, str] = {}
    specs: dict[str, tuple] = {}  # chart path -> (charts function, arguments); drawn by write_wiki
    top_topic = {pid: ts[0]["term"] for pid, ts in topics.items() if ts}
    pages["index.md"] = index_page(data, top_topic)
    charted: set[str] = set()
    for p in data.projects:
        pid, s = p["project_id"], data.project_slug[p["project_id"]]
        top = files.get(pid, [])[:TOP_FILES]
        if top:
            specs[f"charts/files-{s}.svg"] = ("horizontal_bars", (
                [f["path"] for f in top], [f["score"] for f in top], f"Most important files: {p['name']}", "score"))
        months = month_range({t["month"] for t in trends.get(pid, [])})
        if len(months) > 1:
            terms = [t["term"] for t in topics.get(pid, [])[:5]]
            by = {(t["term"], t["month"]): t["weight"] for t in trends[pid]}
            specs[f"charts/topics-{s}.svg"] = ("term_trends", (
                months, {term: [by.get((term, m), 0.0) for m in months] for term in terms},
                f"Top topics by month: {p['name']}"))
            charted.add(pid)
        pages[f"projects/{s}.md"] = project_page(data, p, files.get(pid, []), topics.get(pid, []),
                                                 threads.get(pid, []), pid in charted)
    for sess in data.sessions:
        sid = sess["session_id"]
        pages[f"sessions/{page_name(sid)}.md"] = session_page(data, sess, turns.get(sid, []), checkpoints.get(sid, []),
                                                   session_files.get(sid, []), refs.get(sid, []),
                                                   usage.get(sid, []), memories.get(sid, []))
    pages["files.md"] = files_page(data, files, coupling)
    pages["topics.md"] = topics_page(data, topics, trends, charted)
    pages["runs.md"] = runs_page(data)

    weekly = data._rows("select week, n_turns, n_tool_calls, n_failed_tool_calls from report_activity_weekly "
                        "order by week")
    specs["charts/activity.svg"] = ("weekly_activity", (
        [w["week"] for w in weekly], [w["n_turns"] for w in weekly], [w["n_tool_calls"] for w in weekly],
        [w["n_failed_tool_calls"] for w in weekly]))
    tools = data._rows("""select tool_name, sum(n_calls) as n, sum(n_failed) as f from report_tool_usage
                          group by tool_name order by n desc, tool_name limit 15""")
    specs["charts/tools.svg"] = ("horizontal_bars", (
        [t["tool_name"] for t in tools], [t["n"] for t in tools], "Tool calls by tool", "calls",
        [t["f"] for t in tools], "failed"))
    return pages, specs


MANIFEST = ".manifest.json"  # the pages and charts the last report wrote: the only files it ever removes


def write_wiki(warehouse, out_dir) -> WikiResult:
    out_dir = Path(out_dir)
    con = connect(warehouse, read_only=True)
    try:
        pages, specs = build_pages(con)
    finally:
        con.close()
    pages.update(charts.render_all(specs, out_dir))
    result = WikiResult()
    root = out_dir.resolve()
    for rel, content in sorted(pages.items()):
        path = out_dir / rel
        if not path.resolve().is_relative_to(root):  # names are made safe (page_name); this is the guard
            raise ValueError(f"page {rel!r} would be written outside {out_dir}")
        data = content.encode("utf-8")
        if path.is_file() and path.read_bytes() == data:
            result.unchanged.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        result.written.append(path)
    # remove what the previous report wrote and this one did not; never a file it did not write
    manifest = out_dir / MANIFEST
    try:
        previous = json.loads(manifest.read_text(encoding="utf-8")).get("files", []) if manifest.is_file() else []
    except (ValueError, OSError, AttributeError):
        previous = []
    for rel in sorted(set(previous) - set(pages)):
        stale = out_dir / rel
        if isinstance(rel, str) and stale.resolve().is_relative_to(root) and stale.is_file():
            stale.unlink()
            result.removed.append(stale)
    listing = (json.dumps({"files": sorted(pages)}, indent=1) + "\n").encode("utf-8")
    if not manifest.is_file() or manifest.read_bytes() != listing:  # unchanged: not rewritten either
        tmp = manifest.with_name(MANIFEST + ".tmp")
        tmp.write_bytes(listing)
        tmp.replace(manifest)
    log.info(result.line(out_dir))
    return result
