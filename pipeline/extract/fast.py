"""The DuckDB reader of event logs (``events.jsonl``, legacy flat logs, VS Code transcripts: the one
envelope): DuckDB parses, lifts and screens the lines of clean logs, Python converts only the lines
DuckDB should not (and reads whole only the files it cannot).

A log read whole (a new or rewritten file, not one that grew) whose bytes are clean — valid UTF-8,
no BOM, no NUL or CR, no blank line, ending with a newline — is handed to DuckDB as an Arrow table
of its lines, zero-copy: each line's number, byte offset and event index are known from the newline
positions. DuckDB checks every line is a JSON object (a file with one line that is not goes whole to
the Python reader, ``events.read_event_log``, which stays the reference and knows how to rejoin,
split and reject), lifts the columns of ``stg_events`` and ``stg_tool_requests`` and builds ``extra``
without the lifted fields and the forbidden keys (reasoning text is never extracted).

A line is left to Python, which converts it exactly as the reference reader does
(``events.record_rows``), when the RE2 line screen finds a possible secret in it (the redaction
rules run only there, as in the reference reader), when a field has a type the SQL does not convert
(a number as text, content as a list of parts, ...), when it holds what the two JSON parsers read
differently (NaN, integers beyond 64 bits, trailing commas), when it is longer than the text cap
or has so many brackets that it may nest deeper than the Python reader keeps,
or when a forbidden key sits deeper than ``data``. The result is the same rows, row for row
(``tests/test_fast.py`` builds warehouses both ways and compares every table); the JSON columns are
written in DuckDB's canonical form by both (``load.spool.CANONICAL_JSON``). One difference is known
and not guarded: an object inside ``data`` that has a key twice (``{"meta":{"a":1,"a":2}}``) keeps
both in ``extra`` here and only the last with Python (a key twice at the top or in ``data`` itself
is seen and left to Python); Copilot does not write such JSON.

Off by default: ``COPILOT_WAREHOUSE_FAST_READ=1`` turns it on. On this project's 2-core machine it
reads at about half the speed of the Python reader on both cores (``make bench``; README,
Performance): DuckDB's JSON functions cost per row what orjson and the row building cost in Python,
and the Python reader runs in two processes.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb

from ..redact import Redactor, screen, screen_lines, stored_path
from ..schema import arrow_schema
from ..sources import APPEND_KINDS
from ..vocabulary import ASSISTANT_MESSAGE, REASONING_TYPES, SESSION_ERROR, TOOL_COMPLETIONS, TOOL_START
from ..warehouse import quiet
from .base import (
    FORBIDDEN_KEYS,
    FORBIDDEN_SCREEN,
    MAX_JSON_DEPTH,
    Context,
    Prior,
    ReadResult,
    Source,
    max_text_chars,
    read_bytes,
)
from .events import _LIFTED, _SCREEN_BOTH, _is_append, record_rows, tail_digest
from .jsonl import DEEP_NOTE, _clean, loads_cut
from .parallel import Batch, Read, _redact_rows
from .vscode import transcript_meta

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

KINDS = frozenset({"events", "legacy_jsonl", "transcript"})
_ORDER = {"stg_events": ["event_index"], "stg_tool_requests": ["event_index", "request_index"], "stg_session_meta": []}
CHUNK_BYTES = 64 * 1024 * 1024  # logs read by one DuckDB pass: ~3x this in memory while it runs
CHUNK_SOURCES = 4096
_BOM = b"\xef\xbb\xbf"
# what the two parsers read differently, or the Python reader changes: left to Python, line by line
_PARSERS_DIFFER = r"NaN|Infinity|[0-9]{19}|,[ \t]*[}\]]"


def enabled() -> bool:
    return os.environ.get("COPILOT_WAREHOUSE_FAST_READ", "0") == "1"


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


# the fields read from each line: (alias, JSON path). Their types come from one parse (json_type),
# their texts from another (json_extract_string) and the few taken as JSON from a third; ``extra``
# from one json_merge_patch of the line. No field is copied but the texts stored.
_PATHS = {
    "type": "$.type", "id": "$.id", "parent": "$.parentId", "ts": "$.timestamp", "agent": "$.agentId",
    "ephemeral": "$.ephemeral", "data": "$.data", "content": "$.data.content", "model": "$.data.model",
    "interaction": "$.data.interactionId", "turn": "$.data.turnId", "call": "$.data.toolCallId",
    "tool": "$.data.toolName", "name": "$.data.name", "args": "$.data.arguments", "success": "$.data.success",
    "error": "$.data.error", "result": "$.data.result", "parent_call": "$.data.parentToolCallId",
    "mcp": "$.data.mcpServerName", "out_tokens": "$.data.outputTokens", "request": "$.data.requestId",
    "requests": "$.data.toolRequests", "api": "$.data.apiCallId", "service": "$.data.serviceRequestId",
    "message": "$.data.message", "result_content": "$.data.result.content", "error_message": "$.data.error.message",
    "detailed": "$.data.result.detailedContent", "reasoning_id": "$.data.reasoningId", "envelope": "$.data._envelope",
}
# ids and names: text or nothing, else the line is Python's
_STRINGS = ["type", "id", "parent", "ts", "agent", "model", "interaction", "turn", "call", "tool", "name",
            "parent_call", "mcp", "request", "api", "service", "message"]
_TEXTS = [*_STRINGS, "content", "result_content", "error_message", "detailed"]
_JSON = ["agent", "ephemeral", "args", "success", "out_tokens", "requests", "reasoning_id"]
_FORBIDDEN_RE = "|".join(sorted(FORBIDDEN_KEYS))


def _in(values: object) -> str:
    return "(" + ", ".join(_lit(v) for v in sorted(values)) + ")"


def _list(names: list[str]) -> str:
    return "[" + ", ".join(_lit(_PATHS[n]) for n in names) + "]"


def _events_sql(max_text: int) -> str:
    types, cols = list(_PATHS), []
    cols += [f"ty[{i + 1}] as ty_{n}" for i, n in enumerate(types)]
    cols += [f"t[{i + 1}] as s_{n}" for i, n in enumerate(_TEXTS)]
    cols += [f"e[{i + 1}] as j_{n}" for i, n in enumerate(_JSON)]
    cols = ",\n        ".join(cols)
    # data without its lifted fields (and the forbidden keys), result without its content, error
    # without its message: what goes to ``extra``
    lifted = {k: None for k in sorted((_LIFTED | FORBIDDEN_KEYS) - {"result", "error"})}
    patch = json.dumps({"data": {**lifted, "result": {"content": None}, "error": {"message": None}}},
                       separators=(",", ":"))
    ok_strings = " and ".join(f"s_ok(ty_{n})" for n in _STRINGS)
    return f"""
