"""transform.times.parse_ts: the usual spelling read by position gives what the general parse gives."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.transform.times import _any, parse_ts


def _both(texts: list[str | None]) -> pl.DataFrame:
    return pl.DataFrame({"ts": texts}, schema={"ts": pl.String}).with_columns(
        parse_ts(pl.col("ts")).alias("new"), _any(pl.col("ts")).alias("general"))


def test_known_times_and_texts_that_are_none():
    utc = timezone.utc
    got = _both(["2026-06-08T02:40:26.436Z", "2024-02-29T23:59:59.5Z", "2026-06-08T02:40:26Z",
                 "2000-02-29T00:00:00.000001Z", "2026-06-08T02:40:26.436+02:00", "2026-06-08 02:40:26",
                 "1780000000000", " 2026-06-08T02:40:26.436Z ", "2026-06-08T23:59:60.000Z",
                 "2026-02-30T01:02:03.123Z", "1900-02-29T00:00:00Z", "2026-06-08T24:00:00Z", "2026-13-01T00:00:00Z",
                 "2026-06-08T02:40:26.Z", "", "not a time", None])
    assert got["new"].to_list() == [
        datetime(2026, 6, 8, 2, 40, 26, 436000, utc), datetime(2024, 2, 29, 23, 59, 59, 500000, utc),
        datetime(2026, 6, 8, 2, 40, 26, tzinfo=utc), datetime(2000, 2, 29, 0, 0, 0, 1, utc),
        datetime(2026, 6, 8, 0, 40, 26, 436000, utc), datetime(2026, 6, 8, 2, 40, 26, tzinfo=utc),
        datetime(2026, 5, 28, 20, 26, 40, tzinfo=utc), datetime(2026, 6, 8, 2, 40, 26, 436000, utc),
        datetime(2026, 6, 9, tzinfo=utc),  # a leap second: the next minute, as the general parse reads it
        None, None, None, None, None, None, None, None]
    assert got["new"].to_list() == got["general"].to_list()



_DIGITS = st.text("0123456789", min_size=1, max_size=1)


@st.composite
def _nearly_usual(draw) -> str:
    """The usual spelling with any digits (invalid months, days, hours, leap years), 0-8 decimals, and now and
    then another ending, a space for the T, or white space around it."""
    def n(k: int, hi: int) -> str:
        return str(draw(st.integers(0, hi))).zfill(k)
    year = draw(st.sampled_from(["1900", "2000", "2024", "2026", "2100", "0000", "9999"]) | st.just(n(4, 9999)))
    text = f"{year}-{n(2, 14)}-{n(2, 32)}{draw(st.sampled_from(['T', 'T', 'T', ' ']))}{n(2, 25)}:{n(2, 61)}:{n(2, 61)}"
    decimals = draw(st.integers(0, 8))
    if decimals:
        text += "." + "".join(draw(_DIGITS) for _ in range(decimals))
    text += draw(st.sampled_from(["Z", "Z", "Z", "", "+00:00", "-05:30", "z"]))
    return draw(st.sampled_from(["", "", "", " "])) + text


@settings(max_examples=60, deadline=None)
@given(st.lists(_nearly_usual() | st.none() | st.text(max_size=30), min_size=1, max_size=300))
def test_every_text_is_read_as_the_general_parse_reads_it(texts):
    got = _both(texts)  # compared as microseconds: year 0 is no Python datetime
    assert got["new"].cast(pl.Int64).to_list() == got["general"].cast(pl.Int64).to_list()
