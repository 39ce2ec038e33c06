"""Token use and cost: per request (``fct_requests``), per leg of a session (``fct_usage_legs``) and
per session x model (``fct_usage``).

A session's event log is cut into legs: a leg starts at ``session.start`` or ``session.resume`` and
ends at its ``session.shutdown`` (or the next resume, or the end of the log). What a leg used comes
from the most detailed source that covers it:

1. its ``session.shutdown``: ``modelMetrics`` per model. The shape of a shutdown changed between
   CLI versions: up to 1.0.60 each shutdown counts only its own leg, from 1.0.73 it counts every
   leg so far. Which one a shutdown is, is told by comparing it with the leg's messages: its
   output tokens equal either the leg's ``outputTokens`` or those plus the previous shutdown's
   (request counts, then whether any figure went down, break a tie; the CLI version only when
   nothing else can). A cumulative shutdown contributes its difference from the previous one.
2. session-store.db ``assistant_usage_events`` (one row per request) or ``assistant.usage`` events;
3. else its messages: requests and ``outputTokens``, input unknown (NULL, never 0).

Cost in nano-AIU is taken where it was logged: per model on the shutdown, per request in the
store, or from the running ``totalNanoAiu`` of ``session.usage_checkpoint`` events (the difference
between checkpoints is what the requests between them cost). Where nothing was logged and the
tokens are known, it is estimated from the price table (``prices.py``); else it is unknown.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

import orjson
import polars as pl

from ..schema import COUNT
from ..vocabulary import (
    ASSISTANT_MESSAGE,
    ASSISTANT_USAGE,
    AUTO_RESOLVED,
    MODEL_CHANGE,
    SESSION_RESUME,
    SESSION_SHUTDOWN,
    SESSION_START,
    SKILL_INVOKED,
    SUBAGENT_STARTED,
    TURN_START,
    USAGE_CHECKPOINT,
    USER_MESSAGE,
)
from . import prices
from .times import parse_ts

log = logging.getLogger(__name__)

LEG_STARTS = (SESSION_START, SESSION_RESUME)
UNKNOWN_MODEL = "(unknown)"
# event types whose `extra` the usage transform reads (see star.EVENT_TEXT_USED)
USAGE_EXTRA = (SESSION_START, SESSION_RESUME, SESSION_SHUTDOWN, USAGE_CHECKPOINT, MODEL_CHANGE, AUTO_RESOLVED,
               SUBAGENT_STARTED, ASSISTANT_USAGE, SKILL_INVOKED)
# the CLI version from which shutdowns were seen to be cumulative; used only when the log cannot tell
CUMULATIVE_FROM = (1, 0, 61)
_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
_METRIC_USAGE = {"input_tokens": "inputTokens", "output_tokens": "outputTokens",
                 "cache_read_tokens": "cacheReadTokens", "cache_write_tokens": "cacheWriteTokens",
                 "reasoning_tokens": "reasoningTokens"}

REQUEST_SCHEMA = {"session_id": pl.String, "request_id": pl.String, "leg_index": pl.Int32, "turn_index": pl.Int32,
                  "requested_at": pl.Datetime("us", "UTC"), "model": pl.String, "input_tokens": pl.Int64,
                  "output_tokens": pl.Int64, "cache_read_tokens": pl.Int64, "cache_write_tokens": pl.Int64,
                  "reasoning_tokens": pl.Int64, "nano_aiu": pl.Int64, "request_multiplier": pl.Float64,
                  "initiator": pl.String, "is_subagent": pl.Boolean, "source": pl.String,
                  "selected_model": pl.String, "duration_ms": pl.Int64, "ttft_ms": pl.Int64,
                  "_parent": pl.String, "_agent": pl.String}
LEG_SCHEMA = {"session_id": pl.String, "leg_index": pl.Int32, "model": pl.String,
              "started_at": pl.Datetime("us", "UTC"), "used_at": pl.Datetime("us", "UTC"), "requests": pl.Int64,
              "input_tokens": pl.Int64, "output_tokens": pl.Int64, "cache_read_tokens": pl.Int64,
              "cache_write_tokens": pl.Int64, "reasoning_tokens": pl.Int64, "premium_requests": pl.Decimal(38, 6),
              "nano_aiu": pl.Int64, "ai_credits": pl.Decimal(38, 9), "cost_usd": pl.Decimal(38, 11),
              "token_source": pl.String,
              "cost_source": pl.String, "price_ref": pl.String, "is_auto": pl.Boolean}


def _json_num(expr: pl.Expr, path: str, dtype: pl.DataType = pl.Int64) -> pl.Expr:
    """A number inside a JSON text, NULL when it is none or outside the plausible range (COUNT)."""
    s = expr.str.json_path_match(path)
    v = s.cast(pl.Float64, strict=False)
    v = pl.when(v.is_finite() & (v >= COUNT[0]) & (v <= COUNT[1])).then(v)
    if dtype == pl.Int64:
        return pl.when(v.is_not_null()).then(pl.coalesce(s.cast(pl.Int64, strict=False), v.round().cast(pl.Int64)))
    return v


def _model_hint() -> pl.Expr:
    """The model an event says is in use from now on ('auto' is not a model)."""
    t, x = pl.col("event_type"), pl.col("extra")
    hint = (pl.when(t == MODEL_CHANGE).then(x.str.json_path_match("$.newModel"))
            .when(t.is_in(LEG_STARTS)).then(x.str.json_path_match("$.selectedModel"))
            .when(t == AUTO_RESOLVED).then(x.str.json_path_match("$.chosenModel"))
            .when(t == SESSION_SHUTDOWN).then(x.str.json_path_match("$.currentModel"))
            .when(t.is_in([TURN_START, ASSISTANT_MESSAGE])).then(pl.col("model")))
    return pl.when(hint.str.to_lowercase().is_in(["auto", ""])).then(None).otherwise(hint)


def _selected_hint() -> pl.Expr:
    """The model the user selected from this event on (``auto`` included): session.start / resume,
    a model change, or a VS Code request's own selection (on its user.message)."""
    t, x = pl.col("event_type"), pl.col("extra")
    return (pl.when(t == MODEL_CHANGE).then(x.str.json_path_match("$.newModel"))
            .when(t.is_in([*LEG_STARTS, USER_MESSAGE])).then(x.str.json_path_match("$.selectedModel")))


