import json

from pipeline.extract.jsonl import ReadState, Record, Reject, iter_jsonl


def ev(i, text="x"):
    return json.dumps({"type": "user.message", "data": {"content": text}, "id": str(i)}, ensure_ascii=False)


def read(data: bytes, start=0, line=1):
    st = ReadState(0, 1)
    items = list(iter_jsonl(data, start, line, st))
    return [i for i in items if isinstance(i, Record)], [i for i in items if isinstance(i, Reject)], st


def test_u2028_inside_a_string_is_kept_and_does_not_split_the_line():
    data = (ev(1, "a\u2028b\u2029c") + "\n" + ev(2) + "\n").encode()
    recs, rej, st = read(data)
    assert [r.obj["data"]["content"] for r in recs] == ["a\u2028b\u2029c", "x"]
    assert rej == [] and st.good_offset == len(data)


def test_event_split_over_lines_by_literal_newlines_is_rejoined():
    broken = ev(1, "line1\nline2\nline3").replace("\\n", "\n")
    data = (broken + "\n" + ev(2) + "\n").encode()
    recs, rej, _ = read(data)
    assert [r.obj["data"]["content"] for r in recs] == ["line1\nline2\nline3", "x"]
    assert [r.line for r in recs] == [1, 4]
    assert rej == []


def test_truncated_event_glued_to_next_keeps_the_complete_one_and_rejects_the_fragment():
    data = ('{"type":"assistant.message","data":{"cont' + ev(2) + "\n" + ev(3) + "\n").encode()
    recs, rej, _ = read(data)
    assert [r.obj["id"] for r in recs] == ["2", "3"]
    assert len(rej) == 1 and rej[0].reason == "truncated event glued to the next event"
    assert rej[0].excerpt == '{"type":"assistant.message","data":{"cont'
    assert recs[0].offset == len(rej[0].excerpt)


def test_nul_tail_bom_and_invalid_utf8():
    bad = ev(2, "caf@").encode().replace(b"@", b"\xff")
    data = b"\xef\xbb\xbf" + ev(1).encode() + b"\n" + bad + b"\n" + b"\x00" * 1500
    recs, rej, st = read(data)
    assert [r.obj["id"] for r in recs] == ["1", "2"]
    assert recs[1].obj["data"]["content"] == "caf\ufffd"
    assert rej == [] and not st.pending_tail


def test_unterminated_last_line_is_pending_not_rejected_and_resumes():
    full = (ev(1) + "\n" + ev(2) + "\n").encode()
    partial = full[: len(ev(1)) + 1 + 10]
    recs, rej, st = read(partial)
    assert [r.obj["id"] for r in recs] == ["1"] and rej == []
    assert st.pending_tail and st.good_offset == len(ev(1)) + 1 and st.good_line == 2
    recs2, rej2, st2 = read(full, st.good_offset, st.good_line)
    assert [(r.obj["id"], r.line) for r in recs2] == [("2", 2)] and rej2 == []
    assert st2.good_offset == len(full)


def test_garbage_line_is_rejected_with_position_and_the_rest_is_read():
    data = (ev(1) + "\n" + "not json at all" + "\n" + ev(3) + "\n").encode()
    recs, rej, _ = read(data)
    assert [r.obj["id"] for r in recs] == ["1", "3"]
    assert [(r.line, r.offset, r.reason, r.excerpt) for r in rej] == [
        (2, len(ev(1)) + 1, "line is not valid JSON", "not json at all")]


def test_json_that_is_not_an_object_is_rejected():
    recs, rej, _ = read(b"[1, 2]\n" + ev(2).encode() + b"\n")
    assert len(recs) == 1 and rej[0].reason == "line is JSON but not an object"


def test_reading_from_a_base_offset_reports_file_offsets():
    full = (ev(1) + "\n" + ev(2) + "\n" + "garbage\n").encode()
    base = len(ev(1)) + 1
    st = ReadState(0, 1)
    items = list(iter_jsonl(full[base:], 0, 2, st, base=base))
    assert [(type(i).__name__, i.line, i.offset) for i in items] == [
        ("Record", 2, base), ("Reject", 3, base + len(ev(2)) + 1)]
    assert st.good_offset == len(full) and st.good_line == 4
