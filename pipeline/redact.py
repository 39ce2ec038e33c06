"""Secret redaction applied to every text value before anything is written.

Patterns follow the gitleaks / GitHub secret-scanning token formats. Each match is replaced by
``[REDACTED:<kind>]`` so a reader can still see that something was there and what it was.
One compiled alternation scans a text once; a cheap substring pre-check skips most texts.
"""

from __future__ import annotations

import re
from collections import Counter

_RULES: list[tuple[str, str]] = [
    ("private_key", r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,20000}?"
                    r"(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\Z)"),
    ("github_token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b"),
    ("github_pat", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b"),
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b"),
    ("slack_token", r"\bxox[abposr]-(?:[A-Za-z0-9]+-?){2,}[A-Za-z0-9]+\b"),
    ("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/]{20,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}\b"),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}\b"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}\b"),
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b"),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    # scheme://user:password@host  (keeps scheme, user and host)
    ("connection_string_password", r"(?<=://)[^\s:/@'\"]{1,128}:(?P<cs_pw>[^\s@/'\"]{1,256})(?=@)"),
    # password=..., token: "...", api_key = '...', secret=..., Authorization: Bearer ...
    ("assignment", r"(?i:\b(?:[a-z0-9_.-]{0,40}?(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|"
                   r"access[_-]?key|client[_-]?secret|auth))[\"']?\s{0,3}[:=]\s{0,3}(?P<as_q>[\"']?)"
                   r"(?P<as_v>[^\s\"',;&]{6,})(?P=as_q))"),
    ("bearer_token", r"(?i:\bbearer\s+(?P<br_v>[A-Za-z0-9._~+/=-]{16,}))"),
]

_COMBINED = re.compile("|".join(f"(?P<{name}>{pat})" for name, pat in _RULES))
_KINDS = [name for name, _ in _RULES]
# Substrings one of which every secret contains: texts with none skip the regex entirely.
_HINTS = ("PRIVATE KEY", "gh", "github_pat_", "AKIA", "ASIA", "ABIA", "ACCA", "A3T", "xox", "hooks.slack",
          "eyJ", "sk-", "AIza", "_live_", "_test_", "npm_", "://", "=", ":", "earer")
_VALUE_GROUPS = {"connection_string_password": "cs_pw", "assignment": "as_v", "bearer_token": "br_v"}
_PLACEHOLDER = re.compile(r"^(?:\*+|x+|\.{3}|<[^>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\[REDACTED:[a-z_]+\]"
                          r"|your[_-]?\w*|changeme|null|none|true|false|undefined|example\w*|redacted)$",
                          re.IGNORECASE)


class Redactor:
    """Replace secrets in text; counts what it removed by kind."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.counts: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __call__(self, text):
        if not self.enabled or not text or not isinstance(text, str):
            return text
        if not any(h in text for h in _HINTS):
            return text
        return _COMBINED.sub(self._replace, text)

    def _replace(self, m: re.Match) -> str:
        kind = m.lastgroup
        # lastgroup is the innermost-last closed group; find the rule that matched
        for k in _KINDS:
            if m.group(k) is not None:
                kind = k
                break
        vg = _VALUE_GROUPS.get(kind)
        if vg:
            value = m.group(vg)
            if _PLACEHOLDER.match(value) or (kind == "assignment" and _looks_like_code(value)):
                return m.group(0)
            self.counts[kind] += 1
            start, end = m.span(vg)
            s0 = m.start()
            whole = m.group(0)
            return whole[: start - s0] + f"[REDACTED:{kind}]" + whole[end - s0:]
        self.counts[kind] += 1
        return f"[REDACTED:{kind}]"


def _looks_like_code(value: str) -> bool:
    """``token=getToken()``, ``password = self.password`` and the like are code, not secrets."""
    if "(" in value or value.startswith(("self.", "this.", "os.", "process.", "config.", "settings.")):
        return True
    # an UPPER_CASE name is an environment variable or constant being referenced
    return value.replace("_", "").isalpha() and value.isupper()
