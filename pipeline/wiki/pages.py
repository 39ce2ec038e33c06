"""The wiki's pages as pure functions of ``queries.WikiData``: ``index.md``, a page per project and per
session, ``files.md``, ``topics.md`` and ``runs.md``, and the specifications of the SVG charts.

Pages have YAML front matter and relative links that work on GitHub and in Obsidian.
"""

from __future__ import annotations

from collections.abc import Iterable

from .markdown import (
    cell,
    code,
    fenced,
    fmt_cost,
    fmt_credits,
    fmt_duration,
    fmt_ms,
    fmt_num,
    fmt_premium,
    fmt_ts,
    fmt_usd,
    front_matter,
    link,
    month_range,
    page_name,
    plural,
    quoted,
    table,
)
from .queries import WikiData, page_ranges

ANSWER_MAX = 2000
RECENT_SESSIONS = 10
LATEST_SESSIONS = 20  # on the index; the rest by month
MONTH_PAGE = 100  # sessions per month page; a busier month gets more pages
DAY_SPLIT = 10  # a month of more pages than this is listed by day: its page lists its days, each day has pages
CALLS_PER_PROMPT = 40  # tool calls listed per prompt (failed ones always, up to FAILED_PER_PROMPT)
FAILED_PER_PROMPT = 1_000
TOP_FILES = 10
TOP_TERMS = 15


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


def _project_link(data: WikiData, project_id: str, prefix: str) -> str:
    name = data.project_name.get(project_id, project_id)
    return link(name, f"{prefix}projects/{data.project_slug.get(project_id, project_id)}.md")


def _session_link(s: dict, prefix: str) -> str:
    return link(s["title"] or s["session_id"], f"{prefix}sessions/{page_name(s['session_id'])}.md")



# ------------------------------------------------------------------------------------ pages
def month_key(s: dict) -> str:
    at = s["started_at"]  # not strftime: 98,000 sessions' keys took ~0.4 s each time (but as it prints a year < 1000,
    if not at:  # unpadded, as the pages' links do)
        return "undated"
    return f"{at.year}-{at.month:02d}" if at.year >= 1000 else at.strftime("%Y-%m")


def day_key(s: dict) -> str:
    at = s["started_at"]
    return f"{at.year}-{at.month:02d}-{at.day:02d}" if at.year >= 1000 else at.strftime("%Y-%m-%d")


_LISTED: list = [None, None]  # the sessions ``month_pages`` was last asked for, and its answer


def month_pages(sessions: list[dict]) -> dict[str, list[list[dict]]]:
    """Sessions by month (newest first), each month cut into pages of MONTH_PAGE; a month of more than DAY_SPLIT
    pages by day instead (keyed ``YYYY-MM-DD``), each day cut so, and the month's own page lists its days
    (``month_days``). A session added to a busy month changes its day's pages, not the month's hundreds (a team's
    month of 98,000 sessions: 981 pages, each with a pager of 981 links). The answer for the same list of
    sessions (the page data's, asked by every page that links the months) is the last one's."""
    if _LISTED[0] is sessions and _LISTED[1][0] == (len(sessions), MONTH_PAGE, DAY_SPLIT):
        return _LISTED[1][1]
    _LISTED[:] = [sessions, ((len(sessions), MONTH_PAGE, DAY_SPLIT), _month_pages(sessions))]
    return _LISTED[1][1]


def _month_pages(sessions: list[dict]) -> dict[str, list[list[dict]]]:
    months: dict[str, list[dict]] = {}
    for x in sessions:
        months.setdefault(month_key(x), []).append(x)
    out: dict[str, list[dict]] = {}
    for m, xs in months.items():
        if m != "undated" and len(xs) > DAY_SPLIT * MONTH_PAGE:
            for x in xs:
                out.setdefault(day_key(x), []).append(x)
        else:
            out[m] = xs
    return {k: [xs[i:i + MONTH_PAGE] for i in range(0, len(xs), MONTH_PAGE)] for k, xs in out.items()}


def is_day(key: str) -> bool:
    """Whether a key of ``month_pages`` is a day of a month listed by day (else a month, or ``undated``)."""
    return key.count("-") == 2


