"""What a reader that is DuckDB's own parse would cost: the bench's floor query against one that also lifts every
field ``stg_events`` keeps, in alternating rounds on one corpus.

    python -m tools.lift_floor data/bench/corpus-events-1024mb [--rounds 3]

The floor (``tools.bench.FLOOR_SQL``, step (a) of ``make bench``) parses every ``events.jsonl`` and extracts the
fields the star schema uses. The lift reads every line as the JSON it is (no type guessed for it) and takes, with
a few extractions of it, what the readers store: the envelope and ``data``'s identifiers and texts, the arguments as
canonical JSON, each tool output's length, MD5 and head (the whole output when longer), and ``data`` without its
lifted keys - nothing redacted or stored, so it is a lower bound of any such reader. The logs are read into the
page cache first; each round runs both queries in their own process; printed: each round's seconds and CPU
seconds, and the median of the rounds' lift/floor ratios.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.extract.events import _LIFTED
from tools.bench import FLOOR_SQL, QUERY, _median, run, warm

_TEXTS = ("$.type", "$.id", "$.parentId", "$.timestamp", "$.agentId", "$.data.content", "$.data.model",
          "$.data.interactionId", "$.data.turnId", "$.data.toolCallId", "$.data.toolName", "$.data.name",
          "$.data.parentToolCallId", "$.data.mcpServerName", "$.data.requestId", "$.data.apiCallId",
          "$.data.serviceRequestId", "$.data.error.message")
_VALUES = ("$.data.arguments", "$.data.result", "$.data.success", "$.data.outputTokens", "$.data.toolRequests")
_REMOVED = json.dumps(dict.fromkeys(sorted(_LIFTED)))  # a merge patch that drops the keys the reader lifts

LIFT_SQL = f"""
select count(*), sum(length(texts[6])), sum(length(arguments)), sum(length(extra)), sum(result_chars),
       count(result_md5), sum(length(result_head)), sum(length(result_content))
from (
    select texts, json(vals[1])::varchar as arguments, length(out) as result_chars, md5(out) as result_md5,
           left(out, 4096) as result_head, case when length(out) > 4096 then out end as result_content,
           json_merge_patch(json_extract(j, '$.data'), '{_REMOVED}') as extra
    from (
        select j, json_extract_string(j, {list(_TEXTS)}) as texts, json_extract(j, {list(_VALUES)}) as vals,
               json_extract_string(j, '$.data.result.content') as out
        from (select json as j from read_json_objects(?, format = 'newline_delimited',
                                                        maximum_object_size = 67108864))
    )
)
"""

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.lift_floor", description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, help="a folder with copilot-home/session-state/*/events.jsonl")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    logs = str(args.corpus / "copilot-home" / "session-state" / "*" / "events.jsonl")
    warm(args.corpus.glob("copilot-home/session-state/*/events.jsonl"))  # in the page cache first
    ratios, cpu_ratios = [], []
    for k in range(max(1, args.rounds)):
        floor = run([sys.executable, "-c", QUERY, FLOOR_SQL, logs])
        lift = run([sys.executable, "-c", QUERY, LIFT_SQL, logs])
        if floor[3] or lift[3]:
            print(f"round {k + 1}: a query failed (floor exit {floor[3]}, lift exit {lift[3]})", file=sys.stderr)
            return 1
        ratios.append(lift[0] / floor[0])
        cpu_ratios.append(lift[2] / floor[2])
        print(f"round {k + 1}: floor {floor[0]:.2f} s ({floor[2]:.1f} CPU s), lift {lift[0]:.2f} s "
              f"({lift[2]:.1f} CPU s, peak RSS {lift[1]:.0f} MB)", flush=True)
    print(f"lift / floor: {_median(ratios):.2f}x in wall time, {_median(cpu_ratios):.2f}x in CPU time "
          f"(median of {len(ratios)} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
