"""Secret redaction applied to every text value before anything is written.

Patterns follow the gitleaks / GitHub secret-scanning token formats. Each match is replaced by
``[REDACTED:<kind>]`` so a reader can still see that something was there and what it was.
Each rule runs only when one of its trigger substrings occurs in the lower-cased text, so most
texts cost a few substring searches and no regex at all.
"""

from __future__ import annotations

import re
from collections import Counter

# (kind, pattern, substrings one of which must be in the lower-cased text for the rule to run)
_RULES: list[tuple[str, str, tuple[str, ...]]] = [
    ("private_key", r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,20000}?"
                    r"(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\Z)", ("private key",)),
    ("github_token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    ("github_pat", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b", ("github_pat_",)),
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
     ("akia", "asia", "abia", "acca", "a3t")),
    ("slack_token", r"\bxox[abposr]-(?:[A-Za-z0-9]+-?){2,}[A-Za-z0-9]+\b", ("xox",)),
    ("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/]{20,}", ("hooks.slack",)),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", ("eyj",)),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}\b", ("t3blbkfj",)),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}\b", ("sk-ant-",)),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}\b", ("aiza",)),
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b", ("_live_", "_test_")),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", ("npm_",)),
    # scheme://user:password@host  (keeps scheme, user and host)
    ("connection_string_password", r"(?<=://)[^\s:/@'\"]{1,128}:(?P<v>[^\s@/'\"]{1,256})(?=@)", ("://",)),
    # password=..., token: "...", api_key = '...', client_secret=...: the value goes, the name stays
    ("assignment", r"(?i:(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth)"
                   r"[\"']?[ \t]{0,3}[:=][ \t]{0,3}(?P<q>[\"']?)(?P<v>[^\s\"',;&]{6,})(?P=q))",
     ("password", "passwd", "pwd", "secret", "token", "api", "access", "auth")),
    ("bearer_token", r"(?i:\bbearer[ \t]+(?P<v>[A-Za-z0-9._~+/=-]{16,}))", ("bearer",)),
]
_COMPILED = [(kind, re.compile(pat), triggers) for kind, pat, triggers in _RULES]
_VALUE_KINDS = {"connection_string_password", "assignment", "bearer_token"}
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
        low = text.lower()
        for kind, rx, triggers in _COMPILED:
            if any(t in low for t in triggers):
                text = rx.sub(lambda m, k=kind: self._replace(m, k), text)
        return text

    def _replace(self, m: re.Match, kind: str) -> str:
        if kind in _VALUE_KINDS:
            value = m.group("v")
            if _PLACEHOLDER.match(value) or (kind == "assignment" and _looks_like_code(value)):
                return m.group(0)
            self.counts[kind] += 1
            start, end = m.span("v")
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
