"""Row groups of Parquet files joined into one file as they are stored, without decoding them.

A Parquet file is ``PAR1``, its row groups' column chunks, then its footer (Thrift's compact protocol) that
says where each chunk is. ``join`` copies each chosen row group's bytes and writes a footer whose row groups
are the sources' with their offsets moved. Only what this project writes is joined: files of the same schema
and footer metadata, without page indexes, bloom filters or encryption, each row group's chunks side by side;
anything else answers False and the caller writes the rows itself (pyarrow can only write rows it decoded:
an export copying 4.6 GB of unchanged text through it spent 8.7 s decoding and encoding them).

The footer is read into a generic tree - each struct a list of (field id, type, value) - and written back from
it, so fields this module does not know are kept as they were.
"""

from __future__ import annotations

import struct
from pathlib import Path

MAGIC = b"PAR1"
FOOTER_MAX = 64 * 1024 * 1024  # a footer longer than this is not one this project wrote

# compact protocol types
TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)

# FileMetaData, RowGroup, ColumnChunk and ColumnMetaData fields (parquet.thrift)
FILE_SCHEMA, FILE_NUM_ROWS, FILE_ROW_GROUPS, FILE_KV, FILE_ENCRYPTION, FILE_SIGNING_KEY = 2, 3, 4, 5, 8, 9
RG_COLUMNS, RG_FILE_OFFSET, RG_ORDINAL = 1, 5, 7
CC_FILE_PATH, CC_FILE_OFFSET, CC_META = 1, 2, 3
CC_UNSUPPORTED = (4, 5, 6, 7, 8, 9)  # page indexes, encryption
CM_TOTAL_COMPRESSED, CM_DATA_PAGE, CM_INDEX_PAGE, CM_DICTIONARY_PAGE, CM_BLOOM = 7, 9, 10, 11, 14


# what is decoded of a footer (field id -> the spec of its structs): the row groups, their column chunks and the
# chunks' metadata, where the offsets are; the rest (schema, statistics, ...) is kept as its bytes
FILE_SPEC = {FILE_ROW_GROUPS: {RG_COLUMNS: {CC_META: {}}}}


