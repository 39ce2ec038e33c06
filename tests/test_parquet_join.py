"""pipeline.parquet_join: row groups of Parquet files joined as they are stored."""

from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import parquet_join


def _table(seed: int, n: int = 50) -> pa.Table:
    rng = random.Random(seed)
    return pa.table({
        "id": pa.array([f"s{seed}-{i:04d}" for i in range(n)]),
        "n": pa.array([rng.randrange(-10**12, 10**12) if i % 7 else None for i in range(n)], pa.int64()),
        "text": pa.array([("ünïcode " * rng.randrange(0, 40)) + str(i) for i in range(n)]),
        "ok": pa.array([i % 3 == 0 for i in range(n)]),
        "at": pa.array([1_700_000_000_000_000 + i for i in range(n)], pa.timestamp("us", tz="UTC")),
        "x": pa.array([rng.random() for _ in range(n)]),
    })


def _write(path, tables, **options):
    with pq.ParquetWriter(path, tables[0].schema, compression="zstd", **options) as w:
        for t in tables:
            w.write_table(t, row_group_size=len(t))


def _rows(path):
    con = duckdb.connect()
    con.execute("set TimeZone = 'UTC'")
    return con.execute(f"select * from '{path}'").fetchall()


def test_row_groups_of_two_files_joined_in_any_order_hold_their_rows(tmp_path):
    a, b = [_table(i) for i in range(3)], [_table(10 + i, 30 + i) for i in range(2)]
    _write(tmp_path / "a.parquet", a)
    _write(tmp_path / "b.parquet", b)
    order = [(tmp_path / "b.parquet", 1), (tmp_path / "a.parquet", 2), (tmp_path / "a.parquet", 0),
             (tmp_path / "b.parquet", 0), (tmp_path / "a.parquet", 2)]
    assert parquet_join.join(order, tmp_path / "out.parquet")
    want = pa.concat_tables([b[1], a[2], a[0], b[0], a[2]])
    got = pq.read_table(tmp_path / "out.parquet")
    assert got.equals(want)
    meta = pq.read_metadata(tmp_path / "out.parquet")
    assert meta.num_rows == len(want) and meta.num_row_groups == len(order)
    assert len(_rows(tmp_path / "out.parquet")) == len(want)  # DuckDB reads it too
    # statistics moved with their row groups: a filter DuckDB answers from them still finds the rows
    con = duckdb.connect()
    assert con.execute(f"select count(*) from '{tmp_path / 'out.parquet'}' where id like 's11-%'").fetchone()[0] == 31


def test_a_file_joined_in_its_own_order_is_the_same_bytes(tmp_path):
    _write(tmp_path / "a.parquet", [_table(i) for i in range(4)])
    n = pq.read_metadata(tmp_path / "a.parquet").num_row_groups
    assert parquet_join.join([(tmp_path / "a.parquet", i) for i in range(n)], tmp_path / "out.parquet")
    assert (tmp_path / "out.parquet").read_bytes() == (tmp_path / "a.parquet").read_bytes()


@pytest.mark.parametrize("options", [{"write_page_index": True}, {"write_statistics": False}, "schema", "missing",
                                     "garbled", "short", "not parquet"])
def test_files_it_does_not_join_answer_false_and_write_nothing(tmp_path, options):
    _write(tmp_path / "a.parquet", [_table(1)])
    other = tmp_path / "b.parquet"
    if isinstance(options, dict):
        _write(other, [_table(2)], **options)
    elif options == "schema":
        _write(other, [_table(2).drop_columns(["x"])])
    elif options == "garbled":
        _write(other, [_table(2)])
        data = bytearray(other.read_bytes())
        n = int.from_bytes(data[-8:-4], "little")
        for i in range(len(data) - 8 - n, len(data) - 8, 7):
            data[i] ^= 0x5A
        other.write_bytes(bytes(data))
    elif options == "short":
        other.write_bytes(b"PAR1PAR1")
    elif options == "not parquet":
        other.write_bytes(b"x" * 100)
    joined = parquet_join.join([(tmp_path / "a.parquet", 0), (other, 0)], tmp_path / "out.parquet")
    if options == {"write_statistics": False}:  # other metadata of the same schema: statistics are per chunk
        assert not joined or pq.read_table(tmp_path / "out.parquet").num_rows == 100
        return
    assert not joined and not (tmp_path / "out.parquet").exists()


def test_every_truncation_and_flipped_byte_of_a_footer_is_refused_or_read(tmp_path):
    """A damaged footer never raises: join answers False, or writes a file (a flip inside a value it copies)."""
    _write(tmp_path / "a.parquet", [_table(1, 5)])
    data = (tmp_path / "a.parquet").read_bytes()
    n = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - n
    rng = random.Random(7)
    for k in range(300):
        damaged = bytearray(data)
        i = start + rng.randrange(n)
        damaged[i] = rng.randrange(256)
        if k % 3 == 0:  # or the footer cut short, with its length said
            cut = rng.randrange(1, n)
            damaged = damaged[:start + cut] + len(damaged[start:start + cut]).to_bytes(4, "little") + b"PAR1"
        path = tmp_path / f"d{k}.parquet"
        path.write_bytes(bytes(damaged))
        parquet_join.join([(path, 0)], tmp_path / f"o{k}.parquet")  # must not raise


def test_a_footer_saying_a_huge_list_is_refused_at_once(tmp_path):
    # a list of 2**60 one-byte elements in a footer of a few bytes: refused, not walked
    varint = bytearray()  # field 1, a list of BYTE, its size a varint
    n = 2**60
    while n >= 0x80:
        varint.append((n & 0x7F) | 0x80)
        n >>= 7
    varint.append(n)
    footer = bytes([0x19, 0xF3]) + bytes(varint) + b"\x00"
    path = tmp_path / "huge.parquet"
    path.write_bytes(b"PAR1" + footer + len(footer).to_bytes(4, "little") + b"PAR1")
    assert not parquet_join.join([(path, 0)], tmp_path / "out.parquet")
