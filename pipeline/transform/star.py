"""Pure polars transforms: staging frames of a batch of sessions -> star-schema frames.

No paths, clocks or connections in here: ``build_star`` takes the staging frames and returns
the fact frames and the session dimension for exactly the sessions present in its input.
"""

from __future__ import annotations

import hashlib

import orjson
import polars as pl

from ..schema import DECIMAL, TABLES
from ..sources import PRECEDENCE, VSCODE_ROW_KINDS
from ..vocabulary import (
    ABORT,
    ASSISTANT_MESSAGE,
    COMPACTION_COMPLETE,
    CREATE_TOOLS,
    EDIT_TOOLS,
    EDITOR_COMMANDS,
    FILE_EDITED,
    KNOWN_TYPES,
    SESSION_ERROR,
    SESSION_RESUME,
    SESSION_SHUTDOWN,
    SESSION_START,
    SYSTEM_MESSAGE,
    TOOL_COMPLETIONS,
    TOOL_START,
    USER_MESSAGE,
    VIEW_TOOLS,
    clean_prompt,
    tool_family,
)
from . import usage as usage_model
from .paths import project_root, relativize, short_hash
from .times import UTC_TS, parse_ts

TITLE_MAX = 120

PATH_KEYS = ("path", "file_path", "filePath", "filename", "target_file", "file", "uri")
_PATCH_FILE = r"\*\*\* (?:Update|Add|Delete) File: ([^\n\\]+)"


_DUCK_TO_POLARS = {"VARCHAR": pl.String, "BIGINT": pl.Int64, "INTEGER": pl.Int32, "BOOLEAN": pl.Boolean,
                   "TIMESTAMPTZ": UTC_TS, "DOUBLE": pl.Float64, "VARCHAR[]": pl.List(pl.String),
                   "DATE": pl.Date}


def polars_type(duck_type: str):
    m = DECIMAL.match(duck_type)
    return pl.Decimal(int(m.group(1)), int(m.group(2))) if m else _DUCK_TO_POLARS[duck_type]


def polars_schema(table: str) -> dict:
    return {c.name: polars_type(c.type) for c in TABLES[table].columns}