create or replace temp macro s_ok(t) as t is null or t in ('VARCHAR', 'NULL');
-- the type of a value json_extract wrote (compact: its first character says), without parsing it again
create or replace temp macro jt(x) as case when x is null then null else case left(x::varchar, 1)
    when '{{' then 'OBJECT' when '[' then 'ARRAY' when '"' then 'VARCHAR' when 'n' then 'NULL'
    when 't' then 'BOOLEAN' when 'f' then 'BOOLEAN' else 'NUMBER' end end;
create or replace temp macro req_args(r) as
    case when json_extract(r, '$.arguments') is not null then json_extract(r, '$.arguments')
         else json_extract(r, '$.function.arguments') end;
create or replace temp macro req_ok(r) as jt(r) <> 'OBJECT' or (
    s_ok(jt(json_extract(r, '$.toolCallId'))) and s_ok(jt(json_extract(r, '$.id')))
    and s_ok(jt(json_extract(r, '$.name'))) and s_ok(jt(json_extract(r, '$.function.name')))
    and s_ok(jt(json_extract(r, '$.mcpServerName'))) and (req_args(r) is null or jt(req_args(r)) <> 'VARCHAR'));
create or replace temp table _ev as
with x as materialized (
    select fid, line_no, off, idx, forb, strlen(line) as nbytes, line,
        json_type(line, {_list(types)}) as ty,
        json_extract_string(line, {_list(_TEXTS)}) as t,
        json_extract(line, {_list(_JSON)}) as e,
        json_extract(json_merge_patch(line, {_lit(patch)}), ['$.data', '$.data.result', '$.data.error']) as m,
        regexp_matches(line, {_lit(_PARSERS_DIFFER)})
        -- a key twice: DuckDB reads the first, Python the last
        or len(json_keys(line)) <> len(list_distinct(json_keys(line)))
        or coalesce(len(json_keys(line, '$.data')) <> len(list_distinct(json_keys(line, '$.data'))), false)
        as differ
    from _lines where not py and fid not in (select fid from _bad)
), y as materialized (
    select fid, line_no, off, idx, forb, nbytes, differ,
        {cols},
        case when ty[{types.index("error") + 1}] = 'VARCHAR' then json_extract_string(line, '$.data.error') end
            as s_error,
        case when ty[{types.index("result") + 1}] = 'VARCHAR' then json_extract_string(line, '$.data.result') end
            as s_result,
        m[1]::varchar as m_data, m[2]::varchar as m_result, m[3]::varchar as m_error
    from x
), z as (
    select *, s_type as etype, s_type in {_in(REASONING_TYPES)} as reasoning,
        -- detailedContent usually repeats content word for word: kept only when it says more
        case when ty_result = 'OBJECT' then
            case when (ty_detailed = 'VARCHAR' and ty_result_content = 'VARCHAR' and s_detailed = s_result_content)
                      or (ty_detailed = 'NULL' and coalesce(ty_result_content, 'NULL') = 'NULL')
                 then json_merge_patch(m_result, '{{"detailedContent":null}}')::varchar else m_result end
        end as r_rest,
        case when ty_error = 'OBJECT' then m_error end as e_rest,
        case when ty_agent is not null or ty_ephemeral is not null then '{{' || concat_ws(',',
            case when ty_agent is not null then '"agentId":' || j_agent::varchar end,
            case when ty_ephemeral is not null then '"ephemeral":' || j_ephemeral::varchar end) || '}}' end as env
    from y
), w as (
    select *,
        case when reasoning then
                 case when ty_reasoning_id is not null then '{{"reasoningId":' || j_reasoning_id::varchar || '}}'
                      else '{{}}' end
             when ty_data is null or ty_data <> 'OBJECT' then '{{}}'
             else json_merge_patch(m_data, '{{"result":null,"error":null}}')::varchar end as base,
        concat_ws(',',
            case when r_rest <> '{{}}' then '"result":' || r_rest end,
            case when e_rest <> '{{}}' then '"error":' || e_rest end,
            case when env is not null then '"_envelope":' || env end) as adds
    from z
), v as (
    select *,
        case when base = '{{}}' and adds = '' then null
             when base = '{{}}' then '{{' || adds || '}}'
             when adds = '' then base
             else left(base, -1) || ',' || adds || '}}' end as extra,
        case when ty_args is null or ty_args = 'NULL' then null else j_args::varchar end as arguments
    from w
)
select fid, line_no, off, idx, etype, s_ts as ts, s_model as model, j_requests,
    s_id as event_id, s_parent as parent_id, s_agent as agent_id,
    case when reasoning then null else s_content end as content,
    s_interaction as interaction_id, s_turn as turn_id, s_call as tool_call_id,
    coalesce(s_tool, case when etype is distinct from 'skill.invoked' and etype in
        {_in([TOOL_START, *TOOL_COMPLETIONS])} then s_name end) as tool_name,
    arguments,
    case when ty_success = 'BOOLEAN' then j_success::varchar = 'true' end as success,
    coalesce(case ty_error when 'OBJECT' then s_error_message when 'VARCHAR' then s_error end,
             case when etype = {_lit(SESSION_ERROR)} then s_message end) as error_message,
    case ty_result when 'OBJECT' then s_result_content when 'VARCHAR' then s_result end as result_content,
    s_parent_call as parent_tool_call_id, s_mcp as mcp_server_name,
    -- an integer beyond 64 bits never gets here (_PARSERS_DIFFER)
    case when ty_out_tokens in ('BIGINT', 'UBIGINT') then try_cast(j_out_tokens::varchar as bigint) end
        as output_tokens,
    s_request as request_id,
    coalesce(nullif(s_api, ''), s_service) as api_call_id,
    extra,
    -- what the SQL above converts exactly as the Python reader does; any other line (and one where
    -- a condition is unknown) is left to Python
    coalesce(not differ and {ok_strings}
    and (ty_data is null or ty_data in ('OBJECT', 'NULL')) and ty_envelope is null
    and (reasoning or s_ok(ty_content))
    and (ty_args is null or ty_args <> 'VARCHAR')
    and (ty_error is null or ty_error in ('NULL', 'VARCHAR') or (ty_error = 'OBJECT' and s_ok(ty_error_message)))
    and (ty_result is null or ty_result in ('NULL', 'VARCHAR')
         or (ty_result = 'OBJECT' and s_ok(ty_result_content) and s_ok(ty_detailed)))
    and (ty_out_tokens is null or ty_out_tokens in ('NULL', 'BOOLEAN', 'OBJECT', 'ARRAY', 'BIGINT', 'UBIGINT'))
    and nbytes <= {int(max_text)}
    and (etype is distinct from {_lit(ASSISTANT_MESSAGE)} or ty_requests is null or ty_requests <> 'ARRAY'
         or coalesce(list_bool_and(list_transform(json_extract(j_requests, '$[*]'), r -> req_ok(r))), true))
    and (not forb or (extra is not null and not regexp_matches(extra, {_lit(_FORBIDDEN_RE)})
                      and not regexp_matches(coalesce(arguments, ''), {_lit(_FORBIDDEN_RE)})
                      and not regexp_matches(coalesce(j_requests::varchar, ''), {_lit(_FORBIDDEN_RE)}))), false)
    as ok
