"""Secret redaction applied to every text value before anything is written.

Patterns follow the gitleaks / GitHub secret-scanning token formats. Each match is replaced by
``[REDACTED:<kind>]`` so a reader can still see that something was there and what it was.
A text goes through the rules only when one RE2 pass of ``LINE_SCREEN`` (every rule relaxed to a
superset) finds a candidate; then each rule is tried only where one of its anchors occurs.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter

import re2  # google-re2: linear-time, one pass for all the screens below, compiled once

# (kind, pattern, anchors, offset): every match of a rule starts ``offset`` characters after one of
# its anchors (lower-case literals). The text is searched for anchors with str.find, and the regex
# is only tried where one occurs: a long tool output with no anchor costs a few C-speed scans.
_RULES: list[tuple[str, str, tuple[str, ...], int]] = [
    ("private_key", r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,20000}?"
                    r"(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\Z)", ("-----begin",), 0),
    ("github_token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b",
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), 0),
    ("github_pat", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b", ("github_pat_",), 0),
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
     ("akia", "asia", "abia", "acca", "a3t"), 0),
    # dash-separated alphanumeric groups, at least 3 characters; written so that no two ways of
    # splitting a run exist (the nested `(?:[A-Za-z0-9]+-?){2,}` this replaced took minutes on a
    # long run without a word boundary)
    ("slack_token", r"\bxox[abposr]-(?=[A-Za-z0-9]-?[A-Za-z0-9]-?[A-Za-z0-9])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*\b",
     ("xox",), 0),
    ("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/]{20,}",
     ("https://hooks.slack",), 0),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,8192}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{8,8192}", ("eyj",), 0),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,1024}T3BlbkFJ[A-Za-z0-9_-]{20,1024}\b",
     ("sk-",), 0),
    # current OpenAI project, service-account and admin keys carry no T3BlbkFJ marker
    ("openai_key", r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,1024}", ("sk-proj-", "sk-svcacct-", "sk-admin-"), 0),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{34,40}\b", ("hf_",), 0),
    ("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,64}", ("glpat-",), 0),
    ("google_oauth_secret", r"\bGOCSPX-[A-Za-z0-9_-]{24,40}", ("gocspx-",), 0),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}\b", ("sk-ant-",), 0),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}\b", ("aiza",), 0),
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b",
     ("sk_live_", "sk_test_", "rk_live_", "rk_test_"), 0),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", ("npm_",), 0),
    # scheme://user:password@host  (keeps scheme, user and host)
    ("connection_string_password", r"(?<=://)[^\s:/@'\"]{1,128}:(?P<v>[^\s@/'\"]{1,256})(?=@)", ("://",), 3),
    # password=..., token: "...", api_key = '...', client_secret=...: the value goes, the name stays
    ("assignment", r"(?i:(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth"
                   r"|accountkey|sharedaccesskey)"
                   r"[\"']?[ \t]{0,3}[:=][ \t]{0,3}(?P<q>[\"']?)(?P<v>[^\s\"',;&]{6,})(?P=q))",
     ("password", "passwd", "pwd", "secret", "token", "api", "access", "auth", "accountkey", "sharedaccesskey"), 0),
    ("bearer_token", r"(?i:\bbearer[ \t]+(?P<v>[A-Za-z0-9._~+/=-]{16,}))", ("bearer",), 0),
]
_COMPILED = [(kind, re.compile(pat), anchors, offset) for kind, pat, anchors, offset in _RULES]
_VALUE_KINDS = {"connection_string_password", "assignment", "bearer_token"}
_PLACEHOLDER = re.compile(r"^(?:\*+|x+|\.{3}|<[^>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\[REDACTED:[a-z_]+\]"
                          r"|your[_-]?\w*|changeme|null|none|nil|true|false|undefined|default|example\w*|redacted)$",
                          re.IGNORECASE)


CACHE_MIN_CHARS = 4096
CACHE_SIZE = 64
_CACHE: dict[str, tuple[str, Counter]] = {}


class Redactor:
    """Replace secrets in text; counts what it removed by kind."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.counts: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __call__(self, text: object):
        if not self.enabled or not isinstance(text, str) or len(text) < 6:
            return text
        if len(text) < CACHE_MIN_CHARS:
            return self._redact(text)
        # large texts recur verbatim (the ~56 KB system prompt of every session and resume, skill
        # files): redact each once per process, and count its secrets every time it recurs
        hit = _CACHE.get(text)
        if hit is None:
            before = Counter(self.counts)
            result = self._redact(text)
            hit = (result, self.counts - before)
            _CACHE[text] = hit
            if len(_CACHE) > CACHE_SIZE:
                _CACHE.pop(next(iter(_CACHE)))
            return result
        self.counts.update(hit[1])
        return hit[0]

    def _redact(self, text: str) -> str:
        rules = _rules_to_try(text)  # one RE2 pass says which rules could match at all
        if not rules:
            return text
        low = text.lower()
        if len(low) != len(text):  # a few Unicode characters change length in lower case: scan rule by rule
            for kind, rx, _anchors, _offset in _COMPILED:
                text = rx.sub(lambda m, k=kind: self._replace(m, k), text)
            return text
        hits = []
        for kind, rx, anchors, offset in rules:
            for anchor in anchors:
                pos = low.find(anchor)
                while pos != -1:
                    m = rx.match(text, pos + offset)
                    if m:
                        hits.append((m.start(), -m.end(), kind, m))
                    pos = low.find(anchor, pos + 1)
        if not hits:
            return text
        # a known token format wins over a generic `name=value` match that overlaps it
        # (GITHUB_TOKEN=ghp_... is a github_token), then earlier and longer matches win
        hits.sort(key=lambda h: (h[2] in _VALUE_KINDS, h[0], h[1]))
        # chosen spans never overlap, so kept sorted by start a new one need only be checked
        # against its two neighbours
        starts: list[int] = []
        chosen: list[tuple[int, int, str, re.Match]] = []
        for start, neg_end, kind, m in hits:
            end = -neg_end
            i = bisect.bisect_right(starts, start)
            if (i and chosen[i - 1][1] > start) or (i < len(starts) and starts[i] < end):
                continue
            starts.insert(i, start)
            chosen.insert(i, (start, end, kind, m))
        out, last = [], 0
        for start, end, kind, m in chosen:
            out.append(text[last:start])
            out.append(self._replace(m, kind))
            last = end
        out.append(text[last:])
        return "".join(out)

    def _replace(self, m: re.Match, kind: str) -> str:
        if kind in _VALUE_KINDS:
            value = m.group("v")
            bare = value.rstrip(")]}")  # the end of a call or a literal the value sits in: f(token: token)
            if _PLACEHOLDER.match(bare) or (kind == "assignment" and _looks_like_code(bare, m)):
                return m.group(0)
            self.counts[kind] += 1
            start, end = m.span("v")
            s0 = m.start()
            whole = m.group(0)
            return whole[: start - s0] + f"[REDACTED:{kind}]" + whole[end - s0:]
        self.counts[kind] += 1
        return f"[REDACTED:{kind}]"