def annotate(ev: pl.DataFrame) -> pl.DataFrame:
    """Events (sorted by session and position) with ``leg_index``, ``obs_index`` (usage checkpoints
    before the event within its leg), ``eff_model`` (the event's model, else the one in use) and
    ``leg_auto`` (the leg ran on auto model selection)."""
    t = pl.col("event_type")
    first = pl.int_range(pl.len()).over("session_id") == 0
    # a leg starts at session.start / session.resume; a shutdown ends it, and a request after a
    # shutdown (no resume in between) starts another one
    start_seg = (first | t.is_in(LEG_STARTS)).cast(pl.Int32).cum_sum().over("session_id")
    is_shutdown = (t == SESSION_SHUTDOWN).cast(pl.Int32)
    shut_before = is_shutdown.cum_sum().over("session_id", "_seg") - is_shutdown
    after = (pl.when(t.is_in([ASSISTANT_MESSAGE, ASSISTANT_USAGE])).then(shut_before)
             .forward_fill().over("session_id", "_seg").fill_null(0))
    out = ev.with_columns(start_seg.alias("_seg")).with_columns(after.alias("_sub")).with_columns(
        (pl.col("_seg").cast(pl.Int64) * 1_000_000 + pl.col("_sub")).rank("dense").over("session_id")
        .cast(pl.Int32).alias("leg_index"),
        _model_hint().alias("_hint")).drop("_seg", "_sub")
    sub = (out.filter(t == SUBAGENT_STARTED)
           .select("session_id", pl.col("tool_call_id").alias("parent_tool_call_id"),
                   pl.col("extra").str.json_path_match("$.model").alias("_sub_model"))
           .filter(pl.col("parent_tool_call_id").is_not_null())
           .unique(["session_id", "parent_tool_call_id"], keep="first", maintain_order=True))
    chosen = (pl.col("extra").str.json_path_match("$.selectedModel").str.to_lowercase() == "auto") | (
        pl.col("extra").str.json_path_match("$.newModel").str.to_lowercase() == "auto")
    # a join copies every column: only where there are subagents
    joined = out.join(sub, on=["session_id", "parent_tool_call_id"], how="left") if sub.height \
        else out.with_columns(pl.lit(None, pl.String).alias("_sub_model"))
    return (joined
            .with_columns(
                (t == USAGE_CHECKPOINT).cast(pl.Int32).cum_sum().over("session_id", "leg_index").alias("obs_index"),
                _selected_hint().forward_fill().over("session_id").alias("sel_model"),
                # a VS Code chat request names the model that answered it, or none is known: none is inherited
                pl.when(pl.col("source_kind") == "chat_session").then(pl.col("model").replace("", None))
                .otherwise(pl.coalesce(pl.col("model").replace("", None), "_sub_model",
                                       pl.col("_hint").forward_fill().over("session_id"),
                                       pl.col("_hint").backward_fill().over("session_id"))).alias("eff_model"),
                ((t == AUTO_RESOLVED) | (t.is_in([*LEG_STARTS, MODEL_CHANGE]) & chosen.fill_null(False)))
                .any().over("session_id", "leg_index").alias("leg_auto"))
            .drop("_hint", "_sub_model"))


# ------------------------------------------------------------------------------------------ requests
def message_requests(ev: pl.DataFrame) -> pl.DataFrame:
    """One row per request answered by assistant.message events (chunks of one request merged)."""
    msgs = ev.filter(pl.col("event_type") == ASSISTANT_MESSAGE)
    if msgs.is_empty():
        return pl.DataFrame(schema=REQUEST_SCHEMA | {"obs_index": pl.Int32})
    # one model call: apiCallId (newer CLIs; requestId is one per prompt there), else one per message
    rid = pl.coalesce("api_call_id", "event_id", pl.format("event:{}", "event_index"))
    return (msgs.with_columns(rid.alias("request_id"))
            .group_by("session_id", "request_id", maintain_order=True)
            .agg(pl.col("leg_index").first(), pl.col("obs_index").first(), pl.col("turn_index").first(),
                 pl.col("at").min().alias("requested_at"), pl.col("eff_model").drop_nulls().first().alias("model"),
                 pl.col("sel_model").drop_nulls().first().alias("selected_model"),
                 pl.when(pl.col("output_tokens").is_not_null().any()).then(pl.col("output_tokens").sum())
                 .alias("output_tokens"),
                 pl.col("parent_tool_call_id").is_not_null().any().alias("is_subagent"),
                 pl.col("parent_tool_call_id").drop_nulls().first().alias("_parent"))
            .with_columns(pl.lit("messages").alias("source")))


def usage_event_requests(ev: pl.DataFrame) -> pl.DataFrame:
    """``assistant.usage`` events (ephemeral in the official schema; read when a log has them)."""
    u = ev.filter(pl.col("event_type") == ASSISTANT_USAGE)
    x = pl.col("extra")
    return u.select(
        "session_id", pl.coalesce("api_call_id", "event_id", pl.format("event:{}", "event_index"))
        .alias("request_id"),
        "leg_index", "obs_index", "turn_index", pl.col("at").alias("requested_at"),
        pl.coalesce("model", "eff_model").alias("model"), pl.col("sel_model").alias("selected_model"),
        # outputTokens is lifted into its own staging column; the other counts stay in `extra`
        *[(pl.col("output_tokens") if dst == "output_tokens" else _json_num(x, f"$.{src}")).alias(dst)
          for dst, src in _METRIC_USAGE.items()],
        _json_num(x, "$.copilotUsage.totalNanoAiu").alias("nano_aiu"),
        _json_num(x, "$.cost", pl.Float64).alias("request_multiplier"),
        x.str.json_path_match("$.initiator").alias("initiator"),
        pl.col("parent_tool_call_id").is_not_null().alias("is_subagent"),
        pl.lit("usage_events").alias("source"), pl.col("parent_tool_call_id").alias("_parent"))


