"""Offline model prices, for an estimated cost where Copilot logged none.

Prices come from the snapshot bundled with the pinned ``genai-prices`` package (its
``github-copilot`` provider records GitHub's published per-model rates; nothing is downloaded at
run time). A model that provider does not list is priced at its maker's API rate (Anthropic,
OpenAI, Google, xAI), which is what GitHub says Copilot charges. A model it lists without a rate
(one included in the plan) or found nowhere has no price: its cost is unknown, never guessed.

Copilot bills in AI credits: 1 credit = $0.01, and the logs count nano-AIU (1e9 per credit). A
request costs fresh input (``input - cache_read - cache_write``: Copilot's ``inputTokens`` includes
both cache figures) at the input rate, cache reads and writes at theirs and output at the output
rate; requests routed by auto model selection cost 10% less. This reproduces the logged
``totalNanoAiu`` exactly on the real logs that have both (see tests/test_usage.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from functools import cache, lru_cache

NANO_PER_CREDIT = 1_000_000_000
USD_PER_CREDIT = Decimal("0.01")
CREDIT_PLACES = Decimal("1e-9")  # one nano-AIU
USD_PLACES = Decimal("1e-11")
AUTO_DISCOUNT = Decimal("0.9")  # auto model selection: 10% off for paid plans (GitHub changelog 2026-07-01)
COPILOT_PROVIDER = "github-copilot"
_MAKERS = (("claude", "anthropic"), ("gpt", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"),
           ("gemini", "google"), ("grok", "x-ai"))


@dataclass(frozen=True)
class Rates:
    """USD per million tokens; ``ref`` names where the rates come from."""

    input: Decimal
    cache_read: Decimal
    cache_write: Decimal
    output: Decimal
    ref: str
    auto_discount: bool = True  # whether auto model selection takes 10% off this model


    def usd(self, input_tokens: int, output_tokens: int, cache_read: int | None, cache_write: int | None,
            auto: bool = False) -> Decimal:
        cr, cw = cache_read or 0, cache_write or 0
        fresh = max(input_tokens - cr - cw, 0)
        total = (fresh * self.input + cr * self.cache_read + cw * self.cache_write
                 + output_tokens * self.output) / Decimal(1_000_000)
        return total * AUTO_DISCOUNT if auto and self.auto_discount else total


# Where the bundled table disagrees with what Copilot logged, the logs win: rates that reproduce the
# logged nano-AIU exactly (tests/test_usage.py checks every real log with both). GPT-5.6 sol: 5 / 0.50 /
# 6.25 / 30 USD per million (the table says 4 / 0.40 / 5 / 20; real-samples-new mitchwindoo 0b06248b).
CORRECTIONS = {
    "gpt-5.6-sol": (Decimal("5"), Decimal("0.5"), Decimal("6.25"), Decimal("30")),
}
# models auto selection routes to at their full rate (the logs of real-samples-new jasonyannn 9f89aa39)
NO_AUTO_DISCOUNT = frozenset({"mai-code-1.1-flash"})


@cache
def version() -> str:
    """The genai-prices version: read once (importlib.metadata parses the package's METADATA file on
    each call, ~3 ms: it was 60% of the star build of the 1 GB `events` corpus, once per model and day)."""
    from importlib.metadata import version as _version

    return _version("genai-prices")


@lru_cache(maxsize=16384)  # one entry per model and day in use: a few thousand in years of history
def rates(model: str | None, day: date | None = None) -> Rates | None:
    """The base-tier rates of ``model`` on ``day`` (today when None), or None when no table prices it.

    Long-context tiers apply per request; figures summed over many requests cannot say which
    requests crossed a tier, so the base tier is used (documented as part of the estimate).
    """
    if not model:
        return None
    from genai_prices import data_snapshot
    from genai_prices.types import TieredPrices

    snapshot = data_snapshot.get_snapshot()
    ref = model.strip().lower().removeprefix("copilot/")
    discount = ref not in NO_AUTO_DISCOUNT
    if ref in CORRECTIONS:
        inp, cread, cwrite, out = CORRECTIONS[ref]
        return Rates(inp, cread, cwrite, out, f"Copilot's logged cost ({ref})", discount)
    when = datetime.combine(day, datetime.min.time(), tzinfo=timezone.utc) if day else datetime.now(timezone.utc)
    providers = [COPILOT_PROVIDER] + [p for prefix, p in _MAKERS if ref.startswith(prefix)]
    for provider_id in providers:
        try:
            provider, info = snapshot.find_provider_model(ref, None, provider_id, None)
        except LookupError:
            continue
        price = info.get_prices(when)

        def base(v: object):
            return v.base if isinstance(v, TieredPrices) else v

        inp, out = base(getattr(price, "input_mtok", None)), base(getattr(price, "output_mtok", None))
        if inp is None or out is None:
            return None  # listed without a token price (a model included in the plan, e.g. gpt-4o): unknown
        cache_read = base(getattr(price, "cache_read_mtok", None))
        cache_write = base(getattr(price, "cache_write_mtok", None))
        return Rates(Decimal(inp), Decimal(cache_read if cache_read is not None else inp),
                     Decimal(cache_write if cache_write is not None else inp), Decimal(out),
                     f"genai-prices {version()} {provider.id}/{info.id}", discount)
    return None