def month_of(key: str) -> str:
    """The month of a key of ``month_pages``: a day's month, or the month itself."""
    return key.rsplit("-", 1)[0] if is_day(key) else key


def month_counts(listing: dict[str, list[list[dict]]]) -> list[tuple[str, int]]:
    """Each month of ``month_pages`` (newest first) and its sessions."""
    counts: dict[str, int] = {}
    for key, pages in listing.items():
        month = month_of(key)
        counts[month] = counts.get(month, 0) + sum(len(p) for p in pages)
    return list(counts.items())


def _totals(xs: list[dict]) -> dict:
    """What a row of the months' or the days' table shows of its sessions."""
    return {"n": len(xs), "n_turns": sum(x["n_turns"] or 0 for x in xs),
            "n_tool_calls": sum(x["n_tool_calls"] or 0 for x in xs),
            "n_failed": sum(x["n_failed_tool_calls"] or 0 for x in xs),
            "cost_usd": _known_sum(x["cost_usd"] for x in xs), "n_unknown": sum(x["n_legs_unknown_cost"] for x in xs)}


def month_days(listing: dict[str, list[list[dict]]]) -> dict[str, list[dict]]:
    """Each month ``month_pages`` lists by day, with its days (newest first): the day and its sessions' totals."""
    out: dict[str, list[dict]] = {}
    for key, pages in listing.items():
        if is_day(key):
            out.setdefault(month_of(key), []).append({"day": key, **_totals([x for p in pages for x in p])})
    return out


def month_stem(month: str, page: int) -> str:
    """The month's (or a day's) page without its extension: the first, then ``-p2``, ``-p3``..."""
    return f"months/{month}" if page == 0 else f"months/{month}-p{page + 1}"


def month_file(month: str, page: int, ext: str = "md") -> str:
    """The month's (or a day's) page (the wiki's ``.md``, the site's ``.html``)."""
    return f"{month_stem(month, page)}.{ext}"


def _months_table(data: WikiData, prefix: str) -> str:
    months: dict[str, list[dict]] = {}
    for key, pages in month_pages(data.sessions).items():
        months.setdefault(month_of(key), []).extend(x for p in pages for x in p)
    rows = []
    for month, xs in months.items():
        t = _totals(xs)
        rows.append([link(month, prefix + month_file(month, 0)), fmt_num(t["n"]), fmt_num(t["n_turns"]),
                     fmt_num(t["n_tool_calls"]), fmt_num(t["n_failed"]), fmt_cost(t["cost_usd"], t["n_unknown"])])
    return table(["month", "sessions", "prompts", "tool calls", "failed", "cost"], rows)


