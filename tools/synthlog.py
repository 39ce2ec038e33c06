"""One writer of synthetic Copilot CLI event logs, shared by the sample corpus and the benchmark.

``Log`` builds an events.jsonl the way the CLI writes it: the envelope (type, data, id, timestamp,
parentId), ids derived from the session and a counter (so a corpus is the same on every run), and
the usage a ``session.shutdown`` records for its leg or for every leg so far.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta

NS = uuid.UUID("6f1c1c52-5e0e-4d43-9a39-0d6c1b8f0a11")


def sid(name: str) -> str:
    return str(uuid.uuid5(NS, name))


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class Log:
    """Builds one events.jsonl the way the CLI writes it (envelope, parentId chain, timestamps)."""

    def __init__(self, session: str, start: datetime, ns: uuid.UUID = NS):
        self.session, self.t, self.events, self.prev, self.n, self.ns = session, start, [], None, 0, ns
        self.leg: list[dict] = []  # assistant.message data of the current leg (what its shutdown counts)
        self.previous_legs: list[dict] = []  # ... and of earlier legs a cumulative shutdown still remembers

    def add(self, etype: str, data: dict, secs: float = 2.0) -> dict:
        self.t += timedelta(seconds=secs)
        self.n += 1
        eid = str(uuid.uuid5(self.ns, f"{self.session}:{self.n}"))
        ev = {"type": etype, "data": data, "id": eid, "timestamp": iso(self.t), "parentId": self.prev}
        self.prev = eid
        self.events.append(ev)
        return ev

    def start(self, ctx: dict, version: str = "1.0.78", model: str = "claude-sonnet-4.6"):
        self.add("session.start", {"sessionId": self.session, "version": 1, "producer": "copilot-agent",
                                   "copilotVersion": version, "startTime": iso(self.t), "context": ctx}, 0)
        self.add("session.model_change", {"newModel": model}, 0.5)

    def prompt(self, text: str):
        self.add("user.message", {"content": text, "attachments": [],
                                  "transformedContent": f"<current_datetime>{iso(self.t)}</current_datetime>\n\n"
                                                        f"{text}\n<system_reminder>x</system_reminder>",
                                  "interactionId": str(uuid.uuid5(NS, self.session + text))})

    def tools(self, calls: list[tuple[str, dict, bool, str]], text: str = "", model: str = "claude-sonnet-4.6"):
        """One assistant turn requesting ``calls`` = [(tool, arguments, success, output)]."""
        turn = str(self.n)
        self.add("assistant.turn_start", {"turnId": turn})
        reqs = []
        for i, (tool, args, _ok, _out) in enumerate(calls):
            reqs.append({"toolCallId": f"toolu_{uuid.uuid5(NS, f'{self.session}:{self.n}:{i}').hex[:20]}",
                         "name": tool, "arguments": args, "type": "function"})
        msg = self.add("assistant.message", {"messageId": str(uuid.uuid5(NS, f"m{self.session}{self.n}")),
                                             "content": text, "toolRequests": reqs, "model": model,
                                             "outputTokens": 40 + 10 * len(calls), "turnId": turn,
                                             "reasoningText": "private chain of thought that must not be stored",
                                             "reasoningOpaque": "b64opaque=="})
        self.leg.append(msg["data"])
        for r in reqs:
            self.add("tool.execution_start", {"toolCallId": r["toolCallId"], "toolName": r["name"],
                                              "arguments": r["arguments"], "turnId": turn}, 0.2)
        for r, (_t, _a, ok, out) in zip(reqs, calls, strict=True):
            data = {"toolCallId": r["toolCallId"], "success": ok, "model": model, "turnId": turn}
            if ok:
                data["result"] = {"content": out, "detailedContent": out}
            else:
                data["error"] = {"message": out, "code": "failure"}
            self.add("tool.execution_complete", data, 0.8)
        self.add("assistant.turn_end", {"turnId": turn}, 0.1)

    def answer(self, text: str, model: str = "claude-sonnet-4.6"):
        msg = self.add("assistant.message", {"messageId": str(uuid.uuid5(NS, f"a{self.session}{self.n}")),
                                             "content": text, "toolRequests": [], "model": model,
                                             "outputTokens": 120})
        self.leg.append(msg["data"])

    def resume(self, at: datetime, model: str | None = None):
        """A new leg; the previous one ended with a shutdown or was killed (no shutdown)."""
        self.t = at
        self.add("session.resume", {"resumeTime": iso(at), "eventCount": self.n,
                                    **({"selectedModel": model} if model else {})}, 0)
        self.leg = []

    def usage_checkpoint(self, total_nano: int):
        self.add("session.usage_checkpoint", {"totalNanoAiu": total_nano, "totalPremiumRequests": 0}, 0.1)

    def shutdown(self, leg_start: datetime, input_per_request: int, cache_share: float = 0.0, *,
                 nano: bool = False, cumulative: bool = False, auto: bool = False, total_nano: int | None = None):
        """A shutdown whose modelMetrics count what the leg's messages asked for, the way the CLI
        does: its own leg (<= 1.0.60) or every leg it remembers (>= 1.0.73, ``cumulative``)."""
        msgs = (self.previous_legs if cumulative else []) + self.leg
        metrics: dict[str, dict] = {}
        for m in msgs:
            model = m["model"]
            inp = input_per_request
            row = metrics.setdefault(model, {"requests": {"count": 0, "cost": 0}, "usage": {
                "inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0,
                "reasoningTokens": 0}})
            row["requests"]["count"] += 1
            row["requests"]["cost"] = 1
            row["usage"]["inputTokens"] += inp
            row["usage"]["cacheReadTokens"] += int(inp * cache_share)
            row["usage"]["outputTokens"] += m["outputTokens"]
        if nano:
            for model, row in metrics.items():
                row["totalNanoAiu"] = nano_aiu(model, row["usage"], auto)
        data = {"shutdownType": "routine", "totalPremiumRequests": 1, "totalApiDurationMs": 20000,
                "sessionStartTime": int(leg_start.timestamp() * 1000),
                "codeChanges": {"linesAdded": 10, "linesRemoved": 2, "filesModified": []},
                "modelMetrics": metrics, "currentModel": msgs[-1]["model"] if msgs else None}
        if nano:
            data["totalNanoAiu"] = total_nano if total_nano is not None else sum(
                r["totalNanoAiu"] for r in metrics.values())
        self.add("session.shutdown", data)
        self.previous_legs, self.leg = msgs, []

    def text(self) -> str:
        return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in self.events)


# USD per million tokens (input, cache read, output), as GitHub's models-and-pricing table lists them
RATES = {"claude-sonnet-4.6": (3.0, 0.3, 15.0), "gpt-5.2": (1.75, 0.175, 14.0)}


def nano_aiu(model: str, usage: dict, auto: bool = False) -> int:
    """What Copilot would log for ``usage``: 1 AI credit = $0.01 = 1e9 nano-AIU; auto is 10% off."""
    inp, cached, out = RATES[model]
    fresh = usage["inputTokens"] - usage["cacheReadTokens"] - usage["cacheWriteTokens"]
    usd = (fresh * inp + usage["cacheReadTokens"] * cached + usage["outputTokens"] * out) / 1e6
    return round(usd * (0.9 if auto else 1.0) * 100 * 1e9)