def conform(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """Exactly the declared columns, in order, with the declared types."""
    schema = polars_schema(table)
    cols = [pl.col(n).cast(t) if n in df.columns else pl.lit(None, dtype=t).alias(n) for n, t in schema.items()]
    return df.select(cols)


# ------------------------------------------------------------------------------------------ events
def chosen_logs(*frames: pl.DataFrame, on_disk: pl.Series | None = None) -> pl.DataFrame:
    """The one event log of each session the star reads (``_source_path``): the most authoritative kind,
    then the longest (events of every frame counted), then one on disk (``on_disk``: their paths; a moved home's
    old copy of a log is as long as the new one), then the newest path."""
    keys = ["session_id", "source_kind", "_source_path"]
    counts = pl.concat([f.group_by(keys).len() for f in frames]).group_by(keys).agg(pl.col("len").sum())
    here = pl.lit(True) if on_disk is None else pl.col("_source_path").cast(pl.String).is_in(on_disk.implode())
    return (counts
            .with_columns(pl.col("source_kind").replace_strict(PRECEDENCE, default=9).alias("_rank"),
                          here.alias("_here"))
            .sort(["session_id", "_rank", "len", "_here", "_source_path"],
                  descending=[False, False, True, True, True])
            .unique("session_id", keep="first").select("_source_path"))


def keep_logs(events: pl.DataFrame, chosen: pl.DataFrame) -> pl.DataFrame:
    """The events of the chosen logs (``chosen_logs``); ``events`` itself when every log is (a join copies
    every column)."""
    if events.is_empty() or chosen.height >= events["_source_path"].n_unique() and \
            events["_source_path"].is_in(chosen["_source_path"].implode()).all():
        return events
    return events.join(chosen, on="_source_path", how="semi")


def choose_event_source(events: pl.DataFrame) -> pl.DataFrame:
    """Keep one event log per session: the most authoritative kind, then the longest, then newest path."""
    if events.is_empty():
        return events
    return keep_logs(events, chosen_logs(events))


def in_session_order(ev: pl.DataFrame) -> pl.DataFrame:
    """``ev`` with each session's events in order of position (``event_index``): as it is when they
    already are (staging is pulled in the order the rows were stored, mostly the order each log was read in:
    see load/star.py), else sorted. A sort copies every column, and the events of the largest session are most of
    the star's memory."""
    if ev.height < 2:
        return ev
    ordered = ev.select((pl.col("event_index").diff().over("session_id") > 0).all(ignore_nulls=True)).item()
    return ev if ordered else ev.sort("session_id", "event_index")


# The only events whose `content` / `extra` the star schema reads. Staging is pulled with those
# columns nulled for every other event type (the ~50 KB system prompt of each session, tool
# result details), which halves what a rebuild moves out of DuckDB. Keep in step with the code
# below; tests/test_ingest.py checks that the star rows do not change.
EVENT_TEXT_USED = {
    "content": (USER_MESSAGE, ASSISTANT_MESSAGE),
    "extra": tuple(sorted({SESSION_START, USER_MESSAGE, ASSISTANT_MESSAGE, SESSION_SHUTDOWN, COMPACTION_COMPLETE,
                           SESSION_ERROR, *usage_model.USAGE_EXTRA})),
}
# ... and of a system message only the line that names the working directory (``places``: older CLIs write no
# context on session.start; the ~56 KB prompt says `Current working directory: <path>`), which load/star.py cuts
# out of its text as it pulls the events (``load.star.EVENT_TEXT_SQL``)
# A tool's output (result_content, up to megabytes) is never pulled out of staging: the star reads its
# length and MD5 (stg_events.result_chars, result_md5) and whether it starts with a numbered line (a
# `view` of a folder lists entries, not numbered lines), tested on its head (stg_events.result_head,
# which reaches past leading white space) with NUMBERED as the pull selects it (``result_numbered``).
# fct_tool_calls keeps the path and line of the completion event it took the output from
# (``RESULT_SOURCE``): load/star.py fills in its first ``warehouse.result_chars()`` characters from
# stg_events in SQL. A frame built by hand may hold the whole output instead: read from it here.
NUMBERED = r"^[\t\n\x0B\f\r\x{85}\pZ]*1[.:|]"
RESULT_SOURCE = ("result_source_path", "result_source_line")


# user.message events with text that nobody typed: a skill's file injected by the CLI (``source:
# "skill-<name>"``, CLI 1.0.70+), a button VS Code shows ("Continue", "Try Again": ``source: "button"`` from
# the chat reader; in a transcript only their text says so)
_CLICK_TEXT = r'^(?:@agent )?(?:Continue: "Continue to iterate\?"|Try Again)$'


def not_typed() -> pl.Expr:
    """A user.message that is no prompt though it holds text: Copilot's or a button's (see _CLICK_TEXT)."""
    source = pl.col("extra").str.json_path_match("$.source")
    return (source.str.starts_with("skill-") | (source == "button")
            | ((pl.col("source_kind") == "transcript") & pl.col("content").str.strip_chars().str.contains(_CLICK_TEXT)))


def prepare_events(events: pl.DataFrame) -> pl.DataFrame:
    """The events of the chosen logs (but tool events), in order, with parsed time, the prompt a
    user.message holds once Copilot's injected tags are removed (``prompt``; empty: Copilot's own nudge,
    not a prompt), the turn each event belongs to, its leg and the model in use (see ``usage.annotate``)."""
    ev = in_session_order(events)
    is_user = pl.col("event_type") == USER_MESSAGE
    ev = ev.with_columns(
        parse_ts(pl.col("ts")).alias("at"),
        pl.when(is_user).then(pl.col("content").fill_null("")).map_elements(clean_prompt, return_dtype=pl.String)
        .alias("prompt"),
    ).with_columns((is_user & (pl.col("prompt").str.len_chars() > 0) & ~not_typed().fill_null(False))
                   .alias("is_prompt"))
    ev = ev.with_columns(
        (pl.col("is_prompt").cast(pl.Int32).cum_sum().over("session_id") - 1).alias("turn_index"),
    ).with_columns(pl.when(pl.col("turn_index") >= 0).then(pl.col("turn_index")).alias("turn_index"))
    return usage_model.annotate(ev)


def error_code() -> pl.Expr:
    """A session.error's code: the provider's HTTP status, else Copilot's error type (``rateLimited``)."""
    x = pl.col("extra")
    return pl.coalesce(x.str.json_path_match("$.statusCode"), x.str.json_path_match("$.errorType"))


def turns_from_events(ev: pl.DataFrame, tools: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per prompt: its answer, token count and model; it ends with its last event, tool events
    (``tools``) included."""
    in_turn = ev.filter(pl.col("turn_index").is_not_null())
    msgs = in_turn.filter(pl.col("event_type") == ASSISTANT_MESSAGE)
    users = in_turn.filter(pl.col("is_prompt")).select(
        "session_id", "turn_index", pl.col("prompt").alias("user_message"), pl.col("at").alias("started_at"),
        "interaction_id", pl.col("source_kind"))
    # CLI 1.0.8x marks each message a progress note (`phase: commentary`) or the answer (`final_answer`)
    phase = pl.col("extra").str.json_path_match("$.phase") if "extra" in msgs.columns else pl.lit(None, pl.String)
    said = pl.col("content").str.strip_chars() != ""
    answers = msgs.with_columns(phase.alias("_phase")).group_by("session_id", "turn_index").agg(
        pl.col("content").filter(said).str.join("\n\n").alias("assistant_response"),
        pl.when((pl.col("_phase") == "final_answer").any())
        .then(pl.col("content").filter(said & (pl.col("_phase") == "final_answer")).str.join("\n\n"))
        .alias("final_answer"),
        pl.len().alias("n_assistant_messages"),
        # NULL when no message of the turn records its tokens (never 0)
        pl.when(pl.col("output_tokens").is_not_null().any()).then(pl.col("output_tokens").sum())
        .alias("output_tokens"),
    )
    t = pl.col("event_type")
    # how the turn ended: by its last answer, error or cancellation (a "Try Again" that worked is ok)
    outcome = pl.when(t == SESSION_ERROR).then(pl.lit("error")).when(t == ABORT).then(pl.lit("cancelled")) \
        .when(t == ASSISTANT_MESSAGE).then(pl.lit("ok"))
    ends = in_turn.with_columns(outcome.alias("_outcome"), error_code().alias("_code")).group_by(
        "session_id", "turn_index").agg(
        pl.col("at").max().alias("ended_at"),
        pl.col("eff_model").filter(t == ASSISTANT_MESSAGE).drop_nulls().last().alias("model"),
        pl.col("sel_model").filter(pl.col("is_prompt")).first().alias("selected_model"),
        ((t == USER_MESSAGE) & ~pl.col("is_prompt")).sum().cast(pl.Int32).alias("n_continuations"),
        pl.col("_outcome").drop_nulls().last().fill_null("ok").alias("status"),
        pl.col("_code").filter(t == SESSION_ERROR).last().alias("error_code"),
        pl.col("error_message").filter(t == SESSION_ERROR).last().alias("error_message"))
    ends = ends.with_columns(pl.when(pl.col("status") == "error").then(pl.col(c)).alias(c)
                             for c in ("error_code", "error_message"))
    if tools is not None and not tools.is_empty():
        tool_ends = tools.filter(pl.col("turn_index").is_not_null()).group_by("session_id", "turn_index").agg(
            pl.col("at").max().alias("_tools_end"))
        ends = ends.join(tool_ends, on=["session_id", "turn_index"], how="left").with_columns(
            pl.max_horizontal("ended_at", "_tools_end").alias("ended_at")).drop("_tools_end")
    out = (users.join(answers, on=["session_id", "turn_index"], how="left")
           .join(ends, on=["session_id", "turn_index"], how="left")
           .with_columns(pl.col("assistant_response").replace("", None), pl.col("final_answer").replace("", None),
                         pl.col("n_assistant_messages").fill_null(0), pl.col("n_continuations").fill_null(0)))
    return out


def turns_from_store(store_turns: pl.DataFrame, have_turns: pl.DataFrame) -> pl.DataFrame:
    """session-store.db turns, only for sessions whose event log gave none (never counted twice)."""
    if store_turns.is_empty():
        return store_turns
    st = (store_turns.filter(pl.col("session_id").is_not_null() & pl.col("turn_index").is_not_null())
          .join(have_turns.select("session_id").unique(), on="session_id", how="anti")
          .unique(["session_id", "turn_index"], keep="last", maintain_order=True)
          .sort("session_id", "turn_index"))
    return st.select(
        "session_id",
        (pl.col("turn_index").rank("dense").over("session_id") - 1).cast(pl.Int32).alias("turn_index"),
        pl.col("user_message").map_elements(clean_prompt, return_dtype=pl.String), "assistant_response",
        parse_ts(pl.col("ts")).alias("started_at"), parse_ts(pl.col("ts")).alias("ended_at"),
        pl.lit("store").alias("source_kind"), pl.lit(0).alias("n_assistant_messages"))


# ------------------------------------------------------------------------------------------ tools
# Tool events: most of the events of an agent session (a start and a completion per call), with only a
# few columns of their own. load/star.py pulls them apart, with those columns (``TOOL_EVENT_COLUMNS``), so
# that the frame of every other event is not three times as long and mostly empty.
TOOL_EVENTS = (TOOL_START, *TOOL_COMPLETIONS)
TOOL_EVENT_COLUMNS = ("session_id", "source_kind", "event_index", "event_type", "ts", "model", "tool_call_id",
                      "tool_name", "arguments", "success", "error_message", "parent_tool_call_id", "mcp_server_name",
                      "result_chars", "result_md5", "_source_path", "_source_line")


def tool_events(tools: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    """The tool events of the chosen logs, in order, with parsed time and the turn and leg of the event
    before each among its session's other events (``ev``, from ``prepare_events``): what they would have
    been in one frame with them, since no tool event starts a turn or a leg."""
    tools = in_session_order(tools).with_columns(parse_ts(pl.col("ts")).alias("at"))
    marks = pl.concat([
        ev.select(pl.lit(None, pl.UInt32).alias("_row"), "session_id", "event_index", "turn_index", "leg_index"),
        tools.select("session_id", "event_index").with_row_index("_row").with_columns(
            pl.lit(None, pl.Int32).alias("turn_index"), pl.lit(None, pl.Int32).alias("leg_index"))
        .select("_row", "session_id", "event_index", "turn_index", "leg_index")])
    placed = (marks.sort("session_id", "event_index", pl.col("_row").is_not_null())
              .with_columns(pl.col("turn_index", "leg_index").forward_fill().over("session_id"))
              .filter(pl.col("_row").is_not_null()).sort("_row"))
    return tools.with_columns(placed["turn_index"].cast(pl.Int32),
                              placed["leg_index"].fill_null(1).cast(pl.Int32))


def tool_calls(ev: pl.DataFrame, tools: pl.DataFrame, requests: pl.DataFrame) -> pl.DataFrame:
    """Request -> start -> complete joined by toolCallId, one row per call; ``tools`` are the tool events
    (``tool_events``), ``ev`` the others."""
    # a VS Code chat session does not time its tool calls: its synthesized events carry the request's end
    timed = pl.when(pl.col("source_kind") != "chat_session").then(pl.col("at"))
    turn_of = ev.select("session_id", "_source_path", "event_index", "turn_index", timed.alias("at"))
    req = (requests.join(turn_of, on=["_source_path", "event_index"], how="inner", suffix="_ev")
           .with_columns(pl.coalesce("tool_call_id", pl.format("req-{}-{}", "event_index", "request_index"))
                         .alias("tool_call_id"))
           .unique(["session_id", "tool_call_id"], keep="first", maintain_order=True)
           .select("session_id", "tool_call_id", pl.col("tool_name").alias("req_name"),
                   pl.col("arguments").alias("req_args"), pl.col("model").alias("req_model"),
                   pl.col("mcp_server_name").alias("req_mcp"), pl.col("turn_index").alias("req_turn"),
                   # a chat session's request is dated by the round that asked for it
                   (pl.coalesce("at", parse_ts(pl.col("ts"))) if "ts" in requests.columns else pl.col("at"))
                   .alias("requested_at")))
    starts = (tools.filter(pl.col("event_type") == TOOL_START)
              .with_columns(pl.coalesce("tool_call_id", pl.format("start-{}", "event_index")).alias("tool_call_id"))
              .unique(["session_id", "tool_call_id"], keep="first", maintain_order=True)
              .select("session_id", "tool_call_id", pl.col("tool_name").alias("start_name"),
                      pl.col("arguments").alias("start_args"), pl.col("model").alias("start_model"),
                      pl.col("mcp_server_name").alias("start_mcp"), pl.col("turn_index").alias("start_turn"),
                      pl.col("parent_tool_call_id").alias("start_parent"), pl.col("at").alias("started_at")))
    if "result_content" in tools.columns:  # a frame built by hand holds the whole output: its facts from it
        text = pl.coalesce("result_content", "result_head") if "result_head" in tools.columns else pl.col(
            "result_content")  # staging's whole rows: a short output is in its head only
        tools = tools.with_columns(text.alias("result_content"))
        text = pl.col("result_content")
        md5 = text.map_elements(lambda t: hashlib.md5(t.encode()).hexdigest(), return_dtype=pl.String, skip_nulls=True)
        tools = tools.with_columns(text.str.len_chars().cast(pl.Int64).alias("result_chars"), md5.alias("result_md5"),
                                   text.str.contains(NUMBERED).alias("result_numbered"))
    else:  # pulled from staging (load/star.py): the facts were pulled, the text is filled in after
        tools = tools.with_columns(pl.lit(None, pl.String).alias("result_content"))
    has_output = pl.col("result_chars").is_not_null()
    source = [pl.when(has_output).then(pl.col(c)).alias(to) for c, to in zip(("_source_path", "_source_line"),
                                                                               RESULT_SOURCE, strict=True)] \
        if "_source_line" in tools.columns else [pl.lit(None, pl.String).alias(RESULT_SOURCE[0]),
                                                 pl.lit(None, pl.Int64).alias(RESULT_SOURCE[1])]
    done = (tools.filter(pl.col("event_type").is_in(TOOL_COMPLETIONS))
            .with_columns(pl.coalesce("tool_call_id", pl.format("done-{}", "event_index")).alias("tool_call_id"))
            .unique(["session_id", "tool_call_id"], keep="last", maintain_order=True)
            .select("session_id", "tool_call_id", pl.col("tool_name").alias("done_name"),
                    pl.col("arguments").alias("done_args"), pl.col("model").alias("done_model"),
                    pl.col("turn_index").alias("done_turn"), pl.col("parent_tool_call_id").alias("done_parent"),
                    pl.col("success").alias("is_success"), "error_message", "result_content", "result_chars",
                    "result_md5", "result_numbered",
                    pl.col("at").alias("completed_at"), *source))
    keys = pl.concat([f.select("session_id", "tool_call_id") for f in (req, starts, done)]).unique()
    calls = (keys.join(req, on=["session_id", "tool_call_id"], how="left")
             .join(starts, on=["session_id", "tool_call_id"], how="left")
             .join(done, on=["session_id", "tool_call_id"], how="left"))
    calls = calls.select(
        "session_id", "tool_call_id",
        pl.coalesce("req_turn", "start_turn", "done_turn").alias("turn_index"),
        pl.coalesce("start_name", "req_name", "done_name").alias("tool_name"),
        pl.coalesce("start_mcp", "req_mcp").alias("mcp_server_name"),
        pl.coalesce("start_args", "req_args", "done_args").alias("arguments"),
        "is_success", "error_message", "result_content", "result_chars", "result_md5", "result_numbered",
        pl.coalesce("req_model", "start_model", "done_model").alias("model"),
        pl.coalesce("start_parent", "done_parent").alias("parent_tool_call_id"),
        "requested_at",
        pl.coalesce("started_at", "requested_at").alias("started_at"),
        "completed_at", *RESULT_SOURCE,
    ).with_columns(
        (pl.col("completed_at") - pl.col("started_at")).dt.total_milliseconds().alias("duration_ms"),
    ).sort("session_id", "started_at", "tool_call_id", nulls_last=True)
    families = calls.select("tool_name", "mcp_server_name").unique().with_columns(
        pl.struct("tool_name", "mcp_server_name").map_elements(
            lambda s: tool_family(s["tool_name"], s["mcp_server_name"]), return_dtype=pl.String).alias("tool_family"))
    return calls.join(families, on=["tool_name", "mcp_server_name"], how="left", nulls_equal=True,
                      maintain_order="left")


def _file_tool(tool: pl.Expr) -> pl.Expr:
    """A tool's name as ``file_action`` reads it: lower case, without a server's or extension's prefix."""
    return tool.str.to_lowercase().str.replace(r"^.*[-/]", "")


FILE_TOOLS = ("str_replace_editor",)  # with VIEW_TOOLS, EDIT_TOOLS and CREATE_TOOLS: those file_action names


def file_action(tool: pl.Expr, args: pl.Expr) -> pl.Expr:
    name = _file_tool(tool)
    command = args.str.json_path_match("$.command")
    return (pl.when(name.is_in(list(VIEW_TOOLS))).then(pl.lit("view"))
            .when(name.is_in(list(EDIT_TOOLS))).then(pl.lit("edit"))
            .when(name.is_in(list(CREATE_TOOLS))).then(pl.lit("create"))
            .when(name.is_in(list(FILE_TOOLS))).then(command.replace_strict(EDITOR_COMMANDS, default=None))
            .otherwise(None))


def file_path_arg(args: pl.Series) -> pl.Series:
    """The file each tool call's arguments name: the first of ``PATH_KEYS`` they hold, else the file a patch
    names. Each lookup parses every argument, so a key that no argument's text holds is not looked up (the
    staged arguments are DuckDB's JSON, which writes such a key as it is, never escaped)."""
    found = [args.str.json_path_match(f"$.{k}") for k in PATH_KEYS if args.str.contains(k, literal=True).any()]
    if args.str.contains("*** ", literal=True).any():
        found.append(args.str.extract(_PATCH_FILE, 1))
    return pl.select(pl.coalesce(found)).to_series() if found else pl.Series(None, [None] * len(args), pl.String)


# ------------------------------------------------------------------------------------------ sessions
def _start_context(ev: pl.DataFrame) -> pl.DataFrame:
    starts = ev.filter(pl.col("event_type") == SESSION_START).unique("session_id", keep="first",
                                                                      maintain_order=True)
    x = pl.col("extra")
    return starts.select(
        "session_id",
        x.str.json_path_match("$.copilotVersion").alias("copilot_version"),
        x.str.json_path_match("$.context.cwd").alias("ev_cwd"),
        x.str.json_path_match("$.context.gitRoot").alias("ev_git_root"),
        x.str.json_path_match("$.context.branch").alias("ev_branch"),
        x.str.json_path_match("$.context.repository").alias("ev_repository"),
        parse_ts(x.str.json_path_match("$.startTime")).alias("ev_start_time"),
        x.str.json_path_match("$.producer").alias("producer"),
    )


def _meta(meta: pl.DataFrame, kind: str, cols: list[str]) -> pl.DataFrame:
    m = meta.filter(pl.col("source_kind") == kind).unique("session_id", keep="last", maintain_order=True)
    return m.select("session_id", *[pl.col(c).alias(f"{kind}_{c}") for c in cols])


def places(meta: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    """Where each session ran (``cwd``, ``git_root``, ``repository``, ``branch``), each from the most
    authoritative source that names it: session.start, workspace.yaml, the store, the system prompt, VS Code."""
    cols = ["cwd", "git_root", "repository", "branch"]
    ws, vs, st, vc, vt, vi, vd = (_meta(meta, k, cols) for k in (
        "workspace_yaml", "vscode_metadata", "store", "vscode_chat", "vscode_transcript", "vscode_index",
        "vscode_debug_log"))
    t = pl.col("event_type")
    sys_cwd = ev.filter(t == SYSTEM_MESSAGE).group_by("session_id").agg(
        # older CLIs name the working folder only in the system prompt (cut out by the staging pull)
        pl.col("content").str.extract(r"Current working directory: *([^\r\n]+)", 1).drop_nulls().first()
        .str.strip_chars().alias("system_cwd"))
    df = pl.concat([meta.select("session_id"), ev.select("session_id")]).filter(
        pl.col("session_id").is_not_null()).unique()
    for f in (ws, vs, st, vc, vt, vi, vd, _start_context(ev), sys_cwd):
        df = df.join(f, on="session_id", how="left")
    return df.select(
        "session_id",
        pl.coalesce("ev_cwd", "workspace_yaml_cwd", "store_cwd", "system_cwd", "vscode_metadata_cwd",
                    "vscode_chat_cwd", "vscode_transcript_cwd", "vscode_index_cwd",
                    "vscode_debug_log_cwd").alias("cwd"),
        pl.coalesce("ev_git_root", "workspace_yaml_git_root", "vscode_metadata_git_root").alias("git_root"),
        pl.coalesce("ev_repository", "workspace_yaml_repository", "store_repository").alias("repository"),
        pl.coalesce("ev_branch", "workspace_yaml_branch", "store_branch", "vscode_metadata_branch").alias("branch"),
    )


def root_repositories(places_frame: pl.DataFrame) -> dict[str, str]:
    """The repository of each root folder, as the sessions that ran there and know it say (the one most
    of them name; ties by name): a session that does not know its repository joins that project."""
    known = places_frame.filter(pl.col("repository").is_not_null() & (pl.col("repository").str.strip_chars() != ""))
    if known.is_empty():
        return {}
    roots = known.with_columns(pl.struct("git_root", "cwd").map_elements(
        lambda s: project_root(s["git_root"], s["cwd"]), return_dtype=pl.String).alias("root"))
    best = (roots.filter(pl.col("root") != "").group_by("root", "repository").len()
            .sort(["root", "len", "repository"], descending=[False, True, False])
            .unique("root", keep="first", maintain_order=True))
    return dict(best.select("root", "repository").iter_rows())


def project_ids(places_frame: pl.DataFrame, root_repos: dict[str, str]) -> pl.DataFrame:
    """session_id, project_id, project_root for every session of ``places_frame``."""
    keys = places_frame.select("git_root", "cwd", "repository").unique().with_columns(
        pl.struct("git_root", "cwd", "repository").map_elements(
            lambda s: _project_key(s["git_root"], s["cwd"], s["repository"], root_repos),
            return_dtype=pl.Struct({"project_id": pl.String, "project_root": pl.String}),
        ).alias("p")).unnest("p")
    return places_frame.join(keys, on=["git_root", "cwd", "repository"], how="left", nulls_equal=True).select(
        "session_id", "project_id", "project_root")


ACTIVE_GAP_S = 30 * 60


def active_seconds(times: pl.DataFrame) -> pl.DataFrame:
    """session_id, active_s: the time between a session's events, each gap counted up to ACTIVE_GAP_S
    (a session re-opened weeks later is not weeks of work): whole milliseconds summed, then ``seconds``."""
    gaps = (times.filter(pl.col("at").is_not_null()).sort("session_id", "at")
            .with_columns(pl.col("at").diff().over("session_id").dt.total_milliseconds().alias("_gap")))
    return gaps.group_by("session_id").agg(pl.col("_gap").clip(0, ACTIVE_GAP_S * 1000).sum().alias("_ms")).select(
        "session_id", seconds(pl.col("_ms")).alias("active_s"))


def seconds(ms: pl.Expr) -> pl.Expr:
    """Whole milliseconds as seconds, divided as Python divides. polars divides a column of more than one row by a
    constant as a multiplication by its inverse, so a figure differed in its last digit with the rows computed
    beside it: a session's duration was 5112.864 s rebuilt alone and 5112.8640000000005 s in a batch (and rows
    that did not change were replaced). Only per-session figures go through here: a Python call a row."""
    return ms.map_elements((1000).__rtruediv__, return_dtype=pl.Float64)  # m / 1000, correctly rounded


def _present_sessions(stg: dict[str, pl.DataFrame], present: pl.DataFrame) -> pl.Series:
    """Sessions with a source file still on disk: a file of their own, or a file holding their
    metadata, store turns or events (``present``: source_path, session_id of every present source)."""
    paths = present["source_path"]
    own = present.filter(pl.col("session_id").is_not_null()).select("session_id")
    held = [stg[t].filter(pl.col("_source_path").is_in(paths.implode())).select("session_id")
            for t in ("stg_session_meta", "stg_store_turns", "stg_events")]
    return pl.concat([own, *held])["session_id"].drop_nulls().unique()


def sessions(stg: dict[str, pl.DataFrame], ev: pl.DataFrame, tools: pl.DataFrame, turns: pl.DataFrame,
             calls: pl.DataFrame, usage: pl.DataFrame, root_repos: dict[str, str],
             present: pl.DataFrame) -> pl.DataFrame:
    meta = stg["stg_session_meta"]
    ids = pl.concat([f.select("session_id") for f in stg.values() if "session_id" in f.columns]).unique()
    ids = ids.filter(pl.col("session_id").is_not_null())
    cols = ["title", "summary", "host_type", "client_name", "created_at", "updated_at", "first_user_message"]
    ws, vs, st, vc, vt, vi, vd, dk = (_meta(meta, k, cols) for k in (
        "workspace_yaml", "vscode_metadata", "store", "vscode_chat", "vscode_transcript", "vscode_index",
        "vscode_debug_log", "desktop"))
    # a session's first and last OpenTelemetry request (a session known only from spans is dated by them)
    spans = stg.get("stg_otel_requests", pl.DataFrame(schema={"session_id": pl.String, "requested_at": pl.String}))
    ot = spans.group_by("session_id").agg(pl.col("requested_at").min().alias("otel_created_at"),
                                          pl.col("requested_at").max().alias("otel_updated_at"))
    ctx = _start_context(ev)
    t = pl.col("event_type")
    ev_stats = ev.group_by("session_id").agg(
        pl.len().alias("n_events"),
        (~t.is_in(list(KNOWN_TYPES))).sum().alias("n_unknown_events"),
        (t == SESSION_RESUME).sum().alias("n_resumes"),
        ((t == USER_MESSAGE) & ~pl.col("is_prompt")).sum().alias("n_continuations"),
        pl.col("at").min().alias("ev_first_at"), pl.col("at").max().alias("ev_last_at"),
        pl.col("eff_model").filter(t == ASSISTANT_MESSAGE).drop_nulls().unique().alias("ev_models"),
        (t == SESSION_ERROR).sum().cast(pl.Int32).alias("n_errors"),
        pl.col("error_message").filter(t == SESSION_ERROR).last().alias("error_message"),
    )
    tool_stats = tools.group_by("session_id").agg(pl.len().alias("_n"), pl.col("at").min().alias("_first"),
                                                   pl.col("at").max().alias("_last"))
    active = active_seconds(pl.concat([ev.select("session_id", "at"), tools.select("session_id", "at"),
                                       turns.select("session_id", pl.col("started_at").alias("at")),
                                       turns.select("session_id", pl.col("ended_at").alias("at"))]))
    ev_stats = ev_stats.join(tool_stats, on="session_id", how="full", coalesce=True).select(
        "session_id", (pl.col("n_events").fill_null(0) + pl.col("_n").fill_null(0)).alias("n_events"),
        pl.col("n_unknown_events").fill_null(0), pl.col("n_resumes").fill_null(0),
        pl.col("n_continuations").fill_null(0), pl.min_horizontal("ev_first_at", "_first").alias("ev_first_at"),
        pl.max_horizontal("ev_last_at", "_last").alias("ev_last_at"), "ev_models", "n_errors", "error_message")
    where = places(meta, ev)
    first_prompt = turns.sort("turn_index").unique("session_id", keep="first", maintain_order=True).select(
        "session_id", pl.col("user_message").alias("first_prompt"), pl.col("started_at").alias("first_turn_at"))
    t_stats = turns.group_by("session_id").agg(pl.len().alias("n_turns"), pl.col("ended_at").max().alias("t_end"))
    c_stats = calls.group_by("session_id").agg(
        pl.len().alias("n_tool_calls"), (pl.col("is_success") == False).sum().alias("n_failed_tool_calls"))  # noqa: E712
    u_models = usage.filter(pl.col("model") != usage_model.UNKNOWN_MODEL).group_by("session_id").agg(
        pl.col("model").unique().alias("u_models"))
    sources = pl.concat([
        f.select("session_id", pl.col("source_kind").alias("src")) for name, f in stg.items()
        if "source_kind" in f.columns and name != "stg_tool_requests"
    ] + [stg["stg_store_turns"].select("session_id", pl.lit("store").alias("src")),
         stg["stg_store_files"].select("session_id", pl.lit("store").alias("src")),
         stg["stg_documents"].select("session_id", pl.col("kind").alias("src"))])
    sources = sources.filter(pl.col("src").is_not_null()).group_by("session_id").agg(
        pl.col("src").unique().sort().alias("sources"))

    df = ids
    for f in (ws, vs, st, vc, vt, vi, vd, ot, dk,
              ctx.select("session_id", "copilot_version", "ev_start_time", "producer"),
              where, ev_stats, active, first_prompt, t_stats, c_stats, u_models, sources):
        df = df.join(f, on="session_id", how="left")
    df = df.with_columns(pl.col(c).fill_null(0) for c in (
        "n_events", "n_unknown_events", "n_resumes", "n_continuations", "n_turns", "n_tool_calls",
        "n_failed_tool_calls", "n_errors"))

    def one_line(col: str) -> pl.Expr:
        """A title on one line, at most TITLE_MAX characters (a workspace.yaml name is the whole first prompt,
        line breaks included)."""
        text = pl.col(col).str.replace_all(r"\s+", " ").str.strip_chars().replace("", None)
        return pl.when(text.str.len_chars() > TITLE_MAX).then(text.str.slice(0, TITLE_MAX - 1) + "…").otherwise(text)

    is_vscode = (pl.col("vscode_metadata_title").is_not_null()
                 | (pl.col("sources").list.set_intersection(list(VSCODE_ROW_KINDS)).list.len() > 0)
                 | (pl.col("store_host_type") == "vscode") | pl.col("producer").str.starts_with("vscode"))
    agent_host = pl.any_horizontal(pl.col(f"{k}_client_name").str.starts_with("vscode")
                                   for k in ("workspace_yaml", "store", "vscode_metadata"))
    df = df.with_columns(
        pl.coalesce(*map(one_line, ("vscode_metadata_title", "vscode_chat_title", "desktop_title",
                                    "workspace_yaml_title",
                                    "workspace_yaml_summary", "store_summary", "vscode_index_title", "first_prompt",
                                    "vscode_metadata_first_user_message"))).alias("title"),
        pl.coalesce("workspace_yaml_summary", "store_summary").alias("summary"),
        # VS Code's chat, or the CLI runtime VS Code's agent host runs (client_name vscode-agent-host)
        pl.when(is_vscode.fill_null(False) | agent_host.fill_null(False)).then(pl.lit("vscode"))
        .otherwise(pl.lit("cli")).alias("client"),
        pl.min_horizontal("ev_start_time", "ev_first_at", parse_ts(pl.col("workspace_yaml_created_at")),
                          parse_ts(pl.col("store_created_at")), "first_turn_at",
                          parse_ts(pl.col("vscode_index_created_at")),
                          parse_ts(pl.col("vscode_debug_log_created_at")),
                          parse_ts(pl.col("otel_created_at")), parse_ts(pl.col("desktop_created_at")))
        .alias("started_at"),
        pl.max_horizontal("ev_last_at", "t_end", parse_ts(pl.col("workspace_yaml_updated_at")),
                          parse_ts(pl.col("store_updated_at")), parse_ts(pl.col("vscode_index_updated_at")),
                          parse_ts(pl.col("vscode_debug_log_updated_at")),
                          parse_ts(pl.col("otel_updated_at")), parse_ts(pl.col("desktop_updated_at")))
        .alias("ended_at"),
        pl.concat_list(pl.col("ev_models").fill_null([]), pl.col("u_models").fill_null([]))
        .list.unique().list.sort().alias("models"),
        pl.col("sources").fill_null([]),
        ~pl.col("session_id").is_in(_present_sessions(stg, present).implode()).alias("is_gone"),
    ).with_columns(
        seconds((pl.col("ended_at") - pl.col("started_at")).dt.total_milliseconds()).alias("duration_s"),
    )
    # a VS Code chat opened and left (a transcript with nothing but its start): not a session
    only_vscode = pl.col("sources").list.set_difference(list(VSCODE_ROW_KINDS)).list.len() == 0
    stub = (pl.col("client") == "vscode") & only_vscode \
        & (pl.col("n_turns") + pl.col("n_tool_calls") + pl.col("n_continuations") + pl.col("n_errors") == 0) \
        & pl.col("u_models").is_null()
    df = df.filter(~stub)
    keys = project_ids(where, root_repos)
    # a session known only from rows that name no place (a store usage row, say): the no-project bucket
    nowhere = _project_key(None, None, None, {})
    return df.join(keys, on="session_id", how="left").with_columns(
        pl.col("project_id").fill_null(nowhere["project_id"]),
        pl.col("project_root").fill_null(nowhere["project_root"]),
    ).with_columns(pl.col("project_root").alias("root_path"))


def _project_key(git_root: str | None, cwd: str | None, repository: str | None, root_repos: dict[str, str]) -> dict:
    """A session's project: its repository, when it or another session run in the same folder knows it
    (every clone and worktree of a repository is one project), else its root folder (git root, else
    working directory), else the one no-project bucket. ``project_root`` is the session's own root,
    which its file paths are made relative to."""
    root = project_root(git_root, cwd)
    repo = (repository or "").strip().strip("/") or root_repos.get(root, "")
    return {"project_id": short_hash("repo:" + repo.lower()) if repo else short_hash(root), "project_root": root}


# ------------------------------------------------------------------------------------------ files
def file_touches(calls: pl.DataFrame, store_files: pl.DataFrame, sess: pl.DataFrame, ev: pl.DataFrame):
    """Tool-call, VS Code edited-file and session_files touches, with project-relative paths and
    deterministic file ids."""
    proj = sess.select("session_id", "project_id", "project_root", "cwd")
    # the file-tool calls first, then their paths: the path's seven lookups in the arguments on those calls only
    names = calls.select(pl.col("tool_name").unique().drop_nulls()).to_series()
    file_tools = names.filter(_file_tool(names).is_in([*VIEW_TOOLS, *EDIT_TOOLS, *CREATE_TOOLS, *FILE_TOOLS]))
    from_calls = calls.filter(pl.col("tool_name").is_in(file_tools.to_list()))
    from_calls = from_calls.select(
        "session_id", "tool_call_id", file_path_arg(from_calls["arguments"]).alias("raw_path"),
        file_action(pl.col("tool_name"), pl.col("arguments")).alias("action"),
        pl.coalesce("started_at", "completed_at").alias("at"), "result_numbered", "is_success",
    ).filter(pl.col("raw_path").is_not_null() & pl.col("action").is_not_null())
    from_edits = ev.filter(pl.col("event_type") == FILE_EDITED).select(
        "session_id", pl.lit(None, pl.String).alias("tool_call_id"),
        pl.col("arguments").str.json_path_match("$.path").alias("raw_path"), pl.lit("edit").alias("action"),
        "at", pl.lit(None, pl.Boolean).alias("result_numbered"), pl.lit(None, pl.Boolean).alias("is_success"),
    ).filter(pl.col("raw_path").is_not_null())
    # an edited-file event repeats what an edit tool call of the same request already did: add only new ones
    from_edits = from_edits.join(from_calls.select("session_id", "raw_path", "action"),
                                 on=["session_id", "raw_path", "action"], how="anti")
    from_calls = pl.concat([from_calls, from_edits])
    from_store = store_files.filter(pl.col("file_path").is_not_null()).select(
        "session_id", pl.lit(None, pl.String).alias("tool_call_id"), pl.col("file_path").alias("raw_path"),
        pl.coalesce(file_action(pl.col("tool_name"), pl.lit("{}")), pl.lit("edit")).alias("action"),
        parse_ts(pl.col("first_seen_at")).alias("at"), pl.lit(None, pl.Boolean).alias("result_numbered"),
        pl.lit(None, pl.Boolean).alias("is_success"))
    both = pl.concat([from_calls.with_columns(pl.lit(0).alias("_prio")),
                      from_store.with_columns(pl.lit(1).alias("_prio"))]).join(proj, on="session_id", how="left")
    uniq = both.select("raw_path", "project_root", "cwd", "project_id").unique()
    uniq = uniq.with_columns(pl.struct("raw_path", "project_root", "cwd", "project_id").map_elements(
        lambda s: _file_key(s["raw_path"], s["project_root"], s["cwd"], s["project_id"]),
        return_dtype=pl.Struct({"path": pl.String, "is_in_project": pl.Boolean, "file_id": pl.String}),
    ).alias("f")).unnest("f")
    both = both.join(uniq, on=["raw_path", "project_root", "cwd", "project_id"], how="left", nulls_equal=True)
    # a `view` of a folder lists entries instead of numbered lines: not a file touch
    folder_view = ((pl.col("action") == "view") & (pl.col("path") == "")) | (
        (pl.col("action") == "view") & pl.col("is_success").fill_null(False)
        & ~pl.col("path").str.contains(r"(?:^|/)[^/.][^/]*\.[A-Za-z0-9]+$")
        & pl.col("result_numbered").is_not_null() & ~pl.col("result_numbered"))
    both = both.filter(pl.col("path").is_not_null() & ~folder_view)
    call_files = both.filter((pl.col("_prio") == 0) & pl.col("tool_call_id").is_not_null()) \
        .select("session_id", "tool_call_id", "file_id", "action") \
        .unique(["session_id", "tool_call_id"], keep="first", maintain_order=True)
    ev_touch = both.filter(pl.col("_prio") == 0)
    st_touch = both.filter(pl.col("_prio") == 1).join(
        ev_touch.select("session_id", "file_id", "action").unique(), on=["session_id", "file_id", "action"],
        how="anti")
    touches = pl.concat([ev_touch, st_touch]).group_by("session_id", "file_id", "action").agg(
        pl.len().cast(pl.Int32).alias("n_touches"), pl.col("at").min().alias("first_seen_at"),
        pl.col("at").max().alias("last_seen_at")).sort("session_id", "file_id", "action")
    files = (both.filter(pl.col("file_id").is_not_null())
             .select("session_id", "file_id", "project_id", "path", "is_in_project")
             .unique(["session_id", "file_id"], keep="first", maintain_order=True)
             .sort("session_id", "file_id"))
    return call_files, touches, files


def _file_key(raw_path: str, root: str, cwd: str | None, project_id: str):
    rel, inside = relativize(raw_path, root, cwd)
    if rel is None:
        return {"path": None, "is_in_project": None, "file_id": None}
    return {"path": rel, "is_in_project": inside, "file_id": short_hash(project_id, rel)}


# ------------------------------------------------------------------------------------------ the rest
def checkpoints(stg_cp: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    cp = (stg_cp.filter(pl.col("session_id").is_not_null() & pl.col("checkpoint_number").is_not_null())
          .with_columns(pl.col("source_kind").replace_strict(PRECEDENCE, default=9).alias("_r"))
          .sort("session_id", "checkpoint_number", "_r")
          .unique(["session_id", "checkpoint_number"], keep="first", maintain_order=True))
    compactions = ev.filter(pl.col("event_type") == COMPACTION_COMPLETE).select(
        "session_id",
        pl.col("extra").str.json_path_match("$.checkpointNumber").cast(pl.Int32, strict=False)
        .alias("checkpoint_number"), pl.col("at").alias("compacted_at"),
    ).filter(pl.col("checkpoint_number").is_not_null()).unique(["session_id", "checkpoint_number"], keep="last")
    # the markdown files carry no time: the store's row for the same checkpoint, else the compaction, has one
    store_times = (stg_cp.filter((pl.col("source_kind") == "store") & pl.col("created_at").is_not_null())
                   .select("session_id", "checkpoint_number", parse_ts(pl.col("created_at")).alias("store_at"))
                   .unique(["session_id", "checkpoint_number"], keep="last", maintain_order=True))
    return (cp.join(compactions, on=["session_id", "checkpoint_number"], how="left")
            .join(store_times, on=["session_id", "checkpoint_number"], how="left")
            .with_columns(pl.coalesce(parse_ts(pl.col("created_at")), "store_at", "compacted_at").alias("created_at")))


_REF_TYPES = {"pull_request": "pr", "pull": "pr", "pullrequest": "pr", "sha": "commit"}


def refs(store_refs: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    # the store's ref types as fct_refs promises them (commit, pr, issue); others stay in stg_store_refs
    kind = pl.col("ref_type").str.strip_chars().str.to_lowercase().replace(_REF_TYPES)
    st = store_refs.filter(pl.col("session_id").is_not_null() & pl.col("ref_value").is_not_null()).select(
        "session_id", kind.alias("ref_type"), "ref_value", "turn_index",
        parse_ts(pl.col("created_at")).alias("created_at"), pl.lit("store").alias("source_kind"),
    ).filter(pl.col("ref_type").is_in(["commit", "pr", "issue"]))
    att = ev.filter((pl.col("event_type") == USER_MESSAGE) & pl.col("extra").str.contains("github_reference"))
    rows = []
    for r in att.select("session_id", "turn_index", "at", "extra").iter_rows(named=True):
        for a in (orjson.loads(r["extra"]).get("attachments") or []):
            if isinstance(a, dict) and a.get("type") == "github_reference" and a.get("number") is not None:
                kind = "pr" if str(a.get("referenceType", "")).lower() in ("pr", "pull", "pull_request") else "issue"
                rows.append({"session_id": r["session_id"], "ref_type": kind, "ref_value": str(a["number"]),
                             "turn_index": r["turn_index"], "created_at": r["at"], "source_kind": "attachment"})
    extra = pl.DataFrame(rows, schema=st.schema) if rows else st.clear()
    return (pl.concat([st, extra]).sort("session_id", "ref_type", "ref_value", "source_kind")
            .unique(["session_id", "ref_type", "ref_value"], keep="last", maintain_order=True))


# the staging frames whose rows two copies of a home hold alike: a home moved (its old files' rows are kept as gone,
# the same rows are read again from the new place) or captured twice (a snapshot and the home it grew into, both
# read). The event logs and their tool requests are one log per session already (``chosen_logs``).
COPIED = ("stg_session_meta", "stg_checkpoints", "stg_documents", "stg_store_turns", "stg_store_files",
          "stg_store_refs", "stg_store_usage", "stg_debug_requests", "stg_otel_requests", "stg_desktop_sessions",
          "stg_desktop_context")


def without_copies(frame: pl.DataFrame, on_disk: pl.Series | None = None) -> pl.DataFrame:
    """``frame`` with each row that two or more sources hold alike - in every column but where it was read - from
    one of them only: one on disk (``on_disk``: their paths; None: all are) before one that is gone, then the newest
    path (the greatest, as ``chosen_logs``). A store captured twice counted each of its file touches twice; a moved
    home's memories were two each. Rows of one source are never merged with each other, and a gone source's rows
    that no other source repeats stay: the history Copilot deleted is kept."""
    if frame.height < 2 or "_source_path" not in frame.columns:
        return frame
    path = pl.col("_source_path").cast(pl.String)
    of = [c for c in ("session_id", "source_kind") if c in frame.columns]  # rows of two kinds are never alike
    if frame.select(path.n_unique().over(of).max()).item() < 2:  # one source of each session's kind: no copies
        return frame
    here = pl.lit(True) if on_disk is None else path.is_in(on_disk.implode())
    cols = [c for c in frame.columns if c not in ("_source_path", "_run_id")]
    indexed = frame.with_row_index("_row").with_columns(path.alias("_path"), here.alias("_here"))
    chosen = (indexed.group_by(cols, maintain_order=True)
              .agg(pl.col("_path").sort_by(["_here", "_path"], descending=[True, True]).first().alias("_chosen")))
    keep = indexed.join(chosen, on=cols, how="left", nulls_equal=True).filter(
        pl.col("_path") == pl.col("_chosen"))["_row"]
    return frame.filter(pl.Series(range(frame.height)).is_in(keep.implode()))


def memories(docs: pl.DataFrame) -> pl.DataFrame:
    d = docs.filter(pl.col("content").is_not_null())
    ids = d.select("_source_path", "path").unique().with_columns(
        pl.struct("_source_path", "path").map_elements(lambda s: short_hash(s["_source_path"], s["path"]),
                                                       return_dtype=pl.String).alias("memory_id"))
    return d.join(ids, on=["_source_path", "path"], how="left").unique("memory_id", keep="last",
                                                                       maintain_order=True)


# ------------------------------------------------------------------------------------------ entry
def turns_and_calls(stg: dict[str, pl.DataFrame], on_disk: pl.Series | None = None
                    ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The star's relational core, from a batch's staging frames (``build_star``'s ``stg``, which it consumes as
    that says): the events of the chosen logs, prepared (``prepare_events``), their tool events placed
    (``tool_events``), the turns, each with its count of tool calls, and the tool calls. ``on_disk``: the paths of
    the sources still on disk (None: all of them)."""
    # the log's path, repeated on every event and request, as a categorical (load/star.py pulls it as one)
    log_path = pl.col("_source_path").cast(pl.Categorical)
    stg["stg_tool_requests"] = stg["stg_tool_requests"].with_columns(log_path)
    stg.update({name: without_copies(stg[name], on_disk) for name in COPIED if name in stg})  # two copies' rows: once
    events = stg.pop("stg_events").filter(pl.col("session_id").is_not_null()).with_columns(log_path)
    tools = stg.pop("stg_tool_events", None)
    if tools is None:  # every event in one frame (built by hand): its tool events apart, as load/star.py pulls them
        is_tool = pl.col("event_type").is_in(TOOL_EVENTS)
        events, tools = events.filter(~is_tool), events.filter(is_tool)
    tools = tools.filter(pl.col("session_id").is_not_null()).with_columns(log_path)
    logs = chosen_logs(events, tools, on_disk=on_disk)
    stg["stg_events"] = pl.concat([f.select("session_id", "source_kind", "_source_path").unique()
                                   for f in (events, tools)]).unique().with_columns(
        pl.col("_source_path").cast(pl.String))  # every log, for `sessions`
    ev = prepare_events(keep_logs(events, logs))
    del events
    tools = tool_events(keep_logs(tools, logs), ev)
    t_ev = turns_from_events(ev, tools)
    turns = pl.concat([t_ev, turns_from_store(stg["stg_store_turns"], t_ev)], how="diagonal_relaxed")
    calls = tool_calls(ev, tools, stg["stg_tool_requests"])
    n_calls = calls.filter(pl.col("turn_index").is_not_null()).group_by("session_id", "turn_index").agg(
        pl.len().cast(pl.Int32).alias("n_tool_calls"))
    turns = turns.join(n_calls, on=["session_id", "turn_index"], how="left").with_columns(
        pl.col("n_tool_calls").fill_null(0)).sort("session_id", "turn_index")
    return ev, tools, turns, calls


def build_star(stg: dict[str, pl.DataFrame], root_repos: dict[str, str] | None = None,
               present: pl.DataFrame | None = None) -> dict[str, pl.DataFrame]:
    """All star frames for the sessions present in ``stg`` (a dict of staging frames); ``root_repos``
    names the repository of the folders where sessions of the whole warehouse ran (``root_repositories``);
    ``present`` lists the source files still on disk (source_path, session_id; None: all of them).

    ``stg`` is consumed: the pulled events are dropped from it once prepared (the largest session's
    pull is then freed while its star is built), leaving what ``sessions`` reads of them."""
    on_disk = None if present is None else present["source_path"]
    ev, tools, turns, calls = turns_and_calls(stg, on_disk)
    versions = dict(_start_context(ev).select("session_id", "copilot_version").iter_rows())
    requests, legs, use = usage_model.build_usage(ev, stg["stg_store_usage"], turns, versions, tools,
                                                  stg.get("stg_debug_requests"), stg.get("stg_otel_requests"),
                                                  stg.get("stg_desktop_sessions"))
    auto = {(r[0], r[1]) for r in legs.filter(pl.col("is_auto")).select("session_id", "leg_index").iter_rows()}
    requests = usage_model.attribute(usage_model.request_costs(requests, auto), calls, ev)
    if present is None:  # every source of the batch is on disk
        present = pl.concat([f.select(pl.col("_source_path").cast(pl.String).alias("source_path"), "session_id")
                             for f in stg.values() if "_source_path" in f.columns and "session_id" in f.columns])
    sess = sessions(stg, ev, tools, turns, calls, use, root_repos or {}, present)
    call_files, touches, files = file_touches(calls, stg["stg_store_files"], sess, ev)
    calls = calls.join(call_files, on=["session_id", "tool_call_id"], how="left")
    return {
        "dim_sessions": conform(sess, "dim_sessions"),
        "fct_turns": conform(turns, "fct_turns"),
        # with the start of each output and the event it came from (load/star.py cuts or fills it in)
        "fct_tool_calls": conform(calls, "fct_tool_calls"),
        "fct_file_touches": conform(touches, "fct_file_touches"),
        "fct_checkpoints": conform(checkpoints(stg["stg_checkpoints"], ev), "fct_checkpoints"),
        "fct_refs": conform(refs(stg["stg_store_refs"], ev), "fct_refs"),
        "fct_requests": conform(requests, "fct_requests"),
        "fct_usage_legs": conform(legs, "fct_usage_legs"),
        "fct_usage": conform(use, "fct_usage"),
        "fct_memories": conform(memories(stg["stg_documents"]), "fct_memories"),
        "int_session_files": conform(files, "int_session_files"),
    }