# Every rule relaxed to a superset that RE2 runs in one linear pass: no word boundaries or upper
# bounds, quotes and tabs possibly escaped (JSON inside JSON), any whitespace around `=`. Over a
# raw JSON line it matches every line holding a string the rules could change, however the writer
# escaped it: a \uXXXX escape of a printable character or an escaped `/` could hide anything, and
# so could the four non-ASCII letters Python's case-insensitive matching equates with ASCII ones
# (İ ı ſ K); those send a line or text through every rule. tests/test_redact.py checks the screen
# against the rules. Each entry: (pattern, the rules it screens for; None = all of them).
_ESC_WS = r"(?:[ \t\r\n]|\\+[tnr])*"
_ESC_Q = r"(?:\\*[\"'])?"
_SCREEN_PARTS: list[tuple[str, tuple[str, ...] | None]] = [
    (r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY", ("private_key",)),
    (r"gh[pousr]_[A-Za-z0-9]{36}", ("github_token",)),
    (r"github_pat_[A-Za-z0-9_]{22}", ("github_pat",)),
    (r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}", ("aws_access_key",)),
    (r"xox[abposr]-", ("slack_token",)),
    (r"https://hooks\.slack\.com/", ("slack_webhook",)),
    (r"eyJ[A-Za-z0-9_-]{8,}\.eyJ", ("jwt",)),
    (r"T3BlbkFJ", ("openai_key",)),
    (r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40}", ("openai_key",)),
    (r"hf_[A-Za-z0-9]{34}", ("huggingface_token",)),
    (r"glpat-[A-Za-z0-9_-]{20}", ("gitlab_token",)),
    (r"GOCSPX-[A-Za-z0-9_-]{24}", ("google_oauth_secret",)),
    (r"sk-ant-[A-Za-z0-9_-]{20}", ("anthropic_key",)),
    (r"AIza[0-9A-Za-z_-]{35}", ("google_api_key",)),
    (r"[sr]k_(?:live|test)_[A-Za-z0-9]{16}", ("stripe_key",)),
    (r"npm_[A-Za-z0-9]{36}", ("npm_token",)),
    (r"://[^\s/@'\"]+:[^\s/@'\"]+@", ("connection_string_password",)),
    (r"(?i:(?:passw(?:or)?d|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth|accountkey|sharedaccesskey)"
     + _ESC_Q + _ESC_WS + "[:=]" + _ESC_WS + _ESC_Q + r"[^\s\"',;&]{6})", ("assignment",)),
    (r"(?i:bearer(?:[ \t]|\\+t)+[A-Za-z0-9._~+/=\\-]{16})", ("bearer_token",)),
    (r"\\u(?:[1-9a-fA-F][0-9a-fA-F]{3}|0[1-9a-fA-F][0-9a-fA-F]{2}|00[2-9a-fA-F][0-9a-fA-F])", None),
    (r"\\/", None),
    ("\u0130|\u0131|\u017f|\u212a", None),  # İ ı ſ K
]
# Over whole lines a narrower assignment screen: a value the rule would leave alone as code
# (``auth = refresh(session)``, common in tool output) does not flag its line. The raw value run
# (printable ASCII but ``( \\ " ' , ; &`` and whitespace) must reach six characters and end where
# the decoded value surely ends; a backslash (an escape) or a character outside printable ASCII
# (Python's \\s takes Unicode spaces) before that could hide anything, and flags the line.
# Per text the broad part stays: an assignment judged to be code still shadows the value-kind
# matches it overlaps, so the rules run over a flagged text exactly as without the screen.
_RUN = r"[!#$%*+\-./0-9:<=>?@A-Z\[\]^_`a-z{|}~)]"
_ASSIGNMENT_LINE = (r"(?i:(?:passw(?:or)?d|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth|accountkey"
                    r"|sharedaccesskey)"
                    + _ESC_Q + _ESC_WS + "[:=]" + _ESC_WS + _ESC_Q
                    + "(?:" + _RUN + r"*(?:[^ -~\t\r\n]|\\)|" + _RUN + r"{6,}(?:[ \t\r\n\"',;&]|$)))")
LINE_SCREEN = "|".join(_ASSIGNMENT_LINE if kinds == ("assignment",) else p for p, kinds in _SCREEN_PARTS)

_SCREENS: dict[str, object] = {}
_TEXT_SCREEN: list = []  # [RE2 set of the parts, the rules each part screens for]


def _rules_to_try(text: str) -> list[tuple]:
    """The rules whose screen matches ``text`` (one RE2 pass over it for all of them)."""
    if not _TEXT_SCREEN:
        screen = re2.Set.SearchSet()
        for pattern, _kinds in _SCREEN_PARTS:
            screen.Add(pattern)
        screen.Compile()
        by_kind: dict[str, list] = {}
        for rule in _COMPILED:  # a kind may have several rules (two shapes of OpenAI key)
            by_kind.setdefault(rule[0], []).append(rule)
        _TEXT_SCREEN[:] = [screen, [_COMPILED if kinds is None else [r for k in kinds for r in by_kind[k]]
                                    for _p, kinds in _SCREEN_PARTS]]
    screen, rules = _TEXT_SCREEN
    found = screen.Match(text)
    if not found:
        return []
    if len(found) == 1:
        return rules[found[0]]
    wanted = {id(rule) for i in found for rule in rules[i]}
    return [rule for rule in _COMPILED if id(rule) in wanted]  # in declared order, as the full scan


def screen(pattern: str = LINE_SCREEN):
    """The RE2 search function of a screen pattern over bytes, compiled once per process."""
    compiled = _SCREENS.get(pattern)
    if compiled is None:
        # Latin-1: one byte is one character, so a byte that is not valid UTF-8 (which the reader
        # decodes as U+FFFD, a character a value may hold) counts as outside printable ASCII;
        # the non-ASCII literals above match as their UTF-8 bytes
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        compiled = _SCREENS[pattern] = re2.compile(pattern.encode(), options)
    return compiled.search


def screen_lines(data: bytes, line_starts: list[int], pattern: str = LINE_SCREEN) -> set[int]:
    """The indexes of the lines of ``data`` (starting at ``line_starts``) that a match of ``pattern``
    (by default: a possible secret) touches. One RE2 search per such line, none for the others."""
    search, hit = screen(pattern), set()
    pos, n = 0, len(data)
    while pos < n:
        m = search(data, pos)
        if m is None:
            break
        first = bisect.bisect_right(line_starts, m.start()) - 1
        last = bisect.bisect_right(line_starts, max(m.end() - 1, m.start())) - 1
        hit.update(range(first, last + 1))
        pos = line_starts[last + 1] if last + 1 < len(line_starts) else n  # on with the next line
    return hit


_PATHS: dict[str, str] = {}


def stored_path(path: str, enabled: bool = True) -> str:
    """A path (or id) as it is stored: redacted (a token can hide in a folder or file name), and a
    name that is not valid UTF-8 with U+FFFD. The same path gives the same text in every run, so it
    keys the bookkeeping as the raw path would. Not counted as a redaction."""
    out = _PATHS.get(path)
    if out is None:
        text = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        out = Redactor()(text) if enabled else text
        if len(_PATHS) > 100_000:
            _PATHS.clear()
        _PATHS[path] = out
    return out


_MEMBER = re.compile(r"[A-Za-z_$]+(?:\.[A-Za-z_$]+)+")  # names without digits: a secret has some
_NAME_BEFORE = re.compile(r"[\w$]*$")


def _looks_like_code(value: str, m: re.Match | None = None) -> bool:
    """``token=getToken()``, ``password = self.password``, ``cancellationToken: _cts.Token``,
    ``cancellationToken: cancellationToken`` (a named argument passed on) and the like are code,
    not secrets."""
    if "(" in value or value.startswith(("self.", "this.", "os.", "process.", "config.", "settings.")):
        return True
    if _MEMBER.fullmatch(value):  # a member of an object: options.ApiKey, _cts.Token
        return True
    if m is not None:  # the value is the very name it is assigned to
        name = _NAME_BEFORE.search(m.string, 0, m.start()).group() + re.match(r"[\w-]*", m.group(0)).group()
        if value.lower() == name.lower():
            return True
    # an UPPER_CASE name is an environment variable or constant being referenced
    return value.replace("_", "").isalpha() and value.isupper()
