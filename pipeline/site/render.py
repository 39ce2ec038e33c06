"""Markdown from the history as HTML that cannot do harm: markdown-it-py renders CommonMark (raw HTML
off, so ``<script>`` stays text; unsafe link schemes refused), then nh3 (the ammonia sanitizer) keeps
only an allow-list of tags, attributes and URL schemes. Images are dropped: the site never loads
anything from the network. Both libraries are well kept; a hand-written sanitizer is how XSS ships."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

TAGS = {"p", "br", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "pre", "code", "em",
        "strong", "del", "s", "a", "table", "thead", "tbody", "tr", "th", "td", "hr"}
ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "ol": {"start"}}  # no style: the page's CSP allows none
URL_SCHEMES = {"http", "https", "mailto"}

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"])


def sanitize(html: str) -> str:
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                     link_rel="noopener noreferrer nofollow", strip_comments=True)


def markdown(text: str | None, limit: int | None = None) -> Markup:
    """``text`` rendered and sanitized; past ``limit`` characters cut, with a note saying how much."""
    text = text or ""
    note = ""
    if limit is not None and len(text) > limit:
        note = f"\n\n*… {len(text) - limit:,} more characters in the warehouse.*"
        text = text[:limit]
    return Markup(sanitize(_MD.render(text + note)))  # noqa: S704 - sanitized just above