def store_requests(store_usage: pl.DataFrame, legs: pl.DataFrame, turns: pl.DataFrame) -> pl.DataFrame:
    """session-store.db rows, placed in the leg and turn their time falls in."""
    # a session can be in two stores (two copies of one home): one request is counted once
    st = (store_usage.filter(pl.col("session_id").is_not_null())
          .unique(["session_id", "row_id", "created_at", "model", *_TOKENS], keep="first", maintain_order=True))
    if st.is_empty():
        return pl.DataFrame(schema=REQUEST_SCHEMA | {"obs_index": pl.Int32})
    # ... and two different rows with one row id (two unrelated stores) stay two requests
    clash = pl.len().over("session_id", "row_id") > 1
    st = st.select(
        "session_id", pl.when(clash).then(pl.format("store:{}:{}", "row_id", pl.col("_source_path").hash()))
        .otherwise(pl.format("store:{}", "row_id")).alias("request_id"),
        parse_ts(pl.col("created_at")).alias("requested_at"), pl.col("model").replace("", None).alias("model"),
        *_TOKENS, pl.col("total_nano_aiu").alias("nano_aiu"), "request_multiplier", "initiator",
        (pl.col("agent_id").is_not_null() | pl.col("parent_tool_call_id").is_not_null()).alias("is_subagent"),
        pl.lit("store_usage_events").alias("source"), "duration_ms",
        (pl.col("time_to_first_token_ms") if "time_to_first_token_ms" in st.columns else pl.lit(None, pl.Int64))
        .alias("ttft_ms"),
        pl.col("parent_tool_call_id").alias("_parent"), pl.col("row_id").alias("_row"),
    )
    return _place(st, legs, turns)


def debug_requests(debug: pl.DataFrame, legs: pl.DataFrame, turns: pl.DataFrame) -> pl.DataFrame:
    """VS Code agent debug log ``llm_request`` rows (stg_debug_requests), placed in the leg and turn their time
    falls in. A model call is no premium request (a prompt is, however many calls its agent loop makes): their
    multiplier is left to the chat session's requests (``_debug_premium``)."""
    d = debug.filter(pl.col("session_id").is_not_null())
    if d.is_empty():
        return pl.DataFrame(schema=REQUEST_SCHEMA | {"obs_index": pl.Int32})
    # span ids are unique within a log; a sub-agent's log numbers its own
    clash = pl.len().over("session_id", "span_id") > 1
    d = d.select(
        "session_id",
        pl.when(pl.col("span_id").is_null() | clash)
        .then(pl.format("debug:{}:{}", pl.col("_source_path").hash(), "_source_line"))
        .otherwise(pl.format("debug:{}", "span_id")).alias("request_id"),
        parse_ts(pl.col("requested_at")).alias("requested_at"), pl.col("model").replace("", None).alias("model"),
        "input_tokens", "output_tokens", "cache_read_tokens", pl.lit(None, pl.Int64).alias("cache_write_tokens"),
        pl.lit(None, pl.Int64).alias("reasoning_tokens"), "nano_aiu",
        pl.lit(None, pl.Float64).alias("request_multiplier"), pl.col("debug_name").alias("initiator"),
        pl.col("is_subagent").fill_null(False), pl.lit("debug_log").alias("source"), "duration_ms", "ttft_ms",
        pl.when(pl.col("is_subagent")).then(pl.coalesce("agent", pl.lit("subagent"))).otherwise(pl.lit("main"))
        .alias("_agent"), pl.col("_source_line").alias("_row"),
    )
    return _place(d, legs, turns)


def otel_requests(otel: pl.DataFrame, legs: pl.DataFrame, turns: pl.DataFrame) -> pl.DataFrame:
    """OpenTelemetry ``chat`` spans (stg_otel_requests), placed in the leg and turn their time falls in; a span
    in two exports (a copied or rotated file) once."""
    o = otel.filter(pl.col("session_id").is_not_null())
    if o.is_empty():
        return pl.DataFrame(schema=REQUEST_SCHEMA | {"obs_index": pl.Int32})
    # a span in a file export and in agent-traces.db (or two copies of one export): once
    o = pl.concat([o.filter(pl.col("span_id").is_null()),
                   o.filter(pl.col("span_id").is_not_null()).unique(["session_id", "span_id"], keep="first",
                                                                    maintain_order=True)])
    o = o.select(
        "session_id",
        pl.coalesce(pl.format("otel:{}", "service_request_id"), pl.format("otel:{}", "span_id"),
                    pl.format("otel:{}:{}", pl.col("_source_path").hash(), "_source_line")).alias("request_id"),
        parse_ts(pl.col("requested_at")).alias("requested_at"), pl.col("model").replace("", None).alias("model"),
        *_TOKENS, "nano_aiu", "request_multiplier", "initiator", pl.lit(None, pl.Boolean).alias("is_subagent"),
        pl.lit("otel").alias("source"), "duration_ms", "ttft_ms", pl.col("_source_line").alias("_row"),
    )
    return _place(o, legs, turns)


def _place(rows: pl.DataFrame, legs: pl.DataFrame, turns: pl.DataFrame) -> pl.DataFrame:
    """Request rows placed in the leg and the turn their time falls in (leg 1 when it is unknown)."""
    rows = rows.sort("session_id", "requested_at", "_row", nulls_last=True)
    starts = legs.select("session_id", "leg_index", pl.col("started_at").alias("_leg_at")).sort(
        "session_id", "_leg_at")
    rows = _asof(rows, starts.filter(pl.col("_leg_at").is_not_null()), "_leg_at")
    t = (turns.filter(pl.col("started_at").is_not_null())
         .select("session_id", "turn_index", pl.col("started_at").alias("_turn_at")).sort("session_id", "_turn_at"))
    rows = _asof(rows, t, "_turn_at")
    return rows.with_columns(pl.col("leg_index").fill_null(1).cast(pl.Int32),
                             pl.lit(None, pl.Int32).alias("obs_index")).drop("_row")


def _asof(left: pl.DataFrame, right: pl.DataFrame, on: str) -> pl.DataFrame:
    """``left`` with the columns of the latest ``right`` row (same session) at or before its time."""
    keyed = left.with_columns(pl.col("requested_at").alias(on))
    known = keyed.filter(pl.col(on).is_not_null()).sort("session_id", on)
    joined = known.join_asof(right, on=on, by="session_id", strategy="backward", check_sortedness=False) \
        if not right.is_empty() else \
        known.with_columns(*[pl.lit(None, right.schema[c]).alias(c) for c in right.columns if c not in known.columns])
    rest = keyed.filter(pl.col(on).is_null())
    rest = rest.with_columns(*[pl.lit(None, joined.schema[c]).alias(c) for c in joined.columns
                               if c not in rest.columns])
    return pl.concat([joined, rest.select(joined.columns)]).drop(on)


# ------------------------------------------------------------------------------------------ legs
@dataclass
class _Part:
    """What one source says a model used in one leg."""

    requests: int = 0
    tokens: dict = field(default_factory=lambda: dict.fromkeys(_TOKENS))
    nano: int | None = None  # logged
    nano_parts: list = field(default_factory=list)  # (nano, 'logged'|'estimated'|'unknown') from checkpoints
    premium: float | None = None
    used_at: object = None


