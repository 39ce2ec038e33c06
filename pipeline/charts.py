"""SVG charts for the wiki, drawn with matplotlib, byte-for-byte reproducible.

Reproducible: no date in the SVG metadata, a fixed hash salt for element ids, text as SVG text,
and inputs sorted by the caller. Each SVG carries a digest of the data it was drawn from; a chart
whose data did not change is not drawn again, and many charts are drawn on several cores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

import functools
import hashlib
import io
import multiprocessing
import re
import warnings
from collections.abc import Callable
from concurrent.futures import Executor
from datetime import date, timedelta
from pathlib import Path

PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "svg.hashsalt": "copilot-warehouse", "svg.fonttype": "none", "font.size": 9,
        "axes.spines.top": False, "axes.spines.right": False, "axes.titleweight": "bold",
        "axes.titlesize": 10, "figure.dpi": 100,
    })
    return plt


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    # margins are set by each chart (no bbox_inches="tight": it draws every chart twice)
    with warnings.catch_warnings():  # a CJK label without a CJK font on this machine: drawn as boxes, not a warning
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
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
    fig, ax = plt.subplots(figsize=(7.5, 3.0))
    x = list(range(len(weeks)))
    width = 0.4
    ax.bar([i - width / 2 for i in x], prompts, width, label="prompts", color=PALETTE[0])
    ok = [t - f for t, f in zip(tool_calls, failed, strict=True)]
    ax.bar([i + width / 2 for i in x], ok, width, label="tool calls", color=PALETTE[1])
    ax.bar([i + width / 2 for i in x], failed, width, bottom=ok, label="failed tool calls", color=PALETTE[3])
    step = max(1, -(-len(weeks) // 8))  # at most 8 labels
    ax.set_xticks(x[::step], [w.isoformat() for w in weeks][::step], rotation=30, ha="right")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0, top=None if any(prompts) or any(tool_calls) else 1)  # never negative ticks
    if not weeks:
        ax.text(0.5, 0.5, "no activity yet", transform=ax.transAxes, ha="center", va="center", color="#777")
    ax.set_title("Activity per week")
    ax.legend(frameon=False, ncols=3, loc="upper left", bbox_to_anchor=(0, -0.5))
    fig.subplots_adjust(left=0.07, right=0.98, top=0.9, bottom=0.38)
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
    shown = [_short(s) for s in labels]
    ax.set_yticks(y, shown)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    height = fig.get_size_inches()[1]
    widest = max((len(s) for s in shown), default=4)
    fig.subplots_adjust(left=min(0.6, 0.03 + 0.0112 * widest), right=0.97, top=1 - 0.35 / height,
                        bottom=0.55 / height)
    return _svg(fig)


def term_trends(months: list[date], series: dict[str, list[float]], title: str) -> str:
    """One small panel per term over the same months (shared axes), so lines never hide each other."""
    plt = _plt()
    n = max(len(series), 1)
    fig, axes = plt.subplots(n, 1, figsize=(7.5, 0.75 * n + 0.9), sharex=True, squeeze=False)
    x = list(range(len(months)))
    top = max((v for values in series.values() for v in values), default=0) or 1
    for i, (ax, (term, values)) in enumerate(zip(axes[:, 0], series.items(), strict=False)):
        color = PALETTE[i % len(PALETTE)]
        ax.fill_between(x, values, color=color, alpha=0.25, linewidth=0)
        ax.plot(x, values, marker="o", markersize=3, color=color)
        ax.set_ylim(0, top * 1.1)
        ax.set_yticks([])
        ax.spines["left"].set_visible(False)
        ax.set_ylabel(_short(term, 24), rotation=0, ha="right", va="center")
    step = max(1, -(-len(months) // 8))  # at most 8 labels: 100 months of labels ran into each other
    axes[-1, 0].set_xticks(x[::step], [m.strftime("%Y-%m") for m in months][::step])
    axes[0, 0].set_title(title + " (tf-idf weight)")
    height = fig.get_size_inches()[1]
    widest = max((len(_short(t, 24)) for t in series), default=4)
    fig.subplots_adjust(left=min(0.4, 0.04 + 0.011 * widest), right=0.98, top=1 - 0.4 / height,
                        bottom=0.35 / height, hspace=0.25)
    return _svg(fig)


def _short(s: str, n: int = 48) -> str:
    return s if len(s) <= n else "…" + s[-(n - 1):]


PARALLEL_MIN_CHARTS = 12
_DIGEST = re.compile(r"<!-- chart-data: ([0-9a-f]{32}) -->")


def _digest(name: str, args: tuple) -> str:
    """Of the data, this module's drawing code and the matplotlib version: any change redraws."""
    return hashlib.md5(repr((name, args, *_drawn_by())).encode()).hexdigest()


@functools.cache
def _drawn_by() -> tuple[str, str]:
    """This module's code (its MD5) and the matplotlib version, once per process. The version from the installed
    package's metadata: importing matplotlib to read it took 0.4 s of a report whose charts were all unchanged."""
    from importlib.metadata import version

    return hashlib.md5(Path(__file__).read_bytes()).hexdigest(), version("matplotlib")


CHARTS = {"weekly_activity": weekly_activity, "horizontal_bars": horizontal_bars, "term_trends": term_trends}


def _draw(name: str, args: tuple, digest: str) -> str:
    svg = CHARTS[name](*args)
    head, sep, rest = svg.partition("\n")  # after the XML declaration
    return f"{head}{sep}<!-- chart-data: {digest} -->\n{rest}"


def _draw_args(job: tuple) -> str:
    return _draw(*job)


def render_all(specs: dict[str, tuple], out_dir: Path) -> dict[str, str]:
    """SVG text per chart path: reused from ``out_dir`` when its data digest matches, else drawn."""
    return start(specs, out_dir)()


def start(specs: dict[str, tuple], out_dir: Path, pool: Executor | None = None) -> Callable[[], dict[str, str]]:
    """Begin drawing the charts that changed (``render_all``) on ``pool``, or on a pool of their own
    when there are many, or here; returns the function that waits for them and gives every SVG."""
    done, todo = {}, []
    for rel, (name, args) in sorted(specs.items()):
        digest = _digest(name, args)
        path = Path(out_dir) / rel
        if path.is_file():
            old = path.read_text(encoding="utf-8")
            m = _DIGEST.search(old[:400])
            if m and m.group(1) == digest:
                done[rel] = old
                continue
        todo.append((rel, (name, args, digest)))
    own = None
    if pool is None and len(todo) >= PARALLEL_MIN_CHARTS and (multiprocessing.cpu_count() or 1) > 1:
        from .processes import pool as worker_pool

        pool = own = worker_pool(min(multiprocessing.cpu_count(), 8), multiprocessing.get_context("spawn"))
    if pool is None or not todo:
        for rel, job in todo:
            done[rel] = _draw(*job)
        return lambda: done
    from .processes import stop_pool

    try:
        futures = [(rel, pool.submit(_draw_args, job)) for rel, job in todo]
    except BaseException:
        if own is not None:
            stop_pool(own)
        raise

    def wait() -> dict[str, str]:
        try:
            for rel, future in futures:
                done[rel] = future.result()
        except BaseException:
            if own is not None:
                stop_pool(own)
            raise
        if own is not None:
            own.shutdown()
        return done
    return wait