class _Unsupported(Exception):
    """A file this module does not join."""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise _Unsupported("the footer ends early")
        b = self.data[self.at]
        self.at += 1
        return b

    def varint(self) -> int:
        shift = out = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 70:
                raise _Unsupported("a varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def sized(self, n: int) -> int:
        """A collection's size, when what is left of the footer can hold it (each element takes a byte or more)."""
        if n > len(self.data) - self.at:
            raise _Unsupported("a collection larger than the footer")
        return n

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise _Unsupported("a value past the footer's end")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def skip(self, kind: int, depth: int) -> None:
        """Past a value not needed (kept as its bytes: ``Raw``)."""
        if depth > 64:
            raise _Unsupported("nested too deep")
        if kind in (TRUE, FALSE, BYTE):
            self.at += 1
        elif kind in (I16, I32, I64):
            self.varint()
        elif kind == DOUBLE:
            self.at += 8
        elif kind == BINARY:
            n = self.varint()  # not ``self.at += self.varint()``: that adds to the position before the length
            self.at += n
        elif kind in (LIST, SET):
            head = self.byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self.sized(self.varint())
            for _ in range(size):
                self.skip(elem, depth + 1)
        elif kind == MAP:
            size = self.sized(self.varint())
            types = self.byte() if size else 0
            for _ in range(size):
                self.skip(types >> 4, depth + 1)
                self.skip(types & 0x0F, depth + 1)
        elif kind == STRUCT:
            while True:
                head = self.byte()
                if head == 0:
                    break
                if not head >> 4:
                    self.zigzag()
                if head & 0x0F not in (TRUE, FALSE):
                    self.skip(head & 0x0F, depth + 1)
        else:
            raise _Unsupported(f"a value of type {kind}")
        if self.at > len(self.data):
            raise _Unsupported("a value past the footer's end")

    def value(self, kind: int, depth: int, spec: dict | None = None) -> object:
        if depth > 64:
            raise _Unsupported("nested too deep")
        if kind in (TRUE, FALSE):  # in a collection: one byte
            return self.byte()
        if kind == BYTE:
            return self.byte()
        if kind in (I16, I32, I64):
            return self.zigzag()
        if kind == DOUBLE:
            return self.take(8)
        if kind == BINARY:
            return self.take(self.varint())
        if kind in (LIST, SET):
            head = self.byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self.sized(self.varint())
            return elem, [self.value(elem, depth + 1, spec) for _ in range(size)]
        if kind == MAP:
            size = self.sized(self.varint())
            types = self.byte() if size else 0
            return types, [(self.value(types >> 4, depth + 1), self.value(types & 0x0F, depth + 1))
                           for _ in range(size)]
        if kind == STRUCT:
            return self.struct(depth + 1, spec or {})
        raise _Unsupported(f"a value of type {kind}")

    def struct(self, depth: int = 0, spec: dict | None = None) -> list[list]:
        """A struct's fields as [field id, type, value]: the scalars decoded, and the nested values ``spec``
        names (field id -> the spec of its structs); any other nested value kept as its bytes (``Raw``)."""
        fields, last, spec = [], 0, spec or {}
        while True:
            head = self.byte()
            if head == 0:
                return fields
            delta, kind = head >> 4, head & 0x0F
            fid = last + delta if delta else self.zigzag()
            if kind in (TRUE, FALSE):
                value = None
            elif kind in (BINARY, LIST, SET, MAP, STRUCT) and fid not in spec:
                start = self.at
                self.skip(kind, depth)
                value = Raw(self.data[start:self.at])
            else:
                value = self.value(kind, depth, spec.get(fid))
            fields.append([fid, kind, value])
            last = fid


class Raw(bytes):
    """A value's encoded bytes, written back as they are."""


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def varint(self, n: int) -> None:
        while True:
            if n < 0x80:
                self.out.append(n)
                return
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7

    def zigzag(self, n: int) -> None:
        self.varint((n << 1) ^ (n >> 63))

    def value(self, kind: int, value: object) -> None:
        if isinstance(value, Raw):
            self.out += value
        elif kind in (TRUE, FALSE, BYTE):
            self.out.append(value)
        elif kind in (I16, I32, I64):
            self.zigzag(value)
        elif kind == DOUBLE:
            self.out += value
        elif kind == BINARY:
            self.varint(len(value))
            self.out += value
        elif kind in (LIST, SET):
            elem, items = value
            if len(items) < 15:
                self.out.append(len(items) << 4 | elem)
            else:
                self.out.append(0xF0 | elem)
                self.varint(len(items))
            for item in items:
                self.value(elem, item)
        elif kind == MAP:
            types, items = value
            self.varint(len(items))
            if items:
                self.out.append(types)
            for k, v in items:
                self.value(types >> 4, k)
                self.value(types & 0x0F, v)
        else:  # STRUCT
            self.struct(value)

    def struct(self, fields: list[list]) -> None:
        last = 0
        for fid, kind, value in fields:
            if 0 < fid - last <= 15:
                self.out.append((fid - last) << 4 | kind)
            else:
                self.out.append(kind)
                self.zigzag(fid)
            if kind not in (TRUE, FALSE):
                self.value(kind, value)
            last = fid
        self.out.append(0)


def _field(fields: list[list], fid: int) -> list | None:
    return next((f for f in fields if f[0] == fid), None)


def _footer(path: Path) -> tuple[list[list], int]:
    """The footer of ``path`` as a tree, and the file's size."""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        if size < 12:
            raise _Unsupported("too short")
        fh.seek(0)
        if fh.read(4) != MAGIC:
            raise _Unsupported("not Parquet")
        fh.seek(size - 8)
        tail = fh.read(8)
        length = struct.unpack("<I", tail[:4])[0]
        if tail[4:] != MAGIC or length > min(FOOTER_MAX, size - 12):
            raise _Unsupported("not Parquet, or encrypted")
        fh.seek(size - 8 - length)
        reader = _Reader(fh.read(length))
    tree = reader.struct(0, FILE_SPEC)
    if reader.at != length:
        raise _Unsupported("bytes after the footer")
    return tree, size - 8 - length


def _row_groups(tree: list[list]) -> list[list[list]]:
    f = _field(tree, FILE_ROW_GROUPS)
    if f is None or f[1] != LIST or f[2][0] != STRUCT:
        raise _Unsupported("no row groups")
    return f[2][1]


def _span(group: list[list], end_of_data: int) -> tuple[int, int]:
    """Where a row group's column chunks lie in its file: [start, end), checked to be side by side."""
    columns = _field(group, RG_COLUMNS)
    if columns is None or columns[1] != LIST or not columns[2][1]:
        raise _Unsupported("a row group without columns")
    spans = []
    for chunk in columns[2][1]:
        if any(_field(chunk, fid) is not None for fid in (CC_FILE_PATH, *CC_UNSUPPORTED)):
            raise _Unsupported("a column chunk in another file, with page indexes or encrypted")
        meta = _field(chunk, CC_META)
        if meta is None or meta[1] != STRUCT:
            raise _Unsupported("a column chunk without metadata")
        values = {f[0]: f[2] for f in meta[2]}
        if CM_BLOOM in values or CM_INDEX_PAGE in values:
            raise _Unsupported("a bloom filter or an index page")
        start = min(v for v in (values.get(CM_DICTIONARY_PAGE), values.get(CM_DATA_PAGE)) if v is not None)
        spans.append((start, start + values[CM_TOTAL_COMPRESSED]))
    spans.sort()
    if any(a[1] != b[0] for a, b in zip(spans, spans[1:], strict=False)):
        raise _Unsupported("column chunks apart")
    if spans[0][0] < len(MAGIC) or spans[-1][1] > end_of_data:
        raise _Unsupported("a column chunk outside the file's data")
    return spans[0][0], spans[-1][1]


def _moved(group: list[list], by: int, ordinal: int) -> list[list]:
    """A copy of a row group's footer entry with every offset moved ``by`` bytes, as row group ``ordinal``."""
    out = []
    for fid, kind, value in group:
        if fid == RG_COLUMNS:
            chunks = []
            for chunk in value[1]:
                moved = []
                for cfid, ckind, cvalue in chunk:
                    if cfid == CC_FILE_OFFSET and cvalue:  # 0: not set (writers leave the deprecated field so)
                        cvalue += by
                    elif cfid == CC_META:
                        cvalue = [[m, k, v + by if m in (CM_DATA_PAGE, CM_DICTIONARY_PAGE) else v]
                                  for m, k, v in cvalue]
                    moved.append([cfid, ckind, cvalue])
                chunks.append(moved)
            value = (value[0], chunks)
        elif fid == RG_FILE_OFFSET and value:
            value += by
        elif fid == RG_ORDINAL:
            if ordinal > 32767:
                continue  # an i16: left out past it (it is optional)
            value = ordinal
        out.append([fid, kind, value])
    return out


def join(parts: list[tuple[Path, int]], out: Path) -> bool:
    """Write to ``out`` the row groups ``parts`` names - (file, row group index) each, in order - as one Parquet
    file, copying their bytes. False (and ``out`` not written) when the files are not ones this joins: of
    another schema or footer metadata than each other, or stored in a way this does not follow."""
    try:
        footers = {path: _footer(path) for path in dict.fromkeys(p for p, _i in parts)}
        if not footers:
            raise _Unsupported("nothing to join")
        base = next(iter(footers.values()))[0]
        same = [f for f in base if f[0] not in (FILE_NUM_ROWS, FILE_ROW_GROUPS)]
        for tree, _end in footers.values():
            if any(_field(tree, fid) is not None for fid in (FILE_ENCRYPTION, FILE_SIGNING_KEY)):
                raise _Unsupported("encrypted")
            if [f for f in tree if f[0] not in (FILE_NUM_ROWS, FILE_ROW_GROUPS)] != same:
                raise _Unsupported("files of other schemas or metadata")
        groups, copies, at, rows = [], [], len(MAGIC), 0
        for path, i in parts:
            tree, end = footers[path]
            entries = _row_groups(tree)
            if not 0 <= i < len(entries):
                raise _Unsupported("no such row group")
            start, stop = _span(entries[i], end)
            groups.append(_moved(entries[i], at - start, len(groups)))
            copies.append((path, start, stop))
            at += stop - start
            rows += _field(entries[i], 3)[2]
    except (_Unsupported, KeyError, TypeError, ValueError, IndexError, OSError):
        return False
    tree = []
    for fid, kind, value in base:
        if fid == FILE_NUM_ROWS:
            value = rows
        elif fid == FILE_ROW_GROUPS:
            value = (STRUCT, groups)
        tree.append([fid, kind, value])
    writer = _Writer()
    writer.struct(tree)
    with open(out, "wb") as fh:
        fh.write(MAGIC)
        handles = {}
        try:
            for path, start, stop in copies:
                src = handles.get(path) or handles.setdefault(path, open(path, "rb"))  # noqa: SIM115
                src.seek(start)
                left = stop - start
                while left:
                    block = src.read(min(left, 8 * 1024 * 1024))
                    if not block:
                        raise OSError(f"{path} is shorter than its footer says")
                    fh.write(block)
                    left -= len(block)
        finally:
            for src in handles.values():
                src.close()
        fh.write(writer.out)
        fh.write(struct.pack("<I", len(writer.out)))
        fh.write(MAGIC)
    return True