def _add(a: object, b: object):
    if b is None:
        return a
    return b if a is None else a + b


def _parse(extra: str | None) -> dict:
    try:
        doc = orjson.loads(extra) if extra else {}
    except orjson.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _num(v: object):
    """A figure of a shutdown or checkpoint: a finite number within the plausible range, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    return v if COUNT[0] <= v <= COUNT[1] else None


def _metrics(data: dict) -> dict[str, dict]:
    """modelMetrics of a shutdown as {model: {requests, premium, nano, *tokens}}."""
    out = {}
    mm = data.get("modelMetrics")
    for model, m in (mm.items() if isinstance(mm, dict) else []):
        if not isinstance(m, dict) or not isinstance(model, str):
            continue
        req = m.get("requests") if isinstance(m.get("requests"), dict) else {}
        use = m.get("usage") if isinstance(m.get("usage"), dict) else {}
        row = {"requests": _num(req.get("count")), "premium": _num(req.get("cost")),
               "nano": _num(m.get("totalNanoAiu"))}
        for dst, src in _METRIC_USAGE.items():
            row[dst] = _num(use.get(src))
        out[model] = row
    return out


def _total(metrics: dict[str, dict], key: str) -> float:
    return sum((m.get(key) or 0) for m in metrics.values())


def _version(v: str | None) -> tuple[int, ...] | None:
    if not v:
        return None
    parts = []
    for p in v.split("-")[0].split("."):
        if not p.isdigit():
            return None
        parts.append(int(p))
    return tuple(parts)


def is_cumulative(cur: dict[str, dict], prev: dict[str, dict] | None, leg_out: int | None, leg_req: int,
                  version: str | None) -> bool:
    """Whether a shutdown counts every leg so far (True) or only its own leg (False), told by its
    figures against the leg's messages and the previous shutdown."""
    if prev is None:
        return False  # nothing before it: both readings give the same figures
    for key, leg_value in (("output_tokens", leg_out), ("requests", leg_req)):
        if leg_value is None:
            continue
        own = abs(_total(cur, key) - leg_value)
        running = abs(_total(cur, key) - (_total(prev, key) + leg_value))
        if own != running:
            return running < own
    went_down = any((cur.get(model, {}).get(k) or 0) < (v or 0) for model, m in prev.items() for k, v in m.items()
                    if k in ("requests", *_TOKENS))
    if went_down:
        return False
    if cur == prev:
        return True  # the same totals again: cumulative, nothing new
    ver = _version(version)
    return ver is not None and ver >= CUMULATIVE_FROM


def _difference(cur: dict[str, dict], prev: dict[str, dict] | None) -> dict[str, dict]:
    if not prev:
        return cur
    out = {}
    for model, m in cur.items():
        p = prev.get(model, {})
        out[model] = {k: (None if v is None else max(v - (p.get(k) or 0), 0)) for k, v in m.items()}
    return out