def _known_sum(values: Iterable[float | None]) -> float | None:
    """The sum of the known values (None when none is known)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _sessions_table(data: WikiData, sessions: list[dict], prefix: str) -> str:
    return table(["started (UTC)", "session", "project", "prompts", "tool calls", "failed", "errors", "active",
                  "cost", "client"],
                 [[fmt_ts(s["started_at"]), _session_link(s, prefix), _project_link(data, s["project_id"], prefix),
                   fmt_num(s["n_turns"]), fmt_num(s["n_tool_calls"]), fmt_num(s["n_failed_tool_calls"]),
                   fmt_num(s["n_errors"]) if s["n_errors"] else "", fmt_duration(s["active_s"]),
                   fmt_cost(s["cost_usd"], s["n_legs_unknown_cost"]), cell(s["client"])]
                  for s in sessions])


def cost_section(money: dict) -> list[str]:
    """The overview's first section: the latest two months with usage (cost, AI credits, premium requests, top
    project and model) and the cost of every month, newest first."""
    if not money.get("latest"):
        return []
    out = ["## Cost\n"]
    for i, m in enumerate(money["latest"]):
        top = [f"top {k} {cell(v['name'])}" + (f" ({fmt_usd(v['cost_usd'])})" if v["cost_usd"] is not None else "")
               for k, v in m["top"].items() if v]
        out.append(f"- **{m['month']}**{' (latest month)' if i == 0 else ''}: "
                   f"**{fmt_cost(m['cost_usd'], m['n_legs_unknown_cost']) or '$0.00'}**"
                   + (f", {fmt_credits(m['ai_credits'])} AI credits" if m["ai_credits"] is not None else "")
                   + (f", {fmt_credits(m['premium_requests'])} premium requests" if m["premium_requests"] is not None
                      else "") + (f"; {', '.join(top)}" if top else ""))
    out.append("")
    out.append(table(["month", "USD", "AI credits", "premium requests"],
                     [[m["month"], fmt_cost(m["cost_usd"], m["n_legs_unknown_cost"]), fmt_credits(m["ai_credits"]),
                       fmt_credits(m["premium_requests"])] for m in reversed(money["months"])]) + "\n")
    out.append("Known costs: logged by Copilot, or estimated from the price table where it logged none; "
               "\"+ n legs unknown\" are legs neither tells. Before June 2026 Copilot billed premium requests: those "
               "are what was billed, the dollars what the same use costs at today's rates.\n")
    return out


def index_page(data: WikiData, top_topic: dict[str, str], listed: list[tuple[str, str, str]]) -> str:
    """The overview; ``listed``: the pages it lists as (label, file, about) (``catalog.listed``)."""
    totals = data.totals
    parts = [front_matter({"title": "Copilot history", "type": "index", "sessions": totals["n_sessions"],
                           "projects": len(data.projects)}),
             "# Copilot history\n",
             "No Copilot history in this warehouse yet: run `python -m pipeline ingest`, then `report`.\n"
             if not totals["n_sessions"] else
             f"{plural(totals['n_sessions'], 'session')} in {plural(len(data.projects), 'project')}, "
             f"{fmt_ts(totals['first_at'])} to {fmt_ts(totals['last_at'])} (UTC): "
             f"{plural(totals['n_turns'], 'prompt')}, {plural(totals['n_calls'], 'tool call')} "
             f"({fmt_num(totals['n_failed'] or 0)} failed); model usage and cost below.\n",
             *cost_section(data.money),
             "![Activity per week](charts/activity.svg)\n",
             "## Pages\n",
             "\n".join(f"- {link(label, file)}: {about}" for label, file, about in listed) + "\n",
             "## Tool calls\n",
             "![Tool calls by tool](charts/tools.svg)\n" if data.tools else "No tool calls recorded.\n",
             *usage_section(data.usage.weeks, data.usage.models),
             "## Projects\n",
             table(["project", "sessions", "first active", "last active", "top topic"],
                   [[_project_link(data, p["project_id"], ""), fmt_num(p["n_sessions"]), fmt_ts(p["first_seen_at"]),
                     fmt_ts(p["last_seen_at"]), cell(top_topic.get(p["project_id"], ""))] for p in data.projects]),
             "\n## Sessions by month\n",
             _months_table(data, ""),
             "\n## Latest sessions\n",
             _sessions_table(data, data.sessions[:LATEST_SESSIONS], "")]
    if len(data.sessions) > LATEST_SESSIONS:
        parts.append(f"\n{plural(len(data.sessions) - LATEST_SESSIONS, 'older session')}: by month above.")
    return "\n".join(parts) + "\n"


def month_page(data: WikiData, month: str, pages: list[list[dict]], page: int) -> str:
    """A month's page of sessions, or a day's of a month listed by day (``month_pages``)."""
    sessions = pages[page]
    n = sum(len(p) for p in pages)
    title = f"Sessions of {month}" if month != "undated" else "Sessions without a start time"
    nav = ["[Index](../index.md)"]
    if is_day(month):
        nav.append(link(f"the days of {month_of(month)}", "../" + month_file(month_of(month), 0)))
    if page > 0:
        nav.append(link("previous page", "../" + month_file(month, page - 1)))
    if page + 1 < len(pages):
        nav.append(link("next page", "../" + month_file(month, page + 1)))
    head = f"{plural(n, 'session')}" + (f", page {page + 1} of {len(pages)}" if len(pages) > 1 else "") + ".\n"
    return "\n".join([front_matter({"title": title, "type": "day" if is_day(month) else "month", "month": month,
                                     "sessions": n, "page": page + 1}),
                      f"# {title}\n", " · ".join(nav) + "\n", head, _sessions_table(data, sessions, "../")]) + "\n"


def days_page(month: str, days: list[dict]) -> str:
    """The page of a month listed by day (``month_days``): its days, each with its sessions' totals."""
    n = sum(d["n"] for d in days)
    return "\n".join([
        front_matter({"title": f"Sessions of {month}", "type": "month", "month": month, "sessions": n, "page": 1}),
        f"# Sessions of {month}\n", "[Index](../index.md)\n",
        f"{plural(n, 'session')} on {plural(len(days), 'day')}: each day's sessions are on its page.\n",
        table(["day", "sessions", "prompts", "tool calls", "failed", "cost"],
              [[link(d["day"], "../" + month_file(d["day"], 0)), fmt_num(d["n"]), fmt_num(d["n_turns"]),
                fmt_num(d["n_tool_calls"]), fmt_num(d["n_failed"]), fmt_cost(d["cost_usd"], d["n_unknown"])]
               for d in days])]) + "\n"