from v
"""


_EVENTS_OUT = """
select e.fid, f.session_id, f.source_kind, e.idx as event_index, e.event_id, e.parent_id, e.etype as event_type,
    e.ts, e.agent_id, e.content, e.model, e.interaction_id, e.turn_id, e.tool_call_id, e.tool_name, e.arguments,
    e.success, e.error_message, e.result_content, e.parent_tool_call_id, e.mcp_server_name, e.output_tokens,
    e.request_id, e.api_call_id, e.extra, f.source_path as _source_path, e.line_no as _source_line,
    e.off as _source_offset, $run_id as _run_id
from _ev e join _files f using (fid) where e.ok
order by e.fid, e.idx
"""

_REQUESTS_OUT = """
with r as (
    select fid, idx, ts, model, line_no, unnest(reqs) as r, unnest(generate_series(0, len(reqs) - 1)) as i
    from (select *, json_extract(j_requests, '$[*]') as reqs from _ev
          where ok and etype = 'assistant.message' and jt(j_requests) = 'ARRAY')
)
select r.fid, f.session_id, r.idx as event_index, r.i::integer as request_index,
    coalesce(nullif(json_extract(r.r, '$.toolCallId') ->> '$', ''), json_extract(r.r, '$.id') ->> '$') as tool_call_id,
    coalesce(nullif(json_extract(r.r, '$.name') ->> '$', ''), json_extract(r.r, '$.function.name') ->> '$')
        as tool_name,
    case when req_args(r.r) is null or jt(req_args(r.r)) = 'NULL' then null else req_args(r.r)::varchar end
        as arguments,
    r.ts, r.model, json_extract(r.r, '$.mcpServerName') ->> '$' as mcp_server_name,
    f.source_path as _source_path, r.line_no as _source_line, $run_id as _run_id