def build_usage(ev: pl.DataFrame, store_usage: pl.DataFrame, turns: pl.DataFrame,
                versions: dict[str, str | None], tools: pl.DataFrame | None = None,
                debug: pl.DataFrame | None = None, otel: pl.DataFrame | None = None,
                desktop: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(fct_requests, fct_usage_legs, fct_usage) frames from annotated events (see ``annotate``),
    session-store.db usage rows, VS Code debug log requests (``debug``) and the turns (to place store and
    debug rows in a turn); a leg spans its tool events (``tools``, with their ``leg_index``) too."""
    t = pl.col("event_type")
    legs = ev.group_by("session_id", "leg_index").agg(
        pl.col("at").min().alias("started_at"), pl.col("at").max().alias("ended_at"),
        pl.col("leg_auto").first().alias("is_auto"),
        (t == SESSION_SHUTDOWN).any().alias("has_shutdown")).sort("session_id", "leg_index")
    if tools is not None and not tools.is_empty():
        spans = tools.group_by("session_id", "leg_index").agg(pl.col("at").min().alias("_first"),
                                                             pl.col("at").max().alias("_last"))
        legs = legs.join(spans, on=["session_id", "leg_index"], how="left").with_columns(
            pl.min_horizontal("started_at", "_first").alias("started_at"),
            pl.max_horizontal("ended_at", "_last").alias("ended_at")).drop("_first", "_last")
    msg = message_requests(ev)
    uev = usage_event_requests(ev)
    store = store_requests(store_usage, legs, turns)
    # the most detailed source of each leg wins: debug log rows, store rows, OpenTelemetry spans, usage events,
    # then messages
    if otel is not None and not otel.is_empty():  # the store's rows and the spans are the same requests
        store = _first_of_leg(store, otel_requests(otel, legs, turns))
    if debug is not None and not debug.is_empty():
        store = _first_of_leg(debug_requests(debug, legs, turns), store)
    store_legs = store.select("session_id", "leg_index").unique()
    premium_of = _debug_premium(uev, store)
    uev = uev.join(store_legs, on=["session_id", "leg_index"], how="anti")
    detailed = pl.concat([store_legs, uev.select("session_id", "leg_index").unique()])
    requests = pl.concat([store, uev, msg.join(detailed, on=["session_id", "leg_index"], how="anti")],
                         how="diagonal_relaxed")
    requests = requests.with_columns(pl.col("model").fill_null(UNKNOWN_MODEL))

    shutdowns = ev.filter(t == SESSION_SHUTDOWN).select("session_id", "leg_index", "extra")
    checkpoints = ev.filter(t == USAGE_CHECKPOINT).select(
        "session_id", "leg_index", "obs_index", "eff_model", "at",
        _json_num(pl.col("extra"), "$.totalNanoAiu").alias("nano"),
        _json_num(pl.col("extra"), "$.totalPremiumRequests", pl.Float64).alias("premium"))

    per_session: dict[str, dict] = defaultdict(lambda: {"legs": [], "shutdown": {}, "ck": defaultdict(list),
                                                        "msg": defaultdict(list), "msg_at": defaultdict(dict),
                                                        "req": defaultdict(list)})
    for r in legs.iter_rows(named=True):
        per_session[r["session_id"]]["legs"].append(r)
    for r in shutdowns.iter_rows(named=True):
        per_session[r["session_id"]]["shutdown"][r["leg_index"]] = _parse(r["extra"])
    for r in checkpoints.iter_rows(named=True):
        per_session[r["session_id"]]["ck"][r["leg_index"]].append(r)
    # the messages as the legs read them: a row per leg, usage interval and model, in the order each first
    # came (one message per model call: 200,000 in one session, each a Python object before), and when each leg
    # last used each model by its messages (``msg_at``: leg -> model as logged -> time)
    for r in _message_groups(msg).iter_rows(named=True):
        per_session[r["session_id"]]["msg"][r["leg_index"]].append(r)
    for sid, leg, model, at in msg.group_by("session_id", "leg_index", "model").agg(
            pl.col("requested_at").max()).iter_rows():
        per_session[sid]["msg_at"][leg][model] = at
    for r in pl.concat([store, uev], how="diagonal_relaxed").iter_rows(named=True):
        per_session[r["session_id"]]["req"][r["leg_index"]].append(r)
    has_tokens = set(msg.filter(pl.col("output_tokens").is_not_null())["session_id"].unique().to_list())

    rows: list[dict] = []
    for sid in sorted(per_session):
        s = per_session[sid]
        leg_rows = s["legs"] or [{"session_id": sid, "leg_index": 1, "started_at": None, "ended_at": None,
                                  "is_auto": False, "has_shutdown": False}]
        if not s["legs"]:  # a session known only from the store
            leg_rows = [dict(leg_rows[0], started_at=min((r["requested_at"] for r in s["req"][1]
                                                          if r["requested_at"]), default=None))]
        rows.extend(_session_legs(sid, leg_rows, s, sid in has_tokens, versions.get(sid)))
    rows.extend(_desktop_legs(desktop, {r["session_id"] for r in rows}))
    leg_frame = pl.DataFrame(rows, schema=LEG_SCHEMA) if rows else pl.DataFrame(schema=LEG_SCHEMA)
    if not premium_of.is_empty():
        leg_frame = leg_frame.join(premium_of, on=["session_id", "leg_index", "model"], how="left").with_columns(
            pl.when(pl.col("token_source") == "debug_log").then(pl.col("_premium"))
            .otherwise(pl.col("premium_requests")).alias("premium_requests")).drop("_premium")
    return requests.drop("obs_index"), leg_frame, rollup(leg_frame)


def _message_groups(msg: pl.DataFrame) -> pl.DataFrame:
    """The requests answered by messages grouped by session, leg, usage interval (``obs_index``) and model, in
    the order each group's first request came: ``n`` requests, ``out`` their output tokens (those logged),
    ``known`` whether any logged them. All ``_session_legs`` reads of the messages."""
    return msg.group_by("session_id", "leg_index", "obs_index", "model", maintain_order=True).agg(
        pl.len().alias("n"), pl.col("output_tokens").sum().alias("out"),
        pl.col("output_tokens").is_not_null().any().alias("known"))


def _desktop_legs(desktop: pl.DataFrame | None, known: set[str]) -> list[dict]:
    """A leg from the desktop app's lifetime totals, for a session no other source records any usage of (its
    events and store rows deleted): its tokens and logged cost, requests unknown. Never beside other figures:
    the totals count the same requests."""
    if desktop is None or desktop.is_empty():
        return []
    out = []
    for r in desktop.unique("session_id", keep="last", maintain_order=True).iter_rows(named=True):
        if r["session_id"] in known or not any(r[k] is not None for k in (
                "total_input_tokens", "total_output_tokens", "total_nano_aiu")):
            continue
        at = parse_ts_value(r["updated_at"]) or parse_ts_value(r["created_at"])
        nano = r["total_nano_aiu"]
        credits = None if nano is None else (Decimal(nano) / prices.NANO_PER_CREDIT).quantize(prices.CREDIT_PLACES)
        out.append({"session_id": r["session_id"], "leg_index": 1, "model": r["model"] or UNKNOWN_MODEL,
                    "started_at": parse_ts_value(r["created_at"]), "used_at": at, "requests": None,
                    "input_tokens": r["total_input_tokens"], "output_tokens": r["total_output_tokens"],
                    "cache_read_tokens": r["total_cached_tokens"], "cache_write_tokens": None,
                    "reasoning_tokens": r["total_reasoning_tokens"], "premium_requests": None, "nano_aiu": nano,
                    "ai_credits": credits,
                    "cost_usd": None if credits is None else (credits * prices.USD_PER_CREDIT).quantize(
                        prices.USD_PLACES),
                    "token_source": "desktop_totals", "cost_source": "logged" if nano is not None else "unknown",
                    "price_ref": None, "is_auto": False})
    return out


def parse_ts_value(text: str | None):
    """One ISO-8601 text as a UTC datetime (None when it is none)."""
    if not text:
        return None
    return pl.select(parse_ts(pl.lit(text))).item()


def _first_of_leg(better: pl.DataFrame, worse: pl.DataFrame) -> pl.DataFrame:
    """The request rows of ``better``, and those of ``worse`` in the legs ``better`` has none in."""
    keys = ["session_id", "leg_index"]
    return pl.concat([better, worse.join(better.select(keys).unique(), on=keys, how="anti")],
                     how="diagonal_relaxed")


def _debug_premium(uev: pl.DataFrame, store: pl.DataFrame) -> pl.DataFrame:
    """Premium requests of the legs whose requests come from a debug log: the chat session's requests of the
    model (one per prompt, with its multiplier), or 0 for a model every call of which cost nothing (a free
    background model); unknown otherwise."""
    dbg = store.filter(pl.col("source") == "debug_log")
    if dbg.is_empty():
        return pl.DataFrame(schema={"session_id": pl.String, "leg_index": pl.Int32, "model": pl.String,
                                    "_premium": pl.Decimal(38, 6)})
    keys = ["session_id", "leg_index", "model"]
    chat = uev.with_columns(pl.col("model").fill_null(UNKNOWN_MODEL)).group_by(keys).agg(
        pl.when(pl.col("request_multiplier").is_not_null().all()).then(pl.col("request_multiplier").sum())
        .alias("_chat"))
    free = dbg.with_columns(pl.col("model").fill_null(UNKNOWN_MODEL)).group_by(keys).agg(
        (pl.col("nano_aiu") == 0).all().alias("_free"))
    return free.join(chat, on=keys, how="left").select(
        *keys, pl.coalesce(pl.col("_chat"), pl.when(pl.col("_free")).then(0.0)).round(6)
        .cast(pl.Decimal(38, 6)).alias("_premium"))


def _session_legs(sid: str, legs: list[dict], s: dict, has_tokens: bool, version: str | None) -> list[dict]:
    out = []
    prev_metrics: dict | None = None  # raw modelMetrics of the previous shutdown (cumulative differencing)
    # the session's running totalNanoAiu / totalPremiumRequests as last logged, and whether it is one
    # (usage checkpoints and cumulative shutdowns log the running total; per-leg shutdowns their leg's)
    running: float | None = None
    running_premium: float | None = None
    running_is_total = False
    for leg in legs:
        n = leg["leg_index"]
        msgs, reqs, cks = s["msg"].get(n, []), s["req"].get(n, []), s["ck"].get(n, [])
        msg_at = s["msg_at"].get(n, {})
        shutdown = s["shutdown"].get(n)
        parts: dict[str, _Part] = {}
        if shutdown is not None:
            raw = _metrics(shutdown)
            leg_out = sum(m["out"] for m in msgs) if has_tokens else None
            cumulative = is_cumulative(raw, prev_metrics, leg_out, sum(m["n"] for m in msgs), version)
            token_source = "shutdown_delta" if cumulative else "shutdown"
            base, base_premium = running, running_premium
            if cks:
                running_is_total = True
                running = _last(cks, "nano", running)
                running_premium = _last(cks, "premium", running_premium)
            total_nano = _num(shutdown.get("totalNanoAiu"))
            total_premium = _num(shutdown.get("totalPremiumRequests"))
            # a CLI that keeps usage checkpoints logs running totals on its shutdowns too, even where no
            # earlier shutdown tells the shape of the token figures
            cum_cost = cumulative or (running_is_total and total_nano is not None and total_nano >= (running or 0))
            _shutdown_parts(parts, _difference(raw, prev_metrics) if cumulative else raw, shutdown, cum_cost,
                            base, base_premium)
            prev_metrics = raw
            leg_premium = None if total_premium is None else \
                total_premium - (base_premium or 0) if cum_cost else total_premium
            if total_nano is not None and has_tokens and _fill_left_out(
                    parts, msgs, total_nano - (base or 0) if cum_cost else total_nano, leg_premium):
                token_source = "shutdown_messages"
            for model, at in msg_at.items():  # the leg's figures are dated by its last message of the model
                if model in parts:
                    parts[model].used_at = _later(parts[model].used_at, at)
            if total_nano is not None:
                running = total_nano if cum_cost else (base or 0) + total_nano
            if total_premium is not None:
                running_premium = total_premium if cum_cost else (base_premium or 0) + total_premium
            running_is_total = running_is_total or cum_cost
        elif reqs:
            token_source = reqs[0]["source"]
            _request_parts(parts, reqs)
            if cks:
                running_is_total = True
                running, running_premium = _last(cks, "nano", running), _last(cks, "premium", running_premium)
        else:
            token_source = "message_output_tokens" if msgs else None
            for m in msgs:
                p = parts.setdefault(m["model"] or UNKNOWN_MODEL, _Part())
                p.requests += m["n"]
                if m["known"]:
                    p.tokens["output_tokens"] = (p.tokens["output_tokens"] or 0) + m["out"]
            for model, at in msg_at.items():
                p = parts[model or UNKNOWN_MODEL]
                p.used_at = _later(p.used_at, at)
            running, running_premium = _checkpoint_costs(parts, msgs, cks, running, running_premium)
            running_is_total = running_is_total or bool(cks)
        for model, p in sorted(parts.items()):
            if p.requests or any(p.tokens.values()) or p.nano or any(v for v, _ in p.nano_parts):
                out.append(_leg_row(sid, leg, model, p, token_source or "message_output_tokens"))
    return out


def _last(cks: list[dict], key: str, default: object):
    return next((ck[key] for ck in reversed(cks) if ck[key] is not None), default)


def _shutdown_parts(parts: dict[str, _Part], figures: dict[str, dict], shutdown: dict, cumulative: bool,
                    running: float | None, running_premium: float | None) -> None:
    for model, m in figures.items():
        p = parts.setdefault(model, _Part())
        p.requests = int(m["requests"] or 0)
        p.tokens = {k: (None if m[k] is None else int(m[k])) for k in _TOKENS}
        p.nano = None if m["nano"] is None else int(m["nano"])
        p.premium = m["premium"]
    # older shutdowns give the cost only for the whole leg: exact when one model did the work
    used = [m for m, p in parts.items() if p.requests or any(p.tokens.values())]
    if len(used) != 1:
        return
    p = parts[used[0]]
    total_nano, total_premium = _num(shutdown.get("totalNanoAiu")), _num(shutdown.get("totalPremiumRequests"))
    if p.nano is None and total_nano is not None:
        p.nano = max(int(total_nano - (running or 0) if cumulative else total_nano), 0)
    if p.premium is None and total_premium is not None:
        p.premium = max(total_premium - (running_premium or 0) if cumulative else total_premium, 0.0)


def _fill_left_out(parts: dict[str, _Part], msgs: list[dict], leg_nano: float, leg_premium: float | None) -> bool:
    """A shutdown whose per-model figures leave requests out (CLI 1.0.77: the first prompt's): its own
    running ``totalNanoAiu`` says more than the models' sum, and the leg's messages more requests and
    output tokens. The messages fill the requests and output tokens left out (the input of those is not
    known: NULL), and the leg's logged total its cost. Returns whether it filled anything."""
    known = [p.nano for p in parts.values() if p.nano is not None]
    if not parts or len(known) != len(parts) or leg_nano <= sum(known):
        return False
    seen: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for m in msgs:
        seen[m["model"] or UNKNOWN_MODEL][0] += m["n"]
        seen[m["model"] or UNKNOWN_MODEL][1] += m["out"]
    gap = {model: (n - (parts[model].requests if model in parts else 0),
                   out - ((parts[model].tokens["output_tokens"] or 0) if model in parts else 0))
           for model, (n, out) in seen.items()}
    gap = {model: g for model, g in gap.items() if g[0] > 0 and g[1] >= 0}
    if len(gap) != 1:
        return False  # which model the cost left out belongs to is not known
    (model, (n, out)), = gap.items()
    p = parts.setdefault(model, _Part(nano=0))
    p.requests += n
    p.tokens = {k: (None if k != "output_tokens" else (v or 0) + out) for k, v in p.tokens.items()}
    p.nano = (p.nano or 0) + int(leg_nano - sum(known))
    premiums = [q.premium for q in parts.values() if q is not p]
    if leg_premium is not None and p.premium is not None and all(v is not None for v in premiums):
        p.premium = max(leg_premium - sum(premiums), p.premium)
    return True


def _request_parts(parts: dict[str, _Part], reqs: list[dict]) -> None:
    """Store rows or usage events: each a request with its own figures."""
    missing: dict[str, set] = defaultdict(set)
    for r in reqs:
        model = r["model"] or UNKNOWN_MODEL
        p = parts.setdefault(model, _Part(nano=0, premium=0.0))
        p.requests += 1
        for k in _TOKENS:
            if r[k] is None:
                missing[model].add(k)
            else:
                p.tokens[k] = (p.tokens[k] or 0) + r[k]
        p.nano = None if p.nano is None or r["nano_aiu"] is None else p.nano + r["nano_aiu"]
        mult = r["request_multiplier"]
        p.premium = None if p.premium is None or mult is None else p.premium + mult
        p.used_at = _later(p.used_at, r["requested_at"])
    for model, keys in missing.items():  # a figure some request lacks is not known for the leg
        for k in keys:
            parts[model].tokens[k] = None


def _later(a: object, b: object):
    if b is None:
        return a
    return b if a is None or b > a else a


def _checkpoint_costs(parts: dict[str, _Part], msgs: list[dict], cks: list[dict], base: float | None,
                      base_premium: float | None):
    """Attribute the cost between usage checkpoints to the models whose requests fall between them.
    Returns the running totals after the leg."""
    by_interval: dict[int, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for m in msgs:
        by_interval[m["obs_index"]][m["model"] or UNKNOWN_MODEL].append(m)
    prev, prev_premium = base or 0, base_premium or 0
    covered: set[int] = set()
    for i, ck in enumerate(cks):
        nano, premium = ck["nano"], ck["premium"]
        models = by_interval.get(i, {})
        if nano is None:
            continue
        delta = nano - prev
        dprem = None if premium is None else premium - prev_premium
        prev = nano
        if premium is not None:
            prev_premium = premium
        covered.add(i)
        if delta < 0:
            for model in models:
                parts[model].nano_parts.append((None, "unknown"))
            continue
        if not models:  # cost with no message (a compaction): the model in use pays it
            model = ck["eff_model"] or UNKNOWN_MODEL
            p = parts.setdefault(model, _Part())
            p.nano_parts.append((delta, "logged"))
            continue
        weights = _weights(models, ck["at"].date() if ck["at"] else None)
        kind = "logged" if len(models) == 1 else "estimated"
        for model, w in weights.items():
            parts[model].nano_parts.append((delta * w, kind))
            if dprem is not None:
                parts[model].premium = (parts[model].premium or 0) + dprem * w
    for i, models in by_interval.items():
        if i not in covered:
            for model in models:
                parts[model].nano_parts.append((None, "unknown"))
    return (prev if cks else base), (prev_premium if cks else base_premium)


def _weights(models: dict[str, list[dict]], day: date | None) -> dict[str, float]:
    """How the cost of an interval with several models is shared: by the price of their output (output tokens
    at each model's output rate on ``day``, the day the checkpoint logged the cost - not the day of the ingest,
    which made the share of the same logs change with the date they were read on), else by output tokens, else
    by requests."""
    def share(values: dict[str, float]) -> dict[str, float] | None:
        total = sum(values.values())
        return {k: v / total for k, v in values.items()} if total > 0 else None

    out = {m: sum(r["out"] for r in rs) for m, rs in models.items()}
    priced = {m: out[m] * float(rt.output) for m in models if (rt := prices.rates(m, day)) is not None}
    return ((share(priced) if len(priced) == len(models) else None) or share(out)
            or share({m: sum(r["n"] for r in rs) for m, rs in models.items()}))


def _leg_row(sid: str, leg: dict, model: str, p: _Part, token_source: str) -> dict:
    tokens = p.tokens
    nano, cost_source, price_ref, credits = None, "unknown", None, None
    if p.nano is not None and not p.nano_parts:
        nano, cost_source = int(p.nano), "logged"
        credits = Decimal(nano) / prices.NANO_PER_CREDIT
    elif p.nano_parts and all(v is not None for v, _ in p.nano_parts):
        total = round(sum(v for v, _ in p.nano_parts))
        credits = Decimal(total) / prices.NANO_PER_CREDIT
        if all(kind == "logged" for _, kind in p.nano_parts):
            nano, cost_source = total, "logged"
        else:
            cost_source = "estimated"
    elif not p.nano_parts and tokens["input_tokens"] is not None and tokens["output_tokens"] is not None:
        day = (p.used_at or leg["ended_at"] or leg["started_at"])
        rates = prices.rates(model, day.date() if day else None)
        if rates is not None:
            usd = rates.usd(tokens["input_tokens"], tokens["output_tokens"], tokens["cache_read_tokens"],
                            tokens["cache_write_tokens"], bool(leg["is_auto"]))
            credits = usd / prices.USD_PER_CREDIT
            cost_source, price_ref = "estimated", rates.ref + (" (auto -10%)" if leg["is_auto"] else "")
    if credits is not None:
        credits = credits.quantize(prices.CREDIT_PLACES)
    premium = None if p.premium is None else Decimal(repr(round(float(p.premium), 6)))
    return {"session_id": sid, "leg_index": leg["leg_index"], "model": model, "started_at": leg["started_at"],
            "used_at": p.used_at or leg["ended_at"] or leg["started_at"], "requests": p.requests, **tokens,
            "premium_requests": premium, "nano_aiu": nano, "ai_credits": credits,
            "cost_usd": None if credits is None else (credits * prices.USD_PER_CREDIT).quantize(prices.USD_PLACES),
            "token_source": token_source, "cost_source": cost_source, "price_ref": price_ref,
            "is_auto": bool(leg["is_auto"])}


def rollup(legs: pl.DataFrame) -> pl.DataFrame:
    """fct_usage: the legs of each session x model summed; a figure any leg lacks is NULL."""
    def strict(col: str) -> pl.Expr:
        return pl.when(pl.col(col).is_null().any()).then(None).otherwise(pl.col(col).sum()).alias(col)

    src = pl.col("cost_source")
    return legs.group_by("session_id", "model").agg(
        pl.col("requests").sum(), *[strict(c) for c in (*_TOKENS, "premium_requests", "nano_aiu", "ai_credits",
                                                         "cost_usd")],
        pl.when((src == "unknown").any()).then(pl.lit("unknown"))
        .when((src == "estimated").any()).then(pl.lit("estimated")).otherwise(pl.lit("logged")).alias("cost_source"),
        pl.col("token_source").drop_nulls().unique().sort().str.join("+").alias("usage_source"),
        pl.len().cast(pl.Int32).alias("n_legs"),
        pl.col("used_at").min().alias("first_used_at"), pl.col("used_at").max().alias("last_used_at"),
    ).with_columns(
        # a cost some leg does not know is unknown as a whole
        pl.when(pl.col("cost_source") == "unknown").then(None).otherwise(pl.col("ai_credits")).alias("ai_credits"),
        pl.when(pl.col("cost_source") == "unknown").then(None).otherwise(pl.col("cost_usd")).alias("cost_usd"),
    ).sort("session_id", "model")


# ------------------------------------------------------------------------------------------ per request
def request_costs(requests: pl.DataFrame, auto: set[tuple[str, int]] | None = None) -> pl.DataFrame:
    """Each request's AI credits and dollars: logged (its nano-AIU), else estimated from the price table when
    its input and output tokens are known, else unknown (NULL); ``cost_source`` says which. ``auto``: the
    (session, leg) pairs on auto model selection (10% off estimates)."""
    auto = auto or set()
    credits: list = [None] * requests.height
    sources = ["unknown"] * requests.height
    # only the rows with a cost to work out (one per model call, 200,000 in one session, most knowing no input
    # tokens): as tuples, with the day of each, not its time
    priced = (pl.col("nano_aiu").is_not_null() | (pl.col("input_tokens").is_not_null()
                                                  & pl.col("output_tokens").is_not_null()
                                                  & pl.col("model").ne_missing(UNKNOWN_MODEL)))
    for i, sid, leg, model, day, nano, inp, out, cache_read, cache_write, _reasoning in requests.select(
            pl.int_range(pl.len()).alias("_i"), "session_id", "leg_index", "model",
            pl.col("requested_at").dt.date(), "nano_aiu", *_TOKENS).filter(priced).iter_rows():
        if nano is not None:
            credits[i] = (Decimal(nano) / prices.NANO_PER_CREDIT).quantize(prices.CREDIT_PLACES)
            sources[i] = "logged"
            continue
        rates = prices.rates(model, day)
        if rates is None:
            continue
        usd = rates.usd(inp, out, cache_read, cache_write, (sid, leg) in auto)
        credits[i] = (usd / prices.USD_PER_CREDIT).quantize(prices.CREDIT_PLACES)
        sources[i] = "estimated"
    return requests.with_columns(
        pl.Series("ai_credits", credits, dtype=pl.Decimal(38, 9)),
        pl.Series("cost_source", sources, dtype=pl.String),
    ).with_columns((pl.col("ai_credits") * Decimal("0.01")).cast(pl.Decimal(38, 11)).alias("cost_usd"))


def attribute(requests: pl.DataFrame, calls: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    """Each request's ``agent`` - ``main``, or the sub-agent that made it: the debug log's label, else the
    ``agentName`` of the ``subagent.started`` event, else the ``agent_type`` / ``name`` of the ``task`` call
    that started it (NULL where the source cannot tell, an OpenTelemetry span) - and its ``skill``: the skill
    last invoked in the request's turn before it (a ``skill`` tool call's ``skill`` argument, or a
    ``skill.invoked`` event's folder name), NULL before any. The skill is an attribution, not something the
    logs record per request."""
    requests = requests.with_columns(pl.lit(None, pl.String).alias(c) for c in ("_agent", "_parent")
                                     if c not in requests.columns)
    started = ev.filter(pl.col("event_type") == SUBAGENT_STARTED).select(
        pl.col("session_id"), pl.col("tool_call_id").alias("_parent"),
        pl.col("extra").str.json_path_match("$.agentName").alias("_started_name"))
    started = started.filter(pl.col("_parent").is_not_null()).unique(["session_id", "_parent"], keep="first")
    tasks = calls.filter(pl.col("tool_name").is_in(["task", "runSubagent"]) & pl.col("arguments").is_not_null()) \
        .select("session_id", pl.col("tool_call_id").alias("_parent"),
                pl.coalesce(pl.col("arguments").str.json_path_match("$.agent_type"),
                            pl.col("arguments").str.json_path_match("$.name")).alias("_task_name")) \
        .unique(["session_id", "_parent"], keep="first")
    r = requests.join(started, on=["session_id", "_parent"], how="left") \
        .join(tasks, on=["session_id", "_parent"], how="left")
    r = r.with_columns(
        pl.coalesce("_agent", pl.when(pl.col("is_subagent") == True).then(  # noqa: E712
            pl.coalesce("_started_name", "_task_name", pl.lit("subagent")))
            .when(pl.col("is_subagent") == False).then(pl.lit("main"))).alias("agent"))  # noqa: E712
    skills = pl.concat([
        calls.filter((pl.col("tool_name") == "skill") & pl.col("arguments").is_not_null()).select(
            "session_id", "turn_index", pl.coalesce("started_at", "requested_at").alias("_at"),
            pl.col("arguments").str.json_path_match("$.skill").alias("_skill")),
        ev.filter(pl.col("event_type") == SKILL_INVOKED).select(
            "session_id", "turn_index", pl.col("at").alias("_at"),
            pl.coalesce(pl.col("extra").str.json_path_match("$.name"),
                        pl.col("extra").str.json_path_match("$.path").str.extract(r"([^/\\]+)[/\\]SKILL\.md$", 1))
            .alias("_skill")),
    ]).filter(pl.col("_skill").is_not_null() & pl.col("_at").is_not_null() & pl.col("turn_index").is_not_null()) \
        .sort("session_id", "turn_index", "_at")
    keyed = r.with_row_index("_i")
    timed = keyed.filter(pl.col("requested_at").is_not_null() & pl.col("turn_index").is_not_null()) \
        .sort("session_id", "turn_index", "requested_at")
    if skills.is_empty() or timed.is_empty():
        picked = keyed.select("_i", pl.lit(None, pl.String).alias("skill"))
    else:
        picked = timed.join_asof(skills, left_on="requested_at", right_on="_at", by=["session_id", "turn_index"],
                                 strategy="backward", check_sortedness=False).select("_i",
                                                                                      pl.col("_skill").alias("skill"))
    return keyed.join(picked, on="_i", how="left").sort("_i").drop(
        "_i", "_parent", "_agent", "_started_name", "_task_name")