def session_file(session_id: str, page: int, ext: str, name: str | None = None) -> str:
    """Where page ``page`` (0-based) of a session is: ``sessions/<name>.<ext>``, then
    ``sessions/<name>/p2.<ext>``, ... (no session's name holds a slash: ``page_name``; ``name``: the session's
    page name, when the caller has it already)."""
    name = page_name(session_id) if name is None else name
    return f"sessions/{name}.{ext}" if page == 0 else f"sessions/{name}/p{page + 1}.{ext}"


def page_of(ranges: list[tuple[int, int]], turn_index: int | None) -> int:
    """The page a prompt is on (``page_ranges``): 0 for a session of one page, or a turn before the first."""
    if turn_index is None:
        return 0
    return next((k for k, (_first, last) in enumerate(ranges) if turn_index <= last), max(len(ranges) - 1, 0))


def tool_call_lines(calls: list[dict], limit: int = CALLS_PER_PROMPT) -> str:
    """One line per tool call of a prompt: status, tool, what it was about, how long; a failed call with
    its error. Past ``limit`` only the failed calls are listed (at most FAILED_PER_PROMPT)."""
    lines, hidden = [], 0
    n_failed = 0
    for i, c in enumerate(calls):
        failed = c["is_success"] is False
        n_failed += failed
        if i >= limit and (not failed or n_failed > FAILED_PER_PROMPT):
            hidden += 1
            continue
        mark = "✗ failed" if failed else ("✓" if c["is_success"] else "· no result")
        target = f" {code(c['target'][:120])}" if c.get("target") else ""
        took = f" ({fmt_ms(c['duration_ms'])})" if c["duration_ms"] is not None else ""
        line = f"- {mark} **{cell(c['tool_name'])}**{target}{took}"
        if failed and c["error_message"]:
            line += f": {cell(c['error_message'][:300])}"
        lines.append(line)
    if hidden:
        lines.append(f"- … and {plural(hidden, 'more call')} (all in `fct_tool_calls`)")
    return "\n".join(lines)