from r join _files f using (fid) where jt(r.r) = 'OBJECT'
order by r.fid, r.idx, r.i
"""


@dataclass
class _Log:
    """One clean log handed to DuckDB: its bytes, newline positions and line screens."""

    source: Source
    data: bytes
    ends: object  # numpy int64: the offset just past each line's newline
    secret: set[int]  # lines a possible secret touches (left to Python)
    forbidden: set[int]  # lines that may hold a forbidden key
    deep: set[int]  # lines that may nest deeper than the Python reader keeps (left to Python)


class Fallback(Exception):
    """A log the DuckDB reader leaves whole to the Python reader."""


class FastReader:
    """Reads batches of event logs with one in-memory DuckDB; see the module docstring."""

    def __init__(self, run_id: str, redact: bool, scratch: str | None = None):
        self.run_id, self.redact, self.scratch = run_id, redact, scratch
        self.max_text = max_text_chars()
        config = {"threads": os.cpu_count() or 1, "preserve_insertion_order": False}
        if scratch:
            config["temp_directory"] = scratch
        self.con = duckdb.connect(config=config)
        quiet(self.con)
        self.sql = _events_sql(self.max_text)
        self.may_secret = screen() if redact else None
        self.may_forbidden = screen(FORBIDDEN_SCREEN)
        # logs read, their lines converted by SQL and by Python, logs left whole to the Python reader
        self.stats = {"logs": 0, "sql_lines": 0, "python_lines": 0, "whole": 0}

    def close(self) -> None:
        self.con.close()
        st = self.stats
        log.info("DuckDB reader: %d logs read, %d lines by SQL and %d by Python; %d logs left to the Python "
                 "reader (damaged, or grown since the last run)",
                 st["logs"], st["sql_lines"], st["python_lines"], st["whole"])

    def read(self, jobs: list[tuple[Source, Prior | None]]) -> Batch:
        """A ``parallel.Batch`` of the jobs, rows in source order: clean logs through DuckDB, the
        others through the Python readers."""
        import numpy as np
        import pyarrow as pa

        from .parallel import Batch, _read_one, _to_arrow_safe

        logs: dict[int, _Log] = {}  # by the job's position in the batch
        for fid, (src, prior) in enumerate(jobs):
            try:
                got = self._prepare(src, prior)
            except OSError:
                got = None  # the Python reader says why
            if got is not None:
                logs[fid] = got
        reads, tables = self._convert(logs) if logs else ({}, {})
        self.stats["whole"] += len(jobs) - len(reads)
        slow: dict[str, list[tuple[int, list[dict]]]] = {}
        for fid, (src, prior) in enumerate(jobs):
            if fid not in reads:
                reads[fid], got = _read_one(src, prior, self.run_id, self.redact, self.scratch)
                for table, rs in got.items():
                    slow.setdefault(table, []).append((fid, rs))
        ordered = [reads[fid] for fid in range(len(jobs))]
        out = {}
        for table in sorted({*tables, *slow}):
            parts = [tables[table]] if table in tables else []
            for fid, rs in slow.get(table, ()):
                if rs:
                    t = _to_arrow_safe(table, rs, ordered)
                    parts.append(t.add_column(0, "fid", pa.array(np.full(t.num_rows, fid, dtype=np.int32))))
            if parts:
                t = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
                if len(parts) > 1:
                    t = t.sort_by([("fid", "ascending"), *((k, "ascending") for k in _ORDER[table])])
                out[table] = t.drop_columns(["fid"])
        return Batch(ordered, out)

    def _prepare(self, src: Source, prior: Prior | None) -> _Log | None:
        import numpy as np

        if src.kind not in KINDS:
            return None
        if prior is not None and prior.last_good_offset and _is_append(src.path, prior):
            return None  # a grown log: its new bytes, in Python
        data = read_bytes(src.path)
        if (not data or data[-1:] != b"\n" or data.startswith(_BOM) or data.startswith(b"\n") or b"\n\n" in data
                or b"\x00" in data or b"\r" in data):
            return None
        arr = np.frombuffer(data, dtype=np.uint8)
        ends = np.flatnonzero(arr == 0x0A) + 1
        starts = [0, *ends[:-1].tolist()]
        pattern = _SCREEN_BOTH if self.may_secret else FORBIDDEN_SCREEN
        flagged = screen_lines(data, starts, pattern)
        secret, forbidden = set(), set()
        for i in flagged:
            raw = data[starts[i]:int(ends[i])]
            if self.may_secret and self.may_secret(raw):
                secret.add(i)
            if self.may_forbidden(raw):
                forbidden.add(i)
        # a line with this many brackets may nest deeper than the Python reader keeps (it cuts there)
        opens = np.flatnonzero((arr == 0x5B) | (arr == 0x7B))
        deep = set()
        if len(opens) >= MAX_JSON_DEPTH:
            per_line = np.bincount(np.searchsorted(ends, opens, side="right"), minlength=len(ends))
            deep = set(np.flatnonzero(per_line >= MAX_JSON_DEPTH).tolist())
        return _Log(src, data, ends, secret, forbidden, deep)

    def _convert(self, logs: dict[int, _Log]) -> tuple[dict[int, Read], dict[str, pa.Table]]:
        """The logs through DuckDB: the ``Read`` of each log it read (a log it leaves to the Python
        reader has none) and their rows, each table with the log's ``fid`` first, in (log, event) order."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from ..schema import to_arrow

        batches, files, valid = [], [], []
        for fid, lg in logs.items():
            n = len(lg.ends)
            offsets = np.concatenate(([0], lg.ends)).astype(np.int64)
            lines = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(lg.data))
            try:
                lines.validate(full=True)  # valid UTF-8
            except pa.ArrowInvalid:
                continue
            valid.append(fid)
            py = np.zeros(n, dtype=bool)
            py[list(lg.secret | lg.deep)] = True
            forb = np.zeros(n, dtype=bool)
            forb[list(lg.forbidden)] = True
            batches.append(pa.record_batch({
                "fid": pa.array(np.full(n, fid, dtype=np.int32)),
                "line_no": pa.array(np.arange(1, n + 1, dtype=np.int64)),
                "off": pa.array(offsets[:-1]),
                "idx": pa.array(np.arange(n, dtype=np.int64)),
                "py": pa.array(py), "forb": pa.array(forb), "line": lines,
            }))
            files.append({"fid": fid, "session_id": stored_path(lg.source.session_id, self.redact)
                          if lg.source.session_id is not None else None,
                          "source_kind": lg.source.kind, "source_path": stored_path(lg.source.path, self.redact)})
        if not batches:
            return {}, {}
        con = self.con
        con.register("_lines", pa.Table.from_batches(batches))
        con.register("_files", pa.Table.from_pylist(files, schema=pa.schema(
            [("fid", pa.int32()), ("session_id", pa.string()), ("source_kind", pa.string()),
             ("source_path", pa.string())])))
        try:
            # a log with a line DuckDB cannot read as a JSON object goes whole to the Python reader
            con.execute("""create or replace temp table _bad as select distinct fid from _lines
                           where case when json_valid(line) then left(ltrim(line), 1) <> '{' else true end""")
            bad = {r[0] for r in con.execute("select fid from _bad").fetchall()}
            con.execute(self.sql)
            left = con.execute("select fid, line_no from _ev where not ok").fetchall()
            params = {"run_id": self.run_id}
            events = con.execute(_EVENTS_OUT, params).to_arrow_table()
            requests = con.execute(_REQUESTS_OUT, params).to_arrow_table()
        except duckdb.Error as exc:  # whatever DuckDB trips on, these logs are read by the Python reader
            log.warning("the DuckDB reader left %d logs to the Python reader: %s", len(logs), exc)
            return {}, {}
        finally:
            con.execute("drop table if exists _ev")
            con.execute("drop table if exists _bad")
            con.unregister("_lines")
            con.unregister("_files")
        # the lines left to Python (1-based line numbers): screened here, or by the SQL
        to_python: dict[int, set[int]] = {fid: {i + 1 for i in lg.secret | lg.deep} for fid, lg in logs.items()}
        for fid, line_no in left:
            to_python[fid].add(line_no)
        reads, py_rows = {}, {"stg_events": [], "stg_tool_requests": []}
        for fid in valid:
            if fid in bad:
                continue
            lg, line_nos = logs[fid], sorted(to_python[fid])
            try:
                res, counts = self._python_lines(lg, line_nos)
            except Fallback:
                continue
            for table, rows in res.rows.items():
                for row in rows:
                    row["fid"] = fid
                py_rows.setdefault(table, []).extend(rows)
            reads[fid] = (lg, res, counts)
            self.stats["logs"] += 1
            self.stats["python_lines"] += len(line_nos)
            self.stats["sql_lines"] += len(lg.ends) - len(line_nos)
        py_tables = {}
        for table, rows in py_rows.items():
            try:
                py_tables[table] = to_arrow(table, rows)
            except Exception:  # noqa: BLE001 - a value its column cannot hold: those logs whole to Python
                for fid in {r["fid"] for r in rows}:
                    reads.pop(fid, None)
        if len(py_tables) < len(py_rows):  # logs went to Python: their rows out of every table
            py_rows = {table: [r for r in rows if r["fid"] in reads] for table, rows in py_rows.items()}
            py_tables = {table: to_arrow(table, rows) for table, rows in py_rows.items()}
        # DuckDB's rows of the logs it read and Python's lines of them, in (log, event) order
        tables = {}
        keep = pa.array(sorted(reads), type=pa.int32())
        n_rows = np.zeros(max(logs) + 1, dtype=np.int64)
        for table, t in (("stg_events", events), ("stg_tool_requests", requests), ("stg_session_meta", None)):
            schema = arrow_schema(table)
            if t is None:  # Python's rows only
                if not py_rows.get(table):
                    continue
                t = schema.insert(0, pa.field("fid", pa.int32())).empty_table()
            t = t.filter(pc.is_in(t.column("fid"), keep))
            t = t.select(["fid", *schema.names]).cast(schema.insert(0, pa.field("fid", pa.int32())))
            if py_rows.get(table):
                extra = py_tables[table]
                fids = pa.array([r["fid"] for r in py_rows[table]], type=pa.int32())
                t = pa.concat_tables([t, extra.add_column(0, "fid", fids)])
                t = t.sort_by([("fid", "ascending"), *((k, "ascending") for k in _ORDER[table])])
            n_rows += np.bincount(t.column("fid").to_numpy(), minlength=len(n_rows))
            tables[table] = t
        return {fid: self._finish(lg, res, counts, int(n_rows[fid])) for fid, (lg, res, counts) in reads.items()}, \
            tables

    def _python_lines(self, lg: _Log, line_nos: list[int]) -> tuple[ReadResult, dict[str, int]]:
        """The lines left to Python, converted as the reference reader converts them."""
        res = ReadResult()
        redactor = Redactor(enabled=self.redact)
        ctx = Context(run_id=self.run_id, redact=redactor, max_text=self.max_text, scratch=self.scratch)
        ends = lg.ends
        for line_no in line_nos:
            i = line_no - 1
            start = int(ends[i - 1]) if i else 0
            raw = lg.data[start:int(ends[i])]
            obj, was_cut = loads_cut(_clean(raw[:-1]))
            if not isinstance(obj, dict):
                raise Fallback  # what the Python reader rejects, rejoins or splits: the whole log to it
            hits = (i in lg.secret, i in lg.forbidden)  # the screens of _prepare, as the reference reader's
            if not record_rows(res, obj, raw, hits, note=DEEP_NOTE if was_cut else "", line=line_no, offset=start,
                               index=i, session_id=lg.source.session_id, source_kind=lg.source.kind,
                               path=lg.source.path, ctx=ctx):
                raise Fallback  # a record that is a reject shifts every later event index
        if lg.source.kind == "transcript":  # read whole: its session's row, as the Python reader adds it
            res.add("stg_session_meta", transcript_meta(lg.source, self.run_id))
        _redact_rows(res, ctx, self.redact)  # session ids and paths as stored; rejects redacted
        return res, dict(redactor.counts)

    def _finish(self, lg: _Log, res: ReadResult, counts: dict[str, int], n_rows: int) -> Read:
        """The ``parallel.Read`` of one log read with DuckDB."""
        res.rows = {}
        n_lines = len(lg.ends)
        res.last_good_offset, res.good_line, res.n_records = len(lg.data), n_lines + 1, n_lines
        sessions = {stored_path(lg.source.session_id, self.redact)} if lg.source.session_id else set()
        tail = tail_digest(lg.source.path, len(lg.data)) if lg.source.kind in APPEND_KINDS else None
        return Read(lg.source, res, n_rows, sessions, None, counts, tail)
