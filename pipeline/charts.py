"""SVG charts for the wiki, drawn with matplotlib, byte-for-byte reproducible.

Reproducible: no date in the SVG metadata, a fixed hash salt for element ids, glyphs as paths
(no font lookup at view time), and inputs sorted by the caller.
"""

from __future__ import annotations

import io
from datetime import date, timedelta

PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "svg.hashsalt": "copilot-warehouse", "svg.fonttype": "path", "font.size": 9,
        "axes.spines.top": False, "axes.spines.right": False, "axes.titleweight": "bold",
        "axes.titlesize": 10, "figure.dpi": 100,
    })
    return plt


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    _plt().close(fig)
    return buf.getvalue()


def weekly_activity(weeks: list[date], prompts: list[int], tool_calls: list[int], failed: list[int]) -> str:
    """Bars of prompts and tool calls per week (failed calls in red); weeks without activity show as gaps."""
    plt = _plt()
    from matplotlib.ticker import MaxNLocator
    if weeks:
        have = {w: (p, t, f) for w, p, t, f in zip(weeks, prompts, tool_calls, failed, strict=True)}
        span = (weeks[-1] - weeks[0]).days // 7 + 1
        weeks = [weeks[0] + timedelta(days=7 * i) for i in range(span)]
        prompts, tool_calls, failed = (list(v) for v in zip(*(have.get(w, (0, 0, 0)) for w in weeks), strict=True))
    fig, ax = plt.subplots(figsize=(7.5, 2.6))
    x = list(range(len(weeks)))
    width = 0.4
    ax.bar([i - width / 2 for i in x], prompts, width, label="prompts", color=PALETTE[0])
    ok = [t - f for t, f in zip(tool_calls, failed, strict=True)]
    ax.bar([i + width / 2 for i in x], ok, width, label="tool calls", color=PALETTE[1])
    ax.bar([i + width / 2 for i in x], failed, width, bottom=ok, label="failed tool calls", color=PALETTE[3])
    step = max(1, -(-len(weeks) // 8))  # at most 8 labels
    ax.set_xticks(x[::step], [w.isoformat() for w in weeks][::step], rotation=30, ha="right")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Activity per week")
    ax.legend(frameon=False, ncols=3, loc="upper left", bbox_to_anchor=(0, -0.35))
    return _svg(fig)


def horizontal_bars(labels: list[str], values: list[float], title: str, xlabel: str,
                    highlight: list[float] | None = None, highlight_label: str = "") -> str:
    """Ranked horizontal bars, first label on top; ``highlight`` draws a part of each bar in red."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 0.35 * max(len(labels), 2) + 0.8))
    y = list(range(len(labels)))[::-1]
    ax.barh(y, values, color=PALETTE[0], label=xlabel if highlight else None)
    if highlight:
        ax.barh(y, highlight, color=PALETTE[3], label=highlight_label)
        ax.legend(frameon=False, loc="lower right")
    ax.set_yticks(y, [_short(s) for s in labels])
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    return _svg(fig)


def term_trends(months: list[date], series: dict[str, list[float]], title: str) -> str:
    """One line per term over months."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 2.8))
    x = list(range(len(months)))
    for i, (term, values) in enumerate(series.items()):
        ax.plot(x, values, marker="o", color=PALETTE[i % len(PALETTE)], label=term)
    ax.set_xticks(x, [m.strftime("%Y-%m") for m in months])
    ax.set_ylabel("weight")
    ax.set_title(title)
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig)


def _short(s: str, n: int = 48) -> str:
    return s if len(s) <= n else "…" + s[-(n - 1):]