def project_page(data: WikiData, p: dict, has_topic_chart: bool) -> str:
    pid, s = p["project_id"], data.project_slug[p["project_id"]]
    files, topics, threads = data.files.get(pid, []), data.topics.get(pid, []), data.threads.get(pid, [])
    sessions = [x for x in data.sessions if x["project_id"] == pid]
    parts = [front_matter({"title": p["name"], "type": "project", "project_id": pid, "repository": p["repository"],
                           "root_path": p["root_path"], "sessions": p["n_sessions"],
                           "first_seen_at": fmt_ts(p["first_seen_at"]), "last_seen_at": fmt_ts(p["last_seen_at"])}),
             f"# {cell(p['name'])}\n", "[All projects](../index.md)\n",
             f"Root {code(p['root_path'])}" + (f", repository {cell(p['repository'])}" if p["repository"] else "")
             + f". {plural(p['n_sessions'], 'session')}, {plural(sum(x['n_turns'] for x in sessions), 'prompt')}, "
               f"{plural(sum(x['n_tool_calls'] for x in sessions), 'tool call')}, "
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
    parts.extend(usage_section(data.project_usage[pid].weeks, data.project_usage[pid].models))
    parts.append("## Open threads\n")
    if threads:
        parts.append("Next steps from each session's latest checkpoint, newest first.\n")
        for t in threads:
            sess = {"session_id": t["session_id"], "title": t["session_title"]}
            parts.append(f"### {_session_link(sess, '../')}: {cell(t['title'])}\n")
            parts.append(quoted(t["next_steps"]) + "\n")
    else:
        parts.append("No checkpoint lists next steps.\n")
    parts.append("## Recent sessions\n")
    parts.append(table(["started (UTC)", "session", "prompts", "tool calls", "failed"],
                       [[fmt_ts(x["started_at"]), _session_link(x, "../"), fmt_num(x["n_turns"]),
                         fmt_num(x["n_tool_calls"]), fmt_num(x["n_failed_tool_calls"])]
                        for x in sessions[:RECENT_SESSIONS]]))
    if len(sessions) > RECENT_SESSIONS:
        parts.append(f"\n{plural(len(sessions) - RECENT_SESSIONS, 'older session')}: see the months on "
                     "[the index](../index.md).")
    return "\n".join(parts) + "\n"


def session_page(data: WikiData, s: dict, page: int = 0, ranges: list[tuple[int, int]] | None = None) -> str:
    """Page ``page`` of a session (``ranges``: its pages, from ``page_ranges``; none: one page). The first page
    holds what the session is (facts, cost, checkpoints, files, references, memories) and its first prompts;
    each other page the prompts of its range."""
    sid = s["session_id"]
    ranges = ranges or []
    first_turn, last_turn = ranges[page] if ranges else (None, None)
    turns = [t for t in data.turns.get(sid, []) if first_turn is None or first_turn <= t["turn_index"] <= last_turn]
    up = "../" * session_file(sid, page, "md").count("/")
    meta = {"title": s["title"] or s["session_id"], "type": "session", "session_id": s["session_id"],
            "project": data.project_name.get(s["project_id"]), "client": s["client"],
            "started_at": fmt_ts(s["started_at"]), "ended_at": fmt_ts(s["ended_at"]),
            "copilot_version": s["copilot_version"], "models": list(s["models"] or []),
            "sources": list(s["sources"] or [])}
    if ranges:
        meta["page"] = page + 1
        meta["pages"] = len(ranges)
    if s["is_gone"]:
        meta["gone_from_disk"] = True
    parts = [front_matter(meta), f"# {cell(s['title'] or s['session_id'])}\n",
             f"[Index]({up}index.md) · {_project_link(data, s['project_id'], up)}\n"]
    if ranges:
        here = session_file(sid, page, "md")
        links = [f"{k + 1}" if k == page else link(f"{k + 1}", _relative(here, session_file(sid, k, "md")))
                 for k in range(len(ranges))]
        parts.append(f"Page {page + 1} of {len(ranges)} (prompts {first_turn + 1}-{last_turn + 1} of "
                     f"{s['n_turns']:,}): " + " · ".join(links) + "\n")
    if page == 0:
        parts += _session_head(data, s)
    parts.append("## Prompts\n")
    if not turns:
        parts.append("No prompts recorded.\n")
    calls_by_turn = data.calls_by_turn(sid)
    if calls_by_turn.get(None) and page == 0:
        parts.append("Tool calls before the first prompt:\n\n" + tool_call_lines(calls_by_turn[None]) + "\n")
    for t in turns:
        calls = calls_by_turn.get(t["turn_index"], [])
        n_failed = sum(c["is_success"] is False for c in calls)
        parts.append(f"### {t['turn_index'] + 1}. {fmt_ts(t['started_at'])}"
                     + (f" · {plural(t['n_tool_calls'], 'tool call')}" if t["n_tool_calls"] else "")
                     + (f", {n_failed} failed" if n_failed else "")
                     + (f" · {t['selected_model']} → {t['model']}" if t.get("selected_model") and t.get("model")
                        and t["selected_model"] != t["model"] else f" · {t['model']}" if t.get("model") else "")
                     + {"error": " · **error**", "cancelled": " · cancelled"}.get(t.get("status"), "") + "\n")
        if t.get("status") == "error":
            parts.append(quoted(" ".join(x for x in (t.get("error_code"), t.get("error_message")) if x)
                                or "error") + "\n")
        parts.append(fenced(t["user_message"]) + "\n")
        answer = t["assistant_response"]
        if answer:
            if len(answer) > ANSWER_MAX:
                answer = answer[:ANSWER_MAX] + f"\n\n… ({len(answer) - ANSWER_MAX:,} more characters in fct_turns)"
            parts.append("**Answer**\n\n" + quoted(answer) + "\n")
        if calls:
            parts.append("**Tool calls**\n\n" + tool_call_lines(calls) + "\n")
    if page == 0:
        parts += _session_tail(data, s)
    return "\n".join(parts)


def _relative(here: str, there: str) -> str:
    """The link from the page ``here`` to the page ``there`` (both relative to the wiki's root)."""
    return "../" * here.count("/") + there


def _session_head(data: WikiData, s: dict) -> list[str]:
    """What a session is: its facts, tokens and cost, checkpoints (the first page)."""
    sid = s["session_id"]
    checkpoints, usage = data.checkpoints.get(sid, []), data.session_usage.get(sid, [])
    rows = [["project", _project_link(data, s["project_id"], "../")],
            ["started / ended (UTC)", f"{fmt_ts(s['started_at'])} / {fmt_ts(s['ended_at'])}"],
            ["active / span", f"{fmt_duration(s['active_s'])} / {fmt_duration(s['duration_s'])} (active: gaps over "
                              "30 minutes count as 30 minutes)"],
            ["errors", f"{s['n_errors']}: last {cell(s['error_message'])}" if s["n_errors"] else "none"],
            ["working directory", code(s['cwd']) if s["cwd"] else ""],
            ["repository / branch", f"{cell(s['repository'])} {('/ ' + cell(s['branch'])) if s['branch'] else ''}"],
            ["Copilot", f"{cell(s['client'])} {cell(s['copilot_version'])}"],
            ["prompts / tool calls / failed", f"{s['n_turns']} / {s['n_tool_calls']} / {s['n_failed_tool_calls']}"],
            ["read from", cell(", ".join(s["sources"] or []))]]
    parts = []
    if s["is_gone"]:
        parts.append("> Copilot no longer has this session on disk; the warehouse kept it.\n")
    if s["summary"] and s["summary"] != s["title"]:
        parts.append(quoted(s["summary"]) + "\n")
    parts.append(table(["field", "value"], rows) + "\n")
    if usage:
        parts.append("## Tokens and cost\n")
        parts.append(table(["model", "requests", "input", "output", "cache read", "premium", "AI credits", "USD",
                            "cost", "tokens from"],
                           [[cell(u["model"]), fmt_num(u["requests"]), fmt_num(u["input_tokens"]),
                             fmt_num(u["output_tokens"]), fmt_num(u["cache_read_tokens"]),
                             fmt_premium(u["premium_known"], u["n_legs_unknown_premium"]),
                             fmt_cost(u["credits_known"], u["n_legs_unknown_cost"], money=False),
                             fmt_cost(u["usd_known"], u["n_legs_unknown_cost"]), cell(u["cost_source"]),
                             cell(u["usage_source"])] for u in usage]) + "\n")
        parts.append("An empty figure is one no source records (a leg without a shutdown has no input tokens); "
                     "premium requests marked ≥ leave out legs that do not record them; a cost \"+ n legs "
                     "unknown\" is the sum of the legs whose cost is known. Per leg: `fct_usage_legs`.\n")
        parts += split_section(data.session_split.get(sid, []))
    if checkpoints:
        parts.append("## Checkpoints\n")
        for c in checkpoints:
            parts.append(f"### {c['checkpoint_number']}. {cell(c['title'])}\n")
            for key, label in (("overview", "Overview"), ("work_done", "Work done"),
                               ("technical_details", "Technical details"), ("important_files", "Important files"),
                               ("next_steps", "Next steps")):
                if c[key]:
                    parts.append(f"**{label}**\n\n{quoted(c[key])}\n")
    return parts


def shows_split(split: list[dict]) -> bool:
    """Whether a session's requests are worth splitting: a sub-agent or a skill among them."""
    return any(r["split"] == "agent" and r["name"] != "main" or r["split"] == "skill" and r["name"] != "(none)"
               for r in split)


def split_section(split: list[dict]) -> list[str]:
    """The session's requests by agent and by skill (when a sub-agent or a skill is among them)."""
    if not shows_split(split):
        return []
    out = ["## By agent and skill\n"]
    for kind, label in (("agent", "agent"), ("skill", "skill")):
        rows = [r for r in split if r["split"] == kind]
        out.append(table([label, "requests", "output", "AI credits", "USD"],
                         [[cell(r["name"]), fmt_num(r["requests"]), fmt_num(r["output_tokens"]),
                           fmt_cost(r["credits_known"], r["n_unknown_cost"], money=False, unit="request"),
                           fmt_cost(r["usd_known"], r["n_unknown_cost"], unit="request")] for r in rows]) + "\n")
    out.append("The requests the logs record one by one (`fct_requests`): the agent that made each, and the skill "
               "last invoked in its turn before it.\n")
    return out


def _session_tail(data: WikiData, s: dict) -> list[str]:
    """The files a session touched, its references, plans and memories (the first page)."""
    sid = s["session_id"]
    files, refs, memories = data.session_files.get(sid, []), data.refs.get(sid, []), data.memories.get(sid, [])
    parts = []
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
            parts.append(f"### {code(m['path'])} ({cell(m['kind'])})\n\n{quoted(m['content'])}\n")
    return parts


def files_page(data: WikiData) -> str:
    files, coupling = data.files, data.coupling
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


def topics_page(data: WikiData, charted: set[str]) -> str:
    topics, trends = data.topics, data.trends
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


def people_page(data: WikiData) -> str:
    """Team mode: who did what, and what it cost (only written when the lake holds more than one person)."""
    parts = [front_matter({"title": "People", "type": "people", "people": len(data.people)}), "# People\n",
             "[Index](index.md)\n",
             "Sessions pushed into the lake, per person (`push --user`). AI credits and dollars (1 credit = $0.01) "
             "are what Copilot logged, else estimated from the price table; a leg whose cost no source records is "
             "left out of the sums.\n",
             table(["person", "machines", "sessions", "projects", "prompts", "tool calls", "failed", "requests",
                    "AI credits", "USD", "first active", "last active"],
                   [[cell(p["user_name"]), fmt_num(p["n_machines"]), fmt_num(p["n_sessions"]), fmt_num(p["n_projects"]),
                     fmt_num(p["n_turns"]), fmt_num(p["n_tool_calls"]), fmt_num(p["n_failed_tool_calls"]),
                     fmt_num(p["requests"]), fmt_credits(p["ai_credits"]), fmt_usd(p["cost_usd"]),
                     fmt_ts(p["first_seen_at"]), fmt_ts(p["last_seen_at"])] for p in data.people]) + "\n"]
    for p in data.people:
        weeks = data.people_weeks.get(p["user_name"], [])[-USAGE_WEEKS:]
        if weeks:
            parts.append(f"## {cell(p['user_name'])}\n")
            parts.append(table(["week", "requests", "output", "AI credits", "USD"],
                               [[w["week"].isoformat(), fmt_num(w["requests"]), fmt_num(w["output_tokens"]),
                                 fmt_credits(w["ai_credits"]), fmt_usd(w["cost_usd"])] for w in weeks]) + "\n")
    return "\n".join(parts)


def runs_page(page: dict) -> str:
    """The ingest runs and the rejected records counted by reason (``catalog``'s runs query)."""
    runs, rejects = page["runs"], page["rejects"]
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



def sessions_page(data: WikiData) -> str:
    """Every session, by month: the months with their counts and cost, each linking to its pages (the site's
    Sessions page sorts and filters them in the browser)."""
    n_empty = sum(1 for x in data.sessions if not x["n_turns"])
    return "\n".join([front_matter({"title": "Sessions", "type": "sessions", "sessions": len(data.sessions)}),
                      "# Sessions\n", "[Index](index.md)\n",
                      f"{plural(len(data.sessions), 'session')}"
                      + (f", {plural(n_empty, 'session')} without a prompt among them" if n_empty else "")
                      + "; each month's page lists its sessions, newest first.\n" if data.sessions else
                      "No sessions yet.\n",
                      _months_table(data, "") if data.sessions else ""]) + "\n"


def usage_page(data: WikiData) -> str:
    """Usage and cost of all projects (per week and per model), then per project and model."""
    parts = [front_matter({"title": "Usage and cost", "type": "usage"}), "# Usage and cost\n", "[Index](index.md)\n",
             *usage_section(data.usage.weeks, data.usage.models, heading="#")[1:], "## Per project\n"]
    any_usage = False
    for p in data.projects:
        models = data.project_usage[p["project_id"]].models
        if not data.project_usage[p["project_id"]].weeks:
            continue
        any_usage = True
        parts.append(f"### {_project_link(data, p['project_id'], '')}\n")
        parts.append(table(["model", "sessions", "requests", "output", "AI credits", "USD", "left out"],
                           [[cell(m["model"]), fmt_num(m["n_sessions"]), fmt_num(m["requests"]),
                             fmt_num(m["output_tokens"]), fmt_credits(m["ai_credits"]), fmt_usd(m["cost_usd"]),
                             cell(unknown_note(m))] for m in models]) + "\n")
    if not any_usage:
        parts.append("No model usage recorded.\n")
    return "\n".join(parts)


def failures_page(failures: dict) -> str:
    """Prompts that errored or were cancelled and failed tool calls, newest first (``queries.failures``)."""
    prompts, calls = failures["prompts"], failures["calls"]
    cut = (f" (the latest {fmt_num(failures['limit'])} of each; `fct_turns` and `fct_tool_calls` hold them all)"
           if failures["cut"] else "")
    parts = [front_matter({"title": "Failures", "type": "failures", "prompts": len(prompts), "tool_calls": len(calls)}),
             "# Failures\n", "[Index](index.md)\n",
             f"Prompts that ended in an error or were cancelled, and tool calls that failed, newest first{cut}.\n",
             f"## Prompts: {fmt_num(len(prompts))}\n"]
    parts.append(table(["started (UTC)", "session", "prompt", "status", "error"],
                       [[fmt_ts(t["started_at"]), _session_link(t, ""), cell((t["user_message"] or "")[:200]),
                         cell(" ".join(x for x in (t["status"], t["error_code"]) if x)),
                         cell((t["error_message"] or "")[:300])] for t in prompts]) + "\n" if prompts else "None.\n")
    parts.append(f"## Tool calls: {fmt_num(len(calls))}\n")
    parts.append(table(["when (UTC)", "session", "tool", "about", "error"],
                       [[fmt_ts(c["called_at"]), _session_link(c, ""), code(c["tool_name"] or ""),
                         code((c["target"] or "")[:160]) if c["target"] else "", cell((c["error_message"] or "")[:300])]
                        for c in calls]) + "\n" if calls else "None.\n")
    return "\n".join(parts)


# ------------------------------------------------------------------------------------ all of them
def session_ranges(data: WikiData, sid: str) -> list[tuple[int, int]]:
    """A session's pages (``page_ranges``), from the turns ``data`` holds of it."""
    return page_ranges([(t["turn_index"], t["n_tool_calls"]) for t in data.turns.get(sid, [])])


def session_pages(data: WikiData, sessions: list[dict]) -> dict[str, str]:
    """The pages of each of ``sessions`` as {relative path: content} (``data`` holds all their turns)."""
    out = {}
    for sess in sessions:
        ranges = session_ranges(data, sess["session_id"])
        for page in range(max(1, len(ranges))):
            out[session_file(sess["session_id"], page, "md")] = session_page(data, sess, page, ranges)
    return out
